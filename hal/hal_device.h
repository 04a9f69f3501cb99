/* hal_device.h — the HAL's devices as the engine sees them (part of hal.h; include "hal.h").
 *
 * Role: lifetime of a qm_hal, device info, bounds-checked buffers with per-device accounting (in
 * use, peak, traffic), buffers over caller-owned host memory, host staging memory (page-locked
 * where that matters), and giving kept memory back (trim).
 * In: device indices 0..count-1 of one qm_hal; sizes in bytes.
 * Out: buffers and accounting; errors as qm_code + one-line message naming the device and numbers.
 * Must not: expose any backend type (backends implement hal_impl.h, which the engine never
 * includes).
 * Ownership: qm_hal_destroy frees the backend; every buffer and stream must be freed first
 * (qm_hal_bytes_in_use reports what is still held, so tests assert zero before destroying).
 */
#ifndef QM_HAL_DEVICE_H
#define QM_HAL_DEVICE_H

#include "qmesh.h"

#include <stdbool.h>

typedef struct qm_hal qm_hal;
typedef struct qm_hal_buf qm_hal_buf;

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
/* A buffer over caller-owned memory of the device itself (a CUDA device pointer on the device's
 * GPU; on the simulator, whose device memory is host memory, any host pointer), read in place by
 * the device's kernels. Not counted against capacity; freeing it releases the wrapper, never the
 * memory. E-UNSUPPORTED when the memory is elsewhere (another GPU, host memory on CUDA) or the
 * backend cannot (then copy the data instead). */
qm_code qm_hal_buf_wrap_device(qm_hal *hal, int dev, const void *ptr, uint64_t bytes,
                               qm_hal_buf **out, qm_status *st);
/* Host-addressable pointer to the buffer's bytes: sim materialized only; NULL for device memory
 * and phantom buffers. Valid until the buffer is freed. */
void *qm_hal_buf_host_ptr(const qm_hal_buf *buf);
/* The backend pointer (a device pointer on CUDA); NULL for phantom buffers. */
void *qm_hal_buf_raw(const qm_hal_buf *buf);

/* --- host staging memory: page-locked on backends whose copies run faster from it (CUDA), plain
 * malloc elsewhere. Not counted against any device. ------------------------------------------- */
qm_code qm_hal_host_alloc(qm_hal *hal, uint64_t bytes, void **out, qm_status *st);
void qm_hal_host_free(qm_hal *hal, void *p); /* NULL is a no-op */
/* Whether copies read host memory at p directly at full speed (page-locked memory on CUDA; always
 * true on backends without such a distinction). Cannot fail. */
bool qm_hal_host_is_pinned(const qm_hal *hal, const void *p);
/* How many host staging allocations qm_hal_host_alloc made and qm_hal_host_free gave back over
 * the HAL's life (all backends alike; either pointer may be NULL). Thread-safe; cannot fail. */
void qm_hal_host_counts(const qm_hal *hal, uint64_t *allocs, uint64_t *frees);

/* --- waiting for a device ---------------------------------------------------------------------- */
/* Block until all work on dev has finished, including work enqueued outside qmesh on the same
 * hardware (CUDA: cudaDeviceSynchronize on the device's GPU); a no-op on synchronous backends.
 * Memory a consumer may have been reading (a released DLPack tensor's) is written again only
 * after this. E-ARG for a bad device; a backend's error. */
qm_code qm_hal_device_sync(qm_hal *hal, int dev, qm_status *st);

/* --- memory kept for reuse --------------------------------------------------------------------- */
/* Backends whose allocations are slow (CUDA: cudaMalloc + cudaFree of a 16 GiB state take about
 * 40 ms) keep freed buffers and hand them out again for a request of the same size; they give
 * them back by themselves when an allocation would otherwise fail, and at qm_hal_destroy.
 * qm_hal_trim gives them back now (before another process needs the memory, or to time a cold
 * allocation). Kept buffers do not count as in use. NULL is a no-op; cannot fail. */
void qm_hal_trim(qm_hal *hal);

#endif
