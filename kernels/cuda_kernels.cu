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

// ---- the fast path: block sums read straight from an input buffer ------------------------------
// One CUDA block of 256 threads per reduction block of 2^lb elements (9 <= lb <= 14). Warp w owns
// the aligned quarter... eighth W = 2^lb / 8 of it, in chunks of 64 consecutive elements that the
// warp loads coalesced (two per lane). Inside a chunk, lane l holds elements 2l and 2l+1: their
// squares summed, then xor-shuffles with offsets 1, 2, 4, 8, 16 combine neighbouring subtrees, which
// is exactly the pairwise tree of qm_math.h (a + b and b + a round alike). Chunk c's sum is kept by
// lane c; the same shuffles then combine the chunk sums, and thread 0 combines the 8 warp sums
// pairwise. Elements past the block's data count as 0, as on the CPU.
template <typename T>
__device__ __forceinline__ double qm_load_sq(const T *p, uint64_t e, uint64_t valid, double scale)
{
    return e < valid ? qm_sq((double)p[e], scale) : 0.0;
}

__device__ __forceinline__ double warp_tree(double v)
{
    for (int off = 1; off < 32; off <<= 1)
        v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The tree of one reduction block, given pair(e) = sq(x[e]) + sq(x[e + 1]) for the block's
// elements (0 past the data): the structure described above, shared by the input and stash kernels.
template <typename Pair>
__device__ __forceinline__ void block_tree(const Pair &pair, uint64_t bs, double *out_b)
{
    __shared__ double warp_sums[8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint64_t W = bs >> 3, chunks = W >> 6;
    double mine = 0.0;
    for (uint64_t c = 0; c < chunks; ++c) {
        double v = pair((uint64_t)warp * W + c * 64 + 2 * (uint64_t)lane);
        for (int off = 1; off < 32; off <<= 1) /* levels 2..6 of the chunk's tree */
            v = v + __shfl_xor_sync(0xffffffffu, v, off);
        if ((uint64_t)lane == c)
            mine = v;
    }
    const double wsum = warp_tree(mine); /* chunk sums of this warp, pairwise */
    if (lane == 0)
        warp_sums[warp] = wsum;
    __syncthreads();
    if (threadIdx.x == 0) {
        const double *w = warp_sums;
        *out_b = ((w[0] + w[1]) + (w[2] + w[3])) + ((w[4] + w[5]) + (w[6] + w[7]));
    }
}

template <typename T>
__global__ void __launch_bounds__(256) sumsq_input_kernel(const T *in, uint64_t in_first,
                                                          uint64_t g0, uint64_t period,
                                                          uint64_t period_valid, unsigned lb,
                                                          double scale, double *out)
{
    const uint64_t bs = (uint64_t)1 << lb, b = blockIdx.x;
    const uint64_t gs = g0 + b * bs;
    const uint64_t valid = qm_block_valid(gs, bs, period, period_valid);
    const T *base = valid ? in + ((gs / period) * period_valid + gs % period - in_first) : in;
    /* two elements per lane in one 8- or 16-byte load where the pair is aligned and whole */
    const bool aligned = ((uintptr_t)base % (2 * sizeof(T))) == 0;
    auto pair = [&](uint64_t e) -> double {
        if (aligned && e + 1 < valid) {
            if (sizeof(T) == 8) {
                const double2 p = __ldg((const double2 *)(base + e));
                return qm_sq(p.x, scale) + qm_sq(p.y, scale);
            }
            const float2 p = __ldg((const float2 *)(base + e));
            return qm_sq((double)p.x, scale) + qm_sq((double)p.y, scale);
        }
        return qm_load_sq(base, e, valid, scale) + qm_load_sq(base, e + 1, valid, scale);
    };
    block_tree(pair, bs, out + b);
}

// The same over stashed values (stride k doubles: 1 for complex64 slots, 2 for complex128).
__global__ void __launch_bounds__(256) sumsq_stash_kernel(const double *state, uint64_t k,
                                                          uint64_t g0, uint64_t period,
                                                          uint64_t period_valid, unsigned lb,
                                                          double scale, double *out)
{
    const uint64_t bs = (uint64_t)1 << lb, b = blockIdx.x;
    const uint64_t valid = qm_block_valid(g0 + b * bs, bs, period, period_valid);
    const double *base = state + b * bs * k;
    auto pair = [&](uint64_t e) -> double {
        const double a0 = e < valid ? qm_sq(base[e * k], scale) : 0.0;
        const double a1 = e + 1 < valid ? qm_sq(base[(e + 1) * k], scale) : 0.0;
        return a0 + a1;
    };
    block_tree(pair, bs, out + b);
}

// In place over the stash of one state: slot i's double becomes its amplitude.
__global__ void amp_stash_one_state_kernel(void *state, int c128, uint64_t n, uint64_t local0,
                                           uint64_t period_valid, double coeff)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const bool data = local0 + i < period_valid;
        if (c128) {
            double2 *o = (double2 *)state + i;
            o[0] = make_double2(data ? qm_amp(o[0].x, coeff) : 0.0, 0.0);
        } else {
            double *slot = (double *)state + i;
            const float re = data ? (float)qm_amp(*slot, coeff) : 0.0f;
            *(float2 *)slot = make_float2(re, 0.0f);
        }
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

// The fast write path: every slot of one state, from an input buffer; two slots per thread with
// 16-byte stores (complex128: two double2; complex64: one float4) when aligned.
template <typename T>
__global__ void amp_one_state_kernel(void *state, int c128, uint64_t n, uint64_t local0,
                                     uint64_t period_valid, double coeff, const T *x)
{
    const uint64_t pairs = (n + 1) / 2;
    const bool aligned = ((uintptr_t)x % (2 * sizeof(T))) == 0;
    for (uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; t < pairs;
         t += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t i = 2 * t;
        const uint64_t l0 = local0 + i;
        double a0 = 0.0, a1 = 0.0;
        if (aligned && i + 1 < n && l0 + 1 < period_valid) { /* one 8- or 16-byte load */
            if (sizeof(T) == 8) {
                const double2 p = __ldg((const double2 *)((const double *)x + i));
                a0 = qm_amp(p.x, coeff);
                a1 = qm_amp(p.y, coeff);
            } else {
                const float2 p = __ldg((const float2 *)((const float *)x + i));
                a0 = qm_amp((double)p.x, coeff);
                a1 = qm_amp((double)p.y, coeff);
            }
        } else {
            a0 = l0 < period_valid ? qm_amp((double)x[i], coeff) : 0.0;
            a1 = i + 1 < n && l0 + 1 < period_valid ? qm_amp((double)x[i + 1], coeff) : 0.0;
        }
        if (c128) {
            double2 *o = (double2 *)state + i;
            o[0] = make_double2(a0, 0.0);
            if (i + 1 < n)
                o[1] = make_double2(a1, 0.0);
        } else if (i + 1 < n) {
            *(float4 *)((float2 *)state + i) = make_float4((float)a0, 0.0f, (float)a1, 0.0f);
        } else {
            ((float2 *)state)[i] = make_float2((float)a0, 0.0f);
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
    cudaStream_t s = (cudaStream_t)stream;
    if (in && log2_block >= 9 && log2_block <= QM_RED_LOG2_BLOCK && n_blocks <= 0x7fffffffu) {
        if (in_f64)
            sumsq_input_kernel<double><<<(unsigned)n_blocks, 256, 0, s>>>(
                (const double *)in, in_first, g0, period, period_valid, log2_block, scale, out_sums);
        else
            sumsq_input_kernel<float><<<(unsigned)n_blocks, 256, 0, s>>>(
                (const float *)in, in_first, g0, period, period_valid, log2_block, scale, out_sums);
        return (int)cudaGetLastError();
    }
    if (!in && log2_block >= 9 && log2_block <= QM_RED_LOG2_BLOCK && n_blocks <= 0x7fffffffu) {
        sumsq_stash_kernel<<<(unsigned)n_blocks, 256, 0, s>>>(
            (const double *)state, c128 ? 2 : 1, g0, period, period_valid, log2_block, scale, out_sums);
        return (int)cudaGetLastError();
    }
    sumsq_kernel<<<grid_for(n_blocks, 128), 128, 0, s>>>(
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

extern "C" int qm_cuda_launch_amp_one_state(void *state, int c128, uint64_t n, uint64_t local0,
                                            uint64_t period_valid, double coeff, const void *x,
                                            int in_f64, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (!x) {
        amp_stash_one_state_kernel<<<grid_for(n, 256), 256, 0, s>>>(state, c128, n, local0,
                                                                     period_valid, coeff);
        return (int)cudaGetLastError();
    }
    const unsigned g = grid_for((n + 1) / 2, 256);
    if (in_f64)
        amp_one_state_kernel<double><<<g, 256, 0, s>>>(state, c128, n, local0, period_valid, coeff,
                                                       (const double *)x);
    else
        amp_one_state_kernel<float><<<g, 256, 0, s>>>(state, c128, n, local0, period_valid, coeff,
                                                      (const float *)x);
    return (int)cudaGetLastError();
}
