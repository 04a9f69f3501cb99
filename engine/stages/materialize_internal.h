/* materialize_internal.h — allocate shards, stream input in, compute the norms, write. */
#ifndef QM_MATERIALIZE_INTERNAL_H
#define QM_MATERIALIZE_INTERNAL_H

#include "hal.h"
#include "qmesh.h"

/* One shard of a plan projected onto devices: global amplitude range [start, end) on `device`
 * (batch: of the concatenated states). */
typedef struct qm_shard_spec {
    int rank;
    int device;
    uint64_t start, end;
} qm_shard_spec;

/* Input of amplitude encoding: `batch` rows (0 means 1) of `n` values of dtype float32|float64,
 * row-major. Either `data` holds all of it in host memory, or `read` copies values
 * [first, first + count) (row-major element indices) into dst — so a shard can stream only its own
 * range from a file. */
typedef struct qm_amp_input {
    qm_dtype dtype;
    const void *data;
    uint64_t n;
    uint64_t batch;
    qm_code (*read)(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st);
    void *read_ctx;
    /* Optional, with read_ctx: a read of `read`'s kind that runs in the background (the .npy
     * reader's threads): read_submit starts it and gives a ticket, read_wait (exactly once per
     * ticket) waits for it and reports its result. Ingest keeps a few of them in flight so that
     * reading overlaps the copies to the devices. NULL: `read` only. */
    qm_code (*read_submit)(void *ctx, uint64_t first, uint64_t count, void *dst, void **ticket,
                           qm_status *st);
    qm_code (*read_wait)(void *ctx, void *ticket, qm_status *st);
    /* data is device memory (a CUDA pointer; on the simulator, host memory): shards whose device
     * can read it in place (qm_hal_buf_wrap_device) do so, the others and the slow path's scans
     * go through `read`, which is then required (it copies device memory to host memory). */
    bool device_data;
    /* An integer input (an integer .npy file): `read` delivers its values as float64, read_int the
     * exact 64-bit integers (as int64_t when int_signed), so that basis indices are never rounded
     * (featuremap.c). NULL for float input. */
    qm_code (*read_int)(void *ctx, uint64_t first, uint64_t count, uint64_t *dst, qm_status *st);
    void *read_int_ctx;      /* read_int's own context (`read` may be wrapped with another) */
    bool int_signed;
    /* A batch of a longer input (a stream, docs/api.md "Streams"): the global index of this
     * input's sample 0. Messages that name a sample name first_sample + its index here, and always
     * by sample (also for a one-row batch). 0 and false for a whole input. */
    uint64_t first_sample;
    bool part_of_stream;
    /* `read`'s failures say where they are themselves (a CSV file opened by qm_input_open: the
     * file, its line and column, as the whole-file load reported them): qm_input_read and ingest
     * pass them on without the element range or the shard in front. */
    bool read_placed;
    /* `read` costs least going forward through the input (a CSV file, which has no index: a
     * read behind the last one starts the file over): ingest reads the shards one after the
     * other in input order instead of dealing their chunks round-robin. */
    bool read_in_order;
} qm_amp_input;

struct qm_comm;

/* Seconds this rank spent in each phase of one materialize, named as the plan's estimates
 * (`estimates_s`, docs/planner.md "Cost model"): ingest (allocation and input onto the devices),
 * local_norm (the block and piece sums of this rank's shards), norm_allreduce (exchange and merge of the piece
 * sums, coefficients, the slow path), encode (amplitudes). */
typedef struct qm_materialize_times {
    double ingest, local_norm, norm_allreduce, encode;
} qm_materialize_times;

/* Options; a zeroed struct gives the defaults. */
typedef struct qm_materialize_opts {
    uint64_t chunk_bytes;   /* staging chunk (default QM_STAGING_CHUNK_BYTES of plan.h: 32 MiB) */
    /* Ranks of a multi-process run (NULL: one process). Then `shards` are this rank's shards only
     * (a contiguous part of the index space, devices of this rank's backend): each rank sums its
     * own part, piece sums are all-gathered and merged in index order, and every rank learns the
     * same norms, the same slow-path decisions and the same verdict (a rank with bad data still
     * takes part in every exchange). */
    struct qm_comm *comm;
    /* Called after each shard's ingest and after each shard's amplitudes (may be NULL):
     * done / total work units (two per local shard). */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Filled on success when not NULL. */
    qm_materialize_times *times;
    /* The context's encode cache (reuse.h; NULL: allocate and free per call): state buffers from
     * its pool (the state gives them back when destroyed), its ingest pipes, its page-locked
     * scratch. Amplitude encoding only; the feature maps allocate per call. */
    struct qm_reuse *reuse;
    /* Per-state host arrays made and first touched ahead of time (qm_materialize_host_prepare;
     * NULL or too few states: allocated here). Amplitude encoding only; the caller keeps them. */
    struct qm_materialize_host *host;
} qm_materialize_opts;

