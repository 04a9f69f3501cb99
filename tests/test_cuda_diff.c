/* test_cuda_diff.c — the same requests on the simulated and the CUDA backends give the same bytes
 * (label diff): multi-device layouts on logical devices of one GPU, batches, complex64/complex128,
 * and the fast kernels that read device-resident input (block sums and amplitudes) against the
 * CPU kernels; inputs of every magnitude (all subnormal, near DBL_MAX / FLT_MAX, subnormal and
 * normal mixed: issue 13 item 3), single states and batches, where the slow path's scales and
 * coefficients reach the amplitude kernels. Exit 77 without a GPU. */
#include "cuda_backend.h"
#include "materialize_internal.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static bool same_state(qm_hal *a_hal, qm_hal *b_hal, unsigned q, qm_dtype dt,
                       const qm_shard_spec *sh, int nsh, const qm_amp_input *in)
{
    qm_status st;
    qm_state *a = NULL, *b = NULL;
    CHECK_OK(qm_materialize_amplitude(a_hal, q, dt, sh, nsh, in, NULL, &a, &st));
    if (st.code)
        fprintf(stderr, "%s\n", st.msg);
    CHECK_OK(qm_materialize_amplitude(b_hal, q, dt, sh, nsh, in, NULL, &b, &st));
    const uint64_t total = (in->batch ? in->batch : 1) << q, es = qm_dtype_size(dt);
    void *x = malloc(total * es), *y = malloc(total * es);
    bool same = false;
    if (a && b && x && y && qm_state_read(a, 0, total, dt, x, &st) == QM_OK &&
        qm_state_read(b, 0, total, dt, y, &st) == QM_OK) {
        same = memcmp(x, y, total * es) == 0;
        for (uint64_t i = 0; same && i < 2 * total; ++i) /* and finite */
            same = dt == QM_DTYPE_COMPLEX128 ? isfinite(((const double *)x)[i])
                                             : isfinite(((const float *)x)[i]);
    }
    free(x);
    free(y);
    qm_state_destroy(a);
    qm_state_destroy(b);
    return same;
}

/* Inputs of every magnitude: x * 2^k (x: small integers, so exact) for k from the smallest
 * subnormal to near DBL_MAX, and mixes; single states over 4 logical devices (and one), batches
 * through the fused kernel (10 qubits) and the long-state path (15 qubits: one amp_scale over
 * several states, with per-state scales). Every state must also be finite. */
