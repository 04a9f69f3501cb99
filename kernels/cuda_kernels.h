/* cuda_kernels.h — launchers of the CUDA kernels (kernels/cuda_kernels.cu), callable from C.
 * Each launcher enqueues on `stream` (a cudaStream_t, NULL = default) and returns the cudaError_t
 * of the launch as an int; no allocation, synchronisation or message formatting happens here.
 * Pointers are device pointers, already offset to the first slot / element. `c128` selects
 * complex128 state slots (stride 2 doubles) over complex64 (stride 1); `f64` float64 input. */
#ifndef QM_CUDA_KERNELS_H
#define QM_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fill n bytes at dst with `value` (used to poison buffers in tests). */
int qm_cuda_launch_fill(void *dst, unsigned char value, uint64_t n, void *stream);
/* Stash (see hal/hal_ops.h): `state` is the buffer's slot 0 (global index slot_g0); `in` is already at the
 * first value, which is input element in_first. */
int qm_cuda_launch_stash(void *state, int c128, uint64_t slot_g0, uint64_t period,
                         uint64_t period_valid, const void *in, int f64, uint64_t in_first,
                         uint64_t n, void *stream);
/* Block sums (see qm_math.h) into out_sums, a device array of n_blocks doubles; from the stash, or
 * from input `in` (device pointer of its element 0 = input element in_first) when in != NULL.
 * `kernels` (QM_CUDA_KERNELS_*): QM_CUDA_KERNELS_ROUND3 sums blocks of 2^8..2^10 elements and
 * more one warp per block with coalesced 16-byte loads; the others one CUDA block per reduction
 * block (2^11..2^14) or one thread per block. The same bits either way. */
int qm_cuda_launch_sumsq(const void *state, int c128, uint64_t g0, uint64_t period,
                         uint64_t period_valid, unsigned log2_block, uint64_t n_blocks,
                         double scale, double *out_sums, const void *in, int in_f64,
                         uint64_t in_first, int kernels, void *stream);
/* The norm check's block sums of |psi|^2 (qm_cpu_state_sumsq's contract): n amplitudes at
 * `state` (already at the first slot, global index g0), one sum per aligned global block of
 * 2^log2_block slots the range touches into out_sums (device array). `kernels`
 * (QM_CUDA_KERNELS_*): QM_CUDA_KERNELS_ROUND3 sums blocks of 2^8 slots and more one warp per
 * block with coalesced loads; the others take the one-CUDA-block-per-reduction-block kernel
 * (2^11..2^14) and one thread per block below. The same bits either way. */
int qm_cuda_launch_state_sumsq(const void *state, int c128, uint64_t n, uint64_t g0,
                               unsigned log2_block, double *out_sums, int kernels, void *stream);
/* Piece sums from block sums (qm_cpu_tree_combine's contract): out[j] = qm_tree_root of the
 * 2^log2_group doubles in[j << log2_group ..] for j < n_groups (device arrays, not overlapping).
 * Groups of up to 64 sums take one thread each; larger ones one CUDA block each (up to 256
 * threads, each the root of a contiguous run of 8 or more, then the block's own levels). */
int qm_cuda_launch_tree_combine(const double *in, uint64_t n_groups, unsigned log2_group,
                                double *out, void *stream);
/* Max |x| (as the bits of a non-negative double) and first non-finite slot, accumulated with
 * atomics into out[0] and out[1], which the caller initialises to 0 and UINT64_MAX. */
int qm_cuda_launch_scan(const void *state, int c128, uint64_t n, unsigned long long *out,
                        void *stream);
/* Amplitudes (in place from the stash, or from input `in`), qm_amp_scaled of qm_math.h; coeffs
 * and scales (NULL: all 1) are device arrays indexed by state - first_state. */
int qm_cuda_launch_amp_scale(void *state, int c128, uint64_t n, uint64_t g0, uint64_t period,
                             uint64_t period_valid, uint64_t first_state, const double *coeffs,
                             const double *scales, const void *in, int in_f64, uint64_t in_first,
                             void *stream);

