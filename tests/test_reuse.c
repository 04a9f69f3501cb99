/* test_reuse.c — a context's encode cache (engine/stages/reuse.c): no allocation per encode after
 * the first ones, the same bytes as an encode without the cache, nothing left at close.
 *
 * Checked, on a 4-device simulated mesh under the fault shim (which counts every allocation that
 * reaches the backend): N encodes of 64 states of 10 qubits on 2 shards (fused), through staging
 * (a reader: the ingest pipes) and read in place (host memory: batch_in_place's scratch), allocate
 * on the devices only in the first encode (2 state buffers + 2 staging buffers, or 2 state buffers
 * + 2 sum buffers) and on the host only in the first (the page-locked ring + the sums, or the
 * sums), the norm check of each state (qm_state_norms, on the cache's scratch) allocates only in
 * the first, their bytes equal the encode without a cache, the state pool hands every shard buffer back
 * (reused = 2 per later encode) and keeps at most 2 per device; a larger batch frees the kept
 * buffers of the old size and grows the staging halves; a non-fused state (2^14 slots on 3
 * shards) keeps its block-sum scratch; every failure of a countdown sweep (allocations, copies,
 * launches) with a cold and a warm cache returns the injected code and, once the cache is
 * destroyed, leaves no device byte in use and every host allocation freed.
 * Through the public API (qm_context, api_internal.h's counters): 6 encodes of host rows and 3 of a
 * .npy file on one context allocate nothing after the second, the bytes equal a fresh context's,
 * and a shard exported as a DLPack tensor keeps its memory (not handed to the next encode, its
 * bytes unchanged) until the tensor's deleter runs.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "api_internal.h"
#include "fault.h"
#include "materialize_internal.h"
#include "qmesh_dlpack.h"
#include "reuse.h"
#include "sim_fixtures.h"
#include "state_internal.h"
#include "testlib.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static qm_code read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    (void)st;
    memcpy(dst, (const float *)ctx + first, (size_t)count * sizeof(float));
    return QM_OK;
}

/* Device allocations and frees over every device of hal. */
static void dev_counts(const qm_hal *hal, uint64_t *allocs, uint64_t *frees)
{
    *allocs = *frees = 0;
    for (int d = 0; d < qm_hal_device_count(hal); ++d) {
        qm_hal_usage u;
        CHECK_OK(qm_hal_usage_query(hal, d, &u, NULL));
        *allocs += u.n_allocs;
        *frees += u.n_frees;
    }
}

static uint64_t host_allocs(const qm_hal *hal)
{
    uint64_t a = 0;
    qm_hal_host_counts(hal, &a, NULL);
    return a;
}

/* Every device byte freed and every host allocation given back. */
static void check_all_freed(const qm_hal *hal)
{
    uint64_t a, f, ha, hf;
    dev_counts(hal, &a, &f);
    qm_hal_host_counts(hal, &ha, &hf);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    CHECK_EQ_U64(a, f);
    CHECK_EQ_U64(ha, hf);
}

/* All amplitudes of s as bytes (malloc'd). */
static unsigned char *state_bytes(const qm_state *s, size_t *bytes)
{
    const uint64_t n = s->n_amps * s->batch;
    *bytes = (size_t)n * qm_dtype_size(s->dtype);
    unsigned char *b = malloc(*bytes);
    CHECK_OK(qm_state_read(s, 0, n, s->dtype, b, NULL));
    return b;
}

static qm_hal *fault_mesh(unsigned points)
{
    qm_hal *sim = NULL, *hal = NULL;
    qm_status st;
    CHECK_OK(fixture_mesh(4, (uint64_t)1 << 26, true, QM_SIM_MATERIALIZED, &sim, &st));
    const qm_fault_config cfg = {.points = points, .fail_at = 0, .code = QM_E_BACKEND};
    CHECK_OK(qm_hal_fault_create(sim, &cfg, &hal, &st));
    return hal;
}

/* N encodes of B states of 10 qubits (F values each) on 2 shards, with a cache: allocations only in
 * the first, bytes equal to the uncached encode. */