static void extreme_inputs(qm_hal *gpu, qm_hal *sim)
{
    const unsigned q = 16;
    const uint64_t N = (uint64_t)1 << q, n = N - 5;
    double *x = malloc(n * sizeof *x);
    float *xf = malloc(n * sizeof *xf);
    qm_shard_spec one = {0, 0, 0, N}, four[4];
    for (int d = 0; d < 4; ++d)
        four[d] = (qm_shard_spec){0, d, N / 4 * d, N / 4 * (d + 1)};
    const int k64[] = {-1074, -1060, -1023, -600, 1013};
    const int k32[] = {-149, -126, 117};
    for (size_t c = 0; c < sizeof k64 / sizeof k64[0] + 2; ++c) {
        for (uint64_t i = 0; i < n; ++i) {
            const double m = (double)((int)(i * 7919 % 2047) - 1023);
            if (c < sizeof k64 / sizeof k64[0])
                x[i] = ldexp(m, k64[c]);
            else if (c == sizeof k64 / sizeof k64[0]) /* subnormals with a few normal values */
                x[i] = i % 1000 == 0 ? ldexp(m, -1000) : ldexp(m, -1074);
            else /* the whole range: one value near DBL_MAX among subnormals and normals */
                x[i] = i == n / 3 ? DBL_MAX : ldexp(m, (int)(i % 2088) - 1074);
        }
        qm_amp_input in64 = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n};
        const bool a = same_state(gpu, sim, q, QM_DTYPE_COMPLEX128, four, 4, &in64);
        const bool b = same_state(gpu, sim, q, QM_DTYPE_COMPLEX64, &one, 1, &in64);
        if (!a || !b)
            printf("extreme input %zu (float64): states differ\n", c);
        CHECK(a && b);
    }
    for (size_t c = 0; c < sizeof k32 / sizeof k32[0]; ++c) {
        for (uint64_t i = 0; i < n; ++i)
            xf[i] = ldexpf((float)((int)(i * 7919 % 2047) - 1023), k32[c]);
        qm_amp_input in32 = {.dtype = QM_DTYPE_FLOAT32, .data = xf, .n = n};
        const bool a = same_state(gpu, sim, q, QM_DTYPE_COMPLEX64, four, 4, &in32);
        const bool b = same_state(gpu, sim, q, QM_DTYPE_COMPLEX128, &one, 1, &in32);
        if (!a || !b)
            printf("extreme input 2^%d (float32): states differ\n", k32[c]);
        CHECK(a && b);
    }
    /* batches: state s is x * 2^k[s % 6], fast and slow states side by side */
    const int kb[6] = {-1074, 0, 1013, -1030, -600, 5};
    for (int v = 0; v < 2; ++v) {
        const unsigned qb = v ? 15 : 10;
        const uint64_t Nb = (uint64_t)1 << qb, F = Nb - 3, B = v ? 8 : 600;
        double *xb = malloc(B * F * sizeof *xb);
        float *fb = malloc(B * F * sizeof *fb);
        for (uint64_t s = 0; s < B; ++s)
            for (uint64_t i = 0; i < F; ++i) {
                const double m = (double)((int)((s * F + i) * 7919 % 2047) - 1023);
                xb[s * F + i] = ldexp(m, kb[s % 6]);
                fb[s * F + i] = ldexpf((float)m, kb[s % 6] < -149 ? -149 : kb[s % 6] > 117 ? 117 : kb[s % 6]);
            }
        qm_shard_spec bsh[4];
        for (int d = 0; d < 4; ++d)
            bsh[d] = (qm_shard_spec){0, d, B / 4 * Nb * d, B / 4 * Nb * (d + 1)};
        qm_amp_input inb = {.dtype = QM_DTYPE_FLOAT64, .data = xb, .n = F, .batch = B};
        qm_amp_input inf = {.dtype = QM_DTYPE_FLOAT32, .data = fb, .n = F, .batch = B};
        const bool a = same_state(gpu, sim, qb, QM_DTYPE_COMPLEX128, bsh, 4, &inb);
        const bool b = same_state(gpu, sim, qb, QM_DTYPE_COMPLEX64, bsh, 4, &inf);
        const qm_shard_spec all = {0, 1, 0, B * Nb};
        const bool c = same_state(gpu, sim, qb, QM_DTYPE_COMPLEX64, &all, 1, &inb);
        if (!a || !b || !c)
            printf("extreme batch, %u qubits: states differ (%d %d %d)\n", qb, a, b, c);
        CHECK(a && b && c);
        free(xb);
        free(fb);
    }
    free(x);
    free(xf);
}

