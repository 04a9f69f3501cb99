/* test_comm_stress.c — thousands of collective rounds on the communicators, with uneven per-rank
 * delays, checking every value (label `concurrency`; CI repeats the label, tests/README.md).
 *
 *   test_comm_stress [ROUNDS]          threads comm: 2, 3, 4, 5, 6, 7 and 8 ranks in one process
 *   test_comm_stress --mpi [ROUNDS]    the MPI comm, one rank per mpiexec process
 *
 * Every round runs one operation chosen from a sequence that all ranks derive from the round number
 * alone (so they agree on it without talking): all-gather of records that name the sender and the
 * round; a verdict where the round says which ranks fail (every rank must return the lowest failing
 * rank's code and message); barrier; all-reduce (exact integers in doubles, checked to the bit);
 * broadcast from a round-chosen root; agree on a value (every few rounds one rank disagrees); and a
 * ring send/recv. Before each operation a rank spins for a pseudo-random number of iterations drawn
 * from its own sequence (and sometimes yields), so ranks arrive in every order. The delays perturb
 * the schedule only: no check depends on timing.
 *
 * Watchdog: the threads comm's own timeout (set to 120 s here, far above a round's cost) turns a
 * lost wake-up into a failure naming the collective and the ranks that never arrived; under MPI,
 * ctest's TIMEOUT ends the job. A hang found here was the test fixture's race in
 * tests/sim_fixtures.h (issue 13 item 2), found by repeating test_materialize_ranks. */
#define _POSIX_C_SOURCE 200809L
#include "comm.h"
#include "status_internal.h"
#include "testlib.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_ALLGATHER, OP_VERDICT, OP_BARRIER, OP_ALLREDUCE, OP_BROADCAST, OP_AGREE, OP_RING, OP_COUNT };

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* A rank's uneven arrival: up to ~50k spin iterations, and a yield one time in eight. */
static void delay(uint64_t *rng)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = *rng >> 33;
    volatile uint64_t sink = 0;
    for (uint64_t i = 0, n = r % 50000; i < n; ++i)
        sink += i;
    (void)sink;
    if ((r & 7) == 0)
        sched_yield();
}

typedef struct stress_result {
    int failures; /* checks that failed on this rank */
    int checks;
    char first[QM_STATUS_MSG_BYTES + 64];
} stress_result;

static void fail_at(stress_result *res, int round, const char *what, const qm_status *st)
{
    if (res->failures++ == 0)
        snprintf(res->first, sizeof res->first, "round %d: %s%s%s", round, what,
                 st && st->code != QM_OK ? ": " : "", st && st->code != QM_OK ? st->msg : "");
}

#define EXPECT(cond, what, st)                                                                     \
    do {                                                                                           \
        res->checks++;                                                                             \
        if (!(cond))                                                                               \
            fail_at(res, round, what, st);                                                         \
    } while (0)

/* The whole stress sequence on one rank; returns when every round is done or after the first
 * failed collective (a broken group cannot go on). */
