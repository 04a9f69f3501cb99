/* test_materialize.c — amplitude encoding on the simulated mesh: values against an independent
 * reference, bit-identical states across layouts and thread counts, extreme magnitudes, every bad
 * input with its message, state reads. (The reference system's encoding behaviours, items 16-20
 * and 23-25 of test_conformance_encode.c, in their first form.) */
#include "fault.h" /* qm_hal_fault_fired */
#include "ingest.h" /* qm_ingest_sums_in_staging */
#include "materialize_internal.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static qm_hal *mesh8;

/* encode `n` doubles into 2^q complex128 with the given shard layout; returns the amplitudes
 * (malloc'd, 2*2^q doubles) or NULL with st set */
static double *encode(const double *x, uint64_t n, unsigned q, const qm_shard_spec *sh, int nsh,
                      qm_status *st)
{
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n};
    qm_state *s = NULL;
    if (qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, sh, nsh, &in, NULL, &s, st) != QM_OK)
        return NULL;
    double *amps = malloc(((size_t)2 << q) * sizeof *amps);
    if (qm_state_read(s, 0, (uint64_t)1 << q, QM_DTYPE_COMPLEX128, amps, st) != QM_OK) {
        free(amps);
        amps = NULL;
    }
    qm_state_destroy(s);
    return amps;
}

/* the layout of `k` equal shards over devices 0..k-1 */
static void equal_layout(unsigned q, int k, qm_shard_spec *sh)
{
    uint64_t len = ((uint64_t)1 << q) / (uint64_t)k;
    for (int i = 0; i < k; ++i)
        sh[i] = (qm_shard_spec){.rank = 0, .device = i, .start = len * i, .end = len * (i + 1)};
}

