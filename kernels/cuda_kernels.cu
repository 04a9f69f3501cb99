// cuda_kernels.cu — CUDA kernels and their launchers (kept thin: no allocation, no sync, no
// messages). The maths comes from qm_math.h so the results equal the CPU kernels bit for bit
// (compiled with --fmad=false). The large-state paths are tuned (block sums: one CUDA block per
// reduction block with warp-shuffle trees; amplitudes: 16-byte loads and stores); the general
// kernels (grid-stride, one thread per reduction block for blocks under 2^11) serve the rest.
#include "cuda_kernels.h"
#include "cuda_featuremap.h"
#include "qm_math.h"
#include "qm_passes.h"

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

// ---- the fast path: one CUDA block of 256 threads per reduction block of 2^lb elements ---------
// (11 <= lb <= 14). Warp w owns the aligned eighth W = 2^lb / 8 of the block, in chunks of 256
// consecutive elements; in a chunk, lane l owns the 8 elements 8l..8l+7 and sums them as one leaf
// of qm_math.h (qm_leaf8_combine). Xor-shuffles with offsets 1, 2, 4, 8, 16 then combine
// neighbouring leaves, which is exactly the pairwise tree (a + b and b + a round alike); chunk c's
// sum is kept by lane c, the same shuffles combine the chunk sums (lanes past the last chunk hold
// +0, and adding +0 is exact), and thread 0 combines the 8 warp sums pairwise. Elements past the
// block's data count as 0, as on the CPU. Each lane loads 64 bytes of float64 per chunk (four
// 16-byte loads) and two chunks are in flight before the first shuffle; for float32 (32 bytes
// per chunk) four chunks.
#define QM_FULL_MASK 0xffffffffu

__device__ __forceinline__ double warp_tree(double v)
{
    for (int off = 1; off < 32; off <<= 1)
        v = v + __shfl_xor_sync(QM_FULL_MASK, v, off);
    return v;
}

template <int K, typename Leaf>
__device__ __forceinline__ void block_tree(const Leaf &leaf, uint64_t bs, double *out_b)
{
    __shared__ double warp_sums[8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint64_t W = bs >> 3;
    const unsigned chunks = (unsigned)(W >> 8); /* 1..8 */
    const uint64_t first = (uint64_t)warp * W + 8 * (uint64_t)lane;
    double mine = 0.0;
    for (unsigned c = 0; c < chunks; c += K) { /* K chunks loaded before the first shuffle */
        double v[K];
#pragma unroll
        for (int k = 0; k < K; ++k)
            v[k] = c + k < chunks ? leaf(first + (uint64_t)(c + k) * 256) : 0.0;
        for (int off = 1; off < 32; off <<= 1) { /* the chunk's levels above the leaves */
#pragma unroll
            for (int k = 0; k < K; ++k)
                v[k] = v[k] + __shfl_xor_sync(QM_FULL_MASK, v[k], off);
        }
#pragma unroll
        for (int k = 0; k < K; ++k)
            if ((unsigned)lane == c + k)
                mine = v[k];
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

/* The leaf of the 8 values at elements [e, e + 8) of a block: vector loads when the block is all
 * data and 16-byte aligned, else one checked load per element. */
template <typename T>
struct input_leaf {
    const T *base;
    uint64_t valid;
    bool vec;
    double scale;
    __device__ __forceinline__ double operator()(uint64_t e) const
    {
        double q[8];
        if (vec && sizeof(T) == 8) {
            const double2 *p = (const double2 *)(base + e);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const double2 v = __ldg(p + j);
                q[2 * j] = qm_sq(v.x, scale);
                q[2 * j + 1] = qm_sq(v.y, scale);
            }
        } else if (vec) {
            const float4 *p = (const float4 *)(base + e);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float4 v = __ldg(p + j);
                q[4 * j] = qm_sq((double)v.x, scale);
                q[4 * j + 1] = qm_sq((double)v.y, scale);
                q[4 * j + 2] = qm_sq((double)v.z, scale);
                q[4 * j + 3] = qm_sq((double)v.w, scale);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                q[j] = e + j < valid ? qm_sq((double)base[e + j], scale) : 0.0;
        }
        return qm_leaf8_combine(q);
    }
};

/* The same over stashed values: stride k doubles (1: complex64 slots, 2: complex128 slots). */
struct stash_leaf {
    const double *base;
    uint64_t k, valid;
    bool aligned;
    double scale;
    __device__ __forceinline__ double operator()(uint64_t e) const
    {
        double q[8];
        if (k == 2 && e + 8 <= valid && aligned) {
            const double2 *p = (const double2 *)base + e;
#pragma unroll
            for (int j = 0; j < 8; ++j)
                q[j] = qm_sq(p[j].x, scale);
        } else if (k == 1 && e + 8 <= valid && aligned) {
            const double2 *p = (const double2 *)(base + e);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const double2 v = p[j];
                q[2 * j] = qm_sq(v.x, scale);
                q[2 * j + 1] = qm_sq(v.y, scale);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                q[j] = e + j < valid ? qm_sq(base[(e + j) * k], scale) : 0.0;
        }
        return qm_leaf8_combine(q);
    }
};

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
    const input_leaf<T> leaf = {base, valid, valid == bs && ((uintptr_t)base % 16) == 0, scale};
    block_tree<sizeof(T) == 8 ? 2 : 4>(leaf, bs, out + b); /* 128 bytes per lane in flight */
}

// The same over stashed values (slots of the state buffer; always 16-byte aligned).
__global__ void __launch_bounds__(256) sumsq_stash_kernel(const double *state, uint64_t k,
                                                          uint64_t g0, uint64_t period,
                                                          uint64_t period_valid, unsigned lb,
                                                          double scale, double *out)
{
    const uint64_t bs = (uint64_t)1 << lb, b = blockIdx.x;
    const uint64_t valid = qm_block_valid(g0 + b * bs, bs, period, period_valid);
    const double *base = state + b * bs * k;
    const stash_leaf leaf = {base, k, valid, k == 2 || ((uintptr_t)base % 16) == 0, scale};
    block_tree<2>(leaf, bs, out + b);
}

// In place over the stash of one state: slot i's double becomes its amplitude.
__global__ void amp_stash_one_state_kernel(void *state, int c128, uint64_t n, uint64_t local0,
                                           uint64_t period_valid, double scale, double coeff)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const bool data = local0 + i < period_valid;
        if (c128) {
            double2 *o = (double2 *)state + i;
            o[0] = make_double2(data ? qm_amp_scaled(o[0].x, scale, coeff) : 0.0, 0.0);
        } else {
            double *slot = (double *)state + i;
            const float re = data ? (float)qm_amp_scaled(*slot, scale, coeff) : 0.0f;
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
                                 const double *scales, const void *in, int in_f64,
                                 uint64_t in_first)
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
        const double sc = scales ? scales[sidx - first_state] : 1.0;
        if (c128) {
            double *o = (double *)state;
            o[2 * i] = data ? qm_amp_scaled(x, sc, coeffs[sidx - first_state]) : 0.0;
            o[2 * i + 1] = 0.0;
        } else {
            float2 amp = make_float2(0.0f, 0.0f);
            if (data)
                amp.x = (float)qm_amp_scaled(x, sc, coeffs[sidx - first_state]);
            ((float2 *)state)[i] = amp;
        }
    }
}

