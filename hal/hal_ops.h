/* hal_ops.h — the HAL's kernels: an extensible set of ops (part of hal.h; include "hal.h").
 *
 * Role: every kernel is an op id (qm_hal_op) with its parameter block; a backend implements one
 * generic member, launch(ctx, dev, op, params, bufs, stream, st), and says which ops it has with
 * supports_op (hal_impl.h). The engine calls the typed wrappers below (qm_hal_stash, ...): each
 * checks the device, the dtypes and every buffer range of its op, then launches it. Also the few
 * numbers of kernels/qm_math.h that the engine needs itself (input ranges, tree combine, the slow
 * path's scale), implemented in hal.c on top of qm_math.h so that they stay bit-identical to the
 * kernels without the engine including kernels/.
 * In: buffers of hal_device.h, streams of hal_stream.h, slot and element indices.
 * Out: enqueued or finished kernels; E-UNSUPPORTED for an op the backend does not have.
 * Must not: expose any backend type or kernel header.
 *
 * Adding an op (a new encoding's kernel): (1) append an id to qm_hal_op before QM_HAL_OP_COUNT_
 * (ids are never renumbered) and its name to qm_hal_op_name in hal.c; (2) define its parameter
 * block here, holding qm_hal_buf handles for the engine side and plain numbers; (3) write a typed
 * wrapper in hal.c that checks the device and every range its op reads or writes, fills the
 * buffer pointers by role (QM_HAL_OP_BUF_*) and calls the common launch; (4) add the op's case to
 * each backend's launch and supports_op (hal/sim/sim.c on the CPU kernels, hal/cuda/cuda.c on the
 * CUDA launchers), mapping qm_dtype to the kernels' plain element types; (5) add cases to
 * tests/test_backend_ops.c. No member is added to the backend table (hal_impl.h), so no ABI bump:
 * a backend that does not know the op answers false in supports_op and the wrapper returns
 * E-UNSUPPORTED. The fault shim forwards it unchanged (counted as a kernel launch).
 */
#ifndef QM_HAL_OPS_H
#define QM_HAL_OPS_H

#include "hal_stream.h"

/* Kernel ops. Values are stable (tables of cases and backends switch on them). */
typedef enum qm_hal_op {
    QM_HAL_OP_AMP_STASH = 1,    /* qm_hal_stash_args; enqueued */
    QM_HAL_OP_AMP_SUMSQ = 2,    /* qm_hal_sumsq_args, block sums to a host array; blocking */
    QM_HAL_OP_AMP_SUMSQ_DEV = 3,/* qm_hal_sumsq_args, block sums to device memory; enqueued */
    QM_HAL_OP_AMP_SCAN = 4,     /* qm_hal_scan_args; blocking */
    QM_HAL_OP_AMP_SCALE = 5,    /* qm_hal_amp_scale_args; enqueued */
    QM_HAL_OP_AMP_BATCH = 6,    /* qm_hal_amp_batch_args; enqueued */
    QM_HAL_OP_PRODUCT = 7,      /* qm_hal_product_args; enqueued (angle, basis, phase) */
    QM_HAL_OP_IQP_PHASE = 8,    /* qm_hal_iqp_phase_args; enqueued (iqp, iqp-z) */
    QM_HAL_OP_WHT = 9,          /* qm_hal_wht_args; enqueued (iqp, iqp-z) */
    QM_HAL_OP_STATE_SUMSQ = 10, /* qm_hal_state_sumsq_args; enqueued (the norm check) */
    QM_HAL_OP_IQP = 11,         /* qm_hal_iqp_args; enqueued (iqp, iqp-z: iqp_phase + wht fused) */
    QM_HAL_OP_TREE_COMBINE = 12,/* qm_hal_tree_combine_args; enqueued (block sums -> piece sums) */
    QM_HAL_OP_COUNT_            /* one past the last id */
} qm_hal_op;

/* The buffers of an op, by role: the backend receives their backend pointers in an array of
 * QM_HAL_OP_BUFS (NULL where the op has no such buffer), each documented per op below. */
