/* cuda_featuremap.h — the feature-map kernels of kernels/cuda_featuremap.cu, as launchers that
 * kernels/cuda_kernels.cu calls (the public launchers of cuda_kernels.h choose between these and
 * the previous kernels).
 * In: device pointers at the range's first slot (global index g0), plain numbers; `stream` a
 * cudaStream_t. Out: the launch's cudaError_t as an int. Must not: allocate, synchronise.
 */
#ifndef QM_CUDA_FEATUREMAP_H
#define QM_CUDA_FEATUREMAP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The product op (qm_cuda_launch_product's contract) from per-state A, B tables in shared memory
 * (qubits >= 10: one tile of 2^10 amplitudes per block iteration); below 10 qubits one amplitude
 * per thread. round1 != 0: the round-1 kernel (tables rebuilt per tile, grid-stride tiles); 0:
 * round 2 (contiguous tiles per block, hi from a per-state digit table, batches of 10-qubit
 * states 4 tiles per table build). */
int qm_cuda_product_digits(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                           uint64_t first_state, const double *table, double scale, int round1,
                           void *stream);

/* The product op's round 3 (QM_CUDA_KERNELS=round3): the same contract and bits as
 * qm_cuda_product_digits; above 10 qubits the state's whole lo table in shared memory, 10-qubit
 * batches with the next group's factors loaded before the current group is stored and the states
 * split evenly over the blocks; below 10 qubits round 2's kernel. */
int qm_cuda_product_round3(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                           uint64_t first_state, const double *table, double scale, void *stream);

/* The product op's round 4 (QM_CUDA_KERNELS=round4): the same contract and bits; batches of
 * 10-qubit states one warp per state (no block barrier), every other qubit count on round 2's
 * kernels. */
int qm_cuda_product_round4(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                           uint64_t first_state, const double *table, double scale, void *stream);

/* The product op's round 5 (QM_CUDA_KERNELS=round5, the default): the same contract and bits;
 * batches of 10-qubit states with their factor tables read in bursts of 64 states a block, states
 * of more than 10 qubits with each thread's lo values in registers, below 10 qubits round 2. */
int qm_cuda_product_round5(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                           uint64_t first_state, const double *table, double scale, void *stream);

/* Walsh-Hadamard stages [b0, b1) over n slots (whole blocks of 2^b1), in passes of up to 10
 * stages. Needs b0 >= 3. */
int qm_cuda_wht_passes(void *state, int c128, uint64_t n, unsigned b0, unsigned b1, void *stream);

/* Round 3 of the Walsh-Hadamard passes: stages [b0, b1) over n slots (whole blocks of 2^b1),
 * b0 >= 6, in ceil((b1 - b0) / w_max) passes of as equal a number of stages as possible (the
 * longer first), each pass on rows of row_bytes contiguous bytes (256 or 512; >= 512 means 512)
 * when it has at most 8 stages, else on round 2's pass. w_max 0: the default split (at most 8
 * stages per pass, at most ceil(b1 / 10) passes); at most 10. */
/* The number of passes qm_cuda_wht_passes3 makes for stages [b0, b1) with this w_max (0: the
 * default split), for the cost model's and the benchmarks' bounds. */
unsigned qm_cuda_wht3_split(unsigned b0, unsigned b1, unsigned w_max);

int qm_cuda_wht_passes3(void *state, int c128, uint64_t n, unsigned b0, unsigned b1,
                        unsigned w_max, unsigned row_bytes, void *stream);

/* The iqp_phase of slots [0, n) followed by stages 0..9, one pass: needs qubits >= 10, g0 and n
 * multiples of 2^10. round 1: the round-1 kernel (one warp per tile); 2: round 2 (four warps per
 * tile, 8 slots per thread, cos/sin of each phi: order 1); 3: round 3 (round 2's shape, the
 * phases as products of unit numbers: qm_math.h's order 3, the CPU's); 4: round 4 (round 3's
 * phases, one warp per tile, the stages through two shared-memory transposes). */
int qm_cuda_iqp_fused(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                      unsigned n_coeffs, uint64_t first_state, const double *table, double scale,
                      int round, void *stream);

#ifdef __cplusplus
}
#endif
#endif
