/* stream.c — the batch stream of include/qmesh.h (qm_stream_*): a dataset encoded batch by batch,
 * reading ahead on a thread while a batch is encoded.
 *
 * In: an input (a file opened by qm_input_open_stream, or rows in host memory), a request,
 * batch_size and prefetch. Out: one state per batch of up to batch_size samples, in order, each made by
 * qm_context_encode_input on a context planned for that batch shape (two shapes at most: the full
 * batch and the last, shorter one, both planned at open so an infeasible shape fails before any
 * work; the shorter one's backend is opened when it is first needed).
 * Reading: with prefetch K >= 1 a reader thread (pthreads) fills a pool of K + 1 host buffers of
 * one batch each, allocated as first needed and reused: it may fill K batches ahead of the one
 * qm_stream_next encodes, and waits when every buffer is taken (a bounded queue: the input held
 * in host memory never exceeds (K + 1) x batch bytes, counted in input_bytes_peak). K = 0 reads
 * each batch in qm_stream_next itself into one buffer. Over host rows nothing is copied: each batch
 * is a slice of the caller's rows. The buffers are the backend's host staging memory
 * (qm_hal_host_alloc: page-locked on CUDA, so the ingest copies a batch to the devices by DMA from
 * where it lies instead of through its page-locked ring; plain memory on the simulator).
 * Errors: a read error travels through the queue with its batch and is returned when that batch
 * is due (a CSV row that does not parse is a read error of its batch: "encode: reading input
 * [a, b): f.csv: row 42, column 3: 'x' is not a number", elements [a, b) of the batch); NaN and
 * Inf values are found by materialize, which names the sample by its index in the whole input
 * (qm_amp_input.first_sample). The first failure ends the stream (sticky).
 * Must not: hold more than K + 1 input buffers, let the reader run ahead of the free buffers, or
 * leave the reader thread running after qm_stream_close.
 * A CSV file is read through its qm_csv_reader (qm_input_open_stream: its rows counted when
 * opened, then parsed batch by batch by the reader thread), so the bound holds for CSV too: the
 * input held is the K + 1 buffers and the reader's chunks (QM_CSV_CHUNK_BYTES), not the file.
 * Known warts: a stream runs in one process (no MPI ranks); batches are handed to materialize as
 * float values (an integer .npy file's basis indices are exact up to 2^53, not through read_int as
 * in the one-shot encode).
 */
#include "api_internal.h"
#include "encode.h"
#include "ingest.h"
#include "stream.h"
#include "status_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QM_STREAM_MAX_PREFETCH 64

typedef struct ready_item {
    int buf;           /* the buffer holding the batch (-1 with a failure) */
    uint64_t batch;
    qm_code rc;        /* the read's result */
    qm_status st;
} ready_item;

struct qm_stream {
    qm_context *ctx, *tail_ctx;   /* the full batch's and the last, shorter batch's (or NULL) */
    bool tail_open;
    qm_backend_kind backend;
    qm_input_file file;           /* a file input (owned), else zeroed */
    qm_amp_input in;              /* the whole input */
    int ndim;
    uint64_t samples, batch_size, n_batches, tail_rows, next;
    uint64_t batch_bytes;         /* input bytes of one full batch */
    unsigned qubits;
    qm_dtype dtype;
    /* the reader and its bounded queue (prefetch >= 1), or one buffer read in place (0) */
    int prefetch, n_bufs, n_alloc;
    void **bufs;
    int *free_bufs, n_free;
    ready_item *ready;            /* a ring of n_bufs items */
    int ready_head, n_ready;
    bool stop, thread_started;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_ready, cv_free;
    uint64_t held_bytes, held_peak;
    double t_read, t_wait, t_encode;
    qm_materialize_times phases;
    uint64_t last_first, last_rows;
    qm_code failed;               /* sticky: the first failure */
    qm_status fail_st;
};

void qm_stream_options_init(qm_stream_options *o)
{
    if (o)
        *o = (qm_stream_options){.batch_size = 1024, .prefetch = 2, .backend = QM_BACKEND_AUTO};
}

