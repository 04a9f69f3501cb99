/* reuse.h — memory that every encode of a context needs again, kept for the context's life
 * instead of being allocated and freed per encode.
 *
 * Role: one object per context (engine/pipeline/api.c creates it at the first encode and destroys
 * it when the context goes): the ingest pipes (ingest.h: per device two streams, events, a device
 * staging buffer of two halves; the page-locked host ring they share), page-locked host scratch
 * by slot and device scratch and streams by shard (grown, never shrunk), and a bounded pool of
 * state buffers: when a state made by the context is destroyed, its shard buffers are kept (at most QM_REUSE_KEPT_PER_DEVICE per device)
 * and handed to the next encode's shard of the same device and byte size, after a device sync.
 * In: the context's HAL; sizes in bytes; buffers of states the context made.
 * Out: buffers and pipes that outlive one encode; counters of what was kept and reused.
 * Must not: hand out a kept state buffer before the device has finished all work on it (work
 * enqueued by a consumer of an exported tensor included: qm_hal_device_sync first), keep more
 * than the bound, or outlive its HAL (destroy it before the backend).
 * Thread-safety: the state pool has a mutex (a state, hence its buffers, may be released on any
 * thread, e.g. by a DLPack deleter); the pipes and host slots are used by the one thread that
 * encodes on the context at a time (the public API's rule).
 */
#ifndef QM_REUSE_H
#define QM_REUSE_H

#include "hal.h"
#include "ingest.h"

/* State buffers kept per device: two states' worth of one shard each, so that a loop which still
 * holds batch k while batch k+1 is encoded (a prefetching stream, a training step) allocates
 * nothing after its first two batches. */
#define QM_REUSE_KEPT_PER_DEVICE 2

typedef struct qm_reuse qm_reuse;

/* Page-locked host scratch that materialize needs per encode. */
typedef enum qm_reuse_host_slot {
    QM_REUSE_HOST_FUSED_SUMS = 0, /* the fused shards' per-state sums */
    QM_REUSE_HOST_BLOCK_SUMS = 1, /* the block sums of the other shards */
    QM_REUSE_HOST_SLOTS
} qm_reuse_host_slot;

/* Device scratch that materialize needs per encode, one per shard index. */
typedef enum qm_reuse_dev_slot {
    QM_REUSE_DEV_BATCH_SUMS = 0, /* batch_in_place: the states' sums of a shard read in place */
    QM_REUSE_DEV_BLOCK_SUMS = 1, /* sum_shards: a shard's block sums */
    QM_REUSE_DEV_SLOTS
} qm_reuse_dev_slot;

/* What a reuse cache holds and did (tests, reports). */
typedef struct qm_reuse_stats {
    int kept_bufs;            /* state buffers kept now */
    uint64_t kept_bytes;      /* their bytes */
    uint64_t reused;          /* state buffers handed out again since creation */
    uint64_t released;        /* state buffers freed for real (pool full, another size, close) */
    int pipes;                /* ingest pipes open */
    uint64_t half_bytes_max;  /* their largest staging half */
} qm_reuse_stats;

qm_code qm_reuse_create(qm_hal *hal, qm_reuse **out, qm_status *st);
/* Free everything kept (pipes, host slots, state buffers). Every state whose buffers come back
 * here must be gone (a state holds a reference on its context, which owns this). NULL: no-op. */
void qm_reuse_destroy(qm_reuse *r);

/* The kept ingest pipes (NULL when r is NULL: the run then uses its own). */
qm_ingest_pipes *qm_reuse_pipes(qm_reuse *r);

/* At least `bytes` of page-locked host scratch in `slot`, valid until the next call for that slot
 * or destroy; contents unspecified. r NULL: E-ARG. */
qm_code qm_reuse_host(qm_reuse *r, qm_reuse_host_slot slot, uint64_t bytes, void **out,
                      qm_status *st);

/* The host buffer for n sums copied back from the devices (local_norm's roots, the norm check's):
 * the kept page-locked slot QM_REUSE_HOST_BLOCK_SUMS when r is not NULL; else plain memory for at
 * most QM_BLOCK_SUMS_PAGEABLE_MAX bytes (plan.h: copying a few KiB costs less than page-locking
 * a buffer for them), else page-locked memory for this call. n = 0: *out NULL. *plain says how to
 * free it (qm_reuse_sums_free). E-NOMEM and the HAL's codes (the caller prefixes its phase). */
qm_code qm_reuse_sums_host(qm_reuse *r, qm_hal *hal, uint64_t n, double **out, bool *plain,
                           qm_status *st);
/* QM_ROOTS_PAGE_LOCKED=1 (environment): the few sums too go to page-locked memory, prepared on
 * the CUDA start-up thread with the ingest's ring (an experiment on the one-shot encode's
 * local_norm, docs/io.md "Tuning knobs"). */
bool qm_roots_page_locked(void);
/* Frees what qm_reuse_sums_host gave (nothing when it is r's kept slot). NULL: no-op. */
void qm_reuse_sums_free(qm_reuse *r, qm_hal *hal, double *p, bool plain);

/* At least `bytes` of device scratch on dev for shard `index` in `slot`, valid until the next call
 * for that slot and index or destroy (a kept one on another device or smaller is replaced);
 * contents unspecified. r NULL: E-ARG. */
qm_code qm_reuse_scratch(qm_reuse *r, qm_reuse_dev_slot slot, int index, int dev, uint64_t bytes,
                         qm_hal_buf **out, qm_status *st);
/* A stream on dev for shard `index`, kept (idle between encodes: the caller syncs it, never
 * destroys it). r NULL: E-ARG. */
qm_code qm_reuse_stream(qm_reuse *r, int index, int dev, qm_hal_stream **out, qm_status *st);

/* A state buffer of `bytes` on dev: a kept one of exactly that size (after qm_hal_device_sync of
 * dev), else a new one; kept buffers of dev of another size are freed first (and every kept
 * buffer of dev when the allocation fails for capacity, before it is tried once more). r NULL: a
 * plain qm_hal_buf_alloc on `hal`. Errors as qm_hal_buf_alloc, or the sync's. */
qm_code qm_reuse_state_buf(qm_reuse *r, qm_hal *hal, int dev, uint64_t bytes, qm_hal_buf **out,
                           qm_status *st);
/* Give a state buffer back: kept while dev holds fewer than QM_REUSE_KEPT_PER_DEVICE, else freed.
 * Thread-safe. NULL buf: no-op. */
void qm_reuse_state_put(qm_reuse *r, qm_hal_buf *buf);

qm_reuse_stats qm_reuse_stats_get(qm_reuse *r);

#endif