/* The host arrays of an amplitude encode's per-state work: each state's sum, coefficient, scale
 * and slow-path mark, and room for one piece sum per state (tree_sum.h). Made and first touched
 * where the time is free (`qmesh encode` while the CUDA context starts), an encode of at most
 * `states` states takes them instead of fresh memory, whose first touch (page faults, and on a
 * host with transparent huge pages their zeroing) would otherwise fall in local_norm and
 * norm_allreduce: 0.65 and 0.91 ms for 65536 states on an H100 host, most of those phases. */
typedef struct qm_materialize_host {
    uint64_t states;
    double *sums, *coeffs, *scales;
    unsigned char *slow;
    void *pieces;      /* qm_tree_piece[pieces_cap] (tree_sum.h), handed to the encode's list */
    int pieces_cap;
} qm_materialize_host;
/* Allocate and touch the arrays for `states` states (h zeroed first; its fini frees them).
 * E-NOMEM (nothing kept). */
qm_code qm_materialize_host_prepare(qm_materialize_host *h, uint64_t states, qm_status *st);
void qm_materialize_host_fini(qm_materialize_host *h);

/* Amplitude-encode `in` into batch states of 2^qubits amplitudes of out_dtype laid out as
 * `shards`: either a partition of [0, batch * 2^qubits) in index order, or (replicated) every
 * shard the whole range. Each shard receives only its own part of the input, through a staging
 * buffer of at most two chunks per device, and the amplitudes are built in place in the state
 * buffers. Each state's norm is the fixed pairwise tree of kernels/qm_math.h over its own index
 * space, so the result does not depend on the layout, the device count or the thread count.
 * Errors: E-INPUT (empty, too long, NaN/Inf with the first offending index, zero norm), E-SHARDS /
 * E-ARG for a bad layout, and whatever the HAL or the reader reports; on failure nothing stays
 * allocated and *out is NULL. opts may be NULL. */
qm_code qm_materialize_amplitude(qm_hal *hal, unsigned qubits, qm_dtype out_dtype,
                                 const qm_shard_spec *shards, int n_shards, const qm_amp_input *in,
                                 const qm_materialize_opts *opts, qm_state **out, qm_status *st);

/* The same for the product-state encodings (angle, basis, phase: featuremap.c): `in` holds B
 * samples of qm_encoding_features(enc, qubits) values (basis: one index each), every amplitude a
 * product of per-qubit factors built on the host; and the IQP encodings (iqp, iqp-z: a phase per
 * index, then the Walsh-Hadamard transform, distributed by iqp.c). E-INPUT for a wrong value
 * count, NaN/Inf or a bad basis index (the sample and value named), E-SHARDS for a layout the IQP
 * transform cannot use; the same failure contract as qm_materialize_amplitude. */
qm_code qm_materialize_featuremap(qm_hal *hal, qm_encoding enc, unsigned qubits, qm_dtype out_dtype,
                                  const qm_shard_spec *shards, int n_shards,
                                  const qm_amp_input *in, const qm_materialize_opts *opts,
                                  qm_state **out, qm_status *st);
/* Whether featuremap.c encodes e as a product state: angle, basis, phase, and iqp-z (whose sum
 * over x factors into one sum per qubit). Cannot fail. */
bool qm_encoding_is_product(qm_encoding e);

/* The IQP encoding with ZZ terms (iqp.c; featuremap.c encodes it too: phase vector, local WHT
 * stages): true for iqp only, iqp-z being a product state. Cannot fail. */
