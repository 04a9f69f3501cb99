/* test_nccl.c — the NCCL communicators of hal/cuda/nccl_comm.h (label cuda; exit 77 without a GPU).
 *
 * First, checks that need no GPU: a simulated HAL and NULL arguments are refused (a build
 * without NCCL answers E-UNSUPPORTED with its configure hint instead, and stops there).
 * Then, on n >= 1 GPUs:
 *   - local: open over every GPU (size n; NCCL_NVLS_ENABLE forced from 1 to 0); an all-gather of
 *     1000 distinct doubles per device returns exactly those values in device order; gathers of
 *     distinct byte patterns (parts of different sizes, sent in 1000-byte pieces) into a buffer on
 *     device 0 and on device n-1, at an offset, give exactly the concatenation and leave the bytes
 *     around it alone; bounds and argument errors come with numbers before any NCCL call (no
 *     scratch allocated; the communicator still works after them); logical devices sharing a GPU
 *     are E-UNSUPPORTED naming "cuda:0.0" and "cuda:0.1"; no device memory is left in use.
 *   - rank: on a local comm (a world of one); on a threads comm, two ranks on one GPU fail on both
 *     ranks with the same E-UNSUPPORTED, and with n >= 2 GPUs, n ranks (one GPU each) all-gather
 *     and gather exactly, and a bounds error on the last rank only fails every rank with its message.
 * `--mpi` (labels cuda;mpi, under mpiexec): rank r uses GPU r % n; with at least as many GPUs as
 * ranks every rank's results are exact, otherwise every rank fails with the same E-UNSUPPORTED
 * naming ranks 0 and n.
 * Rank threads only record results; every CHECK runs on the main thread (testlib's counters are not
 * thread-safe).
 */
#define _POSIX_C_SOURCE 200809L

#include "cuda_backend.h"
#include "nccl_comm.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_VALUES 1000     /* doubles each device contributes to the all-gather */
#define PIECE_BYTES 1000  /* gather chunk limit in the tests: parts travel in several pieces */
#define DST_OFF 24        /* where gathers start in the destination */
#define FILL 0xEE         /* the destination's bytes outside the gathered range */
#define MAX_RANKS 8

static double value_of(int d, uint64_t i) { return d * 1e3 + (double)i * 0.5 + 0.25; }
static unsigned char byte_of(int d, uint64_t i) { return (unsigned char)(d * 37 + i * 11 + 5); }
/* Gather part of device (rank) d: all different, none a multiple of PIECE_BYTES. */
static uint64_t part_bytes(int d) { return 4099 + 1000 * (uint64_t)d; }
static uint64_t parts_total(int n) { return 4099 * (uint64_t)n + 1000 * (uint64_t)n * (n - 1) / 2; }

/* A device buffer of `bytes` on dev holding a copy of host; NULL on failure (st says why). */
static qm_hal_buf *buf_from(qm_hal *hal, int dev, const void *host, uint64_t bytes, qm_status *st)
{
    qm_hal_buf *b = NULL;
    if (qm_hal_buf_alloc(hal, dev, bytes, &b, st) == QM_OK &&
        qm_hal_copy_h2d(hal, b, 0, host, bytes, NULL, st) != QM_OK) {
        qm_hal_buf_free(hal, b);
        b = NULL;
    }
    return b;
}

/* n_values doubles value_of(d, i) on dev. */
static qm_hal_buf *values_buf(qm_hal *hal, int dev, int d, uint64_t n_values, qm_status *st)
{
    double *h = malloc(n_values * sizeof *h);
    if (!h)
        return NULL;
    for (uint64_t i = 0; i < n_values; ++i)
        h[i] = value_of(d, i);
    qm_hal_buf *b = buf_from(hal, dev, h, n_values * sizeof *h, st);
    free(h);
    return b;
}

/* Device d's gather part on dev; with `fill`, instead a destination for n parts: DST_OFF + the
 * parts + 8 bytes, all FILL. */
static qm_hal_buf *bytes_buf(qm_hal *hal, int dev, int d, int n, bool fill, qm_status *st)
{
    const uint64_t bytes = fill ? DST_OFF + parts_total(n) + 8 : part_bytes(d);
    unsigned char *h = malloc(bytes);
    if (!h)
        return NULL;
    for (uint64_t i = 0; i < bytes; ++i)
        h[i] = fill ? FILL : byte_of(d, i);
    qm_hal_buf *b = buf_from(hal, dev, h, bytes, st);
    free(h);
    return b;
}

