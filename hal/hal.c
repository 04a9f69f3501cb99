/* hal.c — the wrappers every engine call goes through.
 *
 * In: calls from the engine with device indices, buffers and byte ranges.
 * Out: calls to the backend's ops table, after checking indices, NULLs and bounds; per-device
 * accounting (bytes in use, peak, traffic); the fallbacks for optional members; context prefixed to
 * backend messages ("copy_h2d on n0.g1: ...").
 * Must not: know any backend's types, allocate device memory itself, or abort.
 * Thread-safety: accounting is updated without locks; a caller that drives devices from several
 * threads must give each device to one thread (the materializer does).
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "hal_impl.h"
#include "status_internal.h"
#include "qm_math.h"
#include "qm_passes.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* An optional member is called only when the backend was written against an ABI that has it (its
 * table may predate the member): OPS(hal, member, since) is NULL otherwise, and the wrapper takes
 * the member's documented fallback. Every optional member of today's table is in the ABI 5 layout
 * (ABI_BASE, the oldest qm_hal_create accepts); a member appended later gets its own `since` here
 * (e.g. ABI_FOO = 6), so a table written against ABI 5 never has it read. */
#define OPS(hal, member, since) ((hal)->ops->abi >= (since) ? (hal)->ops->member : NULL)
enum { ABI_BASE = QM_HAL_ABI_MIN, ABI_WRAP_DEVICE = 6, ABI_DEVICE_SYNC = 7 };
_Static_assert(QM_HAL_ABI_MIN == 5, "the ABI 5 layout is the base of OPS: review OPS' since numbers");
_Static_assert(QM_HAL_RED_LOG2_BLOCK == QM_RED_LOG2_BLOCK, "hal_ops.h and qm_math.h disagree");

struct qm_hal {
    const qm_hal_ops *ops;
    void *ctx;
    int n_dev;
    qm_hal_device_info *info; /* cached at creation */
    qm_hal_usage *usage;
    /* host staging memory handed out and given back (qm_hal_host_alloc / _free): atomic, since a
     * stream's reader thread allocates its buffers while another thread encodes */
    atomic_ullong host_allocs, host_frees;
};

struct qm_hal_buf {
    int dev;
    uint64_t bytes;
    void *ptr;
    void *host_ptr;
    bool wrapped; /* over caller-owned host memory: not counted, not freed */
};

struct qm_hal_stream {
    int dev;
    void *s;
};

struct qm_hal_event {
    int dev;
    void *ev;
};

qm_code qm_hal_create(const qm_hal_ops *ops, void *ctx, qm_hal **out, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_hal *hal = NULL;
    if (out)
        *out = NULL;
    if (!ops || !out) {
        rc = qm_fail(st, QM_E_ARG, "hal: ops and out must not be NULL");
        goto fail_ctx;
    }
    if (ops->abi >= 1 && ops->abi < QM_HAL_ABI_MIN) {
        rc = qm_fail(st, QM_E_INTERNAL, "hal: backend '%s' was written against HAL ABI %d, the flat "
                     "table of one member per kernel; this build takes the grouped table of ABI %d "
                     "to %d (hal_impl.h)", qm_hal_kind_name(ops->kind), ops->abi, QM_HAL_ABI_MIN,
                     QM_HAL_ABI);
        goto fail_ctx;
    }
    if (ops->abi < 1 || ops->abi > QM_HAL_ABI) {
        rc = qm_fail(st, QM_E_INTERNAL, "hal: backend '%s' was written against HAL ABI %d but this "
                     "build knows %d to %d", qm_hal_kind_name(ops->kind), ops->abi, QM_HAL_ABI_MIN,
                     QM_HAL_ABI);
        goto fail_ctx;
    }
    const qm_hal_device_ops *d = &ops->device;
    const qm_hal_stream_ops *s = &ops->stream;
    if (!ops->destroy || !d->count || !d->info || !d->peer || !d->buf_alloc || !d->buf_free ||
        !s->copy_h2d || !s->copy_d2h || !s->copy_d2d || !ops->kernel.supports_op ||
        !ops->kernel.launch) {
        rc = qm_fail(st, QM_E_INTERNAL, "hal: backend '%s' ops table is incomplete (abi %d, this "
                     "build %d)", qm_hal_kind_name(ops->kind), ops->abi, QM_HAL_ABI);
        goto fail_ctx;
    }
    hal = calloc(1, sizeof *hal);
    if (!hal) {
        rc = qm_fail(st, QM_E_NOMEM, "hal: out of host memory");
        goto fail_ctx;
    }
    hal->ops = ops;
    hal->ctx = ctx;
    hal->n_dev = ops->device.count(ctx);
    if (hal->n_dev < 0) {
        rc = qm_fail(st, QM_E_INTERNAL, "hal: backend reported %d devices", hal->n_dev);
        goto fail_hal;
    }
    if (hal->n_dev > 0) {
        hal->info = calloc((size_t)hal->n_dev, sizeof *hal->info);
        hal->usage = calloc((size_t)hal->n_dev, sizeof *hal->usage);
        if (!hal->info || !hal->usage) {
            rc = qm_fail(st, QM_E_NOMEM, "hal: out of host memory for %d devices", hal->n_dev);
            goto fail_hal;
        }
    }
    for (int dev = 0; dev < hal->n_dev; ++dev) {
        rc = ops->device.info(ctx, dev, &hal->info[dev], st);
        if (rc != QM_OK) {
            qm_status_prefix(st, "hal: device %d", dev);
            goto fail_hal;
        }
    }
    *out = hal;
    return QM_OK;

fail_hal:
    free(hal->info);
    free(hal->usage);
    free(hal);
fail_ctx:
    if (ops && ops->destroy)
        ops->destroy(ctx);
    return rc;
}

void qm_hal_destroy(qm_hal *hal)
{
    if (!hal)
        return;
    hal->ops->destroy(hal->ctx);
    free(hal->info);
    free(hal->usage);
    free(hal);
}

const qm_hal_ops *qm_hal_ops_get(const qm_hal *hal) { return hal ? hal->ops : NULL; }
void *qm_hal_ctx(const qm_hal *hal) { return hal ? hal->ctx : NULL; }
qm_hal_kind qm_hal_kind_get(const qm_hal *hal) { return hal->ops->kind; }

const char *qm_hal_kind_name(qm_hal_kind kind)
{
    switch (kind) {
    case QM_HAL_SIM: return "sim";
    case QM_HAL_CUDA: return "cuda";
    case QM_HAL_FAULT: return "fault";
    }
    return "unknown";
}

int qm_hal_device_count(const qm_hal *hal) { return hal ? hal->n_dev : 0; }

static qm_code check_dev(const qm_hal *hal, int dev, const char *op, qm_status *st)
{
    if (!hal)
        return qm_fail(st, QM_E_ARG, "%s: hal must not be NULL", op);
    if (dev < 0 || dev >= hal->n_dev)
        return qm_fail(st, QM_E_ARG, "%s: device %d is out of range (this mesh has %d devices)",
                       op, dev, hal->n_dev);
    return QM_OK;
}

qm_code qm_hal_device_info_query(const qm_hal *hal, int dev, qm_hal_device_info *out, qm_status *st)
{
    qm_code rc = check_dev(hal, dev, "device_info", st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "device_info: out must not be NULL");
    *out = hal->info[dev];
    return QM_OK;
}

qm_code qm_hal_usage_query(const qm_hal *hal, int dev, qm_hal_usage *out, qm_status *st)
{
    qm_code rc = check_dev(hal, dev, "usage", st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "usage: out must not be NULL");
    *out = hal->usage[dev];
    return QM_OK;
}

