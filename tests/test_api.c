/* test_api.c — the public API of qmesh.h end to end: scenario, request, plan (feasible and not),
 * context on the simulator, encode from host memory and from CSV and .npy files, read-back,
 * gather, DLPack, bad arguments with their exact codes and messages, two threads each encoding
 * in its own context at once, and destroy orders (a state keeps its context alive).
 *
 * Expected amplitudes are computed here by the documented formula (x * (1 / sqrt(sum of squares)),
 * the sums exact for these inputs), independently of the engine, and compared bit for bit.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "backend.h" /* qm_backend_cuda_count: whether --cuda can run */
#include "qmesh.h"
#include "qmesh_dlpack.h"
#include "testlib.h"

#if QM_HAVE_CUDA
#include <cuda_runtime.h> /* --cuda: the device input is cudaMalloc'd memory */
#endif
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 2
#define FEATURES 5
#define AMPS 8

/* The backend the host-buffer test opens: the simulator, or CUDA with --cuda (then the amplitudes
 * must be the same bytes and the DLPack shard a kDLCUDA tensor). */
static qm_backend_kind g_backend = QM_BACKEND_SIM;

static const double rows[ROWS][FEATURES] = {{1, 2, 3, 4, 5}, {0.5, -1.5, 2.5, -3.5, 4.5}};
/* rows as a CSV file with a header row */
static const char rows_csv[] = "a,b,c,d,e\n1,2,3,4,5\n0.5,-1.5,2.5,-3.5,4.5\n";

static void expected(double out[ROWS * AMPS * 2])
{
    memset(out, 0, sizeof(double) * ROWS * AMPS * 2);
    for (int r = 0; r < ROWS; ++r) {
        double s = 0;
        for (int k = 0; k < FEATURES; ++k)
            s += rows[r][k] * rows[r][k];
        const double c = 1.0 / sqrt(s);
        for (int k = 0; k < FEATURES; ++k)
            out[2 * (r * AMPS + k)] = rows[r][k] * c;
    }
}

static qm_request request(void)
{
    qm_request r;
    qm_request_init(&r);
    r.qubits = 3;
    r.dtype = QM_DTYPE_COMPLEX128;
    r.batch = ROWS;
    r.features = FEATURES;
    return r;
}

static void check_state(const qm_state *s)
{
    double got[ROWS * AMPS * 2], want[ROWS * AMPS * 2];
    qm_status st;
    expected(want);
    CHECK_OK(qm_state_read(s, 0, ROWS * AMPS, QM_DTYPE_COMPLEX128, got, &st));
    CHECK(memcmp(got, want, sizeof got) == 0);
}