static void test_conformance_16(void)
{
    qm_status st;
    const double x[3] = {1, 2, 3};
    qm_shard_spec sh[2];
    equal_layout(2, 2, sh);
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 3};
    qm_state *s;
    CHECK_OK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st));
    CHECK_EQ_U64(qm_state_shard_count(s), 2);
    qm_shard_info info;
    CHECK_OK(qm_state_shard_query(s, 1, &info, &st));
    CHECK_EQ_U64(info.start, 2);
    CHECK_EQ_U64(info.end, 4);
    CHECK_STR(info.device_id, "d1");
    CHECK(qm_state_shard_query(s, 2, &info, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "shard 2 is out of range (the state has 2 shards)");
    double a[8];
    CHECK_OK(qm_state_read(s, 0, 4, QM_DTYPE_COMPLEX128, a, &st));
    const double r = sqrt(14.0);
    CHECK(fabs(a[0] - 1 / r) < 1e-15 && fabs(a[2] - 2 / r) < 1e-15);
    CHECK(fabs(a[4] - 3 / r) < 1e-15 && a[6] == 0.0);
    CHECK(a[1] == 0 && a[3] == 0 && a[5] == 0 && a[7] == 0);
    float f[2];
    CHECK(qm_state_read(s, 0, 1, QM_DTYPE_COMPLEX64, f, &st) == QM_E_DTYPE);
    CHECK_ERR(st, QM_E_DTYPE, "the state is complex128 but complex64 was requested");
    CHECK(qm_state_read(s, 3, 2, QM_DTYPE_COMPLEX128, a, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "range [3, 5) is outside the state's 4 amplitudes");
    qm_state_destroy(s);
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
}

static void test_layouts_bit_identical(void)
{
    qm_status st;
    const unsigned q = 18;
    const uint64_t n = 200003; /* not a power of two: padding inside a page */
    double *x = malloc(n * sizeof *x);
    srand(11);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = ((double)rand() / RAND_MAX - 0.5) * pow(10.0, (double)(rand() % 7) - 3);
    qm_shard_spec one[1], eight[8], two[2];
    equal_layout(q, 1, one);
    equal_layout(q, 8, eight);
    equal_layout(q, 2, two);
    /* weighted-style: contiguous runs of 3, 1 and 4 pages of 2^15 on three devices */
    const uint64_t pg = (uint64_t)1 << 15;
    qm_shard_spec weighted[3] = {{0, 5, 0, 3 * pg}, {0, 2, 3 * pg, 4 * pg}, {0, 7, 4 * pg, 8 * pg}};
    /* balanced-style: unaligned ranges */
    const uint64_t N = (uint64_t)1 << q;
    qm_shard_spec balanced[3] = {{0, 0, 0, N / 3 + 1}, {0, 1, N / 3 + 1, 2 * (N / 3) + 2},
                                 {0, 2, 2 * (N / 3) + 2, N}};
    double *ref = encode(x, n, q, one, 1, &st);
    CHECK(ref != NULL);
    const qm_shard_spec *layouts[4] = {eight, two, weighted, balanced};
    const int counts[4] = {8, 2, 3, 3};
    for (int l = 0; l < 4 && ref; ++l) {
        double *a = encode(x, n, q, layouts[l], counts[l], &st);
        CHECK(a != NULL);
        if (a)
            CHECK(memcmp(a, ref, (size_t)N * 16) == 0);
        free(a);
    }
    /* against an independent reference: long double naive sum */
    long double s2 = 0;
    for (uint64_t i = 0; i < n; ++i)
        s2 += (long double)x[i] * x[i];
    double nrm = (double)sqrtl(s2), maxrel = 0, total = 0;
    for (uint64_t i = 0; ref && i < N; ++i) {
        double want = i < n ? x[i] / nrm : 0.0;
        double err = fabs(ref[2 * i] - want);
        if (want != 0)
            err /= fabs(want);
        if (err > maxrel)
            maxrel = err;
        total += ref[2 * i] * ref[2 * i];
        if (ref[2 * i + 1] != 0.0)
            maxrel = 1;
    }
    CHECK(maxrel < 1e-12);
    CHECK(fabs(total - 1.0) < 1e-12);
    free(ref);
    free(x);
}

static void test_extremes(void)
{
    qm_status st;
    qm_shard_spec sh[4];
    equal_layout(3, 4, sh);
    /* squares overflow: values near DBL_MAX */
    const double big[6] = {1e300, -1.5e308, 3e307, 0, 1e-300, 7e306};
    double *a = encode(big, 6, 3, sh, 4, &st);
    CHECK(a != NULL);
    if (a) {
        long double s2 = 0;
        for (int i = 0; i < 6; ++i)
            s2 += (long double)big[i] * big[i];
        long double nrm = sqrtl(s2);
        for (int i = 0; i < 6; ++i)
            CHECK(fabs(a[2 * i] - (double)(big[i] / nrm)) <= 1e-15 * fabs((double)(big[i] / nrm)) + 1e-300);
        CHECK(a[2] < -0.97 && a[2] > -0.99);
    }
    free(a);
    /* squares underflow: subnormal and tiny values */
    const double tiny[5] = {4.9e-324, 1e-310, -2e-320, 3e-200, 0};
    a = encode(tiny, 5, 3, sh, 4, &st);
    CHECK(a != NULL);
    if (a) {
        double t = 0;
        for (int i = 0; i < 8; ++i)
            t += a[2 * i] * a[2 * i];
        CHECK(fabs(t - 1.0) < 1e-12);
        CHECK(a[6] == 1.0); /* 3e-200 dominates every other value by > 1e100 */
        CHECK(a[2] > 0 && a[2] < 1e-100);
    }
    free(a);
    /* all values equal and large */
    const double same[4] = {1e200, 1e200, 1e200, 1e200};
    qm_shard_spec s2[2];
    equal_layout(2, 2, s2);
    a = encode(same, 4, 2, s2, 2, &st);
    CHECK(a != NULL);
    if (a)
        CHECK(a[0] == 0.5 && a[6] == 0.5);
    free(a);
}

static void test_float32_complex64(void)
{
    qm_status st;
    const float x[5] = {3, 4, 0, 0, 12};
    qm_shard_spec sh[2];
    equal_layout(3, 2, sh);
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT32, .data = x, .n = 5};
    qm_state *s;
    CHECK_OK(qm_materialize_amplitude(mesh8, 3, QM_DTYPE_COMPLEX64, sh, 2, &in, NULL, &s, &st));
    float a[16];
    CHECK_OK(qm_state_read(s, 0, 8, QM_DTYPE_COMPLEX64, a, &st));
    CHECK(a[0] == (float)(3.0 / 13.0) && a[2] == (float)(4.0 / 13.0) && a[8] == (float)(12.0 / 13.0));
    CHECK(a[14] == 0.0f && a[15] == 0.0f);
    qm_state_destroy(s);
    /* one qubit, input of exactly 2^n */
    const double y[2] = {1, 2};
    qm_shard_spec one[1];
    equal_layout(1, 1, one);
    in = (qm_amp_input){.dtype = QM_DTYPE_FLOAT64, .data = y, .n = 2};
    CHECK_OK(qm_materialize_amplitude(mesh8, 1, QM_DTYPE_COMPLEX64, one, 1, &in, NULL, &s, &st));
    CHECK_OK(qm_state_read(s, 0, 2, QM_DTYPE_COMPLEX64, a, &st));
    CHECK(a[0] == (float)(1 / sqrt(5.0)) && a[2] == (float)(2 / sqrt(5.0)));
    qm_state_destroy(s);
}

