/* nccl_comm.h — NCCL communicators over the devices of a CUDA HAL: device-resident collectives and
 * a device-to-device gather (docs/comm.md, section "NCCL").
 *
 * Two kinds of communicator:
 *   - local: one process drives every device of a CUDA qm_hal (ncclCommInitAll over their GPUs);
 *     the comm's i-th device is HAL device i.
 *   - rank:  one device per rank of a qm_comm (engine/comm.h): rank 0 makes the NCCL unique id and
 *     broadcasts it with qm_comm_broadcast; every rank calls ncclCommInitRank on its own device.
 *     Every function on a rank communicator is a collective of the qm_comm as well: every rank
 *     enters it, in the same order, with the same sizes and root, and every rank returns the same
 *     code and message (qm_comm_verdict), so a rank that fails an argument check or an allocation
 *     does not leave the others waiting inside NCCL. A failure inside NCCL itself on one rank only
 *     (a lost GPU, a broken link) can still leave its peers blocked: NCCL has no portable recovery.
 * NCCL refuses two ranks or devices on one GPU. Both opens detect that up front and fail with
 * E-UNSUPPORTED naming the two devices (local) or ranks (rank) that share a GPU, so the logical
 * devices of qm_hal_cuda_open_logical (several per GPU) cannot be used here.
 * The environment: NCCL_NVLS_ENABLE is set to 0 before any NCCL call, overriding the user's value.
 *
 * Every fallible function follows the project's convention (docs/api.md): a qm_code, qm_status *st last (may be NULL); NCCL and
 * CUDA errors are E-BACKEND naming the operation, the device(s) and NCCL's error string. A build
 * without NCCL (QM_WITH_NCCL=OFF) has the same functions answering E-UNSUPPORTED.
 * Retained: the HAL (and for a rank communicator the qm_comm) must outlive the communicator.
 * Thread-safety: one communicator is used by one thread at a time; its calls set the calling
 * thread's current CUDA device. Data moved here is not counted in qm_hal_usage (it bypasses the
 * HAL's copies), but scratch buffers go through qm_hal_buf_alloc and so count against capacity.
 */
#ifndef QM_NCCL_COMM_H
#define QM_NCCL_COMM_H

#include "comm.h"
#include "hal.h"

#include <stdint.h>

typedef struct qm_nccl qm_nccl;

/* The largest piece one ncclSend/ncclRecv moves (bytes); larger parts go in several pieces. */
#define QM_NCCL_CHUNK_MAX_BYTES ((uint64_t)1 << 31)

/* One communicator over all devices of a CUDA HAL (qm_hal_kind_get(hal) == QM_HAL_CUDA, else
 * E-UNSUPPORTED), in HAL device order. E-UNSUPPORTED when two devices share a GPU. */
qm_code qm_nccl_open_local(qm_hal *hal, qm_nccl **out, qm_status *st);
/* This rank's communicator across the ranks of comm, on HAL device dev. Collective over comm.
 * E-UNSUPPORTED (on every rank) when two ranks of one host use the same GPU. Argument errors (NULL,
 * dev out of range, a HAL that is not CUDA) are reported at once without entering the collective,
 * like comm.h's argument errors. */
qm_code qm_nccl_open_rank(qm_hal *hal, int dev, qm_comm *comm, qm_nccl **out, qm_status *st);
/* NULL is a no-op. Cannot fail. Destroys every NCCL comm and stream it holds. Rank: NCCL's destroy
 * waits for the other ranks of the same host to destroy theirs, so every rank closes. */
void qm_nccl_close(qm_nccl *c);
/* Devices (local) or ranks (rank) in the communicator; 0 for NULL. */
int qm_nccl_size(const qm_nccl *c);

/* Test hook: lower the piece size of the gather (1..QM_NCCL_CHUNK_MAX_BYTES) so tests exercise the
 * chunking with small buffers. A rank communicator needs the same value on every rank. E-ARG
 * outside that range. */
qm_code qm_nccl_set_chunk_limit(qm_nccl *c, uint64_t bytes, qm_status *st);

/* Every device contributes the first `count` float64 values of its buffer; host `out`
 * (size * count values) receives them in device (rank) order. Local: bufs[i] lives on the comm's
 * i-th device (size entries). Rank: bufs[0] is this rank's buffer (one entry). Blocking. An
 * all-gather into device scratch (size * count values on each device, through qm_hal_buf_alloc),
 * then one copy to the host: no arithmetic, so the result is exact. E-BOUNDS (before any NCCL call)
 * when a buffer holds fewer than count values. */
qm_code qm_nccl_allgather_f64_sync(qm_nccl *c, const qm_hal_buf *const *bufs, uint64_t count,
                                   double *out, qm_status *st);

/* Device-to-device gather to device (rank) `root`: device i's first bytes[i] bytes of srcs[i]
 * land in dst one after another from dst_off, in device (rank) order. bytes has size entries.
 * Local: srcs has size entries (srcs[i] on the comm's i-th device), dst lives on device root.
 * Rank: srcs[0] is this rank's source; every rank passes the same bytes[] and root; dst is used on
 * the root only (may be NULL elsewhere). ncclSend/ncclRecv of bytes in one group, pieces of at most
 * the chunk limit; the root copies its own part with cudaMemcpyAsync. Blocking. E-BOUNDS (before
 * any NCCL call) when a source is shorter than its bytes[i] or dst has no room; E-ARG when a buffer
 * is on the wrong device. Overlapping sources and destination are not checked. */
qm_code qm_nccl_gather_sync(qm_nccl *c, qm_hal_buf *dst, uint64_t dst_off,
                            const qm_hal_buf *const *srcs, const uint64_t *bytes, int root,
                            qm_status *st);

#endif
