/* test_state_norm.c — the norm check's sums on the devices (qm_state_norms, engine/stages/
 * state_norm.c, on the state_sumsq op): each state's Σ|ψ|² equals an independent recursive
 * pairwise sum of re*re + im*im over its 2^q slots, bit for bit, for one shard, equal shards,
 * shards cut anywhere (mid-block, mid-state), complex64 and complex128, a replicated state, and
 * three ranks of the threads communicator (every rank the same bits); exact values for a uniform
 * state; a NaN written on the device shows in its state's sum only; no amplitude crosses to the
 * host (the d2h bytes are the pieces' roots alone, combined from the block sums on the device,
 * the same bits as the host's combine); bad arguments. */
#include "comm.h"
#include "sim_fixtures.h"
#include "state_internal.h"
#include "testlib.h"
#include "tree_sum.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* Amplitude i's term, from the host copy in dtype dt. */
static double term(const void *amps, qm_dtype dt, uint64_t i)
{
    double re, im;
    if (dt == QM_DTYPE_COMPLEX128) {
        re = ((const double *)amps)[2 * i];
        im = ((const double *)amps)[2 * i + 1];
    } else {
        re = ((const float *)amps)[2 * i];
        im = ((const float *)amps)[2 * i + 1];
    }
    return re * re + im * im;
}

/* The reference: the pairwise tree by recursive halving (the tree of kernels/qm_math.h, built
 * here independently). */
static double pairwise(const void *amps, qm_dtype dt, uint64_t lo, uint64_t n)
{
    if (n == 1)
        return term(amps, dt, lo);
    return pairwise(amps, dt, lo, n / 2) + pairwise(amps, dt, lo + n / 2, n / 2);
}

/* Host amplitudes: batch states of 2^q slots with random magnitudes (both parts nonzero). */
static void *random_amps(qm_dtype dt, uint64_t total)
{
    void *a = malloc((size_t)total * qm_dtype_size(dt));
    for (uint64_t i = 0; a && i < 2 * total; ++i) {
        const double v = (uniform() - 0.5) * ldexp(1.0, (int)(i % 13) - 6);
        if (dt == QM_DTYPE_COMPLEX128)
            ((double *)a)[i] = v;
        else
            ((float *)a)[i] = (float)v;
    }
    return a;
}

/* A state on hal whose shard k holds global slots [cuts[k], cuts[k + 1]) on device dev0 + k (all
 * shards [0, total) when replicated), its amplitudes copied from the host array. */
static qm_state *make_state(qm_hal *hal, unsigned q, qm_dtype dt, uint64_t batch, const uint64_t *cuts,
                            int n, int dev0, bool replicated, const void *amps, qm_status *st)
{
    qm_state *s = NULL;
    if (qm_state_create_empty(hal, q, dt, n, &s, st) != QM_OK)
        return NULL;
    s->batch = batch;
    const uint64_t es = qm_dtype_size(dt);
    for (int k = 0; k < n; ++k) {
        qm_state_shard *sh = &s->shards[k];
        sh->device = dev0 + k;
        sh->start = replicated ? 0 : cuts[k];
        sh->end = replicated ? batch << q : cuts[k + 1];
        if (qm_hal_buf_alloc(hal, sh->device, (sh->end - sh->start) * es, &sh->buf, st) != QM_OK ||
            qm_hal_copy_h2d(hal, sh->buf, 0, (const char *)amps + sh->start * es,
                            (sh->end - sh->start) * es, NULL, st) != QM_OK) {
            qm_state_destroy(s);
            return NULL;
        }
    }
    return s;
}

/* Every state's sum on the given layout equals the reference, bit for bit. */
static void check_layout(qm_hal *hal, unsigned q, qm_dtype dt, uint64_t batch, const uint64_t *cuts,
                         int n, const void *amps, const char *what)
{
    qm_status st;
    qm_state *s = make_state(hal, q, dt, batch, cuts, n, 0, false, amps, &st);
    CHECK(s != NULL);
    if (!s)
        return;
    double *sums = calloc((size_t)batch, sizeof *sums);
    CHECK_OK(qm_state_norms(s, n, NULL, false, sums, &st));
    int bad = 0;
    for (uint64_t k = 0; k < batch; ++k) {
        const double want = pairwise(amps, dt, k << q, (uint64_t)1 << q);
        if (memcmp(&want, &sums[k], 8) != 0 && bad++ == 0)
            printf("%s: state %llu: %a, expected %a\n", what, (unsigned long long)k, sums[k], want);
    }
    CHECK(bad == 0);
    free(sums);
    qm_state_destroy(s);
}

