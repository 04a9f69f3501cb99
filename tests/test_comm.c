/* test_comm.c — the communicator interface on the local (world size 1) and threads (n ranks as
 * threads) implementations: rank/size, all-gather in rank order, the rank-ordered float64 sum
 * (bit-identical on every rank and to a serial reference, for 1..4 ranks), broadcast, send/recv,
 * the chunking loops (forced by a tiny chunk limit), agree() and allgather_status() failing with the
 * same message on every rank, the threads comm's mismatch and timeout detection, and argument
 * validation. Rank threads only record results; every CHECK runs on the main thread (testlib's
 * counters are not thread-safe). Every wait is bounded by the group timeout (10 s, or 0.3 s where a
 * test provokes a timeout).
 */
#define _POSIX_C_SOURCE 200809L

#include "comm.h"
#include "testlib.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANKS 12

/* ---- running one function on every rank of a threads comm ----------------------------------- */

typedef void (*rank_fn)(qm_comm *c, void *arg);

typedef struct job {
    qm_comm *c;
    rank_fn fn;
    void *arg;
} job;

static void *job_main(void *p)
{
    job *j = p;
    j->fn(j->c, j->arg);
    return NULL;
}

static void run_ranks(int n, qm_comm **comms, rank_fn fn, void *arg)
{
    pthread_t th[MAX_RANKS];
    job jobs[MAX_RANKS];
    for (int r = 0; r < n; ++r) {
        jobs[r] = (job){.c = comms[r], .fn = fn, .arg = arg};
        if (pthread_create(&th[r], NULL, job_main, &jobs[r]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    for (int r = 0; r < n; ++r)
        pthread_join(th[r], NULL);
}

static void make_group(int n, qm_comm **comms, double timeout_s)
{
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_comm_threads_create(n, comms, &st) == QM_OK);
    for (int r = 0; r < n; ++r) {
        CHECK(comms[r] != NULL);
        CHECK(qm_comm_threads_set_timeout(comms[r], timeout_s, &st) == QM_OK);
    }
}

static void free_group(int n, qm_comm **comms)
{
    for (int r = 0; r < n; ++r)
        qm_comm_destroy(comms[r]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned char pattern(int rank, size_t i) { return (unsigned char)(rank * 31 + i * 7 + 1); }

/* A value of wide magnitude and both signs, a function of (rank, i) only. */
static double value_of(int rank, uint64_t i)
{
    uint64_t x = (uint64_t)rank * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    double mant = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
    int e = (int)(x % 41) - 20;
    return (x & 1 ? -1.0 : 1.0) * ldexp(mant + 0.5, e);
}

/* ---- local --------------------------------------------------------------------------------- */

static void test_local(void)
{
    qm_status st;
    qm_comm *c = NULL;
    qm_status_clear(&st);
    CHECK(qm_comm_local_create(&c, &st) == QM_OK);
    CHECK(c != NULL);
    CHECK(qm_comm_rank(c) == 0);
    CHECK(qm_comm_size(c) == 1);
    CHECK(qm_comm_kind_get(c) == QM_COMM_LOCAL);
    CHECK_STR(qm_comm_kind_name(qm_comm_kind_get(c)), "local");
    CHECK_EQ_U64(qm_comm_chunk_limit(c), (uint64_t)1 << 28);

    unsigned char mine[19], all[19];
    for (size_t i = 0; i < sizeof mine; ++i)
        mine[i] = pattern(0, i);
    memset(all, 0, sizeof all);
    CHECK(qm_comm_allgather(c, mine, sizeof mine, all, &st) == QM_OK);
    CHECK(memcmp(mine, all, sizeof mine) == 0);

    double v[3] = {1.5, -0.0, 1e300};
    CHECK(qm_comm_allreduce_sum_f64(c, v, 3, &st) == QM_OK);
    CHECK(v[0] == 1.5 && v[1] == 0.0 && signbit(v[1]) && v[2] == 1e300);

    unsigned char b[5] = {1, 2, 3, 4, 5};
    CHECK(qm_comm_broadcast(c, b, sizeof b, 0, &st) == QM_OK);
    CHECK(b[0] == 1 && b[4] == 5);
    CHECK(qm_comm_barrier(c, &st) == QM_OK);
    CHECK(qm_comm_agree(c, 0xabcdu, "plan hash", &st) == QM_OK);

    /* allgather_status with one rank: the status comes back verbatim, without a rank prefix */
    qm_status mine_st, first;
    qm_status_clear(&mine_st);
    CHECK(qm_comm_allgather_status(c, &mine_st, &first, &st) == QM_OK);
    CHECK(first.code == QM_OK && first.msg[0] == '\0');
    mine_st.code = QM_E_INPUT;
    snprintf(mine_st.msg, sizeof mine_st.msg, "encode: input has NaN at global index 17");
    qm_status_clear(&st);
    CHECK(qm_comm_allgather_status(c, &mine_st, &first, &st) == QM_E_INPUT);
    CHECK_STR(st.msg, "encode: input has NaN at global index 17");
    CHECK_STR(first.msg, "encode: input has NaN at global index 17");
    /* mine aliasing st (the common call shape) */
    CHECK(qm_comm_allgather_status(c, &st, NULL, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "encode: input has NaN at global index 17");

    /* validation: a world of one has no peers; roots and chunk limits are checked */
    CHECK(qm_comm_send(c, 0, b, 1, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "comm send: rank 0 is not another rank (this is rank 0 of 1)");
    CHECK(qm_comm_recv(c, 1, b, 1, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "rank 1 is not another rank");
    CHECK(qm_comm_broadcast(c, b, 1, 1, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "comm broadcast: root 1 is not a rank (world size 1)");
    CHECK(qm_comm_allgather(c, NULL, 4, all, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "mine and all must not be NULL");
    CHECK(qm_comm_allgather(c, all, 4, all, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "mine overlaps all");
    CHECK(qm_comm_allreduce_sum_f64(c, NULL, 2, &st) == QM_E_ARG);
    CHECK(qm_comm_set_chunk_limit(c, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "chunk limit must be 1..268435456 bytes (got 0)");
    CHECK(qm_comm_set_chunk_limit(c, ((uint64_t)1 << 28) + 1, &st) == QM_E_ARG);
    CHECK(qm_comm_threads_set_timeout(c, 1.0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "needs a threads comm (got local)");
    CHECK(qm_comm_allgather(NULL, mine, 1, all, &st) == QM_E_ARG);
    CHECK(qm_comm_barrier(NULL, &st) == QM_E_ARG);

    /* chunking on one rank: 19 bytes in pieces of 4 = 5 backend calls */
    qm_comm_usage u0, u1;
    CHECK(qm_comm_set_chunk_limit(c, 4, &st) == QM_OK);
    qm_comm_usage_get(c, &u0);
    memset(all, 0, sizeof all);
    CHECK(qm_comm_allgather(c, mine, sizeof mine, all, &st) == QM_OK);
    qm_comm_usage_get(c, &u1);
    CHECK(memcmp(mine, all, sizeof mine) == 0);
    CHECK_EQ_U64(u1.n_pieces - u0.n_pieces, 5);
    CHECK_EQ_U64(u1.n_ops - u0.n_ops, 1);
    CHECK_EQ_U64(u1.bytes_sent - u0.bytes_sent, 19);

    qm_comm_destroy(c);
    qm_comm_destroy(NULL);
    CHECK(qm_comm_rank(NULL) == -1);
    CHECK(qm_comm_size(NULL) == 0);
    qm_comm_usage_get(NULL, &u0);
    CHECK_EQ_U64(u0.n_ops, 0);

    CHECK(qm_comm_local_create(NULL, &st) == QM_E_ARG);
    qm_comm *many[2] = {NULL, NULL};
    CHECK(qm_comm_threads_create(0, many, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "rank count must be 1..1024 (got 0)");
    CHECK(qm_comm_threads_create(1025, many, &st) == QM_E_ARG);

#if !QM_HAVE_MPI
    c = (qm_comm *)&st;
    CHECK(qm_comm_mpi_create(NULL, NULL, &c, &st) == QM_E_UNSUPPORTED);
    CHECK(c == NULL);
    CHECK_ERR(st, QM_E_UNSUPPORTED, "-DQM_WITH_MPI=ON");
#endif
}

/* ---- threads: the primitives ---------------------------------------------------------------- */

#define REC_BYTES 37
#define BC_BYTES 53

typedef struct prim_case {
    int n;
    uint64_t chunk; /* 0: default */
    qm_code rc[MAX_RANKS][8];
    int rank[MAX_RANKS], size[MAX_RANKS];
    unsigned char all[MAX_RANKS][MAX_RANKS * REC_BYTES];
    unsigned char bc[MAX_RANKS][MAX_RANKS][BC_BYTES]; /* [rank][root] */
    qm_comm_usage usage[MAX_RANKS];
} prim_case;

static void prim_rank(qm_comm *c, void *arg)
{
    prim_case *pc = arg;
    int r = qm_comm_rank(c);
    qm_status st;
    qm_status_clear(&st);
    pc->rank[r] = r;
    pc->size[r] = qm_comm_size(c);
    if (pc->chunk)
        pc->rc[r][0] = qm_comm_set_chunk_limit(c, pc->chunk, &st);
    unsigned char mine[REC_BYTES];
    for (size_t i = 0; i < REC_BYTES; ++i)
        mine[i] = pattern(r, i);
    pc->rc[r][1] = qm_comm_allgather(c, mine, REC_BYTES, pc->all[r], &st);
    for (int root = 0; root < pc->n; ++root) {
        unsigned char *buf = pc->bc[r][root];
        for (size_t i = 0; i < BC_BYTES; ++i)
            buf[i] = r == root ? pattern(100 + root, i) : 0;
        qm_code rc = qm_comm_broadcast(c, buf, BC_BYTES, root, &st);
        if (rc != QM_OK)
            pc->rc[r][2] = rc;
    }
    pc->rc[r][3] = qm_comm_barrier(c, &st);
    qm_comm_usage_get(c, &pc->usage[r]);
}

static void test_threads_primitives(void)
{
    static prim_case pc;
    for (int n = 1; n <= 4; ++n) {
        for (int variant = 0; variant < 2; ++variant) {
            qm_comm *comms[MAX_RANKS];
            memset(&pc, 0, sizeof pc);
            pc.n = n;
            pc.chunk = variant ? 5 : 0;
            make_group(n, comms, 10.0);
            run_ranks(n, comms, prim_rank, &pc);
            for (int r = 0; r < n; ++r) {
                for (int k = 0; k < 4; ++k)
                    CHECK(pc.rc[r][k] == QM_OK);
                CHECK(pc.rank[r] == r);
                CHECK(pc.size[r] == n);
                /* all-gather: rank q's record at q * REC_BYTES, on every rank */
                int bad = 0;
                for (int q = 0; q < n; ++q)
                    for (size_t i = 0; i < REC_BYTES; ++i)
                        bad += pc.all[r][(size_t)q * REC_BYTES + i] != pattern(q, i);
                CHECK(bad == 0);
                /* broadcast from every root */
                bad = 0;
                for (int root = 0; root < n; ++root)
                    for (size_t i = 0; i < BC_BYTES; ++i)
                        bad += pc.bc[r][root][i] != pattern(100 + root, i);
                CHECK(bad == 0);
                /* pieces: allgather ceil(37/5) = 8, each broadcast ceil(53/5) = 11, barrier 1 */
                uint64_t want = variant ? 8 + 11 * (uint64_t)n + 1 : 1 + (uint64_t)n + 1;
                CHECK_EQ_U64(pc.usage[r].n_pieces, want);
                CHECK_EQ_U64(pc.usage[r].n_ops, 1 + (uint64_t)n + 1);
                CHECK_EQ_U64(pc.usage[r].bytes_received,
                             REC_BYTES * (uint64_t)n + BC_BYTES * (uint64_t)(n - 1));
            }
            free_group(n, comms);
        }
    }
}

/* ---- threads: deterministic sum ------------------------------------------------------------- */

#define SUM_COUNT 3001

typedef struct sum_case {
    int n;
    uint64_t chunk;
    qm_code rc[MAX_RANKS][2];
    double out[MAX_RANKS][SUM_COUNT];
    double again[MAX_RANKS][SUM_COUNT];
    double order[MAX_RANKS];
} sum_case;

static void sum_rank(qm_comm *c, void *arg)
{
    sum_case *sc = arg;
    int r = qm_comm_rank(c);
    qm_status st;
    qm_status_clear(&st);
    if (sc->chunk)
        qm_comm_set_chunk_limit(c, sc->chunk, &st);
    for (uint64_t i = 0; i < SUM_COUNT; ++i)
        sc->out[r][i] = sc->again[r][i] = value_of(r, i);
    sc->rc[r][0] = qm_comm_allreduce_sum_f64(c, sc->out[r], SUM_COUNT, &st);
    if (qm_comm_allreduce_sum_f64(c, sc->again[r], SUM_COUNT, &st) != QM_OK)
        sc->rc[r][0] = st.code;
    /* order matters for these: 1e16 + 1 rounds back to 1e16 */
    static const double ordered[4] = {1e16, 1.0, -1e16, 1.0};
    sc->order[r] = ordered[r % 4];
    sc->rc[r][1] = qm_comm_allreduce_sum_f64(c, &sc->order[r], 1, &st);
}

static void test_threads_allreduce(void)
{
    static sum_case sc;
    static double ref[SUM_COUNT];
    for (int n = 1; n <= 4; ++n) {
        /* the reference: a serial sum in rank order, starting from rank 0's value */
        for (uint64_t i = 0; i < SUM_COUNT; ++i) {
            double s = value_of(0, i);
            for (int r = 1; r < n; ++r)
                s += value_of(r, i);
            ref[i] = s;
        }
        for (int variant = 0; variant < 2; ++variant) {
            qm_comm *comms[MAX_RANKS];
            memset(&sc, 0, sizeof sc);
            sc.n = n;
            sc.chunk = variant ? 24 : 0; /* 3 doubles per piece */
            make_group(n, comms, 10.0);
            run_ranks(n, comms, sum_rank, &sc);
            for (int r = 0; r < n; ++r) {
                CHECK(sc.rc[r][0] == QM_OK && sc.rc[r][1] == QM_OK);
                CHECK(memcmp(sc.out[r], ref, sizeof ref) == 0);   /* bit-identical */
                CHECK(memcmp(sc.again[r], ref, sizeof ref) == 0); /* and repeatable */
            }
            static const double want_order[5] = {0, 1e16, 1e16, 0.0, 1.0};
            for (int r = 0; r < n; ++r)
                CHECK(sc.order[r] == want_order[n]);
            free_group(n, comms);
        }
    }
}

/* ---- threads: send/recv --------------------------------------------------------------------- */

#define P2P_MAX 400

typedef struct p2p_case {
    int n;
    qm_code rc[MAX_RANKS][4];
    qm_status st[MAX_RANKS][2];
    unsigned char got[MAX_RANKS][P2P_MAX]; /* rank 0: what came from rank r */
    uint64_t pieces[MAX_RANKS];
    unsigned char after[MAX_RANKS][4];
} p2p_case;

static uint64_t p2p_bytes(int r) { return 100 + (uint64_t)r * 97; }

static void p2p_rank(qm_comm *c, void *arg)
{
    p2p_case *pc = arg;
    int r = qm_comm_rank(c);
    qm_status st;
    qm_status_clear(&st);
    qm_comm_set_chunk_limit(c, 7, &st);
    qm_comm_usage u0, u1;
    qm_comm_usage_get(c, &u0);
    if (r == 0) {
        for (int q = 1; q < pc->n; ++q)
            if (qm_comm_recv(c, q, pc->got[q], p2p_bytes(q), q, &st) != QM_OK)
                pc->rc[0][0] = st.code;
        /* zero bytes still match a message */
        for (int q = 1; q < pc->n; ++q)
            if (qm_comm_recv(c, q, NULL, 0, 99, &st) != QM_OK)
                pc->rc[0][1] = st.code;
    } else {
        unsigned char buf[P2P_MAX];
        for (uint64_t i = 0; i < p2p_bytes(r); ++i)
            buf[i] = pattern(r, i);
        pc->rc[r][0] = qm_comm_send(c, 0, buf, p2p_bytes(r), r, &st);
        pc->rc[r][1] = qm_comm_send(c, 0, NULL, 0, 99, &st);
    }
    qm_comm_usage_get(c, &u1);
    pc->pieces[r] = u1.n_pieces - u0.n_pieces;

    /* a size mismatch: rank 1 sends 10 B, rank 0 expects 8 B; rank 0 drains the message, so rank 1
     * is not left waiting and the group stays usable */
    unsigned char ten[10] = {0};
    if (r == 0)
        pc->rc[0][2] = qm_comm_recv(c, 1, ten, 8, 5, &pc->st[0][0]);
    else if (r == 1)
        pc->rc[1][2] = qm_comm_send(c, 0, ten, 10, 5, &pc->st[1][0]);
    /* unequal chunk limits (a misuse): the implementation's own size check reports it */
    if (r == 0) {
        qm_comm_set_chunk_limit(c, 8, &st);
        pc->rc[0][3] = qm_comm_recv(c, 1, ten, 10, 6, &pc->st[0][1]);
    } else if (r == 1) {
        qm_comm_set_chunk_limit(c, 16, &st);
        pc->rc[1][3] = qm_comm_send(c, 0, ten, 10, 6, &pc->st[1][1]);
    }
    unsigned char mine[1] = {(unsigned char)(r + 1)};
    if (qm_comm_allgather(c, mine, 1, pc->after[r], &st) != QM_OK)
        pc->after[r][0] = 0xff;
}

static void test_threads_p2p(void)
{
    static p2p_case pc;
    for (int n = 2; n <= 4; ++n) {
        qm_comm *comms[MAX_RANKS];
        memset(&pc, 0, sizeof pc);
        pc.n = n;
        make_group(n, comms, 10.0);
        run_ranks(n, comms, p2p_rank, &pc);
        CHECK(pc.rc[0][0] == QM_OK && pc.rc[0][1] == QM_OK);
        uint64_t want0 = 0;
        for (int q = 1; q < n; ++q) {
            CHECK(pc.rc[q][0] == QM_OK && pc.rc[q][1] == QM_OK);
            int bad = 0;
            for (uint64_t i = 0; i < p2p_bytes(q); ++i)
                bad += pc.got[q][i] != pattern(q, i);
            CHECK(bad == 0);
            /* a header, then ceil(bytes / 7) pieces; the empty message is a header only */
            uint64_t pieces = 1 + (p2p_bytes(q) + 6) / 7 + 1;
            CHECK_EQ_U64(pc.pieces[q], pieces);
            want0 += pieces;
        }
        CHECK_EQ_U64(pc.pieces[0], want0);

        CHECK(pc.rc[0][2] == QM_E_RANK);
        CHECK_STR(pc.st[0][0].msg, "comm recv from rank 1 (tag 5): rank 1 sent 10 B but this rank "
                                   "expected 8 B; sender and receiver must agree on the size");
        CHECK(pc.rc[1][2] == QM_OK);
        CHECK(pc.rc[0][3] == QM_E_BACKEND);
        CHECK_ERR(pc.st[0][1], QM_E_BACKEND, "recv from rank 1 (tag 6): expected 8 B, rank 1 sent 10 B");
        CHECK(pc.rc[1][3] == QM_E_BACKEND);
        CHECK_ERR(pc.st[1][1], QM_E_BACKEND, "send to rank 0 (tag 6): rank 0 expected 8 B, this rank "
                                             "sent 10 B");
        for (int r = 0; r < n; ++r)
            for (int q = 0; q < n; ++q)
                CHECK(pc.after[r][q] == q + 1);
        free_group(n, comms);
    }
}

/* ---- threads: agree and allgather_status ---------------------------------------------------- */

typedef struct agree_case {
    int n;
    uint64_t values[MAX_RANKS];
    qm_code rc[MAX_RANKS];
    qm_status st[MAX_RANKS];
} agree_case;

static void agree_rank(qm_comm *c, void *arg)
{
    agree_case *ac = arg;
    int r = qm_comm_rank(c);
    qm_status_clear(&ac->st[r]);
    ac->rc[r] = qm_comm_agree(c, ac->values[r], "plan hash", &ac->st[r]);
}

static void run_agree(agree_case *ac)
{
    qm_comm *comms[MAX_RANKS];
    make_group(ac->n, comms, 10.0);
    run_ranks(ac->n, comms, agree_rank, ac);
    free_group(ac->n, comms);
}

static void test_threads_agree(void)
{
    static agree_case ac;
    for (int n = 1; n <= 4; ++n) {
        memset(&ac, 0, sizeof ac);
        ac.n = n;
        for (int r = 0; r < n; ++r)
            ac.values[r] = 0x1a2b3c4d5e6f7081ull;
        run_agree(&ac);
        for (int r = 0; r < n; ++r)
            CHECK(ac.rc[r] == QM_OK && ac.st[r].code == QM_OK);
    }

    memset(&ac, 0, sizeof ac);
    ac.n = 3;
    ac.values[0] = ac.values[1] = 0x1a2b;
    ac.values[2] = 0x9f00;
    run_agree(&ac);
    for (int r = 0; r < 3; ++r) {
        CHECK(ac.rc[r] == QM_E_RANK);
        CHECK_ERR(ac.st[r], QM_E_RANK,
                  "comm: ranks disagree on the plan hash: rank 0 has 0000000000001a2b, rank 2 has "
                  "0000000000009f00 (1 of 3 ranks differ from rank 0); every rank must be given "
                  "the same inputs");
    }

    /* many ranks differ: eight are named, then "..." */
    memset(&ac, 0, sizeof ac);
    ac.n = MAX_RANKS;
    for (int r = 0; r < MAX_RANKS; ++r)
        ac.values[r] = (uint64_t)r;
    run_agree(&ac);
    for (int r = 0; r < MAX_RANKS; ++r) {
        CHECK(ac.rc[r] == QM_E_RANK);
        CHECK_STR(ac.st[r].msg, ac.st[0].msg);
    }
    CHECK_ERR(ac.st[0], QM_E_RANK, "rank 8 has 0000000000000008, ... (11 of 12 ranks differ");
    CHECK(strstr(ac.st[0].msg, "rank 9 has") == NULL);
}

typedef struct status_case {
    int n;
    qm_status mine[MAX_RANKS];
    qm_status first[MAX_RANKS];
    qm_status st[MAX_RANKS];
    qm_code rc[MAX_RANKS];
    qm_code rc_alias[MAX_RANKS];
    qm_status alias[MAX_RANKS];
} status_case;

static void status_rank(qm_comm *c, void *arg)
{
    status_case *sc = arg;
    int r = qm_comm_rank(c);
    qm_status_clear(&sc->st[r]);
    sc->rc[r] = qm_comm_allgather_status(c, &sc->mine[r], &sc->first[r], &sc->st[r]);
    sc->alias[r] = sc->mine[r];
    sc->rc_alias[r] = qm_comm_allgather_status(c, &sc->alias[r], NULL, &sc->alias[r]);
}

static void test_threads_status(void)
{
    static status_case sc;
    for (int n = 1; n <= 4; ++n) {
        /* nobody failed */
        qm_comm *comms[MAX_RANKS];
        memset(&sc, 0, sizeof sc);
        sc.n = n;
        for (int r = 0; r < n; ++r)
            qm_status_clear(&sc.mine[r]);
        make_group(n, comms, 10.0);
        run_ranks(n, comms, status_rank, &sc);
        for (int r = 0; r < n; ++r) {
            CHECK(sc.rc[r] == QM_OK && sc.first[r].code == QM_OK && sc.st[r].code == QM_OK);
            CHECK(sc.rc_alias[r] == QM_OK);
        }

        /* the last rank and (n >= 3) rank 1 fail: everyone reports the lowest failing rank */
        memset(&sc, 0, sizeof sc);
        sc.n = n;
        for (int r = 0; r < n; ++r)
            qm_status_clear(&sc.mine[r]);
        int last = n - 1;
        sc.mine[last].code = QM_E_CAPACITY;
        snprintf(sc.mine[last].msg, sizeof sc.mine[last].msg, "feasibility: rank %d is full", last);
        int lowest = last;
        if (n >= 3) {
            sc.mine[1].code = QM_E_INPUT;
            sc.mine[1].backend_code = 7;
            snprintf(sc.mine[1].msg, sizeof sc.mine[1].msg,
                     "encode: input has NaN at global index 17");
            lowest = 1;
        }
        run_ranks(n, comms, status_rank, &sc);
        char want[QM_STATUS_MSG_BYTES + 32];
        if (n == 1)
            snprintf(want, sizeof want, "%s", sc.mine[lowest].msg);
        else
            snprintf(want, sizeof want, "rank %d: %s", lowest, sc.mine[lowest].msg);
        for (int r = 0; r < n; ++r) {
            CHECK(sc.rc[r] == sc.mine[lowest].code);
            CHECK_STR(sc.st[r].msg, want);
            CHECK(sc.st[r].code == sc.mine[lowest].code);
            CHECK(sc.first[r].code == sc.mine[lowest].code);
            CHECK_STR(sc.first[r].msg, sc.mine[lowest].msg);
            CHECK(sc.first[r].backend_code == sc.mine[lowest].backend_code);
            CHECK(sc.rc_alias[r] == sc.mine[lowest].code);
            CHECK_STR(sc.alias[r].msg, want);
        }
        free_group(n, comms);
    }
}

/* ---- threads: mismatched collectives and ranks that never arrive ----------------------------- */

typedef struct stray_case {
    int mode;
    atomic_int n_returned; /* mode 1: ranks back from the all-gather */
    qm_code rc[MAX_RANKS][2];
    qm_status st[MAX_RANKS][2];
    double elapsed;
} stray_case;

static void stray_rank(qm_comm *c, void *arg)
{
    stray_case *sc = arg;
    int r = qm_comm_rank(c);
    unsigned char buf[8] = {0}, all[3 * 8];
    qm_status_clear(&sc->st[r][0]);
    qm_status_clear(&sc->st[r][1]);
    if (sc->mode == 0) {
        /* rank 1 enters a broadcast while the others enter a barrier */
        if (r == 1)
            sc->rc[r][0] = qm_comm_broadcast(c, buf, 8, 0, &sc->st[r][0]);
        else
            sc->rc[r][0] = qm_comm_barrier(c, &sc->st[r][0]);
        sc->rc[r][1] = qm_comm_barrier(c, &sc->st[r][1]); /* still usable */
    } else if (sc->mode == 1) {
        /* rank 2 skips the all-gather (as if it had returned early) */
        if (r != 2) {
            sc->rc[r][0] = qm_comm_allgather(c, buf, 8, all, &sc->st[r][0]);
            atomic_fetch_add(&sc->n_returned, 1);
        } else {
            /* stay away until the others have given up: they return after the group's timeout
             * whatever the machine's load, so this waits for that event, not for a time (ctest's
             * TIMEOUT is the watchdog); the pause only keeps the poll cheap */
            while (atomic_load(&sc->n_returned) < 2) {
                struct timespec ts = {0, 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            sc->rc[r][0] = QM_OK;
        }
        sc->rc[r][1] = qm_comm_barrier(c, &sc->st[r][1]); /* the group is broken now */
    } else {
        /* tags that never match: rank 0 waits for tag 5, rank 1 sends tag 6 */
        if (r == 0)
            sc->rc[r][0] = qm_comm_recv(c, 1, buf, 8, 5, &sc->st[r][0]);
        else
            sc->rc[r][0] = qm_comm_send(c, 0, buf, 8, 6, &sc->st[r][0]);
    }
}

static void test_threads_stray(void)
{
    static stray_case sc;
    qm_comm *comms[MAX_RANKS];

    memset(&sc, 0, sizeof sc);
    sc.mode = 0;
    make_group(3, comms, 10.0);
    run_ranks(3, comms, stray_rank, &sc);
    for (int r = 0; r < 3; ++r) {
        CHECK(sc.rc[r][0] == QM_E_RANK);
        CHECK_ERR(sc.st[r][0], QM_E_RANK, "threads comm: ranks entered different collectives: rank 0 "
                  "entered barrier, rank 1 entered broadcast (8 B from rank 0); every rank must "
                  "enter the same collectives in the same order");
        CHECK(sc.rc[r][1] == QM_OK);
    }
    free_group(3, comms);

    memset(&sc, 0, sizeof sc);
    sc.mode = 1;
    atomic_init(&sc.n_returned, 0);
    make_group(3, comms, 0.3);
    double t0 = now_s();
    run_ranks(3, comms, stray_rank, &sc);
    double dt = now_s() - t0;
    CHECK(dt < 5.0);
    int timed_out = 0;
    for (int r = 0; r < 2; ++r) {
        CHECK(sc.rc[r][0] == QM_E_BACKEND);
        CHECK(strstr(sc.st[r][0].msg, "in allgather for rank 2 (1 of 3 never arrived)") != NULL);
        timed_out += strstr(sc.st[r][0].msg, "a rank skipped the collective, returned early or died")
                     != NULL;
    }
    CHECK(timed_out >= 1);
    for (int r = 0; r < 3; ++r)
        CHECK_ERR(sc.st[r][1], QM_E_BACKEND, "cannot continue: the group is broken (rank");
    free_group(3, comms);

    memset(&sc, 0, sizeof sc);
    sc.mode = 2;
    make_group(2, comms, 0.3);
    t0 = now_s();
    run_ranks(2, comms, stray_rank, &sc);
    CHECK(now_s() - t0 < 5.0);
    CHECK(sc.rc[0][0] == QM_E_BACKEND && sc.rc[1][0] == QM_E_BACKEND);
    int named = 0;
    for (int r = 0; r < 2; ++r)
        named += strstr(sc.st[r][0].msg, "rank 0 waited 0.30 s in recv from rank 1 (tag 5, 8 B) "
                        "for a matching send") != NULL ||
                 strstr(sc.st[r][0].msg, "rank 1 waited 0.30 s in send to rank 0 (tag 6, 8 B) "
                        "for a matching recv") != NULL;
    CHECK(named == 2);
    free_group(2, comms);
}

static void test_threads_validation(void)
{
    qm_comm *comms[MAX_RANKS];
    qm_status st;
    unsigned char buf[8] = {0};
    qm_status_clear(&st);
    make_group(2, comms, 10.0);
    CHECK_STR(qm_comm_kind_name(qm_comm_kind_get(comms[1])), "threads");
    CHECK(qm_comm_rank(comms[1]) == 1 && qm_comm_size(comms[1]) == 2);
    /* each is rejected before entering, so no partner is needed */
    CHECK(qm_comm_send(comms[0], 0, buf, 8, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "comm send: rank 0 is not another rank (this is rank 0 of 2)");
    CHECK(qm_comm_send(comms[0], 2, buf, 8, 0, &st) == QM_E_ARG);
    CHECK(qm_comm_send(comms[0], 1, buf, 8, -1, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "comm send to rank 1: tag -1 is outside 0..32767");
    CHECK(qm_comm_recv(comms[1], 0, buf, 8, 32768, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "comm recv from rank 0: tag 32768 is outside 0..32767");
    CHECK(qm_comm_recv(comms[1], 0, NULL, 8, 1, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "buf must not be NULL (8 B)");
    CHECK(qm_comm_broadcast(comms[0], buf, 8, 2, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "root 2 is not a rank (world size 2)");
    CHECK(qm_comm_broadcast(comms[0], buf, 8, -1, &st) == QM_E_ARG);
    CHECK(qm_comm_threads_set_timeout(comms[0], 0.0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "timeout must be in (0, 3600] s (got 0)");
    CHECK(qm_comm_threads_set_timeout(comms[0], NAN, &st) == QM_E_ARG);
    /* zero-byte collectives return at once on every rank */
    CHECK(qm_comm_allgather(comms[0], buf, 0, buf, &st) == QM_OK);
    CHECK(qm_comm_broadcast(comms[0], buf, 0, 1, &st) == QM_OK);
    CHECK(qm_comm_allreduce_sum_f64(comms[0], NULL, 0, &st) == QM_OK);
    free_group(2, comms);
}

int main(void)
{
    test_local();
    test_threads_primitives();
    test_threads_allreduce();
    test_threads_p2p();
    test_threads_agree();
    test_threads_status();
    test_threads_stray();
    test_threads_validation();
    return qm_test_end("test_comm");
}