// The fast write path: every slot of one state, from an input buffer. A block covers tiles of
// 4 * 256 consecutive slots; thread t does slots t, t + 256, t + 512, t + 768 of its tile, so
// every warp-wide load and store touches consecutive addresses (an 8- or 4-byte load, a 16- or
// 8-byte store per lane), with the four loads issued before the first store.
// (Four consecutive slots per thread, measured on the H200 on 2026-12-02, ran at 47% of DRAM
// bandwidth: each warp instruction then strides 64 bytes per lane.)
#define QM_AMP_PER_THREAD 4
template <typename T>
__global__ void __launch_bounds__(256) amp_one_state_kernel(void *state, int c128, uint64_t n,
                                                            uint64_t local0, uint64_t period_valid,
                                                            double scale, double coeff, const T *x)
{
    const uint64_t tile = (uint64_t)QM_AMP_PER_THREAD * blockDim.x;
    for (uint64_t base = blockIdx.x * tile; base < n; base += (uint64_t)gridDim.x * tile) {
        double a[QM_AMP_PER_THREAD];
#pragma unroll
        for (int j = 0; j < QM_AMP_PER_THREAD; ++j) {
            const uint64_t i = base + threadIdx.x + (uint64_t)j * blockDim.x;
            a[j] = i < n && local0 + i < period_valid
                       ? qm_amp_scaled((double)__ldg(x + i), scale, coeff)
                       : 0.0;
        }
#pragma unroll
        for (int j = 0; j < QM_AMP_PER_THREAD; ++j) {
            const uint64_t i = base + threadIdx.x + (uint64_t)j * blockDim.x;
            if (i >= n)
                break;
            if (c128)
                ((double2 *)state)[i] = make_double2(a[j], 0.0);
            else
                ((float2 *)state)[i] = make_float2((float)a[j], 0.0f);
        }
    }
}

// float32 input to complex64 slots, two slots per lane: an 8-byte load (float2) and a 16-byte
// store (two complex64) per pair, both consecutive across the warp; thread t does pairs t,
// t + 256, t + 512, t + 768 of a tile of 1024 pairs, all four loads issued first. Needs x 8-byte
// and the state 16-byte aligned (the launcher checks). The one-slot kernel above moves 4 and 8
// bytes per lane here.
__global__ void __launch_bounds__(256) amp_pairs_f32_kernel(float4 *state, uint64_t n,
                                                            uint64_t local0, uint64_t period_valid,
                                                            double scale, double coeff,
                                                            const float2 *x)
{
    const uint64_t tile = (uint64_t)QM_AMP_PER_THREAD * blockDim.x, pairs = (n + 1) / 2;
    for (uint64_t base = blockIdx.x * tile; base < pairs; base += (uint64_t)gridDim.x * tile) {
        float2 v[QM_AMP_PER_THREAD];
#pragma unroll
        for (int j = 0; j < QM_AMP_PER_THREAD; ++j) {
            /* only data slots are read: the input ends at slot period_valid - local0 */
            const uint64_t p = base + threadIdx.x + (uint64_t)j * blockDim.x, i = 2 * p;
            v[j] = make_float2(0.0f, 0.0f);
            if (i + 1 < n && local0 + i + 1 < period_valid)
                v[j] = __ldg(x + p);
            else if (i < n && local0 + i < period_valid)
                v[j].x = __ldg((const float *)x + i);
        }
#pragma unroll
        for (int j = 0; j < QM_AMP_PER_THREAD; ++j) {
            const uint64_t p = base + threadIdx.x + (uint64_t)j * blockDim.x, i = 2 * p;
            if (i >= n)
                break;
            const float a0 =
                local0 + i < period_valid ? (float)qm_amp_scaled((double)v[j].x, scale, coeff) : 0.0f;
            if (i + 1 < n) {
                const float a1 =
                    local0 + i + 1 < period_valid ? (float)qm_amp_scaled((double)v[j].y, scale, coeff)
                                                   : 0.0f;
                state[p] = make_float4(a0, 0.0f, a1, 0.0f);
            } else {
                ((float2 *)state)[i] = make_float2(a0, 0.0f);
            }
        }
    }
}

// ---- the norm check: sums of |psi|^2 of written amplitudes (qm_tree_normsq_* of qm_math.h) -----
// One CUDA block per reduction block of 2^lb slots (11 <= lb <= 14) through block_tree, whose
// leaves are 8 terms re * re + im * im; a block cut by the range (its first or last) reads only
// the slots in range and counts the others as +0, as the CPU kernel does.
template <typename T>
struct amp_leaf {
    const T *first; /* the amplitude of block position lo */
    uint64_t lo, hi;
    bool full;      /* lo == 0, hi == the block size and `first` 16-byte aligned */
    __device__ __forceinline__ double operator()(uint64_t e) const
    {
        double q[8];
        if (full && sizeof(T) == 8) {
            const double2 *p = (const double2 *)first + e;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const double2 v = __ldg(p + j);
                q[j] = v.x * v.x + v.y * v.y;
            }
        } else if (full) {
            const float4 *p = (const float4 *)(first + 2 * e);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float4 v = __ldg(p + j);
                const double a = v.x, b = v.y, c = v.z, d = v.w;
                q[2 * j] = a * a + b * b;
                q[2 * j + 1] = c * c + d * d;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const uint64_t p = e + j;
                if (p >= lo && p < hi) {
                    const double re = (double)first[2 * (p - lo)], im = (double)first[2 * (p - lo) + 1];
                    q[j] = re * re + im * im;
                } else {
                    q[j] = 0.0;
                }
            }
        }
        return qm_leaf8_combine(q);
    }
};