static void test_layouts(qm_hal *hal)
{
    /* one state of 2^15 complex128: one shard, 8 equal shards, 3 shards cut mid-block */
    void *a = random_amps(QM_DTYPE_COMPLEX128, 1u << 15);
    const uint64_t one[] = {0, 1u << 15};
    const uint64_t eight[] = {0, 4096, 8192, 12288, 16384, 20480, 24576, 28672, 32768};
    const uint64_t three[] = {0, 10007, 20011, 32768};
    check_layout(hal, 15, QM_DTYPE_COMPLEX128, 1, one, 1, a, "one shard");
    check_layout(hal, 15, QM_DTYPE_COMPLEX128, 1, eight, 8, a, "eight shards");
    check_layout(hal, 15, QM_DTYPE_COMPLEX128, 1, three, 3, a, "three uneven shards");
    free(a);
    /* a batch of 6 states of 2^13 complex64, shards starting and ending mid-state */
    a = random_amps(QM_DTYPE_COMPLEX64, 6u << 13);
    const uint64_t mid[] = {0, 5000, 30000, 6u << 13};
    check_layout(hal, 13, QM_DTYPE_COMPLEX64, 6, mid, 3, a, "batch cut mid-state");
    free(a);
    /* many small states (2^3) on shards cut inside states */
    a = random_amps(QM_DTYPE_COMPLEX128, 100u << 3);
    const uint64_t small[] = {0, 13, 400, 401, 800};
    check_layout(hal, 3, QM_DTYPE_COMPLEX128, 100, small, 4, a, "small states");
    free(a);
}

/* A uniform state of 2^10 amplitudes 1/32: the sum is exactly 1; a NaN written into state 2's
 * slot 3 on the device makes that state's sum NaN and leaves the others; only the block sums are
 * copied to the host. */
