/* cpu_kernels.h — CPU (OpenMP) implementations of the HAL kernels, used by hal/sim.
 *
 * In: host pointers and slot ranges already bounds-checked by the HAL wrappers (see hal/hal_ops.h
 * for what stash / sumsq / scan / amp_scale / amp_batch do), element types as plain qmk_elem.
 * Out: stashed values, block sums, scan results and amplitudes computed with kernels/qm_math.h, so
 * that any thread count gives the same bits (work is cut into fixed blocks; threads only choose
 * which block to do).
 * Must not: allocate, fail, include anything of the engine or the HAL, read the environment, or
 * depend on the OpenMP thread count for any result.
 */
#ifndef QM_CPU_KERNELS_H
#define QM_CPU_KERNELS_H

#include "qmk_elem.h"

#include <stdint.h>

void qm_cpu_stash(void *state, qmk_elem state_elem, uint64_t slot_g0, uint64_t period,
                  uint64_t period_valid, const void *in, qmk_elem in_elem, uint64_t in_off,
                  uint64_t in_first, uint64_t n);

/* From the stash of `state` (in == NULL), or from input `in` (in_elem; element 0 = input element
 * in_first) when in is not NULL. */
void qm_cpu_sumsq_blocks(const void *state, qmk_elem state_elem, uint64_t off, uint64_t g0,
                         uint64_t period, uint64_t period_valid, unsigned log2_block,
                         uint64_t n_blocks, double scale, double *out_sums, const void *in,
                         qmk_elem in_elem, uint64_t in_first);

/* The norm check's block sums of |psi|^2 over n written amplitudes at `state` (complex64 or
 * complex128 slots), slot 0 being global index g0: one sum per aligned global block of
 * 2^log2_block slots the range touches, into out_sums[0 ..]; a block cut by the range counts its
 * missing slots as +0 (qm_tree_normsq_* of qm_math.h). */
void qm_cpu_state_sumsq(const void *state, qmk_elem state_elem, uint64_t n, uint64_t g0,
                        unsigned log2_block, double *out_sums);

/* Piece sums from block sums: out[j] = the pairwise root (qm_tree_root) of the 2^log2_group
 * sums in[j << log2_group ..], for j < n_groups. in and out do not overlap. */
void qm_cpu_tree_combine(const double *in, uint64_t n_groups, unsigned log2_group, double *out);

void qm_cpu_scan(const void *state, qmk_elem state_elem, uint64_t off, uint64_t n,
                 double *max_abs, uint64_t *first_nonfinite);

void qm_cpu_amp_scale(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                      uint64_t period, uint64_t period_valid, uint64_t first_state,
                      const double *coeffs, const double *scales, const void *in,
                      qmk_elem in_elem, uint64_t in_first);

/* Fused encode of n_states whole small states (see qm_hal_amp_batch in hal/hal_ops.h). */
void qm_cpu_amp_batch(void *state, qmk_elem state_elem, uint64_t off, uint64_t period,
                      uint64_t period_valid, uint64_t n_states, const void *in, qmk_elem in_elem,
                      uint64_t in_off, double *sums, uint64_t sums_off);

/* Product-state amplitudes (angle, basis, phase; qm_math.h) into slots [off, off + n) of `state`,
 * slot i being global index g0 + i: state (g0 + i) >> qubits, whose factors are table[(state -
 * first_state) * 4 * qubits ...]. */
void qm_cpu_product(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                    unsigned qubits, uint64_t first_state, const double *table, double scale);

/* IQP phase vector: slots [off, off + n) of `state` become scale * (cos phi, sin phi) of their
 * local index (qm_iqp_phi), slot i being global index g0 + i, whose state's n_coeffs coefficients
 * are table[(state - first_state) * n_coeffs ...]. */
void qm_cpu_iqp_phase(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, uint64_t g0,
                      unsigned qubits, unsigned n_coeffs, uint64_t first_state,
                      const double *table, double scale);

/* Walsh-Hadamard stages (qm_hal_wht in hal/hal_ops.h): partner NULL: stages b0 .. b1 - 1 over
 * slots [off, off + n) (whole blocks of 2^b1); else the cross-buffer stage: slot off + i becomes
 * x + y (high 0) or y - x (high 1), y being slot i of partner (same element type). Deterministic
 * for any thread count. */
void qm_cpu_wht(void *state, qmk_elem state_elem, uint64_t off, uint64_t n, unsigned b0,
                unsigned b1, const void *partner, int high);

#endif