uint64_t qm_hal_bytes_in_use(const qm_hal *hal)
{
    uint64_t sum = 0;
    for (int d = 0; hal && d < hal->n_dev; ++d)
        sum += hal->usage[d].in_use_bytes;
    return sum;
}

bool qm_hal_peer_get(const qm_hal *hal, int dev_a, int dev_b)
{
    if (!hal || dev_a < 0 || dev_b < 0 || dev_a >= hal->n_dev || dev_b >= hal->n_dev)
        return false;
    if (dev_a == dev_b)
        return true;
    return hal->ops->device.peer(hal->ctx, dev_a, dev_b);
}

/* ---- buffers ---------------------------------------------------------------------------------- */

qm_code qm_hal_buf_alloc(qm_hal *hal, int dev, uint64_t bytes, qm_hal_buf **out, qm_status *st)
{
    char need[32], used[32], usable[32];
    if (out)
        *out = NULL;
    qm_code rc = check_dev(hal, dev, "buf_alloc", st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "buf_alloc: out must not be NULL");
    if (bytes == 0)
        return qm_fail(st, QM_E_ARG, "buf_alloc on %s: size must be > 0", hal->info[dev].id);
    qm_hal_usage *u = &hal->usage[dev];
    uint64_t usable_bytes = hal->info[dev].usable_bytes;
    if (bytes > usable_bytes || u->in_use_bytes > usable_bytes - bytes)
        return qm_fail(st, QM_E_CAPACITY,
                       "buf_alloc on %s: %s requested but %s of %s usable is already in use",
                       hal->info[dev].id, qm_format_bytes(bytes, need, sizeof need),
                       qm_format_bytes(u->in_use_bytes, used, sizeof used),
                       qm_format_bytes(usable_bytes, usable, sizeof usable));
    qm_hal_buf *b = calloc(1, sizeof *b);
    if (!b)
        return qm_fail(st, QM_E_NOMEM, "buf_alloc on %s: out of host memory", hal->info[dev].id);
    rc = hal->ops->device.buf_alloc(hal->ctx, dev, bytes, &b->ptr, &b->host_ptr, st);
    if (rc != QM_OK) {
        free(b);
        return qm_status_prefix(st, "buf_alloc on %s", hal->info[dev].id);
    }
    b->dev = dev;
    b->bytes = bytes;
    u->in_use_bytes += bytes;
    if (u->in_use_bytes > u->peak_bytes)
        u->peak_bytes = u->in_use_bytes;
    u->n_allocs++;
    *out = b;
    return QM_OK;
}

typedef qm_code (*wrap_fn)(void *, int, const void *, uint64_t, void **, qm_status *);

/* A wrapper buffer over caller-owned memory that dev's kernels read in place (wrap_host and
 * wrap_device alike): `what` names the operation, `where` the memory in the refusal. */
static qm_code wrap(qm_hal *hal, int dev, const void *ptr, uint64_t bytes, wrap_fn fn,
                    const char *what, const char *where, bool host_visible, qm_hal_buf **out,
                    qm_status *st)
{
    if (out)
        *out = NULL;
    qm_code rc = check_dev(hal, dev, what, st);
    if (rc != QM_OK)
        return rc;
    if (!out || !ptr || bytes == 0)
        return qm_fail(st, QM_E_ARG, "%s: out, pointer and a size > 0 are required", what);
    if (!fn)
        return qm_fail(st, QM_E_UNSUPPORTED, "%s on %s: the %s backend cannot read %s in place",
                       what, hal->info[dev].id, qm_hal_kind_name(hal->ops->kind), where);
    qm_hal_buf *b = calloc(1, sizeof *b);
    if (!b)
        return qm_fail(st, QM_E_NOMEM, "%s: out of host memory", what);
    if ((rc = fn(hal->ctx, dev, ptr, bytes, &b->ptr, st)) != QM_OK) {
        free(b);
        return qm_status_prefix(st, "%s on %s", what, hal->info[dev].id);
    }
    b->dev = dev;
    b->bytes = bytes;
    b->host_ptr = host_visible ? (void *)(uintptr_t)ptr : NULL;
    b->wrapped = true;
    *out = b;
    return QM_OK;
}

qm_code qm_hal_buf_wrap_host(qm_hal *hal, int dev, const void *ptr, uint64_t bytes, qm_hal_buf **out,
                             qm_status *st)
{
    return wrap(hal, dev, ptr, bytes, hal ? OPS(hal, device.wrap_host, ABI_BASE) : NULL,
                "wrap_host", "host memory", true, out, st);
}

qm_code qm_hal_buf_wrap_device(qm_hal *hal, int dev, const void *ptr, uint64_t bytes,
                               qm_hal_buf **out, qm_status *st)
{
    /* host-visible where the device's memory is host memory (the simulator) */
    const bool host = hal && dev >= 0 && dev < hal->n_dev && hal->info[dev].memory == QM_HAL_MEMORY_HOST;
    return wrap(hal, dev, ptr, bytes, hal ? OPS(hal, device.wrap_device, ABI_WRAP_DEVICE) : NULL,
                "wrap_device", "device memory", host, out, st);
}

void qm_hal_buf_free(qm_hal *hal, qm_hal_buf *buf)
{
    if (!hal || !buf)
        return;
    if (buf->wrapped) {
        free(buf);
        return;
    }
    hal->ops->device.buf_free(hal->ctx, buf->dev, buf->ptr, buf->bytes);
    hal->usage[buf->dev].in_use_bytes -= buf->bytes;
    hal->usage[buf->dev].n_frees++;
    free(buf);
}

uint64_t qm_hal_buf_bytes(const qm_hal_buf *buf) { return buf ? buf->bytes : 0; }
int qm_hal_buf_device(const qm_hal_buf *buf) { return buf ? buf->dev : -1; }
void *qm_hal_buf_host_ptr(const qm_hal_buf *buf) { return buf ? buf->host_ptr : NULL; }
void *qm_hal_buf_raw(const qm_hal_buf *buf) { return buf ? buf->ptr : NULL; }

/* ---- streams ---------------------------------------------------------------------------------- */

qm_code qm_hal_stream_create(qm_hal *hal, int dev, qm_hal_stream **out, qm_status *st)
{
    if (out)
        *out = NULL;
    qm_code rc = check_dev(hal, dev, "stream_create", st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "stream_create: out must not be NULL");
    qm_hal_stream *s = calloc(1, sizeof *s);
    if (!s)
        return qm_fail(st, QM_E_NOMEM, "stream_create: out of host memory");
    s->dev = dev;
    qm_code (*create)(void *, int, void **, qm_status *) = OPS(hal, stream.create, ABI_BASE);
    if (create) {
        rc = create(hal->ctx, dev, &s->s, st);
        if (rc != QM_OK) {
            free(s);
            return qm_status_prefix(st, "stream_create on %s", hal->info[dev].id);
        }
    }
    *out = s;
    return QM_OK;
}

void qm_hal_stream_destroy(qm_hal *hal, qm_hal_stream *s)
{
    if (!hal || !s)
        return;
    void (*destroy)(void *, int, void *) = OPS(hal, stream.destroy, ABI_BASE);
    if (destroy)
        destroy(hal->ctx, s->dev, s->s);
    free(s);
}

