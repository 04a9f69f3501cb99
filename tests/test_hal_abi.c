/* test_hal_abi.c — the HAL's ABI number is load-bearing (hal/hal.c, hal_impl.h): qm_hal_create
 * refuses a table written against a layout it does not take (ABI 1 to 4, the flat table of one
 * member per kernel; 0; newer than this build), each with its own E-INTERNAL message naming the
 * numbers, and a table missing a member its ABI requires; an optional member left NULL is never
 * called and the wrapper takes its documented fallback; an op the backend does not support is
 * answered E-UNSUPPORTED without reaching launch.
 *
 * The backend here is a stub: one device with malloc'd buffers, the required members present
 * (those the test never reaches abort), and the optional members record their calls. */
#include "hal_impl.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_trim, n_host_alloc, n_host_free, n_pinned, n_launch;
static qm_hal_op last_op;
static const void *last_state;

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
static qm_code buf_alloc(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                         qm_status *st)
{
    (void)ctx, (void)dev, (void)st;
    *ptr = *host_ptr = calloc(1, (size_t)bytes);
    return QM_OK;
}
static void buf_free(void *ctx, int dev, void *ptr, uint64_t bytes)
{
    (void)ctx, (void)dev, (void)bytes;
    free(ptr);
}
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
/* scan only */
static bool scan_only(void *ctx, qm_hal_op op) { (void)ctx; return op == QM_HAL_OP_AMP_SCAN; }
static qm_code launch(void *ctx, int dev, qm_hal_op op, const void *params,
                      void *const bufs[QM_HAL_OP_BUFS], void *s, qm_status *st)
{
    (void)ctx, (void)dev, (void)s, (void)st;
    n_launch++;
    last_op = op;
    last_state = bufs[QM_HAL_OP_BUF_STATE];
    const qm_hal_scan_args *a = params;
    a->out->max_abs = 42.0;
    return QM_OK;
}

#define NEVER(m) .m = (__typeof__(((qm_hal_stream_ops *)0)->m))never

static qm_hal_ops table(int abi, bool optional);
static int n_wrap_device;
static qm_code wrap_device(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                           qm_status *st)
{
    (void)ctx, (void)dev, (void)bytes, (void)st;
    n_wrap_device++;
    *out = (void *)(uintptr_t)ptr;
    return QM_OK;
}

/* wrap_device was appended in ABI 6: a table written against ABI 5 never has it called, even when
 * the member is set (its memory could be anything an ABI-5 backend put there), and wrap_device
 * answers E-UNSUPPORTED as for a backend without it; from ABI 6 on it is called. */
static void check_wrap_device(void)
{
    qm_status st;
    double x[4] = {0};
    for (int abi = 5; abi <= 6; ++abi) {
        qm_hal_ops t = table(abi, true);
        t.device.wrap_device = wrap_device;
        qm_hal *hal = NULL;
        qm_hal_buf *w = NULL;
        n_wrap_device = 0;
        CHECK_OK(qm_hal_create(&t, NULL, &hal, &st));
        if (!hal)
            return;
        const qm_code rc = qm_hal_buf_wrap_device(hal, 0, x, sizeof x, &w, &st);
        if (abi == 5) {
            CHECK(rc == QM_E_UNSUPPORTED && w == NULL && n_wrap_device == 0);
            CHECK_STR(st.msg, "wrap_device on t0: the sim backend cannot read device memory in "
                              "place");
        } else {
            CHECK(rc == QM_OK && w != NULL && n_wrap_device == 1);
            CHECK(qm_hal_buf_raw(w) == (void *)x && qm_hal_buf_bytes(w) == sizeof x);
            CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0); /* a wrapper is not an allocation */
        }
        qm_hal_buf_free(hal, w);
        qm_hal_destroy(hal);
    }
}

/* A complete ABI `abi` table; `optional`: with the optional members this stub has. */
static qm_hal_ops table(int abi, bool optional)
{
    qm_hal_ops t = {
        .kind = QM_HAL_SIM, .abi = abi, .destroy = destroy,
        .device = {.count = one_device, .info = info, .peer = no_peer, .buf_alloc = buf_alloc,
                   .buf_free = buf_free},
        .stream = {NEVER(copy_h2d), NEVER(copy_d2h), NEVER(copy_d2d)},
        .kernel = {.supports_op = scan_only, .launch = launch}};
    if (optional) {
        t.device.trim = trim;
        t.device.host_alloc = host_alloc;
        t.device.host_free = host_free;
        t.device.host_is_pinned = pinned;
    }
    return t;
}

/* Trim, host memory, an event, a stream, a supported and an unsupported op through the wrappers;
 * how many optional members ran. */
