/* test_fault.c — countdown fault injection over every allocation, copy, kernel launch and
 * collective of a multi-device encode on the simulated mesh: each failure returns the injected
 * code with context, leaves no device bytes in use and no state behind. */
#include "fault.h"
#include "materialize_internal.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

static qm_code read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    (void)st;
    memcpy(dst, (const double *)ctx + first, (size_t)count * sizeof(double));
    return QM_OK;
}

/* Run one encode of x (n values) on a 4-device fault-wrapped mesh; sweep k over every counted
 * call. With `streamed`, the input comes through a reader (staging buffers and copies); without,
 * from host memory that the simulated devices read in place. Returns the points swept. */
static uint64_t sweep_layout(const double *x, uint64_t n, uint64_t batch, unsigned q,
                             const qm_shard_spec *sh, int n_sh, unsigned points, qm_code inject,
                             qm_code expect_clean, bool streamed)
{
    qm_status st;
    qm_hal *sim, *hal;
    if (fixture_mesh(4, (uint64_t)1 << 26, true, QM_SIM_MATERIALIZED, &sim, &st) != QM_OK)
        return 0;
    qm_fault_config cfg = {.points = points, .fail_at = 0, .code = inject};
    CHECK_OK(qm_hal_fault_create(sim, &cfg, &hal, &st));
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = streamed ? NULL : x, .n = n, .batch = batch,
                       .read = streamed ? read_cb : NULL, .read_ctx = (void *)(uintptr_t)x};
    qm_state *s = NULL;
    qm_code clean = qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX128, sh, n_sh, &in, NULL, &s, &st);
    CHECK(clean == expect_clean);
    qm_state_destroy(s);
    const uint64_t total = qm_hal_fault_calls(hal);
    for (uint64_t k = 1; k <= total; ++k) {
        qm_hal_fault_rearm(hal, k);
        s = (qm_state *)1;
        qm_code rc = qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX128, sh, n_sh, &in, NULL, &s, &st);
        CHECK(qm_hal_fault_fired(hal));
        CHECK(rc == inject);
        CHECK(s == NULL);
        CHECK(strstr(st.msg, "injected fault") != NULL);
        CHECK(strstr(st.msg, "encode: shard") != NULL || strstr(st.msg, "state read") != NULL ||
              strstr(st.msg, "encode") != NULL);
        if (qm_hal_bytes_in_use(hal) != 0)
            fprintf(stderr, "k=%llu: %llu bytes left in use after: %s\n", (unsigned long long)k,
                    (unsigned long long)qm_hal_bytes_in_use(hal), st.msg);
        CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    }
    qm_hal_destroy(hal);
    return total;
}

/* One state of 2^q amplitudes, uneven layout: 1 page + 2 pages + 1 page of N/4 on devices 2, 0, 3. */
static uint64_t sweep(const double *x, uint64_t n, unsigned q, unsigned points, qm_code inject,
                      qm_code expect_clean, bool streamed)
{
    const uint64_t N = (uint64_t)1 << q;
    const qm_shard_spec sh[3] = {{0, 2, 0, N / 4}, {0, 0, N / 4, 3 * N / 4}, {0, 3, 3 * N / 4, N}};
    return sweep_layout(x, n, 0, q, sh, 3, points, inject, expect_clean, streamed);
}