qm_code qm_hal_stream_sync(qm_hal *hal, qm_hal_stream *s, qm_status *st)
{
    if (!hal)
        return qm_fail(st, QM_E_ARG, "stream_sync: hal must not be NULL");
    qm_code (*sync)(void *, int, void *, qm_status *) = OPS(hal, stream.sync, ABI_BASE);
    if (!s || !sync)
        return QM_OK;
    qm_code rc = sync(hal->ctx, s->dev, s->s, st);
    if (rc != QM_OK)
        qm_status_prefix(st, "stream_sync on %s", hal->info[s->dev].id);
    return rc;
}

static void *stream_of(const qm_hal_stream *s, int dev) { return (s && s->dev == dev) ? s->s : NULL; }

/* ---- events ----------------------------------------------------------------------------------- */

qm_code qm_hal_event_create(qm_hal *hal, int dev, qm_hal_event **out, qm_status *st)
{
    if (out)
        *out = NULL;
    qm_code rc = check_dev(hal, dev, "event_create", st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "event_create: out must not be NULL");
    qm_hal_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return qm_fail(st, QM_E_NOMEM, "event_create: out of host memory");
    ev->dev = dev;
    qm_code (*create)(void *, int, void **, qm_status *) = OPS(hal, stream.event_create, ABI_BASE);
    if (create && (rc = create(hal->ctx, dev, &ev->ev, st)) != QM_OK) {
        free(ev);
        return qm_status_prefix(st, "event_create on %s", hal->info[dev].id);
    }
    *out = ev;
    return QM_OK;
}

void qm_hal_event_destroy(qm_hal *hal, qm_hal_event *ev)
{
    if (!hal || !ev)
        return;
    void (*destroy)(void *, int, void *) = OPS(hal, stream.event_destroy, ABI_BASE);
    if (destroy)
        destroy(hal->ctx, ev->dev, ev->ev);
    free(ev);
}

/* The event and the stream (if any) must belong to the same device. */
static qm_code check_event(const qm_hal *hal, const qm_hal_event *ev, const qm_hal_stream *s,
                           const char *op, qm_status *st)
{
    if (!hal || !ev)
        return qm_fail(st, QM_E_ARG, "%s: hal and event must not be NULL", op);
    if (s && s->dev != ev->dev)
        return qm_fail(st, QM_E_ARG, "%s: event on %s but stream on %s", op, hal->info[ev->dev].id,
                       hal->info[s->dev].id);
    return QM_OK;
}

qm_code qm_hal_event_record(qm_hal *hal, qm_hal_event *ev, qm_hal_stream *s, qm_status *st)
{
    qm_code rc = check_event(hal, ev, s, "event_record", st);
    qm_code (*record)(void *, int, void *, void *, qm_status *) = OPS(hal, stream.event_record, ABI_BASE);
    if (rc != QM_OK || !record)
        return rc;
    if ((rc = record(hal->ctx, ev->dev, ev->ev, s ? s->s : NULL, st)) != QM_OK)
        qm_status_prefix(st, "event_record on %s", hal->info[ev->dev].id);
    return rc;
}

qm_code qm_hal_stream_wait(qm_hal *hal, qm_hal_stream *s, qm_hal_event *ev, qm_status *st)
{
    qm_code rc = check_event(hal, ev, s, "stream_wait", st);
    qm_code (*wait)(void *, int, void *, void *, qm_status *) = OPS(hal, stream.wait, ABI_BASE);
    if (rc != QM_OK || !wait)
        return rc;
    if ((rc = wait(hal->ctx, ev->dev, s ? s->s : NULL, ev->ev, st)) != QM_OK)
        qm_status_prefix(st, "stream_wait on %s", hal->info[ev->dev].id);
    return rc;
}

qm_code qm_hal_event_sync(qm_hal *hal, qm_hal_event *ev, qm_status *st)
{
    qm_code rc = check_event(hal, ev, NULL, "event_sync", st);
    qm_code (*sync)(void *, int, void *, qm_status *) = OPS(hal, stream.event_sync, ABI_BASE);
    if (rc != QM_OK || !sync)
        return rc;
    if ((rc = sync(hal->ctx, ev->dev, ev->ev, st)) != QM_OK)
        qm_status_prefix(st, "event_sync on %s", hal->info[ev->dev].id);
    return rc;
}

/* ---- host staging memory ---------------------------------------------------------------------- */

void *qm_hal_big_alloc(size_t bytes)
{
    const size_t page = (size_t)2 << 20;
    if (bytes < page)
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (bytes > SIZE_MAX - page)
        return NULL;
    const size_t whole = (bytes + page - 1) / page * page;
    void *p = aligned_alloc(page, whole);
    if (p)
        (void)madvise(p, whole, MADV_HUGEPAGE);
    return p;
}

qm_code qm_hal_host_alloc(qm_hal *hal, uint64_t bytes, void **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!hal || !out || bytes == 0)
        return qm_fail(st, QM_E_ARG, "host_alloc: hal and out must not be NULL and bytes > 0 "
                       "(got %llu)", (unsigned long long)bytes);
    if (bytes > SIZE_MAX)
        return qm_fail(st, QM_E_NOMEM, "host_alloc: %llu bytes do not fit this host's address space",
                       (unsigned long long)bytes);
    qm_code (*host_alloc)(void *, uint64_t, void **, qm_status *) = OPS(hal, device.host_alloc, ABI_BASE);
    if (host_alloc) {
        qm_code rc = host_alloc(hal->ctx, bytes, out, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "host_alloc of %llu bytes", (unsigned long long)bytes);
    } else if (!(*out = qm_hal_big_alloc((size_t)bytes))) {
        return qm_fail(st, QM_E_NOMEM, "host_alloc: out of host memory for %llu bytes",
                       (unsigned long long)bytes);
    }
    atomic_fetch_add(&hal->host_allocs, 1);
    return QM_OK;
}

void qm_hal_host_counts(const qm_hal *hal, uint64_t *allocs, uint64_t *frees)
{
    qm_hal *h = (qm_hal *)hal; /* atomic loads only */
    if (allocs)
        *allocs = h ? atomic_load(&h->host_allocs) : 0;
    if (frees)
        *frees = h ? atomic_load(&h->host_frees) : 0;
}

qm_code qm_hal_device_sync(qm_hal *hal, int dev, qm_status *st)
{
    qm_code rc = check_dev(hal, dev, "device_sync", st);
    if (rc != QM_OK)
        return rc;
    qm_code (*sync)(void *, int, qm_status *) = OPS(hal, device.sync, ABI_DEVICE_SYNC);
    if (sync && (rc = sync(hal->ctx, dev, st)) != QM_OK)
        return qm_status_prefix(st, "device_sync on %s", hal->info[dev].id);
    return QM_OK;
}

void qm_hal_host_free(qm_hal *hal, void *p)
{
    if (!hal || !p)
        return;
    atomic_fetch_add(&hal->host_frees, 1);
    void (*host_free)(void *, void *) = OPS(hal, device.host_free, ABI_BASE);
    if (host_free)
        host_free(hal->ctx, p);
    else
        free(p);
}

bool qm_hal_host_is_pinned(const qm_hal *hal, const void *p)
{
    if (!hal || !p)
        return false;
    bool (*pinned)(void *, const void *) = OPS(hal, device.host_is_pinned, ABI_BASE);
    return pinned ? pinned(hal->ctx, p) : true;
}

/* ---- copies ----------------------------------------------------------------------------------- */