static void check_counts(const float *x, uint64_t B, bool streamed)
{
    const unsigned q = 10;
    const uint64_t N = 1u << q, F = 1000;
    qm_hal *hal = fault_mesh(QM_FAULT_ALLOC);
    const qm_shard_spec sh[2] = {{0, 1, 0, B / 2 * N}, {0, 3, B / 2 * N, B * N}};
    const qm_amp_input in = {.dtype = QM_DTYPE_FLOAT32, .data = streamed ? NULL : x, .n = F,
                             .batch = B, .read = streamed ? read_cb : NULL,
                             .read_ctx = (void *)(uintptr_t)x};
    qm_status st;
    qm_state *ref = NULL;
    CHECK_OK(qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh, 2, &in, NULL, &ref, &st));
    size_t ref_n = 0;
    unsigned char *want = state_bytes(ref, &ref_n);
    qm_state_destroy(ref);
    check_all_freed(hal);

    qm_reuse *r = NULL;
    CHECK_OK(qm_reuse_create(hal, &r, &st));
    const qm_materialize_opts o = {.reuse = r};
    uint64_t a0, f0, a1, f1;
    dev_counts(hal, &a0, &f0);
    const uint64_t h0 = host_allocs(hal), calls0 = qm_hal_fault_calls(hal);
    qm_state *prev = NULL;
    for (int k = 0; k < 5; ++k) {
        qm_state *s = NULL;
        CHECK_OK(qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh, 2, &in, &o, &s, &st));
        size_t n = 0;
        unsigned char *got = state_bytes(s, &n);
        CHECK(n == ref_n && memcmp(got, want, n) == 0);
        free(got);
        double sums[64]; /* the norm check of `encode --batch-size`, on the cache's scratch */
        CHECK_OK(qm_state_norms(s, 2, NULL, false, sums, &st));
        for (uint64_t b = 0; b < B && b < 64; ++b)
            CHECK(fabs(sums[b] - 1.0) < 1e-6);
        qm_state_destroy(prev); /* the previous batch is dropped after the next one is made */
        prev = s;
        dev_counts(hal, &a1, &f1);
        /* first encode: 2 state buffers and 2 staging buffers (one pipe per device), or 2 state
         * buffers and 2 device buffers of sums (input read in place), and the check's 2 block-sum
         * buffers; the second: 2 more state buffers (the first state is still alive); then none */
        CHECK_EQ_U64(a1 - a0, k == 0 ? 6 : 8);
        CHECK_EQ_U64(f1 - f0, 0);
        /* the shim counts the same allocations, and in place one host view per shard per encode
         * (wrap_host: a wrapper, no memory) */
        CHECK_EQ_U64(qm_hal_fault_calls(hal) - calls0,
                     (k == 0 ? 6 : 8) + (streamed ? 0 : 2 * (uint64_t)(k + 1)));
        /* host: the page-locked ring the pipes share + the fused sums, or the sums alone; the
         * check's block sums */
        CHECK_EQ_U64(host_allocs(hal) - h0, streamed ? 3 : 2);
        const qm_reuse_stats rs = qm_reuse_stats_get(r);
        CHECK_EQ_U64(rs.reused, k < 2 ? 0 : 2 * (uint64_t)(k - 1));
        CHECK_EQ_U64((uint64_t)rs.kept_bufs, k == 0 ? 0 : 2); /* the state before the last */
        CHECK_EQ_U64((uint64_t)rs.pipes, streamed ? 2 : 0);
    }
    qm_state_destroy(prev);
    qm_reuse_stats rs = qm_reuse_stats_get(r);
    CHECK_EQ_U64((uint64_t)rs.kept_bufs, 4); /* two per device */
    CHECK_EQ_U64(rs.kept_bytes, 4 * (B / 2 * N * 8));
    CHECK_EQ_U64(rs.released, 0);
    /* a larger batch: the kept buffers of the old size go, the staging halves grow */
    const uint64_t half_before = rs.half_bytes_max;
    float *x2 = malloc((size_t)(2 * B * F) * sizeof *x2);
    for (uint64_t i = 0; i < 2 * B * F; ++i)
        x2[i] = x[i % (B * F)];
    const qm_shard_spec sh2[2] = {{0, 1, 0, B * N}, {0, 3, B * N, 2 * B * N}};
    qm_amp_input in2 = in;
    in2.batch = 2 * B;
    in2.data = streamed ? NULL : x2;
    in2.read_ctx = x2;
    qm_state *big = NULL;
    CHECK_OK(qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh2, 2, &in2, &o, &big, &st));
    rs = qm_reuse_stats_get(r);
    CHECK_EQ_U64(rs.released, 4);
    CHECK_EQ_U64((uint64_t)rs.kept_bufs, 0);
    if (streamed)
        CHECK(rs.half_bytes_max > half_before);
    qm_state_destroy(big);
    qm_reuse_destroy(r);
    check_all_freed(hal);
    free(x2);
    free(want);
    qm_hal_destroy(hal);
}

