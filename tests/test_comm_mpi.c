/* test_comm_mpi.c — the MPI communicator across real processes (label `mpi`; CTest launches it with
 * mpiexec -np 1..4). Every rank runs the same checks as test_comm.c does on the threads comm:
 * rank/size, all-gather in rank order (also a 3 MiB record cut into 1 MiB pieces, which goes through
 * the strided datatype), the rank-ordered sum (bit-identical to a serial reference), broadcast from
 * every root, send/recv with a tiny chunk limit, a size mismatch, an MPI error translated with MPI's
 * own error string (MPI_ERR_TRUNCATE from unequal chunk limits), agree() and allgather_status()
 * failing with the same message on every rank (compared across processes), a second comm while MPI
 * is initialised, and MPI_Finalize on the last destroy.
 *
 * `--die kill|exit`: after a barrier, rank 1 prints "rank 1: dying now (<mode>)" and raises SIGKILL
 * or exits with status 3 without MPI_Finalize, while the other ranks enter an all-gather that can
 * never complete. tests/expect_job_failure.sh checks that mpiexec then ends the job with a nonzero
 * status in bounded time (Open MPI kills the remaining ranks).
 */
#define _POSIX_C_SOURCE 200809L

#include "comm.h"
#include "testlib.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size;

static unsigned char pattern(int rank, size_t i) { return (unsigned char)(rank * 31 + i * 7 + 1); }

static double value_of(int rank, uint64_t i)
{
    uint64_t x = (uint64_t)rank * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    double mant = (double)(x >> 11) / 9007199254740992.0;
    int e = (int)(x % 41) - 20;
    return (x & 1 ? -1.0 : 1.0) * ldexp(mant + 0.5, e);
}

/* Every rank holds the same text (gathered and compared on every rank). */
static void check_same_everywhere(qm_comm *c, const char *text)
{
    char mine[QM_STATUS_MSG_BYTES];
    char *all = calloc((size_t)g_size, QM_STATUS_MSG_BYTES);
    qm_status st;
    qm_status_clear(&st);
    CHECK(all != NULL);
    if (!all)
        return;
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%s", text);
    CHECK(qm_comm_allgather(c, mine, sizeof mine, all, &st) == QM_OK);
    for (int r = 0; r < g_size; ++r)
        CHECK_STR(all + (size_t)r * QM_STATUS_MSG_BYTES, mine);
    free(all);
}

static void test_basics(qm_comm *c)
{
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_comm_kind_get(c) == QM_COMM_MPI);
    CHECK_STR(qm_comm_kind_name(qm_comm_kind_get(c)), "mpi");
    CHECK(g_size >= 1 && g_rank >= 0 && g_rank < g_size);
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    if (env)
        CHECK(atoi(env) == g_size);
    CHECK(qm_comm_barrier(c, &st) == QM_OK);
}

static void test_allgather(qm_comm *c)
{
    qm_status st;
    qm_status_clear(&st);
    enum { REC = 37 };
    unsigned char mine[REC];
    unsigned char *all = calloc((size_t)g_size, REC);
    CHECK(all != NULL);
    if (!all)
        return;
    for (size_t i = 0; i < REC; ++i)
        mine[i] = pattern(g_rank, i);
    for (int variant = 0; variant < 2; ++variant) {
        CHECK(qm_comm_set_chunk_limit(c, variant ? 5 : ((uint64_t)1 << 28), &st) == QM_OK);
        qm_comm_usage u0, u1;
        qm_comm_usage_get(c, &u0);
        memset(all, 0, (size_t)g_size * REC);
        CHECK(qm_comm_allgather(c, mine, REC, all, &st) == QM_OK);
        qm_comm_usage_get(c, &u1);
        CHECK_EQ_U64(u1.n_pieces - u0.n_pieces, variant ? 8 : 1);
        int bad = 0;
        for (int r = 0; r < g_size; ++r)
            for (size_t i = 0; i < REC; ++i)
                bad += all[(size_t)r * REC + i] != pattern(r, i);
        CHECK(bad == 0);
    }
    free(all);

    /* 3 MiB + 3 B per rank in 1 MiB pieces: pieces land at a stride of the whole record */
    const size_t big = ((size_t)3 << 20) + 3;
    unsigned char *bmine = malloc(big);
    unsigned char *ball = malloc(big * (size_t)g_size);
    CHECK(bmine && ball);
    if (bmine && ball) {
        for (size_t i = 0; i < big; ++i)
            bmine[i] = pattern(g_rank, i);
        memset(ball, 0, big * (size_t)g_size);
        CHECK(qm_comm_set_chunk_limit(c, (uint64_t)1 << 20, &st) == QM_OK);
        qm_comm_usage u0, u1;
        qm_comm_usage_get(c, &u0);
        CHECK(qm_comm_allgather(c, bmine, big, ball, &st) == QM_OK);
        qm_comm_usage_get(c, &u1);
        CHECK_EQ_U64(u1.n_pieces - u0.n_pieces, 4);
        size_t bad = 0;
        for (int r = 0; r < g_size; ++r)
            for (size_t i = 0; i < big; ++i)
                bad += ball[(size_t)r * big + i] != pattern(r, i);
        CHECK(bad == 0);
    }
    free(bmine);
    free(ball);
    CHECK(qm_comm_set_chunk_limit(c, (uint64_t)1 << 28, &st) == QM_OK);
}

