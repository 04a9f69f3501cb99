/* cuda_kernels.h — launchers of the CUDA kernels (kernels/cuda_kernels.cu), callable from C.
 * Each launcher enqueues on `stream` (a cudaStream_t, NULL = default) and returns the cudaError_t
 * of the launch as an int; no allocation, synchronisation or message formatting happens here. */
#ifndef QM_CUDA_KERNELS_H
#define QM_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fill n bytes at dst with `value` (used to poison buffers in tests). */
int qm_cuda_launch_fill(void *dst, unsigned char value, uint64_t n, void *stream);
/* Block sums of squares (see qm_math.h): in_f64 selects double (1) or float (0) input; `in` is
 * already offset; out_sums is a device array of n_blocks doubles. */
int qm_cuda_launch_sumsq(const void *in, int in_f64, uint64_t n_valid, unsigned log2_block,
                         uint64_t n_blocks, double scale, double *out_sums, void *stream);
/* Scan: max |x| (as the bits of a non-negative double) and first non-finite index, accumulated
 * with atomics into out[0] and out[1], which the caller initialises to 0 and UINT64_MAX. */
int qm_cuda_launch_scan(const void *in, int in_f64, uint64_t n, unsigned long long *out,
                        void *stream);
/* Amplitude write (see qm_math.h); out and in already offset; out_c128 selects complex128. */
int qm_cuda_launch_amp_write(void *out, int out_c128, uint64_t n_out, const void *in, int in_f64,
                             uint64_t n_valid, double coeff, void *stream);

#ifdef __cplusplus
}
#endif
#endif