static qm_code check_range(const qm_hal *hal, const qm_hal_buf *b, uint64_t off, uint64_t bytes,
                           const char *op, const char *which, qm_status *st)
{
    if (!b)
        return qm_fail(st, QM_E_ARG, "%s: %s buffer must not be NULL", op, which);
    if (off > b->bytes || bytes > b->bytes - off)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s on %s: %s range [%llu, %llu) is outside the %llu-byte buffer", op,
                       hal->info[b->dev].id, which, (unsigned long long)off,
                       (unsigned long long)(off + bytes), (unsigned long long)b->bytes);
    return QM_OK;
}

static char *at(void *p, uint64_t off) { return p ? (char *)p + off : NULL; }
static const char *cat(const void *p, uint64_t off) { return p ? (const char *)p + off : NULL; }

qm_code qm_hal_copy_h2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const void *src,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st)
{
    if (!hal)
        return qm_fail(st, QM_E_ARG, "copy_h2d: hal must not be NULL");
    qm_code rc = check_range(hal, dst, dst_off, bytes, "copy_h2d", "destination", st);
    if (rc != QM_OK)
        return rc;
    if (bytes == 0)
        return QM_OK;
    if (!src)
        return qm_fail(st, QM_E_ARG, "copy_h2d: source must not be NULL");
    rc = hal->ops->stream.copy_h2d(hal->ctx, dst->dev, at(dst->ptr, dst_off), src, bytes,
                            stream_of(s, dst->dev), st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "copy_h2d on %s", hal->info[dst->dev].id);
    hal->usage[dst->dev].h2d_bytes += bytes;
    return QM_OK;
}

qm_code qm_hal_copy_d2h(qm_hal *hal, void *dst, const qm_hal_buf *src, uint64_t src_off,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st)
{
    if (!hal)
        return qm_fail(st, QM_E_ARG, "copy_d2h: hal must not be NULL");
    qm_code rc = check_range(hal, src, src_off, bytes, "copy_d2h", "source", st);
    if (rc != QM_OK)
        return rc;
    if (bytes == 0)
        return QM_OK;
    if (!dst)
        return qm_fail(st, QM_E_ARG, "copy_d2h: destination must not be NULL");
    rc = hal->ops->stream.copy_d2h(hal->ctx, src->dev, dst, cat(src->ptr, src_off), bytes,
                            stream_of(s, src->dev), st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "copy_d2h on %s", hal->info[src->dev].id);
    hal->usage[src->dev].d2h_bytes += bytes;
    return QM_OK;
}

/* Staged device-to-device copy through a bounded host bounce buffer. */
static qm_code copy_staged(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const qm_hal_buf *src,
                           uint64_t src_off, uint64_t bytes, qm_status *st)
{
    const uint64_t chunk = 64u << 20;
    qm_code rc = QM_OK;
    void *bounce = malloc((size_t)(bytes < chunk ? bytes : chunk));
    if (!bounce)
        return qm_fail(st, QM_E_NOMEM, "copy_d2d: out of host memory for a staging buffer");
    for (uint64_t done = 0; done < bytes && rc == QM_OK;) {
        uint64_t n = bytes - done < chunk ? bytes - done : chunk;
        rc = qm_hal_copy_d2h(hal, bounce, src, src_off + done, n, NULL, st);
        if (rc == QM_OK)
            rc = qm_hal_copy_h2d(hal, dst, dst_off + done, bounce, n, NULL, st);
        done += n;
    }
    free(bounce);
    return rc;
}

qm_code qm_hal_copy_d2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const qm_hal_buf *src,
                        uint64_t src_off, uint64_t bytes, qm_hal_stream *s, qm_status *st)
{
    if (!hal)
        return qm_fail(st, QM_E_ARG, "copy_d2d: hal must not be NULL");
    qm_code rc = check_range(hal, dst, dst_off, bytes, "copy_d2d", "destination", st);
    if (rc == QM_OK)
        rc = check_range(hal, src, src_off, bytes, "copy_d2d", "source", st);
    if (rc != QM_OK || bytes == 0)
        return rc;
    if (dst->dev == src->dev) {
        rc = hal->ops->stream.copy_d2d(hal->ctx, dst->dev, at(dst->ptr, dst_off), cat(src->ptr, src_off),
                                bytes, stream_of(s, dst->dev), st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "copy_d2d on %s", hal->info[dst->dev].id);
        hal->usage[dst->dev].d2d_bytes += bytes;
        return QM_OK;
    }
    qm_code (*peer_copy)(void *, int, void *, int, const void *, uint64_t, void *, qm_status *) =
        OPS(hal, stream.copy_peer, ABI_BASE);
    if (!peer_copy || !hal->ops->device.peer(hal->ctx, src->dev, dst->dev))
        return copy_staged(hal, dst, dst_off, src, src_off, bytes, st);
    rc = peer_copy(hal->ctx, dst->dev, at(dst->ptr, dst_off), src->dev,
                             cat(src->ptr, src_off), bytes, stream_of(s, dst->dev), st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "copy_peer %s -> %s", hal->info[src->dev].id,
                                hal->info[dst->dev].id);
    hal->usage[src->dev].peer_out_bytes += bytes;
    hal->usage[dst->dev].peer_in_bytes += bytes;
    return QM_OK;
}

/* ---- kernels: op ids, one launch member ------------------------------------------------------ */

const char *qm_hal_op_name(qm_hal_op op)
{
    switch (op) {
    case QM_HAL_OP_AMP_STASH: return "amp_stash";
    case QM_HAL_OP_AMP_SUMSQ: return "amp_sumsq";
    case QM_HAL_OP_AMP_SUMSQ_DEV: return "amp_sumsq_dev";
    case QM_HAL_OP_AMP_SCAN: return "amp_scan";
    case QM_HAL_OP_AMP_SCALE: return "amp_scale";
    case QM_HAL_OP_AMP_BATCH: return "amp_batch";
    case QM_HAL_OP_PRODUCT: return "product";
    case QM_HAL_OP_IQP_PHASE: return "iqp_phase";
    case QM_HAL_OP_WHT: return "wht";
    case QM_HAL_OP_STATE_SUMSQ: return "state_sumsq";
    case QM_HAL_OP_IQP: return "iqp";
    case QM_HAL_OP_TREE_COMBINE: return "tree_combine";
    case QM_HAL_OP_COUNT_: break;
    }
    return "unknown";
}

bool qm_hal_op_is_amplitude(qm_hal_op op)
{
    switch (op) {
    case QM_HAL_OP_AMP_STASH:
    case QM_HAL_OP_AMP_SUMSQ:
    case QM_HAL_OP_AMP_SUMSQ_DEV:
    case QM_HAL_OP_AMP_SCAN:
    case QM_HAL_OP_AMP_SCALE:
    case QM_HAL_OP_AMP_BATCH:
        return true;
    case QM_HAL_OP_PRODUCT:
    case QM_HAL_OP_IQP_PHASE:
    case QM_HAL_OP_WHT:
    case QM_HAL_OP_STATE_SUMSQ:
    case QM_HAL_OP_IQP:
    case QM_HAL_OP_TREE_COMBINE:
    case QM_HAL_OP_COUNT_:
        break;
    }
    return false;
}

bool qm_hal_supports_op(const qm_hal *hal, qm_hal_op op)
{
    return hal && op >= QM_HAL_OP_AMP_STASH && op < QM_HAL_OP_COUNT_ &&
           hal->ops->kernel.supports_op(hal->ctx, op);
}

/* The common tail of every op's wrapper, after its checks: E-UNSUPPORTED for an op the backend
 * lacks, else the backend's launch with the buffers by role; `what` names the op in messages as
 * the wrapper's own checks do ("stash on n0.g1: ..."). */
