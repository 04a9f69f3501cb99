#define _POSIX_C_SOURCE 200809L
/* test_cuda_big.c — the largest state the GPUs hold, encoded from host input through the staging
 * buffers, checked against the formula x_i / ||x|| (Σ|ψ|² over the whole state, and one amplitude
 * in 4099). Runs only with QM_CUDA_BIG=1 on a GPU with room (exit 77 otherwise).
 *   QM_CUDA_BIG_QUBITS   qubits (default 33: 128 GiB of complex128, the most one H200 holds)
 *   QM_CUDA_BIG_DTYPE    complex128 (float64 input) or complex64 (float32 input)
 *   QM_CUDA_BIG_GPUS     G: the state sharded equally over G devices, one per GPU while there are
 *                        enough (issue 8: 35 qubits complex128 or 36 complex64 on 4 H200s, 36/37 on 8)
 * The input comes from a reader that computes x_i = 1 + (i mod 1000) / 1000 on demand, so the host
 * needs only the staging buffers, however large the state. */
#include "cuda_backend.h"
#include "materialize_internal.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double x_of(uint64_t i) { return 1.0 + (double)(i % 1000) * 1e-3; }

typedef struct reader {
    bool f32;
} reader;

static qm_code read_x(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    (void)st;
    const reader *r = ctx;
    for (uint64_t i = 0; i < count; ++i) {
        if (r->f32)
            ((float *)dst)[i] = (float)x_of(first + i);
        else
            ((double *)dst)[i] = x_of(first + i);
    }
    return QM_OK;
}

/* The value the state holds for x_i (float32 input: x_i rounded to float first). */
static long double value(uint64_t i, bool f32) { return f32 ? (long double)(float)x_of(i) : x_of(i); }

int main(void)
{
    const char *on = getenv("QM_CUDA_BIG");
    if (!on || strcmp(on, "1") != 0) {
        printf("test_cuda_big: skipped (set QM_CUDA_BIG=1 on a GPU with 128 GiB free)\n");
        return 77;
    }
    const char *qs = getenv("QM_CUDA_BIG_QUBITS"), *ds = getenv("QM_CUDA_BIG_DTYPE");
    const char *gs = getenv("QM_CUDA_BIG_GPUS");
    const unsigned q = qs ? (unsigned)atoi(qs) : 33;
    const bool c64 = ds && strcmp(ds, "complex64") == 0;
    const int G = gs ? atoi(gs) : 1;
    if (q < 10 || q > 40 || G < 1 || G > 64 || (ds && !c64 && strcmp(ds, "complex128") != 0)) {
        printf("test_cuda_big: bad settings: %u qubits, dtype %s, %d GPUs\n", q, ds ? ds : "-", G);
        return 1;
    }
    qm_status st;
    qm_hal *gpu = NULL;
    if (qm_hal_cuda_open_logical(G, &gpu, &st) != QM_OK) {
        printf("test_cuda_big: skipped: %s\n", st.msg);
        return 77;
    }
    const uint64_t N = (uint64_t)1 << q, slot = c64 ? 8 : 16;
    /* ||x||^2: x is periodic (1000 values), so whole periods times the period's sum, plus the rest */
    long double period_sum = 0, s2 = 0;
    for (uint64_t i = 0; i < 1000; ++i)
        period_sum += value(i, c64) * value(i, c64);
    s2 = period_sum * (long double)(N / 1000);
    for (uint64_t i = N - N % 1000; i < N; ++i)
        s2 += value(i, c64) * value(i, c64);
    const long double norm = sqrtl(s2);
    qm_shard_spec *sh = calloc((size_t)G, sizeof *sh);
    for (int g = 0; g < G; ++g)
        sh[g] = (qm_shard_spec){0, g, N / (uint64_t)G * (uint64_t)g, N / (uint64_t)G * (uint64_t)(g + 1)};
    reader rd = {.f32 = c64};
    qm_amp_input in = {.dtype = c64 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64, .n = N, .read = read_x,
                       .read_ctx = &rd};
    qm_state *s = NULL;
    qm_materialize_times t = {0};
    qm_materialize_opts o = {.times = &t};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(qm_materialize_amplitude(gpu, q, c64 ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128, sh, G,
                                      &in, &o, &s, &st));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!s) {
        fprintf(stderr, "%s\n", st.msg);
        free(sh);
        qm_hal_destroy(gpu);
        return qm_test_end("test_cuda_big");
    }
    printf("test_cuda_big: 2^%u amplitudes %s (%.1f GiB) on %d device(s) from host in %.2f s "
           "(ingest %.2f s, local_norm %.3f s, norm_allreduce %.3f s, encode %.3f s)\n", q,
           c64 ? "complex64" : "complex128", (double)(N * slot) / (1 << 30), G,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), t.ingest,
           t.local_norm, t.norm_allreduce, t.encode);
    for (int g = 0; g < G; ++g) {
        qm_hal_usage u;
        qm_hal_device_info info;
        CHECK_OK(qm_hal_usage_query(gpu, g, &u, &st));
        CHECK_OK(qm_hal_device_info_query(gpu, g, &info, &st));
        printf("test_cuda_big: %s peak %.2f GiB\n", info.id, (double)u.peak_bytes / (1 << 30));
        /* the shard plus small staging and block-sum buffers */
        CHECK(u.peak_bytes <= N / (uint64_t)G * slot + ((uint64_t)80 << 20));
    }
    /* Σ|ψ|² over the whole state, read back in pieces (long double: a double running sum of 2^33
     * squares drifts by ~1e-8 on its own); and one amplitude in 4099 against the formula */
    const uint64_t piece = (uint64_t)1 << 22;
    void *buf = malloc(piece * slot);
    long double total = 0;
    double maxrel = 0;
    for (uint64_t p = 0; buf && p < N; p += piece) {
        CHECK_OK(qm_state_read(s, p, piece, c64 ? QM_DTYPE_COMPLEX64 : QM_DTYPE_COMPLEX128, buf, &st));
        for (uint64_t i = 0; i < piece; ++i) {
            const long double re = c64 ? (long double)((const float *)buf)[2 * i]
                                       : (long double)((const double *)buf)[2 * i];
            total += re * re;
            if (i % 4099 == 0) {
                const long double want = value(p + i, c64) / norm;
                const double rel = (double)(fabsl(re - want) / want);
                if (rel > maxrel)
                    maxrel = rel;
            }
        }
    }
    printf("test_cuda_big: sum |psi|^2 - 1 = %.3e, max relative error of sampled amplitudes %.3e\n",
           (double)(total - 1.0L), maxrel);
    /* complex64: each amplitude is rounded to float once (relative 2^-24) */
    CHECK(fabsl(total - 1.0L) < (c64 ? 1e-6L : 1e-12L));
    CHECK(maxrel < (c64 ? 1.2e-7 : 1e-12));
    free(buf);
    free(sh);
    qm_state_destroy(s);
    CHECK_EQ_U64(qm_hal_bytes_in_use(gpu), 0);
    qm_hal_destroy(gpu);
    return qm_test_end("test_cuda_big");
}
