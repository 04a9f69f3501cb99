/* reuse.c — see reuse.h. A context's kept encode memory: ingest pipes, page-locked host scratch,
 * and a bounded pool of state buffers.
 *
 * The pool: a state's shard buffers come back through qm_reuse_state_put when the state is
 * destroyed (state.c), which happens only once every reference is gone: the caller's, and those
 * of exported DLPack tensors (dlpack_export.c retains the state per tensor; the Python layer's
 * arrays and tensors hold the state that way). A CUDA consumer may still have kernels queued that
 * read the memory when it lets its tensor go, so a kept buffer is handed out only after
 * qm_hal_device_sync of its device, as cudaFree would have waited.
 * Must not: keep more than QM_REUSE_KEPT_PER_DEVICE buffers per device, or keep a buffer of a size
 * the next encode does not ask for (freed at the next take on that device).
 */
#include "reuse.h"
#include "plan.h"
#include "status_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct kept {
    qm_hal_buf *buf;
    int dev;
    uint64_t bytes;
} kept;

typedef struct scratch {
    int slot, index, dev;   /* slot -1: a stream */
    qm_hal_buf *buf;
    qm_hal_stream *stream;
} scratch;

struct qm_reuse {
    qm_hal *hal;
    qm_ingest_pipes *pipes;
    scratch *scr;            /* device scratch and streams by shard index */
    int n_scr, cap_scr;
    void *host[QM_REUSE_HOST_SLOTS];
    uint64_t host_bytes[QM_REUSE_HOST_SLOTS];
    pthread_mutex_t mu;      /* guards the pool and its counters */
    kept *pool;              /* cap = QM_REUSE_KEPT_PER_DEVICE per device, allocated at create */
    int n, cap;
    uint64_t reused, released;
};

qm_code qm_reuse_create(qm_hal *hal, qm_reuse **out, qm_status *st)
{
    *out = NULL;
    const int n_dev = qm_hal_device_count(hal);
    qm_reuse *r = calloc(1, sizeof *r);
    if (r) {
        r->pipes = qm_ingest_pipes_create(n_dev);
        r->cap = QM_REUSE_KEPT_PER_DEVICE * (n_dev > 0 ? n_dev : 1); /* the bound, held at once */
        r->pool = calloc((size_t)r->cap, sizeof *r->pool);
    }
    if (!r || !r->pipes || !r->pool) {
        if (r)
            qm_ingest_pipes_destroy(hal, r->pipes);
        free(r ? r->pool : NULL);
        free(r);
        return qm_fail(st, QM_E_NOMEM, "context: out of host memory for the encode cache");
    }
    r->hal = hal;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return QM_OK;
}

