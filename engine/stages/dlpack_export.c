/* dlpack_export.c — DLPack export of one shard (see qmesh_dlpack.h). Zero-copy: the tensor points
 * at the shard's memory; the managed struct owns its own allocation (and the shape) and one
 * reference to the state, dropped by the deleter, so the memory lives as long as the tensor. */
#include "qmesh_dlpack.h"
#include "status_internal.h"

#include <stdlib.h>

typedef struct qm_dl_ctx {
    DLManagedTensor managed;
    int64_t shape[1];
    qm_state *state; /* a reference (qm_state_retain) */
} qm_dl_ctx;

/* May run in any thread (a consumer's garbage collector): the reference count is atomic. */
static void qm_dl_delete(DLManagedTensor *self)
{
    qm_dl_ctx *c = self ? self->manager_ctx : NULL;
    if (!c)
        return;
    qm_state_destroy(c->state);
    free(c);
}

qm_code qm_state_shard_to_dlpack(const qm_state *state, int shard, DLManagedTensor **out,
                                 qm_status *st)
{
    if (out)
        *out = NULL;
    if (!out)
        return qm_fail(st, QM_E_ARG, "dlpack: out must not be NULL");
    qm_shard_view v;
    qm_code rc = qm_state_shard_view(state, shard, &v, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "dlpack");
    if (v.length > (uint64_t)INT64_MAX)
        return qm_fail(st, QM_E_RANGE, "dlpack: shard %d has %llu amplitudes, more than int64 holds",
                       shard, (unsigned long long)v.length);
    qm_dl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return qm_fail(st, QM_E_NOMEM, "dlpack: out of host memory");
    c->shape[0] = (int64_t)v.length;
    DLTensor *t = &c->managed.dl_tensor;
    t->data = v.data;
    t->device.device_type = v.device_kind == 2 ? kDLCUDA : kDLCPU;
    t->device.device_id = v.device_kind == 2 ? v.cuda_device : 0; /* the physical GPU */
    t->ndim = 1;
    t->dtype.code = kDLComplex;
    t->dtype.bits = (uint8_t)(qm_dtype_size(v.dtype) * 8);
    t->dtype.lanes = 1;
    t->shape = c->shape;
    t->strides = NULL; /* compact */
    t->byte_offset = 0;
    c->state = qm_state_retain(state);
    c->managed.manager_ctx = c;
    c->managed.deleter = qm_dl_delete;
    *out = &c->managed;
    return QM_OK;
}