static qm_code launch_op(qm_hal *hal, int dev, qm_hal_op op, const char *what, const void *params,
                         const void *state, const void *input, void *out, qm_hal_stream *s,
                         qm_status *st)
{
    if (!qm_hal_supports_op(hal, op))
        return qm_fail(st, QM_E_UNSUPPORTED, "%s: the %s backend does not implement op %s", what,
                       qm_hal_kind_name(hal->ops->kind), qm_hal_op_name(op));
    void *const bufs[QM_HAL_OP_BUFS] = {
        [QM_HAL_OP_BUF_STATE] = (void *)(uintptr_t)state,
        [QM_HAL_OP_BUF_INPUT] = (void *)(uintptr_t)input,
        [QM_HAL_OP_BUF_OUT] = out,
    };
    qm_code rc = hal->ops->kernel.launch(hal->ctx, dev, op, params, bufs, stream_of(s, dev), st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "%s on %s", what, hal->info[dev].id);
    return QM_OK;
}

static const void *ptr_of(const qm_hal_buf *b) { return b ? b->ptr : NULL; }

/* ---- amplitude-encoding ops ------------------------------------------------------------------- */

static bool is_state_dtype(qm_dtype dt) { return dt == QM_DTYPE_COMPLEX64 || dt == QM_DTYPE_COMPLEX128; }
static bool is_input_dtype(qm_dtype dt) { return dt == QM_DTYPE_FLOAT32 || dt == QM_DTYPE_FLOAT64; }
static const char *dtn(qm_dtype dt) { return qm_dtype_name(dt) ? qm_dtype_name(dt) : "unknown"; }

/* Element range [off, off + n) of dtype dt inside buffer b. */
static qm_code check_elems(const qm_hal *hal, const qm_hal_buf *b, qm_dtype dt, uint64_t off,
                           uint64_t n, const char *op, const char *which, qm_status *st)
{
    const uint64_t es = qm_dtype_size(dt);
    if (!b)
        return qm_fail(st, QM_E_ARG, "%s: %s buffer must not be NULL", op, which);
    if (off > UINT64_MAX / es || n > UINT64_MAX / es - off)
        return qm_fail(st, QM_E_BOUNDS, "%s: %s range overflows 64 bits", op, which);
    return check_range(hal, b, off * es, n * es, op, which, st);
}

static qm_code check_period(uint64_t period, uint64_t valid, const char *op, qm_status *st)
{
    if (period == 0 || valid > period)
        return qm_fail(st, QM_E_ARG, "%s: period %llu with %llu valid slots is not a layout", op,
                       (unsigned long long)period, (unsigned long long)valid);
    return QM_OK;
}

/* The input elements that global slots [g_lo, g_hi) read must lie in the input buffer, whose
 * element 0 is input element in_first. */
static qm_code check_input_slots(const qm_hal *hal, const qm_hal_buf *in, qm_dtype dt,
                                 uint64_t in_first, uint64_t in_off, uint64_t g_lo, uint64_t g_hi,
                                 uint64_t period, uint64_t period_valid, const char *op,
                                 qm_status *st)
{
    if (!is_input_dtype(dt))
        return qm_fail(st, QM_E_DTYPE, "%s: input dtype must be float32 or float64 (got %s)", op,
                       dtn(dt));
    if (g_hi <= g_lo)
        return QM_OK;
    uint64_t e_lo, e_hi;
    qm_input_range(g_lo, g_hi, period, period_valid, &e_lo, &e_hi);
    if (e_hi <= e_lo)
        return QM_OK;
    if (e_lo < in_first)
        return qm_fail(st, QM_E_BOUNDS, "%s: slots [%llu, %llu) read input element %llu, before "
                       "the buffer's first element %llu", op, (unsigned long long)g_lo,
                       (unsigned long long)g_hi, (unsigned long long)e_lo,
                       (unsigned long long)in_first);
    if (e_lo - in_first > UINT64_MAX - in_off)
        return qm_fail(st, QM_E_BOUNDS, "%s: input element %llu lies past the buffer", op,
                       (unsigned long long)e_lo);
    return check_elems(hal, in, dt, in_off + (e_lo - in_first), e_hi - e_lo, op, "input", st);
}

qm_code qm_hal_stash(qm_hal *hal, const qm_hal_stash_args *a, qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a)
        return qm_fail(st, QM_E_ARG, "stash: hal and args must not be NULL");
    if (!is_state_dtype(a->out_dtype) || !is_input_dtype(a->in_dtype))
        return qm_fail(st, QM_E_DTYPE, "stash: %s input into a %s state is not supported",
                       dtn(a->in_dtype), dtn(a->out_dtype));
    qm_code rc = check_period(a->period, a->period_valid, "stash", st);
    if (rc == QM_OK && a->period_valid == 0)
        rc = qm_fail(st, QM_E_ARG, "stash: a state with 0 input values has nothing to stash");
    if (rc == QM_OK)
        rc = check_elems(hal, a->in, a->in_dtype, a->in_off, a->n, "stash", "input", st);
    if (rc != QM_OK || a->n == 0)
        return rc;
    /* the slots of the first and last values, relative to the buffer */
    const uint64_t e0 = a->in_first, e1 = a->in_first + a->n - 1;
    const uint64_t g_first = (e0 / a->period_valid) * a->period + e0 % a->period_valid;
    const uint64_t g_last = (e1 / a->period_valid) * a->period + e1 % a->period_valid;
    if (g_first < a->slot_g0)
        return qm_fail(st, QM_E_BOUNDS, "stash: input element %llu lands on global slot %llu, "
                       "before the buffer's first slot %llu", (unsigned long long)e0,
                       (unsigned long long)g_first, (unsigned long long)a->slot_g0);
    rc = check_elems(hal, a->out, a->out_dtype, g_first - a->slot_g0, g_last - g_first + 1, "stash",
                     "state", st);
    if (rc != QM_OK)
        return rc;
    if (a->in->dev != a->out->dev)
        return qm_fail(st, QM_E_ARG, "stash: input on %s but state on %s", hal->info[a->in->dev].id,
                       hal->info[a->out->dev].id);
    return launch_op(hal, a->out->dev, QM_HAL_OP_AMP_STASH, "stash", a, a->out->ptr, a->in->ptr,
                     NULL, s, st);
}

/* The input pointer a sumsq backend reads: past a->in_off elements (NULL: the stash). */
static const void *sumsq_input(const qm_hal_sumsq_args *a)
{
    return a->input ? (const char *)a->input->ptr + a->in_off * qm_dtype_size(a->in_dtype) : NULL;
}

/* The checks shared by both forms of sumsq; *dev is the device of the input (or the state). */
static qm_code sumsq_check(qm_hal *hal, const qm_hal_sumsq_args *a, int *dev, qm_status *st)
{
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "sumsq: state dtype must be complex64 or complex128 (got %s)",
                       dtn(a->state_dtype));
    if (a->log2_block > 62 || a->n_blocks == 0 || a->n_blocks > (UINT64_MAX >> a->log2_block))
        return qm_fail(st, QM_E_ARG, "sumsq: %llu blocks of 2^%u slots is not a valid range",
                       (unsigned long long)a->n_blocks, a->log2_block);
    qm_code rc = check_period(a->period, a->period_valid, "sumsq", st);
    if (rc != QM_OK)
        return rc;
    const uint64_t bs = (uint64_t)1 << a->log2_block;
    if (a->period % bs != 0 || a->g0 % bs != 0)
        return qm_fail(st, QM_E_ARG, "sumsq: blocks of %llu slots must divide the period %llu and "
                       "align with global index %llu", (unsigned long long)bs,
                       (unsigned long long)a->period, (unsigned long long)a->g0);
    if (a->input) {
        rc = check_input_slots(hal, a->input, a->in_dtype, a->in_first, a->in_off, a->g0,
                               a->g0 + (a->n_blocks << a->log2_block), a->period, a->period_valid,
                               "sumsq", st);
        *dev = a->input->dev;
    } else {
        rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n_blocks << a->log2_block,
                         "sumsq", "state", st);
        *dev = a->state ? a->state->dev : 0;
    }
    return rc;
}

