/* hal.h — the hardware abstraction layer as the engine sees it.
 *
 * Role: one interface over every backend (hal/sim: CPU-simulated mesh; hal/cuda: real GPUs;
 * hal/fault: a shim that fails the k-th call of any backend). The engine calls only these qm_hal_*
 * wrappers; they check device indices and buffer bounds, supply the fallbacks of optional ops, keep
 * per-device capacity accounting (in use, peak) and put the operation and device in front of backend
 * messages. Backends implement hal_impl.h, which the engine never includes.
 *
 * Devices are numbered 0..count-1 inside one qm_hal; their ids ("n0.g3") come with qm_hal_device_info.
 * Ownership: qm_hal_destroy frees the backend; every buffer and stream must be freed first
 * (qm_hal_bytes_in_use reports what is still held, so tests assert zero before destroying).
 */
#ifndef QM_HAL_H
#define QM_HAL_H

#include "qmesh.h"

#include <stdbool.h>

typedef struct qm_hal qm_hal;
typedef struct qm_hal_buf qm_hal_buf;
typedef struct qm_hal_stream qm_hal_stream;
typedef struct qm_hal_event qm_hal_event;

typedef enum qm_hal_kind {
    QM_HAL_SIM = 1,   /* CPU-simulated mesh */
    QM_HAL_CUDA = 2,  /* real NVIDIA GPUs */
    QM_HAL_FAULT = 3, /* fault-injection shim over another backend */
} qm_hal_kind;

#define QM_HAL_ID_BYTES 64
#define QM_HAL_NAME_BYTES 96

/* Where a device's memory lives: what a consumer of a buffer (DLPack, a copy) must know. */
typedef enum qm_hal_memory {
    QM_HAL_MEMORY_HOST = 0, /* host memory (the simulator; phantom buffers have none) */
    QM_HAL_MEMORY_CUDA = 1, /* CUDA device memory of GPU cuda_ordinal */
} qm_hal_memory;

typedef struct qm_hal_device_info {
    char id[QM_HAL_ID_BYTES];       /* scenario id ("n0.g3") or "cuda:0" */
    char name[QM_HAL_NAME_BYTES];   /* model ("NVIDIA H200", "sim h200-sxm") */
    uint64_t memory_bytes;          /* total device memory */
    uint64_t usable_bytes;          /* memory - reserve: what allocations may take */
    double hbm_bw_bytes_per_s;      /* device memory bandwidth (0 when unknown) */
    double host_bw_bytes_per_s;     /* host<->device link, per direction (0 when unknown) */
    int numa;                       /* host NUMA node, -1 when unknown */
    int sm_count;                   /* 0 when unknown or not a GPU */
    qm_hal_memory memory;           /* where this device's buffers live (QM_HAL_MEMORY_HOST = 0 for
                                       the simulator; a wrapping shim reports its inner backend's) */
    int cuda_ordinal;               /* the physical GPU (cudaSetDevice ordinal) behind this device,
                                       which differs from the device index when several logical
                                       devices share a GPU or an MPI rank starts at another GPU;
                                       meaningful only for QM_HAL_MEMORY_CUDA */
} qm_hal_device_info;

/* Per-device accounting kept by the wrappers (all backends alike). */
typedef struct qm_hal_usage {
    uint64_t in_use_bytes, peak_bytes;
    uint64_t n_allocs, n_frees;
    uint64_t h2d_bytes, d2h_bytes, d2d_bytes, peer_out_bytes, peer_in_bytes;
} qm_hal_usage;

/* --- lifetime and queries ------------------------------------------------------------------- */
void qm_hal_destroy(qm_hal *hal);            /* NULL is a no-op; frees leaked buffers' tracking */
qm_hal_kind qm_hal_kind_get(const qm_hal *hal);
const char *qm_hal_kind_name(qm_hal_kind kind); /* "sim", "cuda", "fault" */
int qm_hal_device_count(const qm_hal *hal);
qm_code qm_hal_device_info_query(const qm_hal *hal, int dev, qm_hal_device_info *out, qm_status *st);
qm_code qm_hal_usage_query(const qm_hal *hal, int dev, qm_hal_usage *out, qm_status *st);
/* Sum of in_use_bytes over all devices (0 after every buffer is freed). Cannot fail. */
uint64_t qm_hal_bytes_in_use(const qm_hal *hal);
/* Whether dev_a can copy to dev_b directly (peer access / a simulated path). Cannot fail. */
bool qm_hal_peer_get(const qm_hal *hal, int dev_a, int dev_b);

