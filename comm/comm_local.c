/* comm_local.c — communicators inside one process: "local" (world size 1) and "threads" (n ranks
 * as n threads, so that multi-rank engine logic is unit-tested without mpirun).
 *
 * In: one piece at a time from the wrappers in comm.c (arguments already checked, messages already
 * chunked).
 * Out: memcpy between the ranks' buffers.
 * The threads comm is deliberately stricter than MPI, like hal/sim is stricter than hardware:
 *   - send is synchronous (a rendezvous: it returns once the matching recv has copied the bytes),
 *     the least buffering MPI allows, so code that passes here cannot deadlock under MPI for lack of
 *     buffering;
 *   - every collective checks that all ranks entered the same collective with the same size and
 *     root, and fails on every rank with the same E-RANK message when they did not (MPI would hang
 *     or corrupt memory);
 *   - every wait is bounded by the group's timeout: a rank that never arrives (it skipped a
 *     collective, returned early or its thread died) makes the waiting ranks fail with E-BACKEND
 *     naming the missing ranks; the group is then broken and every later call fails at once.
 * A collective is two barrier phases: each rank posts its buffer pointer, (phase 1) every rank
 * checks the posts and copies what it needs straight from the other ranks' buffers, (phase 2) nobody
 * leaves before everyone has copied, so the buffers stay valid. One mutex and one condition
 * variable (on CLOCK_MONOTONIC) serve the whole group: simple, and plenty for tests.
 * Must not: be used for performance; share one rank's comm between threads.
 */
#define _POSIX_C_SOURCE 200809L

#include "comm_impl.h"
#include "status_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TC_MAX_RANKS 1024
#define TC_DEFAULT_TIMEOUT_S 30.0

/* ---- local: world size 1 --------------------------------------------------------------------- */

static int local_rank(void *ctx)
{
    (void)ctx;
    return 0;
}

static int local_size(void *ctx)
{
    (void)ctx;
    return 1;
}

static qm_code local_allgather(void *ctx, const void *mine, uint64_t piece_bytes, void *all,
                               uint64_t stride_bytes, qm_status *st)
{
    (void)ctx;
    (void)stride_bytes;
    (void)st;
    memcpy(all, mine, (size_t)piece_bytes);
    return QM_OK;
}

static qm_code local_broadcast(void *ctx, void *buf, uint64_t bytes, int root, qm_status *st)
{
    (void)ctx;
    (void)buf;
    (void)bytes;
    (void)root;
    (void)st;
    return QM_OK; /* the only rank is the root */
}

static qm_code local_barrier(void *ctx, qm_status *st)
{
    (void)ctx;
    (void)st;
    return QM_OK;
}

/* The wrappers reject every peer of a one-rank world, so these are never reached. */
static qm_code local_send(void *ctx, int dst, const void *buf, uint64_t bytes, int tag,
                          qm_status *st)
{
    (void)ctx;
    (void)buf;
    (void)bytes;
    (void)tag;
    return qm_fail(st, QM_E_INTERNAL, "local comm: send to rank %d in a world of one rank", dst);
}

static qm_code local_recv(void *ctx, int src, void *buf, uint64_t bytes, int tag, qm_status *st)
{
    (void)ctx;
    (void)buf;
    (void)bytes;
    (void)tag;
    return qm_fail(st, QM_E_INTERNAL, "local comm: recv from rank %d in a world of one rank", src);
}

static void local_destroy(void *ctx) { (void)ctx; }

static const qm_comm_ops local_ops = {
    .kind = QM_COMM_LOCAL,
    .abi = QM_COMM_ABI,
    .rank = local_rank,
    .size = local_size,
    .allgather = local_allgather,
    .broadcast = local_broadcast,
    .barrier = local_barrier,
    .send = local_send,
    .recv = local_recv,
    .destroy = local_destroy,
};

qm_code qm_comm_local_create(qm_comm **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!out)
        return qm_fail(st, QM_E_ARG, "local comm: out must not be NULL");
    return qm_comm_create(&local_ops, NULL, out, st);
}

/* ---- threads: n ranks in one process --------------------------------------------------------- */

