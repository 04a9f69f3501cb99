/* fault.c — the fault-injection shim (see fault.h).
 *
 * In: every ops call of the HAL it wraps. Out: the inner backend's answer, or the configured error
 * for the k-th counted call. Must not: change what a successful call does, count calls that the
 * configuration does not select, or implement anything itself: every member forwards to the inner
 * table's member as-is, and a member the inner table lacks is absent here too (hal.c then takes
 * the same fallback it takes for the inner backend).
 */
#include "fault.h"
#include "hal_impl.h"
#include "status_internal.h"

#include <stdlib.h>

typedef struct fault_ctx {
    qm_hal_ops ops; /* this shim's table: the inner table's members, forwarded (fault_table) */
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

/* ---- forwarding: one function per member, each calling the inner member of the same name ------
 * Counted points tick first; everything else passes through untouched. A member the inner table
 * leaves NULL stays NULL in the shim's table (see fault_table), so hal.c applies the fallback it
 * would apply to the inner backend (host memory by malloc, no events, staged peer copies, ...). */

static int f_count(void *ctx)
{
    fault_ctx *f = ctx;
    return f->iops->device.count(f->ictx);
}

static qm_code f_info(void *ctx, int dev, qm_hal_device_info *out, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->device.info(f->ictx, dev, out, st);
}

static bool f_peer(void *ctx, int a, int b)
{
    fault_ctx *f = ctx;
    return f->iops->device.peer(f->ictx, a, b);
}

static qm_code f_buf_alloc(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                           qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_ALLOC, st);
    return rc != QM_OK ? rc : f->iops->device.buf_alloc(f->ictx, dev, bytes, ptr, host_ptr, st);
}

static void f_buf_free(void *ctx, int dev, void *ptr, uint64_t bytes)
{
    fault_ctx *f = ctx;
    f->iops->device.buf_free(f->ictx, dev, ptr, bytes);
}

/* Wrapping host memory allocates nothing: counted as an allocation point all the same, so the
 * sweep proves its failure path too. */
static qm_code f_wrap_host(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                           qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_ALLOC, st);
    return rc != QM_OK ? rc : f->iops->device.wrap_host(f->ictx, dev, ptr, bytes, out, st);
}

static qm_code f_wrap_device(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                             qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_ALLOC, st);
    return rc != QM_OK ? rc : f->iops->device.wrap_device(f->ictx, dev, ptr, bytes, out, st);
}

/* Host staging memory is not counted: a failed host allocation is a host-memory error, not a
 * device fault. */
static qm_code f_host_alloc(void *ctx, uint64_t bytes, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->device.host_alloc(f->ictx, bytes, out, st);
}

static void f_host_free(void *ctx, void *p)
{
    fault_ctx *f = ctx;
    f->iops->device.host_free(f->ictx, p);
}

static bool f_host_is_pinned(void *ctx, const void *p)
{
    fault_ctx *f = ctx;
    return f->iops->device.host_is_pinned(f->ictx, p);
}

static void f_trim(void *ctx)
{
    fault_ctx *f = ctx;
    f->iops->device.trim(f->ictx);
}

static qm_code f_device_sync(void *ctx, int dev, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->device.sync(f->ictx, dev, st);
}

static qm_code f_stream_create(void *ctx, int dev, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.create(f->ictx, dev, out, st);
}

static void f_stream_destroy(void *ctx, int dev, void *s)
{
    fault_ctx *f = ctx;
    f->iops->stream.destroy(f->ictx, dev, s);
}

static qm_code f_stream_sync(void *ctx, int dev, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.sync(f->ictx, dev, s, st);
}

static qm_code f_event_create(void *ctx, int dev, void **out, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.event_create(f->ictx, dev, out, st);
}

static void f_event_destroy(void *ctx, int dev, void *ev)
{
    fault_ctx *f = ctx;
    f->iops->stream.event_destroy(f->ictx, dev, ev);
}

static qm_code f_event_record(void *ctx, int dev, void *ev, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.event_record(f->ictx, dev, ev, s, st);
}