static uint64_t batch_rows(const qm_stream *s, uint64_t k)
{
    return k + 1 < s->n_batches || s->tail_rows == 0 ? s->batch_size : s->tail_rows;
}

/* Read batch k's rows into dst (a file input through its reader, CSV from memory). */
static qm_code read_batch(const qm_stream *s, uint64_t k, void *dst, qm_status *st)
{
    const uint64_t F = s->in.n;
    return qm_input_read(&s->in, k * s->batch_size * F, batch_rows(s, k) * F, dst, st);
}

/* A buffer for the reader: a free one, else a new one while fewer than n_bufs exist; -1 when
 * every buffer is taken. Called with mu held. */
static int take_buffer(qm_stream *s, qm_code *rc, qm_status *st)
{
    if (s->n_free > 0)
        return s->free_bufs[--s->n_free];
    if (s->n_alloc == s->n_bufs)
        return -1;
    void *b = NULL; /* page-locked on CUDA: the ingest copies it by DMA where it lies */
    if ((*rc = qm_hal_host_alloc(qm_context_hal(s->ctx), s->batch_bytes, &b, st)) != QM_OK) {
        qm_status_prefix(st, "stream: a batch buffer (%llu B)", (unsigned long long)s->batch_bytes);
        return -1;
    }
    s->held_bytes += s->batch_bytes;
    if (s->held_bytes > s->held_peak)
        s->held_peak = s->held_bytes;
    s->bufs[s->n_alloc] = b;
    return s->n_alloc++;
}

static void *reader_main(void *arg)
{
    qm_stream *s = arg;
    for (uint64_t k = 0; k < s->n_batches; ++k) {
        ready_item it = {.buf = -1, .batch = k, .rc = QM_OK};
        qm_status_clear(&it.st);
        pthread_mutex_lock(&s->mu);
        while (!s->stop && (it.buf = take_buffer(s, &it.rc, &it.st)) < 0 && it.rc == QM_OK)
            pthread_cond_wait(&s->cv_free, &s->mu);
        const bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        const double t0 = qm_clock_now_s();
        if (it.rc == QM_OK)
            it.rc = read_batch(s, k, s->bufs[it.buf], &it.st);
        const double dt = qm_clock_now_s() - t0;
        pthread_mutex_lock(&s->mu);
        s->t_read += dt;
        s->ready[(s->ready_head + s->n_ready) % s->n_bufs] = it;
        ++s->n_ready;
        pthread_cond_signal(&s->cv_ready);
        pthread_mutex_unlock(&s->mu);
        if (it.rc != QM_OK)
            break;
    }
    return NULL;
}

static qm_code plan_context(const qm_scenario *sc, const qm_request *req, uint64_t rows,
                            qm_context **out, qm_status *st)
{
    qm_request r = *req;
    r.batch = rows;
    qm_code rc = qm_context_create(sc, &r, out, st);
    qm_context_no_read_pool(*out); /* the reader thread reads each batch (read_batch) */
    qm_plan_info info;
    if (rc == QM_OK && (rc = qm_context_plan_info(*out, &info, st)) == QM_OK && !info.feasible) {
        if (st)
            *st = info.error;
        rc = info.error.code;
        qm_status_prefix(st, "stream: a batch of %llu samples", (unsigned long long)rows);
    }
    if (rc != QM_OK) {
        qm_context_destroy(*out);
        *out = NULL;
    }
    return rc;
}

void qm_stream_close(qm_stream *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv_free);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    if (s->n_bufs > 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_ready);
        pthread_cond_destroy(&s->cv_free);
    }
    for (int i = 0; i < s->n_alloc; ++i) /* before the context whose backend allocated them */
        qm_hal_host_free(qm_context_hal(s->ctx), s->bufs[i]);
    free(s->bufs);
    free(s->free_bufs);
    free(s->ready);
    qm_input_close(&s->file);
    qm_context_destroy(s->ctx);
    qm_context_destroy(s->tail_ctx);
    free(s);
}

/* The common part of every open: s->in, ndim and file are set; plans both shapes, opens the
 * backend, starts the reader. */
