/* test_materialize_ranks.c — a multi-rank encode with the in-process threads communicator: each
 * rank owns its devices and its contiguous part of the index space, reads only its own input range
 * (conformance item 22), and the result is bit-identical to a one-process run; a NaN on one rank
 * makes every rank fail with the same message, after taking part in every exchange (item 21). */
#include "comm.h"
#include "materialize_internal.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

enum { R = 3, DEV_PER_RANK = 2 };

typedef struct rank_job {
    int rank;
    qm_comm *comm;
    const double *x;
    uint64_t n, batch;
    unsigned q;
    qm_dtype dt;
    qm_shard_spec shards[DEV_PER_RANK];
    int n_shards;
    /* results */
    qm_code rc;
    qm_status st;
    double *amps;        /* this rank's range, read back */
    uint64_t read_lo, read_hi, read_count;
} rank_job;

static qm_code job_read(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    rank_job *j = ctx;
    (void)st;
    memcpy(dst, j->x + first, (size_t)count * sizeof(double));
    if (j->read_count == 0 || first < j->read_lo)
        j->read_lo = first;
    if (first + count > j->read_hi)
        j->read_hi = first + count;
    j->read_count += count;
    return QM_OK;
}

static void *run_rank(void *arg)
{
    rank_job *j = arg;
    qm_hal *hal = NULL;
    j->rc = fixture_mesh(DEV_PER_RANK, (uint64_t)1 << 24, true, QM_SIM_MATERIALIZED, &hal, &j->st);
    if (j->rc != QM_OK)
        return NULL;
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .n = j->n, .batch = j->batch, .read = job_read,
                       .read_ctx = j};
    qm_materialize_opts opts = {.comm = j->comm};
    qm_state *s = NULL;
    j->rc = qm_materialize_amplitude(hal, j->q, j->dt, j->shards, j->n_shards, &in, &opts, &s, &j->st);
    if (j->rc == QM_OK) {
        const uint64_t lo = j->shards[0].start, hi = j->shards[j->n_shards - 1].end;
        j->amps = malloc((size_t)(hi - lo) * 16);
        /* reads are by global index: this rank's state holds [lo, hi) */
        qm_code rc = QM_OK;
        for (int i = 0; i < j->n_shards && rc == QM_OK; ++i) {
            qm_shard_info info;
            rc = qm_state_shard_query(s, i, &info, &j->st);
            (void)info;
        }
        /* qm_state_read checks [start, start+count) against the whole index space, so read each
         * shard's own range through its view */
        for (int i = 0; i < j->n_shards; ++i) {
            qm_shard_view v;
            if (qm_state_shard_view(s, i, &v, &j->st) == QM_OK)
                memcpy((char *)j->amps + (v.start - lo) * qm_dtype_size(j->dt), v.data,
                       (size_t)(v.length * qm_dtype_size(j->dt)));
        }
    }
    qm_state_destroy(s);
    if (qm_hal_bytes_in_use(hal) != 0)
        j->rc = QM_E_INTERNAL;
    qm_hal_destroy(hal);
    return NULL;
}

/* Encode x on R ranks x 2 devices (rank r owns [r * total / R ...) split in 2 shards); returns 0
 * when every rank succeeded. */
static int run_ranks(rank_job *jobs, const double *x, uint64_t n, uint64_t batch, unsigned q)
{
    qm_status st;
    qm_comm *comms[R];
    if (qm_comm_threads_create(R, comms, &st) != QM_OK)
        return -1;
    const uint64_t total = batch * ((uint64_t)1 << q), per_shard = total / (R * DEV_PER_RANK);
    pthread_t th[R];
    for (int r = 0; r < R; ++r) {
        jobs[r] = (rank_job){.rank = r, .comm = comms[r], .x = x, .n = n, .batch = batch, .q = q,
                             .dt = QM_DTYPE_COMPLEX128, .n_shards = DEV_PER_RANK};
        for (int d = 0; d < DEV_PER_RANK; ++d) {
            uint64_t k = (uint64_t)(r * DEV_PER_RANK + d);
            jobs[r].shards[d] = (qm_shard_spec){.rank = r, .device = d, .start = k * per_shard,
                                                .end = k == R * DEV_PER_RANK - 1 ? total : (k + 1) * per_shard};
        }
        pthread_create(&th[r], NULL, run_rank, &jobs[r]);
    }
    for (int r = 0; r < R; ++r)
        pthread_join(th[r], NULL);
    for (int r = 0; r < R; ++r)
        qm_comm_destroy(comms[r]);
    int bad = 0;
    for (int r = 0; r < R; ++r)
        bad += jobs[r].rc != QM_OK;
    return bad;
}