/* --- buffers ---------------------------------------------------------------------------------- */
/* Allocate `bytes` (> 0) on dev. E-CAPACITY (naming device, request, in use and usable) when it
 * would exceed usable capacity; nothing is allocated on failure and *out is NULL. */
qm_code qm_hal_buf_alloc(qm_hal *hal, int dev, uint64_t bytes, qm_hal_buf **out, qm_status *st);
void qm_hal_buf_free(qm_hal *hal, qm_hal_buf *buf); /* NULL is a no-op; cannot fail */
uint64_t qm_hal_buf_bytes(const qm_hal_buf *buf);
int qm_hal_buf_device(const qm_hal_buf *buf);
/* A buffer over caller-owned host memory that the device's kernels can read in place (the
 * simulated backend: its device memory is host memory). Not counted against capacity; freeing it
 * releases the wrapper, never the memory. E-UNSUPPORTED on backends that cannot (then stream the
 * data through a staging buffer instead). */
qm_code qm_hal_buf_wrap_host(qm_hal *hal, int dev, const void *ptr, uint64_t bytes, qm_hal_buf **out,
                             qm_status *st);
/* Host-addressable pointer to the buffer's bytes: sim materialized only; NULL for device memory
 * and phantom buffers. Valid until the buffer is freed. */
void *qm_hal_buf_host_ptr(const qm_hal_buf *buf);
/* The backend pointer (a device pointer on CUDA); NULL for phantom buffers. */
void *qm_hal_buf_raw(const qm_hal_buf *buf);

/* --- streams (sim: synchronous; stream may be NULL everywhere = the device's default, blocking) - */
qm_code qm_hal_stream_create(qm_hal *hal, int dev, qm_hal_stream **out, qm_status *st);
void qm_hal_stream_destroy(qm_hal *hal, qm_hal_stream *s);
qm_code qm_hal_stream_sync(qm_hal *hal, qm_hal_stream *s, qm_status *st);

/* --- events: order work between streams of one device (backends without events: no-ops, since
 * their work is synchronous). An event is recorded on a stream; a stream told to wait for it starts
 * its later work only once the work enqueued before the record has finished. ------------------- */
qm_code qm_hal_event_create(qm_hal *hal, int dev, qm_hal_event **out, qm_status *st);
void qm_hal_event_destroy(qm_hal *hal, qm_hal_event *ev); /* NULL is a no-op */
qm_code qm_hal_event_record(qm_hal *hal, qm_hal_event *ev, qm_hal_stream *s, qm_status *st);
qm_code qm_hal_stream_wait(qm_hal *hal, qm_hal_stream *s, qm_hal_event *ev, qm_status *st);
/* Block the host until the work before the event's last record has finished. */
qm_code qm_hal_event_sync(qm_hal *hal, qm_hal_event *ev, qm_status *st);

/* --- host staging memory: page-locked on backends whose copies run faster from it (CUDA), plain
 * malloc elsewhere. Not counted against any device. ------------------------------------------- */
qm_code qm_hal_host_alloc(qm_hal *hal, uint64_t bytes, void **out, qm_status *st);
void qm_hal_host_free(qm_hal *hal, void *p); /* NULL is a no-op */
/* Whether copies read host memory at p directly at full speed (page-locked memory on CUDA; always
 * true on backends without such a distinction). Cannot fail. */
bool qm_hal_host_is_pinned(const qm_hal *hal, const void *p);

/* --- copies: destination before source; offsets and sizes in bytes, bounds-checked ------------ */
qm_code qm_hal_copy_h2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const void *src,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st);
qm_code qm_hal_copy_d2h(qm_hal *hal, void *dst, const qm_hal_buf *src, uint64_t src_off,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st);
/* Same device, or different devices: direct when qm_hal_peer_get says so, else staged through a
 * host bounce buffer (two copies, counted as d2h + h2d). */
