/* fault.c — the fault-injection shim (see fault.h).
 *
 * In: every ops call of the HAL it wraps. Out: the inner backend's answer, or the configured error
 * for the k-th counted call. Must not: change what a successful call does, or count calls that the
 * configuration does not select.
 */
#include "fault.h"
#include "hal_impl.h"
#include "status_internal.h"

#include <stdlib.h>

typedef struct fault_ctx {
    qm_hal *inner;
    const qm_hal_ops *iops;
    void *ictx;
    qm_fault_config cfg;
    uint64_t calls;
    bool fired;
} fault_ctx;

static const char *point_name(unsigned p)
{
    switch (p) {
    case QM_FAULT_ALLOC: return "allocation";
    case QM_FAULT_COPY: return "copy";
    case QM_FAULT_LAUNCH: return "kernel launch";
    case QM_FAULT_COLLECTIVE: return "collective";
    }
    return "call";
}

/* Returns a failure code when this call is the one to fail, else QM_OK. */
static qm_code fault_tick(fault_ctx *f, unsigned point, qm_status *st)
{
    if (!(f->cfg.points & point))
        return QM_OK;
    f->calls++;
    if (f->cfg.fail_at == 0 || f->calls != f->cfg.fail_at)
        return QM_OK;
    f->fired = true;
    return qm_fail(st, f->cfg.code, "injected fault: %s (counted call %llu)", point_name(point),
                   (unsigned long long)f->calls);
}

static int f_device_count(void *ctx)
{
    fault_ctx *f = ctx;
    return f->iops->device_count(f->ictx);
}

static qm_code f_device_info(void *ctx, int dev, qm_hal_device_info *out, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->device_info(f->ictx, dev, out, st);
}

static bool f_peer(void *ctx, int a, int b)
{
    fault_ctx *f = ctx;
    return f->iops->peer(f->ictx, a, b);
}

static qm_code f_buf_alloc(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                           qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_ALLOC, st);
    return rc != QM_OK ? rc : f->iops->buf_alloc(f->ictx, dev, bytes, ptr, host_ptr, st);
}

static void f_buf_free(void *ctx, int dev, void *ptr, uint64_t bytes)
{
    fault_ctx *f = ctx;
    f->iops->buf_free(f->ictx, dev, ptr, bytes);
}

static qm_code f_stream_create(void *ctx, int dev, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    *out = NULL;
    return f->iops->stream_create ? f->iops->stream_create(f->ictx, dev, out, st) : QM_OK;
}

static void f_stream_destroy(void *ctx, int dev, void *s)
{
    fault_ctx *f = ctx;
    if (f->iops->stream_destroy)
        f->iops->stream_destroy(f->ictx, dev, s);
}

static qm_code f_stream_sync(void *ctx, int dev, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream_sync ? f->iops->stream_sync(f->ictx, dev, s, st) : QM_OK;
}

#define F_COPY(NAME, MEMBER)                                                                       \
    static qm_code NAME(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,   \
                        qm_status *st)                                                             \
    {                                                                                              \
        fault_ctx *f = ctx;                                                                        \
        qm_code rc = fault_tick(f, QM_FAULT_COPY, st);                                             \
        return rc != QM_OK ? rc : f->iops->MEMBER(f->ictx, dev, dst, src, bytes, s, st);           \
    }
F_COPY(f_copy_h2d, copy_h2d)
F_COPY(f_copy_d2h, copy_d2h)
F_COPY(f_copy_d2d, copy_d2d)

static qm_code f_copy_peer(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                           uint64_t bytes, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_COPY, st);
    if (rc != QM_OK)
        return rc;
    if (!f->iops->copy_peer)
        return qm_fail(st, QM_E_INTERNAL, "peer copy called on a backend without one");
    return f->iops->copy_peer(f->ictx, dst_dev, dst, src_dev, src, bytes, s, st);
}

static qm_code f_stash(void *ctx, int dev, void *state, const void *in, const qm_hal_stash_args *a,
                       void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->stash(f->ictx, dev, state, in, a, s, st);
}

static qm_code f_sumsq(void *ctx, int dev, const void *state, const void *in,
                       const qm_hal_sumsq_args *a, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->sumsq(f->ictx, dev, state, in, a, st);
}

static qm_code f_sumsq_dev(void *ctx, int dev, const void *state, const void *in,
                           const qm_hal_sumsq_args *a, void *out, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    if (rc != QM_OK)
        return rc;
    return f->iops->sumsq_dev(f->ictx, dev, state, in, a, out, s, st);
}

static qm_code f_scan(void *ctx, int dev, const void *state, qm_dtype state_dtype, uint64_t off,
                      uint64_t n, qm_hal_scan_result *out, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->scan(f->ictx, dev, state, state_dtype, off, n, out, st);
}

static qm_code f_amp_scale(void *ctx, int dev, void *state, const void *in,
                           const qm_hal_amp_scale_args *a, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->amp_scale(f->ictx, dev, state, in, a, s, st);
}

/* Wrapping host memory allocates nothing: counted as an allocation point all the same, so the
 * sweep proves its failure path too. */
static qm_code f_wrap_host(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                           qm_status *st)
{
    fault_ctx *f = ctx;
    if (!f->iops->wrap_host)
        return qm_fail(st, QM_E_UNSUPPORTED, "the wrapped backend cannot read host memory in place");
    qm_code rc = fault_tick(f, QM_FAULT_ALLOC, st);
    return rc != QM_OK ? rc : f->iops->wrap_host(f->ictx, dev, ptr, bytes, out, st);
}

