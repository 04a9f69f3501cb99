/* test_stream_api.c — the public stream of qmesh.h (qm_stream_*), end to end on the simulator.
 *
 * Checked: each batch's amplitudes are the bytes of the one-shot encode's rows (host rows and a
 * .npy file; amplitude and angle; float32 and float64; batch sizes 1, a divisor, a non-divisor and
 * more than the data; prefetch 0..4), the end of the data (QM_OK with no state, again and again),
 * the info (batches, last batch's samples, buffers), the memory bound (the input held at most
 * prefetch + 1 batches on a file 100 batches long, the device high-water mark one batch's state),
 * states that outlive the stream and the scenario, an early close with the reader waiting for a
 * buffer, a NaN in batch 2 named by its global sample and sticky, bad arguments with their
 * messages. The reader thread runs in every file case: the test is labelled concurrency.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "qmesh.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

/* A C-order .npy file of rows x cols (float32 when f32, else float64) from v. */
static void write_npy(const char *path, const double *v, uint64_t rows, uint64_t cols, int f32)
{
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %llu), }",
                     f32 ? "<f4" : "<f8", (unsigned long long)rows, (unsigned long long)cols);
    while ((10 + n + 1) % 64)
        hdr[n++] = ' ';
    hdr[n++] = '\n';
    const size_t es = f32 ? 4 : 8, data = (size_t)(rows * cols) * es;
    unsigned char *b = malloc(10 + (size_t)n + data);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(n & 0xff);
    b[9] = (unsigned char)(n >> 8);
    memcpy(b + 10, hdr, (size_t)n);
    for (uint64_t i = 0; i < rows * cols; ++i) {
        if (f32) {
            const float f = (float)v[i];
            memcpy(b + 10 + n + i * 4, &f, 4);
        } else {
            memcpy(b + 10 + n + i * 8, &v[i], 8);
        }
    }
    qm_test_write_file(path, b, 10 + (size_t)n + data);
    free(b);
}

/* Options for the simulator: batch_size B, prefetch p. */
static qm_stream_options sim_opts(uint64_t B, int p)
{
    qm_stream_options o;
    qm_stream_options_init(&o);
    o.batch_size = B;
    o.prefetch = p;
    o.backend = QM_BACKEND_SIM;
    return o;
}

/* The one-shot encode of rows x features (host data) as bytes (malloc'd), *bytes its size. */
static unsigned char *one_shot(const qm_scenario *sc, qm_request req, const qm_host_data *in,
                               size_t *bytes)
{
    qm_context *ctx = NULL;
    qm_state *s = NULL;
    unsigned char *out = NULL;
    req.batch = in->rows;
    req.features = in->features;
    CHECK_OK(qm_context_create(sc, &req, &ctx, NULL));
    CHECK_OK(qm_context_open(ctx, QM_BACKEND_SIM, NULL));
    CHECK_OK(qm_context_encode(ctx, in, &s, NULL));
    const uint64_t n = in->rows << req.qubits;
    *bytes = (size_t)n * qm_dtype_size(req.dtype);
    out = malloc(*bytes);
    CHECK_OK(qm_state_read(s, 0, n, req.dtype, out, NULL));
    qm_state_destroy(s);
    qm_context_destroy(ctx);
    return out;
}

/* Stream `in` (host rows, or the file `path` holding them) in batches of B and compare every
 * batch's bytes with the one-shot encode; keep_states: keep every state until after the close. */