static void stress(qm_comm *c, int rounds, stress_result *res)
{
    const int me = qm_comm_rank(c), n = qm_comm_size(c);
    uint64_t rng = mix(0x51A7E5ull + (uint64_t)me);
    uint64_t *records = calloc((size_t)n, sizeof *records);
    double *vals = calloc(16, sizeof *vals);
    if (!records || !vals) {
        res->failures++;
        snprintf(res->first, sizeof res->first, "out of memory");
        goto out;
    }
    for (int round = 0; round < rounds; ++round) {
        const uint64_t h = mix((uint64_t)round * 0x9E3779B97F4A7C15ull + 12345);
        const int op = (int)(h % OP_COUNT);
        qm_status st;
        qm_status_clear(&st);
        delay(&rng);
        switch (op) {
        case OP_ALLGATHER: {
            const uint64_t mine = ((uint64_t)round << 16) | (uint64_t)me;
            memset(records, 0xAB, (size_t)n * sizeof *records);
            qm_code rc = qm_comm_allgather(c, &mine, sizeof mine, records, &st);
            EXPECT(rc == QM_OK, "allgather", &st);
            if (rc != QM_OK)
                goto out;
            for (int r = 0; r < n; ++r)
                EXPECT(records[r] == (((uint64_t)round << 16) | (uint64_t)r), "allgather record", NULL);
            break;
        }
        case OP_VERDICT: {
            /* bit r of h >> 8 says whether rank r fails (about half the rounds have a failure) */
            const uint64_t fails = (h >> 8) & ((h >> 40) & 1 ? 0 : UINT64_MAX);
            int lowest = -1;
            for (int r = 0; r < n && lowest < 0; ++r)
                if ((fails >> (r % 64)) & 1)
                    lowest = r;
            qm_code mine = QM_OK;
            if ((fails >> (me % 64)) & 1)
                mine = qm_fail(&st, QM_E_CAPACITY, "stress: rank %d fails round %d", me, round);
            qm_code rc = qm_comm_verdict(c, mine, &st);
            if (lowest < 0) {
                EXPECT(rc == QM_OK, "verdict without failures", &st);
            } else {
                char want[QM_STATUS_MSG_BYTES];
                if (n > 1)
                    snprintf(want, sizeof want, "rank %d: stress: rank %d fails round %d", lowest,
                             lowest, round);
                else
                    snprintf(want, sizeof want, "stress: rank %d fails round %d", lowest, round);
                EXPECT(rc == QM_E_CAPACITY && strcmp(st.msg, want) == 0, "verdict message", &st);
                if (rc == QM_E_BACKEND)
                    goto out;
            }
            break;
        }
        case OP_BARRIER: {
            qm_code rc = qm_comm_barrier(c, &st);
            EXPECT(rc == QM_OK, "barrier", &st);
            if (rc != QM_OK)
                goto out;
            break;
        }
        case OP_ALLREDUCE: {
            const uint64_t count = 1 + h % 16;
            for (uint64_t i = 0; i < count; ++i)
                vals[i] = (double)((me + 1) * (round % 1000 + 1) + (int)i);
            qm_code rc = qm_comm_allreduce_sum_f64(c, vals, count, &st);
            EXPECT(rc == QM_OK, "allreduce", &st);
            if (rc != QM_OK)
                goto out;
            for (uint64_t i = 0; i < count; ++i) {
                const double want = (double)((n * (n + 1) / 2) * (round % 1000 + 1) + n * (int)i);
                EXPECT(vals[i] == want, "allreduce value", NULL);
            }
            break;
        }
        case OP_BROADCAST: {
            const int root = (int)((h >> 20) % (uint64_t)n);
            uint64_t v = me == root ? mix((uint64_t)round) : 0;
            qm_code rc = qm_comm_broadcast(c, &v, sizeof v, root, &st);
            EXPECT(rc == QM_OK, "broadcast", &st);
            if (rc != QM_OK)
                goto out;
            EXPECT(v == mix((uint64_t)round), "broadcast value", NULL);
            break;
        }
        case OP_AGREE: {
            /* one round in four, the last rank holds another value: every rank fails alike */
            const bool differ = n > 1 && (h >> 12) % 4 == 0;
            const uint64_t v = (uint64_t)round + (differ && me == n - 1 ? 1 : 0);
            qm_code rc = qm_comm_agree(c, v, "stress value", &st);
            if (differ)
                EXPECT(rc == QM_E_RANK && strstr(st.msg, "ranks disagree on the stress value") != NULL,
                       "agree mismatch", &st);
            else
                EXPECT(rc == QM_OK, "agree", &st);
            if (rc == QM_E_BACKEND)
                goto out;
            break;
        }
        case OP_RING: {
            if (n == 1)
                break;
            /* even ranks send first, odd ranks receive first (no send buffering is assumed) */
            const int to = (me + 1) % n, from = (me + n - 1) % n, tag = round % 1000;
            uint64_t out = ((uint64_t)round << 16) | (uint64_t)me, in = 0;
            qm_code rc;
            if (me % 2 == 0) {
                rc = qm_comm_send(c, to, &out, sizeof out, tag, &st);
                if (rc == QM_OK)
                    rc = qm_comm_recv(c, from, &in, sizeof in, tag, &st);
            } else {
                rc = qm_comm_recv(c, from, &in, sizeof in, tag, &st);
                if (rc == QM_OK)
                    rc = qm_comm_send(c, to, &out, sizeof out, tag, &st);
            }
            EXPECT(rc == QM_OK, "ring", &st);
            if (rc != QM_OK)
                goto out;
            EXPECT(in == (((uint64_t)round << 16) | (uint64_t)from), "ring value", NULL);
            break;
        }
        }
    }
out:
    free(records);
    free(vals);
}