static void test_bad_input(void)
{
    qm_status st;
    qm_state *s = (qm_state *)1;
    qm_shard_spec sh[2];
    equal_layout(2, 2, sh);
    double x[4] = {1, 2, NAN, 4};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 0};
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK(s == NULL);
    CHECK_ERR(st, QM_E_INPUT, "input cannot be empty");
    /* empty input is reported before the layout is looked at (conformance item 19) */
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, NULL, 0, &in, NULL, &s, &st) == QM_E_INPUT);
    in.n = 3;
    CHECK(qm_materialize_amplitude(mesh8, 1, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "input length 3 exceeds state vector size 2 (1 qubits); use at least 2 qubits");
    CHECK(qm_materialize_amplitude(mesh8, 0, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_QUBITS);
    CHECK_ERR(st, QM_E_QUBITS, "at least 1");
    in.n = 4;
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "zero or non-finite norm: input[2] is NaN");
    x[2] = -INFINITY;
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "input[2] is -Inf");
    const double zeros[4] = {0, 0, -0.0, 0};
    in.data = zeros;
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, sh, 2, &in, NULL, &s, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "zero or non-finite norm: all 4 input values are zero");
    in.data = x;
    x[2] = 1;
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_FLOAT64, sh, 2, &in, NULL, &s, &st) == QM_E_DTYPE);
    /* layouts */
    qm_shard_spec gap[2] = {{0, 0, 0, 1}, {0, 1, 2, 4}};
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, gap, 2, &in, NULL, &s, &st) == QM_E_SHARDS);
    CHECK_ERR(st, QM_E_SHARDS, "shard 1 starts at 2 but the previous shard ends at 1");
    qm_shard_spec far[1] = {{0, 9, 0, 4}};
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, far, 1, &in, NULL, &s, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "shard 0 names device 9, out of range (the mesh has 8 devices)");
    qm_shard_spec empty[2] = {{0, 0, 0, 0}, {0, 1, 0, 4}};
    CHECK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, empty, 2, &in, NULL, &s, &st) == QM_E_SHARDS);
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
}

static void test_replicated(void)
{
    qm_status st;
    qm_shard_spec rep[3] = {{0, 0, 0, 4}, {0, 3, 0, 4}, {0, 6, 0, 4}};
    const double x[3] = {1, 2, 2};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = 3};
    qm_state *s;
    CHECK_OK(qm_materialize_amplitude(mesh8, 2, QM_DTYPE_COMPLEX128, rep, 3, &in, NULL, &s, &st));
    for (int k = 0; k < 3; ++k) {
        qm_shard_info info;
        CHECK_OK(qm_state_shard_query(s, k, &info, &st));
        CHECK(info.start == 0 && info.end == 4 && info.device == rep[k].device);
    }
    double a[8];
    CHECK_OK(qm_state_read(s, 0, 4, QM_DTYPE_COMPLEX128, a, &st));
    CHECK(a[0] == 1.0 / 3.0 && a[2] == 2.0 / 3.0 && a[6] == 0.0);
    qm_state_destroy(s);
}


/* a reader over a host array that counts what it was asked for */
typedef struct counting_reader {
    const double *x;
    uint64_t calls, values, max_index;
} counting_reader;

static qm_code count_read(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    counting_reader *r = ctx;
    (void)st;
    memcpy(dst, r->x + first, (size_t)count * sizeof(double));
    r->calls++;
    r->values += count;
    if (first + count > r->max_index)
        r->max_index = first + count;
    return QM_OK;
}

static void test_batch_and_chunks(void)
{
    qm_status st;
    const unsigned q = 6;                  /* 64 slots per state */
    const uint64_t B = 96, F = 50, N = 64; /* 96 samples of 50 features */
    double *x = malloc(B * F * sizeof *x);
    for (uint64_t i = 0; i < B * F; ++i)
        x[i] = cos((double)i * 0.77) * (double)(1 + i % 7);
    x[17 * F + 3] = 1e300; /* one sample needs the rescaled path */
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B};
    /* one device; then whole samples dealt 40 / 30 / 26 over three devices */
    qm_shard_spec one[1] = {{0, 0, 0, B * N}};
    qm_shard_spec three[3] = {{0, 4, 0, 40 * N}, {0, 1, 40 * N, 70 * N}, {0, 6, 70 * N, B * N}};
    qm_state *s1 = NULL, *s3 = NULL, *s4 = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &in, NULL, &s1, &st));
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &in, NULL, &s3, &st));
    /* tiny staging chunks (7 values) through a reader: same bits, and each shard reads only its
     * own values */
    counting_reader cr = {.x = x};
    qm_amp_input rin = {.dtype = QM_DTYPE_FLOAT64, .n = F, .batch = B, .read = count_read,
                        .read_ctx = &cr};
    qm_materialize_opts small = {.chunk_bytes = 7 * sizeof(double)};
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &rin, &small, &s4, &st));
    CHECK_EQ_U64(cr.values, B * F); /* every value read exactly once */
    /* whole samples on every shard: the fused path reads at least one whole state per chunk
     * (here 7 values are less than one sample of 50, so exactly one state per read) */
    CHECK_EQ_U64(cr.calls, B);
    const uint64_t total = B * N;
    double *a = malloc(total * 16), *b = malloc(total * 16), *c = malloc(total * 16);
    if (s1 && s3 && s4) {
        CHECK_OK(qm_state_read(s1, 0, total, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(s3, 0, total, QM_DTYPE_COMPLEX128, b, &st));
        CHECK_OK(qm_state_read(s4, 0, total, QM_DTYPE_COMPLEX128, c, &st));
        CHECK(memcmp(a, b, total * 16) == 0);
        CHECK(memcmp(a, c, total * 16) == 0);
        /* each sample against an independent long-double reference */
        double maxrel = 0;
        for (uint64_t k = 0; k < B; ++k) {
            long double s2 = 0;
            for (uint64_t j = 0; j < F; ++j)
                s2 += (long double)x[k * F + j] * x[k * F + j];
            double nrm = (double)sqrtl(s2), t = 0;
            for (uint64_t j = 0; j < N; ++j) {
                double want = j < F ? x[k * F + j] / nrm : 0.0, got = a[2 * (k * N + j)];
                double err = fabs(got - want) / (want != 0 ? fabs(want) : 1.0);
                if (err > maxrel)
                    maxrel = err;
                t += got * got;
            }
            CHECK(fabs(t - 1.0) < 1e-12);
        }
        CHECK(maxrel < 1e-12);
        CHECK(fabs(a[2 * (17 * N + 3)] - 1.0) < 1e-15); /* the huge value dominates its sample */
    }
    qm_state_destroy(s1);
    qm_state_destroy(s3);
    qm_state_destroy(s4);
    /* a bad sample is named by sample and feature; a zero sample by sample */
    x[40 * F + 9] = NAN;
    qm_state *bad = (qm_state *)1;
    CHECK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &in, NULL, &bad, &st) == QM_E_INPUT);
    CHECK(bad == NULL);
    CHECK_ERR(st, QM_E_INPUT, "sample 40, feature 9 is NaN");
    x[40 * F + 9] = 1;
    for (uint64_t j = 0; j < F; ++j)
        x[55 * F + j] = 0.0;
    CHECK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &in, NULL, &bad, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "sample 55 has all 50 values zero");
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
    free(a);
    free(b);
    free(c);
    free(x);
}