enum tc_op { TC_NONE = 0, TC_ALLGATHER, TC_BROADCAST, TC_BARRIER };

/* What a rank posted for the collective in progress. */
typedef struct tc_post {
    enum tc_op op;
    uint64_t bytes;
    int root;
    const void *src;
} tc_post;

/* The rendezvous slot of the pair src -> dst (each rank is one thread, so at most one send per pair
 * is pending at a time). */
typedef struct tc_mail {
    bool posted, done;
    const void *buf;
    uint64_t bytes;
    int tag;
    uint64_t recv_bytes; /* what the receiver expected (reported to the sender on a mismatch) */
} tc_mail;

typedef struct tc_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int refs;          /* rank objects alive, plus one while qm_comm_threads_create runs */
    double timeout_s;
    uint64_t gen;      /* barrier generation */
    int arrived;       /* ranks in the current generation */
    unsigned char *here; /* per rank: arrived in the current generation */
    bool broken;
    char broken_msg[QM_STATUS_MSG_BYTES];
    tc_post *post;     /* per rank */
    tc_mail *mail;     /* n * n, [src * n + dst] */
} tc_group;

typedef struct tc_rank {
    tc_group *g;
    int rank;
} tc_rank;

static const char *tc_op_name(enum tc_op op)
{
    switch (op) {
    case TC_ALLGATHER: return "allgather";
    case TC_BROADCAST: return "broadcast";
    case TC_BARRIER: return "barrier";
    case TC_NONE: break;
    }
    return "nothing";
}

static void tc_group_free(tc_group *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->here);
    free(g->post);
    free(g->mail);
    free(g);
}

/* Drop one reference; the last frees the group. No other thread can hold the mutex by then. */
static void tc_group_release(tc_group *g)
{
    pthread_mutex_lock(&g->mu);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last)
        tc_group_free(g);
}