static void test_host_buffer(const qm_scenario *sc)
{
    qm_status st;
    qm_context *ctx = NULL;
    qm_state *s = NULL;
    const qm_request r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    qm_plan_info info;
    CHECK_OK(qm_context_plan_info(ctx, &info, &st));
    CHECK(info.feasible == 1 && info.error.code == QM_OK);
    CHECK_EQ_U64(info.amplitudes, ROWS * AMPS);
    CHECK_EQ_U64(info.state_bytes, ROWS * AMPS * 16);
    uint64_t pos = 0;
    for (int i = 0; i < info.n_shards; ++i) {
        qm_shard_info sh;
        CHECK_OK(qm_context_plan_shard(ctx, i, &sh, &st));
        CHECK_EQ_U64(sh.start, pos);
        pos = sh.end;
    }
    CHECK_EQ_U64(pos, ROWS * AMPS);
    char *json = NULL;
    CHECK_OK(qm_context_plan_json(ctx, &json, &st));
    CHECK(json && strstr(json, "\"feasible\": true") != NULL);
    qm_free(json);
    CHECK_OK(qm_context_open(ctx, g_backend, &st));
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = ROWS,
                             .features = FEATURES};
    CHECK_OK(qm_context_encode(ctx, &in, &s, &st));
    CHECK(s && qm_state_shard_count(s) == info.n_shards && qm_state_qubits(s) == 3);
    qm_traffic tr;
    CHECK_OK(qm_state_traffic(s, &tr, &st));
    /* back to the host: only the norms' block sums (8 B each), never the data */
    if (g_backend == QM_BACKEND_CUDA) /* host rows cross the host link once */
        CHECK(tr.h2d_bytes >= sizeof rows && tr.d2h_bytes < sizeof rows);
    else /* the simulator reads host rows in place */
        CHECK(tr.h2d_bytes == 0 && tr.d2h_bytes < sizeof rows);
    CHECK(qm_state_traffic(NULL, &tr, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "state_traffic: state and out must not be NULL");
    check_state(s);
    DLManagedTensor *t = NULL;
    CHECK_OK(qm_state_shard_to_dlpack(s, 0, &t, &st));
    CHECK(t && t->dl_tensor.ndim == 1 && t->dl_tensor.dtype.code == kDLComplex &&
          t->dl_tensor.dtype.bits == 128 &&
          t->dl_tensor.device.device_type == (g_backend == QM_BACKEND_CUDA ? kDLCUDA : kDLCPU));
    if (t)
        t->deleter(t);
    /* float32 input: the same request, its own amplitudes (each within float rounding) */
    float rows32[ROWS][FEATURES];
    for (int r0 = 0; r0 < ROWS; ++r0)
        for (int k = 0; k < FEATURES; ++k)
            rows32[r0][k] = (float)rows[r0][k];
    qm_state *s32 = NULL;
    const qm_host_data in32 = {.dtype = QM_DTYPE_FLOAT32, .data = rows32, .rows = ROWS,
                               .features = FEATURES};
    CHECK_OK(qm_context_encode(ctx, &in32, &s32, &st));
    check_state(s32); /* these float32 values are exact doubles: the same amplitudes */
    qm_state_destroy(s32);
    /* destroy order: the context first; the state keeps its backend */
    qm_context_destroy(ctx);
    check_state(s);
    qm_state *g = NULL;
    CHECK_OK(qm_state_gather(s, 0, &g, &st));
    qm_state_destroy(s);
    check_state(g); /* the gathered state keeps the backend too */
    qm_state_destroy(g);
}

/* Input rows in device memory: on the simulator a host pointer, on CUDA cudaMalloc'd memory of
 * GPU 0 (every logical device of the built-in mesh lives there, so every shard reads it in place).
 * The same amplitudes; a pointer no device holds is E-UNSUPPORTED naming it. */
static void test_device_buffer(const qm_scenario *sc)
{
    qm_status st;
    qm_context *ctx = NULL;
    qm_state *s = NULL;
    const qm_request r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    CHECK_OK(qm_context_open(ctx, g_backend, &st));
    const void *data = rows;
#if QM_HAVE_CUDA
    void *d = NULL;
    if (g_backend == QM_BACKEND_CUDA) {
        CHECK(cudaMalloc(&d, sizeof rows) == cudaSuccess &&
              cudaMemcpy(d, rows, sizeof rows, cudaMemcpyHostToDevice) == cudaSuccess);
        data = d;
    }
#endif
    const qm_device_data in = {.dtype = QM_DTYPE_FLOAT64, .data = data, .rows = ROWS,
                               .features = FEATURES};
    CHECK_OK(qm_context_encode_device(ctx, &in, &s, &st));
    qm_traffic tr;
    if (s) { /* read where it lies: no input byte crossed the host link, only the norms' sums */
        CHECK_OK(qm_state_traffic(s, &tr, &st));
        CHECK(tr.h2d_bytes == 0 && tr.d2h_bytes < sizeof rows);
        check_state(s);
    }
    qm_state_destroy(s);
    s = NULL;
    if (g_backend == QM_BACKEND_CUDA) { /* host memory is no device's memory on CUDA */
        const qm_device_data host = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = ROWS,
                                     .features = FEATURES};
        CHECK(qm_context_encode_device(ctx, &host, &s, &st) == QM_E_UNSUPPORTED && s == NULL);
        CHECK(strstr(st.msg, "is not memory of any of this context's 4 devices") != NULL);
        CHECK(strstr(st.msg, "is host memory, not memory of GPU 0") != NULL);
    }
    const qm_device_data bad = {.dtype = QM_DTYPE_COMPLEX64, .data = data, .rows = ROWS,
                                .features = FEATURES};
    CHECK(qm_context_encode_device(ctx, &bad, &s, &st) == QM_E_DTYPE);
    CHECK_STR(st.msg, "encode: input dtype must be float32 or float64 (got complex64)");
#if QM_HAVE_CUDA
    cudaFree(d);
#endif
    qm_context_destroy(ctx);
}

