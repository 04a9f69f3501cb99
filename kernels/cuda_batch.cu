// cuda_batch.cu — the fused batch kernel (qm_hal_amp_batch): whole small states, each read once.
// First version: one CUDA block per state; thread 0 sums the state's tree (qm_math.h), then the
// block writes amplitudes (or the stash, for the slow path). Correct, not yet fast.
#include "cuda_kernels.h"
#include "qm_math.h"

#include <cuda_runtime.h>
#include <math.h>

namespace {

template <typename T>
__global__ void amp_batch_simple_kernel(void *state, int c128, uint64_t period, uint64_t pv,
                                        uint64_t n_states, const T *in, double *sums)
{
    __shared__ double coeff;
    __shared__ int fast;
    const unsigned lp = (unsigned)__ffsll((long long)period) - 1;
    for (uint64_t k = blockIdx.x; k < n_states; k += gridDim.x) {
        const T *x = in + k * pv;
        if (threadIdx.x == 0) {
            const double sum = sizeof(T) == 8
                                   ? qm_tree_sumsq((const double *)x, 1, pv, lp, 1.0)
                                   : qm_tree_sumsq_f32((const float *)x, 1, pv, lp, 1.0);
            sums[k] = sum;
            fast = isfinite(sum) && sum >= QM_FAST_SUM_MIN;
            coeff = fast ? 1.0 / sqrt(sum) : 0.0;
        }
        __syncthreads();
        for (uint64_t i = threadIdx.x; i < period; i += blockDim.x) {
            const bool data = i < pv;
            const double v = data ? (double)x[i] : 0.0;
            if (c128) {
                double2 *o = (double2 *)state + k * period + i;
                if (fast)
                    *o = make_double2(data ? qm_amp(v, coeff) : 0.0, 0.0);
                else if (data)
                    *o = make_double2(v, 0.0);
            } else {
                double *o = (double *)state + k * period + i;
                if (fast)
                    *(float2 *)o = make_float2(data ? (float)qm_amp(v, coeff) : 0.0f, 0.0f);
                else if (data)
                    *o = v;
            }
        }
        __syncthreads();
    }
}

} // namespace

extern "C" int qm_cuda_launch_amp_batch(void *state, int c128, uint64_t period, uint64_t period_valid,
                                        uint64_t n_states, const void *in, int in_f64, double *sums,
                                        void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned grid = n_states < 65535u * 16u ? (unsigned)n_states : 65535u * 16u;
    if (in_f64)
        amp_batch_simple_kernel<double><<<grid, 256, 0, s>>>(state, c128, period, period_valid,
                                                             n_states, (const double *)in, sums);
    else
        amp_batch_simple_kernel<float><<<grid, 256, 0, s>>>(state, c128, period, period_valid,
                                                            n_states, (const float *)in, sums);
    return (int)cudaGetLastError();
}
