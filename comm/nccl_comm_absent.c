/* nccl_comm_absent.c — nccl_comm.h in a build without NCCL (QM_WITH_NCCL=OFF, or CUDA or NCCL not
 * found at configure time): every fallible function answers E-UNSUPPORTED naming the configure
 * option, after clearing its output as the real one does; close and size are trivial.
 */
#include "nccl_comm.h"
#include "status_internal.h"

#include <stddef.h>

static qm_code nccl_absent(qm_status *st)
{
    return qm_fail(st, QM_E_UNSUPPORTED,
                   "nccl: this build has no NCCL (configure with QM_WITH_NCCL=ON and the NCCL "
                   "library)");
}

qm_code qm_nccl_open_local(qm_hal *hal, qm_nccl **out, qm_status *st)
{
    (void)hal;
    if (out)
        *out = NULL;
    return nccl_absent(st);
}

qm_code qm_nccl_open_rank(qm_hal *hal, int dev, qm_comm *comm, qm_nccl **out, qm_status *st)
{
    (void)hal;
    (void)dev;
    (void)comm;
    if (out)
        *out = NULL;
    return nccl_absent(st);
}

void qm_nccl_close(qm_nccl *c) { (void)c; }

int qm_nccl_size(const qm_nccl *c)
{
    (void)c;
    return 0;
}

qm_code qm_nccl_set_chunk_limit(qm_nccl *c, uint64_t bytes, qm_status *st)
{
    (void)c;
    (void)bytes;
    return nccl_absent(st);
}

qm_code qm_nccl_allgather_f64_sync(qm_nccl *c, const qm_hal_buf *const *bufs, uint64_t count,
                                   double *out, qm_status *st)
{
    (void)c;
    (void)bufs;
    (void)count;
    (void)out;
    return nccl_absent(st);
}

qm_code qm_nccl_gather_sync(qm_nccl *c, qm_hal_buf *dst, uint64_t dst_off,
                            const qm_hal_buf *const *srcs, const uint64_t *bytes, int root,
                            qm_status *st)
{
    (void)c;
    (void)dst;
    (void)dst_off;
    (void)srcs;
    (void)bytes;
    (void)root;
    return nccl_absent(st);
}