int main(void)
{
    const unsigned q = 14;
    const uint64_t n = 12000;
    double *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = (double)((i * 2654435761u) % 1000) - 500.0;
    /* fast path: every allocation, copy and launch of a 3-shard encode on 4 devices, with the
     * input read in place (host memory) and streamed through staging buffers (a reader) */
    for (int streamed = 0; streamed < 2; ++streamed) {
        uint64_t a = sweep(x, n, q, QM_FAULT_ALLOC, QM_E_CAPACITY, QM_OK, streamed);
        uint64_t c = sweep(x, n, q, QM_FAULT_COPY, QM_E_BACKEND, QM_OK, streamed);
        uint64_t l = sweep(x, n, q, QM_FAULT_LAUNCH, QM_E_BACKEND, QM_OK, streamed);
        uint64_t all = sweep(x, n, q, QM_FAULT_ALL, QM_E_BACKEND, QM_OK, streamed);
        printf("%s input, fast path: %llu allocations, %llu copies, %llu launches, %llu points\n",
               streamed ? "streamed" : "in-place", (unsigned long long)a, (unsigned long long)c,
               (unsigned long long)l, (unsigned long long)all);
        /* n = 12000 < 3N/4 = 12288: the last shard holds padding only, so 3 state buffers, 2
         * input buffers (staging, or views of host memory) and 3 device buffers of block sums
         * (one per shard, its root copied back once; streamed: 2 staging copies before) */
        CHECK_EQ_U64(a, 5 + 3);
        CHECK_EQ_U64(c, (streamed ? 2 : 0) + 3);
        /* (2 stash,) 3 sumsq, 3 tree_combine, 3 amp_scale */
        CHECK_EQ_U64(l, streamed ? 2 + 3 + 3 + 3 : 3 + 3 + 3);
        CHECK_EQ_U64(all, a + c + l);
    }
    /* the fused batch path: 40 states of 64 slots (50 values each) streamed onto 2 devices as
     * 25 + 15 whole states, with one state on the slow path (its values overflow the fast sum) */
    {
        const uint64_t B = 40, F = 50, N = 64;
        double *xb = malloc(B * F * sizeof *xb);
        for (uint64_t i = 0; i < B * F; ++i)
            xb[i] = (double)((i * 2654435761u) % 1000) - 499.5;
        for (uint64_t i = 0; i < F; ++i)
            xb[7 * F + i] *= 1e300;
        const qm_shard_spec sh[2] = {{0, 1, 0, 25 * N}, {0, 3, 25 * N, B * N}};
        uint64_t a = sweep_layout(xb, F, B, 6, sh, 2, QM_FAULT_ALLOC, QM_E_CAPACITY, QM_OK, true);
        uint64_t c = sweep_layout(xb, F, B, 6, sh, 2, QM_FAULT_COPY, QM_E_BACKEND, QM_OK, true);
        uint64_t l = sweep_layout(xb, F, B, 6, sh, 2, QM_FAULT_LAUNCH, QM_E_BACKEND, QM_OK, true);
        printf("fused batch input: %llu allocations, %llu copies, %llu launches\n",
               (unsigned long long)a, (unsigned long long)c, (unsigned long long)l);
        CHECK_EQ_U64(a, 4); /* 2 state buffers, 2 staging buffers */
        CHECK_EQ_U64(c, 4); /* per shard: one chunk in, its sums out */
        /* 2 amp_batch; slow state 7: scan, sumsq, amp_scale */
        CHECK_EQ_U64(l, 2 + 3);
        free(xb);
    }
    /* rescaled path: huge values take the scan + second sum */
    for (uint64_t i = 0; i < n; ++i)
        x[i] *= 1e305;
    uint64_t big = sweep(x, n, q, QM_FAULT_ALL, QM_E_BACKEND, QM_OK, true);
    CHECK(big > 14);
    uint64_t big_in_place = sweep(x, n, q, QM_FAULT_ALL, QM_E_BACKEND, QM_OK, false);
    CHECK(big_in_place > 10);
    /* error path: a NaN makes the encode fail with E-INPUT; every earlier point still cleans up */
    x[9000] = NAN;
    uint64_t nan = sweep(x, n, q, QM_FAULT_ALL, QM_E_BACKEND, QM_E_INPUT, true);
    CHECK(nan > 0);
    uint64_t nan_in_place = sweep(x, n, q, QM_FAULT_ALL, QM_E_BACKEND, QM_E_INPUT, false);
    CHECK(nan_in_place > 0);
    printf("rescaled path: %llu / %llu points; NaN path: %llu / %llu points (streamed / in place)\n",
           (unsigned long long)big, (unsigned long long)big_in_place, (unsigned long long)nan,
           (unsigned long long)nan_in_place);
    free(x);

    /* the shim itself: bad arguments */
    qm_status st;
    qm_hal *out = (qm_hal *)1;
    qm_fault_config bad = {.points = QM_FAULT_ALL, .fail_at = 1, .code = QM_OK};
    qm_hal *sim;
    CHECK_OK(fixture_mesh(1, 1024, false, QM_SIM_MATERIALIZED, &sim, &st));
    CHECK(qm_hal_fault_create(sim, &bad, &out, &st) == QM_E_ARG);
    CHECK(out == NULL);
    CHECK_ERR(st, QM_E_ARG, "the injected code must be an error");
    return qm_test_end("test_fault");
}