enum {
    QM_HAL_OP_BUF_STATE = 0, /* the state buffer (not offset: the parameters carry slot offsets) */
    QM_HAL_OP_BUF_INPUT = 1, /* the input buffer (not offset) */
    QM_HAL_OP_BUF_OUT = 2,   /* a device output: sumsq_dev's, state_sumsq's and tree_combine's
                                sums (already offset), amp_batch's sums (not offset) */
    QM_HAL_OP_BUFS = 3
};

/* "amp_stash", ...; "unknown" for an id this build does not know. Cannot fail. */
const char *qm_hal_op_name(qm_hal_op op);
/* Whether the backend implements op (else the op's wrapper answers E-UNSUPPORTED). Cannot fail;
 * false for a NULL hal or an unknown id. */
bool qm_hal_supports_op(const qm_hal *hal, qm_hal_op op);

/* --- amplitude encoding (the encode maths of kernels/qm_math.h, run where the buffer lives) ----
 * Amplitude encoding runs in place in the state buffer, so a device needs the state plus a small
 * staging buffer: (1) `stash` converts a staged input chunk to float64 and parks each value in its
 * amplitude slot (complex128: re = x, im = 0; complex64: the slot's 8 bytes hold the double);
 * (2) `sumsq` sums squares of stashed values as fixed pairwise trees; (3) `scan` finds the largest
 * magnitude and the first NaN/Inf (slow path only); (4) `amp_scale` turns each stashed value into
 * its amplitude ((x * scale) * coeff) in place and writes zeros into padding slots; (5) the fused
 * `amp_batch` does all of it for whole small states.
 * Indices are amplitude slots of the state buffer; the global index of slot i is g0 + i, and a
 * slot holds data when (g0 + i) mod period < period_valid (period = 2^qubits amplitudes per state,
 * period_valid = input features), else it is padding.
 * Buffers by role: stash: STATE = out, INPUT = in. sumsq: STATE (NULL when `input` is set) and
 * INPUT (NULL for the stash). sumsq_dev: the same, and OUT = the sums' first double. scan: STATE.
 * amp_scale: STATE, INPUT (NULL for the stash). amp_batch: STATE, INPUT, OUT = sums. */

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
 * in_off is input element in_first (then `state` is not read: e.g. a staging buffer holding a
 * chunk of the input at in_off). Blocking. */
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
    uint64_t in_off;       /* elements of `input` before input element in_first (backends see
                              the input pointer already past them, and in_off 0) */
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
/* The op's parameter block (what the backend receives); the engine calls qm_hal_scan_sync. */
typedef struct qm_hal_scan_args {
    const qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;
    qm_hal_scan_result *out;
} qm_hal_scan_args;
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

/* Fused encode of whole small states (period <= 2^QM_HAL_RED_LOG2_BLOCK), each read once: state k
 * (k < n_states) occupies slots [off + k * period, off + (k + 1) * period) of `state` and its
 * period_valid values are input elements [in_off + k * period_valid, ...) of `input` (same device).
 * For each state: its tree sum of squares (scale 1; qm_tree_sumsq over the whole state) goes to
 * element sums_off + k of `sums` (a float64 device buffer); when that sum is fast
 * (qm_hal_sum_is_fast) the state's slots become its amplitudes, x * (1 / sqrt(sum)) with zero
 * padding (exactly what amp_scale writes with that coefficient), otherwise its values are stashed
 * (exactly what stash writes) for the slow path. Enqueued on s. */
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

/* --- the norm check: sums of |psi|^2 over written amplitudes, where they live ------------------
 * Over slots [off, off + n) of `state` (amplitudes of state_dtype; slot off is global index g0):
 * one float64 sum per aligned global block of 2^log2_block slots that the range touches (block j
 * covers global [(g0 >> log2_block) + j) << log2_block, + 2^log2_block)), each the fixed pairwise
 * tree of kernels/qm_math.h over the block's terms re*re + im*im (qm_tree_normsq_*), a slot of the
 * block outside the range counting as +0. So a block inside the range is exactly its subtree, and
 * blocks never straddle states (2^log2_block divides period). The sums go to doubles [out_off,
 * out_off + qm_hal_state_sumsq_blocks(g0, n, log2_block)) of the device buffer `out` (same device):
 * nothing crosses to the host; copy them back with qm_hal_copy_d2h on the same stream. Buffers by
 * role: STATE = state (not offset), OUT = the sums (already at out_off). Enqueued on s. */