static void test_exact_and_nan(qm_hal *hal)
{
    qm_status st;
    const unsigned q = 10;
    const uint64_t B = 4, total = B << q;
    double *a = malloc((size_t)total * 16);
    for (uint64_t i = 0; i < total; ++i) {
        a[2 * i] = 1.0 / 32;
        a[2 * i + 1] = 0.0;
    }
    const uint64_t cuts[] = {0, 2048, total};
    qm_state *s = make_state(hal, q, QM_DTYPE_COMPLEX128, B, cuts, 2, 0, false, a, &st);
    CHECK(s != NULL);
    if (!s) {
        free(a);
        return;
    }
    qm_hal_usage u0[2], u1[2];
    CHECK_OK(qm_hal_usage_query(hal, 0, &u0[0], &st));
    CHECK_OK(qm_hal_usage_query(hal, 1, &u0[1], &st));
    double sums[4] = {0};
    CHECK_OK(qm_state_norms(s, 2, NULL, false, sums, &st));
    for (uint64_t k = 0; k < B; ++k)
        CHECK(sums[k] == 1.0);
    CHECK_OK(qm_hal_usage_query(hal, 0, &u1[0], &st));
    CHECK_OK(qm_hal_usage_query(hal, 1, &u1[1], &st));
    /* two whole states per shard, one block of 2^10 each: 16 bytes back per device, no amplitude */
    CHECK_EQ_U64(u1[0].d2h_bytes - u0[0].d2h_bytes, 16);
    CHECK_EQ_U64(u1[1].d2h_bytes - u0[1].d2h_bytes, 16);
    const double nan_[2] = {NAN, 0.0};
    CHECK_OK(qm_hal_copy_h2d(hal, s->shards[1].buf, 3 * 16, nan_, 16, NULL, &st));
    CHECK_OK(qm_state_norms(s, 2, NULL, false, sums, &st));
    CHECK(sums[0] == 1.0 && sums[1] == 1.0 && isnan(sums[2]) && sums[3] == 1.0);
    /* replicated: three copies, only the first is summed */
    qm_state_destroy(s);
    s = make_state(hal, q, QM_DTYPE_COMPLEX128, B, NULL, 3, 0, true, a, &st);
    CHECK(s != NULL);
    CHECK_OK(qm_state_norms(s, 1, NULL, false, sums, &st));
    CHECK(sums[0] == 1.0 && sums[3] == 1.0);
    /* bad arguments */
    CHECK(qm_state_norms(s, 0, NULL, false, sums, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "norm check: a state, its sums and 1..3 shards are needed (got 0)");
    CHECK(qm_state_norms(s, 4, NULL, false, sums, &st) == QM_E_ARG);
    qm_state_destroy(s);
    free(a);
}

/* The roots are made on the device (tree_combine): one 2^16 complex128 state (4 blocks of 2^14)
 * on one shard copies back one double, on 3 shards cut at 2^15 and 2^15 + 2^14 one per shard; the
 * helpers' host path (combine = false: the block sums copied, combined on the host) forms the
 * same pieces bit for bit from the same block sums. */
static void test_roots_on_device(qm_hal *hal)
{
    qm_status st;
    const unsigned q = 16;
    const uint64_t N = (uint64_t)1 << q;
    void *a = random_amps(QM_DTYPE_COMPLEX128, N);
    const uint64_t one[] = {0, N}, three[] = {0, N / 2, N / 2 + N / 4, N};
    const struct { const uint64_t *cuts; int n; uint64_t d2h[3]; } cases[] = {
        {one, 1, {8, 0, 0}}, {three, 3, {8, 8, 8}}};
    for (int c = 0; c < 2; ++c) {
        qm_state *s = make_state(hal, q, QM_DTYPE_COMPLEX128, 1, cases[c].cuts, cases[c].n, 0, false,
                                 a, &st);
        CHECK(s != NULL);
        if (!s)
            continue;
        qm_hal_usage u0[3], u1[3];
        for (int d = 0; d < cases[c].n; ++d)
            CHECK_OK(qm_hal_usage_query(hal, d, &u0[d], &st));
        double sum = 0;
        CHECK_OK(qm_state_norms(s, cases[c].n, NULL, false, &sum, &st));
        const double want = pairwise(a, QM_DTYPE_COMPLEX128, 0, N);
        CHECK(memcmp(&sum, &want, 8) == 0);
        for (int d = 0; d < cases[c].n; ++d) {
            CHECK_OK(qm_hal_usage_query(hal, d, &u1[d], &st));
            CHECK_EQ_U64(u1[d].d2h_bytes - u0[d].d2h_bytes, cases[c].d2h[d]);
        }
        qm_state_destroy(s);
    }
    /* the helpers both ways over the block sums of [1000, N - 3000) of a 2^16-slot index space:
     * runs of pieces from 2^3 up to 2^15 slots (blocks of at most 2^14) */
    const uint64_t lo = 1000, hi = N - 3000, nb = qm_tree_range_blocks(q, lo, hi);
    const uint64_t np = qm_tree_range_pieces(q, lo, hi);
    CHECK_EQ_U64(qm_tree_dev_doubles(q, lo, hi, true), nb + np);
    CHECK_EQ_U64(qm_tree_dev_host(q, lo, hi, true), np);
    CHECK_EQ_U64(qm_tree_dev_host(q, lo, hi, false), nb);
    double *blocks = malloc(nb * sizeof *blocks), *host = malloc(nb * sizeof *host);
    for (uint64_t j = 0; j < nb; ++j)
        blocks[j] = uniform() * ldexp(1.0, (int)(j % 40) - 20);
    qm_tree_pieces t[2] = {{.qubits = q}, {.qubits = q}};
    for (int combine = 0; combine < 2; ++combine) {
        qm_hal_buf *b = NULL;
        CHECK_OK(qm_hal_buf_alloc(hal, 0, (nb + np) * sizeof(double), &b, &st));
        CHECK_OK(qm_hal_copy_h2d(hal, b, 0, blocks, nb * sizeof(double), NULL, &st));
        CHECK_OK(qm_tree_dev_enqueue(hal, q, lo, hi, combine, b, host, NULL, &st));
        CHECK_OK(qm_tree_dev_add(&t[combine], lo, hi, combine, host, &st));
        qm_hal_buf_free(hal, b);
    }
    CHECK(t[0].n == (int)np && t[1].n == (int)np);
    for (int k = 0; k < t[0].n && k < t[1].n; ++k)
        CHECK(t[0].v[k].off == t[1].v[k].off && t[0].v[k].log2n == t[1].v[k].log2n &&
              memcmp(&t[0].v[k].sum, &t[1].v[k].sum, 8) == 0);
    qm_tree_pieces_fini(&t[0]);
    qm_tree_pieces_fini(&t[1]);
    /* the op's checks: one line with the numbers, nothing launched */
    qm_hal_buf *x = NULL, *y = NULL;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 16 * sizeof(double), &x, &st));
    CHECK_OK(qm_hal_buf_alloc(hal, 1, 16 * sizeof(double), &y, &st));
    qm_hal_tree_combine_args ta = {.in_off = 0, .n_groups = 0, .log2_group = 3};
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, x, 8, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: 0 groups of 2^3 sums (1 or more groups of at most 2^40)");
    ta = (qm_hal_tree_combine_args){.in_off = 1, .n_groups = 2, .log2_group = 3};
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, y, 0, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: both buffers must be device buffers of d0 (got the "
                            "output on d1)");
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, x, 0, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: 16 sums from double 1 do not fit a buffer of 128 bytes");
    ta.n_groups = 1;
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, x, 16, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: 1 roots from double 16 do not fit a buffer of 128 bytes");
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, x, 8, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: the roots [8, 9) overlap the sums [1, 9) of the same "
                            "buffer");
    ta.n_groups = (uint64_t)1 << 30, ta.log2_group = 40;
    CHECK(qm_hal_tree_combine_dev(hal, &ta, x, x, 9, NULL, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "tree_combine: 1073741824 groups of 2^40 sums (1 or more groups of at "
                            "most 2^40)");
    ta = (qm_hal_tree_combine_args){.in_off = 1, .n_groups = 1, .log2_group = 3};
    CHECK_OK(qm_hal_tree_combine_dev(hal, &ta, x, x, 9, NULL, &st));
    qm_hal_buf_free(hal, x);
    qm_hal_buf_free(hal, y);
    free(blocks);
    free(host);
    free(a);
}