/* The thread-count check's batch: 400 samples of 1021 values (sample 7 on the rescaled path), 10
 * qubits, 200 whole states on each of 2 devices (204800 slots each: the kernels run in parallel),
 * read in place by one fused pass per shard. */
enum { TC_BATCH = 400, TC_F = 1021, TC_Q = 10 };

/* One encode of B samples of F values (x) into 2^q-slot states over `k` equal shards of whole
 * states; the amplitudes read back (malloc'd), or NULL. */
static void *encode_split(const double *x, uint64_t B, uint64_t F, unsigned q, qm_dtype dt, int k)
{
    qm_status st;
    const uint64_t total = B << q;
    qm_shard_spec sh[4];
    for (int i = 0; i < k; ++i)
        sh[i] = (qm_shard_spec){0, i, total / (uint64_t)k * (uint64_t)i,
                                total / (uint64_t)k * (uint64_t)(i + 1)};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B > 1 ? B : 0};
    qm_state *s = NULL;
    const size_t bytes = (size_t)total * qm_dtype_size(dt);
    void *a = malloc(bytes);
    if (!a || qm_materialize_amplitude(mesh8, q, dt, sh, k, &in, NULL, &s, &st) != QM_OK ||
        qm_state_read(s, 0, total, dt, a, &st) != QM_OK) {
        free(a);
        a = NULL;
    }
    qm_state_destroy(s);
    return a;
}

/* A kernel call that writes at least 32 MiB of amplitudes streams them (non-temporal stores);
 * smaller ones store normally. The same input on 1 shard (streamed) and on 2 or 4 shards (each
 * under 32 MiB: not streamed) gives the same bytes: one state of 2^22 amplitudes (complex128: 64
 * MiB, amp_scale; complex64: 32 MiB) and a batch of 2560 x 1021 at 10 qubits (complex128: 40 MiB,
 * amp_batch) with one sample on the rescaled path. */
static void test_streamed_stores(void)
{
    const uint64_t n = (uint64_t)1 << 22, B = 2560, F = 1021;
    double *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = cos((double)i * 0.0013) * (1.0 + (double)(i % 11));
    const struct {
        uint64_t B, F;
        unsigned q;
        qm_dtype dt;
        int split;
    } cases[] = {{1, n - 3, 22, QM_DTYPE_COMPLEX128, 4},
                 {1, n - 3, 22, QM_DTYPE_COMPLEX64, 2},
                 {B, F, 10, QM_DTYPE_COMPLEX128, 2}};
    x[77 * F + 4] = 1e300; /* the batch's sample 77 (and a large value in the state) */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const size_t bytes = (size_t)(cases[c].B << cases[c].q) * qm_dtype_size(cases[c].dt);
        void *one = encode_split(x, cases[c].B, cases[c].F, cases[c].q, cases[c].dt, 1);
        void *many = encode_split(x, cases[c].B, cases[c].F, cases[c].q, cases[c].dt, cases[c].split);
        CHECK(one && many && memcmp(one, many, bytes) == 0);
        free(one);
        free(many);
    }
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
    free(x);
}

/* Child mode: encode a fixed input with 8 shards, then the batch, and write both states' bytes
 * to argv[2]. */