static void stream_case(const char *name, const qm_scenario *sc, const qm_request *req,
                        const qm_host_data *in, const char *path, uint64_t B, int prefetch,
                        int keep_states)
{
    const qm_stream_options o = sim_opts(B, prefetch);
    qm_stream *s = NULL;
    qm_status st;
    qm_status_clear(&st);
    const qm_code rc = path ? qm_stream_open_file(sc, req, path, &o, &s, &st)
                            : qm_stream_open_host(sc, req, in, &o, &s, &st);
    CHECK(rc == QM_OK);
    if (rc != QM_OK) {
        fprintf(stderr, "%s: %s\n", name, st.msg);
        return;
    }
    qm_stream_info info;
    CHECK_OK(qm_stream_info_query(s, &info, NULL));
    qm_request one = *req;
    one.qubits = info.qubits; /* the stream's (a request of 0 qubits takes them from the input) */
    size_t ref_bytes = 0;
    unsigned char *ref = one_shot(sc, one, in, &ref_bytes);
    const uint64_t N = (uint64_t)1 << one.qubits, eb = qm_dtype_size(req->dtype);
    const uint64_t Beff = B < in->rows ? B : in->rows, batches = (in->rows + Beff - 1) / Beff;
    qm_state *kept[64] = {0};
    uint64_t k = 0, row = 0;
    int same = 1;
    for (;; ++k) {
        qm_state *state = NULL;
        CHECK_OK(qm_stream_next(s, &state, NULL));
        if (!state)
            break;
        const uint64_t rows = in->rows - row < Beff ? in->rows - row : Beff;
        unsigned char *got = malloc((size_t)(rows * N * eb));
        CHECK_OK(qm_state_read(state, 0, rows * N, req->dtype, got, NULL));
        same &= memcmp(got, ref + row * N * eb, (size_t)(rows * N * eb)) == 0;
        free(got);
        CHECK_OK(qm_stream_info_query(s, &info, NULL));
        CHECK_EQ_U64(info.last_first_sample, row);
        CHECK_EQ_U64(info.last_rows, rows);
        row += rows;
        if (keep_states && k < 64)
            kept[k] = state;
        else
            qm_state_destroy(state);
    }
    CHECK(same);
    CHECK_EQ_U64(k, batches);
    CHECK_EQ_U64(row, in->rows);
    qm_state *again = (qm_state *)1;
    CHECK_OK(qm_stream_next(s, &again, NULL)); /* the end stays the end */
    CHECK(again == NULL);
    CHECK_OK(qm_stream_info_query(s, &info, NULL));
    CHECK_EQ_U64(info.samples, in->rows);
    CHECK_EQ_U64(info.batches, batches);
    CHECK_EQ_U64(info.batches_done, batches);
    CHECK_EQ_U64(info.batch_size, Beff);
    CHECK_EQ_U64((uint64_t)info.input_buffers, path ? (uint64_t)prefetch + 1 : 0);
    CHECK(info.input_bytes_peak <= (uint64_t)info.input_buffers * info.batch_input_bytes);
    qm_stream_close(s);
    /* states outlive the stream */
    for (uint64_t i = 0; i < k && i < 64 && keep_states; ++i) {
        const uint64_t first = i * Beff, rows = in->rows - first < Beff ? in->rows - first : Beff;
        unsigned char *got = malloc((size_t)(rows * N * eb));
        CHECK_OK(qm_state_read(kept[i], 0, rows * N, req->dtype, got, NULL));
        CHECK(memcmp(got, ref + first * N * eb, (size_t)(rows * N * eb)) == 0);
        free(got);
        qm_state_destroy(kept[i]);
    }
    if (!same)
        fprintf(stderr, "%s: batches differ from the one-shot encode\n", name);
    free(ref);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_stream_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    qm_scenario *sc = NULL;
    CHECK_OK(qm_scenario_open(NULL, &sc, NULL));
    char path[128], path32[128], big[128];

    /* 37 rows of 16 values (float64 and float32) */
    enum { R = 37, F = 16 };
    double *v = malloc(sizeof(double) * R * F);
    float *v32 = malloc(sizeof(float) * R * F);
    for (int i = 0; i < R * F; ++i) {
        v[i] = sin(0.37 * i) + 0.1 * (i % 7);
        v32[i] = (float)v[i];
    }
    snprintf(path, sizeof path, "%s/a64.npy", g_dir);
    snprintf(path32, sizeof path32, "%s/a32.npy", g_dir);
    write_npy(path, v, R, F, 0);
    write_npy(path32, v, R, F, 1);
    qm_request req;
    qm_request_init(&req);
    req.qubits = 4;
    req.dtype = QM_DTYPE_COMPLEX128;
    const qm_host_data h64 = {.dtype = QM_DTYPE_FLOAT64, .data = v, .rows = R, .features = F};
    const qm_host_data h32 = {.dtype = QM_DTYPE_FLOAT32, .data = v32, .rows = R, .features = F};
    const uint64_t sizes[] = {1, 4, 5, 37, 100};
    for (int i = 0; i < 5; ++i) {
        stream_case("host float64", sc, &req, &h64, NULL, sizes[i], 2, i % 2);
        stream_case("file float64", sc, &req, &h64, path, sizes[i], i % 5, i % 2 == 0);
    }
    req.dtype = QM_DTYPE_COMPLEX64;
    for (int i = 0; i < 5; ++i)
        stream_case("file float32", sc, &req, &h32, path32, sizes[i], 4 - i % 5, 1);
    /* qubits 0: from the input, as qmesh encode (16 values: 4 qubits) */
    req.qubits = 0;
    stream_case("qubits from the input", sc, &req, &h32, path32, 6, 1, 0);
    {
        qm_stream_options o;
        qm_stream_options_init(&o);
        qm_stream *s = NULL;
        qm_stream_info info;
        CHECK_OK(qm_stream_open_file(sc, &req, path32, &o, &s, NULL));
        CHECK_OK(qm_stream_info_query(s, &info, NULL));
        CHECK_EQ_U64(info.qubits, 4);
        CHECK_EQ_U64(info.features, 16);
        CHECK_EQ_U64((uint64_t)info.input_ndim, 2);
        CHECK_EQ_U64(info.batch_size, 37); /* 1024 asked, 37 samples: one batch */
        CHECK_EQ_U64(info.batches, 1);
        qm_stream_close(s);
    }

    /* angle: 6 values per sample, 6 qubits */
    double ang[23 * 6];
    for (int i = 0; i < 23 * 6; ++i)
        ang[i] = cos(0.3 * i);
    char pang[128];
    snprintf(pang, sizeof pang, "%s/ang.npy", g_dir);
    write_npy(pang, ang, 23, 6, 0);
    qm_request ra;
    qm_request_init(&ra);
    ra.encoding = QM_ENCODING_ANGLE;
    ra.qubits = 6;
    ra.dtype = QM_DTYPE_COMPLEX128;
    const qm_host_data hang = {.dtype = QM_DTYPE_FLOAT64, .data = ang, .rows = 23, .features = 6};
    stream_case("angle host", sc, &ra, &hang, NULL, 5, 2, 1);
    stream_case("angle file", sc, &ra, &hang, pang, 5, 3, 0);

    /* the memory bound: 6400 rows of 64 float64 (3.1 MiB), batches of 64 rows (32 KiB) */
    enum { BR = 6400, BF = 64, BB = 64 };
    double *bv = malloc(sizeof(double) * BR * BF);
    for (int i = 0; i < BR * BF; ++i)
        bv[i] = 0.5 + sin(0.01 * i);
    snprintf(big, sizeof big, "%s/big.npy", g_dir);
    write_npy(big, bv, BR, BF, 0);
    qm_request rb;
    qm_request_init(&rb);
    rb.qubits = 6;
    rb.dtype = QM_DTYPE_COMPLEX64;
    for (int prefetch = 0; prefetch <= 4; ++prefetch) {
        const qm_stream_options o = sim_opts(BB, prefetch);
        qm_stream *s = NULL;
        CHECK_OK(qm_stream_open_file(sc, &rb, big, &o, &s, NULL));
        uint64_t n = 0;
        for (qm_state *state = NULL; s && qm_stream_next(s, &state, NULL) == QM_OK && state; ++n)
            qm_state_destroy(state);
        qm_stream_info info;
        CHECK_OK(qm_stream_info_query(s, &info, NULL));
        const uint64_t batch_bytes = (uint64_t)BB * BF * 8, state_bytes = (uint64_t)BB * 64 * 8;
        CHECK_EQ_U64(n, BR / BB);
        CHECK_EQ_U64(info.batch_input_bytes, batch_bytes);
        CHECK_EQ_U64((uint64_t)info.input_buffers, (uint64_t)prefetch + 1);
        /* the file is 100 batches: the input held never exceeds prefetch + 1 of them */
        CHECK(info.input_bytes_peak >= batch_bytes);
        CHECK(info.input_bytes_peak <= ((uint64_t)prefetch + 1) * batch_bytes);
        CHECK(info.input_bytes_peak % batch_bytes == 0);
        /* one batch's state at a time on the devices (plus its block sums) */
        CHECK(info.device_bytes_peak >= state_bytes);
        CHECK(info.device_bytes_peak < 2 * state_bytes);
        if (prefetch == 0)
            CHECK_EQ_U64(info.input_bytes_peak, batch_bytes);
        qm_stream_close(s);
    }
    /* an early close: the reader is waiting for a free buffer (prefetch 4, one batch taken) */
    for (int rep = 0; rep < 20; ++rep) {
        qm_stream_options o;
        qm_stream_options_init(&o);
        o.batch_size = BB;
        o.prefetch = 1 + rep % 4;
        qm_stream *s = NULL;
        qm_state *first = NULL;
        CHECK_OK(qm_stream_open_file(sc, &rb, big, &o, &s, NULL));
        CHECK_OK(qm_stream_next(s, &first, NULL));
        CHECK(first != NULL);
        qm_stream_close(s);
        CHECK_EQ_U64(qm_state_qubits(first), 6); /* still valid */
        qm_state_destroy(first);
    }
    /* a stream opened and closed before any batch */
    {
        qm_stream_options o;
        qm_stream_options_init(&o);
        o.batch_size = 3;
        qm_stream *s = NULL;
        CHECK_OK(qm_stream_open_file(sc, &rb, big, &o, &s, NULL));
        qm_stream_close(s);
    }

    /* a NaN in sample 7 (batch 2 of batches of 3): batches 0 and 1, then E-INPUT, sticky */
    double nanrows[10 * 4];
    for (int i = 0; i < 40; ++i)
        nanrows[i] = 1.0 + i;
    nanrows[7 * 4 + 2] = NAN;
    char pnan[128];
    snprintf(pnan, sizeof pnan, "%s/nan.npy", g_dir);
    write_npy(pnan, nanrows, 10, 4, 0);
    qm_request rn;
    qm_request_init(&rn);
    rn.qubits = 2;
    for (int file = 0; file < 2; ++file) {
        qm_stream_options o;
        qm_stream_options_init(&o);
        o.batch_size = 3;
        const qm_host_data hn = {.dtype = QM_DTYPE_FLOAT64, .data = nanrows, .rows = 10, .features = 4};
        qm_stream *s = NULL;
        CHECK_OK(file ? qm_stream_open_file(sc, &rn, pnan, &o, &s, NULL)
                      : qm_stream_open_host(sc, &rn, &hn, &o, &s, NULL));
        qm_state *a = NULL, *b = NULL, *c = (qm_state *)1;
        qm_status st;
        CHECK_OK(qm_stream_next(s, &a, NULL));
        CHECK_OK(qm_stream_next(s, &b, NULL));
        CHECK(qm_stream_next(s, &c, &st) == QM_E_INPUT);
        CHECK(c == NULL);
        CHECK_STR(st.msg, "encode: zero or non-finite norm: sample 7, feature 2 is NaN");
        qm_status_clear(&st);
        CHECK(qm_stream_next(s, &c, &st) == QM_E_INPUT);
        CHECK_STR(st.msg, "encode: zero or non-finite norm: sample 7, feature 2 is NaN");
        qm_stream_info info;
        CHECK_OK(qm_stream_info_query(s, &info, NULL));
        CHECK_EQ_U64(info.batches_done, 2);
        qm_stream_close(s);
        qm_state_destroy(a);
        qm_state_destroy(b);
    }

    /* bad arguments */
    {
        qm_stream_options o;
        qm_stream_options_init(&o);
        CHECK_EQ_U64(o.batch_size, 1024);
        CHECK_EQ_U64((uint64_t)o.prefetch, 2);
        qm_stream *s = (qm_stream *)1;
        qm_status st;
        o.batch_size = 0;
        CHECK(qm_stream_open_file(sc, &req, path, &o, &s, &st) == QM_E_ARG);
        CHECK(s == NULL);
        CHECK_STR(st.msg, "stream: batch_size must be at least 1 (got 0)");
        o.batch_size = 4;
        o.prefetch = 65;
        CHECK(qm_stream_open_host(sc, &req, &h64, &o, &s, &st) == QM_E_ARG);
        CHECK_STR(st.msg, "stream: prefetch must be 0..64 (got 65)");
        o.prefetch = -1;
        CHECK(qm_stream_open_file(sc, &req, path, &o, &s, &st) == QM_E_ARG);
        CHECK_STR(st.msg, "stream: prefetch must be 0..64 (got -1)");
        o.prefetch = 2;
        CHECK(qm_stream_open_file(sc, &req, NULL, &o, &s, &st) == QM_E_ARG);
        CHECK_STR(st.msg, "stream: scenario, request, path and out must not be NULL");
        CHECK(qm_stream_open_file(sc, &req, path, NULL, &s, &st) == QM_E_ARG);
        CHECK_STR(st.msg, "stream: options must not be NULL");
        char missing[160];
        snprintf(missing, sizeof missing, "%s/missing.npy", g_dir);
        CHECK(qm_stream_open_file(sc, &req, missing, &o, &s, &st) == QM_E_IO);
        CHECK(strstr(st.msg, "missing.npy: cannot open for reading: No such file or directory") != NULL);
        const qm_host_data hc = {.dtype = QM_DTYPE_COMPLEX64, .data = v, .rows = 2, .features = 2};
        CHECK(qm_stream_open_host(sc, &req, &hc, &o, &s, &st) == QM_E_DTYPE);
        CHECK_STR(st.msg, "stream: input dtype must be float32 or float64 (got complex64)");
        qm_state *none = NULL;
        CHECK(qm_stream_next(NULL, &none, &st) == QM_E_ARG);
        CHECK_STR(st.msg, "stream: stream and out must not be NULL");
        qm_stream_info info;
        CHECK(qm_stream_info_query(NULL, &info, &st) == QM_E_ARG);
        qm_stream_close(NULL);
    }

    qm_scenario_destroy(sc);
    free(v);
    free(v32);
    free(bv);
    char cmd[160], out[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    qm_test_run(cmd, out, sizeof out);
    return qm_test_end("test_stream_api");
}