/* ---- three ranks of the threads communicator ------------------------------------------------- */

enum { R = 3 };
static const unsigned RQ = 12;
static const uint64_t RB = 4;
static const uint64_t rcuts[] = {0, 1000, 4096, 6001, 9000, 12289, 16384}; /* 2 shards a rank */

typedef struct rank_job {
    qm_comm *comm;
    int rank;
    const void *amps;
    double sums[4];
    qm_code rc;
    qm_status st;
} rank_job;

static void *run_rank(void *arg)
{
    rank_job *j = arg;
    qm_hal *hal = NULL;
    j->rc = fixture_mesh(2, (uint64_t)1 << 24, true, QM_SIM_MATERIALIZED, &hal, &j->st);
    if (j->rc != QM_OK)
        return NULL;
    qm_state *s = make_state(hal, RQ, QM_DTYPE_COMPLEX128, RB, rcuts + 2 * j->rank, 2, 0, false,
                             j->amps, &j->st);
    j->rc = s ? qm_state_norms(s, 2, j->comm, true, j->sums, &j->st) : QM_E_INTERNAL;
    qm_state_destroy(s);
    if (qm_hal_bytes_in_use(hal) != 0)
        j->rc = QM_E_INTERNAL;
    qm_hal_destroy(hal);
    return NULL;
}

static void test_ranks(void)
{
    qm_status st;
    qm_comm *comms[R];
    CHECK_OK(qm_comm_threads_create(R, comms, &st));
    void *a = random_amps(QM_DTYPE_COMPLEX128, RB << RQ);
    rank_job jobs[R];
    pthread_t th[R];
    for (int r = 0; r < R; ++r) {
        jobs[r] = (rank_job){.comm = comms[r], .rank = r, .amps = a};
        pthread_create(&th[r], NULL, run_rank, &jobs[r]);
    }
    for (int r = 0; r < R; ++r)
        pthread_join(th[r], NULL);
    for (int r = 0; r < R; ++r) {
        CHECK(jobs[r].rc == QM_OK);
        for (uint64_t k = 0; k < RB; ++k) {
            const double want = pairwise(a, QM_DTYPE_COMPLEX128, k << RQ, (uint64_t)1 << RQ);
            CHECK(memcmp(&want, &jobs[r].sums[k], 8) == 0);
        }
        qm_comm_destroy(comms[r]);
    }
    free(a);
}

int main(void)
{
    qm_status st;
    qm_hal *hal = NULL;
    CHECK_OK(fixture_mesh(8, (uint64_t)1 << 26, true, QM_SIM_MATERIALIZED, &hal, &st));
    if (hal) {
        test_layouts(hal);
        test_exact_and_nan(hal);
        test_roots_on_device(hal);
        CHECK_EQ_U64(qm_hal_bytes_in_use(hal), 0);
        qm_hal_destroy(hal);
    }
    test_ranks();
    return qm_test_end("test_state_norm");
}