static int dump_state(const char *path)
{
    qm_status st;
    const unsigned q = 20;
    const uint64_t n = 1000001;
    double *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = sin((double)i * 0.001) * (1.0 + (double)(i % 13));
    qm_shard_spec sh[8];
    equal_layout(q, 8, sh);
    double *a = encode(x, n, q, sh, 8, &st);
    x[7 * TC_F + 5] = 1e300;
    const uint64_t bn = (uint64_t)TC_BATCH << TC_Q;
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = TC_F, .batch = TC_BATCH};
    const qm_shard_spec two[2] = {{0, 0, 0, bn / 2}, {0, 1, bn / 2, bn}};
    qm_state *s = NULL;
    double *b = malloc(bn * 16);
    int ok = b && qm_materialize_amplitude(mesh8, TC_Q, QM_DTYPE_COMPLEX128, two, 2, &in, NULL, &s,
                                           &st) == QM_OK &&
             qm_state_read(s, 0, bn, QM_DTYPE_COMPLEX128, b, &st) == QM_OK;
    qm_state_destroy(s);
    FILE *f = fopen(path, "wb");
    ok = ok && a && f && fwrite(a, 16, (size_t)1 << q, f) == ((size_t)1 << q) &&
         fwrite(b, 16, (size_t)bn, f) == (size_t)bn;
    if (f)
        fclose(f);
    free(a);
    free(b);
    free(x);
    return ok ? 0 : 1;
}

static void test_thread_counts(const char *self)
{
    char cmd[1024];
    int r1, r2;
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 '%s' --dump t1.bin", self);
    r1 = system(cmd);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=2 '%s' --dump t2.bin", self);
    r2 = system(cmd);
    CHECK(r1 == 0 && r2 == 0);
    FILE *a = fopen("t1.bin", "rb"), *b = fopen("t2.bin", "rb");
    CHECK(a && b);
    if (a && b) {
        size_t n = ((size_t)16 << 20) + ((size_t)16 * TC_BATCH << TC_Q);
        char *pa = malloc(n), *pb = malloc(n);
        CHECK(fread(pa, 1, n, a) == n && fread(pb, 1, n, b) == n);
        CHECK(memcmp(pa, pb, n) == 0);
        CHECK(fgetc(a) == EOF && fgetc(b) == EOF); /* nothing more */
        free(pa);
        free(pb);
    }
    if (a)
        fclose(a);
    if (b)
        fclose(b);
    remove("t1.bin");
    remove("t2.bin");
}

/* The whole state's amplitudes (malloc'd) or NULL. */
static double *read_all(const qm_state *s, uint64_t amps)
{
    qm_status st;
    double *a = malloc((size_t)amps * 2 * sizeof *a);
    if (a && qm_state_read(s, 0, amps, QM_DTYPE_COMPLEX128, a, &st) != QM_OK) {
        free(a);
        a = NULL;
    }
    return a;
}

/* Input in device memory (device_data): each shard whose device can wrap it reads it in place, the
 * others and the slow path's scans come through the reader; the state is bit-identical to the
 * host-input one either way. On the simulator device memory is host memory, so every wrap
 * succeeds; a fault shim whose second allocation point (shard 0's wrap) answers E-UNSUPPORTED
 * makes shard 0 take the reader. */
static void test_device_input(void)
{
    qm_status st;
    const unsigned q = 6;
    const uint64_t B = 96, F = 50, N = 64;
    double *x = malloc(B * F * sizeof *x);
    for (uint64_t i = 0; i < B * F; ++i)
        x[i] = sin((double)i * 0.31) * (double)(1 + i % 5);
    x[17 * F + 9] = 1e300; /* sample 17 (on shard 0) takes the rescaled path */
    qm_shard_spec three[3] = {{0, 4, 0, 40 * N}, {0, 1, 40 * N, 70 * N}, {0, 6, 70 * N, B * N}};
    qm_amp_input host = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B};
    qm_state *ref = NULL, *dev = NULL, *viaread = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &host, NULL, &ref,
                                      &st));
    counting_reader cr = {.x = x};
    qm_amp_input din = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B,
                        .read = count_read, .read_ctx = &cr, .device_data = true};
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &din, NULL, &dev, &st));
    CHECK_EQ_U64(cr.values, F); /* only the slow state's values, for its scan */
    /* shard 0 cannot read the input in place: it is ingested through the reader */
    qm_hal *shim = NULL; /* the factory's fault shim over the simulator */
    const qm_backend_fault fc = {.points = QM_BACKEND_FAULT_ALLOC, .fail_at = 2,
                                 .code = QM_E_UNSUPPORTED};
    CHECK_OK(fixture_mesh_fault(8, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &fc, &shim, &st));
    cr = (counting_reader){.x = x};
    CHECK_OK(qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, three, 3, &din, NULL, &viaread,
                                      &st));
    CHECK(qm_hal_fault_fired(shim));
    CHECK_EQ_U64(cr.values, 40 * F); /* shard 0's samples, once; its slow state scans the stash */
    double *a = ref ? read_all(ref, B * N) : NULL, *b = dev ? read_all(dev, B * N) : NULL,
           *c = viaread ? read_all(viaread, B * N) : NULL;
    CHECK(a && b && c && memcmp(a, b, B * N * 16) == 0 && memcmp(a, c, B * N * 16) == 0);
    /* a device input without a reader is refused before any work */
    qm_state *none = NULL;
    din.read = NULL;
    CHECK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, three, 3, &din, NULL, &none, &st) ==
          QM_E_ARG);
    CHECK_STR(st.msg, "encode: device input needs its pointer and a reader");
    free(a), free(b), free(c), free(x);
    qm_state_destroy(ref), qm_state_destroy(dev), qm_state_destroy(viaread);
    CHECK_EQ_U64(qm_hal_bytes_in_use(shim), 0);
    qm_hal_destroy(shim);
}