static qm_code f_allgather(void *ctx, int n_bufs, const qm_hal_buf *const *bufs, uint64_t count,
                           double *out, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_COLLECTIVE, st);
    if (rc != QM_OK)
        return rc;
    if (f->iops->allgather_f64)
        return f->iops->allgather_f64(f->ictx, n_bufs, bufs, count, out, st);
    return qm_hal_allgather_fallback(f->iops, f->ictx, n_bufs, bufs, count, out, st);
}

static qm_code f_amp_batch(void *ctx, int dev, void *state, const void *in, void *sums,
                           const qm_hal_amp_batch_args *a, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    if (!f->iops->amp_batch)
        return qm_fail(st, QM_E_UNSUPPORTED, "the wrapped backend has no fused batch kernel");
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->amp_batch(f->ictx, dev, state, in, sums, a, s, st);
}

/* Events and host staging memory pass straight through (events are no-ops on the simulator; a
 * failed host allocation is a host-memory error, not a device fault). */
static qm_code f_event_create(void *ctx, int dev, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    *out = NULL;
    return f->iops->event_create ? f->iops->event_create(f->ictx, dev, out, st) : QM_OK;
}

static void f_event_destroy(void *ctx, int dev, void *ev)
{
    fault_ctx *f = ctx;
    if (f->iops->event_destroy)
        f->iops->event_destroy(f->ictx, dev, ev);
}

static qm_code f_event_record(void *ctx, int dev, void *ev, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->event_record ? f->iops->event_record(f->ictx, dev, ev, s, st) : QM_OK;
}

static qm_code f_stream_wait(void *ctx, int dev, void *s, void *ev, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream_wait ? f->iops->stream_wait(f->ictx, dev, s, ev, st) : QM_OK;
}

static qm_code f_event_sync(void *ctx, int dev, void *ev, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->event_sync ? f->iops->event_sync(f->ictx, dev, ev, st) : QM_OK;
}

static qm_code f_host_alloc(void *ctx, uint64_t bytes, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    if (f->iops->host_alloc)
        return f->iops->host_alloc(f->ictx, bytes, out, st);
    if (!(*out = malloc((size_t)bytes)))
        return qm_fail(st, QM_E_NOMEM, "out of host memory for %llu bytes", (unsigned long long)bytes);
    return QM_OK;
}

static void f_host_free(void *ctx, void *p)
{
    fault_ctx *f = ctx;
    if (f->iops->host_free)
        f->iops->host_free(f->ictx, p);
    else
        free(p);
}

static bool f_host_is_pinned(void *ctx, const void *p)
{
    fault_ctx *f = ctx;
    return f->iops->host_is_pinned ? f->iops->host_is_pinned(f->ictx, p) : true;
}

static void f_trim(void *ctx) { qm_hal_trim(((fault_ctx *)ctx)->inner); }

static void f_destroy(void *ctx)
{
    fault_ctx *f = ctx;
    if (!f)
        return;
    qm_hal_destroy(f->inner);
    free(f);
}

static const qm_hal_ops fault_ops = {
    .kind = QM_HAL_FAULT,
    .abi = 4, /* the HAL ABI this table was written against (hal_impl.h): up to sumsq_dev */
    .device_count = f_device_count,
    .device_info = f_device_info,
    .peer = f_peer,
    .buf_alloc = f_buf_alloc,
    .buf_free = f_buf_free,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_sync = f_stream_sync,
    .copy_h2d = f_copy_h2d,
    .copy_d2h = f_copy_d2h,
    .copy_d2d = f_copy_d2d,
    .copy_peer = f_copy_peer,
    .stash = f_stash,
    .sumsq = f_sumsq,
    .scan = f_scan,
    .amp_scale = f_amp_scale,
    .wrap_host = f_wrap_host,
    .allgather_f64 = f_allgather,
    .destroy = f_destroy,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .stream_wait = f_stream_wait,
    .event_sync = f_event_sync,
    .host_alloc = f_host_alloc,
    .host_free = f_host_free,
    .host_is_pinned = f_host_is_pinned,
    .amp_batch = f_amp_batch,
    .trim = f_trim,
    .sumsq_dev = f_sumsq_dev,
};

qm_code qm_hal_fault_create(qm_hal *inner, const qm_fault_config *cfg, qm_hal **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!inner || !cfg || !out) {
        qm_hal_destroy(inner);
        return qm_fail(st, QM_E_ARG, "fault: inner HAL, config and out must not be NULL");
    }
    if (cfg->code == QM_OK || cfg->code >= QM_CODE_COUNT_) {
        qm_hal_destroy(inner);
        return qm_fail(st, QM_E_ARG, "fault: the injected code must be an error (got %d)",
                       (int)cfg->code);
    }
    fault_ctx *f = calloc(1, sizeof *f);
    if (!f) {
        qm_hal_destroy(inner);
        return qm_fail(st, QM_E_NOMEM, "fault: out of host memory");
    }
    f->inner = inner;
    f->iops = qm_hal_ops_get(inner);
    f->ictx = qm_hal_ctx(inner);
    f->cfg = *cfg;
    return qm_hal_create(&fault_ops, f, out, st);
}

static fault_ctx *fault_of(const qm_hal *hal)
{
    const qm_hal_ops *ops = qm_hal_ops_get(hal);
    return ops && ops->kind == QM_HAL_FAULT ? qm_hal_ctx(hal) : NULL;
}

uint64_t qm_hal_fault_calls(const qm_hal *hal)
{
    fault_ctx *f = fault_of(hal);
    return f ? f->calls : 0;
}

void qm_hal_fault_rearm(qm_hal *hal, uint64_t fail_at)
{
    fault_ctx *f = fault_of(hal);
    if (!f)
        return;
    f->calls = 0;
    f->fired = false;
    f->cfg.fail_at = fail_at;
}

bool qm_hal_fault_fired(const qm_hal *hal)
{
    fault_ctx *f = fault_of(hal);
    return f && f->fired;
}