/* Write `n` bytes to path, encode the file, check its amplitudes, remove it. */
static void encode_file(qm_context *ctx, const char *path, const void *bytes, size_t n)
{
    qm_status st;
    qm_state *s = NULL;
    qm_test_write_file(path, bytes, n);
    uint64_t nr = 0, nf = 0;
    int ndim = 0;
    qm_dtype dt = QM_DTYPE_COMPLEX64;
    CHECK_OK(qm_input_file_shape(path, &nr, &nf, &ndim, &dt, &st)); /* what the request needs */
    CHECK(nr == ROWS && nf == FEATURES && ndim == 2 && dt == QM_DTYPE_FLOAT64);
    CHECK_OK(qm_context_encode_file(ctx, path, &s, &st));
    if (s)
        check_state(s);
    qm_state_destroy(s);
    unlink(path);
}

static void test_files(const qm_scenario *sc)
{
    char dir[] = "/tmp/qm_test_api_XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    qm_status st;
    qm_context *ctx = NULL;
    const qm_request r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    CHECK_OK(qm_context_open(ctx, QM_BACKEND_AUTO, &st));
    /* CSV with a header row */
    snprintf(path, sizeof path, "%s/in.csv", dir);
    encode_file(ctx, path, rows_csv, sizeof rows_csv - 1);
    /* .npy, version 1.0, little-endian float64 (2, 5) */
    snprintf(path, sizeof path, "%s/in.npy", dir);
    char hdr[128];
    const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 5), }";
    const size_t total = 10 + sizeof dict - 1 + 1, pad = (64 - total % 64) % 64;
    const size_t hlen = sizeof dict - 1 + pad + 1;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(hlen & 0xFF);
    hdr[9] = (char)(hlen >> 8);
    memcpy(hdr + 10, dict, sizeof dict - 1);
    memset(hdr + 10 + sizeof dict - 1, ' ', pad);
    hdr[10 + hlen - 1] = '\n';
    char file[256];
    memcpy(file, hdr, 10 + hlen);
    memcpy(file + 10 + hlen, rows, sizeof rows);
    encode_file(ctx, path, file, 10 + hlen + sizeof rows);
    /* a missing file */
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    qm_state *s = (qm_state *)&st; /* must be reset to NULL */
    CHECK(qm_context_encode_file(ctx, path, &s, &st) == QM_E_IO && s == NULL);
    CHECK(qm_input_file_shape(path, NULL, NULL, NULL, NULL, &st) == QM_E_IO);
    CHECK(qm_input_file_shape(NULL, NULL, NULL, NULL, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "input: path must not be NULL");
    qm_context_destroy(ctx);
    rmdir(dir);
}

/* qm_context_plan_data_path (docs/planner.md "Data path"): read and write in the plan's JSON on
 * the built-in mesh's default storage (6 GB/s read, 2 GB/s write); a file of another shape; NULL. */
static bool json_has_real(const char *json, const char *key, double v)
{
    char want[96];
    snprintf(want, sizeof want, "\"%s\": ", key);
    const char *at = json ? strstr(json, want) : NULL;
    return at && strtod(at + strlen(want), NULL) == v; /* jansson writes 17 digits: exact */
}