static void test_allreduce(qm_comm *c)
{
    enum { COUNT = 3001 };
    static double v[COUNT], ref[COUNT];
    qm_status st;
    qm_status_clear(&st);
    for (uint64_t i = 0; i < COUNT; ++i) {
        double s = value_of(0, i);
        for (int r = 1; r < g_size; ++r)
            s += value_of(r, i);
        ref[i] = s;
    }
    for (int variant = 0; variant < 2; ++variant) {
        CHECK(qm_comm_set_chunk_limit(c, variant ? 24 : ((uint64_t)1 << 28), &st) == QM_OK);
        for (uint64_t i = 0; i < COUNT; ++i)
            v[i] = value_of(g_rank, i);
        CHECK(qm_comm_allreduce_sum_f64(c, v, COUNT, &st) == QM_OK);
        CHECK(memcmp(v, ref, sizeof v) == 0);
    }
    static const double ordered[4] = {1e16, 1.0, -1e16, 1.0};
    static const double want[5] = {0, 1e16, 1e16, 0.0, 1.0};
    double x = ordered[g_rank % 4];
    CHECK(qm_comm_allreduce_sum_f64(c, &x, 1, &st) == QM_OK);
    if (g_size <= 4)
        CHECK(x == want[g_size]);
    CHECK(qm_comm_set_chunk_limit(c, (uint64_t)1 << 28, &st) == QM_OK);
}

static void test_broadcast(qm_comm *c)
{
    enum { BYTES = 53 };
    unsigned char buf[BYTES];
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_comm_set_chunk_limit(c, 5, &st) == QM_OK);
    for (int root = 0; root < g_size; ++root) {
        for (size_t i = 0; i < BYTES; ++i)
            buf[i] = g_rank == root ? pattern(100 + root, i) : 0;
        CHECK(qm_comm_broadcast(c, buf, BYTES, root, &st) == QM_OK);
        int bad = 0;
        for (size_t i = 0; i < BYTES; ++i)
            bad += buf[i] != pattern(100 + root, i);
        CHECK(bad == 0);
    }
    CHECK(qm_comm_broadcast(c, buf, BYTES, g_size, &st) == QM_E_ARG);
    CHECK(qm_comm_set_chunk_limit(c, (uint64_t)1 << 28, &st) == QM_OK);
}

static uint64_t p2p_bytes(int r) { return 100 + (uint64_t)r * 97; }