template <typename T>
__global__ void __launch_bounds__(256) state_sumsq_block_kernel(const T *state, uint64_t n,
                                                                uint64_t g0, unsigned lb,
                                                                double *out)
{
    const uint64_t bs = (uint64_t)1 << lb, b = blockIdx.x;
    const uint64_t gs = ((g0 >> lb) + b) << lb;
    const uint64_t a = gs > g0 ? gs : g0, e = gs + bs < g0 + n ? gs + bs : g0 + n;
    const T *first = state + 2 * (a - g0);
    const amp_leaf<T> leaf = {first, a - gs, e - gs,
                              a == gs && e == gs + bs && ((uintptr_t)first % 16) == 0};
    block_tree<2>(leaf, bs, out + b);
}

// Blocks under 2^11 slots: one thread per block, the tree of qm_math.h itself.
__global__ void state_sumsq_small_kernel(const void *state, int c128, uint64_t n, uint64_t g0,
                                         unsigned lb, uint64_t n_blocks, double *out)
{
    const uint64_t bs = (uint64_t)1 << lb;
    for (uint64_t b = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; b < n_blocks;
         b += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t gs = ((g0 >> lb) + b) << lb;
        const uint64_t a = gs > g0 ? gs : g0, e = gs + bs < g0 + n ? gs + bs : g0 + n;
        out[b] = c128 ? qm_tree_normsq_c128((const double *)state + 2 * (a - g0), a - gs, e - gs, lb)
                      : qm_tree_normsq_c64((const float *)state + 2 * (a - g0), a - gs, e - gs, lb);
    }
}

// ---- round 3 of the sums of squares (QM_CUDA_KERNELS=round3): one warp per reduction block -----
// For the sumsq op (the amplitude encoding's input sums, over the input or the stash: the
// `local_norm` phase of an encode) and the state_sumsq op (the norm check of written states).
// Why the kernels above run at about a third of the read bandwidth (plan vs encode, run 20:
// local_norm 3.17 ms for the 4 GiB stash of a 2^28 complex128 state, ~0.9 ms at 4.7 TB/s): in
// their leaves lane l reads 8 consecutive elements (128 bytes of complex128 slots, 64 of float64
// input), so one warp load instruction touches 32 (16) different 128-byte lines with 16 bytes
// each. The L1 serves such an instruction in one wavefront per line touched: ~2 M wavefronts per
// SM for the 32 MB per SM of that state, ~1 ms at 1.98 GHz before any DRAM time, and the 8
// instructions of a leaf ask for the same sectors twice over while the first misses are still in
// flight. Blocks of fewer than 2^11 elements (a batch of 10-qubit states: one block per state)
// took the one-thread-per-block kernels: 128 leaves of dependent-latency loads per thread at a
// lane stride of 16 KiB.
// Here lane l of row r of a group reads elements [E (32 r + l), E (32 r + l) + E) of the group
// with one load of 16 bytes (8 when not 16-byte aligned): E = 1 for complex128 slots (state or
// stash), 2 for complex64 slots, stashed doubles and float64 input, 4 for float32 input. Every
// warp load is 512 consecutive bytes, 4 wavefronts, each sector asked for once. A group is 8
// rows (256 E elements, 4 KiB), the 8 loads issued before the first shuffle (128 bytes per lane
// in flight; ~40 resident warps per SM keep ~160 KiB per SM in flight, well above the ~30 KiB
// per SM that 4.7 TB/s x ~1 us of latency needs over 132 SMs).
// The sum is qm_math.h's tree, bit for bit: element p of the block is group p / 256E, row
// (p / 32E) % 8, lane (p / E) % 32, in-lane p % E, so the tree levels are, from the bottom: the
// in-lane ones (E = 2, 4), the lane bits 0..4, the row bits, the group bits; every node is left
// + right (or right + left, which rounds alike). The lane levels use the transposing butterfly:
// at offset 1 the 8 row values of a lane are paired (rows 2k, 2k + 1): the lane with bit 0 clear
// keeps row 2k and sends row 2k + 1, its partner the reverse, so each shuffle does useful work
// for two rows (4 + 2 + 1 shuffles for offsets 1, 2, 4 instead of 8 + 8 + 8); after offset 4,
// lane l holds row l % 8 summed over its 8 lanes, offsets 8 and 16 are plain butterflies (row
// l % 8 over all 32 lanes), and offsets 1, 2, 4 once more combine the 8 rows: 12 float64
// shuffles (24 SHFL) per group, ~0.1 ms per SM for a 2^28 complex128 state at one SHFL per
// clock, under the ~0.9 ms of its read. Group g's sum is kept by lane g % 32; the warp_tree of
// those (+0 past the last group: exact) sums 32 groups, and a block of 64 groups (2^14
// complex128 slots) adds its two halves. A block that is not all data (cut by the range, padding
// past period_valid, an unaligned input block) takes the same path with checked element loads,
// +0 outside the data: the tree with +0 in the missing positions, as the CPU forms it; a block
// without data is +0 at once. No shared memory, no barrier: warps are independent; 256 threads
// per CUDA block (8 reduction blocks). Registers (ptxas -v, sm_90): state_sumsq 48 (complex128,
// complex64 single slots) and 58 (complex64 pairs), sumsq over the stash 43-48, over float64
// input 62, float32 input 64: 4-5 blocks = 32-40 warps per SM, 128 bytes per lane in flight, so
// 128-160 KiB per SM. ptxas keeps 8-16 bytes of the state_sumsq kernels on the stack (one spill
// store and load, not in the load loop).

/* The sum of E terms t[0..E) as the bottom levels of the tree. */
template <int E>
__device__ __forceinline__ double lane_tree(const double (&t)[E])
{
    if (E == 1)
        return t[0];
    if (E == 2)
        return t[0] + t[E - 1];
    return (t[0] + t[1 % E]) + (t[2 % E] + t[3 % E]);
}

__device__ __forceinline__ double nsq_term(double re, double im) { return re * re + im * im; }

/* Written amplitudes (state_sumsq): x is the amplitude of block position lo; [lo, hi) in range;
 * full: the whole block, 16-byte aligned when E = 2. */