qm_code qm_hal_sumsq_sync(qm_hal *hal, const qm_hal_sumsq_args *a, qm_status *st)
{
    if (!hal || !a || !a->out_sums)
        return qm_fail(st, QM_E_ARG, "sumsq: hal, args and out_sums must not be NULL");
    int dev = 0;
    qm_code rc = sumsq_check(hal, a, &dev, st);
    if (rc != QM_OK)
        return rc;
    qm_hal_sumsq_args b = *a;
    b.in_off = 0;
    return launch_op(hal, dev, QM_HAL_OP_AMP_SUMSQ, "sumsq", &b,
                     a->input ? NULL : ptr_of(a->state), sumsq_input(a), NULL, NULL, st);
}

qm_code qm_hal_sumsq(qm_hal *hal, const qm_hal_sumsq_args *a, qm_hal_buf *out, uint64_t out_off,
                     qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a || !out)
        return qm_fail(st, QM_E_ARG, "sumsq: hal, args and the output buffer must not be NULL");
    int dev = 0;
    qm_code rc = sumsq_check(hal, a, &dev, st);
    if (rc != QM_OK)
        return rc;
    if (out->dev != dev || out->wrapped)
        return qm_fail(st, QM_E_ARG, "sumsq: the sums must go to a device buffer on %s (got one on "
                       "%s)", hal->info[dev].id, hal->info[out->dev].id);
    if (out_off > out->bytes / 8 || a->n_blocks > out->bytes / 8 - out_off)
        return qm_fail(st, QM_E_ARG, "sumsq: %llu sums from double %llu do not fit a buffer of "
                       "%llu bytes", (unsigned long long)a->n_blocks,
                       (unsigned long long)out_off, (unsigned long long)out->bytes);
    qm_hal_sumsq_args b = *a;
    b.in_off = 0;
    return launch_op(hal, dev, QM_HAL_OP_AMP_SUMSQ_DEV, "sumsq", &b,
                     a->input ? NULL : ptr_of(a->state), sumsq_input(a),
                     (double *)out->ptr + out_off, s, st);
}

uint64_t qm_hal_state_sumsq_blocks(uint64_t g0, uint64_t n, unsigned log2_block)
{
    if (n == 0 || log2_block > 62 || n > UINT64_MAX - g0)
        return 0;
    return ((g0 + n - 1) >> log2_block) - (g0 >> log2_block) + 1;
}

qm_code qm_hal_state_sumsq(qm_hal *hal, const qm_hal_state_sumsq_args *a, qm_hal_buf *out,
                           uint64_t out_off, qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a || !a->state || !out)
        return qm_fail(st, QM_E_ARG, "state_sumsq: hal, args, state and the output buffer must "
                       "not be NULL");
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "state_sumsq: state dtype must be complex64 or complex128 "
                       "(got %s)", dtn(a->state_dtype));
    if (a->log2_block > QM_HAL_RED_LOG2_BLOCK || a->n == 0 || a->n > UINT64_MAX - a->g0)
        return qm_fail(st, QM_E_ARG, "state_sumsq: %llu slots from global index %llu in blocks of "
                       "2^%u is not a valid range (blocks of at most 2^%d)",
                       (unsigned long long)a->n, (unsigned long long)a->g0, a->log2_block,
                       QM_HAL_RED_LOG2_BLOCK);
    const uint64_t bs = (uint64_t)1 << a->log2_block;
    if (a->period == 0 || (a->period & (a->period - 1)) != 0 || a->period % bs != 0)
        return qm_fail(st, QM_E_ARG, "state_sumsq: blocks of %llu slots must divide the period "
                       "%llu (a power of two)", (unsigned long long)bs,
                       (unsigned long long)a->period);
    qm_code rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n, "state_sumsq", "state",
                             st);
    if (rc != QM_OK)
        return rc;
    const int dev = a->state->dev;
    const uint64_t nb = qm_hal_state_sumsq_blocks(a->g0, a->n, a->log2_block);
    if (out->dev != dev || out->wrapped)
        return qm_fail(st, QM_E_ARG, "state_sumsq: the sums must go to a device buffer on %s (got "
                       "one on %s)", hal->info[dev].id, hal->info[out->dev].id);
    if (out_off > out->bytes / 8 || nb > out->bytes / 8 - out_off)
        return qm_fail(st, QM_E_ARG, "state_sumsq: %llu sums from double %llu do not fit a buffer "
                       "of %llu bytes", (unsigned long long)nb, (unsigned long long)out_off,
                       (unsigned long long)out->bytes);
    return launch_op(hal, dev, QM_HAL_OP_STATE_SUMSQ, "state_sumsq", a,
                     a->state->ptr, NULL, (double *)out->ptr + out_off, s, st);
}

qm_code qm_hal_tree_combine_dev(qm_hal *hal, const qm_hal_tree_combine_args *a,
                                const qm_hal_buf *in, qm_hal_buf *out, uint64_t out_off,
                                qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a || !in || !out)
        return qm_fail(st, QM_E_ARG, "tree_combine: hal, args and both buffers must not be NULL");
    if (a->n_groups == 0 || a->log2_group > 40 || a->n_groups > (UINT64_MAX >> 3 >> a->log2_group))
        return qm_fail(st, QM_E_ARG, "tree_combine: %llu groups of 2^%u sums (1 or more groups of at "
                       "most 2^40)", (unsigned long long)a->n_groups, a->log2_group);
    const int dev = in->dev;
    if (out->dev != dev || in->wrapped || out->wrapped)
        return qm_fail(st, QM_E_ARG, "tree_combine: both buffers must be device buffers of %s (got "
                       "the output on %s)", hal->info[dev].id, hal->info[out->dev].id);
    const uint64_t n_in = a->n_groups << a->log2_group, cap_in = in->bytes / 8, cap_out = out->bytes / 8;
    if (a->in_off > cap_in || n_in > cap_in - a->in_off)
        return qm_fail(st, QM_E_ARG, "tree_combine: %llu sums from double %llu do not fit a buffer "
                       "of %llu bytes", (unsigned long long)n_in, (unsigned long long)a->in_off,
                       (unsigned long long)in->bytes);
    if (out_off > cap_out || a->n_groups > cap_out - out_off)
        return qm_fail(st, QM_E_ARG, "tree_combine: %llu roots from double %llu do not fit a "
                       "buffer of %llu bytes", (unsigned long long)a->n_groups,
                       (unsigned long long)out_off, (unsigned long long)out->bytes);
    if (in == out && out_off < a->in_off + n_in && a->in_off < out_off + a->n_groups)
        return qm_fail(st, QM_E_ARG, "tree_combine: the roots [%llu, %llu) overlap the sums "
                       "[%llu, %llu) of the same buffer", (unsigned long long)out_off,
                       (unsigned long long)(out_off + a->n_groups), (unsigned long long)a->in_off,
                       (unsigned long long)(a->in_off + n_in));
    return launch_op(hal, dev, QM_HAL_OP_TREE_COMBINE, "tree_combine", a, NULL, in->ptr,
                     (double *)out->ptr + out_off, s, st);
}