/* The same for slots [0, n) that all belong to one state whose slot 0 is local index local0, with
 * one scale and one coefficient, from input x (device pointer of the value of slot 0, or of the first data slot
 * when local0 >= period_valid: then nothing is read). 16-byte stores. */
int qm_cuda_launch_amp_one_state(void *state, int c128, uint64_t n, uint64_t local0,
                                 uint64_t period_valid, double scale, double coeff, const void *x,
                                 int in_f64, void *stream);

/* Fused encode of n_states whole small states (see qm_hal_amp_batch in hal/hal_ops.h) with block shape
 * `shape` of the tuning sweep (0: the default; 1..5: cuda_batch.cu's table; bench_cuda's
 * BM_BatchShape compares them): `state` is state 0's slot 0, `in` its first value, `sums` its
 * sum's slot (device pointers). period <= 2^14. Every shape writes the same bytes. The shape is
 * the caller's choice: the CUDA backend reads QM_CUDA_BATCH_SHAPE once when it is opened. */
int qm_cuda_launch_amp_batch_shape(int shape, void *state, int c128, uint64_t period,
                                   uint64_t period_valid, uint64_t n_states, const void *in,
                                   int in_f64, double *sums, void *stream);

/* Load (under CUDA's lazy loading, which loads a kernel at its first launch: about 1-1.5 ms for
 * the data path's first, measured on an H100) the amplitude data path's kernels on the current
 * device ahead of their first launch: this file's (ingest's stash and block sums, the norm's
 * state sums, the encode's scaling) and cuda_batch.cu's default shapes. Each returns the first
 * cudaError_t of its loads as an int (0: all loaded); nothing is launched. */
int qm_cuda_preload_kernels(void);
int qm_cuda_preload_batch_kernels(void);
/* The n kernels fns[] loaded on the current device (cudaFuncGetAttributes each): the first
 * cudaError_t as an int, 0 when all loaded. */
int qm_cuda_load_functions(const void *const *fns, int n);

/* The feature-map launchers below take `kernels`, the generation: QM_CUDA_KERNELS_CURRENT (0)
 * runs the round-2 kernels of kernels/cuda_featuremap.cu, QM_CUDA_KERNELS_ROUND1 (2) its round-1
 * kernels (product from per-state digit tables rebuilt per tile; iqp's phase and stages 0..9 in one
 * pass, one warp per tile; wht stages above 2^10 ten per pass), QM_CUDA_KERNELS_LEGACY (1) the
 * round-0 ones (per-tile hi products; separate phase pass; one pass per wht stage above 2^10),
 * kept so that a regression can be bisected and the rounds timed side by side in one run. All
 * write the same bits, except iqp's phases: rounds 0-2 evaluate qm_math.h's order 1, round 3 (below)
 * order 3, the CPU's; their cos and sin are CUDA's either way. The choice is the caller's: the CUDA backend reads QM_CUDA_KERNELS once
 * when opened. */
#define QM_CUDA_KERNELS_CURRENT 0
#define QM_CUDA_KERNELS_LEGACY 1
#define QM_CUDA_KERNELS_ROUND1 2
/* Round 3 (QM_CUDA_KERNELS=round3 runs every op on it): the round-3 product kernels (per-state lo table;
 * batches of 10-qubit states with the next group's factors loaded before the current group is
 * written, an even split of the states over the blocks) and the one-warp-per-block sums of
 * squares; IQP's phases in qm_math.h's order 3 (products of unit numbers, the CPU's order; rounds
 * 0-2 compute cos and sin of the whole phi, order 1), and the wht stages above 2^10 in passes of
 * at most 8 stages on rows of 256 contiguous bytes (cuda_featuremap.cu's qm_cuda_wht_passes3; a
 * 2^30 state: 3 passes of 7, 7, 6 stages after the fused one). */