int main(void)
{
    qm_status st;
    qm_hal *gpu = NULL, *sim = NULL;
    if (qm_hal_cuda_open_logical(4, &gpu, &st) != QM_OK) {
        printf("test_cuda_diff: skipped: %s\n", st.msg);
        return st.code == QM_E_UNSUPPORTED ? 77 : 1;
    }
    CHECK_EQ_U64(qm_hal_device_count(gpu), 4);
    CHECK(qm_hal_peer_get(gpu, 0, 3));
    CHECK_OK(fixture_mesh(4, (uint64_t)1 << 31, true, QM_SIM_MATERIALIZED, &sim, &st));
    srand(5);
    /* one state over 4 logical devices, several layouts and dtypes */
    const unsigned q = 22;
    const uint64_t N = (uint64_t)1 << q, n = 3000001;
    double *x = malloc(n * sizeof *x);
    float *xf = malloc(n * sizeof *xf);
    for (uint64_t i = 0; i < n; ++i) {
        x[i] = ((double)rand() / RAND_MAX - 0.5) * pow(10.0, (double)(rand() % 9) - 4);
        xf[i] = (float)x[i];
    }
    qm_shard_spec equal4[4], uneven[3] = {{0, 2, 0, N / 4}, {0, 0, N / 4, 3 * N / 4}, {0, 3, 3 * N / 4, N}};
    for (int d = 0; d < 4; ++d)
        equal4[d] = (qm_shard_spec){0, d, N / 4 * d, N / 4 * (d + 1)};
    qm_amp_input in64 = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n};
    qm_amp_input in32 = {.dtype = QM_DTYPE_FLOAT32, .data = xf, .n = n};
    CHECK(same_state(gpu, sim, q, QM_DTYPE_COMPLEX128, equal4, 4, &in64));
    CHECK(same_state(gpu, sim, q, QM_DTYPE_COMPLEX128, uneven, 3, &in64));
    CHECK(same_state(gpu, sim, q, QM_DTYPE_COMPLEX64, equal4, 4, &in32));
    CHECK(same_state(gpu, sim, q, QM_DTYPE_COMPLEX64, uneven, 3, &in64));
    /* a batch: 1000 samples of 1021 features into 10 qubits, dealt 250 per device */
    const uint64_t B = 1000, F = 1021, Nb = 1024;
    double *xb = malloc(B * F * sizeof *xb);
    for (uint64_t i = 0; i < B * F; ++i)
        xb[i] = cos((double)i * 0.37) * (double)(1 + i % 3);
    qm_shard_spec bsh[4];
    for (int d = 0; d < 4; ++d)
        bsh[d] = (qm_shard_spec){0, d, 250 * Nb * d, 250 * Nb * (d + 1)};
    qm_amp_input inb = {.dtype = QM_DTYPE_FLOAT64, .data = xb, .n = F, .batch = B};
    CHECK(same_state(gpu, sim, 10, QM_DTYPE_COMPLEX128, bsh, 4, &inb));
    /* the kernels on device-resident input: block sums, bit for bit, float64 and float32, every
     * block size from 2^9 (the general kernel) to 2^14 (the fast kernel with 1..8 chunks per
     * warp). The buffers hold input elements f.. with f = 3 (every block starts at an odd element,
     * unaligned for 16-byte loads) or f = 0 (aligned), and the sums start at the second block. */
    for (int v = 0; v < 4; ++v)
        for (unsigned lb = 9; lb <= 14; ++lb) {
            const bool f32 = (v & 1) != 0;
            const uint64_t f = (v & 2) ? 0 : 3, is = f32 ? 4 : 8;
            const uint64_t bs = (uint64_t)1 << lb, nb = (N >> lb) - 1;
            double *ga = malloc(nb * 8), *sa = malloc(nb * 8);
            qm_hal_buf *dv = NULL, *sv = NULL;
            const void *src = f32 ? (const void *)(xf + f) : (const void *)(x + f);
            CHECK_OK(qm_hal_buf_alloc(gpu, 1, (n - f) * is, &dv, &st));
            CHECK_OK(qm_hal_buf_alloc(sim, 1, (n - f) * is, &sv, &st));
            CHECK_OK(qm_hal_copy_h2d(gpu, dv, 0, src, (n - f) * is, NULL, &st));
            CHECK_OK(qm_hal_copy_h2d(sim, sv, 0, src, (n - f) * is, NULL, &st));
            qm_hal_sumsq_args a = {.state_dtype = QM_DTYPE_COMPLEX128, .off = 0, .g0 = bs,
                                   .period = N, .period_valid = n, .log2_block = lb,
                                   .n_blocks = nb, .scale = 1.0, .out_sums = ga, .input = dv,
                                   .in_dtype = f32 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64,
                                   .in_first = f};
            qm_hal_sumsq_args b = a;
            b.input = sv;
            b.out_sums = sa;
            CHECK_OK(qm_hal_sumsq_sync(gpu, &a, &st));
            CHECK_OK(qm_hal_sumsq_sync(sim, &b, &st));
            if (memcmp(ga, sa, nb * 8) != 0)
                printf("block sums differ: %s, 2^%u blocks, input from element %llu\n",
                       f32 ? "float32" : "float64", lb, (unsigned long long)f);
            CHECK(memcmp(ga, sa, nb * 8) == 0);
            a.scale = b.scale = 0x1p-600; /* the rescaled path */
            CHECK_OK(qm_hal_sumsq_sync(gpu, &a, &st));
            CHECK_OK(qm_hal_sumsq_sync(sim, &b, &st));
            CHECK(memcmp(ga, sa, nb * 8) == 0);
            qm_hal_buf_free(gpu, dv);
            qm_hal_buf_free(sim, sv);
            free(ga);
            free(sa);
        }
    qm_hal_buf *dst = NULL, *sst = NULL;
    /* amplitudes of one state from device-resident input: complex128 and complex64 from float64
     * and float32; slots from 1000001 (an odd start: the input pointer is not 16-byte aligned,
     * nor 8-byte aligned for float32) and from 1000000 (float32 -> complex64 then takes the
     * two-slots-per-lane kernel); an odd count, so the last pair is half full */
    for (int v = 0; v < 8; ++v) {
        const qm_dtype dt = (v & 1) ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128;
        const bool f32 = (v & 2) != 0;
        const uint64_t g0 = (v & 4) ? 1000000 : 1000001;
        const size_t is = f32 ? 4 : 8;
        const uint64_t es = qm_dtype_size(dt), cnt = 2500001; /* odd; ends before 3500002 < N */
        CHECK_OK(qm_hal_buf_alloc(gpu, 2, cnt * es, &dst, &st));
        CHECK_OK(qm_hal_buf_alloc(sim, 2, cnt * es, &sst, &st));
        qm_hal_buf *dv = NULL, *sv = NULL;
        CHECK_OK(qm_hal_buf_alloc(gpu, 2, n * is, &dv, &st));
        CHECK_OK(qm_hal_buf_alloc(sim, 2, n * is, &sv, &st));
        CHECK_OK(qm_hal_copy_h2d(gpu, dv, 0, f32 ? (const void *)xf : x, n * is, NULL, &st));
        CHECK_OK(qm_hal_copy_h2d(sim, sv, 0, f32 ? (const void *)xf : x, n * is, NULL, &st));
        const double coeff = 0.123456789;
        /* slots [g0, g0 + cnt) of the state: data, then padding */
        qm_hal_amp_scale_args a = {.state = dst, .state_dtype = dt, .off = 0, .n = cnt,
                                   .g0 = g0, .period = N, .period_valid = n,
                                   .first_state = 0, .n_coeffs = 1, .coeffs = &coeff,
                                   .input = dv,
                                   .in_dtype = f32 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64,
                                   .in_first = 0};
        qm_hal_amp_scale_args b = a;
        b.state = sst;
        b.input = sv;
        CHECK_OK(qm_hal_amp_scale(gpu, &a, NULL, &st));
        if (st.code)
            printf("%s\n", st.msg);
        CHECK_OK(qm_hal_amp_scale(sim, &b, NULL, &st));
        void *ha = malloc(cnt * es), *hb = malloc(cnt * es);
        CHECK_OK(qm_hal_copy_d2h(gpu, ha, dst, 0, cnt * es, NULL, &st));
        CHECK_OK(qm_hal_copy_d2h(sim, hb, sst, 0, cnt * es, NULL, &st));
        if (memcmp(ha, hb, cnt * es) != 0)
            printf("amplitudes differ: %s from %s, first slot %llu\n", qm_dtype_name(dt),
                   f32 ? "float32" : "float64", (unsigned long long)g0);
        CHECK(memcmp(ha, hb, cnt * es) == 0);
        free(ha);
        free(hb);
        qm_hal_buf_free(gpu, dv);
        qm_hal_buf_free(sim, sv);
        qm_hal_buf_free(gpu, dst);
        qm_hal_buf_free(sim, sst);
    }
    extreme_inputs(gpu, sim);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
    free(x);
    free(xf);
    free(xb);
    qm_hal_destroy(sim);
    qm_hal_destroy(gpu);
    return qm_test_end("test_cuda_diff");
}