void qm_reuse_destroy(qm_reuse *r)
{
    if (!r)
        return;
    qm_ingest_pipes_destroy(r->hal, r->pipes);
    for (int s = 0; s < QM_REUSE_HOST_SLOTS; ++s)
        qm_hal_host_free(r->hal, r->host[s]);
    for (int i = 0; i < r->n_scr; ++i) {
        qm_hal_buf_free(r->hal, r->scr[i].buf);
        qm_hal_stream_destroy(r->hal, r->scr[i].stream);
    }
    free(r->scr);
    for (int i = 0; i < r->n; ++i)
        qm_hal_buf_free(r->hal, r->pool[i].buf);
    free(r->pool);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

qm_ingest_pipes *qm_reuse_pipes(qm_reuse *r) { return r ? r->pipes : NULL; }

qm_code qm_reuse_host(qm_reuse *r, qm_reuse_host_slot slot, uint64_t bytes, void **out,
                      qm_status *st)
{
    *out = NULL;
    if (!r || slot < 0 || slot >= QM_REUSE_HOST_SLOTS)
        return qm_fail(st, QM_E_ARG, "encode cache: no cache or slot %d out of range", (int)slot);
    if (bytes > r->host_bytes[slot]) {
        qm_hal_host_free(r->hal, r->host[slot]);
        r->host[slot] = NULL;
        r->host_bytes[slot] = 0;
        const qm_code rc = qm_hal_host_alloc(r->hal, bytes, &r->host[slot], st);
        if (rc != QM_OK)
            return rc;
        r->host_bytes[slot] = bytes;
    }
    *out = r->host[slot];
    return QM_OK;
}

/* The scratch entry of (slot, index), appended empty when there is none; NULL: out of memory. */
static scratch *scratch_get(qm_reuse *r, int slot, int index)
{
    for (int i = 0; i < r->n_scr; ++i)
        if (r->scr[i].slot == slot && r->scr[i].index == index)
            return &r->scr[i];
    if (r->n_scr == r->cap_scr) {
        const int cap = r->cap_scr ? 2 * r->cap_scr : 8;
        scratch *p = realloc(r->scr, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        r->scr = p;
        r->cap_scr = cap;
    }
    r->scr[r->n_scr] = (scratch){.slot = slot, .index = index, .dev = -1};
    return &r->scr[r->n_scr++];
}

qm_code qm_reuse_scratch(qm_reuse *r, qm_reuse_dev_slot slot, int index, int dev, uint64_t bytes,
                         qm_hal_buf **out, qm_status *st)
{
    *out = NULL;
    if (!r || slot < 0 || slot >= QM_REUSE_DEV_SLOTS)
        return qm_fail(st, QM_E_ARG, "encode cache: no cache or slot %d out of range", (int)slot);
    scratch *e = scratch_get(r, slot, index);
    if (!e)
        return qm_fail(st, QM_E_NOMEM, "encode cache: out of host memory");
    if (e->buf && (e->dev != dev || qm_hal_buf_bytes(e->buf) < bytes)) {
        qm_hal_buf_free(r->hal, e->buf);
        e->buf = NULL;
    }
    if (!e->buf) {
        const qm_code rc = qm_hal_buf_alloc(r->hal, dev, bytes, &e->buf, st);
        if (rc != QM_OK)
            return rc;
        e->dev = dev;
    }
    *out = e->buf;
    return QM_OK;
}

qm_code qm_reuse_stream(qm_reuse *r, int index, int dev, qm_hal_stream **out, qm_status *st)
{
    *out = NULL;
    if (!r)
        return qm_fail(st, QM_E_ARG, "encode cache: no cache");
    scratch *e = scratch_get(r, -1, index);
    if (!e)
        return qm_fail(st, QM_E_NOMEM, "encode cache: out of host memory");
    if (e->dev != dev) { /* a stream on the backends that have them; NULL (blocking) elsewhere */
        qm_hal_stream_destroy(r->hal, e->stream);
        e->stream = NULL;
        e->dev = -1;
        const qm_code rc = qm_hal_stream_create(r->hal, dev, &e->stream, st);
        if (rc != QM_OK)
            return rc;
        e->dev = dev;
    }
    *out = e->stream;
    return QM_OK;
}

/* Free the kept buffers of dev, all of them or (other_than != 0) those of another size.
 * Called with mu held. */
static void drop_kept(qm_reuse *r, int dev, uint64_t other_than)
{
    for (int i = 0; i < r->n;) {
        if (r->pool[i].dev != dev || (other_than && r->pool[i].bytes == other_than)) {
            ++i;
            continue;
        }
        qm_hal_buf_free(r->hal, r->pool[i].buf);
        r->pool[i] = r->pool[--r->n];
        r->released++;
    }
}

qm_code qm_reuse_state_buf(qm_reuse *r, qm_hal *hal, int dev, uint64_t bytes, qm_hal_buf **out,
                           qm_status *st)
{
    if (!r)
        return qm_hal_buf_alloc(hal, dev, bytes, out, st);
    *out = NULL;
    qm_hal_buf *b = NULL;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && !b; ++i)
        if (r->pool[i].dev == dev && r->pool[i].bytes == bytes) {
            b = r->pool[i].buf;
            r->pool[i] = r->pool[--r->n];
            r->reused++;
        }
    if (!b && bytes) /* another size is not asked for any more: give it back before allocating */
        drop_kept(r, dev, bytes);
    const bool any_kept = r->n > 0;
    pthread_mutex_unlock(&r->mu);
    if (b) { /* a released tensor's consumer may still be reading it */
        const qm_code rc = qm_hal_device_sync(r->hal, dev, st);
        if (rc != QM_OK) {
            qm_reuse_state_put(r, b);
            return rc;
        }
        *out = b;
        return QM_OK;
    }
    qm_code rc = qm_hal_buf_alloc(r->hal, dev, bytes, out, st);
    if (rc == QM_E_CAPACITY && any_kept) { /* kept buffers of this size on dev are in the way */
        pthread_mutex_lock(&r->mu);
        drop_kept(r, dev, 0);
        pthread_mutex_unlock(&r->mu);
        rc = qm_hal_buf_alloc(r->hal, dev, bytes, out, st);
    }
    return rc;
}

void qm_reuse_state_put(qm_reuse *r, qm_hal_buf *buf)
{
    if (!buf)
        return;
    const int dev = qm_hal_buf_device(buf);
    pthread_mutex_lock(&r->mu);
    int on_dev = 0;
    for (int i = 0; i < r->n; ++i)
        on_dev += r->pool[i].dev == dev;
    if (on_dev < QM_REUSE_KEPT_PER_DEVICE && r->n < r->cap) {
        r->pool[r->n++] = (kept){.buf = buf, .dev = dev, .bytes = qm_hal_buf_bytes(buf)};
    } else {
        qm_hal_buf_free(r->hal, buf);
        r->released++;
    }
    pthread_mutex_unlock(&r->mu);
}

qm_reuse_stats qm_reuse_stats_get(qm_reuse *r)
{
    qm_reuse_stats s = {0};
    if (!r)
        return s;
    pthread_mutex_lock(&r->mu);
    s.kept_bufs = r->n;
    for (int i = 0; i < r->n; ++i)
        s.kept_bytes += r->pool[i].bytes;
    s.reused = r->reused;
    s.released = r->released;
    pthread_mutex_unlock(&r->mu);
    qm_ingest_pipes_usage(r->pipes, &s.pipes, &s.half_bytes_max);
    return s;
}

bool qm_roots_page_locked(void)
{
    const char *v = getenv("QM_ROOTS_PAGE_LOCKED");
    return v && strcmp(v, "1") == 0;
}

qm_code qm_reuse_sums_host(qm_reuse *r, qm_hal *hal, uint64_t n, double **out, bool *plain,
                           qm_status *st)
{
    *out = NULL;
    *plain = !r && n * sizeof(double) <= QM_BLOCK_SUMS_PAGEABLE_MAX && !qm_roots_page_locked();
    if (n == 0)
        return QM_OK;
    if (*plain)
        return (*out = malloc(n * sizeof(double)))
                   ? QM_OK
                   : qm_fail(st, QM_E_NOMEM, "out of host memory for %llu sums",
                             (unsigned long long)n);
    return r ? qm_reuse_host(r, QM_REUSE_HOST_BLOCK_SUMS, n * sizeof(double), (void **)out, st)
             : qm_hal_host_alloc(hal, n * sizeof(double), (void **)out, st);
}

void qm_reuse_sums_free(qm_reuse *r, qm_hal *hal, double *p, bool plain)
{
    if (plain)
        free(p);
    else if (!r && p)
        qm_hal_host_free(hal, p);
}