template <typename T, int E>
struct amp_view {
    const T *x;
    uint64_t lo, hi;
    bool full;
    __device__ __forceinline__ bool empty() const { return lo >= hi; }
    __device__ __forceinline__ double term(uint64_t p) const
    {
        if (full) {
            if (sizeof(T) == 8) {
                const double2 v = __ldg((const double2 *)x + p);
                return nsq_term(v.x, v.y);
            } else if (E == 2) {
                const float4 v = __ldg((const float4 *)((const float *)x + 2 * p));
                return nsq_term((double)v.x, (double)v.y) + nsq_term((double)v.z, (double)v.w);
            } else {
                const float2 v = __ldg((const float2 *)x + p);
                return nsq_term((double)v.x, (double)v.y);
            }
        }
        double t[E];
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const uint64_t q = p + e;
            t[e] = q >= lo && q < hi ? nsq_term((double)x[2 * (q - lo)], (double)x[2 * (q - lo) + 1])
                                     : 0.0;
        }
        return lane_tree<E>(t);
    }
};

/* Values (sumsq): element p is x[p * K] of type T (K = 2: the real parts of complex128 stash
 * slots), the first `valid` of the block data; full: valid is the block and x 16-byte aligned
 * for the vector load. */
template <typename T, int K, int E>
struct value_view {
    const T *x;
    uint64_t valid;
    bool full;
    double scale;
    __device__ __forceinline__ bool empty() const { return valid == 0; }
    __device__ __forceinline__ double term(uint64_t p) const
    {
        double t[E];
        if (full && K == 2) {
            t[0] = qm_sq(__ldg((const double2 *)x + p).x, scale);
        } else if (full && sizeof(T) == 8 && E == 2) {
            const double2 v = __ldg((const double2 *)((const double *)x + p));
            t[0] = qm_sq(v.x, scale);
            t[E - 1] = qm_sq(v.y, scale);
        } else if (full && sizeof(T) == 4 && E == 4) {
            const float4 v = __ldg((const float4 *)((const float *)x + p));
            t[0] = qm_sq((double)v.x, scale);
            t[1 % E] = qm_sq((double)v.y, scale);
            t[2 % E] = qm_sq((double)v.z, scale);
            t[3 % E] = qm_sq((double)v.w, scale);
        } else {
#pragma unroll
            for (int e = 0; e < E; ++e)
                t[e] = p + e < valid ? qm_sq((double)x[(p + e) * K], scale) : 0.0;
        }
        return lane_tree<E>(t);
    }
};

/* The tree sum of the 256 E elements of a group starting at block position p0, in every lane. */
template <int E, typename V>
__device__ __forceinline__ double warp_group_sum(const V &view, uint64_t p0, unsigned lane)
{
    double v[8];
#pragma unroll
    for (unsigned r = 0; r < 8; ++r)
        v[r] = view.term(p0 + (uint64_t)(32 * r + lane) * E);
    const bool b0 = lane & 1u, b1 = lane & 2u, b2 = lane & 4u;
    double w[4], y[2];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const double keep = b0 ? v[2 * k + 1] : v[2 * k], send = b0 ? v[2 * k] : v[2 * k + 1];
        w[k] = keep + __shfl_xor_sync(QM_FULL_MASK, send, 1);
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const double keep = b1 ? w[2 * k + 1] : w[2 * k], send = b1 ? w[2 * k] : w[2 * k + 1];
        y[k] = keep + __shfl_xor_sync(QM_FULL_MASK, send, 2);
    }
    double z;
    {
        const double keep = b2 ? y[1] : y[0], send = b2 ? y[0] : y[1];
        z = keep + __shfl_xor_sync(QM_FULL_MASK, send, 4); /* row lane % 8, 8 lanes */
    }
    z = z + __shfl_xor_sync(QM_FULL_MASK, z, 8);
    z = z + __shfl_xor_sync(QM_FULL_MASK, z, 16); /* row lane % 8, 32 lanes */
    z = z + __shfl_xor_sync(QM_FULL_MASK, z, 1);
    z = z + __shfl_xor_sync(QM_FULL_MASK, z, 2);
    return z + __shfl_xor_sync(QM_FULL_MASK, z, 4); /* the 8 rows */
}

/* The tree sum of a block of 2^lb elements (lb >= 8 + log2 E, at most 64 groups), in every
 * lane. */
template <int E, typename V>
__device__ __forceinline__ double warp_block_sum(const V &view, unsigned lb, unsigned lane)
{
    if (view.empty()) /* uniform over the warp */
        return 0.0;
    const unsigned groups = (unsigned)(((uint64_t)1 << lb) >> 8) / E; /* 1..64 */
    double total = 0.0;
    for (unsigned r0 = 0; r0 < groups; r0 += 32) {
        const unsigned gn = groups - r0 < 32 ? groups - r0 : 32;
        double mine = 0.0;
        for (unsigned g = 0; g < gn; ++g) {
            const double s = warp_group_sum<E>(view, (uint64_t)(r0 + g) * 256 * E, lane);
            if (lane == g)
                mine = s;
        }
        const double half = warp_tree(mine);
        total = r0 == 0 ? half : total + half;
    }
    return total;
}

/* Warp w of CUDA block c sums reduction block 8 c + w of the range (nb blocks of 2^lb slots). E =
 * 2 needs every block's first complex64 slot 16-byte aligned. */
