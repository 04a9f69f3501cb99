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
#include "status_internal.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct kept {
    qm_hal_buf *buf;
    int dev;
    uint64_t bytes;
} kept;

struct qm_reuse {
    qm_hal *hal;
    qm_ingest_pipes *pipes;
    void *host[QM_REUSE_HOST_SLOTS];
    uint64_t host_bytes[QM_REUSE_HOST_SLOTS];
    pthread_mutex_t mu;      /* guards the pool and its counters */
    kept *pool;
    int n, cap;
    uint64_t reused, released;
};

qm_code qm_reuse_create(qm_hal *hal, qm_reuse **out, qm_status *st)
{
    *out = NULL;
    qm_reuse *r = calloc(1, sizeof *r);
    if (r)
        r->pipes = qm_ingest_pipes_create();
    if (!r || !r->pipes) {
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
    bool keep = on_dev < QM_REUSE_KEPT_PER_DEVICE;
    if (keep && r->n == r->cap) {
        const int cap = r->cap ? 2 * r->cap : 8;
        kept *p = realloc(r->pool, (size_t)cap * sizeof *p);
        if (p) {
            r->pool = p;
            r->cap = cap;
        } else {
            keep = false;
        }
    }
    if (keep) {
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