typedef struct qm_hal_state_sumsq_args {
    const qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;       /* slots, n >= 1 */
    uint64_t g0;           /* global index of slot off */
    uint64_t period;       /* slots per state (a power of two), a multiple of 2^log2_block */
    unsigned log2_block;   /* <= QM_HAL_RED_LOG2_BLOCK */
} qm_hal_state_sumsq_args;
/* The number of block sums of a range (0 for n = 0). Cannot fail. */
uint64_t qm_hal_state_sumsq_blocks(uint64_t g0, uint64_t n, unsigned log2_block);
qm_code qm_hal_state_sumsq(qm_hal *hal, const qm_hal_state_sumsq_args *a, qm_hal_buf *out,
                           uint64_t out_off, qm_hal_stream *s, qm_status *st);

/* --- piece sums from block sums, where they live ----------------------------------------------
 * The block sums of sumsq_dev and state_sumsq are subtrees of each state's fixed pairwise tree;
 * a canonical piece (engine/stages/tree_sum.h) of 2^k slots is 2^(k - log2_block) consecutive
 * blocks. This op combines them on the device, so that only one double per piece crosses to the
 * host: for j < n_groups, double out_off + j of `out` becomes the pairwise root (kernels/qm_math.h
 * qm_tree_root, the same bits as qm_hal_tree_combine) of the 2^log2_group doubles from in_off +
 * (j << log2_group) of `in`. in and out are float64 device buffers of one device (the same
 * buffer is allowed) whose two ranges do not overlap. Buffers by role: INPUT = in (not offset),
 * OUT = out (already at out_off). Enqueued on s. */
typedef struct qm_hal_tree_combine_args {
    uint64_t in_off;     /* first block sum (doubles) */
    uint64_t n_groups;   /* >= 1 */
    unsigned log2_group; /* <= 40 */
} qm_hal_tree_combine_args;
qm_code qm_hal_tree_combine_dev(qm_hal *hal, const qm_hal_tree_combine_args *a,
                                const qm_hal_buf *in, qm_hal_buf *out, uint64_t out_off,
                                qm_hal_stream *s, qm_status *st);

/* --- the maths the engine needs (kernels/qm_math.h, through hal.c: bit for bit the same) ------ */
/* Largest block a kernel sums on its own (QM_RED_LOG2_BLOCK; hal.c asserts they agree). */
#define QM_HAL_RED_LOG2_BLOCK 14
/* Input elements whose slots lie in global slots [lo, hi), hi > lo: [*e_lo, *e_hi). */
void qm_hal_input_range(uint64_t lo, uint64_t hi, uint64_t period, uint64_t period_valid,
                        uint64_t *e_lo, uint64_t *e_hi);
/* Combine n (a power of two) subtree sums, in index order, into their root. Destroys v. */
double qm_hal_tree_combine(double *v, uint64_t n);
/* The slow path's power-of-two scale for a state whose largest magnitude is max_abs (finite,
 * > 0). */
double qm_hal_rescale_factor(double max_abs);
/* Whether a state's fast-path sum of squares is usable as is (finite and at least
 * QM_FAST_SUM_MIN); else the state takes the rescaled slow path. */
bool qm_hal_sum_is_fast(double sum);
/* The CUDA backend's default iqp op over a range of whole blocks of 2^bits slots (a shard, or a
 * batch of states of `bits` qubits): its device-memory traffic in units of the range's bytes
 * (kernels/qm_passes.h's qm_iqp_traffic: the fused phase pass, then 2 per round-3 pass of the
 * higher stages, the split qm_cuda_wht_passes3 runs; 7 for a 2^30 state). Cannot fail. */
unsigned qm_hal_iqp_passes(unsigned bits);

/* --- product states: angle, basis and phase encodings -------------------------------------------
 * Slots [off, off + n) of `state` become product-state amplitudes (kernels/qm_math.h: a fixed
 * left-to-right product of one complex factor per qubit, times `scale`), slot i being global index
 * g0 + i: state (g0 + i) >> qubits, local index (g0 + i) mod 2^qubits. The factors are float64
 * elements of `table` (same device as the state): for state k (first_state <= k < first_state +
 * n_states), from element table_off + (k - first_state) * 4 * qubits on, per qubit q the pairs
 * (re, im) of f_q(0) and f_q(1). Buffers by role: STATE = state, INPUT = the table (already at
 * table_off). Enqueued on s. */