static qm_code f_stream_wait(void *ctx, int dev, void *s, void *ev, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.wait(f->ictx, dev, s, ev, st);
}

static qm_code f_event_sync(void *ctx, int dev, void *ev, qm_status *st)
{
    fault_ctx *f = ctx;
    return f->iops->stream.event_sync(f->ictx, dev, ev, st);
}

#define F_COPY(NAME, MEMBER)                                                                       \
    static qm_code NAME(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,   \
                        qm_status *st)                                                             \
    {                                                                                              \
        fault_ctx *f = ctx;                                                                        \
        qm_code rc = fault_tick(f, QM_FAULT_COPY, st);                                             \
        return rc != QM_OK ? rc : f->iops->stream.MEMBER(f->ictx, dev, dst, src, bytes, s, st);    \
    }
F_COPY(f_copy_h2d, copy_h2d)
F_COPY(f_copy_d2h, copy_d2h)
F_COPY(f_copy_d2d, copy_d2d)

static qm_code f_copy_peer(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                           uint64_t bytes, void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_COPY, st);
    return rc != QM_OK ? rc
                       : f->iops->stream.copy_peer(f->ictx, dst_dev, dst, src_dev, src, bytes, s, st);
}

static bool f_supports_op(void *ctx, qm_hal_op op)
{
    fault_ctx *f = ctx;
    return f->iops->kernel.supports_op(f->ictx, op);
}

/* Every op is one kernel launch point, whatever the op (new ops are counted without a change). */
static qm_code f_launch(void *ctx, int dev, qm_hal_op op, const void *params,
                        void *const bufs[QM_HAL_OP_BUFS], void *s, qm_status *st)
{
    fault_ctx *f = ctx;
    qm_code rc = fault_tick(f, QM_FAULT_LAUNCH, st);
    return rc != QM_OK ? rc : f->iops->kernel.launch(f->ictx, dev, op, params, bufs, s, st);
}

static void f_destroy(void *ctx)
{
    fault_ctx *f = ctx;
    if (!f)
        return;
    qm_hal_destroy(f->inner);
    free(f);
}

/* The shim's table: the inner table's shape, member by member (a NULL inner member stays NULL). */
#define FWD(group, member, fn) t->group.member = f->iops->group.member ? fn : NULL
static void fault_table(fault_ctx *f)
{
    qm_hal_ops *t = &f->ops;
    *t = (qm_hal_ops){.kind = QM_HAL_FAULT,
                      .abi = f->iops->abi, /* the inner table's: the shim forwards exactly
                                              the members that ABI has (hal.c's OPS) */
                      .destroy = f_destroy};
    FWD(device, count, f_count);
    FWD(device, info, f_info);
    FWD(device, peer, f_peer);
    FWD(device, buf_alloc, f_buf_alloc);
    FWD(device, buf_free, f_buf_free);
    FWD(device, wrap_host, f_wrap_host);
    FWD(device, wrap_device, f_wrap_device);
    FWD(device, host_alloc, f_host_alloc);
    FWD(device, host_free, f_host_free);
    FWD(device, host_is_pinned, f_host_is_pinned);
    FWD(device, trim, f_trim);
    FWD(device, sync, f_device_sync);
    FWD(stream, create, f_stream_create);
    FWD(stream, destroy, f_stream_destroy);
    FWD(stream, sync, f_stream_sync);
    FWD(stream, event_create, f_event_create);
    FWD(stream, event_destroy, f_event_destroy);
    FWD(stream, event_record, f_event_record);
    FWD(stream, wait, f_stream_wait);
    FWD(stream, event_sync, f_event_sync);
    FWD(stream, copy_h2d, f_copy_h2d);
    FWD(stream, copy_d2h, f_copy_d2h);
    FWD(stream, copy_d2d, f_copy_d2d);
    FWD(stream, copy_peer, f_copy_peer);
    FWD(kernel, supports_op, f_supports_op);
    FWD(kernel, launch, f_launch);
}
#undef FWD

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
    fault_table(f);
    return qm_hal_create(&f->ops, f, out, st);
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
