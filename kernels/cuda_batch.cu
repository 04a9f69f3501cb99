// cuda_batch.cu — the fused batch kernel (qm_hal_amp_batch): whole small states, each read once
// from device memory and written once, bit for bit what qm_cpu_amp_batch writes.
//
// Design. A block of NT threads (256 for float64 input, 512 for float32, so that a block moves
// as many bytes either way) works on a tile of NT leaves; a leaf is 8 slots (the whole state when
// period < 8), so a tile is NT * min(period, 8) slots: NT * 8 / period whole states side by side,
// or one NT * 8-slot chunk of a longer state. The states of a tile are contiguous in the input and
// in the state buffer, so:
//  1. stage: the tile's values are loaded coalesced with 16-byte loads (thread t: vectors t,
//     t + NT, ... of the 16-byte aligned middle, all issued before the first use; the unaligned
//     head and the tail, under one vector each, by the first threads) and put in shared memory by
//     slot, one pad word after every 8 slots, so that a leaf is 8 consecutive words and the leaves
//     of consecutive threads start in different banks;
//  2. sum: thread t forms leaf t with qm_math.h's leaf (elements past the data count as +0, which
//     also gives the small trees of states of 1, 2 or 4 slots); xor-shuffles with offsets
//     1, 2, 4, ... merge the leaves of a state level by level (a + b and b + a round alike), and
//     for states of more than one warp the warp sums are merged the same way by warp 0; one thread
//     per state writes its sum and its coefficient 1 / sqrt(sum) (-1 for the slow path);
//  3. write: the tile's slots are written coalesced with 16-byte stores (complex128: one slot per
//     store; complex64: two slots per store when the state pointer is 16-byte aligned), values
//     read back from shared memory: amplitudes and zero padding, or the stash with padding slots
//     left untouched.
// One tile per block: on an H200 this beat persistent blocks striding over tiles (with the next
// tile prefetched) by about 8% for float64; the blocks resident on an SM overlap each other's
// phases. States longer than a tile run chunk by chunk in one block: the chunk sums (subtrees of
// the state's tree) merge pairwise with qm_tree_combine, then each chunk is staged again and
// written.
#include "cuda_kernels.h"
#include "qm_math.h"

#include <cuda_runtime.h>
#include <math.h>