qm_code qm_hal_copy_d2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const qm_hal_buf *src,
                        uint64_t src_off, uint64_t bytes, qm_hal_stream *s, qm_status *st);

/* --- kernels (the encode maths of kernels/qm_math.h, run where the buffer lives) --------------
 * Amplitude encoding runs in place in the state buffer, so a device needs the state plus a small
 * staging buffer: (1) `stash` converts a staged input chunk to float64 and parks each value in its
 * amplitude slot (complex128: re = x, im = 0; complex64: the slot's 8 bytes hold the double);
 * (2) `sumsq` sums squares of stashed values as fixed pairwise trees; (3) `scan` finds the largest
 * magnitude and the first NaN/Inf (slow path only); (4) `amp_scale` turns each stashed value into
 * its amplitude ((x * scale) * coeff) in place and writes zeros into padding slots.
 * Indices are amplitude slots of the state buffer; the global index of slot i is g0 + i, and a
 * slot holds data when (g0 + i) mod period < period_valid (period = 2^qubits amplitudes per state,
 * period_valid = input features), else it is padding. */

/* Stash n input values into their slots. Input element e (a global index into the row-major
 * batch x period_valid input) belongs to state e / period_valid at local index e % period_valid,
 * i.e. global slot (e / period_valid) * period + e % period_valid; `out` holds the slots from global
 * index slot_g0 on. Values come from `in` (a staging buffer of in_dtype float32|float64) from element
 * in_off on, the first being input element in_first. Enqueued on s. */
typedef struct qm_hal_stash_args {
    qm_hal_buf *out;
    qm_dtype out_dtype;
    uint64_t slot_g0;
    uint64_t period, period_valid;
    const qm_hal_buf *in;
    qm_dtype in_dtype;
    uint64_t in_off;
    uint64_t in_first;
    uint64_t n;
} qm_hal_stash_args;
qm_code qm_hal_stash(qm_hal *hal, const qm_hal_stash_args *a, qm_hal_stream *s, qm_status *st);

/* Block sums over slots [off, off + n_blocks * 2^log2_block) of `state`: block j's tree sum of
 * (scale * x)^2 over its data slots (padding counts as +0) goes to out_sums[j] (host array).
 * Blocks never straddle states (2^log2_block divides period; g0 is block-aligned). The values are
 * the stash in `state`, or, when `input` is set, read in place from an input buffer whose element
 * 0 is input element in_first (then `state` is not read). Blocking. */
typedef struct qm_hal_sumsq_args {
    const qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off;          /* first slot */
    uint64_t g0;           /* global index of slot `off` */
    uint64_t period, period_valid;
    unsigned log2_block;   /* <= 62 */
    uint64_t n_blocks;
    double scale;          /* 1 on the fast path; a power of two on the rescaled retry */
    double *out_sums;
    const qm_hal_buf *input; /* NULL: the stash */
    qm_dtype in_dtype;
    uint64_t in_first;
} qm_hal_sumsq_args;
qm_code qm_hal_sumsq_sync(qm_hal *hal, const qm_hal_sumsq_args *a, qm_status *st);
/* The same enqueued on s, the block sums going to doubles [out_off, out_off + n_blocks) of the
 * device buffer `out` (on the same device as the state or input); a->out_sums is not used. So
 * the sums of several devices run at once: enqueue each, copy the sums back (qm_hal_copy_d2h on
 * the same stream), then wait. */
qm_code qm_hal_sumsq(qm_hal *hal, const qm_hal_sumsq_args *a, qm_hal_buf *out, uint64_t out_off,
                     qm_hal_stream *s, qm_status *st);

/* Scan stashed data slots [off, off + n) (all data: the caller passes data ranges only): the
 * largest |x| and the first slot (relative to off) holding NaN or Inf (UINT64_MAX when none). */