static bool allgather_exact(const double *out, int n)
{
    for (int d = 0; d < n; ++d)
        for (uint64_t i = 0; i < N_VALUES; ++i)
            if (out[(uint64_t)d * N_VALUES + i] != value_of(d, i))
                return false;
    return true;
}

/* dst holds FILL up to DST_OFF, then the parts of devices 0..n-1 in order, then FILL. */
static bool gather_exact(qm_hal *hal, const qm_hal_buf *dst, int n)
{
    const uint64_t bytes = qm_hal_buf_bytes(dst);
    unsigned char *h = malloc(bytes);
    qm_status st;
    bool ok = h && qm_hal_copy_d2h(hal, h, dst, 0, bytes, NULL, &st) == QM_OK;
    uint64_t at = 0;
    for (; ok && at < DST_OFF; ++at)
        ok = h[at] == FILL;
    for (int d = 0; ok && d < n; ++d)
        for (uint64_t i = 0; ok && i < part_bytes(d); ++i)
            ok = h[at++] == byte_of(d, i);
    for (; ok && at < bytes; ++at)
        ok = h[at] == FILL;
    free(h);
    return ok;
}

/* ---- checks without a GPU -------------------------------------------------------------------- */

static void test_refusals(void)
{
    qm_status st;
    qm_hal *sim = NULL;
    qm_nccl *c = (qm_nccl *)&st; /* must come back NULL */
    qm_comm *comm = NULL;
    double out[1];
    CHECK_OK(fixture_mesh(2, (uint64_t)1 << 20, true, QM_SIM_MATERIALIZED, &sim, &st));
    CHECK_OK(qm_comm_local_create(&comm, &st));
    CHECK(qm_nccl_size(NULL) == 0);
    qm_nccl_close(NULL);
#if QM_HAVE_NCCL
    CHECK(qm_nccl_open_local(sim, &c, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, "nccl: the HAL is 'sim', not 'cuda'");
    CHECK(c == NULL);
    CHECK(qm_nccl_open_rank(sim, 0, comm, &c, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, "not 'cuda'; NCCL needs the CUDA backend");
    CHECK(qm_nccl_open_local(NULL, &c, &st) == QM_E_ARG);
    CHECK(qm_nccl_open_rank(NULL, 0, comm, &c, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "nccl: hal and out must not be NULL");
    CHECK(qm_nccl_allgather_f64_sync(NULL, NULL, 1, out, &st) == QM_E_ARG);
    CHECK(qm_nccl_gather_sync(NULL, NULL, 0, NULL, NULL, 0, &st) == QM_E_ARG);
    CHECK(qm_nccl_set_chunk_limit(NULL, 1, &st) == QM_E_ARG);
#else
    const char *hint = "nccl: this build has no NCCL (configure with QM_WITH_NCCL=ON";
    CHECK(qm_nccl_open_local(sim, &c, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, hint);
    CHECK(c == NULL);
    c = (qm_nccl *)&st;
    CHECK(qm_nccl_open_rank(sim, 0, comm, &c, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, hint);
    CHECK(c == NULL);
    CHECK(qm_nccl_allgather_f64_sync(NULL, NULL, 1, out, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, hint);
    CHECK(qm_nccl_gather_sync(NULL, NULL, 0, NULL, NULL, 0, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, hint);
    CHECK(qm_nccl_set_chunk_limit(NULL, 1, &st) == QM_E_UNSUPPORTED);
#endif
    qm_comm_destroy(comm);
    qm_hal_destroy(sim);
}

/* ---- the local communicator ------------------------------------------------------------------ */

/* Bounds and argument errors, reported before any NCCL call: nothing is allocated for them. */
static void test_local_refusals(qm_nccl *c, qm_hal *hal, qm_hal_buf **vals, qm_hal_buf **parts,
                                double *out)
{
    const int n = qm_nccl_size(c);
    const uint64_t in_use = qm_hal_bytes_in_use(hal);
    const qm_hal_buf *const *cv = (const qm_hal_buf *const *)vals;
    const qm_hal_buf *const *cp = (const qm_hal_buf *const *)parts;
    uint64_t bytes[MAX_RANKS];
    char want[160];
    qm_status st;
    qm_hal_device_info last;
    CHECK_OK(qm_hal_device_info_query(hal, n - 1, &last, &st));

    /* device 0's buffer holds exactly N_VALUES values (the others more) */
    CHECK(qm_nccl_allgather_f64_sync(c, cv, N_VALUES + 1, out, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "nccl allgather on cuda:0: input range [0, +8008) is outside the "
                               "8000-byte buffer");

    for (int d = 0; d < n; ++d)
        bytes[d] = part_bytes(d);
    qm_hal_buf *small = NULL; /* exactly the parts, so DST_OFF more does not fit */
    CHECK_OK(qm_hal_buf_alloc(hal, 0, parts_total(n), &small, &st));
    CHECK(qm_nccl_gather_sync(c, small, DST_OFF, cp, bytes, 0, &st) == QM_E_BOUNDS);
    snprintf(want, sizeof want, "destination range [%d, +%llu) is outside the %llu-byte buffer",
             DST_OFF, (unsigned long long)parts_total(n), (unsigned long long)parts_total(n));
    CHECK_ERR(st, QM_E_BOUNDS, want);
    bytes[n - 1] += 1; /* one byte more than the last source holds */
    CHECK(qm_nccl_gather_sync(c, small, 0, cp, bytes, 0, &st) == QM_E_BOUNDS);
    snprintf(want, sizeof want, "nccl gather on %s: source range [0, +%llu) is outside the "
             "%llu-byte buffer", last.id, (unsigned long long)bytes[n - 1],
             (unsigned long long)part_bytes(n - 1));
    CHECK_ERR(st, QM_E_BOUNDS, want);
    bytes[n - 1] -= 1;
    CHECK(qm_nccl_gather_sync(c, small, 0, cp, bytes, n, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "nccl gather: root");
    CHECK_ERR(st, QM_E_ARG, "is outside the communicator");
    if (n >= 2) { /* the destination must live on the root */
        CHECK(qm_nccl_gather_sync(c, small, 0, cp, bytes, 1, &st) == QM_E_ARG);
        CHECK_ERR(st, QM_E_ARG, "the destination buffer of cuda:1 lives on HAL device 0, not 1");
    }
    CHECK(qm_nccl_set_chunk_limit(c, 0, &st) == QM_E_ARG);
    CHECK(qm_nccl_set_chunk_limit(c, QM_NCCL_CHUNK_MAX_BYTES + 1, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "nccl: chunk limit 2147483649 B is outside 1..2147483648 B");
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), in_use + parts_total(n)); /* no scratch left */
    qm_hal_buf_free(hal, small);

    /* the communicator still works */
    memset(out, 0, (size_t)n * N_VALUES * sizeof *out);
    CHECK_OK(qm_nccl_allgather_f64_sync(c, cv, N_VALUES, out, &st));
    CHECK(allgather_exact(out, n));
}

static void test_local(qm_hal *hal)
{
    const int n = qm_hal_device_count(hal);
    qm_status st;
    qm_nccl *c = NULL;
    setenv("NCCL_NVLS_ENABLE", "1", 1); /* overridden by the open */
    CHECK_OK(qm_nccl_open_local(hal, &c, &st));
    if (!c) {
        fprintf(stderr, "test_nccl: %s\n", st.msg);
        return;
    }
    CHECK_STR(getenv("NCCL_NVLS_ENABLE"), "0");
    CHECK(qm_nccl_size(c) == n);

    qm_hal_buf *vals[MAX_RANKS] = {0}, *parts[MAX_RANKS] = {0};
    uint64_t bytes[MAX_RANKS];
    double *out = calloc((size_t)n * N_VALUES, sizeof *out);
    for (int d = 0; d < n; ++d) { /* buffers longer than the part gathered, all different */
        vals[d] = values_buf(hal, d, d, N_VALUES + 16 * (uint64_t)d, &st);
        parts[d] = bytes_buf(hal, d, d, n, false, &st);
        bytes[d] = part_bytes(d);
        CHECK(vals[d] && parts[d]);
    }
    CHECK_OK(qm_nccl_allgather_f64_sync(c, (const qm_hal_buf *const *)vals, N_VALUES, out, &st));
    CHECK(allgather_exact(out, n));

    CHECK_OK(qm_nccl_set_chunk_limit(c, PIECE_BYTES, &st));
    const int roots[2] = {0, n - 1};
    for (int k = 0; k < 2; ++k) {
        qm_hal_buf *dst = bytes_buf(hal, roots[k], 0, n, true, &st);
        CHECK_OK(qm_nccl_gather_sync(c, dst, DST_OFF, (const qm_hal_buf *const *)parts, bytes,
                                     roots[k], &st));
        CHECK(gather_exact(hal, dst, n));
        qm_hal_buf_free(hal, dst);
    }
    test_local_refusals(c, hal, vals, parts, out);

    qm_nccl_close(c);
    for (int d = 0; d < n; ++d) {
        qm_hal_buf_free(hal, vals[d]);
        qm_hal_buf_free(hal, parts[d]);
    }
    free(out);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
}

/* Logical devices sharing a GPU: refused before NCCL is asked, naming the first two. */
static void test_local_shared_gpu(int n)
{
    qm_status st;
    qm_hal *hal = NULL;
    qm_nccl *c = NULL;
    CHECK_OK(qm_hal_cuda_open_logical(2 * n, &hal, &st)); /* cuda:0.0 and cuda:0.1 on GPU 0 */
    if (!hal)
        return;
    CHECK(qm_nccl_open_local(hal, &c, &st) == QM_E_UNSUPPORTED);
    CHECK_ERR(st, QM_E_UNSUPPORTED, "nccl: devices cuda:0.0 and cuda:0.1 share GPU 0; NCCL needs "
                                    "one GPU per device");
    CHECK(c == NULL);
    CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
    qm_hal_destroy(hal);
}

/* ---- the rank communicator ------------------------------------------------------------------- */

typedef struct rank_result {
    qm_code open_rc, bounds_rc, allgather_rc, gather_rc;
    char open_msg[QM_STATUS_MSG_BYTES], bounds_msg[QM_STATUS_MSG_BYTES];
    char fail_msg[QM_STATUS_MSG_BYTES]; /* the last unexpected failure */
    int size;
    bool allgather_exact, gather_exact;
    uint64_t in_use_after;
} rank_result;

/* One rank on HAL device dev: open; an all-gather whose count only the last rank's buffer is too
 * short for (every rank must fail with its E-BOUNDS); an exact all-gather; a gather of every rank's
 * part to the last rank in PIECE_BYTES pieces; close. Records everything in res. */
static void rank_body(qm_comm *comm, qm_hal *hal, int dev, rank_result *res)
{
    const int r = qm_comm_rank(comm), R = qm_comm_size(comm);
    qm_status st;
    qm_nccl *c = NULL;
    memset(res, 0, sizeof *res);
    qm_status_clear(&st);
    res->open_rc = qm_nccl_open_rank(hal, dev, comm, &c, &st);
    snprintf(res->open_msg, sizeof res->open_msg, "%s", st.msg);
    if (res->open_rc != QM_OK)
        return;
    res->size = qm_nccl_size(c);
    qm_hal_buf *in = values_buf(hal, dev, r, N_VALUES + (r == R - 1 ? 0 : 1), &st);
    qm_hal_buf *part = bytes_buf(hal, dev, r, R, false, &st);
    qm_hal_buf *dst = r == R - 1 ? bytes_buf(hal, dev, 0, R, true, &st) : NULL;
    double *out = calloc((size_t)R * (N_VALUES + 1), sizeof *out);
    uint64_t bytes[MAX_RANKS];
    for (int p = 0; p < R; ++p)
        bytes[p] = part_bytes(p);
    const qm_hal_buf *const *cin = (const qm_hal_buf *const *)&in;

    res->bounds_rc = qm_nccl_allgather_f64_sync(c, cin, N_VALUES + 1, out, &st);
    snprintf(res->bounds_msg, sizeof res->bounds_msg, "%s", st.msg);
    res->allgather_rc = qm_nccl_allgather_f64_sync(c, cin, N_VALUES, out, &st);
    if (res->allgather_rc != QM_OK)
        snprintf(res->fail_msg, sizeof res->fail_msg, "%s", st.msg);
    res->allgather_exact = res->allgather_rc == QM_OK && allgather_exact(out, R);
    if (qm_nccl_set_chunk_limit(c, PIECE_BYTES, &st) != QM_OK)
        snprintf(res->fail_msg, sizeof res->fail_msg, "%s", st.msg);
    res->gather_rc = qm_nccl_gather_sync(c, dst, DST_OFF, (const qm_hal_buf *const *)&part, bytes,
                                         R - 1, &st);
    if (res->gather_rc != QM_OK)
        snprintf(res->fail_msg, sizeof res->fail_msg, "%s", st.msg);
    res->gather_exact = res->gather_rc == QM_OK && (r != R - 1 || gather_exact(hal, dst, R));

    qm_nccl_close(c);
    qm_hal_buf_free(hal, in);
    qm_hal_buf_free(hal, part);
    qm_hal_buf_free(hal, dst);
    free(out);
    res->in_use_after = qm_hal_bytes_in_use(hal);
}

/* What rank r of R must have recorded when every rank has its own GPU. */
static void check_rank_ok(const rank_result *res, int r, int R, const char *last_id)
{
    char want[160];
    CHECK(res->open_rc == QM_OK);
    if (res->open_rc != QM_OK) {
        fprintf(stderr, "rank %d: %s\n", r, res->open_msg);
        return;
    }
    CHECK(res->size == R);
    CHECK(res->bounds_rc == QM_E_BOUNDS);
    char prefix[32] = ""; /* every rank returns the last rank's message, prefixed with its rank */
    if (R > 1)
        snprintf(prefix, sizeof prefix, "rank %d: ", R - 1);
    snprintf(want, sizeof want,
             "%snccl allgather on %s: input range [0, +%d) is outside the %d-byte buffer", prefix,
             last_id, (N_VALUES + 1) * 8, N_VALUES * 8);
    CHECK(strncmp(res->bounds_msg, want, strlen(want)) == 0);
    if (strncmp(res->bounds_msg, want, strlen(want)) != 0)
        fprintf(stderr, "rank %d: got '%s'\n  want '%s'\n", r, res->bounds_msg, want);
    CHECK(res->allgather_rc == QM_OK && res->allgather_exact);
    CHECK(res->gather_rc == QM_OK && res->gather_exact);
    if (res->fail_msg[0])
        fprintf(stderr, "rank %d: %s\n", r, res->fail_msg);
    CHECK_EQ_U64(res->in_use_after, 0);
}

static void test_rank_local(qm_hal *hal)
{
    const int n = qm_hal_device_count(hal);
    qm_status st;
    qm_comm *comm = NULL;
    qm_nccl *c = NULL;
    qm_hal_device_info info;
    rank_result res;
    CHECK_OK(qm_comm_local_create(&comm, &st));
    CHECK_OK(qm_hal_device_info_query(hal, n - 1, &info, &st));
    rank_body(comm, hal, n - 1, &res);
    check_rank_ok(&res, 0, 1, info.id);
    CHECK(qm_nccl_open_rank(hal, n, comm, &c, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "is not a device of the HAL");
    CHECK(c == NULL);
    CHECK(qm_nccl_open_rank(hal, 0, NULL, &c, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "nccl: comm must not be NULL");
    qm_comm_destroy(comm);
}

/* R ranks as threads; each opens its own HAL (qm_hal_cuda_open_logical(n_logical); HAL objects are
 * not shared between threads) and uses device r * dev_stride. */
typedef struct group {
    int n_logical, dev_stride;
    rank_result res[MAX_RANKS];
} group;

typedef struct rank_job {
    qm_comm *comm;
    group *g;
} rank_job;

static void *rank_thread(void *p)
{
    rank_job *j = p;
    rank_result *res = &j->g->res[qm_comm_rank(j->comm)];
    qm_hal *hal = NULL;
    qm_status st;
    if (qm_hal_cuda_open_logical(j->g->n_logical, &hal, &st) != QM_OK) {
        memset(res, 0, sizeof *res); /* the other ranks time out in open's first verdict */
        res->open_rc = st.code;
        snprintf(res->open_msg, sizeof res->open_msg, "%s", st.msg);
        return NULL;
    }
    rank_body(j->comm, hal, qm_comm_rank(j->comm) * j->g->dev_stride, res);
    qm_hal_destroy(hal);
    return NULL;
}

static void run_group(int R, group *g)
{
    qm_comm *comms[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    rank_job jobs[MAX_RANKS];
    qm_status st;
    CHECK_OK(qm_comm_threads_create(R, comms, &st));
    for (int r = 0; r < R; ++r)
        CHECK_OK(qm_comm_threads_set_timeout(comms[r], 120, &st));
    for (int r = 0; r < R; ++r) {
        jobs[r] = (rank_job){.comm = comms[r], .g = g};
        if (pthread_create(&th[r], NULL, rank_thread, &jobs[r]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    for (int r = 0; r < R; ++r)
        pthread_join(th[r], NULL);
    for (int r = 0; r < R; ++r)
        qm_comm_destroy(comms[r]);
}

static void test_rank_threads(int n)
{
    /* two ranks on GPU 0 (cuda:0.0 and cuda:0.1): both fail, with the same message */
    group *g = calloc(1, sizeof *g);
    *g = (group){.n_logical = 2 * n, .dev_stride = n};
    run_group(2, g);
    for (int r = 0; r < 2; ++r) {
        CHECK(g->res[r].open_rc == QM_E_UNSUPPORTED);
        CHECK(strstr(g->res[r].open_msg, "nccl: ranks 0 and 1 share GPU ") != NULL);
        CHECK(strstr(g->res[r].open_msg, "NCCL needs one GPU per rank") != NULL);
        CHECK_STR(g->res[r].open_msg, g->res[0].open_msg);
    }
    printf("two ranks on one GPU: %s\n", g->res[0].open_msg);
    /* one rank per GPU */
    const int R = n < MAX_RANKS ? n : MAX_RANKS;
    if (R >= 2) {
        char last_id[QM_HAL_ID_BYTES];
        snprintf(last_id, sizeof last_id, "cuda:%d", R - 1);
        *g = (group){.n_logical = 0, .dev_stride = 1};
        run_group(R, g);
        for (int r = 0; r < R; ++r)
            check_rank_ok(&g->res[r], r, R, last_id);
    }
    free(g);
}

/* ---- under mpiexec --------------------------------------------------------------------------- */

static int main_mpi(int argc, char **argv)
{
    qm_status st;
    qm_comm *comm = NULL;
    qm_hal *hal = NULL;
    if (qm_comm_mpi_create(&argc, &argv, &comm, &st) != QM_OK) {
        printf("test_nccl --mpi: %s\n", st.msg);
        return st.code == QM_E_UNSUPPORTED ? 77 : 1;
    }
    const int r = qm_comm_rank(comm), R = qm_comm_size(comm), n = qm_cuda_device_count();
    if (n == 0 || qm_hal_cuda_open(&hal, &st) != QM_OK) {
        printf("test_nccl --mpi: rank %d: skipped: no GPU\n", r);
        qm_comm_destroy(comm);
        return 77;
    }
    rank_result res;
    rank_body(comm, hal, r % n, &res);
    if (R <= n) {
        char last_id[QM_HAL_ID_BYTES];
        snprintf(last_id, sizeof last_id, "cuda:%d", R - 1);
        check_rank_ok(&res, r, R, last_id);
    } else { /* ranks 0 and n share GPU 0 */
        char want[64];
        snprintf(want, sizeof want, "nccl: ranks 0 and %d share GPU ", n);
        CHECK(res.open_rc == QM_E_UNSUPPORTED);
        CHECK(strstr(res.open_msg, want) != NULL);
        printf("rank %d: %s\n", r, res.open_msg);
    }
    qm_hal_destroy(hal);
    qm_comm_destroy(comm);
    char name[32];
    snprintf(name, sizeof name, "test_nccl --mpi rank %d", r);
    return qm_test_end(name);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--mpi") == 0)
        return QM_HAVE_NCCL ? main_mpi(argc, argv) : 77;
    test_refusals();
    if (!QM_HAVE_NCCL)
        return qm_test_end("test_nccl (no NCCL)");
    qm_status st;
    qm_hal *hal = NULL;
    if (qm_hal_cuda_open(&hal, &st) != QM_OK) {
        printf("test_nccl: skipped: %s\n", st.msg);
        CHECK(st.code == QM_E_UNSUPPORTED);
        return qm_test_failures ? 1 : 77;
    }
    const int n = qm_hal_device_count(hal);
    printf("test_nccl: %d GPU(s)\n", n);
    if (n > MAX_RANKS) {
        printf("test_nccl: skipped: more than %d GPUs\n", MAX_RANKS);
        qm_hal_destroy(hal);
        return 77;
    }
    test_local(hal);
    test_local_shared_gpu(n);
    test_rank_local(hal);
    qm_hal_destroy(hal);
    test_rank_threads(n);
    return qm_test_end("test_nccl");
}