/* One state of 2^14 slots on 3 uneven shards (not fused: block sums on each shard's device). */
static void check_block_sums(const float *x)
{
    const unsigned q = 14;
    const uint64_t N = 1u << q;
    qm_hal *hal = fault_mesh(QM_FAULT_ALLOC);
    const qm_shard_spec sh[3] = {{0, 2, 0, N / 4}, {0, 0, N / 4, 3 * N / 4}, {0, 3, 3 * N / 4, N}};
    const qm_amp_input in = {.dtype = QM_DTYPE_FLOAT32, .n = 12000, .read = read_cb,
                             .read_ctx = (void *)(uintptr_t)x};
    qm_status st;
    qm_reuse *r = NULL;
    CHECK_OK(qm_reuse_create(hal, &r, &st));
    const qm_materialize_opts o = {.reuse = r};
    uint64_t a0, f0, a1, f1;
    for (int k = 0; k < 4; ++k) {
        qm_state *s = NULL;
        dev_counts(hal, &a0, &f0);
        CHECK_OK(qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh, 3, &in, &o, &s, &st));
        dev_counts(hal, &a1, &f1);
        /* 3 state buffers, 2 staging (the last shard holds padding only: no input) and 3 block-sum
         * buffers at first, then nothing */
        CHECK_EQ_U64(a1 - a0, k == 0 ? 8 : 0);
        CHECK_EQ_U64(f1 - f0, 0);
        qm_state_destroy(s);
    }
    qm_reuse_destroy(r);
    check_all_freed(hal);
    qm_hal_destroy(hal);
}

/* Every counted call of an encode fails once, with a cold cache and with a warm one: the injected
 * code, no state, and after the cache is destroyed nothing in use. */
static uint64_t sweep(const float *x, bool streamed, bool warm)
{
    const unsigned q = 10;
    const uint64_t N = 1u << q, B = 16;
    qm_hal *hal = fault_mesh(QM_FAULT_ALL);
    const qm_shard_spec sh[2] = {{0, 0, 0, B / 2 * N}, {0, 2, B / 2 * N, B * N}};
    const qm_amp_input in = {.dtype = QM_DTYPE_FLOAT32, .data = streamed ? NULL : x, .n = 1000,
                             .batch = B, .read = streamed ? read_cb : NULL,
                             .read_ctx = (void *)(uintptr_t)x};
    qm_status st;
    uint64_t total = 0;
    for (uint64_t k = 1;; ++k) {
        qm_reuse *r = NULL;
        CHECK_OK(qm_reuse_create(hal, &r, &st));
        const qm_materialize_opts o = {.reuse = r};
        qm_state *s = NULL;
        if (warm) { /* one good encode fills the cache; its state goes back to the pool */
            CHECK_OK(qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh, 2, &in, &o, &s, &st));
            qm_state_destroy(s);
        }
        qm_hal_fault_rearm(hal, k);
        s = (qm_state *)1;
        const qm_code rc = qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX64, sh, 2, &in, &o, &s, &st);
        const bool fired = qm_hal_fault_fired(hal);
        qm_hal_fault_rearm(hal, 0);
        if (!fired) { /* k passed the last counted call: the encode succeeded */
            CHECK_OK(rc);
            qm_state_destroy(s);
        } else {
            CHECK(rc == QM_E_BACKEND);
            CHECK(s == NULL);
            CHECK(strstr(st.msg, "injected fault") != NULL);
            ++total;
        }
        qm_reuse_destroy(r);
        check_all_freed(hal);
        if (!fired)
            break;
    }
    qm_hal_destroy(hal);
    return total;
}