typedef struct qm_hal_scan_result {
    double max_abs;
    uint64_t first_nonfinite;
} qm_hal_scan_result;
qm_code qm_hal_scan_sync(qm_hal *hal, const qm_hal_buf *state, qm_dtype state_dtype, uint64_t off,
                         uint64_t n, qm_hal_scan_result *out, qm_status *st);

/* Over slots [off, off + n): data slots become ((x * scales[k]) * coeffs[k], 0) in state_dtype
 * (qm_amp_scaled of qm_math.h), where k = (g0 + i) / period - first_state indexes `coeffs` and
 * `scales` (one each per state); padding slots become (0, 0). scales (optional, NULL: every scale
 * is 1, and the amplitude is x * coeffs[k] bit for bit) holds the slow path's powers of two, kept
 * apart from the coefficients because scale / norm may not be representable. x is the slot's
 * stash (in place), or, when `input` is set, the value read from an input buffer whose element 0
 * is input element in_first. coeffs and scales are host arrays. Enqueued on s (they are copied
 * before return). */
typedef struct qm_hal_amp_scale_args {
    qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;
    uint64_t g0;
    uint64_t period, period_valid;
    uint64_t first_state;  /* state index of coeffs[0] */
    uint64_t n_coeffs;
    const double *coeffs;
    const qm_hal_buf *input; /* NULL: the stash */
    qm_dtype in_dtype;
    uint64_t in_first;
    const double *scales;  /* NULL: all 1; else n_coeffs powers of two, state first_state first */
} qm_hal_amp_scale_args;
qm_code qm_hal_amp_scale(qm_hal *hal, const qm_hal_amp_scale_args *a, qm_hal_stream *s,
                         qm_status *st);

/* Fused encode of whole small states (period <= 2^QM_RED_LOG2_BLOCK), each read once: state k
 * (k < n_states) occupies slots [off + k * period, off + (k + 1) * period) of `state` and its
 * period_valid values are input elements [in_off + k * period_valid, ...) of `input` (same device).
 * For each state: its tree sum of squares (scale 1; qm_tree_sumsq over the whole state) goes to
 * element sums_off + k of `sums` (a float64 device buffer); when that sum is finite and at least
 * QM_FAST_SUM_MIN the state's slots become its amplitudes, x * (1 / sqrt(sum)) with zero padding
 * (exactly what amp_scale writes with that coefficient), otherwise its values are stashed (exactly
 * what stash writes) for the slow path. Enqueued on s. */
typedef struct qm_hal_amp_batch_args {
    qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off;
    uint64_t period, period_valid;
    uint64_t n_states;
    const qm_hal_buf *input;
    qm_dtype in_dtype;
    uint64_t in_off;
    qm_hal_buf *sums;
    uint64_t sums_off;
} qm_hal_amp_batch_args;
qm_code qm_hal_amp_batch(qm_hal *hal, const qm_hal_amp_batch_args *a, qm_hal_stream *s,
                         qm_status *st);
/* Whether the backend has the fused batch kernel (else qm_hal_amp_batch answers E-UNSUPPORTED).
 * Cannot fail. */
bool qm_hal_has_amp_batch(const qm_hal *hal);

/* --- memory kept for reuse --------------------------------------------------------------------- */
/* Backends whose allocations are slow (CUDA: cudaMalloc + cudaFree of a 16 GiB state take about
 * 40 ms) keep freed buffers and hand them out again for a request of the same size; they give
 * them back by themselves when an allocation would otherwise fail, and at qm_hal_destroy.
 * qm_hal_trim gives them back now (before another process needs the memory, or to time a cold
 * allocation). Kept buffers do not count as in use. NULL is a no-op; cannot fail. */
void qm_hal_trim(qm_hal *hal);

/* --- collectives (optional in backends; fallback: d2h of each buffer) -------------------------- */
/* Gather `count` float64 values from each of n_bufs device buffers (offset 0) into host `out`
 * (n_bufs * count values, buffer order). Blocking. */
qm_code qm_hal_allgather_f64(qm_hal *hal, int n_bufs, const qm_hal_buf *const *bufs, uint64_t count,
                             double *out, qm_status *st);

#endif