namespace {

// The block shape for input type T: NT threads, tiles of NT leaves of 8 slots.
template <typename T> struct Geo {
    static constexpr unsigned threads = sizeof(T) == 8 ? 256 : 512;
    static constexpr unsigned tile_log2 = sizeof(T) == 8 ? 11 : 12;
    static constexpr unsigned tile = 1u << tile_log2;
    static constexpr unsigned min_blocks = sizeof(T) == 8 ? 4 : 3; /* resident per SM */
    static constexpr unsigned loads = tile / threads;                     /* values per thread */
};

template <typename T> struct Shared {
    T x[Geo<T>::tile + Geo<T>::tile / 8];                 // by slot, see word()
    double coeff[Geo<T>::threads];                        // per state of the tile; < 0: slow path
    double warp_sums[Geo<T>::threads / 32];
    double chunk_sums[1u << (QM_RED_LOG2_BLOCK - Geo<T>::tile_log2)];
};

// Shared-memory word of tile slot g: a pad word after every 8 slots.
__device__ __forceinline__ unsigned word(unsigned g) { return g + (g >> 3); }

// A tile: `states` states (or one chunk) of 2^lq slots each inside the tile, of which the first fc
// hold data; input element e of the tile belongs to state (e * magic) >> 32 (that is e / fc).
struct Tile {
    unsigned lq, fc, states;
    uint64_t magic;
};

__device__ __forceinline__ unsigned leaf_log2(const Tile &tl) { return tl.lq < 3 ? tl.lq : 3; }

__device__ __forceinline__ double leaf8(const double *x, unsigned valid)
{
    return qm_tree_sumsq_leaf8(x, 1, valid, 1.0);
}
__device__ __forceinline__ double leaf8(const float *x, unsigned valid)
{
    return qm_tree_sumsq_f32_leaf8(x, 1, valid, 1.0);
}

// 1 / sqrt(sum) on the fast path (IEEE division and square root), -1 for the slow path.
__device__ __forceinline__ double coeff_of(double sum)
{
    return isfinite(sum) && sum >= QM_FAST_SUM_MIN ? 1.0 / sqrt(sum) : -1.0;
}

// 16 bytes of T.
template <typename T> struct Vec16;
template <> struct Vec16<float> {
    using type = float4;
    static constexpr unsigned n = 4;
    static __device__ __forceinline__ float at(const float4 &v, unsigned j)
    {
        return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
    }
};
template <> struct Vec16<double> {
    using type = double2;
    static constexpr unsigned n = 2;
    static __device__ __forceinline__ double at(const double2 &v, unsigned j)
    {
        return j == 0 ? v.x : v.y;
    }
};

// A tile's input in flight: 16-byte aligned vectors (thread t: vectors t, t + NT, ...) and one
// element of the unaligned head or the tail.
template <typename T> struct Loaded {
    using V = Vec16<T>;
    typename V::type v[Geo<T>::loads / V::n];
    T edge;
    unsigned head, nv, n_el;
};

template <typename T>
__device__ __forceinline__ void load_tile(Loaded<T> &ld, const T *__restrict__ src, unsigned n_el)
{
    using V = Vec16<T>;
    const unsigned mis = (unsigned)(((uintptr_t)src & 15) / sizeof(T));
    ld.n_el = n_el;
    ld.head = mis ? (V::n - mis < n_el ? V::n - mis : n_el) : 0;
    ld.nv = (n_el - ld.head) / V::n;
    const typename V::type *body = (const typename V::type *)(src + ld.head);
#pragma unroll
    for (unsigned m = 0; m < Geo<T>::loads / V::n; ++m) {
        const unsigned i = threadIdx.x + m * Geo<T>::threads;
        if (i < ld.nv)
            ld.v[m] = __ldg(body + i);
    }
    const unsigned t = threadIdx.x, tail0 = ld.head + ld.nv * V::n;
    if (t < ld.head)
        ld.edge = __ldg(src + t);
    else if (t - ld.head < n_el - tail0)
        ld.edge = __ldg(src + tail0 + (t - ld.head));
}

template <typename T>
__device__ __forceinline__ void stage_tile(T *sx, const Loaded<T> &ld, const Tile &tl)
{
    using V = Vec16<T>;
    auto put = [&](unsigned e, T x) {
        const unsigned s = (unsigned)(((uint64_t)e * tl.magic) >> 32);
        sx[word((s << tl.lq) + e - s * tl.fc)] = x;
    };
#pragma unroll
    for (unsigned m = 0; m < Geo<T>::loads / V::n; ++m) {
        const unsigned i = threadIdx.x + m * Geo<T>::threads;
        if (i < ld.nv) {
#pragma unroll
            for (unsigned j = 0; j < V::n; ++j)
                put(ld.head + i * V::n + j, V::at(ld.v[m], j));
        }
    }
    const unsigned t = threadIdx.x, tail0 = ld.head + ld.nv * V::n;
    if (t < ld.head)
        put(t, ld.edge);
    else if (t - ld.head < ld.n_el - tail0)
        put(tail0 + (t - ld.head), ld.edge);
}

// This thread's leaf: slots [t << ll, (t + 1) << ll) of the tile (+0 past the data).
template <typename T> __device__ __forceinline__ double leaf_sum(const T *sx, const Tile &tl)
{
    const unsigned ll = leaf_log2(tl);
    const unsigned g = threadIdx.x << ll, s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
    unsigned valid = 0;
    if (s < tl.states && i < tl.fc)
        valid = tl.fc - i < (1u << ll) ? tl.fc - i : 1u << ll;
    return leaf8(sx + word(g), valid);
}

// Merge the leaves of each state of the tile (2^lts consecutive threads per state) level by level;
// finish(s, sum) runs once per state s < states, on one thread of warp 0 when a state spans
// several warps. Every thread of the block must call this.
template <unsigned NT, typename Finish>
__device__ __forceinline__ void tile_tree(double v, const Tile &tl, double *warp_sums,
                                          Finish finish)
{
    const unsigned lts = tl.lq - leaf_log2(tl), lane = threadIdx.x & 31;
    const unsigned lw = lts < 5 ? lts : 5;
    for (unsigned o = 1; o < (1u << lw); o <<= 1)
        v = v + __shfl_xor_sync(0xffffffffu, v, (int)o);
    if (lts <= 5) {
        const unsigned s = threadIdx.x >> lts;
        if ((threadIdx.x & ((1u << lts) - 1)) == 0 && s < tl.states)
            finish(s, v);
        return;
    }
    if (lane == 0)
        warp_sums[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) { /* warp 0 merges the warp sums of each state, 2^(lts-5) of them */
        const unsigned lwp = lts - 5;
        double w = lane < NT / 32 ? warp_sums[lane] : 0.0;
        for (unsigned o = 1; o < (1u << lwp); o <<= 1)
            w = w + __shfl_xor_sync(0xffffffffu, w, (int)o);
        const unsigned s = lane >> lwp;
        if ((lane & ((1u << lwp) - 1)) == 0 && lane < NT / 32 && s < tl.states)
            finish(s, w);
    }
}

// The 8 bytes of complex64 slot g of the tile; false: leave it untouched (slow-path padding).
template <typename T>
__device__ __forceinline__ bool c64_slot(const T *sx, const double *coeff, const Tile &tl,
                                         unsigned g, unsigned long long *w)
{
    const unsigned s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
    const bool data = i < tl.fc;
    const double c = coeff[s];
    if (c > 0.0) {
        *w = data ? __float_as_uint((float)qm_amp((double)sx[word(g)], c)) : 0u;
        return true;
    }
    if (data)
        *w = (unsigned long long)__double_as_longlong((double)sx[word(g)]);
    return data;
}

// Write the tile's slots (slot 0 at out) from shared memory; coeff[s] for its state s.
template <typename T, bool C128>
__device__ __forceinline__ void write_tile(void *out, const T *sx, const double *coeff,
                                           const Tile &tl, bool aligned16)
{
    const unsigned n = tl.states << tl.lq;
    if (C128) {
        double2 *o = (double2 *)out;
#pragma unroll
        for (unsigned m = 0; m < Geo<T>::loads; ++m) {
            const unsigned g = threadIdx.x + m * Geo<T>::threads;
            if (g >= n)
                break;
            const unsigned s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
            const bool data = i < tl.fc;
            const double c = coeff[s];
            if (c > 0.0)
                o[g] = make_double2(data ? qm_amp((double)sx[word(g)], c) : 0.0, 0.0);
            else if (data)
                o[g] = make_double2((double)sx[word(g)], 0.0);
        }
    } else {
        unsigned long long *o = (unsigned long long *)out;
#pragma unroll
        for (unsigned m = 0; m < Geo<T>::loads / 2; ++m) {
            const unsigned g = 2 * (threadIdx.x + m * Geo<T>::threads);
            if (g >= n)
                break;
            unsigned long long w0 = 0, w1 = 0;
            const bool s0 = c64_slot(sx, coeff, tl, g, &w0);
            const bool s1 = g + 1 < n && c64_slot(sx, coeff, tl, g + 1, &w1);
            if (s0 && s1 && aligned16) {
                *(ulonglong2 *)(o + g) = make_ulonglong2(w0, w1);
            } else {
                if (s0)
                    o[g] = w0;
                if (s1)
                    o[g + 1] = w1;
            }
        }
    }
}

// Whole states of period 2^q, q <= tile_log2, F values each, in tiles of 2^lpt states
// (lpt = tile_log2 - 3 + min(q, 3) - q); magic = 2^32 / F + 1. One tile per block (the loop only
// serves grids cut at the launch limit).
template <typename T, bool C128>
__global__ void __launch_bounds__(Geo<T>::threads, Geo<T>::min_blocks)
    amp_batch_tiles_kernel(void *state, unsigned q, unsigned F, uint64_t magic, uint64_t n_states,
                           const T *__restrict__ in, double *__restrict__ sums)
{
    __shared__ Shared<T> sh;
    const unsigned lpt = Geo<T>::tile_log2 - 3 + (q < 3 ? q : 3) - q;
    const uint64_t n_tiles = (n_states + (1u << lpt) - 1) >> lpt;
    const size_t slot_bytes = C128 ? 16 : 8;
    const bool aligned16 = ((uintptr_t)state & 15) == 0;
    for (uint64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const uint64_t k0 = tile << lpt, left = n_states - k0;
        const Tile tl = {q, F, left < (1u << lpt) ? (unsigned)left : 1u << lpt, magic};
        Loaded<T> ld;
        load_tile(ld, in + k0 * F, tl.states * F);
        __syncthreads(); /* a previous tile's writes have read sh.x */
        stage_tile(sh.x, ld, tl);
        __syncthreads();
        tile_tree<Geo<T>::threads>(leaf_sum(sh.x, tl), tl, sh.warp_sums,
                                   [sums, k0](unsigned s, double sum) {
                                       sums[k0 + s] = sum;
                                       sh.coeff[s] = coeff_of(sum);
                                   });
        __syncthreads();
        write_tile<T, C128>((char *)state + (k0 * (uint64_t)slot_bytes << q), sh.x, sh.coeff, tl,
                            aligned16);
    }
}

// Chunk c (tile slots) of a state whose values start at x: loaded and staged.
template <typename T>
__device__ __forceinline__ Tile stage_chunk(Shared<T> &sh, const T *x, unsigned F, unsigned c)
{
    constexpr unsigned tile = Geo<T>::tile;
    const unsigned lo = c * tile;
    const Tile tl = {Geo<T>::tile_log2, F <= lo ? 0u : F - lo < tile ? F - lo : tile, 1, 0};
    Loaded<T> ld;
    load_tile(ld, x + lo, tl.fc);
    __syncthreads(); /* earlier readers of sh.x are done */
    stage_tile(sh.x, ld, tl);
    __syncthreads();
    return tl;
}

// Whole states of period 2^q, tile < 2^q <= 2^QM_RED_LOG2_BLOCK: one state per block at a time.
template <typename T, bool C128>
__global__ void __launch_bounds__(Geo<T>::threads, 3) /* 4 would spill for float64 */
    amp_batch_chunks_kernel(void *state, unsigned q, unsigned F, uint64_t, uint64_t n_states,
                            const T *__restrict__ in, double *__restrict__ sums)
{
    __shared__ Shared<T> sh;
    const unsigned n_chunks = 1u << (q - Geo<T>::tile_log2);
    const size_t slot_bytes = C128 ? 16 : 8;
    const bool aligned16 = ((uintptr_t)state & 15) == 0;
    for (uint64_t k = blockIdx.x; k < n_states; k += gridDim.x) {
        const T *x = in + k * F;
        for (unsigned c = 0; c < n_chunks; ++c) {
            const Tile tl = stage_chunk(sh, x, F, c);
            tile_tree<Geo<T>::threads>(leaf_sum(sh.x, tl), tl, sh.warp_sums,
                                       [c](unsigned, double sum) { sh.chunk_sums[c] = sum; });
        }
        if (threadIdx.x == 0) { /* the thread that wrote the chunk sums */
            const double sum = qm_tree_combine(sh.chunk_sums, n_chunks);
            sums[k] = sum;
            sh.coeff[0] = coeff_of(sum);
        }
        char *o = (char *)state + (k * (uint64_t)slot_bytes << q);
        for (unsigned c = 0; c < n_chunks; ++c) {
            const Tile tl = stage_chunk(sh, x, F, c);
            write_tile<T, C128>(o + (uint64_t)c * Geo<T>::tile * slot_bytes, sh.x, sh.coeff, tl,
                                aligned16);
        }
    }
}

template <typename T, bool C128>
int launch(void *state, uint64_t period, uint64_t F, uint64_t n_states, const T *in, double *sums,
           cudaStream_t s)
{
    const unsigned q = (unsigned)__builtin_ctzll(period);
    const bool tiles = q <= Geo<T>::tile_log2;
    void (*kernel)(void *, unsigned, unsigned, uint64_t, uint64_t, const T *, double *) =
        tiles ? amp_batch_tiles_kernel<T, C128> : amp_batch_chunks_kernel<T, C128>;
    const unsigned lpt = tiles ? Geo<T>::tile_log2 - 3 + (q < 3 ? q : 3) - q : 0;
    const uint64_t work = (n_states + ((uint64_t)1 << lpt) - 1) >> lpt;
    const unsigned grid = work < 0x7fffffffu ? (unsigned)work : 0x7fffffffu;
    kernel<<<grid, Geo<T>::threads, 0, s>>>(state, q, (unsigned)F, 0x100000000ull / F + 1,
                                            n_states, in, sums);
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int qm_cuda_launch_amp_batch(void *state, int c128, uint64_t period, uint64_t period_valid,
                                        uint64_t n_states, const void *in, int in_f64, double *sums,
                                        void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n_states == 0)
        return (int)cudaGetLastError();
    if (in_f64)
        return c128 ? launch<double, true>(state, period, period_valid, n_states,
                                           (const double *)in, sums, s)
                    : launch<double, false>(state, period, period_valid, n_states,
                                            (const double *)in, sums, s);
    return c128 ? launch<float, true>(state, period, period_valid, n_states, (const float *)in,
                                      sums, s)
                : launch<float, false>(state, period, period_valid, n_states, (const float *)in,
                                       sums, s);
}