qm_code qm_hal_scan_sync(qm_hal *hal, const qm_hal_buf *state, qm_dtype state_dtype, uint64_t off,
                         uint64_t n, qm_hal_scan_result *out, qm_status *st)
{
    if (!hal || !out)
        return qm_fail(st, QM_E_ARG, "scan: hal and out must not be NULL");
    if (!is_state_dtype(state_dtype))
        return qm_fail(st, QM_E_DTYPE, "scan: state dtype must be complex64 or complex128 (got %s)",
                       dtn(state_dtype));
    qm_code rc = check_elems(hal, state, state_dtype, off, n, "scan", "state", st);
    if (rc != QM_OK)
        return rc;
    out->max_abs = 0;
    out->first_nonfinite = UINT64_MAX;
    if (n == 0)
        return QM_OK;
    const qm_hal_scan_args a = {.state = state, .state_dtype = state_dtype, .off = off, .n = n,
                                .out = out};
    return launch_op(hal, state->dev, QM_HAL_OP_AMP_SCAN, "scan", &a, state->ptr, NULL, NULL, NULL,
                     st);
}

qm_code qm_hal_amp_scale(qm_hal *hal, const qm_hal_amp_scale_args *a, qm_hal_stream *s,
                         qm_status *st)
{
    if (!hal || !a || (!a->coeffs && a->n_coeffs))
        return qm_fail(st, QM_E_ARG, "amp_scale: hal, args and coefficients must not be NULL");
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "amp_scale: state dtype must be complex64 or complex128 "
                       "(got %s)", dtn(a->state_dtype));
    qm_code rc = check_period(a->period, a->period_valid, "amp_scale", st);
    if (rc == QM_OK)
        rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n, "amp_scale", "state", st);
    if (rc != QM_OK || a->n == 0)
        return rc;
    const uint64_t first = a->g0 / a->period, last = (a->g0 + a->n - 1) / a->period;
    if (first < a->first_state || last - a->first_state >= a->n_coeffs)
        return qm_fail(st, QM_E_BOUNDS, "amp_scale: slots span states %llu..%llu but coefficients "
                       "cover %llu..%llu", (unsigned long long)first, (unsigned long long)last,
                       (unsigned long long)a->first_state,
                       (unsigned long long)(a->first_state + a->n_coeffs - 1));
    if (a->input) {
        rc = check_input_slots(hal, a->input, a->in_dtype, a->in_first, 0, a->g0, a->g0 + a->n,
                               a->period, a->period_valid, "amp_scale", st);
        if (rc == QM_OK && a->input->dev != a->state->dev)
            rc = qm_fail(st, QM_E_ARG, "amp_scale: input on %s but state on %s",
                         hal->info[a->input->dev].id, hal->info[a->state->dev].id);
        if (rc != QM_OK)
            return rc;
    }
    return launch_op(hal, a->state->dev, QM_HAL_OP_AMP_SCALE, "amp_scale", a, a->state->ptr,
                     ptr_of(a->input), NULL, s, st);
}

qm_code qm_hal_amp_batch(qm_hal *hal, const qm_hal_amp_batch_args *a, qm_hal_stream *s,
                         qm_status *st)
{
    if (!hal || !a || !a->state || !a->input || !a->sums)
        return qm_fail(st, QM_E_ARG, "amp_batch: hal, args, state, input and sums must not be NULL");
    if (!is_state_dtype(a->state_dtype) || !is_input_dtype(a->in_dtype))
        return qm_fail(st, QM_E_DTYPE, "amp_batch: %s input into a %s state is not supported",
                       dtn(a->in_dtype), dtn(a->state_dtype));
    qm_code rc = check_period(a->period, a->period_valid, "amp_batch", st);
    if (rc != QM_OK)
        return rc;
    if (a->period > ((uint64_t)1 << QM_HAL_RED_LOG2_BLOCK) || a->period_valid == 0)
        return qm_fail(st, QM_E_ARG, "amp_batch: states of %llu slots with %llu values are not "
                       "small states (1 to %llu slots, at least 1 value)",
                       (unsigned long long)a->period, (unsigned long long)a->period_valid,
                       (unsigned long long)((uint64_t)1 << QM_HAL_RED_LOG2_BLOCK));
    if (a->n_states == 0)
        return QM_OK;
    if (a->n_states > UINT64_MAX / a->period)
        return qm_fail(st, QM_E_ARG, "amp_batch: %llu states overflow", (unsigned long long)a->n_states);
    if ((rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n_states * a->period,
                          "amp_batch", "state", st)) != QM_OK ||
        (rc = check_elems(hal, a->input, a->in_dtype, a->in_off, a->n_states * a->period_valid,
                          "amp_batch", "input", st)) != QM_OK ||
        (rc = check_elems(hal, a->sums, QM_DTYPE_FLOAT64, a->sums_off, a->n_states, "amp_batch",
                          "sums", st)) != QM_OK)
        return rc;
    const int dev = a->state->dev;
    if (a->input->dev != dev || a->sums->dev != dev)
        return qm_fail(st, QM_E_ARG, "amp_batch: state on %s, input on %s, sums on %s: all must be "
                       "on one device", hal->info[dev].id, hal->info[a->input->dev].id,
                       hal->info[a->sums->dev].id);
    return launch_op(hal, dev, QM_HAL_OP_AMP_BATCH, "amp_batch", a, a->state->ptr, a->input->ptr,
                     a->sums->ptr, s, st);
}

void qm_hal_trim(qm_hal *hal)
{
    void (*trim)(void *) = hal ? OPS(hal, device.trim, ABI_BASE) : NULL;
    if (trim)
        trim(hal->ctx);
}

/* ---- the maths the engine needs: qm_math.h's, so the numbers are the kernels' ------------------ */

void qm_hal_input_range(uint64_t lo, uint64_t hi, uint64_t period, uint64_t period_valid,
                        uint64_t *e_lo, uint64_t *e_hi)
{
    qm_input_range(lo, hi, period, period_valid, e_lo, e_hi);
}

double qm_hal_tree_combine(double *v, uint64_t n) { return qm_tree_combine(v, n); }
double qm_hal_rescale_factor(double max_abs) { return qm_rescale_factor(max_abs); }
bool qm_hal_sum_is_fast(double sum) { return isfinite(sum) && sum >= QM_FAST_SUM_MIN; }
unsigned qm_hal_iqp_passes(unsigned bits) { return qm_iqp_traffic(bits); }

/* ---- product-state ops (angle, basis, phase) ------------------------------------------------- */