static qm_code stream_start(qm_stream *s, const qm_scenario *sc, const qm_request *req,
                            const qm_stream_options *o, bool from_host, qm_status *st)
{
    s->samples = s->in.batch ? s->in.batch : 1;
    s->batch_size = o->batch_size < s->samples ? o->batch_size : s->samples;
    s->n_batches = (s->samples + s->batch_size - 1) / s->batch_size;
    s->tail_rows = s->samples % s->batch_size;
    s->backend = o->backend;
    s->qubits = req->qubits;
    s->dtype = req->dtype;
    s->prefetch = o->prefetch;
    const size_t is = qm_dtype_size(s->in.dtype);
    if (s->in.n == 0 || s->batch_size > UINT64_MAX / s->in.n / is)
        return qm_fail(st, QM_E_INPUT, "stream: %llu samples of %llu values make no batch size in "
                       "bytes", (unsigned long long)s->batch_size, (unsigned long long)s->in.n);
    s->batch_bytes = s->batch_size * s->in.n * is;
    qm_request r = *req;
    r.features = s->in.n;
    qm_code rc = plan_context(sc, &r, s->batch_size, &s->ctx, st);
    if (rc == QM_OK && s->tail_rows)
        rc = plan_context(sc, &r, s->tail_rows, &s->tail_ctx, st);
    if (rc == QM_OK)
        rc = qm_context_open(s->ctx, s->backend, st);
    if (rc != QM_OK || from_host)
        return rc;
    s->n_bufs = s->prefetch + 1;
    s->bufs = calloc((size_t)s->n_bufs, sizeof *s->bufs);
    s->free_bufs = calloc((size_t)s->n_bufs, sizeof *s->free_bufs);
    s->ready = calloc((size_t)s->n_bufs, sizeof *s->ready);
    if (!s->bufs || !s->free_bufs || !s->ready) {
        s->n_bufs = 0;
        return qm_fail(st, QM_E_NOMEM, "stream: out of host memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_ready, NULL);
    pthread_cond_init(&s->cv_free, NULL);
    if (s->prefetch == 0)
        return QM_OK;
    if (pthread_create(&s->thread, NULL, reader_main, s) != 0)
        return qm_fail(st, QM_E_BACKEND, "stream: cannot start the reader thread");
    s->thread_started = true;
    return QM_OK;
}

static qm_code check_options(const qm_stream_options *o, qm_status *st)
{
    if (!o)
        return qm_fail(st, QM_E_ARG, "stream: options must not be NULL");
    if (o->batch_size == 0)
        return qm_fail(st, QM_E_ARG, "stream: batch_size must be at least 1 (got 0)");
    if (o->prefetch < 0 || o->prefetch > QM_STREAM_MAX_PREFETCH)
        return qm_fail(st, QM_E_ARG, "stream: prefetch must be 0..%d (got %d)",
                       QM_STREAM_MAX_PREFETCH, o->prefetch);
    return QM_OK;
}

qm_code qm_stream_open_input(const qm_scenario *sc, const qm_request *req, qm_input_file *file,
                             int ndim, const qm_stream_options *o, qm_stream **out, qm_status *st)
{
    qm_stream *s = NULL;
    qm_code rc = QM_OK;
    if (out)
        *out = NULL;
    if (!sc || !req || !file || !out)
        rc = qm_fail(st, QM_E_ARG, "stream: scenario, request, input and out must not be NULL");
    if (rc == QM_OK)
        rc = check_options(o, st);
    if (rc == QM_OK && !(s = calloc(1, sizeof *s)))
        rc = qm_fail(st, QM_E_NOMEM, "stream: out of host memory");
    if (rc != QM_OK) {
        if (file)
            qm_input_close(file);
        return rc;
    }
    s->file = *file;
    memset(file, 0, sizeof *file);
    s->in = s->file.in;
    s->ndim = ndim;
    if ((rc = stream_start(s, sc, req, o, false, st)) != QM_OK) {
        qm_stream_close(s);
        return rc;
    }
    *out = s;
    return QM_OK;
}

qm_code qm_stream_open_file(const qm_scenario *sc, const qm_request *request, const char *path,
                            const qm_stream_options *o, qm_stream **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!sc || !request || !path || !out)
        return qm_fail(st, QM_E_ARG, "stream: scenario, request, path and out must not be NULL");
    qm_code rc = check_options(o, st);
    qm_input_file f = {0};
    if (rc == QM_OK)
        rc = qm_input_open_stream(path, NULL, NULL, &f, st);
    int ndim = f.ndim;
    qm_request r = *request;
    if (rc == QM_OK && r.encoding == QM_ENCODING_BASIS)
        rc = qm_encode_basis_shape(&f.in, &ndim, st);
    if (rc == QM_OK)
        rc = qm_encode_request_complete(&r, false, &f.in, st);
    if (rc != QM_OK) {
        qm_input_close(&f);
        return rc;
    }
    return qm_stream_open_input(sc, &r, &f, ndim, o, out, st);
}

qm_code qm_stream_open_host(const qm_scenario *sc, const qm_request *request,
                            const qm_host_data *rows, const qm_stream_options *o, qm_stream **out,
                            qm_status *st)
{
    if (out)
        *out = NULL;
    if (!sc || !request || !rows || !rows->data || !out)
        return qm_fail(st, QM_E_ARG, "stream: scenario, request, rows (with data) and out must "
                       "not be NULL");
    qm_code rc = check_options(o, st);
    if (rc == QM_OK && rows->dtype != QM_DTYPE_FLOAT32 && rows->dtype != QM_DTYPE_FLOAT64)
        rc = qm_fail(st, QM_E_DTYPE, "stream: input dtype must be float32 or float64 (got %s)",
                     qm_dtype_name(rows->dtype) ? qm_dtype_name(rows->dtype) : "unknown");
    if (rc == QM_OK && (rows->rows == 0 || rows->features == 0))
        rc = qm_fail(st, QM_E_INPUT, "stream: the input has %llu rows of %llu values; it needs at "
                     "least one of each", (unsigned long long)rows->rows,
                     (unsigned long long)rows->features);
    qm_stream *s = NULL;
    if (rc == QM_OK && !(s = calloc(1, sizeof *s)))
        rc = qm_fail(st, QM_E_NOMEM, "stream: out of host memory");
    if (rc != QM_OK)
        return rc;
    s->in = (qm_amp_input){.dtype = rows->dtype, .data = rows->data, .n = rows->features,
                           .batch = rows->rows};
    s->ndim = 2;
    qm_request r = *request;
    if (r.encoding == QM_ENCODING_BASIS &&
        (rc = qm_encode_basis_shape(&s->in, &s->ndim, st)) != QM_OK)
        goto fail;
    if ((rc = qm_encode_request_complete(&r, false, &s->in, st)) != QM_OK ||
        (rc = stream_start(s, sc, &r, o, true, st)) != QM_OK)
        goto fail;
    *out = s;
    return QM_OK;
fail:
    qm_stream_close(s);
    return rc;
}

static qm_code stream_fail(qm_stream *s, qm_code rc, const qm_status *why, qm_status *st)
{
    s->failed = rc;
    s->fail_st = *why;
    if (st)
        *st = *why;
    return rc;
}

qm_code qm_stream_next(qm_stream *s, qm_state **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!s || !out)
        return qm_fail(st, QM_E_ARG, "stream: stream and out must not be NULL");
    if (s->failed != QM_OK) {
        if (st)
            *st = s->fail_st;
        return s->failed;
    }
    if (s->next == s->n_batches)
        return QM_OK; /* the end */
    const uint64_t k = s->next, rows = batch_rows(s, k);
    qm_status why;
    qm_status_clear(&why);
    ready_item it = {.buf = -1, .batch = k, .rc = QM_OK};
    const void *data = NULL;
    if (s->n_bufs == 0) { /* host rows: a slice */
        data = (const char *)s->in.data + k * s->batch_size * s->in.n * qm_dtype_size(s->in.dtype);
    } else if (!s->thread_started) { /* prefetch 0: read it here */
        pthread_mutex_lock(&s->mu);
        it.buf = take_buffer(s, &it.rc, &why);
        pthread_mutex_unlock(&s->mu);
        const double t0 = qm_clock_now_s();
        if (it.rc == QM_OK)
            it.rc = read_batch(s, k, s->bufs[it.buf], &why);
        s->t_read += qm_clock_now_s() - t0;
    } else {
        const double t0 = qm_clock_now_s();
        pthread_mutex_lock(&s->mu);
        while (s->n_ready == 0)
            pthread_cond_wait(&s->cv_ready, &s->mu);
        it = s->ready[s->ready_head];
        s->ready_head = (s->ready_head + 1) % s->n_bufs;
        --s->n_ready;
        pthread_mutex_unlock(&s->mu);
        s->t_wait += qm_clock_now_s() - t0;
        why = it.st;
    }
    if (it.rc != QM_OK)
        return stream_fail(s, it.rc, &why, st);
    if (it.buf >= 0)
        data = s->bufs[it.buf];
    qm_context *ctx = rows == s->batch_size ? s->ctx : s->tail_ctx;
    qm_code rc = QM_OK;
    if (ctx == s->tail_ctx && !s->tail_open) {
        rc = qm_context_open(ctx, s->backend, &why);
        s->tail_open = rc == QM_OK;
    }
    const qm_amp_input b = {.dtype = s->in.dtype, .data = data, .n = s->in.n, .batch = rows,
                            .first_sample = k * s->batch_size, .part_of_stream = true};
    qm_materialize_times t = {0};
    const qm_materialize_opts mo = {.times = &t};
    const double t0 = qm_clock_now_s();
    if (rc == QM_OK)
        rc = qm_context_encode_input(ctx, &b, &mo, out, &why);
    s->t_encode += qm_clock_now_s() - t0;
    if (it.buf >= 0) { /* the state holds no reference to its input: the buffer goes back */
        pthread_mutex_lock(&s->mu);
        s->free_bufs[s->n_free++] = it.buf;
        pthread_cond_signal(&s->cv_free);
        pthread_mutex_unlock(&s->mu);
    }
    if (rc != QM_OK)
        return stream_fail(s, rc, &why, st);
    s->phases.ingest += t.ingest;
    s->phases.local_norm += t.local_norm;
    s->phases.norm_allreduce += t.norm_allreduce;
    s->phases.encode += t.encode;
    s->last_first = k * s->batch_size;
    s->last_rows = rows;
    ++s->next;
    return QM_OK;
}

