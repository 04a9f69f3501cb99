/* hal_impl.h — what a backend implements. The engine never includes this file.
 *
 * A backend fills a qm_hal_ops table (C11 designated initializers, an explicit kind, the ABI number
 * it was written against) and calls qm_hal_create with its context. The wrappers in hal.c have
 * already checked device indices, NULL arguments and buffer bounds before any member is called, so
 * members only do the work. Every member reports failure through st with a message that names the
 * operation's own details; the wrapper prefixes "<op> on <device id>".
 *
 * The ABI number only grows; members are only ever appended.
 */
#ifndef QM_HAL_IMPL_H
#define QM_HAL_IMPL_H

#include "hal.h"

#define QM_HAL_ABI 4 /* 2: events, host staging memory, amp_batch; 3: trim; 4: sumsq_dev */

typedef struct qm_hal_ops {
    qm_hal_kind kind;
    int abi; /* the ABI the table was written against, as a literal (not QM_HAL_ABI, which grows
                with the header): hal.c calls a member added after ABI 1 only when abi has it */

    /* Required. Cannot fail. Device count fixed for the backend's lifetime. */
    int (*device_count)(void *ctx);
    /* Required. Blocking, thread-safe. Leaves *out unspecified on failure. */
    qm_code (*device_info)(void *ctx, int dev, qm_hal_device_info *out, qm_status *st);
    /* Required. Whether dev_a reaches dev_b directly. Cannot fail. */
    bool (*peer)(void *ctx, int dev_a, int dev_b);

    /* Required. Blocking. bytes > 0 and within usable capacity (the wrapper checked). On success
     * *ptr is the backend pointer (may be NULL for phantom memory) and *host_ptr the host-visible
     * address or NULL. A failure allocates nothing. */
    qm_code (*buf_alloc)(void *ctx, int dev, uint64_t bytes, void **ptr, void **host_ptr,
                         qm_status *st);
    /* Required. Blocking; cannot fail (errors are swallowed after the memory is released). */
    void (*buf_free)(void *ctx, int dev, void *ptr, uint64_t bytes);

    /* Optional (NULL: the wrapper hands out NULL streams and syncs the device instead). */
    qm_code (*stream_create)(void *ctx, int dev, void **out, qm_status *st);
    void (*stream_destroy)(void *ctx, int dev, void *s);
    qm_code (*stream_sync)(void *ctx, int dev, void *s, qm_status *st);

    /* Required. Enqueued on s (NULL: blocking). Pointers are the backend pointers of the buffers,
     * already offset. A failure leaves the destination bytes unspecified. */
    qm_code (*copy_h2d)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    qm_code (*copy_d2h)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    /* Required: a copy within one device. */
    qm_code (*copy_d2d)(void *ctx, int dev, void *dst, const void *src, uint64_t bytes, void *s,
                        qm_status *st);
    /* Optional (NULL: staged through host memory by the wrapper). Only called when peer() says the
     * devices are connected. */
    qm_code (*copy_peer)(void *ctx, int dst_dev, void *dst, int src_dev, const void *src,
                         uint64_t bytes, void *s, qm_status *st);

    /* Required kernels (E-UNSUPPORTED is a valid answer, e.g. for phantom memory). Buffers are
     * passed as backend pointers (not offset: the args carry slot offsets). stash and amp_scale
     * are enqueued on s; sumsq and scan block. */
    qm_code (*stash)(void *ctx, int dev, void *state, const void *in, const qm_hal_stash_args *a,
                     void *s, qm_status *st);
    /* sumsq and amp_scale: `in` is the backend pointer of a->input (NULL when the stash is used). */
    qm_code (*sumsq)(void *ctx, int dev, const void *state, const void *in,
                     const qm_hal_sumsq_args *a, qm_status *st);
    qm_code (*scan)(void *ctx, int dev, const void *state, qm_dtype state_dtype, uint64_t off,
                    uint64_t n, qm_hal_scan_result *out, qm_status *st);
    qm_code (*amp_scale)(void *ctx, int dev, void *state, const void *in,
                         const qm_hal_amp_scale_args *a, void *s, qm_status *st);

    /* Optional (NULL: qm_hal_buf_wrap_host answers E-UNSUPPORTED). The backend pointer under which
     * kernels read caller-owned host memory [ptr, ptr + bytes) in place. Cannot allocate. */
    qm_code (*wrap_host)(void *ctx, int dev, const void *ptr, uint64_t bytes, void **out,
                         qm_status *st);

    /* Optional (NULL: d2h of each buffer). */
    qm_code (*allgather_f64)(void *ctx, int n_bufs, const qm_hal_buf *const *bufs, uint64_t count,
                             double *out, qm_status *st);

    /* Required. Frees ctx. */
    void (*destroy)(void *ctx);

    /* ABI 2 */
    /* Optional (NULL: events are no-ops, the backend being synchronous). An event belongs to one
     * device; record and wait take that device's stream (NULL: the default stream). */
    qm_code (*event_create)(void *ctx, int dev, void **out, qm_status *st);
    void (*event_destroy)(void *ctx, int dev, void *ev);
    qm_code (*event_record)(void *ctx, int dev, void *ev, void *s, qm_status *st);
    qm_code (*stream_wait)(void *ctx, int dev, void *s, void *ev, qm_status *st);
    qm_code (*event_sync)(void *ctx, int dev, void *ev, qm_status *st);

    /* Optional (NULL: malloc/free; every pointer counts as pinned). */
    qm_code (*host_alloc)(void *ctx, uint64_t bytes, void **out, qm_status *st);
    void (*host_free)(void *ctx, void *p);
    bool (*host_is_pinned)(void *ctx, const void *p);

    /* Optional (NULL: the wrapper answers E-UNSUPPORTED and the engine stashes instead). Buffers
     * as backend pointers, not offset. Enqueued on s. */
    qm_code (*amp_batch)(void *ctx, int dev, void *state, const void *in, void *sums,
                         const qm_hal_amp_batch_args *a, void *s, qm_status *st);

    /* ABI 3 */
    /* Optional (NULL: the backend keeps nothing). Gives device memory that buf_free kept for reuse
     * back to the driver. Blocking; cannot fail. */
    void (*trim)(void *ctx);

    /* ABI 4 */
    /* Required from ABI 4 on. sumsq with the block sums written to device memory at `out` (a
     * backend pointer, already offset), enqueued on s; a->out_sums is not used. */
    qm_code (*sumsq_dev)(void *ctx, int dev, const void *state, const void *in,
                         const qm_hal_sumsq_args *a, void *out, void *s, qm_status *st);
} qm_hal_ops;

/* Create the wrapper object around a backend. On failure, ops->destroy(ctx) has been called. */
qm_code qm_hal_create(const qm_hal_ops *ops, void *ctx, qm_hal **out, qm_status *st);
/* For shims that wrap another HAL object: its ops table and backend context. */
const qm_hal_ops *qm_hal_ops_get(const qm_hal *hal);
void *qm_hal_ctx(const qm_hal *hal);
/* The wrappers' fallback for a missing allgather_f64 (one d2h copy per buffer), for shims. */
qm_code qm_hal_allgather_fallback(const qm_hal_ops *ops, void *ctx, int n_bufs,
                                  const qm_hal_buf *const *bufs, uint64_t count, double *out,
                                  qm_status *st);

#endif