static void test_data_path(const qm_scenario *sc)
{
    char dir[] = "/tmp/qm_test_api_XXXXXX", path[128], out[128], other[128];
    CHECK(mkdtemp(dir) != NULL);
    qm_status st;
    qm_context *ctx = NULL;
    const qm_request r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    snprintf(path, sizeof path, "%s/dp.csv", dir);
    const char csv[] = "1,2,3,4,5\n6,7,8,9,10\n"; /* 2 rows of 5: 21 bytes of text */
    qm_test_write_file(path, csv, sizeof csv - 1);
    snprintf(out, sizeof out, "%s/o.npy", dir);
    char *json = NULL;
    setenv("QM_INPUT_RESIDENT", "0", 1); /* read from storage (the residency test hook) */
    CHECK_OK(qm_context_plan_data_path(ctx, path, NULL, 0, QM_BACKEND_SIM, &st));
    unsetenv("QM_INPUT_RESIDENT");
    CHECK_OK(qm_context_plan_json(ctx, &json, &st));
    CHECK(json_has_real(json, "read", 21 / 6e9));
    CHECK(json_has_real(json, "staging", 10 * 8 / 10e9)); /* the simulator's host copy */
    CHECK(json && strstr(json, "\"write\": null") != NULL);
    qm_free(json);
    /* replaced: an output only (2 x 8 complex128 = 256 B + the 128-byte header), no input */
    CHECK_OK(qm_context_plan_data_path(ctx, NULL, out, 0, QM_BACKEND_CUDA, &st));
    CHECK_OK(qm_context_plan_json(ctx, &json, &st));
    CHECK(json && strstr(json, "\"read\": null") != NULL && strstr(json, "\"staging\": null"));
    CHECK(json && strstr(json, "\"write\": null") == NULL && access(out, F_OK) != 0);
    qm_free(json);
    snprintf(other, sizeof other, "%s/other.csv", dir);
    qm_test_write_file(other, "1,2,3\n4,5,6\n", 12);
    CHECK(qm_context_plan_data_path(ctx, other, NULL, 0, QM_BACKEND_SIM, &st) == QM_E_INPUT);
    char want[256];
    snprintf(want, sizeof want, "context: %s holds 2 rows of 3 values but the plan is for 2 of 5",
             other);
    CHECK_STR(st.msg, want);
    CHECK(qm_context_plan_data_path(NULL, path, NULL, 0, QM_BACKEND_SIM, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "context: ctx must not be NULL");
    qm_context_destroy(ctx);
    unlink(path);
    unlink(other);
    rmdir(dir);
}

static void test_infeasible(void)
{
    qm_status st;
    qm_context *ctx = NULL;
    qm_scenario *sc = NULL;
    CHECK_OK(qm_scenario_open(NULL, &sc, &st));
    qm_request r = request();
    r.qubits = 40; /* 16 TiB of complex128 per state: more than the built-in mesh holds */
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    qm_scenario_destroy(sc); /* the context keeps it alive */
    qm_plan_info info;
    CHECK_OK(qm_context_plan_info(ctx, &info, &st));
    CHECK(info.feasible == 0 && info.error.code == QM_E_CAPACITY);
    char *json = NULL;
    CHECK_OK(qm_context_plan_json(ctx, &json, &st));
    CHECK(json && strstr(json, "\"feasible\": false") != NULL);
    qm_free(json);
    CHECK(qm_context_open(ctx, QM_BACKEND_SIM, &st) == QM_E_CAPACITY);
    CHECK(strncmp(st.msg, "layout: the plan is not feasible: ", 34) == 0);
    qm_context_destroy(ctx);
}

static void test_bad_arguments(const qm_scenario *sc)
{
    qm_status st;
    qm_context *ctx = (qm_context *)&st;
    qm_request r = request();
    CHECK(qm_context_create(NULL, &r, &ctx, &st) == QM_E_ARG && ctx == NULL);
    CHECK_STR(st.msg, "context: scenario, request and out must not be NULL");
    r.qubits = 0;
    CHECK(qm_context_create(sc, &r, &ctx, &st) == QM_E_QUBITS && ctx == NULL);
    CHECK_STR(st.msg, "request: qubits must be at least 1 (got 0)");
    r.qubits = 64;
    CHECK(qm_context_create(sc, &r, &ctx, &st) == QM_E_QUBITS);
    CHECK_STR(st.msg, "request: 64 qubits of complex128 in this batch overflow 64-bit byte counts "
                      "(2^64 amplitudes x 16 B); at most 58 qubits");
    r = request();
    r.features = 9;
    CHECK(qm_context_create(sc, &r, &ctx, &st) == QM_E_INPUT);
    CHECK_STR(st.msg, "request: 9 features exceed the state vector size 8 (3 qubits); use at least "
                      "4 qubits");
    r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    qm_shard_info sh;
    CHECK(qm_context_plan_shard(ctx, 99, &sh, &st) == QM_E_ARG);
    CHECK(strstr(st.msg, "shard 99 is out of range") != NULL);
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = 1,
                             .features = FEATURES};
    qm_state *s = NULL;
    CHECK(qm_context_encode(ctx, &in, &s, &st) == QM_E_ARG && s == NULL);
    CHECK_STR(st.msg, "encode: the context has no backend (call qm_context_open first)");
    CHECK(qm_context_open(ctx, (qm_backend_kind)7, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "context: unknown backend 7 (use QM_BACKEND_SIM or QM_BACKEND_CUDA)");
    CHECK_OK(qm_context_open(ctx, QM_BACKEND_SIM, &st));
    CHECK(qm_context_open(ctx, QM_BACKEND_SIM, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "context: the backend is already open");
    CHECK(qm_context_encode(ctx, &in, &s, &st) == QM_E_INPUT && s == NULL);
    CHECK_STR(st.msg, "encode: the input has 1 rows of 5 values but the context was planned for 2 "
                      "rows of 5");
    const qm_host_data bad = {.dtype = QM_DTYPE_COMPLEX64, .data = rows, .rows = ROWS,
                              .features = FEATURES};
    CHECK(qm_context_encode(ctx, &bad, &s, &st) == QM_E_DTYPE);
    CHECK_STR(st.msg, "encode: input dtype must be float32 or float64 (got complex64)");
    CHECK(qm_context_encode(ctx, NULL, &s, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "encode: ctx, input and out must not be NULL");
    CHECK(qm_context_plan_info(NULL, NULL, &st) == QM_E_ARG);
    qm_scenario *x = (qm_scenario *)&st;
    CHECK(qm_scenario_open("/nonexistent/qm.yaml", &x, &st) == QM_E_IO && x == NULL);
    CHECK(qm_scenario_parse("schema: qmesh/1\nbogus: 1\n", 25, "t.yaml", &x, &st) != QM_OK &&
          x == NULL);
    CHECK_STR(st.file, "t.yaml");
    qm_context_destroy(ctx);
    qm_context_destroy(NULL);
    qm_scenario_destroy(NULL);
    CHECK_STR(qm_scenario_name(NULL), "");
}

typedef struct worker {
    const qm_scenario *sc;
    int ok;
} worker;

static void *encode_many(void *arg)
{
    worker *w = arg;
    qm_status st;
    const qm_request r = request();
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = ROWS,
                             .features = FEATURES};
    double want[ROWS * AMPS * 2], got[ROWS * AMPS * 2];
    expected(want);
    w->ok = 1;
    for (int i = 0; i < 20 && w->ok; ++i) {
        qm_context *ctx = NULL;
        qm_state *s = NULL;
        w->ok = qm_context_create(w->sc, &r, &ctx, &st) == QM_OK &&
                qm_context_open(ctx, QM_BACKEND_SIM, &st) == QM_OK &&
                qm_context_encode(ctx, &in, &s, &st) == QM_OK &&
                qm_state_read(s, 0, ROWS * AMPS, QM_DTYPE_COMPLEX128, got, &st) == QM_OK &&
                memcmp(got, want, sizeof got) == 0;
        qm_context_destroy(ctx); /* before the state: the state holds the last reference */
        qm_state_destroy(s);
    }
    return NULL;
}

/* qm_state_retain and the DLPack tensor's reference: the tensor's memory outlives every
 * qm_state_destroy of the caller, the context and the scenario, and is freed by its deleter
 * (leak checks of the ASan build prove the last). */
static void test_lifetime(void)
{
    qm_status st;
    qm_scenario *sc = NULL;
    qm_context *ctx = NULL;
    qm_state *s = NULL;
    CHECK_OK(qm_scenario_open(NULL, &sc, &st));
    const qm_request r = request();
    CHECK_OK(qm_context_create(sc, &r, &ctx, &st));
    CHECK_OK(qm_context_open(ctx, QM_BACKEND_SIM, &st));
    const qm_host_data in = {.dtype = QM_DTYPE_FLOAT64, .data = rows, .rows = ROWS,
                             .features = FEATURES};
    CHECK_OK(qm_context_encode(ctx, &in, &s, &st));
    CHECK(qm_state_retain(NULL) == NULL);
    CHECK(qm_state_retain(s) == s);
    qm_state_destroy(s); /* the retained reference keeps it */
    check_state(s);
    qm_shard_view v;
    CHECK_OK(qm_state_shard_view(s, 0, &v, &st));
    DLManagedTensor *t[2] = {NULL, NULL};
    for (int i = 0; i < 2; ++i)
        CHECK_OK(qm_state_shard_to_dlpack(s, 0, &t[i], &st));
    qm_context_destroy(ctx);
    qm_scenario_destroy(sc);
    qm_state_destroy(s); /* the caller's last reference: the tensors hold the state */
    CHECK(qm_shard_view_valid(&v) == 1);
    double want[ROWS * AMPS * 2];
    expected(want);
    CHECK(t[0] && t[1] && t[0]->dl_tensor.data == v.data && t[1]->dl_tensor.data == v.data);
    if (t[0])
        CHECK(memcmp(t[0]->dl_tensor.data, want, (size_t)v.length * 16) == 0);
    t[0]->deleter(t[0]);
    CHECK(qm_shard_view_valid(&v) == 1);
    t[1]->deleter(t[1]); /* the last reference: the state is gone */
    CHECK(qm_shard_view_valid(&v) == 0);
}

/* qm_devices_list: the built-in mesh's devices (SIM; AUTO without a GPU), the bad backend. */
static void test_devices(void)
{
    qm_status st;
    qm_device_info *d = NULL;
    int n = -1;
    qm_backend_kind k = QM_BACKEND_CUDA;
    CHECK_OK(qm_devices_list(QM_BACKEND_SIM, &d, &n, &k, &st));
    CHECK(n == 4 && k == QM_BACKEND_SIM);
    for (int i = 0; d && i < n; ++i) {
        char id[16];
        snprintf(id, sizeof id, "n0.g%d", i);
        CHECK(d[i].index == i && d[i].cuda_device == -1);
        CHECK_STR(d[i].id, id);
        CHECK(d[i].memory_bytes >= d[i].usable_bytes && d[i].usable_bytes > 0);
    }
    qm_free(d);
    if (qm_backend_cuda_count() == 0) {
        CHECK_OK(qm_devices_list(QM_BACKEND_AUTO, &d, &n, &k, &st));
        CHECK(n == 4 && k == QM_BACKEND_SIM);
        qm_free(d);
        CHECK(qm_devices_list(QM_BACKEND_CUDA, &d, &n, NULL, &st) == QM_E_UNSUPPORTED);
        CHECK(d == NULL && n == 0);
    }
    CHECK(qm_devices_list((qm_backend_kind)9, &d, &n, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG,
              "devices: unknown backend 9 (use QM_BACKEND_AUTO, QM_BACKEND_SIM or QM_BACKEND_CUDA)");
    CHECK(qm_devices_list(QM_BACKEND_SIM, NULL, &n, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "devices: out and count must not be NULL");
}

/* The threads of this process now (/proc/self/task), or once they are `expect` within 10 s: a
 * joined thread can stay listed a moment after pthread_join returns, so a count taken right after
 * a join waits for the expected value instead of depending on speed (a thread that never stops
 * fails the check after the bound). */
static int tasks_settled(int expect)
{
    int n = -1;
    for (int i = 0; i < 2000; ++i) {
        n = 0;
        DIR *d = opendir("/proc/self/task");
        if (!d)
            return -1;
        for (struct dirent *e; (e = readdir(d));)
            n += e->d_name[0] != '.';
        closedir(d);
        if (n == expect || expect < 0)
            return n;
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    }
    return n;
}

/* Every open context shares one pool of reader threads (QM_READ_THREADS of them), stopped with the
 * last context holding it; a stream's contexts take none (its reader thread reads the batches). */
static void test_read_pool(const qm_scenario *sc)
{
    qm_status st;
    const qm_request r = request();
    const int base = tasks_settled(-1);
    setenv("QM_READ_THREADS", "1", 1); /* one thread reads: no pool */
    qm_context *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(qm_context_create(sc, &r, &a, &st));
    CHECK_OK(qm_context_open(a, QM_BACKEND_SIM, &st));
    const int backend = tasks_settled(-1) - base; /* the backend's own threads, if any */
    qm_context_destroy(a);
    CHECK(tasks_settled(base) == base);
    setenv("QM_READ_THREADS", "3", 1);
    CHECK_OK(qm_context_create(sc, &r, &b, &st));
    CHECK_OK(qm_context_open(b, QM_BACKEND_SIM, &st));
    CHECK(tasks_settled(base + backend + 3) == base + backend + 3);
    CHECK_OK(qm_context_create(sc, &r, &c, &st));
    CHECK_OK(qm_context_open(c, QM_BACKEND_SIM, &st));
    CHECK(tasks_settled(base + 2 * backend + 3) == base + 2 * backend + 3); /* the same pool */
    qm_context_destroy(b);
    CHECK(tasks_settled(base + backend + 3) == base + backend + 3); /* c still holds it */
    char dir[] = "/tmp/qm_test_api_pool_XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/in.csv", dir);
    encode_file(c, path, rows_csv, sizeof rows_csv - 1); /* reads through the pool's context */
    /* fork: the child has none of the pool's threads; its own context starts a pool of its own,
     * the inherited one still encodes a file (with its reader's own threads) and is destroyed
     * without waiting for the parent's threads */
    fflush(NULL);
    const pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int bad = tasks_settled(1) != 1;
        qm_context *d = NULL;
        bad |= qm_context_create(sc, &r, &d, &st) != QM_OK ||
               qm_context_open(d, QM_BACKEND_SIM, &st) != QM_OK;
        bad |= tasks_settled(1 + backend + 3) != 1 + backend + 3;
        encode_file(c, path, rows_csv, sizeof rows_csv - 1);
        encode_file(d, path, rows_csv, sizeof rows_csv - 1);
        qm_context_destroy(d);
        bad |= tasks_settled(1 + backend) != 1 + backend; /* c keeps its backend, no pool */
        qm_context_destroy(c);
        bad |= tasks_settled(1) != 1;
        _exit(bad || qm_test_failures ? 1 : 0);
    }
    int status = -1;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(tasks_settled(base + backend + 3) == base + backend + 3); /* the parent's pool still runs */
    encode_file(c, path, rows_csv, sizeof rows_csv - 1);
    qm_context_destroy(c);
    CHECK(tasks_settled(base) == base); /* the last holder stopped the pool */
    /* a stream over a file: its reader thread beside its backend, whatever QM_READ_THREADS says
     * (5 batches of 1 sample, 2 buffers: the reader cannot finish before batches are taken) */
    const char csv5[] = "a,b,c,d,e\n1,2,3,4,5\n0.5,-1.5,2.5,-3.5,4.5\n1,2,3,4,5\n1,2,3,4,5\n"
                        "1,2,3,4,5\n";
    qm_test_write_file(path, csv5, sizeof csv5 - 1);
    qm_stream_options o;
    qm_stream_options_init(&o);
    o.batch_size = 1;
    o.prefetch = 1;
    o.backend = QM_BACKEND_SIM;
    qm_request sr = r;
    sr.batch = 0;
    qm_stream *sm = NULL;
    CHECK_OK(qm_stream_open_file(sc, &sr, path, &o, &sm, &st));
    CHECK(tasks_settled(base + backend + 1) == base + backend + 1); /* waits for a free buffer */
    qm_state *s1 = NULL;
    CHECK_OK(qm_stream_next(sm, &s1, &st));
    CHECK(s1 != NULL);
    qm_stream_close(sm);
    qm_state_destroy(s1);
    CHECK(tasks_settled(base) == base);
    unlink(path);
    rmdir(dir);
    unsetenv("QM_READ_THREADS");
}

static void test_threads(void)
{
    qm_status st;
    qm_scenario *sc = NULL;
    CHECK_OK(qm_scenario_open(NULL, &sc, &st));
    worker w[2] = {{.sc = sc}, {.sc = sc}};
    pthread_t t[2];
    for (int i = 0; i < 2; ++i)
        CHECK(pthread_create(&t[i], NULL, encode_many, &w[i]) == 0);
    for (int i = 0; i < 2; ++i) {
        pthread_join(t[i], NULL);
        CHECK(w[i].ok == 1);
    }
    qm_scenario_destroy(sc);
}

int main(int argc, char **argv)
{
    qm_status st;
    qm_scenario *sc = NULL;
    if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
        if (qm_backend_cuda_count() == 0) {
            printf("test_api --cuda: no CUDA device, skipped\n");
            return 77;
        }
        g_backend = QM_BACKEND_CUDA; /* the built-in mesh's devices as logical devices */
        CHECK_OK(qm_scenario_open(NULL, &sc, &st));
        test_host_buffer(sc);
        test_device_buffer(sc);
        qm_scenario_destroy(sc);
        return qm_test_end("test_api --cuda");
    }
    CHECK_OK(qm_scenario_open(NULL, &sc, &st));
    test_read_pool(sc); /* first: no thread of an earlier test can still be listed */
    CHECK_STR(qm_scenario_name(sc), "<built-in>");
    test_host_buffer(sc);
    test_device_buffer(sc);
    test_files(sc);
    test_data_path(sc);
    test_infeasible();
    test_bad_arguments(sc);
    qm_scenario_destroy(sc);
    test_lifetime();
    test_devices();
    test_threads();
    return qm_test_end("test_api");
}