static void test_p2p(qm_comm *c)
{
    qm_status st;
    qm_status_clear(&st);
    unsigned char buf[1000];
    CHECK(qm_comm_set_chunk_limit(c, 7, &st) == QM_OK);
    qm_comm_usage u0, u1;
    qm_comm_usage_get(c, &u0);
    if (g_rank == 0) {
        uint64_t want = 0;
        for (int q = 1; q < g_size; ++q) {
            memset(buf, 0, sizeof buf);
            CHECK(qm_comm_recv(c, q, buf, p2p_bytes(q), q, &st) == QM_OK);
            int bad = 0;
            for (uint64_t i = 0; i < p2p_bytes(q); ++i)
                bad += buf[i] != pattern(q, i);
            CHECK(bad == 0);
            CHECK(qm_comm_recv(c, q, NULL, 0, 99, &st) == QM_OK);
            want += 1 + (p2p_bytes(q) + 6) / 7 + 1;
        }
        qm_comm_usage_get(c, &u1);
        CHECK_EQ_U64(u1.n_pieces - u0.n_pieces, want);
    } else {
        for (uint64_t i = 0; i < p2p_bytes(g_rank); ++i)
            buf[i] = pattern(g_rank, i);
        CHECK(qm_comm_send(c, 0, buf, p2p_bytes(g_rank), g_rank, &st) == QM_OK);
        CHECK(qm_comm_send(c, 0, NULL, 0, 99, &st) == QM_OK);
        qm_comm_usage_get(c, &u1);
        CHECK_EQ_U64(u1.n_pieces - u0.n_pieces, 1 + (p2p_bytes(g_rank) + 6) / 7 + 1);
    }
    CHECK(qm_comm_send(c, g_rank, buf, 1, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "is not another rank");

    if (g_size >= 2) {
        /* rank 1 sends 10 B, rank 0 expects 8 B: E-RANK on rank 0, which drains the message */
        unsigned char ten[10] = {0};
        if (g_rank == 0) {
            CHECK(qm_comm_recv(c, 1, ten, 8, 5, &st) == QM_E_RANK);
            CHECK_STR(st.msg, "comm recv from rank 1 (tag 5): rank 1 sent 10 B but this rank "
                              "expected 8 B; sender and receiver must agree on the size");
        } else if (g_rank == 1) {
            CHECK(qm_comm_send(c, 0, ten, 10, 5, &st) == QM_OK);
        }
        /* unequal chunk limits (a misuse): MPI itself reports the truncation, translated */
        if (g_rank == 0) {
            CHECK(qm_comm_set_chunk_limit(c, 8, &st) == QM_OK);
            qm_status_clear(&st);
            CHECK(qm_comm_recv(c, 1, ten, 10, 6, &st) == QM_E_BACKEND);
            CHECK_ERR(st, QM_E_BACKEND, "comm recv from rank 1 (tag 6, 10 B, piece at offset 0): "
                      "mpi comm: MPI_Recv (8 B from rank 1, tag 6) failed on rank 0: ");
            CHECK_ERR(st, QM_E_BACKEND, "MPI_ERR_TRUNCATE");
            CHECK(st.backend_code != 0);
        } else if (g_rank == 1) {
            CHECK(qm_comm_set_chunk_limit(c, 16, &st) == QM_OK);
            CHECK(qm_comm_send(c, 0, ten, 10, 6, &st) == QM_OK);
        }
        CHECK(qm_comm_barrier(c, &st) == QM_OK); /* still usable */
    }
    CHECK(qm_comm_set_chunk_limit(c, (uint64_t)1 << 28, &st) == QM_OK);
}

static void test_agree(qm_comm *c)
{
    qm_status st;
    qm_status_clear(&st);
    CHECK(qm_comm_agree(c, 0x1a2b3c4d5e6f7081ull, "plan hash", &st) == QM_OK);
    if (g_size < 2)
        return;
    uint64_t v = g_rank == g_size - 1 ? 0x9f00 : 0x1a2b;
    CHECK(qm_comm_agree(c, v, "plan hash", &st) == QM_E_RANK);
    char want[QM_STATUS_MSG_BYTES];
    snprintf(want, sizeof want, "comm: ranks disagree on the plan hash: rank 0 has "
             "0000000000001a2b, rank %d has 0000000000009f00 (1 of %d ranks differ from rank 0); "
             "every rank must be given the same inputs", g_size - 1, g_size);
    CHECK_STR(st.msg, want);
    check_same_everywhere(c, st.msg);
}

static void test_status(qm_comm *c)
{
    qm_status mine, first, st;
    qm_status_clear(&mine);
    qm_status_clear(&st);
    CHECK(qm_comm_allgather_status(c, &mine, &first, &st) == QM_OK);
    CHECK(first.code == QM_OK);

    /* the last rank and (size >= 3) rank 1 fail; everyone reports the lowest failing rank */
    int last = g_size - 1, lowest = last;
    if (g_rank == last) {
        mine.code = QM_E_CAPACITY;
        snprintf(mine.msg, sizeof mine.msg, "feasibility: rank %d is full", last);
    }
    if (g_size >= 3) {
        lowest = 1;
        if (g_rank == 1) {
            mine.code = QM_E_INPUT;
            mine.backend_code = 7;
            snprintf(mine.msg, sizeof mine.msg, "encode: input has NaN at global index 17");
        }
    }
    qm_code want_code = lowest == 1 && g_size >= 3 ? QM_E_INPUT : QM_E_CAPACITY;
    char want_msg[QM_STATUS_MSG_BYTES];
    if (want_code == QM_E_INPUT)
        snprintf(want_msg, sizeof want_msg, "encode: input has NaN at global index 17");
    else
        snprintf(want_msg, sizeof want_msg, "feasibility: rank %d is full", last);
    CHECK(qm_comm_allgather_status(c, &mine, &first, &st) == want_code);
    CHECK(first.code == want_code);
    CHECK_STR(first.msg, want_msg);
    CHECK(first.backend_code == (want_code == QM_E_INPUT ? 7 : 0));
    char prefixed[QM_STATUS_MSG_BYTES + 32];
    if (g_size > 1)
        snprintf(prefixed, sizeof prefixed, "rank %d: %s", lowest, want_msg);
    else
        snprintf(prefixed, sizeof prefixed, "%s", want_msg);
    CHECK_STR(st.msg, prefixed);
    check_same_everywhere(c, st.msg);
    /* aliasing mine and st */
    CHECK(qm_comm_allgather_status(c, &mine, NULL, &mine) == want_code);
    CHECK_STR(mine.msg, prefixed);
}

static void test_lifetime(qm_comm *c)
{
    qm_status st;
    qm_status_clear(&st);
    /* MPI is initialised: a second comm duplicates the world again without re-initialising */
    qm_comm *c2 = NULL;
    CHECK(qm_comm_mpi_create(NULL, NULL, &c2, &st) == QM_OK);
    CHECK(qm_comm_rank(c2) == g_rank && qm_comm_size(c2) == g_size);
    CHECK(qm_comm_barrier(c2, &st) == QM_OK);
    qm_comm_destroy(c2);
    CHECK(qm_comm_barrier(c, &st) == QM_OK); /* the first still works: MPI not finalized */
}

static int die(qm_comm *c, const char *mode)
{
    qm_status st;
    qm_status_clear(&st);
    if (qm_comm_barrier(c, &st) != QM_OK)
        return 2;
    if (g_rank == 1) {
        printf("rank 1: dying now (%s)\n", mode);
        fflush(stdout);
        if (strcmp(mode, "kill") == 0)
            raise(SIGKILL);
        exit(3); /* without MPI_Finalize */
    }
    unsigned char mine = 1, all[64];
    printf("rank %d: entering allgather\n", g_rank);
    fflush(stdout);
    qm_code rc = qm_comm_allgather(c, &mine, 1, all, &st);
    /* Not reached with Open MPI (mpiexec kills this rank). If an MPI reports the failure instead,
     * that is fine too: the job still fails because rank 1 did. */
    printf("rank %d: allgather returned %s: %s\n", g_rank, qm_code_name(rc), st.msg);
    qm_comm_destroy(c);
    return 0;
}

int main(int argc, char **argv)
{
    qm_status st;
    qm_comm *c = NULL;
    qm_status_clear(&st);
    if (qm_comm_mpi_create(&argc, &argv, &c, &st) != QM_OK) {
        char buf[QM_STATUS_MSG_BYTES + 64];
        fprintf(stderr, "%s\n", qm_status_format(&st, buf, sizeof buf));
        return 1;
    }
    g_rank = qm_comm_rank(c);
    g_size = qm_comm_size(c);
    if (argc >= 3 && strcmp(argv[1], "--die") == 0)
        return die(c, argv[2]);

    test_basics(c);
    test_allgather(c);
    test_allreduce(c);
    test_broadcast(c);
    test_p2p(c);
    test_agree(c);
    test_status(c);
    test_lifetime(c);
    qm_comm_destroy(c); /* the last MPI comm: MPI_Finalize */

    c = (qm_comm *)&st;
    CHECK(qm_comm_mpi_create(NULL, NULL, &c, &st) == QM_E_BACKEND);
    CHECK(c == NULL);
    CHECK_ERR(st, QM_E_BACKEND, "MPI was already finalized in this process");

    char name[32];
    snprintf(name, sizeof name, "test_comm_mpi[%d/%d]", g_rank, g_size);
    return qm_test_end(name);
}