static struct timespec tc_deadline(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Mark the group broken (mutex held); the first reason wins. Wakes every waiter. */
static void tc_break(tc_group *g, const char *msg)
{
    if (!g->broken) {
        g->broken = true;
        snprintf(g->broken_msg, sizeof g->broken_msg, "%s", msg);
    }
    pthread_cond_broadcast(&g->cv);
}

/* Mutex held. */
static qm_code tc_fail_broken(const tc_rank *t, qm_status *st)
{
    return qm_fail(st, QM_E_BACKEND, "threads comm: rank %d cannot continue: the group is broken (%s)",
                   t->rank, t->g->broken_msg);
}

/* One barrier phase, bounded by the group's timeout. `what` names the collective in messages. */
static qm_code tc_barrier_phase(tc_rank *t, const char *what, qm_status *st)
{
    tc_group *g = t->g;
    qm_code rc = QM_OK;
    pthread_mutex_lock(&g->mu);
    if (g->broken) {
        rc = tc_fail_broken(t, st);
        goto unlock;
    }
    g->here[t->rank] = 1;
    if (++g->arrived == g->n) {
        g->arrived = 0;
        memset(g->here, 0, (size_t)g->n);
        g->gen++;
        pthread_cond_broadcast(&g->cv);
        goto unlock;
    }
    uint64_t my_gen = g->gen;
    double timeout_s = g->timeout_s;
    struct timespec deadline = tc_deadline(timeout_s);
    while (g->gen == my_gen && !g->broken) {
        int e = pthread_cond_timedwait(&g->cv, &g->mu, &deadline);
        if (e == ETIMEDOUT && g->gen == my_gen && !g->broken) {
            char msg[QM_STATUS_MSG_BYTES];
            size_t len = (size_t)snprintf(msg, sizeof msg, "rank %d waited %.2f s in %s for rank",
                                          t->rank, timeout_s, what);
            int missing = 0;
            for (int r = 0; r < g->n; ++r) {
                if (g->here[r])
                    continue;
                if (len < sizeof msg)
                    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%d",
                                            missing ? ", " : " ", r);
                ++missing;
            }
            if (len < sizeof msg)
                snprintf(msg + len, sizeof msg - len, " (%d of %d never arrived)", missing, g->n);
            tc_break(g, msg);
            rc = qm_fail(st, QM_E_BACKEND, "threads comm: %s; a rank skipped the collective, "
                         "returned early or died", msg);
            goto unlock;
        }
    }
    if (g->gen == my_gen)
        rc = tc_fail_broken(t, st);

unlock:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int tc_describe(const tc_post *p, int rank, char *buf, size_t n)
{
    if (p->op == TC_BROADCAST)
        return snprintf(buf, n, "rank %d entered broadcast (%llu B from rank %d)", rank,
                        (unsigned long long)p->bytes, p->root);
    if (p->op == TC_ALLGATHER)
        return snprintf(buf, n, "rank %d entered allgather (%llu B)", rank,
                        (unsigned long long)p->bytes);
    return snprintf(buf, n, "rank %d entered %s", rank, tc_op_name(p->op));
}

/* After phase 1: did every rank post the same collective? Reads only the posts, which nobody
 * writes before phase 2, so every rank computes the same answer and the same message. */
static qm_code tc_check_posts(const tc_rank *t, qm_status *st)
{
    const tc_group *g = t->g;
    const tc_post *p0 = &g->post[0];
    for (int r = 1; r < g->n; ++r) {
        const tc_post *p = &g->post[r];
        if (p->op == p0->op && p->bytes == p0->bytes && p->root == p0->root)
            continue;
        char a[160], b[160];
        tc_describe(p0, 0, a, sizeof a);
        tc_describe(p, r, b, sizeof b);
        return qm_fail(st, QM_E_RANK, "threads comm: ranks entered different collectives: %s, %s; "
                       "every rank must enter the same collectives in the same order", a, b);
    }
    return QM_OK;
}

/* Post, phase 1, check, copy (when the check passed), phase 2. */
static qm_code tc_collective(tc_rank *t, tc_post mine, void *dst, uint64_t stride_bytes,
                             qm_status *st)
{
    tc_group *g = t->g;
    const char *what = tc_op_name(mine.op);
    g->post[t->rank] = mine;
    qm_code rc = tc_barrier_phase(t, what, st);
    if (rc != QM_OK)
        return rc;
    rc = tc_check_posts(t, st);
    if (rc == QM_OK && mine.op == TC_ALLGATHER) {
        for (int r = 0; r < g->n; ++r)
            memcpy((unsigned char *)dst + (uint64_t)r * stride_bytes, g->post[r].src,
                   (size_t)mine.bytes);
    } else if (rc == QM_OK && mine.op == TC_BROADCAST && t->rank != mine.root) {
        memcpy(dst, g->post[mine.root].src, (size_t)mine.bytes);
    }
    /* Enter phase 2 even after a failed check, so every rank leaves this collective together. */
    qm_code rc2 = tc_barrier_phase(t, what, rc == QM_OK ? st : NULL);
    return rc != QM_OK ? rc : rc2;
}

static int tc_rank_get(void *ctx) { return ((const tc_rank *)ctx)->rank; }
static int tc_size_get(void *ctx) { return ((const tc_rank *)ctx)->g->n; }

static qm_code tc_allgather(void *ctx, const void *mine, uint64_t piece_bytes, void *all,
                            uint64_t stride_bytes, qm_status *st)
{
    tc_post p = {.op = TC_ALLGATHER, .bytes = piece_bytes, .root = -1, .src = mine};
    return tc_collective(ctx, p, all, stride_bytes, st);
}

static qm_code tc_broadcast(void *ctx, void *buf, uint64_t bytes, int root, qm_status *st)
{
    tc_post p = {.op = TC_BROADCAST, .bytes = bytes, .root = root, .src = buf};
    return tc_collective(ctx, p, buf, 0, st);
}

static qm_code tc_barrier(void *ctx, qm_status *st)
{
    tc_post p = {.op = TC_BARRIER, .bytes = 0, .root = -1, .src = NULL};
    return tc_collective(ctx, p, NULL, 0, st);
}

static qm_code tc_send(void *ctx, int dst, const void *buf, uint64_t bytes, int tag, qm_status *st)
{
    tc_rank *t = ctx;
    tc_group *g = t->g;
    qm_code rc = QM_OK;
    tc_mail *m = &g->mail[(size_t)t->rank * (size_t)g->n + (size_t)dst];
    pthread_mutex_lock(&g->mu);
    if (g->broken) {
        rc = tc_fail_broken(t, st);
        goto unlock;
    }
    *m = (tc_mail){.posted = true, .done = false, .buf = buf, .bytes = bytes, .tag = tag};
    pthread_cond_broadcast(&g->cv);
    double timeout_s = g->timeout_s;
    struct timespec deadline = tc_deadline(timeout_s);
    while (!m->done && !g->broken) {
        int e = pthread_cond_timedwait(&g->cv, &g->mu, &deadline);
        if (e == ETIMEDOUT && !m->done && !g->broken) {
            char msg[QM_STATUS_MSG_BYTES];
            snprintf(msg, sizeof msg, "rank %d waited %.2f s in send to rank %d (tag %d, %llu B) "
                     "for a matching recv", t->rank, timeout_s, dst, tag,
                     (unsigned long long)bytes);
            tc_break(g, msg);
            rc = qm_fail(st, QM_E_BACKEND, "threads comm: %s", msg);
            goto withdraw;
        }
    }
    if (!m->done) {
        rc = tc_fail_broken(t, st);
        goto withdraw;
    }
    if (m->recv_bytes != bytes)
        rc = qm_fail(st, QM_E_BACKEND, "threads comm: send to rank %d (tag %d): rank %d expected "
                     "%llu B, this rank sent %llu B", dst, tag, dst,
                     (unsigned long long)m->recv_bytes, (unsigned long long)bytes);
withdraw:
    m->posted = false;
    m->done = false;
unlock:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static qm_code tc_recv(void *ctx, int src, void *buf, uint64_t bytes, int tag, qm_status *st)
{
    tc_rank *t = ctx;
    tc_group *g = t->g;
    qm_code rc = QM_OK;
    tc_mail *m = &g->mail[(size_t)src * (size_t)g->n + (size_t)t->rank];
    pthread_mutex_lock(&g->mu);
    if (g->broken) {
        rc = tc_fail_broken(t, st);
        goto unlock;
    }
    double timeout_s = g->timeout_s;
    struct timespec deadline = tc_deadline(timeout_s);
    while (!(m->posted && !m->done && m->tag == tag) && !g->broken) {
        int e = pthread_cond_timedwait(&g->cv, &g->mu, &deadline);
        if (e == ETIMEDOUT && !(m->posted && !m->done && m->tag == tag) && !g->broken) {
            char msg[QM_STATUS_MSG_BYTES];
            snprintf(msg, sizeof msg, "rank %d waited %.2f s in recv from rank %d (tag %d, %llu B) "
                     "for a matching send", t->rank, timeout_s, src, tag,
                     (unsigned long long)bytes);
            tc_break(g, msg);
            rc = qm_fail(st, QM_E_BACKEND, "threads comm: %s", msg);
            goto unlock;
        }
    }
    if (g->broken) {
        rc = tc_fail_broken(t, st);
        goto unlock;
    }
    m->recv_bytes = bytes;
    if (m->bytes != bytes)
        rc = qm_fail(st, QM_E_BACKEND, "threads comm: recv from rank %d (tag %d): expected %llu B, "
                     "rank %d sent %llu B", src, tag, (unsigned long long)bytes, src,
                     (unsigned long long)m->bytes);
    else if (bytes > 0)
        memcpy(buf, m->buf, (size_t)bytes);
    m->done = true;
    pthread_cond_broadcast(&g->cv);

unlock:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static void tc_destroy(void *ctx)
{
    tc_rank *t = ctx;
    tc_group *g = t->g;
    free(t);
    tc_group_release(g);
}

static const qm_comm_ops threads_ops = {
    .kind = QM_COMM_THREADS,
    .abi = QM_COMM_ABI,
    .rank = tc_rank_get,
    .size = tc_size_get,
    .allgather = tc_allgather,
    .broadcast = tc_broadcast,
    .barrier = tc_barrier,
    .send = tc_send,
    .recv = tc_recv,
    .destroy = tc_destroy,
};

static qm_code tc_group_create(int n, tc_group **out, qm_status *st)
{
    qm_code rc = QM_OK;
    pthread_condattr_t attr;
    bool attr_ok = false, mu_ok = false;
    tc_group *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        goto nomem;
    g->n = n;
    g->refs = 1;
    g->timeout_s = TC_DEFAULT_TIMEOUT_S;
    g->here = calloc((size_t)n, 1);
    g->post = calloc((size_t)n, sizeof *g->post);
    g->mail = calloc((size_t)n * (size_t)n, sizeof *g->mail);
    if (!g->here || !g->post || !g->mail)
        goto nomem;
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        rc = qm_fail(st, QM_E_BACKEND, "threads comm: pthread_mutex_init failed");
        goto cleanup;
    }
    mu_ok = true;
    if (pthread_condattr_init(&attr) != 0 ||
        (attr_ok = true, pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0) ||
        pthread_cond_init(&g->cv, &attr) != 0) {
        rc = qm_fail(st, QM_E_BACKEND, "threads comm: cannot create a condition variable on "
                     "CLOCK_MONOTONIC");
        goto cleanup;
    }
    pthread_condattr_destroy(&attr);
    *out = g;
    return QM_OK;

nomem:
    rc = qm_fail(st, QM_E_NOMEM, "threads comm: out of host memory for %d ranks", n);
cleanup:
    if (attr_ok)
        pthread_condattr_destroy(&attr);
    if (g) {
        if (mu_ok)
            pthread_mutex_destroy(&g->mu);
        free(g->here);
        free(g->post);
        free(g->mail);
        free(g);
    }
    return rc;
}

qm_code qm_comm_threads_create(int n, qm_comm **out, qm_status *st)
{
    qm_code rc = QM_OK;
    tc_group *g = NULL;
    int made = 0;
    if (!out)
        return qm_fail(st, QM_E_ARG, "threads comm: out must not be NULL");
    if (n < 1 || n > TC_MAX_RANKS)
        return qm_fail(st, QM_E_ARG, "threads comm: rank count must be 1..%d (got %d)",
                       TC_MAX_RANKS, n);
    for (int r = 0; r < n; ++r)
        out[r] = NULL;
    rc = tc_group_create(n, &g, st);
    if (rc != QM_OK)
        return rc;
    for (; made < n; ++made) {
        tc_rank *t = malloc(sizeof *t);
        if (!t) {
            rc = qm_fail(st, QM_E_NOMEM, "threads comm: out of host memory for rank %d", made);
            goto fail;
        }
        t->g = g;
        t->rank = made;
        g->refs++; /* no other thread sees g yet */
        rc = qm_comm_create(&threads_ops, t, &out[made], st); /* destroys t on failure */
        if (rc != QM_OK)
            goto fail;
    }
    tc_group_release(g); /* drop the creation reference */
    return QM_OK;

fail:
    for (int r = 0; r < made; ++r) {
        qm_comm_destroy(out[r]);
        out[r] = NULL;
    }
    tc_group_release(g);
    return rc;
}

qm_code qm_comm_threads_set_timeout(qm_comm *c, double seconds, qm_status *st)
{
    if (!c || qm_comm_kind_get(c) != QM_COMM_THREADS)
        return qm_fail(st, QM_E_ARG, "threads comm: set_timeout needs a threads comm (got %s)",
                       c ? qm_comm_kind_name(qm_comm_kind_get(c)) : "NULL");
    if (!(seconds > 0.0 && seconds <= 3600.0))
        return qm_fail(st, QM_E_ARG, "threads comm: timeout must be in (0, 3600] s (got %g)",
                       seconds);
    tc_group *g = ((tc_rank *)qm_comm_ctx(c))->g;
    pthread_mutex_lock(&g->mu);
    g->timeout_s = seconds;
    pthread_mutex_unlock(&g->mu);
    return QM_OK;
}