template <typename T, int E>
__global__ void __launch_bounds__(256) state_sumsq_warp_kernel(const T *state, uint64_t n,
                                                               uint64_t g0, unsigned lb,
                                                               uint64_t nb, double *out)
{
    const uint64_t b = (uint64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31u;
    if (b >= nb) /* uniform over the warp */
        return;
    const uint64_t bs = (uint64_t)1 << lb, gs = ((g0 >> lb) + b) << lb;
    const uint64_t a = gs > g0 ? gs : g0, e = gs + bs < g0 + n ? gs + bs : g0 + n;
    const amp_view<T, E> view = {state + 2 * (a - g0), a - gs, e - gs, a == gs && e == gs + bs};
    const double sum = warp_block_sum<E>(view, lb, lane);
    if (lane == 0)
        out[b] = sum;
}

/* The sumsq op's block sums, one warp per block: over the stash (`in` NULL; T double, K = 2 for
 * complex128 slots, 1 for complex64 ones) or over the input (K = 1). Block b starts at global
 * slot g0 + b 2^lb. */
template <typename T, int K, int E>
__global__ void __launch_bounds__(256) sumsq_warp_kernel(const double *state, const T *in,
                                                         uint64_t in_first, uint64_t g0,
                                                         uint64_t period, uint64_t period_valid,
                                                         unsigned lb, uint64_t nb, double scale,
                                                         double *out)
{
    const uint64_t b = (uint64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    const unsigned lane = threadIdx.x & 31u;
    if (b >= nb)
        return;
    const uint64_t bs = (uint64_t)1 << lb, gs = g0 + b * bs;
    const uint64_t valid = qm_block_valid(gs, bs, period, period_valid);
    const T *x = in ? (valid ? in + ((gs / period) * period_valid + gs % period - in_first) : in)
                    : (const T *)(state + b * bs * K);
    const value_view<T, K, E> view = {x, valid, valid == bs && (E == 1 || K == 2 ||
                                                                ((uintptr_t)x % 16) == 0),
                                      scale};
    const double sum = warp_block_sum<E>(view, lb, lane);
    if (lane == 0)
        out[b] = sum;
}

// ---- piece sums from block sums (the tree_combine op) ------------------------------------------
// A canonical piece's block sums are consecutive leaves of its subtree, so its root is
// qm_tree_root over them. Groups of up to 64 sums: one thread each, qm_tree_root itself. Larger:
// one CUDA block per group of T = min(1024, 2^log2_group / 8) threads, thread t the root of the
// run [t C, (t + 1) C) (C = 2^log2_group / T >= 8 sums, a subtree), then the block's levels t +
// (t + w) in shared memory: every node is left + right as in qm_tree_combine, so the bits are the
// host's. Only a few KiB per state are read (one 8-byte sum per 2^14 slots); launch and latency,
// not bandwidth, are what this costs, so the threads are as many as a block holds: a 2^28
// state's 16384 sums are 16 per thread (two leaves, their 16 loads independent) where 256
// threads had 64 each (eight leaves one after another, each a memory latency; session 23 measured
// 83-138 us for the H200's local_norm phase around it), then 10 shared levels.
__global__ void tree_combine_small_kernel(const double *in, uint64_t n_groups, unsigned lg,
                                          double *out)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n_groups;
         j += (uint64_t)gridDim.x * blockDim.x)
        out[j] = qm_tree_root(in + (j << lg), (uint64_t)1 << lg);
}