/* A large state read through a reader, its chunks whole 2^14-slot blocks: each chunk's block sums
 * are taken from the staging as it is stashed (qm_ingest_sums_in_staging), so the norm reads no
 * stash. Counted on a fault shim's kernel launches: 2 shards x 2 chunks x (stash + sumsq) + 2
 * tree_combines (each shard's 4 block sums to its root) + 2 scales = 12, where summing the stash
 * would be 2 x 2 stashes + 2 sumsq + 2 tree_combines + 2 scales = 10. The state
 * is bit-identical to the one from host memory read in place (mapped: sums over the input); a
 * failing sumsq in the ingest leaves nothing allocated. */
static void test_sums_in_staging(void)
{
    qm_status st;
    const unsigned q = 16;
    const uint64_t N = (uint64_t)1 << q;
    double *x = malloc(N * sizeof *x);
    for (uint64_t i = 0; i < N; ++i)
        x[i] = sin((double)i * 0.31) * (double)(1 + i % 5);
    qm_shard_spec two[2];
    equal_layout(q, 2, two);
    qm_amp_input mem = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = N};
    counting_reader cr = {.x = x};
    qm_amp_input rin = {.dtype = QM_DTYPE_FLOAT64, .n = N, .read = count_read, .read_ctx = &cr};
    const qm_materialize_opts block = {.chunk_bytes = ((uint64_t)1 << 14) * sizeof(double)};
    const qm_materialize_opts odd = {.chunk_bytes = 7 * sizeof(double)}; /* not whole blocks */
    CHECK(qm_ingest_sums_in_staging(N, N, 0, N / 2, block.chunk_bytes, 8));
    CHECK(!qm_ingest_sums_in_staging(N, N, 0, N / 2, odd.chunk_bytes, 8));
    CHECK(!qm_ingest_sums_in_staging(N, N - 1, 0, N / 2, block.chunk_bytes, 8)); /* padding */
    CHECK(!qm_ingest_sums_in_staging(N, N, 4096, N / 2, block.chunk_bytes, 8)); /* mid-block */
    qm_hal *shim = NULL;
    const qm_backend_fault count = {.points = QM_BACKEND_FAULT_LAUNCH, .fail_at = 0,
                                    .code = QM_E_BACKEND};
    CHECK_OK(fixture_mesh_fault(2, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &count, &shim, &st));
    qm_state *ref = NULL, *staged = NULL, *chunky = NULL, *failed = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, two, 2, &mem, NULL, &ref, &st));
    qm_hal_fault_rearm(shim, 0);
    CHECK_OK(qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, two, 2, &rin, &block, &staged,
                                      &st));
    CHECK_EQ_U64(qm_hal_fault_calls(shim), 12);
    CHECK_EQ_U64(cr.values, N);
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, two, 2, &rin, &odd, &chunky,
                                      &st));
    double *a = ref ? read_all(ref, N) : NULL, *b = staged ? read_all(staged, N) : NULL,
           *c = chunky ? read_all(chunky, N) : NULL;
    CHECK(a && b && c && memcmp(a, b, N * 16) == 0 && memcmp(a, c, N * 16) == 0);
    /* launch 2 is the first chunk's sumsq, in the ingest */
    qm_hal_fault_rearm(shim, 2);
    CHECK(qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, two, 2, &rin, &block, &failed,
                                   &st) == QM_E_BACKEND);
    CHECK(qm_hal_fault_fired(shim) && failed == NULL);
    CHECK_STR(st.msg, "encode: shard 0: sumsq on d0: injected fault: kernel launch (counted call 2)");
    free(a), free(b), free(c), free(x);
    qm_state_destroy(ref), qm_state_destroy(staged), qm_state_destroy(chunky);
    CHECK_EQ_U64(qm_hal_bytes_in_use(shim), 0);
    qm_hal_destroy(shim);
}

/* A background reader (read_submit / read_wait, as the .npy reader's threads) whose reads land
 * only when waited for: a read still "in flight" writes into the ring at its wait, so a ring freed
 * before every read was waited for is a use-after-free (the sanitizer build). */
typedef struct late_read {
    uint64_t first, count;
    void *dst;
} late_read;