qm_code qm_hal_product(qm_hal *hal, const qm_hal_product_args *a, qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a || !a->state || !a->table)
        return qm_fail(st, QM_E_ARG, "product: hal, args, state and table must not be NULL");
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "product: state dtype must be complex64 or complex128 (got %s)",
                       dtn(a->state_dtype));
    if (a->qubits < 1 || a->qubits > 62)
        return qm_fail(st, QM_E_ARG, "product: %u qubits (1 to 62)", a->qubits);
    qm_code rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n, "product", "state", st);
    if (rc != QM_OK || a->n == 0)
        return rc;
    if (a->g0 > UINT64_MAX - a->n)
        return qm_fail(st, QM_E_BOUNDS, "product: global indices overflow 64 bits");
    const uint64_t first = a->g0 >> a->qubits, last = (a->g0 + a->n - 1) >> a->qubits;
    if (first < a->first_state || last - a->first_state >= a->n_states)
        return qm_fail(st, QM_E_BOUNDS, "product: slots span states %llu..%llu but the table covers "
                       "%llu..%llu", (unsigned long long)first, (unsigned long long)last,
                       (unsigned long long)a->first_state,
                       (unsigned long long)(a->first_state + a->n_states - 1));
    const uint64_t per = 4 * (uint64_t)a->qubits;
    if (a->n_states > UINT64_MAX / per)
        return qm_fail(st, QM_E_BOUNDS, "product: table size overflows 64 bits");
    rc = check_elems(hal, a->table, QM_DTYPE_FLOAT64, a->table_off, a->n_states * per, "product",
                     "table", st);
    if (rc != QM_OK)
        return rc;
    if (a->table->dev != a->state->dev)
        return qm_fail(st, QM_E_ARG, "product: table on %s but state on %s",
                       hal->info[a->table->dev].id, hal->info[a->state->dev].id);
    return launch_op(hal, a->state->dev, QM_HAL_OP_PRODUCT, "product", a, a->state->ptr,
                     (const char *)a->table->ptr + a->table_off * sizeof(double), NULL, s, st);
}

/* ---- IQP ops (iqp, iqp-z) --------------------------------------------------------------------- */

/* The checks of iqp_phase, shared by the iqp op (`what` names the op in messages). */
static qm_code iqp_phase_check(qm_hal *hal, const qm_hal_iqp_phase_args *a, const char *what,
                               qm_status *st)
{
    if (!hal || !a || !a->state || !a->table)
        return qm_fail(st, QM_E_ARG, "%s: hal, args, state and table must not be NULL", what);
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "%s: state dtype must be complex64 or complex128 (got %s)",
                       what, dtn(a->state_dtype));
    if (a->qubits < 1 || a->qubits > 62)
        return qm_fail(st, QM_E_ARG, "%s: %u qubits (1 to 62)", what, a->qubits);
    const unsigned pairs = a->qubits * (a->qubits - 1) / 2;
    if (a->n_coeffs != a->qubits && a->n_coeffs != a->qubits + pairs)
        return qm_fail(st, QM_E_ARG, "%s: %u coefficients for %u qubits (%u or %u)", what,
                       a->n_coeffs, a->qubits, a->qubits, a->qubits + pairs);
    qm_code rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n, what, "state", st);
    if (rc != QM_OK || a->n == 0)
        return rc;
    if (a->g0 > UINT64_MAX - a->n)
        return qm_fail(st, QM_E_BOUNDS, "%s: global indices overflow 64 bits", what);
    const uint64_t first = a->g0 >> a->qubits, last = (a->g0 + a->n - 1) >> a->qubits;
    if (first < a->first_state || last - a->first_state >= a->n_states)
        return qm_fail(st, QM_E_BOUNDS, "%s: slots span states %llu..%llu but the table covers "
                       "%llu..%llu", what, (unsigned long long)first, (unsigned long long)last,
                       (unsigned long long)a->first_state,
                       (unsigned long long)(a->first_state + a->n_states - 1));
    if (a->n_states > UINT64_MAX / a->n_coeffs)
        return qm_fail(st, QM_E_BOUNDS, "%s: table size overflows 64 bits", what);
    rc = check_elems(hal, a->table, QM_DTYPE_FLOAT64, a->table_off, a->n_states * a->n_coeffs,
                     what, "table", st);
    if (rc != QM_OK)
        return rc;
    if (a->table->dev != a->state->dev)
        return qm_fail(st, QM_E_ARG, "%s: table on %s but state on %s", what,
                       hal->info[a->table->dev].id, hal->info[a->state->dev].id);
    return QM_OK;
}


qm_code qm_hal_iqp_phase(qm_hal *hal, const qm_hal_iqp_phase_args *a, qm_hal_stream *s,
                         qm_status *st)
{
    const qm_code rc = iqp_phase_check(hal, a, "iqp_phase", st);
    if (rc != QM_OK || a->n == 0)
        return rc;
    return launch_op(hal, a->state->dev, QM_HAL_OP_IQP_PHASE, "iqp_phase", a, a->state->ptr,
                     (const char *)a->table->ptr + a->table_off * sizeof(double), NULL, s, st);
}

qm_code qm_hal_iqp(qm_hal *hal, const qm_hal_iqp_args *a, qm_hal_stream *s, qm_status *st)
{
    if (!a)
        return qm_fail(st, QM_E_ARG, "iqp: hal, args, state and table must not be NULL");
    const qm_hal_iqp_phase_args *p = &a->phase;
    qm_code rc = iqp_phase_check(hal, p, "iqp", st);
    if (rc != QM_OK)
        return rc;
    if (a->b1 > 62)
        return qm_fail(st, QM_E_ARG, "iqp: stages [0, %u) (at most 62)", a->b1);
    if (a->b1 > 0 && (p->n & (((uint64_t)1 << a->b1) - 1)))
        return qm_fail(st, QM_E_ARG, "iqp: %llu slots are not whole blocks of 2^%u",
                       (unsigned long long)p->n, a->b1);
    if (p->n == 0)
        return QM_OK;
    return launch_op(hal, p->state->dev, QM_HAL_OP_IQP, "iqp", a, p->state->ptr,
                     (const char *)p->table->ptr + p->table_off * sizeof(double), NULL, s, st);
}

qm_code qm_hal_wht(qm_hal *hal, const qm_hal_wht_args *a, qm_hal_stream *s, qm_status *st)
{
    if (!hal || !a || !a->state)
        return qm_fail(st, QM_E_ARG, "wht: hal, args and state must not be NULL");
    if (!is_state_dtype(a->state_dtype))
        return qm_fail(st, QM_E_DTYPE, "wht: state dtype must be complex64 or complex128 (got %s)",
                       dtn(a->state_dtype));
    qm_code rc = check_elems(hal, a->state, a->state_dtype, a->off, a->n, "wht", "state", st);
    if (rc != QM_OK)
        return rc;
    const void *partner = NULL;
    if (a->partner) {
        if ((rc = check_elems(hal, a->partner, a->state_dtype, a->partner_off, a->n, "wht",
                              "partner", st)) != QM_OK)
            return rc;
        if (a->partner->dev != a->state->dev)
            return qm_fail(st, QM_E_ARG, "wht: partner on %s but state on %s",
                           hal->info[a->partner->dev].id, hal->info[a->state->dev].id);
        if (a->partner == a->state)
            return qm_fail(st, QM_E_ARG, "wht: the partner must be another buffer");
        partner = (const char *)a->partner->ptr + a->partner_off * qm_dtype_size(a->state_dtype);
    } else {
        if (a->b0 >= a->b1 || a->b1 > 62)
            return qm_fail(st, QM_E_ARG, "wht: bits [%u, %u) (0 <= b0 < b1 <= 62)", a->b0, a->b1);
        if (a->n & (((uint64_t)1 << a->b1) - 1))
            return qm_fail(st, QM_E_ARG, "wht: %llu slots are not whole blocks of 2^%u",
                           (unsigned long long)a->n, a->b1);
    }
    if (a->n == 0)
        return QM_OK;
    return launch_op(hal, a->state->dev, QM_HAL_OP_WHT, "wht", a, a->state->ptr, partner, NULL, s,
                     st);
}