__global__ void __launch_bounds__(1024) tree_combine_block_kernel(const double *in, uint64_t n_groups,
                                                                  unsigned lg, double *out)
{
    __shared__ double sh[1024];
    const unsigned T = blockDim.x, t = threadIdx.x;
    const uint64_t C = ((uint64_t)1 << lg) / T;
    for (uint64_t j = blockIdx.x; j < n_groups; j += gridDim.x) {
        sh[t] = qm_tree_root(in + (j << lg) + t * C, C);
        __syncthreads();
        for (unsigned w = 1; w < T; w *= 2) {
            if (t % (2 * w) == 0)
                sh[t] = sh[t] + sh[t + w];
            __syncthreads();
        }
        if (t == 0)
            out[j] = sh[0];
        __syncthreads();
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

/* Loads the amplitude data path's kernels of this file on the current device, first-used first
 * (ingest's stash and block sums, local_norm's state sums, the encode's scaling). */
extern "C" int qm_cuda_preload_kernels(void)
{
    const void *k[] = {
        (const void *)stash_kernel<double>, (const void *)stash_kernel<float>,
        (const void *)sumsq_warp_kernel<double, 1, 2>, (const void *)sumsq_warp_kernel<float, 1, 4>,
        (const void *)sumsq_input_kernel<double>, (const void *)sumsq_input_kernel<float>,
        (const void *)sumsq_stash_kernel, (const void *)sumsq_kernel,
        (const void *)state_sumsq_warp_kernel<double, 1>, (const void *)state_sumsq_warp_kernel<float, 2>,
        (const void *)amp_stash_one_state_kernel, (const void *)amp_one_state_kernel<double>,
        (const void *)amp_one_state_kernel<float>, (const void *)amp_pairs_f32_kernel,
        (const void *)amp_scale_kernel, (const void *)tree_combine_small_kernel,
        (const void *)tree_combine_block_kernel};
    return qm_cuda_load_functions(k, (int)(sizeof k / sizeof k[0]));
}

extern "C" int qm_cuda_load_functions(const void *const *fns, int n)
{
    int first = 0;
    for (int i = 0; i < n; ++i) {
        cudaFuncAttributes a;
        const cudaError_t e = cudaFuncGetAttributes(&a, fns[i]);
        if (e != cudaSuccess && first == 0)
            first = (int)e;
    }
    (void)cudaGetLastError();
    return first;
}

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
                                    uint64_t in_first, int kernels, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    kernels = qm_cuda_kernels_r3(kernels);
    const unsigned wgrid = (unsigned)((n_blocks + 7) / 8);
    if (kernels == QM_CUDA_KERNELS_ROUND3 && log2_block <= QM_RED_LOG2_BLOCK &&
        (n_blocks + 7) / 8 <= 0x7fffffffu && n_blocks > 0) {
        /* E per lane: 16-byte loads where the elements allow (lb >= 8 + log2 E) */
        if (in && in_f64 && log2_block >= 9) {
            sumsq_warp_kernel<double, 1, 2><<<wgrid, 256, 0, s>>>(
                NULL, (const double *)in, in_first, g0, period, period_valid, log2_block,
                n_blocks, scale, out_sums);
            return (int)cudaGetLastError();
        }
        if (in && !in_f64 && log2_block >= 10) {
            sumsq_warp_kernel<float, 1, 4><<<wgrid, 256, 0, s>>>(
                NULL, (const float *)in, in_first, g0, period, period_valid, log2_block, n_blocks,
                scale, out_sums);
            return (int)cudaGetLastError();
        }
        if (!in && c128 && log2_block >= 8) {
            sumsq_warp_kernel<double, 2, 1><<<wgrid, 256, 0, s>>>(
                (const double *)state, (const double *)NULL, 0, g0, period, period_valid,
                log2_block, n_blocks, scale, out_sums);
            return (int)cudaGetLastError();
        }
        if (!in && !c128 && log2_block >= 9) { /* aligned per block when the state is */
            if (((uintptr_t)state % 16) == 0)
                sumsq_warp_kernel<double, 1, 2><<<wgrid, 256, 0, s>>>(
                    (const double *)state, (const double *)NULL, 0, g0, period, period_valid,
                    log2_block, n_blocks, scale, out_sums);
            else
                sumsq_warp_kernel<double, 1, 1><<<wgrid, 256, 0, s>>>(
                    (const double *)state, (const double *)NULL, 0, g0, period, period_valid,
                    log2_block, n_blocks, scale, out_sums);
            return (int)cudaGetLastError();
        }
    }
    if (in && log2_block >= 11 && log2_block <= QM_RED_LOG2_BLOCK && n_blocks <= 0x7fffffffu) {
        if (in_f64)
            sumsq_input_kernel<double><<<(unsigned)n_blocks, 256, 0, s>>>(
                (const double *)in, in_first, g0, period, period_valid, log2_block, scale, out_sums);
        else
            sumsq_input_kernel<float><<<(unsigned)n_blocks, 256, 0, s>>>(
                (const float *)in, in_first, g0, period, period_valid, log2_block, scale, out_sums);
        return (int)cudaGetLastError();
    }
    if (!in && log2_block >= 11 && log2_block <= QM_RED_LOG2_BLOCK && n_blocks <= 0x7fffffffu) {
        sumsq_stash_kernel<<<(unsigned)n_blocks, 256, 0, s>>>(
            (const double *)state, c128 ? 2 : 1, g0, period, period_valid, log2_block, scale, out_sums);
        return (int)cudaGetLastError();
    }
    sumsq_kernel<<<grid_for(n_blocks, 128), 128, 0, s>>>(
        (const double *)state, c128 ? 2 : 1, g0, period, period_valid, log2_block, n_blocks, scale,
        out_sums, in, in_f64, in_first);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_tree_combine(const double *in, uint64_t n_groups, unsigned log2_group,
                                           double *out, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n_groups == 0)
        return (int)cudaSuccess;
    if (log2_group <= 6) {
        tree_combine_small_kernel<<<grid_for(n_groups, 128), 128, 0, s>>>(in, n_groups, log2_group,
                                                                          out);
        return (int)cudaGetLastError();
    }
    const unsigned T = log2_group >= 13 ? 1024u : 1u << (log2_group - 3);
    const unsigned grid = n_groups < 65535 ? (unsigned)n_groups : 65535u;
    tree_combine_block_kernel<<<grid, T, 0, s>>>(in, n_groups, log2_group, out);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_state_sumsq(const void *state, int c128, uint64_t n, uint64_t g0,
                                          unsigned log2_block, double *out_sums, int kernels,
                                          void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return (int)cudaSuccess;
    const uint64_t nb = ((g0 + n - 1) >> log2_block) - (g0 >> log2_block) + 1;
    kernels = qm_cuda_kernels_r3(kernels);
    if (kernels == QM_CUDA_KERNELS_ROUND3 && log2_block >= 8 && log2_block <= QM_RED_LOG2_BLOCK &&
        (nb + 7) / 8 <= 0x7fffffffu) {
        const unsigned grid = (unsigned)((nb + 7) / 8);
        if (c128) {
            state_sumsq_warp_kernel<double, 1><<<grid, 256, 0, s>>>((const double *)state, n, g0,
                                                                    log2_block, nb, out_sums);
            return (int)cudaGetLastError();
        }
        /* every block starts at an even global index (lb >= 8): its first slot is 16-byte
         * aligned when slot g0 - (g0 & 1) would be */
        const bool pairs = log2_block >= 9 && ((uintptr_t)state & 7) == 0 &&
                           ((((uintptr_t)state >> 3) ^ g0) & 1) == 0;
        if (pairs)
            state_sumsq_warp_kernel<float, 2><<<grid, 256, 0, s>>>((const float *)state, n, g0,
                                                                   log2_block, nb, out_sums);
        else
            state_sumsq_warp_kernel<float, 1><<<grid, 256, 0, s>>>((const float *)state, n, g0,
                                                                   log2_block, nb, out_sums);
        return (int)cudaGetLastError();
    }
    if (log2_block >= 11 && log2_block <= QM_RED_LOG2_BLOCK && nb <= 0x7fffffffu) {
        if (c128)
            state_sumsq_block_kernel<double><<<(unsigned)nb, 256, 0, s>>>(
                (const double *)state, n, g0, log2_block, out_sums);
        else
            state_sumsq_block_kernel<float><<<(unsigned)nb, 256, 0, s>>>(
                (const float *)state, n, g0, log2_block, out_sums);
        return (int)cudaGetLastError();
    }
    state_sumsq_small_kernel<<<grid_for(nb, 128), 128, 0, s>>>(state, c128, n, g0, log2_block, nb,
                                                                out_sums);
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
                                        uint64_t first_state, const double *coeffs,
                                        const double *scales, const void *in, int in_f64,
                                        uint64_t in_first, void *stream)
{
    amp_scale_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        state, c128, n, g0, period, period_valid, first_state, coeffs, scales, in, in_f64,
        in_first);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_amp_one_state(void *state, int c128, uint64_t n, uint64_t local0,
                                            uint64_t period_valid, double scale, double coeff,
                                            const void *x, int in_f64, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (!x) {
        amp_stash_one_state_kernel<<<grid_for(n, 256), 256, 0, s>>>(state, c128, n, local0,
                                                                     period_valid, scale, coeff);
        return (int)cudaGetLastError();
    }
    if (!c128 && !in_f64 && ((uintptr_t)x & 7) == 0 && ((uintptr_t)state & 15) == 0) {
        const uint64_t pairs = (n + 1) / 2;
        amp_pairs_f32_kernel<<<grid_for((pairs + QM_AMP_PER_THREAD - 1) / QM_AMP_PER_THREAD, 256),
                               256, 0, s>>>((float4 *)state, n, local0, period_valid, scale, coeff,
                                            (const float2 *)x);
        return (int)cudaGetLastError();
    }
    const unsigned g = grid_for((n + QM_AMP_PER_THREAD - 1) / QM_AMP_PER_THREAD, 256);
    if (in_f64)
        amp_one_state_kernel<double><<<g, 256, 0, s>>>(state, c128, n, local0, period_valid, scale,
                                                       coeff,
                                                       (const double *)x);
    else
        amp_one_state_kernel<float><<<g, 256, 0, s>>>(state, c128, n, local0, period_valid, scale,
                                                      coeff,
                                                      (const float *)x);
    return (int)cudaGetLastError();
}

/* The round-0 product kernel (QM_CUDA_KERNELS=legacy; the default is cuda_featuremap.cu's),
 * kept for bisection, on qm_math.h's current order: a tile of 2^m slots (m = min(qubits, 10): one
 * aligned block of the low bits, inside one state) at a time per CUDA block: the state's lo table
 * (qm_product_lo per entry) lives in shared memory, built once per block and state; each thread
 * forms hi for its tile itself (qm_product_hi) and writes scale * (hi * lo[j]) for its slots of
 * the tile. Same products, same bits as the CPU. */
#define QM_PRODUCT_THREADS 256
__global__ void __launch_bounds__(QM_PRODUCT_THREADS)
product_kernel(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
               uint64_t first_state, const double *table, double scale)
{
    __shared__ double2 lo[1u << QM_PRODUCT_LO_BITS];
    const unsigned m = qubits < QM_PRODUCT_LO_BITS ? qubits : QM_PRODUCT_LO_BITS;
    const uint64_t T = (uint64_t)1 << m;
    const uint64_t t0 = g0 >> m, t1 = (g0 + n - 1) >> m; /* tiles touched */
    uint64_t have = UINT64_MAX;                           /* the state lo holds */
    for (uint64_t t = t0 + blockIdx.x; t <= t1; t += gridDim.x) {
        const uint64_t first = t << m, s = first >> qubits;
        const double *f = table + (s - first_state) * 4 * (uint64_t)qubits;
        if (s != have) {
            __syncthreads(); /* every thread is done with the previous table */
            for (unsigned j = threadIdx.x; j < T; j += blockDim.x) {
                double r, i;
                qm_product_lo(f, qubits, j, &r, &i);
                lo[j] = make_double2(r, i);
            }
            __syncthreads();
            have = s;
        }
        double hr, hi;
        qm_product_hi(f, qubits, first, &hr, &hi);
        const uint64_t a = first > g0 ? 0 : g0 - first;             /* tile-local bounds */
        const uint64_t e = first + T - g0 <= n ? T : g0 + n - first;
        for (uint64_t j = a + threadIdx.x; j < e; j += blockDim.x) {
            double re, im;
            qm_product_amp(hr, hi, lo[j].x, lo[j].y, scale, &re, &im);
            const uint64_t i = first + j - g0;
            if (c128)
                ((double2 *)state)[i] = make_double2(re, im);
            else
                ((float2 *)state)[i] = make_float2((float)re, (float)im);
        }
    }
}

extern "C" int qm_cuda_launch_product(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale, int kernels, void *stream)
{
    if (n == 0)
        return (int)cudaSuccess;
    if (kernels == QM_CUDA_KERNELS_ROUND5)
        return qm_cuda_product_round5(state, c128, n, g0, qubits, first_state, table, scale,
                                      stream);
    if (kernels == QM_CUDA_KERNELS_ROUND4)
        return qm_cuda_product_round4(state, c128, n, g0, qubits, first_state, table, scale,
                                      stream);
    if (kernels == QM_CUDA_KERNELS_ROUND3)
        return qm_cuda_product_round3(state, c128, n, g0, qubits, first_state, table, scale,
                                      stream);
    if (kernels != QM_CUDA_KERNELS_LEGACY)
        return qm_cuda_product_digits(state, c128, n, g0, qubits, first_state, table, scale,
                                      kernels == QM_CUDA_KERNELS_ROUND1, stream);
    const unsigned m = qubits < QM_PRODUCT_LO_BITS ? qubits : QM_PRODUCT_LO_BITS;
    const uint64_t tiles = ((g0 + n - 1) >> m) - (g0 >> m) + 1;
    /* enough blocks to fill the device several times over; each keeps its state's table */
    const unsigned blocks = tiles < 132u * 16u ? (unsigned)tiles : 132u * 16u;
    product_kernel<<<blocks, QM_PRODUCT_THREADS, 0, (cudaStream_t)stream>>>(
        state, c128, n, g0, qubits, first_state, table, scale);
    return (int)cudaGetLastError();
}

/* ---- IQP: the phase vector and the Walsh-Hadamard stages (qm_math.h) ---------------------------
 * iqp_phase: one thread per slot, phi by qm_iqp_phi (the same additions as the CPU kernel), then
 * CUDA's double sincos (qm_iqp_amp; within 2 ulp of libm's: docs/encodings.md). wht: the stages
 * below QM_WHT_SMEM_BITS run in shared memory, one CUDA block per aligned chunk of 2^min(b1, 10)
 * slots (stages in increasing order, a barrier between stages); the higher stages 10 per pass
 * (cuda_featuremap.cu), or, round 0 (`kernels` = legacy), one grid-stride pass over the pairs per
 * stage. The iqp op fuses the phase and stages 0..9 where it can (cuda_featuremap.cu, round 1 or
 * 2 by `kernels`). Every element sees the same (u + w, u - w) sequence as on the CPU.
 * QM_WHT_SMEM_BITS (10) is qm_passes.h's, with the pass counts the cost model reads. */

namespace {

__global__ void iqp_phase_kernel(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                                 unsigned n_coeffs, uint64_t first_state, const double *table,
                                 double scale, int products)
{
    const uint64_t mask = ((uint64_t)1 << qubits) - 1;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t g = g0 + i;
        const double *c = table + ((g >> qubits) - first_state) * n_coeffs;
        double re, im;
        if (products && !c128) { /* complex64: order 3f, float32 products */
            float fr, fi;
            qm_iqp_phase3f(c, qubits, n_coeffs, g & mask, scale, &fr, &fi);
            ((float2 *)state)[i] = make_float2(fr, fi);
            continue;
        }
        if (products) { /* rounds 3, 4: qm_math.h's order 3, as the CPU kernel's tables give it */
            qm_iqp_phase3(c, qubits, n_coeffs, g & mask, scale, &re, &im);
        } else {
            const double phi = qm_iqp_phi(c, qubits, n_coeffs, g & mask);
            qm_iqp_amp(phi, scale, &re, &im);
        }
        if (c128)
            ((double2 *)state)[i] = make_double2(re, im);
        else
            ((float2 *)state)[i] = make_float2((float)re, (float)im);
    }
}

/* qm_math.h's butterfly on a pair of complex slots (the same operations as the CPU kernel). */
__device__ __forceinline__ void butterfly(double2 &u, double2 &w)
{
    qm_wht_butterfly(&u.x, &u.y, &w.x, &w.y);
}
__device__ __forceinline__ void butterfly(float2 &u, float2 &w)
{
    qm_wht_butterfly_f32(&u.x, &u.y, &w.x, &w.y);
}

/* Stages [b0, top) within chunks of 2^top slots, top <= QM_WHT_SMEM_BITS: chunk = blockIdx.x
 * (grid-stride over chunks); the chunk is loaded into shared memory, transformed, stored. */
template <typename V>
__global__ void wht_smem_kernel(V *x, uint64_t n_chunks, unsigned b0, unsigned top)
{
    __shared__ V buf[1u << QM_WHT_SMEM_BITS];
    const unsigned cs = 1u << top;
    for (uint64_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        V *p = x + c * cs;
        for (unsigned i = threadIdx.x; i < cs; i += blockDim.x)
            buf[i] = p[i];
        __syncthreads();
        for (unsigned b = b0; b < top; ++b) {
            const unsigned h = 1u << b;
            for (unsigned q = threadIdx.x; q < cs / 2; q += blockDim.x) {
                const unsigned i = (unsigned)qm_wht_pair_lo(q, b);
                V u = buf[i], w = buf[i + h];
                butterfly(u, w);
                buf[i] = u;
                buf[i + h] = w;
            }
            __syncthreads();
        }
        for (unsigned i = threadIdx.x; i < cs; i += blockDim.x)
            p[i] = buf[i];
        __syncthreads(); /* buf is reused by the next chunk */
    }
}

/* One stage b over all n / 2 pairs of the range. */
template <typename V>
__global__ void wht_stage_kernel(V *x, uint64_t n_pairs, unsigned b)
{
    const uint64_t h = (uint64_t)1 << b;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pairs; q += stride) {
        const uint64_t i = qm_wht_pair_lo(q, b);
        V u = x[i], w = x[i + h];
        butterfly(u, w);
        x[i] = u;
        x[i + h] = w;
    }
}

/* The cross-buffer stage: x = x + y (low) or x = y - x (high), per component. */
template <typename V>
__global__ void wht_pair_kernel(V *x, const V *y, uint64_t n, int high)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const V u = x[i], w = y[i];
        V r;
        if (high)
            r.x = w.x - u.x, r.y = w.y - u.y;
        else
            r.x = u.x + w.x, r.y = u.y + w.y;
        x[i] = r;
    }
}

