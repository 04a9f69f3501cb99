// cuda_kernels.cu — CUDA kernels and their launchers (kept thin: no allocation, no sync, no
// messages). The maths comes from qm_math.h so the results equal the CPU kernels bit for bit
// (compiled with --fmad=false). These are the straightforward first versions: one thread per
// reduction block, grid-stride writes; the bandwidth-tuned kernels replace them in the CUDA issue.
#include "cuda_kernels.h"
#include "qm_math.h"

#include <cuda_runtime.h>
#include <math.h>

namespace {

__global__ void fill_kernel(unsigned char *dst, unsigned char v, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

template <typename T>
__global__ void sumsq_kernel(const T *in, uint64_t n_valid, unsigned log2_block, uint64_t n_blocks,
                             double scale, double *out)
{
    const uint64_t bs = (uint64_t)1 << log2_block;
    for (uint64_t b = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; b < n_blocks;
         b += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t lo = b * bs;
        uint64_t valid = lo >= n_valid ? 0 : (n_valid - lo < bs ? n_valid - lo : bs);
        if constexpr (sizeof(T) == 8)
            out[b] = qm_tree_sumsq_double((const double *)in + lo, valid, log2_block, scale);
        else
            out[b] = qm_tree_sumsq_float((const float *)in + lo, valid, log2_block, scale);
    }
}

template <typename T>
__global__ void scan_kernel(const T *in, uint64_t n, unsigned long long *out)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double v = (double)in[i];
        if (!isfinite(v)) {
            atomicMin(&out[1], (unsigned long long)i);
        } else {
            atomicMax(&out[0], (unsigned long long)__double_as_longlong(fabs(v)));
        }
    }
}

template <typename O, typename I>
__global__ void amp_write_kernel(O *out, uint64_t n_out, const I *in, uint64_t n_valid, double coeff)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n_out;
         i += (uint64_t)gridDim.x * blockDim.x) {
        O re = i < n_valid ? (O)((double)in[i] * coeff) : (O)0;
        out[2 * i] = re;
        out[2 * i + 1] = (O)0;
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

extern "C" int qm_cuda_launch_sumsq(const void *in, int in_f64, uint64_t n_valid,
                                    unsigned log2_block, uint64_t n_blocks, double scale,
                                    double *out_sums, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (in_f64)
        sumsq_kernel<double><<<grid_for(n_blocks, 128), 128, 0, s>>>(
            (const double *)in, n_valid, log2_block, n_blocks, scale, out_sums);
    else
        sumsq_kernel<float><<<grid_for(n_blocks, 128), 128, 0, s>>>(
            (const float *)in, n_valid, log2_block, n_blocks, scale, out_sums);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_scan(const void *in, int in_f64, uint64_t n, unsigned long long *out,
                                   void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (in_f64)
        scan_kernel<double><<<grid_for(n, 256), 256, 0, s>>>((const double *)in, n, out);
    else
        scan_kernel<float><<<grid_for(n, 256), 256, 0, s>>>((const float *)in, n, out);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_amp_write(void *out, int out_c128, uint64_t n_out, const void *in,
                                        int in_f64, uint64_t n_valid, double coeff, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(n_out, 256);
    if (out_c128) {
        if (in_f64)
            amp_write_kernel<double, double><<<g, 256, 0, s>>>((double *)out, n_out, (const double *)in, n_valid, coeff);
        else
            amp_write_kernel<double, float><<<g, 256, 0, s>>>((double *)out, n_out, (const float *)in, n_valid, coeff);
    } else {
        if (in_f64)
            amp_write_kernel<float, double><<<g, 256, 0, s>>>((float *)out, n_out, (const double *)in, n_valid, coeff);
        else
            amp_write_kernel<float, float><<<g, 256, 0, s>>>((float *)out, n_out, (const float *)in, n_valid, coeff);
    }
    return (int)cudaGetLastError();
}