typedef struct late_reader {
    const double *x;
    uint64_t submitted, waited;
} late_reader;

static qm_code late_submit(void *ctx, uint64_t first, uint64_t count, void *dst, void **ticket,
                           qm_status *st)
{
    late_reader *r = ctx;
    late_read *t = malloc(sizeof *t);
    if (!t)
        return qm_fail(st, QM_E_NOMEM, "late reader: out of memory");
    *t = (late_read){first, count, dst};
    *ticket = t;
    r->submitted++;
    return QM_OK;
}

static qm_code late_wait(void *ctx, void *ticket, qm_status *st)
{
    late_reader *r = ctx;
    late_read *t = ticket;
    (void)st;
    memcpy(t->dst, r->x + t->first, (size_t)t->count * sizeof(double));
    free(t);
    r->waited++;
    return QM_OK;
}

static qm_code late_read_now(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    (void)st;
    memcpy(dst, ((late_reader *)ctx)->x + first, (size_t)count * sizeof(double));
    return QM_OK;
}

/* The ingest submits its first ring pieces' reads before it opens the device pipes (their
 * staging allocations): every device allocation of a reader-fed encode fails once in turn (a
 * 2^16 state over 2 shards: 2 ring pieces, both reads in flight when a pipe's allocation fails;
 * without the wait for them this test fails at those 2 points). Each failure is the injected code
 * with nothing left allocated and every submitted read waited for; the run after the last point
 * is bit-identical to the encode from memory. */
static void test_reads_before_pipes(void)
{
    qm_status st;
    const unsigned q = 16;
    const uint64_t N = (uint64_t)1 << q;
    double *x = malloc(N * sizeof *x);
    for (uint64_t i = 0; i < N; ++i)
        x[i] = cos((double)i * 0.17) * (double)(1 + i % 3);
    qm_shard_spec two[2];
    equal_layout(q, 2, two);
    qm_amp_input mem = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = N};
    late_reader lr = {.x = x};
    qm_amp_input bg = {.dtype = QM_DTYPE_FLOAT64, .n = N, .read = late_read_now, .read_ctx = &lr,
                       .read_submit = late_submit, .read_wait = late_wait};
    qm_state *ref = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, two, 2, &mem, NULL, &ref, &st));
    qm_hal *shim = NULL;
    const qm_backend_fault count = {.points = QM_BACKEND_FAULT_ALLOC, .fail_at = 0,
                                    .code = QM_E_NOMEM};
    CHECK_OK(fixture_mesh_fault(2, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &count, &shim, &st));
    qm_state *s = NULL;
    CHECK_OK(qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, two, 2, &bg, NULL, &s, &st));
    const uint64_t points = qm_hal_fault_calls(shim);
    CHECK(points >= 4); /* 2 states, 2 pipes' staging at least */
    CHECK(lr.submitted > 0 && lr.submitted == lr.waited);
    qm_state_destroy(s);
    s = NULL;
    int failed = 0;
    for (uint64_t k = 1; k <= points; ++k) {
        lr.submitted = lr.waited = 0;
        qm_hal_fault_rearm(shim, k);
        qm_state *f = NULL;
        const qm_code rc = qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, two, 2, &bg, NULL,
                                                    &f, &st);
        failed += rc == QM_E_NOMEM;
        CHECK(rc == QM_E_NOMEM && f == NULL && qm_hal_fault_fired(shim));
        CHECK(lr.submitted == lr.waited);
        CHECK_EQ_U64(qm_hal_bytes_in_use(shim), 0);
        qm_state_destroy(f);
    }
    CHECK_EQ_U64((uint64_t)failed, points);
    qm_hal_fault_rearm(shim, points + 1);
    CHECK_OK(qm_materialize_amplitude(shim, q, QM_DTYPE_COMPLEX128, two, 2, &bg, NULL, &s, &st));
    double *a = ref ? read_all(ref, N) : NULL, *b = s ? read_all(s, N) : NULL;
    CHECK(a && b && memcmp(a, b, N * 16) == 0);
    free(a), free(b), free(x);
    qm_state_destroy(ref), qm_state_destroy(s);
    CHECK_EQ_U64(qm_hal_bytes_in_use(shim), 0);
    qm_hal_destroy(shim);
}

/* Prepared per-state host arrays (opts.host, as `qmesh encode` makes them while CUDA starts):
 * the same bytes as without; taken again by a later encode whose batch has no slow state (the
 * earlier encode's slow-path mark must not carry over: same bytes as a fresh run); a batch larger
 * than prepared makes its own; a state cut over 3 shards (many pieces: the prepared piece memory
 * grows) the same bytes; nothing kept by the encode (the owner's fini frees it all). */
