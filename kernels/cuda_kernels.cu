// cuda_kernels.cu — CUDA kernels and their launchers (kept thin: no allocation, no sync, no
// messages). The maths comes from qm_math.h so the results equal the CPU kernels bit for bit
// (compiled with --fmad=false). These are the straightforward first versions: one thread per
// reduction block, grid-stride loops elsewhere; bandwidth-tuned kernels come with the CUDA issue.
#include "cuda_kernels.h"
#include "qm_math.h"

#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

namespace {

__global__ void fill_kernel(unsigned char *dst, unsigned char v, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

template <typename T>
__global__ void stash_kernel(double *o, uint64_t k, uint64_t slot_g0, uint64_t period,
                             uint64_t period_valid, const T *x, uint64_t in_first, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t e = in_first + i;
        const uint64_t slot = (e / period_valid) * period + e % period_valid - slot_g0;
        o[k * slot] = (double)x[i];
        if (k == 2)
            o[2 * slot + 1] = 0.0;
    }
}

__global__ void sumsq_kernel(const double *x, uint64_t k, uint64_t g0, uint64_t period,
                             uint64_t period_valid, unsigned log2_block, uint64_t n_blocks,
                             double scale, double *out, const void *in, int in_f64,
                             uint64_t in_first)
{
    const uint64_t bs = (uint64_t)1 << log2_block;
    for (uint64_t b = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; b < n_blocks;
         b += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t lo = b * bs, gs = g0 + lo;
        const uint64_t valid = qm_block_valid(gs, bs, period, period_valid);
        if (!in) {
            out[b] = qm_tree_sumsq(x + lo * k, k, valid, log2_block, scale);
            continue;
        }
        const uint64_t e = (gs / period) * period_valid + gs % period - in_first;
        out[b] = valid == 0 ? 0.0
                 : in_f64 ? qm_tree_sumsq((const double *)in + e, 1, valid, log2_block, scale)
                          : qm_tree_sumsq_f32((const float *)in + e, 1, valid, log2_block, scale);
    }
}

__global__ void scan_kernel(const double *x, uint64_t k, uint64_t n, unsigned long long *out)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const double v = x[k * i];
        if (!isfinite(v))
            atomicMin(&out[1], (unsigned long long)i);
        else
            atomicMax(&out[0], (unsigned long long)__double_as_longlong(fabs(v)));
    }
}

__global__ void amp_scale_kernel(void *state, int c128, uint64_t n, uint64_t g0, uint64_t period,
                                 uint64_t period_valid, uint64_t first_state, const double *coeffs,
                                 const void *in, int in_f64, uint64_t in_first)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t g = g0 + i, sidx = g / period, local = g % period;
        const bool data = local < period_valid;
        double x = 0.0;
        if (data) {
            if (in) {
                const uint64_t e = sidx * period_valid + local - in_first;
                x = in_f64 ? ((const double *)in)[e] : (double)((const float *)in)[e];
            } else {
                x = c128 ? ((const double *)state)[2 * i] : ((const double *)state)[i];
            }
        }
        if (c128) {
            double *o = (double *)state;
            o[2 * i] = data ? qm_amp(x, coeffs[sidx - first_state]) : 0.0;
            o[2 * i + 1] = 0.0;
        } else {
            float2 amp = make_float2(0.0f, 0.0f);
            if (data)
                amp.x = (float)qm_amp(x, coeffs[sidx - first_state]);
            ((float2 *)state)[i] = amp;
        }
    }
}

unsigned grid_for(uint64_t n, unsigned threads)
{
    uint64_t g = (n + threads - 1) / threads;
    if (g > 65535u * 16u)
        g = 65535u * 16u;
    return g ? (unsigned)g : 1u;
}

} // namespace

extern "C" int qm_cuda_launch_fill(void *dst, unsigned char value, uint64_t n, void *stream)
{
    fill_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>((unsigned char *)dst, value, n);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_stash(void *state, int c128, uint64_t slot_g0, uint64_t period,
                                    uint64_t period_valid, const void *in, int f64,
                                    uint64_t in_first, uint64_t n, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const uint64_t k = c128 ? 2 : 1;
    if (f64)
        stash_kernel<double><<<grid_for(n, 256), 256, 0, s>>>(
            (double *)state, k, slot_g0, period, period_valid, (const double *)in, in_first, n);
    else
        stash_kernel<float><<<grid_for(n, 256), 256, 0, s>>>(
            (double *)state, k, slot_g0, period, period_valid, (const float *)in, in_first, n);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_sumsq(const void *state, int c128, uint64_t g0, uint64_t period,
                                    uint64_t period_valid, unsigned log2_block, uint64_t n_blocks,
                                    double scale, double *out_sums, const void *in, int in_f64,
                                    uint64_t in_first, void *stream)
{
    sumsq_kernel<<<grid_for(n_blocks, 128), 128, 0, (cudaStream_t)stream>>>(
        (const double *)state, c128 ? 2 : 1, g0, period, period_valid, log2_block, n_blocks, scale,
        out_sums, in, in_f64, in_first);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_scan(const void *state, int c128, uint64_t n, unsigned long long *out,
                                   void *stream)
{
    scan_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>((const double *)state,
                                                                      c128 ? 2 : 1, n, out);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_amp_scale(void *state, int c128, uint64_t n, uint64_t g0,
                                        uint64_t period, uint64_t period_valid,
                                        uint64_t first_state, const double *coeffs, const void *in,
                                        int in_f64, uint64_t in_first, void *stream)
{
    amp_scale_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        state, c128, n, g0, period, period_valid, first_state, coeffs, in, in_f64, in_first);
    return (int)cudaGetLastError();
}
