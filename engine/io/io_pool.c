/* io_pool.c — writer threads for the output files of `qmesh encode` (see qm_out_pool in io.h).
 *
 * In: buffers the caller owns (page-locked staging from the HAL, so a device copies into them at
 * full speed), filled one at a time by the caller and handed over with the writer and element
 * offset they go to. Out: the bytes written with pwrite at their offsets by n_threads threads,
 * while the caller fills the next buffer (the device-to-host copy of chunk k + 1 overlaps the
 * write of chunk k); the first failure in submission order.
 * Determinism: every submission takes its I/O step number when it is submitted (in the caller's
 * order), so QM_FAULT_IO=K fails the same chunk on every run, and the failure reported is the
 * failed submission with the lowest number, whatever the thread timing.
 * Must not: free or allocate the buffers, write a buffer before it is submitted or hand it back
 * before its write has returned, leave a thread running after destroy.
 */
#define _GNU_SOURCE
#include "io.h"
#include "io_internal.h"
#include "status_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    int buf;          /* -1: `data` is the caller's memory (qm_out_pool_submit_ptr) */
    const void *data;
    qm_npy_writer *w;
    uint64_t elem_off, n_elems;
    long step;
    uint64_t seq;
} job;

struct qm_out_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, freed;
    void **bufs;
    int n_bufs, n_threads;
    bool *busy;       /* buffer handed out (acquired, queued or being written) */
    job *queue;       /* ring of at most 2 n_bufs jobs (n_bufs of each kind) */
    int q_cap;
    int ext_in_flight; /* caller-memory jobs queued or being written (at most n_bufs) */
    int q_head, q_len;
    int in_flight;    /* queued or being written */
    uint64_t next_seq;
    bool stop;
    bool failed;
    uint64_t fail_seq;
    qm_status fail_st;
    pthread_t *threads;
    int n_started;
};

static void *worker(void *arg)
{
    qm_out_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->q_len == 0)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->q_len == 0) /* stopping, nothing left */
            break;
        const job j = p->queue[p->q_head];
        p->q_head = (p->q_head + 1) % p->q_cap;
        p->q_len--;
        pthread_mutex_unlock(&p->mu);
        qm_status st;
        qm_status_clear(&st);
        const qm_code rc = qm_npy_writer_write_at(j.w, j.elem_off, j.data, j.n_elems, j.step, &st);
        pthread_mutex_lock(&p->mu);
        if (rc != QM_OK && (!p->failed || j.seq < p->fail_seq)) {
            p->failed = true;
            p->fail_seq = j.seq;
            p->fail_st = st;
        }
        if (j.buf >= 0)
            p->busy[j.buf] = false;
        else
            p->ext_in_flight--;
        p->in_flight--;
        pthread_cond_broadcast(&p->freed);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

qm_code qm_out_pool_create(void *const *bufs, int n_bufs, int n_threads, qm_out_pool **out,
                           qm_status *st)
{
    *out = NULL;
    if (!bufs || n_bufs < 1 || n_threads < 1)
        return qm_fail(st, QM_E_ARG, "output pool: at least 1 buffer and 1 thread are needed "
                       "(got %d, %d)", n_bufs, n_threads);
    qm_out_pool *p = calloc(1, sizeof *p);
    if (!p)
        return qm_fail(st, QM_E_NOMEM, "output pool: out of host memory");
    p->n_bufs = n_bufs;
    p->n_threads = n_threads;
    p->bufs = calloc((size_t)n_bufs, sizeof *p->bufs);
    p->busy = calloc((size_t)n_bufs, sizeof *p->busy);
    p->q_cap = 2 * n_bufs;
    p->queue = calloc((size_t)p->q_cap, sizeof *p->queue);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->bufs || !p->busy || !p->queue || !p->threads) {
        qm_out_pool_destroy(p);
        return qm_fail(st, QM_E_NOMEM, "output pool: out of host memory");
    }
    memcpy(p->bufs, bufs, (size_t)n_bufs * sizeof *p->bufs);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->freed, NULL);
    for (; p->n_started < n_threads; ++p->n_started)
        if (pthread_create(&p->threads[p->n_started], NULL, worker, p) != 0)
            break;
    if (p->n_started == 0) {
        qm_out_pool_destroy(p);
        return qm_fail(st, QM_E_NOMEM, "output pool: cannot start a writer thread");
    }
    *out = p; /* fewer threads than asked still write everything */
    return QM_OK;
}

void *qm_out_pool_acquire(qm_out_pool *p, int *idx)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        for (int i = 0; i < p->n_bufs; ++i)
            if (!p->busy[i]) {
                p->busy[i] = true;
                pthread_mutex_unlock(&p->mu);
                *idx = i;
                return p->bufs[i];
            }
        pthread_cond_wait(&p->freed, &p->mu);
    }
}

void qm_out_pool_release(qm_out_pool *p, int idx)
{
    pthread_mutex_lock(&p->mu);
    p->busy[idx] = false;
    pthread_cond_broadcast(&p->freed);
    pthread_mutex_unlock(&p->mu);
}

/* Queue one job (the lock held); its step is numbered by the caller, in submission order. */
static void enqueue(qm_out_pool *p, job j)
{
    j.seq = p->next_seq++;
    p->queue[(p->q_head + p->q_len) % p->q_cap] = j;
    p->q_len++; /* at most q_cap: at most n_bufs jobs of each kind are in flight */
    p->in_flight++;
    pthread_cond_signal(&p->work);
}

void qm_out_pool_submit(qm_out_pool *p, int idx, qm_npy_writer *w, uint64_t elem_off,
                        uint64_t n_elems)
{
    const long step = qm_io_step_take(); /* numbered in submission order, on this thread */
    pthread_mutex_lock(&p->mu);
    enqueue(p, (job){.buf = idx, .data = p->bufs[idx], .w = w, .elem_off = elem_off,
                     .n_elems = n_elems, .step = step});
    pthread_mutex_unlock(&p->mu);
}

void qm_out_pool_submit_ptr(qm_out_pool *p, const void *data, qm_npy_writer *w, uint64_t elem_off,
                            uint64_t n_elems)
{
    const long step = qm_io_step_take();
    pthread_mutex_lock(&p->mu);
    while (p->ext_in_flight >= p->n_bufs)
        pthread_cond_wait(&p->freed, &p->mu);
    p->ext_in_flight++;
    enqueue(p, (job){.buf = -1, .data = data, .w = w, .elem_off = elem_off, .n_elems = n_elems,
                     .step = step});
    pthread_mutex_unlock(&p->mu);
}

bool qm_out_pool_failed(qm_out_pool *p)
{
    pthread_mutex_lock(&p->mu);
    const bool f = p->failed;
    pthread_mutex_unlock(&p->mu);
    return f;
}

qm_code qm_out_pool_drain(qm_out_pool *p, qm_status *st)
{
    pthread_mutex_lock(&p->mu);
    while (p->in_flight > 0)
        pthread_cond_wait(&p->freed, &p->mu);
    const bool failed = p->failed;
    const qm_status fs = p->fail_st;
    pthread_mutex_unlock(&p->mu);
    if (!failed)
        return QM_OK;
    if (st)
        *st = fs;
    return fs.code;
}

void qm_out_pool_destroy(qm_out_pool *p)
{
    if (!p)
        return;
    if (p->n_started > 0) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_started; ++i)
            pthread_join(p->threads[i], NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->work);
        pthread_cond_destroy(&p->freed);
    }
    free(p->bufs);
    free(p->busy);
    free(p->queue);
    free(p->threads);
    free(p);
}