bool qm_encoding_is_iqp(qm_encoding e);
/* Whether the layout allows the transform, and how many low bits each shard transforms alone
 * (*local_bits: qubits when every shard holds whole states, else the page bits: the largest power
 * of two dividing every shard boundary of every rank): a batch needs whole states per shard; one
 * state cut into parts needs at most 4096 pages and the ranks' ranges in rank order (collective
 * when comm has more than one rank). E-SHARDS with the shard and a policy that works. */
qm_code qm_iqp_check_layout(qm_encoding enc, unsigned qubits, uint64_t batch,
                            const qm_shard_spec *shards, int n_shards, struct qm_comm *comm,
                            unsigned *local_bits, qm_status *st);
/* The stages of bits local_bits .. qubits - 1 of a state whose shards each ran their own lower
 * stages on pages of 2^local_bits: exchanges between pages through scratch of a page (at most
 * 1 GiB: pieces) per local page (freed before return), the partner page on this process (device
 * copies) or on another rank (host copies and the comm; both ends in the same order). Bit-identical to a one-device transform. Collective over comm when
 * the state spans ranks. */
qm_code qm_iqp_exchange(qm_hal *hal, qm_state *s, unsigned local_bits, struct qm_comm *comm,
                        qm_status *st);

/* Shared by both materialize stages: the input and request checks that need no device, the layout
 * check (a partition of [0, total) in index order, or every shard the whole range; `part`: this
 * rank's contiguous part only), and the end of a stream (sync then destroy; the first error kept
 * in *rc / st; NULL is a no-op). */
/* The host's work per state of an amplitude batch (the cost model's defaults.host_batch, measured
 * by `qmesh topo dump`): local_norm's piece sums of a fused shard (qm_tree_pieces_add_states) and
 * norm_allreduce's merge and coefficients (qm_tree_pieces_merge, phase C), run as an encode runs
 * them on `states` states of `qubits` qubits whose sums came back from the devices, in arrays
 * prepared ahead (qm_materialize_host_prepare, as `qmesh encode` on a GPU prepares them) and with
 * the caches cleared by 256 MiB written (as the ingest leaves them); the median of 3 runs, seconds
 * per state. E-ARG (no state, qubits outside 1..62), E-NOMEM. */
qm_code qm_materialize_host_probe(unsigned qubits, uint64_t states, double *pieces_s,
                                  double *coeffs_s, qm_status *st);

/* local_norm's round trip on device dev as a one-shot encode makes it for a shard whose block
 * sums its ingest took (the cost model's defaults.piece_roots, measured by `qmesh topo dump`): a
 * device buffer holding the block sums of one state of `qubits` qubits (made and filled from
 * page-locked memory untimed, as the encode makes it before its ingest; the op's kernel loaded
 * first by one combine without a copy back, as the encode's start-up thread loads it), then
 * timed: the roots' host buffer (qm_reuse_sums_host without a cache: plain memory for a few), a
 * stream, the tree_combine op and the roots' copy (qm_tree_dev_enqueue), the stream synchronized
 * and destroyed, the sums' buffer given back, the roots appended (qm_tree_dev_add), the host
 * buffer freed. *first_s the first such round trip (the process's first copy into plain memory,
 * as a one-shot encode's local_norm makes it), *steady_s (may be NULL) the median of `reps`
 * more, *blocks (may be NULL) the block sums combined. E-ARG (no backend, a device out of
 * range, reps outside 1..QM_ROOTS_PROBE_REPS_MAX, qubits outside QM_HAL_RED_LOG2_BLOCK..40),
 * E-UNSUPPORTED (no tree_combine op), E-NOMEM, the HAL's codes, E-INTERNAL when the roots are
 * wrong. */
#define QM_ROOTS_PROBE_REPS_MAX 63
qm_code qm_materialize_roots_probe(qm_hal *hal, int dev, unsigned qubits, int reps, double *first_s,
                                   double *steady_s, uint64_t *blocks, qm_status *st);

qm_code qm_materialize_check_input(unsigned qubits, qm_dtype out_dtype, const qm_amp_input *in,
                                   qm_status *st);
qm_code qm_materialize_check_layout(uint64_t total, const qm_shard_spec *shards, int n_shards,
                                    int n_dev, bool part, bool *replicated, qm_status *st);
void qm_materialize_drain(qm_hal *hal, qm_hal_stream *s, qm_code *rc, qm_status *st);

#endif