#define QM_CUDA_KERNELS_ROUND3 3
/* Round 4 (QM_CUDA_KERNELS=round4): round 3 with kernels of its own (cuda_featuremap.cu):
 * batches of 10-qubit product states one warp per state, product states of more than 10 qubits
 * on round 2's kernel with each thread's A entries in registers, and IQP's fused phase + stages 0..9 one
 * warp per tile with two shared-memory transposes instead of round 3's five round trips (round 3's
 * phases: the same bits); every other op as round 3 (qm_cuda_kernels_r3). */
#define QM_CUDA_KERNELS_ROUND4 4
/* Round 5 (QM_CUDA_KERNELS=round5): round 4 with two product kernels of its own
 * (cuda_featuremap.cu): batches of 10-qubit states with their factor tables read in bursts of 64
 * states a block, and states of more than 10 qubits with each thread's lo values in registers;
 * IQP as round 4, every other op as round 3. */
#define QM_CUDA_KERNELS_ROUND5 5
static inline int qm_cuda_kernels_r3(int kernels)
{
    return kernels == QM_CUDA_KERNELS_ROUND4 || kernels == QM_CUDA_KERNELS_ROUND5
               ? QM_CUDA_KERNELS_ROUND3
               : kernels;
}
/* The CUDA backend's default (QM_CUDA_KERNELS unset), never passed to a launcher: each op on the
 * generation measured fastest for it (hal/cuda/cuda.c's k_product, k_iqp, k_sums): products and
 * IQP on round 4 (round 2's products below 10 qubits; IQP's fused pass, round 3's phases
 * and wht passes), sums of squares on round 3 for blocks of up to 2^10 and complex128 states,
 * round 2 otherwise. QM_CUDA_KERNELS=round2 runs everything on round 2. */
#define QM_CUDA_KERNELS_DEFAULT (-1)

/* Product-state amplitudes (angle, basis, phase; qm_math.h) into slots [0, n) of `state`, slot
 * i being global index g0 + i, with the factors of state s at table[(s - first_state) * 4 *
 * qubits] (device array). */
int qm_cuda_launch_product(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                           uint64_t first_state, const double *table, double scale, int kernels,
                           void *stream);

/* IQP phase vector (qm_cpu_iqp_phase's contract) into slots [0, n) of `state`, the coefficients
 * of state s at table[(s - first_state) * n_coeffs] (device array). Round 3 (`kernels`
 * QM_CUDA_KERNELS_ROUND3) evaluates qm_math.h's order 3 (a product of unit numbers, the CPU's
 * order); the earlier generations order 1 (cos and sin of the whole phi, qm_iqp_phi). */
int qm_cuda_launch_iqp_phase(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                             unsigned n_coeffs, uint64_t first_state, const double *table,
                             double scale, int kernels, void *stream);

/* Walsh-Hadamard stages over slots [0, n) of `state` (qm_cpu_wht's contract: partner NULL:
 * stages b0 .. b1 - 1 in whole blocks of 2^b1; else the cross-buffer stage with `high`). */
int qm_cuda_launch_wht(void *state, int c128, uint64_t n, unsigned b0, unsigned b1,
                       const void *partner, int high, int kernels, void *stream);

/* The iqp op (hal_ops.h): the phase vector of slots [0, n) (as qm_cuda_launch_iqp_phase), then
 * stages 0 .. b1 - 1 (none for b1 = 0) in whole blocks of 2^b1. Rounds 1 and 2 with qubits >= 10,
 * b1 >= 10 and g0, n multiples of 2^10: the phase and stages 0..9 in one pass, then 10 stages per
 * pass; otherwise the phase pass and qm_cuda_launch_wht. */
int qm_cuda_launch_iqp(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                       unsigned n_coeffs, uint64_t first_state, const double *table, double scale,
                       unsigned b1, int kernels, void *stream);

#ifdef __cplusplus
}
#endif
#endif
