/* hal_impl.h — what a backend implements. The engine never includes this file.
 *
 * A backend fills a qm_hal_ops table (C11 designated initializers, an explicit kind, the ABI number
 * it was written against) and calls qm_hal_create with its context. The wrappers in hal.c have
 * already checked device indices, NULL arguments and buffer bounds before any member is called, so
 * members only do the work. Every member reports failure through st with a message that names the
 * operation's own details; the wrapper prefixes "<op> on <device id>".
 *
 * The table is grouped by concern, as the engine's headers are: `device` (hal_device.h: device
 * info, buffers, host memory, trim), `stream` (hal_stream.h: streams, events, copies) and `kernel`
 * (hal_ops.h: two members for every kernel, present and future). Nested structs rather than one
 * flat list, so that a shim or a test can take or replace one concern whole (the fault shim copies
 * `device` and `stream` member by member, the ABI test stubs `kernel`), and so that a member's
 * group is visible at every call site (hal->ops->stream.copy_h2d). Kernels are op ids passed to
 * one launch member: a new encoding adds an op id and a parameter block (hal_ops.h), never a
 * member, so the table stays the same size however many encodings come.
 *
 * ABI: the number only grows; members are only ever appended at the end of a group's struct, and
 * each one appended after ABI 5 gets its `since` number in hal.c (OPS), which calls it only for
 * tables written against an ABI that has it and otherwise takes its documented fallback.
 * ABI 5 is this layout (the grouped table with op ids). Tables written against ABI 1 to 4 (the flat
 * table with one member per kernel) are refused by qm_hal_create with E-INTERNAL naming the ABI:
 * their layout differs, not just their length, and every backend is in-tree, so there is no
 * out-of-tree table to keep alive; ABI 0 and numbers above QM_HAL_ABI are refused likewise.
 */
#ifndef QM_HAL_IMPL_H
#define QM_HAL_IMPL_H

#include "hal.h"

#define QM_HAL_ABI 7     /* the newest ABI this build knows; 6: device.wrap_device; 7: device.sync */
#define QM_HAL_ABI_MIN 5 /* the oldest table layout it accepts: 5, the grouped table with op ids
                            (1: flat table; 2: events, host memory, amp_batch; 3: trim;
                            4: sumsq_dev) */

/* Devices, buffers and host memory (hal_device.h). */
typedef struct qm_hal_device_ops {
    /* Required. Cannot fail. Device count fixed for the backend's lifetime. */
    int (*count)(void *ctx);
    /* Required. Blocking, thread-safe. Leaves *out unspecified on failure. */
    qm_code (*info)(void *ctx, int dev, qm_hal_device_info *out, qm_status *st);
    /* Required. Whether dev_a reaches dev_b directly. Cannot fail. */
    bool (*peer)(void *ctx, int dev_a, int dev_b);
    /* Required. Blocking. bytes > 0 and within usable capacity (the wrapper checked). On success
     * *ptr is the backend pointer (may be NULL for phantom memory) and *host_ptr the host-visible
     * address or NULL. A failure allocates nothing. */
    qm_code (*buf_alloc)(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                         qm_status *st);
    /* Required. Blocking; cannot fail (errors are swallowed after the memory is released). */
    void (*buf_free)(void *ctx, int dev, void *ptr, uint64_t bytes);
    /* Optional (NULL: qm_hal_buf_wrap_host answers E-UNSUPPORTED). The backend pointer under which
     * kernels read caller-owned host memory [ptr, ptr + bytes) in place. Cannot allocate. */
    qm_code (*wrap_host)(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                         qm_status *st);
    /* Optional, all three or none (NULL: malloc/free; every pointer counts as pinned). */
    qm_code (*host_alloc)(void *ctx, uint64_t bytes, void **out, qm_status *st);
    void (*host_free)(void *ctx, void *p);
    bool (*host_is_pinned)(void *ctx, const void *p);
    /* Optional (NULL: the backend keeps nothing). Gives device memory that buf_free kept for reuse
     * back to the driver. Blocking; cannot fail. */
    void (*trim)(void *ctx);
    /* ABI 6. Optional (NULL: qm_hal_buf_wrap_device answers E-UNSUPPORTED). The backend pointer
     * under which dev's kernels read caller-owned memory [ptr, ptr + bytes) that lives in this
     * device's memory (CUDA: device or managed memory of the device's GPU; the simulator: its
     * device memory is host memory). E-UNSUPPORTED (naming where the memory is) when dev cannot
     * read it in place. Cannot allocate. */
    qm_code (*wrap_device)(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                           qm_status *st);
    /* ABI 7. Optional (NULL: the backend's work is synchronous, so nothing can still be running).
     * Blocks until every piece of work on dev's hardware has finished, whoever enqueued it (CUDA:
     * cudaDeviceSynchronize on the device's GPU, as cudaFree would), so that memory which a
     * consumer outside qmesh may still have been reading (an exported tensor's) can be written
     * again. */
    qm_code (*sync)(void *ctx, int dev, qm_status *st);
} qm_hal_device_ops;

