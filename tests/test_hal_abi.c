/* test_hal_abi.c — the HAL's ABI number is load-bearing (hal/hal.c, hal_impl.h): a member added
 * after ABI 1 is called only for a backend table written against an ABI that has it, otherwise the
 * wrapper takes the member's fallback; an ABI this build does not know, or a table missing a member
 * its ABI requires, is refused with E-INTERNAL naming the numbers.
 *
 * The backend here is a stub: one device, the required members present (those the test never
 * reaches are a function that is never called), and the optional members record their calls. */
#include "hal_impl.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_trim, n_host_alloc, n_host_free, n_pinned;

static void never(void) { abort(); }
static int one_device(void *ctx) { (void)ctx; return 1; }
static qm_code info(void *ctx, int dev, qm_hal_device_info *out, qm_status *st)
{
    (void)ctx, (void)dev, (void)st;
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "t0");
    snprintf(out->name, sizeof out->name, "abi test");
    out->memory_bytes = out->usable_bytes = 1 << 20;
    out->numa = -1;
    return QM_OK;
}
static bool no_peer(void *ctx, int a, int b) { (void)ctx, (void)a, (void)b; return false; }
static void destroy(void *ctx) { (void)ctx; }
static void trim(void *ctx) { (void)ctx; n_trim++; }
static qm_code host_alloc(void *ctx, uint64_t bytes, void **out, qm_status *st)
{
    (void)ctx, (void)st;
    n_host_alloc++;
    *out = malloc((size_t)bytes);
    return QM_OK;
}
static void host_free(void *ctx, void *p) { (void)ctx; n_host_free++; free(p); }
static bool pinned(void *ctx, const void *p) { (void)ctx, (void)p; n_pinned++; return false; }

#define NEVER(m) .m = (__typeof__(((qm_hal_ops *)0)->m))never

static qm_hal_ops table(int abi)
{
    return (qm_hal_ops){
        .kind = QM_HAL_SIM, .abi = abi, .device_count = one_device, .device_info = info,
        .peer = no_peer, .destroy = destroy, NEVER(buf_alloc), NEVER(buf_free), NEVER(copy_h2d),
        NEVER(copy_d2h), NEVER(copy_d2d), NEVER(stash), NEVER(sumsq), NEVER(scan),
        NEVER(amp_scale), NEVER(amp_batch), NEVER(sumsq_dev), .trim = trim,
        .host_alloc = host_alloc, .host_free = host_free, .host_is_pinned = pinned};
}

/* Trim, host memory and the fused-batch query through the wrappers; how many members ran. */
static int exercise(const qm_hal_ops *ops)
{
    qm_status st;
    qm_hal *hal = NULL;
    n_trim = n_host_alloc = n_host_free = n_pinned = 0;
    CHECK_OK(qm_hal_create(ops, NULL, &hal, &st));
    if (!hal)
        return -1;
    const bool batch = qm_hal_has_amp_batch(hal);
    qm_hal_trim(hal);
    void *p = NULL;
    CHECK_OK(qm_hal_host_alloc(hal, 64, &p, &st));
    const bool is_pinned = qm_hal_host_is_pinned(hal, p);
    qm_hal_host_free(hal, p);
    qm_hal_destroy(hal);
    /* the fallbacks: no fused batch, no trim, plain malloc that counts as pinned (nothing to pin) */
    CHECK(batch == (ops->abi >= 2));
    CHECK(is_pinned == (ops->abi < 2));
    return n_trim + n_host_alloc + n_host_free + n_pinned;
}

int main(void)
{
    qm_hal_ops t1 = table(1), t2 = table(2), t3 = table(3), t4 = table(4);
    /* ABI 1 predates every optional member this stub has: none is called */
    CHECK(exercise(&t1) == 0);
    /* ABI 2 adds host memory and amp_batch; trim is ABI 3 */
    CHECK(exercise(&t2) == 3);
    CHECK_EQ_U64(n_trim, 0);
    CHECK(exercise(&t3) == 4);
    CHECK_EQ_U64(n_trim, 1);
    CHECK(exercise(&t4) == 4);

    qm_status st;
    qm_hal *hal = (qm_hal *)&st;
    qm_hal_ops t5 = table(QM_HAL_ABI + 1);
    CHECK(qm_hal_create(&t5, NULL, &hal, &st) == QM_E_INTERNAL);
    CHECK(hal == NULL);
    char want[200];
    snprintf(want, sizeof want, "hal: backend 'sim' was written against HAL ABI %d but this build "
             "knows 1 to %d", QM_HAL_ABI + 1, QM_HAL_ABI);
    CHECK_STR(st.msg, want);
    qm_hal_ops t0 = table(0);
    CHECK(qm_hal_create(&t0, NULL, &hal, &st) == QM_E_INTERNAL);
    /* ABI 4 requires sumsq_dev; ABI 3 does not */
    t4.sumsq_dev = NULL;
    CHECK(qm_hal_create(&t4, NULL, &hal, &st) == QM_E_INTERNAL);
    CHECK_STR(st.msg, "hal: backend 'sim' ops table is incomplete (abi 4, this build 4)");
    t3.sumsq_dev = NULL;
    CHECK_OK(qm_hal_create(&t3, NULL, &hal, &st));
    qm_hal_destroy(hal);
    return qm_test_end("test_hal_abi");
}