static void test_prepared_host(void)
{
    qm_status st;
    const unsigned q = 6;
    const uint64_t B = 96, F = 50, N = 64, total = B * N;
    double *x = malloc(B * F * sizeof *x), *y = malloc(B * F * sizeof *y);
    for (uint64_t i = 0; i < B * F; ++i)
        y[i] = x[i] = cos((double)i * 0.31) * (double)(1 + i % 5);
    x[40 * F + 7] = 1e300; /* sample 40 of x takes the slow path; y has none */
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B};
    qm_amp_input iny = in;
    iny.data = y;
    qm_shard_spec one[1] = {{0, 0, 0, total}};
    qm_materialize_host h;
    CHECK_OK(qm_materialize_host_prepare(&h, B, &st));
    CHECK(h.states == B && h.pieces_cap == (int)B);
    qm_materialize_opts with = {.host = &h};
    qm_state *ref = NULL, *got = NULL, *refy = NULL, *goty = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &in, NULL, &ref, &st));
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &in, &with, &got, &st));
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &iny, NULL, &refy, &st));
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &iny, &with, &goty, &st));
    CHECK(h.states == B && h.pieces != NULL); /* given back */
    double *a = malloc(total * 16), *b = malloc(total * 16);
    if (ref && got && refy && goty && a && b) {
        CHECK_OK(qm_state_read(ref, 0, total, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(got, 0, total, QM_DTYPE_COMPLEX128, b, &st));
        CHECK(memcmp(a, b, total * 16) == 0);
        CHECK_OK(qm_state_read(refy, 0, total, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(goty, 0, total, QM_DTYPE_COMPLEX128, b, &st));
        CHECK(memcmp(a, b, total * 16) == 0);
    }
    qm_state_destroy(got);
    qm_state_destroy(goty);
    /* one 2^12 state over 3 unequal shards: 3 + more pieces than the 1 prepared state holds */
    double v[3000];
    for (int i = 0; i < 3000; ++i)
        v[i] = sin(i * 0.9) + 0.25;
    qm_amp_input one_state = {.dtype = QM_DTYPE_FLOAT64, .data = v, .n = 3000};
    qm_shard_spec cut[3] = {{0, 0, 0, 1000}, {0, 1, 1000, 1024}, {0, 2, 1024, 4096}};
    qm_materialize_host h1;
    CHECK_OK(qm_materialize_host_prepare(&h1, 1, &st));
    qm_materialize_opts w1 = {.host = &h1};
    qm_state *c0 = NULL, *c1 = NULL;
    CHECK_OK(qm_materialize_amplitude(mesh8, 12, QM_DTYPE_COMPLEX128, cut, 3, &one_state, NULL, &c0,
                                      &st));
    CHECK_OK(qm_materialize_amplitude(mesh8, 12, QM_DTYPE_COMPLEX128, cut, 3, &one_state, &w1, &c1,
                                      &st));
    CHECK(h1.pieces_cap > 1); /* grew in the encode, given back grown */
    if (c0 && c1 && a && b) {
        CHECK_OK(qm_state_read(c0, 0, 4096, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(c1, 0, 4096, QM_DTYPE_COMPLEX128, b, &st));
        CHECK(memcmp(a, b, 4096 * 16) == 0);
    }
    /* more states than prepared: the encode makes its own arrays, h1 untouched */
    const int cap1 = h1.pieces_cap;
    CHECK_OK(qm_materialize_amplitude(mesh8, q, QM_DTYPE_COMPLEX128, one, 1, &iny, &w1, &got, &st));
    CHECK(h1.states == 1 && h1.pieces_cap == cap1);
    if (got && refy && a && b) {
        CHECK_OK(qm_state_read(refy, 0, total, QM_DTYPE_COMPLEX128, a, &st));
        CHECK_OK(qm_state_read(got, 0, total, QM_DTYPE_COMPLEX128, b, &st));
        CHECK(memcmp(a, b, total * 16) == 0);
    }
    qm_materialize_host h0;
    CHECK(qm_materialize_host_prepare(&h0, 0, &st) == QM_E_ARG && h0.states == 0 && !h0.sums);
    CHECK_STR(st.msg, "encode: host arrays for 0 states (1 to 2147483647)");
    qm_state_destroy(got);
    qm_state_destroy(ref);
    qm_state_destroy(refy);
    qm_state_destroy(c0);
    qm_state_destroy(c1);
    qm_materialize_host_fini(&h);
    qm_materialize_host_fini(&h1);
    free(a);
    free(b);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    qm_status st;
    if (fixture_mesh(8, (uint64_t)1 << 30, true, QM_SIM_MATERIALIZED, &mesh8, &st) != QM_OK) {
        fprintf(stderr, "%s\n", st.msg);
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
        int rc = dump_state(argv[2]);
        qm_hal_destroy(mesh8);
        return rc;
    }
    test_conformance_16();
    test_layouts_bit_identical();
    test_extremes();
    test_float32_complex64();
    test_bad_input();
    test_replicated();
    test_batch_and_chunks();
    test_device_input();
    test_sums_in_staging();
    test_reads_before_pipes();
    test_prepared_host();
    test_streamed_stores();
    test_thread_counts(argv[0]);
    CHECK_EQ_U64(qm_hal_bytes_in_use(mesh8), 0);
    qm_hal_destroy(mesh8);
    return qm_test_end("test_materialize");
}