static double *one_process(const double *x, uint64_t n, uint64_t batch, unsigned q)
{
    qm_status st;
    qm_hal *hal;
    if (fixture_mesh(1, (uint64_t)1 << 26, false, QM_SIM_MATERIALIZED, &hal, &st) != QM_OK)
        return NULL;
    const uint64_t total = batch << q;
    qm_shard_spec one = {0, 0, 0, total};
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = n, .batch = batch};
    qm_state *s = NULL;
    double *a = NULL;
    if (qm_materialize_amplitude(hal, q, QM_DTYPE_COMPLEX128, &one, 1, &in, NULL, &s, &st) == QM_OK) {
        a = malloc((size_t)total * 16);
        qm_state_read(s, 0, total, QM_DTYPE_COMPLEX128, a, &st);
    }
    qm_state_destroy(s);
    qm_hal_destroy(hal);
    return a;
}

static void check_same(rank_job *jobs, const double *ref)
{
    for (int r = 0; r < R; ++r) {
        const uint64_t lo = jobs[r].shards[0].start, hi = jobs[r].shards[DEV_PER_RANK - 1].end;
        CHECK(jobs[r].amps && memcmp(jobs[r].amps, ref + 2 * lo, (size_t)(hi - lo) * 16) == 0);
        free(jobs[r].amps);
        jobs[r].amps = NULL;
    }
}

int main(void)
{
    rank_job jobs[R];
    /* one state of 2^14 amplitudes from 15000 values: ranks own [0, 5460), [5460, 10920), ... */
    const unsigned q = 14;
    const uint64_t n = 15000;
    double *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = sin((double)i * 0.01) * (1.0 + (double)(i % 5));
    double *ref = one_process(x, n, 1, q);
    CHECK(ref != NULL);
    CHECK(run_ranks(jobs, x, n, 1, q) == 0);
    for (int r = 0; r < R; ++r) { /* item 22: a rank reads (and squares) only its own range */
        uint64_t lo = jobs[r].shards[0].start, hi = jobs[r].shards[DEV_PER_RANK - 1].end;
        hi = hi < n ? hi : n;
        if (lo < n) {
            CHECK_EQ_U64(jobs[r].read_lo, lo);
            CHECK_EQ_U64(jobs[r].read_hi, hi);
            CHECK_EQ_U64(jobs[r].read_count, hi - lo);
        } else {
            CHECK_EQ_U64(jobs[r].read_count, 0);
        }
    }
    if (ref)
        check_same(jobs, ref);
    free(ref);
    /* the rescaled path across ranks: a huge value on rank 1 */
    x[7000] = 1e300;
    ref = one_process(x, n, 1, q);
    CHECK(run_ranks(jobs, x, n, 1, q) == 0);
    if (ref)
        check_same(jobs, ref);
    free(ref);
    /* item 21: a NaN on rank 2's range: every rank fails, with the same message */
    x[12345] = NAN;
    CHECK(run_ranks(jobs, x, n, 1, q) == R);
    for (int r = 0; r < R; ++r) {
        CHECK(jobs[r].rc == QM_E_INPUT);
        CHECK_STR(jobs[r].st.msg, "encode: zero or non-finite norm: input[12345] is NaN");
    }
    free(x);
    /* batch: 12 samples of 100 features into 7 qubits, 2 samples per shard */
    const uint64_t B = 12, F = 100;
    x = malloc(B * F * sizeof *x);
    for (uint64_t i = 0; i < B * F; ++i)
        x[i] = cos((double)i * 0.3) + 0.01 * (double)i;
    ref = one_process(x, F, B, 7);
    CHECK(run_ranks(jobs, x, F, B, 7) == 0);
    if (ref)
        check_same(jobs, ref);
    free(ref);
    /* a zero sample on rank 0 fails every rank alike */
    for (uint64_t j = 0; j < F; ++j)
        x[1 * F + j] = 0.0;
    CHECK(run_ranks(jobs, x, F, B, 7) == R);
    for (int r = 0; r < R; ++r)
        CHECK_STR(jobs[r].st.msg, "encode: zero or non-finite norm: sample 1 has all 100 values zero");
    free(x);
    return qm_test_end("test_materialize_ranks");
}