/* Stages [b0, b1) (or the cross-buffer stage): the stages below QM_WHT_SMEM_BITS in shared
 * memory (wht_smem_kernel); the higher ones 10 per pass (cuda_featuremap.cu; round 3: at most 8
 * per pass on 256-byte rows), or, round 0 (legacy), one pass per stage (wht_stage_kernel). Every element sees the same additions either way. */
template <typename V>
int wht_launch(V *x, uint64_t n, unsigned b0, unsigned b1, const V *partner, int high, int kernels,
               cudaStream_t s)
{
    if (partner) {
        wht_pair_kernel<V><<<grid_for(n, 256), 256, 0, s>>>(x, partner, n, high);
        return (int)cudaGetLastError();
    }
    const unsigned top = b1 < QM_WHT_SMEM_BITS ? b1 : QM_WHT_SMEM_BITS;
    if (b0 < top) {
        const uint64_t chunks = n >> top;
        const unsigned g = chunks < 65535 ? (unsigned)chunks : 65535u;
        wht_smem_kernel<V><<<g, 256, 0, s>>>(x, chunks, b0, top);
        const int le = (int)cudaGetLastError();
        if (le != (int)cudaSuccess)
            return le;
    }
    const unsigned hb = b0 > top ? b0 : top;
    kernels = qm_cuda_kernels_r3(kernels);
    if (kernels == QM_CUDA_KERNELS_ROUND3 && hb < b1)
        return qm_cuda_wht_passes3(x, sizeof(V) == 16, n, hb, b1, 0, 256, s);
    if (kernels != QM_CUDA_KERNELS_LEGACY && hb < b1)
        return qm_cuda_wht_passes(x, sizeof(V) == 16, n, hb, b1, s);
    for (unsigned b = hb; b < b1; ++b) {
        wht_stage_kernel<V><<<grid_for(n / 2, 256), 256, 0, s>>>(x, n / 2, b);
        const int le = (int)cudaGetLastError();
        if (le != (int)cudaSuccess)
            return le;
    }
    return (int)cudaSuccess;
}

} // namespace