typedef struct qm_hal_product_args {
    qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;
    uint64_t g0;
    unsigned qubits;           /* 1 .. 62 */
    uint64_t first_state, n_states;
    const qm_hal_buf *table;
    uint64_t table_off;
    double scale;
} qm_hal_product_args;
qm_code qm_hal_product(qm_hal *hal, const qm_hal_product_args *a, qm_hal_stream *s, qm_status *st);

/* --- IQP encodings: iqp-z and iqp (kernels/qm_math.h, qm_iqp_phi) -------------------------------
 * An IQP state is WHT(v) with v(x) = 2^-n exp(i phi(x)): iqp_phase writes v, wht runs the
 * butterflies. Buffers by role: iqp_phase: STATE = state, INPUT = the table (already at
 * table_off). wht: STATE = state, INPUT = the partner buffer (already at partner_off) or NULL. */

/* Slots [off, off + n) of `state` become scale * (cos phi, sin phi) of their local index, slot i
 * being global index g0 + i: state (g0 + i) >> qubits, local index x = (g0 + i) mod 2^qubits, phi
 * from that state's n_coeffs float64 coefficients (qubits for iqp-z, qubits + qubits (qubits - 1)
 * / 2 for iqp) at element table_off + (state - first_state) * n_coeffs of `table` (same device).
 * Enqueued on s. */
typedef struct qm_hal_iqp_phase_args {
    qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;
    uint64_t g0;
    unsigned qubits;           /* 1 .. 62 */
    unsigned n_coeffs;         /* qubits or qubits + qubits (qubits - 1) / 2 */
    uint64_t first_state, n_states;
    const qm_hal_buf *table;
    uint64_t table_off;
    double scale;
} qm_hal_iqp_phase_args;
qm_code qm_hal_iqp_phase(qm_hal *hal, const qm_hal_iqp_phase_args *a, qm_hal_stream *s,
                         qm_status *st);

/* Without a partner: Walsh-Hadamard stages b0 .. b1 - 1 (0 <= b0 < b1 <= 62), in increasing order,
 * in place over slots [off, off + n) of `state`, n a multiple of 2^b1 (aligned blocks of 2^b1
 * slots from off): stage b maps each pair (u, w) differing in bit b of the slot index relative to
 * off to (u + w, u - w). With a partner (one stage held by two buffers, b0 and b1 unused): slot i
 * of `state` and slot partner_off + i of `partner` (same device, same dtype, n slots each) are the
 * two ends of a pair; `high` false: the state holds u and becomes u + w (w from the partner); true:
 * the state holds w and becomes u - w (u from the partner). The same additions as a local stage,
 * so a transform cut over buffers gives the same bits. Enqueued on s. */
typedef struct qm_hal_wht_args {
    qm_hal_buf *state;
    qm_dtype state_dtype;
    uint64_t off, n;
    unsigned b0, b1;
    const qm_hal_buf *partner; /* NULL: local stages */
    uint64_t partner_off;
    bool high;
} qm_hal_wht_args;
qm_code qm_hal_wht(qm_hal *hal, const qm_hal_wht_args *a, qm_hal_stream *s, qm_status *st);

/* iqp_phase over slots [off, off + n) of `state`, then the local Walsh-Hadamard stages 0 .. b1 - 1
 * over the same slots (none for b1 = 0; else n a multiple of 2^b1, b1 <= 62): bit for bit what the
 * two ops write one after the other, in one op so that a backend may fuse them (CUDA: the phase
 * and stages 0..9 in one pass over the state, then 10 stages per pass; docs/cuda.md). Buffers by
 * role: STATE = state, INPUT = the table (already at phase.table_off). Enqueued on s. */
typedef struct qm_hal_iqp_args {
    qm_hal_iqp_phase_args phase;
    unsigned b1;
} qm_hal_iqp_args;
qm_code qm_hal_iqp(qm_hal *hal, const qm_hal_iqp_args *a, qm_hal_stream *s, qm_status *st);

#endif