qm_code qm_stream_info_query(const qm_stream *s, qm_stream_info *out, qm_status *st)
{
    if (!s || !out)
        return qm_fail(st, QM_E_ARG, "stream: stream and out must not be NULL");
    qm_stream *m = (qm_stream *)s; /* the lock only */
    if (m->n_bufs > 0)
        pthread_mutex_lock(&m->mu);
    const uint64_t peak = s->held_peak;
    const double t_read = s->t_read;
    if (m->n_bufs > 0)
        pthread_mutex_unlock(&m->mu);
    const uint64_t d0 = qm_context_device_peak_bytes(s->ctx),
                   d1 = s->tail_open ? qm_context_device_peak_bytes(s->tail_ctx) : 0;
    *out = (qm_stream_info){
        .samples = s->samples, .features = s->in.n, .input_ndim = s->ndim, .qubits = s->qubits,
        .dtype = s->dtype, .batch_size = s->batch_size, .batches = s->n_batches,
        .batches_done = s->next, .last_first_sample = s->last_first, .last_rows = s->last_rows,
        .batch_input_bytes = s->batch_bytes, .input_buffers = s->n_bufs,
        .input_bytes_peak = peak, .device_bytes_peak = d0 > d1 ? d0 : d1,
        .seconds_read = t_read, .seconds_wait = s->t_wait, .seconds_encode = s->t_encode};
    return QM_OK;
}

qm_materialize_times qm_stream_phases_get(const qm_stream *s)
{
    return s ? s->phases : (qm_materialize_times){0};
}

qm_context *qm_stream_context_get(const qm_stream *s)
{
    return s ? s->ctx : NULL;
}