static int exercise(const qm_hal_ops *ops)
{
    qm_status st;
    qm_hal *hal = NULL;
    n_trim = n_host_alloc = n_host_free = n_pinned = n_launch = 0;
    CHECK_OK(qm_hal_create(ops, NULL, &hal, &st));
    if (!hal)
        return -1;
    qm_hal_trim(hal);
    void *p = NULL;
    CHECK_OK(qm_hal_host_alloc(hal, 64, &p, &st));
    const bool is_pinned = qm_hal_host_is_pinned(hal, p);
    qm_hal_host_free(hal, p);
    /* no stream or event members: NULL streams, events are no-ops */
    qm_hal_stream *s = NULL;
    qm_hal_event *ev = NULL;
    CHECK_OK(qm_hal_stream_create(hal, 0, &s, &st));
    CHECK_OK(qm_hal_event_create(hal, 0, &ev, &st));
    CHECK_OK(qm_hal_event_record(hal, ev, s, &st));
    CHECK_OK(qm_hal_stream_wait(hal, s, ev, &st));
    CHECK_OK(qm_hal_event_sync(hal, ev, &st));
    CHECK_OK(qm_hal_stream_sync(hal, s, &st));
    qm_hal_event_destroy(hal, ev);
    qm_hal_stream_destroy(hal, s);
    /* no wrap_host: E-UNSUPPORTED */
    qm_hal_buf *w = NULL;
    CHECK(qm_hal_buf_wrap_host(hal, 0, &p, 8, &w, &st) == QM_E_UNSUPPORTED);
    CHECK_STR(st.msg, "wrap_host on t0: the sim backend cannot read host memory in place");
    /* the op the stub supports reaches launch with its buffer; the others never do */
    CHECK(qm_hal_supports_op(hal, QM_HAL_OP_AMP_SCAN));
    CHECK(!qm_hal_supports_op(hal, QM_HAL_OP_AMP_BATCH));
    CHECK(!qm_hal_supports_op(hal, QM_HAL_OP_COUNT_));
    CHECK(!qm_hal_supports_op(hal, (qm_hal_op)0));
    CHECK(!qm_hal_supports_op(NULL, QM_HAL_OP_AMP_SCAN));
    qm_hal_buf *b = NULL;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 64 * 16, &b, &st));
    qm_hal_scan_result r;
    CHECK_OK(qm_hal_scan_sync(hal, b, QM_DTYPE_COMPLEX128, 3, 10, &r, &st));
    CHECK(r.max_abs == 42.0);
    CHECK_EQ_U64(n_launch, 1);
    CHECK(last_op == QM_HAL_OP_AMP_SCAN && last_state == qm_hal_buf_raw(b));
    qm_hal_stash_args sa = {.out = b, .out_dtype = QM_DTYPE_COMPLEX128, .period = 64,
                            .period_valid = 8, .in = b, .in_dtype = QM_DTYPE_FLOAT64, .n = 8};
    CHECK(qm_hal_stash(hal, &sa, NULL, &st) == QM_E_UNSUPPORTED);
    CHECK_STR(st.msg, "stash: the sim backend does not implement op amp_stash");
    CHECK_EQ_U64(n_launch, 1);
    qm_hal_buf_free(hal, b);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    qm_hal_destroy(hal);
    /* the fallbacks: no trim, plain malloc that counts as pinned (nothing to pin) */
    CHECK(is_pinned == (ops->device.host_is_pinned == NULL));
    return n_trim + n_host_alloc + n_host_free + n_pinned;
}

static void refused(qm_hal_ops *t, const char *want)
{
    qm_status st;
    qm_hal *hal = (qm_hal *)&st;
    CHECK(qm_hal_create(t, NULL, &hal, &st) == QM_E_INTERNAL);
    CHECK(hal == NULL);
    CHECK_STR(st.msg, want);
}

int main(void)
{
    char want[300];
    qm_hal_ops full = table(5, true), bare = table(5, false);
    /* every optional member present is called once per use; absent ones never */
    CHECK(exercise(&full) == 4);
    CHECK_EQ_U64(n_trim, 1);
    CHECK(exercise(&bare) == 0);
    check_wrap_device();

    /* a newer ABI than this build knows, ABI 0, and every older layout: refused, each its own way */
    qm_hal_ops t = table(QM_HAL_ABI + 1, true);
    snprintf(want, sizeof want, "hal: backend 'sim' was written against HAL ABI %d but this build "
             "knows %d to %d", QM_HAL_ABI + 1, QM_HAL_ABI_MIN, QM_HAL_ABI);
    refused(&t, want);
    t = table(0, true);
    snprintf(want, sizeof want, "hal: backend 'sim' was written against HAL ABI 0 but this build "
             "knows %d to %d", QM_HAL_ABI_MIN, QM_HAL_ABI);
    refused(&t, want);
    for (int abi = 1; abi < QM_HAL_ABI_MIN; ++abi) {
        t = table(abi, true);
        snprintf(want, sizeof want, "hal: backend 'sim' was written against HAL ABI %d, the flat "
                 "table of one member per kernel; this build takes the grouped table of ABI %d to "
                 "%d (hal_impl.h)", abi, QM_HAL_ABI_MIN, QM_HAL_ABI);
        refused(&t, want);
    }
    /* ABI 5 requires the kernel members (and every other required member) */
    snprintf(want, sizeof want, "hal: backend 'sim' ops table is incomplete (abi 5, this build %d)",
             QM_HAL_ABI);
    t = table(5, true);
    t.kernel.launch = NULL;
    refused(&t, want);
    t = table(5, true);
    t.kernel.supports_op = NULL;
    refused(&t, want);
    t = table(5, true);
    t.stream.copy_d2d = NULL;
    refused(&t, want);
    t = table(5, true);
    t.destroy = NULL;
    refused(&t, want);
    return qm_test_end("test_hal_abi");
}