extern "C" int qm_cuda_launch_iqp_phase(void *state, int c128, uint64_t n, uint64_t g0,
                                        unsigned qubits, unsigned n_coeffs, uint64_t first_state,
                                        const double *table, double scale, int kernels,
                                        void *stream)
{
    iqp_phase_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        state, c128, n, g0, qubits, n_coeffs, first_state, table, scale,
        qm_cuda_kernels_r3(kernels) == QM_CUDA_KERNELS_ROUND3);
    return (int)cudaGetLastError();
}

extern "C" int qm_cuda_launch_wht(void *state, int c128, uint64_t n, unsigned b0, unsigned b1,
                                  const void *partner, int high, int kernels, void *stream)
{
    if (c128)
        return wht_launch<double2>((double2 *)state, n, b0, b1, (const double2 *)partner, high,
                                   kernels, (cudaStream_t)stream);
    return wht_launch<float2>((float2 *)state, n, b0, b1, (const float2 *)partner, high, kernels,
                              (cudaStream_t)stream);
}

extern "C" int qm_cuda_launch_iqp(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                                  unsigned n_coeffs, uint64_t first_state, const double *table,
                                  double scale, unsigned b1, int kernels, void *stream)
{
    if (n == 0)
        return (int)cudaSuccess;
    const uint64_t tile = (uint64_t)1 << QM_WHT_SMEM_BITS;
    if (kernels != QM_CUDA_KERNELS_LEGACY && qubits >= QM_WHT_SMEM_BITS &&
        b1 >= QM_WHT_SMEM_BITS && g0 % tile == 0 && n % tile == 0) {
        const int le = qm_cuda_iqp_fused(state, c128, n, g0, qubits, n_coeffs, first_state, table,
                                         scale,
                                         kernels == QM_CUDA_KERNELS_ROUND1   ? 1
                                         : kernels == QM_CUDA_KERNELS_ROUND3 ? 3
                                         : kernels == QM_CUDA_KERNELS_ROUND4 ? 4
                                         : kernels == QM_CUDA_KERNELS_ROUND5 ? 4
                                                                             : 2,
                                         stream);
        if (le != (int)cudaSuccess || b1 == QM_WHT_SMEM_BITS)
            return le;
        return qm_cuda_launch_wht(state, c128, n, QM_WHT_SMEM_BITS, b1, NULL, 0, kernels, stream);
    }
    const int le = qm_cuda_launch_iqp_phase(state, c128, n, g0, qubits, n_coeffs, first_state,
                                            table, scale, kernels, stream);
    if (le != (int)cudaSuccess || b1 == 0)
        return le;
    return qm_cuda_launch_wht(state, c128, n, 0, b1, NULL, 0, kernels, stream);
}
