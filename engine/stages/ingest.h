/* ingest.h — the ingest step of materialize: each shard's own input values onto its device.
 *
 * One pipe per device: a device staging buffer of two halves, a copy stream and a compute stream,
 * and events between them, so that the copy of chunk k+1 overlaps the kernel of chunk k and every
 * device works at once (chunks are dealt to the shards round-robin). Input already in page-locked
 * host memory is copied from where it lies; pageable input and reader input pass through a ring
 * of page-locked host slots (a background reader's threads fill the slots ahead while the DMA
 * engines copy the filled ones).
 * Per chunk the compute stream either stashes the values in their slots (qm_hal_stash), or, for a
 * shard of whole small states (`fused`), encodes them in one pass (qm_hal_amp_batch), the states'
 * sums of squares landing in the half's tail and then in host memory; a stashed chunk of a large
 * state may also have its block sums taken from the staging (qm_ingest_sums_in_staging), so the
 * norm reads no stash.
 * Pipes live as long as their owner: a run's own (closed before it returns) or a context's kept set
 * (qm_ingest_req.pipes: opened at the first run that needs them, grown, closed with the set).
 * Must not: read input outside a shard's own range; return before every enqueued copy and kernel
 * has finished (also on failure), so the caller may free what it likes.
 */
#ifndef QM_INGEST_H
#define QM_INGEST_H

#include "hal.h"
#include "materialize_internal.h"

/* The host ring between a reader (or pageable memory) and the devices' staging halves: slots of
 * page-locked memory that the reader fills ahead of the H2D copies (ingest.c). 8 x 8 MiB: the
 * same 64 MiB of page-locked memory as the two 32 MiB halves before it, and on the H200 the best
 * of the sizes measured with that budget. */
#define QM_INGEST_SLOTS 8
#define QM_INGEST_SLOT_BYTES ((uint64_t)8 << 20)

/* The ring's bytes when the input has at least that many: QM_INGEST_SLOTS slots of
 * QM_INGEST_SLOT_BYTES, or of the environment's QM_INGEST_SLOT_BYTES when it is valid (what
 * qm_ingest_run will page-lock; a smaller input gets a smaller ring). Cannot fail. */
uint64_t qm_ingest_ring_bytes_max(void);

typedef struct qm_ingest_shard {
    qm_hal_buf *state;          /* the shard's state buffer (slots [slot_start, slot_end)) */
    int device;
    uint64_t slot_start, slot_end;
    bool fused;                 /* whole states, period <= 2^QM_HAL_RED_LOG2_BLOCK: amp_batch */
    double *sums;               /* fused: one sum per state of the shard (host, page-locked) */
    qm_hal_buf *block_sums;     /* not fused, not NULL: each chunk's block sums (blocks of
                                   2^QM_HAL_RED_LOG2_BLOCK slots, shard order) are taken from the
                                   staging right after its stash (qm_ingest_sums_in_staging) */
    double *roots;              /* with block_sums, not NULL: behind the shard's last chunk, on
                                   its compute stream, the block sums' piece roots are made
                                   (tree_combine, when the backend has it) and copied here, or
                                   the block sums themselves without it (qm_tree_dev_enqueue
                                   over states of period slots, a power of two; qm_tree_dev_host
                                   doubles): local_norm only adds them */
} qm_ingest_shard;

/* Whether a shard of slots [start, end) can have its block sums taken chunk by chunk from the
 * staging (qm_ingest_shard.block_sums), so that the norm needs no pass over the stash: every
 * value has its own slot (period_valid == period: input element = global slot), the states and
 * the shard's ends are whole blocks, and so is a chunk of chunk_bytes of elem_bytes values. */
bool qm_ingest_sums_in_staging(uint64_t period, uint64_t period_valid, uint64_t start,
                               uint64_t end, uint64_t chunk_bytes, size_t elem_bytes);

/* Pipes kept between runs (one per device: streams, events, device staging; and the page-locked
 * host ring they share), owned by a context's reuse cache (reuse.h). Not thread-safe: one run at
 * a time. */
typedef struct qm_ingest_pipes qm_ingest_pipes;

/* An empty set for the devices 0 .. n_dev - 1 of a HAL (no pipe opened until a run needs it);
 * NULL when out of host memory. */
qm_ingest_pipes *qm_ingest_pipes_create(int n_dev);
/* Close every pipe (they are idle between runs) and free the set. NULL is a no-op. */
void qm_ingest_pipes_destroy(qm_hal *hal, qm_ingest_pipes *k);
/* How many pipes are open and their largest half's bytes (for tests and reports). Cannot fail. */
void qm_ingest_pipes_usage(const qm_ingest_pipes *k, int *n_pipes, uint64_t *half_bytes_max);

typedef struct qm_ingest_req {
    qm_hal *hal;
    uint64_t period, period_valid; /* slots and values per state */
    qm_dtype state_dtype;
    const qm_amp_input *in;
    uint64_t chunk_bytes;          /* one staging half */
    qm_ingest_pipes *pipes;        /* kept pipes, used and left open (NULL: the run's own) */
} qm_ingest_req;

/* Copy input elements [first, first + count) into dst (through the reader when there is one). */
qm_code qm_input_read(const qm_amp_input *in, uint64_t first, uint64_t count, void *dst,
                      qm_status *st);

/* Ingest every shard of `shards` (n > 0; shards whose input range is empty are skipped). On
 * failure the first error is reported after all enqueued work has drained; state contents are
 * then unspecified. */
qm_code qm_ingest_run(const qm_ingest_req *r, const qm_ingest_shard *shards, int n, qm_status *st);

#endif