typedef struct thread_job {
    qm_comm *comm;
    int rounds;
    stress_result res;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    stress(j->comm, j->rounds, &j->res);
    return NULL;
}

static void run_threads(int n, int rounds)
{
    qm_status st;
    qm_comm *comms[8];
    thread_job jobs[8];
    pthread_t th[8];
    CHECK(qm_comm_threads_create(n, comms, &st) == QM_OK);
    for (int r = 0; r < n; ++r)
        CHECK(qm_comm_threads_set_timeout(comms[r], 120.0, &st) == QM_OK);
    for (int r = 0; r < n; ++r) {
        jobs[r] = (thread_job){.comm = comms[r], .rounds = rounds};
        CHECK(pthread_create(&th[r], NULL, thread_main, &jobs[r]) == 0);
    }
    int checks = 0, failures = 0;
    for (int r = 0; r < n; ++r) {
        pthread_join(th[r], NULL);
        checks += jobs[r].res.checks;
        failures += jobs[r].res.failures;
        if (jobs[r].res.failures)
            fprintf(stderr, "threads %d, rank %d: %d failed checks, first: %s\n", n, r,
                    jobs[r].res.failures, jobs[r].res.first);
        qm_comm_destroy(comms[r]);
    }
    /* every rank ran every round, and every round checks at least once on every rank */
    CHECK(failures == 0);
    CHECK(checks >= n * rounds);
    printf("threads comm, %d ranks: %d rounds, %d checks, %d failed\n", n, rounds, checks, failures);
}

int main(int argc, char **argv)
{
    bool mpi = argc > 1 && strcmp(argv[1], "--mpi") == 0;
    const int rounds = argc > (mpi ? 2 : 1) ? atoi(argv[mpi ? 2 : 1]) : 3000;
    if (rounds < 1) {
        fprintf(stderr, "usage: test_comm_stress [--mpi] [ROUNDS >= 1]\n");
        return 2;
    }
    if (!mpi) {
        for (int n = 2; n <= 8; ++n)
            run_threads(n, rounds);
        return qm_test_end("test_comm_stress");
    }
    qm_status st;
    qm_comm *c = NULL;
    if (qm_comm_mpi_create(&argc, &argv, &c, &st) != QM_OK) {
        fprintf(stderr, "%s\n", st.msg);
        return 1;
    }
    stress_result res = {0};
    stress(c, rounds, &res);
    const int me = qm_comm_rank(c), n = qm_comm_size(c);
    if (res.failures)
        fprintf(stderr, "mpi rank %d: %d failed checks, first: %s\n", me, res.failures, res.first);
    CHECK(res.failures == 0);
    CHECK(res.checks >= rounds);
    printf("mpi comm, rank %d of %d: %d rounds, %d checks, %d failed\n", me, n, rounds, res.checks,
           res.failures);
    qm_comm_destroy(c);
    char name[48];
    snprintf(name, sizeof name, "test_comm_stress[%d/%d]", me, n);
    return qm_test_end(name);
}