/* The public API: one context, many encodes. */
static void check_context(const float *x, const char *npy)
{
    const unsigned q = 10;
    const uint64_t B = 64, F = 1000;
    qm_scenario *sc = NULL;
    qm_status st;
    CHECK_OK(qm_scenario_open(NULL, &sc, &st));
    qm_request req;
    qm_request_init(&req);
    req.qubits = q;
    req.dtype = QM_DTYPE_COMPLEX64;
    req.batch = B;
    req.features = F;
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT32, .data = x, .rows = B, .features = F};
    /* the reference: a fresh context per encode */
    qm_context *c0 = NULL;
    qm_state *s0 = NULL;
    CHECK_OK(qm_context_create(sc, &req, &c0, &st));
    CHECK_OK(qm_context_open(c0, QM_BACKEND_SIM, &st));
    CHECK_OK(qm_context_encode(c0, &in, &s0, &st));
    size_t ref_n = 0;
    unsigned char *want = state_bytes(s0, &ref_n);
    qm_state_destroy(s0);
    qm_context_destroy(c0);

    qm_context *ctx = NULL;
    CHECK_OK(qm_context_create(sc, &req, &ctx, &st));
    CHECK_OK(qm_context_open(ctx, QM_BACKEND_SIM, &st));
    qm_hal *hal = qm_context_hal(ctx);
    qm_state *prev = NULL;
    uint64_t a2 = 0, f2 = 0, h2 = 0;
    for (int k = 0; k < 9; ++k) { /* 6 from host rows, then 3 from the file */
        qm_state *s = NULL;
        if (k < 6)
            CHECK_OK(qm_context_encode(ctx, &in, &s, &st));
        else
            CHECK_OK(qm_context_encode_file(ctx, npy, &s, &st));
        size_t n = 0;
        unsigned char *got = state_bytes(s, &n);
        CHECK(n == ref_n && memcmp(got, want, n) == 0);
        free(got);
        qm_state_destroy(prev);
        prev = s;
        uint64_t a, f;
        dev_counts(hal, &a, &f);
        if (k == 1 || k == 6) { /* after the state pool is full; after the file's pipes opened */
            a2 = a;
            f2 = f;
            h2 = host_allocs(hal);
        } else if (k > 1) {
            CHECK_EQ_U64(a, a2);
            CHECK_EQ_U64(f, f2);
            CHECK_EQ_U64(host_allocs(hal), h2);
        }
    }
    const qm_reuse_stats rs = qm_context_reuse_stats(ctx);
    CHECK(rs.reused >= 7); /* every encode after the second took kept buffers */
    CHECK(rs.pipes >= 1);  /* the file's input came through the ingest pipes */
    /* an exported shard keeps its memory until its deleter runs */
    DLManagedTensor *t = NULL;
    CHECK_OK(qm_state_shard_to_dlpack(prev, 0, &t, &st));
    const size_t tb = (size_t)(prev->shards[0].end - prev->shards[0].start) * 8;
    unsigned char *keep = malloc(tb);
    memcpy(keep, t->dl_tensor.data, tb);
    qm_state_destroy(prev);
    const uint64_t reused_before = qm_context_reuse_stats(ctx).reused;
    float *y = malloc((size_t)(B * F) * sizeof *y); /* other values: other amplitudes */
    for (uint64_t i = 0; i < B * F; ++i)
        y[i] = x[i] + 1.0f;
    const qm_host_data in_y = {.dtype = QM_DTYPE_FLOAT32, .data = y, .rows = B, .features = F};
    qm_state *s = NULL;
    CHECK_OK(qm_context_encode(ctx, &in_y, &s, &st));
    for (int i = 0; i < s->n_shards; ++i)
        CHECK(qm_hal_buf_raw(s->shards[i].buf) != t->dl_tensor.data);
    CHECK(memcmp(keep, t->dl_tensor.data, tb) == 0);
    t->deleter(t); /* now the last reference: the buffer goes back to the pool */
    qm_state_destroy(s);
    qm_state *s2 = NULL;
    CHECK_OK(qm_context_encode(ctx, &in, &s2, &st));
    CHECK(qm_context_reuse_stats(ctx).reused > reused_before);
    size_t n = 0;
    unsigned char *got = state_bytes(s2, &n);
    CHECK(n == ref_n && memcmp(got, want, n) == 0);
    free(got);
    qm_state_destroy(s2);
    qm_context_destroy(ctx);
    qm_scenario_destroy(sc);
    free(y);
    free(keep);
    free(want);
}

/* A (rows, cols) float32 .npy file of v. */
static void write_npy(const char *path, const float *v, uint64_t rows, uint64_t cols)
{
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }",
                     (unsigned long long)rows, (unsigned long long)cols);
    while ((10 + n + 1) % 64)
        hdr[n++] = ' ';
    hdr[n++] = '\n';
    const size_t data = (size_t)(rows * cols) * 4;
    unsigned char *b = malloc(10 + (size_t)n + data);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(n & 0xff);
    b[9] = (unsigned char)(n >> 8);
    memcpy(b + 10, hdr, (size_t)n);
    memcpy(b + 10 + n, v, data);
    qm_test_write_file(path, b, 10 + (size_t)n + data);
    free(b);
}

int main(void)
{
    const uint64_t n = 2 * 64 * 1000 + 16384;
    float *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = (float)((i * 2654435761u) % 1000) - 500.0f;
    check_counts(x, 64, true);
    check_counts(x, 64, false);
    check_block_sums(x);
    for (int streamed = 0; streamed < 2; ++streamed)
        for (int warm = 0; warm < 2; ++warm) {
            const uint64_t k = sweep(x, streamed, warm);
            printf("%s input, %s cache: %llu failure points, each clean\n",
                   streamed ? "streamed" : "in-place", warm ? "warm" : "cold", (unsigned long long)k);
            CHECK(k > 0);
        }
    char dir[] = "/tmp/qm_reuse_XXXXXX", npy[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(npy, sizeof npy, "%s/x.npy", dir);
    write_npy(npy, x, 64, 1000);
    check_context(x, npy);
    unlink(npy);
    rmdir(dir);
    free(x);
    return qm_test_end("test_reuse");
}