/* Streams, events and copies (hal_stream.h). */
typedef struct qm_hal_stream_ops {
    /* Optional, all three or none (NULL: the wrapper hands out NULL streams; work is blocking). */
    qm_code (*create)(void *ctx, int dev, void **out, qm_status *st);
    void (*destroy)(void *ctx, int dev, void *s);
    qm_code (*sync)(void *ctx, int dev, void *s, qm_status *st);
    /* Optional, all five or none (NULL: events are no-ops, the backend being synchronous). An event
     * belongs to one device; record and wait take that device's stream (NULL: the default). */
    qm_code (*event_create)(void *ctx, int dev, void **out, qm_status *st);
    void (*event_destroy)(void *ctx, int dev, void *ev);
    qm_code (*event_record)(void *ctx, int dev, void *ev, void *s, qm_status *st);
    qm_code (*wait)(void *ctx, int dev, void *s, void *ev, qm_status *st);
    qm_code (*event_sync)(void *ctx, int dev, void *ev, qm_status *st);
    /* Required. Enqueued on s (NULL: blocking). Pointers are the backend pointers of the buffers,
     * already offset. A failure leaves the destination bytes unspecified. copy_d2d is a copy
     * within one device. */
    qm_code (*copy_h2d)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    qm_code (*copy_d2h)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    qm_code (*copy_d2d)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    /* Optional (NULL: staged through host memory by the wrapper). Only called when peer() says the
     * devices are connected. */
    qm_code (*copy_peer)(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                         uint64_t bytes, void *s, qm_status *st);
} qm_hal_stream_ops;

/* Kernels as ops (hal_ops.h). */
typedef struct qm_hal_kernel_ops {
    /* Required. Whether launch implements op (any id, known to this build or not). Cannot fail. */
    bool (*supports_op)(void *ctx, qm_hal_op op);
    /* Required. Run op on device dev: `params` points to the op's parameter block (hal_ops.h),
     * `bufs` holds the backend pointers of its buffers by role (QM_HAL_OP_BUF_*; NULL where the op
     * has none). Called only for an op supports_op accepted, after the wrapper checked every
     * range. Enqueued ops run on s (NULL: blocking); blocking ops get s = NULL. E-UNSUPPORTED is a
     * valid answer (e.g. for phantom memory). */
    qm_code (*launch)(void *ctx, int dev, qm_hal_op op, const void *params,
                      void *const bufs[QM_HAL_OP_BUFS], void *s, qm_status *st);
} qm_hal_kernel_ops;

typedef struct qm_hal_ops {
    qm_hal_kind kind;
    int abi; /* the ABI the table was written against, as a literal (not QM_HAL_ABI, which grows
                with the header): hal.c refuses a layout it does not know and calls a member
                appended after ABI 5 only when abi has it */
    /* Required. Frees ctx. */
    void (*destroy)(void *ctx);
    qm_hal_device_ops device;
    qm_hal_stream_ops stream;
    qm_hal_kernel_ops kernel;
} qm_hal_ops;

/* Whether op is one of the amplitude-encoding ops (QM_HAL_OP_AMP_*), for supports_op of backends
 * that implement the whole family. Cannot fail. */
bool qm_hal_op_is_amplitude(qm_hal_op op);

/* Create the wrapper object around a backend. On failure, ops->destroy(ctx) has been called. The
 * table must outlive the object (a static table, or one kept in ctx). */
qm_code qm_hal_create(const qm_hal_ops *ops, void *ctx, qm_hal **out, qm_status *st);
/* Host memory for a large buffer of a backend: from 2 MiB up, 2 MiB-aligned (the size rounded up
 * to whole 2 MiB) and advised to use transparent huge pages (MADV_HUGEPAGE), so that touching it
 * takes one page fault per 2 MiB instead of one per 4 KiB; smaller, 64-byte aligned. The pages
 * are not touched here (the first writer places them). Freed with free(); NULL when out of
 * memory. */
void *qm_hal_big_alloc(size_t bytes);

/* For shims that wrap another HAL object: its ops table and backend context. */
const qm_hal_ops *qm_hal_ops_get(const qm_hal *hal);
void *qm_hal_ctx(const qm_hal *hal);

#endif
