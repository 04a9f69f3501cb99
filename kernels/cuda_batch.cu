// cuda_batch.cu — the fused batch kernel (qm_hal_amp_batch): whole small states, each read once
// from device memory and written once, bit for bit what qm_cpu_amp_batch writes.
//
// Design. A block of NT threads works on a tile of NT * L leaves (L leaves per thread, see Geo
// and the shapes in use below); a leaf is 8 slots (the whole state when period < 8), so a tile
// is NT * L * min(period, 8) slots: whole states side by side, or one chunk of a longer state.
// The states of a tile are contiguous in the input and in the state buffer, so:
//  1. stage: the tile's values are loaded coalesced with 16-byte loads (thread t: vectors t,
//     t + NT, ... of the 16-byte aligned middle, all issued before the first use; the unaligned
//     head and the tail, under one vector each, by the first threads) and put in shared memory by
//     slot, one pad word after every 8 * L slots, so that a leaf is 8 consecutive words and the
//     leaves of consecutive threads start in different banks;
//  2. sum: thread t forms its L leaves with qm_math.h's leaf (elements past the data count as +0,
//     which also gives the small trees of states of 1, 2 or 4 slots) and merges them pairwise;
//     xor-shuffles with offsets 1, 2, 4, ... merge the threads' subtrees of a state level by
//     level (a + b and b + a round alike), and for states of more than one warp the warp sums
//     are merged the same way by warp 0; one thread per state writes its sum and its
//     coefficient 1 / sqrt(sum) (-1 for the slow path);
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
#include <stdlib.h>

namespace {

// A block shape: NT threads of L leaves of 8 slots each (a tile of NT * L * 8 slots), MB blocks
// resident per SM (__launch_bounds__), input type T.
template <typename T, unsigned NT, unsigned L, unsigned MB> struct Geo {
    using type = T;
    static constexpr unsigned threads = NT;
    static constexpr unsigned leaves = L; /* per thread: 1, 2 or 4 */
    static constexpr unsigned leaves_log2 = L == 1 ? 0 : L == 2 ? 1 : 2;
    static constexpr unsigned tile = NT * L * 8;
    static constexpr unsigned tile_log2 = __builtin_ctz(tile);
    static constexpr unsigned min_blocks = MB;
    static constexpr unsigned loads = tile / NT; /* values per thread */
};

// The shapes in use. One leaf per thread: every state of float64 input; float32 states shorter
// than 16 slots and the chunked kernel. Float32 states of 16 slots to a tile: 256 threads of two
// leaves, 6 blocks per SM. On the H200 (BM_BatchShape, 65536 x 1021 -> 10 qubits, 2026-12-02)
// that shape ran at 3.60 TiB/s against 3.23 TiB/s for 512 threads of one leaf (copy ceiling
// 3.90 TiB/s): the same 16 KB of loads per block, but twice as many blocks resident per SM
// keep more loads in flight. For float64 the shapes of the sweep were within 1% of each other.
using GeoF64 = Geo<double, 256, 1, 4>;
using GeoF32 = Geo<float, 512, 1, 3>;
using GeoF32Pairs = Geo<float, 256, 2, 6>;

template <typename G> struct Shared {
    using T = typename G::type;
    T x[G::tile + G::tile / (8 * G::leaves)];              // by slot, see word()
    double coeff[G::threads];                              // per state of the tile; < 0: slow path
    double warp_sums[G::threads / 32 ? G::threads / 32 : 1];
    double chunk_sums[1u << (QM_RED_LOG2_BLOCK - G::tile_log2)];
};

// Shared-memory word of tile slot g: a pad word after the 8 * L slots of each thread's leaves, so
// that a leaf is 8 consecutive words and the leaves of consecutive threads start in different
// banks.
template <typename G> __device__ __forceinline__ unsigned word(unsigned g)
{
    return g + (g >> (3 + G::leaves_log2));
}

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
template <typename G> struct Loaded {
    using T = typename G::type;
    using V = Vec16<T>;
    typename V::type v[G::loads / V::n];
    T edge;
    unsigned head, nv, n_el;
};

template <typename G>
__device__ __forceinline__ void load_tile(Loaded<G> &ld, const typename G::type *__restrict__ src,
                                          unsigned n_el)
{
    using T = typename G::type;
    using V = Vec16<T>;
    const unsigned mis = (unsigned)(((uintptr_t)src & 15) / sizeof(T));
    ld.n_el = n_el;
    ld.head = mis ? (V::n - mis < n_el ? V::n - mis : n_el) : 0;
    ld.nv = (n_el - ld.head) / V::n;
    const typename V::type *body = (const typename V::type *)(src + ld.head);
#pragma unroll
    for (unsigned m = 0; m < G::loads / V::n; ++m) {
        const unsigned i = threadIdx.x + m * G::threads;
        if (i < ld.nv)
            ld.v[m] = __ldg(body + i);
    }
    const unsigned t = threadIdx.x, tail0 = ld.head + ld.nv * V::n;
    if (t < ld.head)
        ld.edge = __ldg(src + t);
    else if (t - ld.head < n_el - tail0)
        ld.edge = __ldg(src + tail0 + (t - ld.head));
}

template <typename G>
__device__ __forceinline__ void stage_tile(typename G::type *sx, const Loaded<G> &ld, const Tile &tl)
{
    using V = Vec16<typename G::type>;
    auto put = [&](unsigned e, typename G::type x) {
        const unsigned s = (unsigned)(((uint64_t)e * tl.magic) >> 32);
        sx[word<G>((s << tl.lq) + e - s * tl.fc)] = x;
    };
#pragma unroll
    for (unsigned m = 0; m < G::loads / V::n; ++m) {
        const unsigned i = threadIdx.x + m * G::threads;
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

// The leaf of slots [l << ll, (l + 1) << ll) of the tile (+0 past the data).
template <typename G>
__device__ __forceinline__ double leaf_at(const typename G::type *sx, const Tile &tl, unsigned l)
{
    const unsigned ll = leaf_log2(tl);
    const unsigned g = l << ll, s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
    unsigned valid = 0;
    if (s < tl.states && i < tl.fc)
        valid = tl.fc - i < (1u << ll) ? tl.fc - i : 1u << ll;
    return leaf8(sx + word<G>(g), valid);
}

// This thread's subtree: its L consecutive leaves (L * t .. L * t + L - 1) merged pairwise, the
// lowest levels of its state's tree. L > 1 only for states of at least L leaves.
template <typename G>
__device__ __forceinline__ double thread_sum(const typename G::type *sx, const Tile &tl)
{
    const unsigned l0 = threadIdx.x * G::leaves;
    if (G::leaves == 1)
        return leaf_at<G>(sx, tl, l0);
    if (G::leaves == 2)
        return leaf_at<G>(sx, tl, l0) + leaf_at<G>(sx, tl, l0 + 1);
    return (leaf_at<G>(sx, tl, l0) + leaf_at<G>(sx, tl, l0 + 1)) +
           (leaf_at<G>(sx, tl, l0 + 2) + leaf_at<G>(sx, tl, l0 + 3));
}

// Merge the thread subtrees of each state of the tile (2^lts consecutive threads per state) level
// by level; finish(s, sum) runs once per state s < states, on one thread of warp 0 when a state
// spans several warps. Every thread of the block must call this.
template <typename G, typename Finish>
__device__ __forceinline__ void tile_tree(double v, const Tile &tl, double *warp_sums,
                                          Finish finish)
{
    constexpr unsigned NT = G::threads;
    const unsigned lts = tl.lq - leaf_log2(tl) - G::leaves_log2, lane = threadIdx.x & 31;
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
template <typename G>
__device__ __forceinline__ bool c64_slot(const typename G::type *sx, const double *coeff, const Tile &tl,
                                         unsigned g, unsigned long long *w)
{
    const unsigned s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
    const bool data = i < tl.fc;
    const double c = coeff[s];
    if (c > 0.0) {
        *w = data ? __float_as_uint((float)qm_amp((double)sx[word<G>(g)], c)) : 0u;
        return true;
    }
    if (data)
        *w = (unsigned long long)__double_as_longlong((double)sx[word<G>(g)]);
    return data;
}

// Write the tile's slots (slot 0 at out) from shared memory; coeff[s] for its state s.
template <typename G, bool C128>
__device__ __forceinline__ void write_tile(void *out, const typename G::type *sx,
                                           const double *coeff, const Tile &tl, bool aligned16)
{
    const unsigned n = tl.states << tl.lq;
    if (C128) {
        double2 *o = (double2 *)out;
#pragma unroll
        for (unsigned m = 0; m < G::loads; ++m) {
            const unsigned g = threadIdx.x + m * G::threads;
            if (g >= n)
                break;
            const unsigned s = g >> tl.lq, i = g & ((1u << tl.lq) - 1);
            const bool data = i < tl.fc;
            const double c = coeff[s];
            if (c > 0.0)
                o[g] = make_double2(data ? qm_amp((double)sx[word<G>(g)], c) : 0.0, 0.0);
            else if (data)
                o[g] = make_double2((double)sx[word<G>(g)], 0.0);
        }
    } else {
        unsigned long long *o = (unsigned long long *)out;
#pragma unroll
        for (unsigned m = 0; m < G::loads / 2; ++m) {
            const unsigned g = 2 * (threadIdx.x + m * G::threads);
            if (g >= n)
                break;
            unsigned long long w0 = 0, w1 = 0;
            const bool s0 = c64_slot<G>(sx, coeff, tl, g, &w0);
            const bool s1 = g + 1 < n && c64_slot<G>(sx, coeff, tl, g + 1, &w1);
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

// States per tile, log2: whole states of period 2^q, q <= tile_log2 (a leaf is the whole state
// when q < 3).
template <typename G> __host__ __device__ __forceinline__ unsigned tile_states_log2(unsigned q)
{
    return G::tile_log2 - 3 + (q < 3 ? q : 3) - q;
}

// Whole states of period 2^q, q <= tile_log2 (q >= 3 + leaves_log2 when L > 1), F values each;
// magic = 2^32 / F + 1. One tile per block (the loop only serves grids cut at the launch limit).
template <typename G, bool C128>
__global__ void __launch_bounds__(G::threads, G::min_blocks)
    amp_batch_tiles_kernel(void *state, unsigned q, unsigned F, uint64_t magic, uint64_t n_states,
                           const typename G::type *__restrict__ in, double *__restrict__ sums)
{
    __shared__ Shared<G> sh;
    const unsigned lpt = tile_states_log2<G>(q);
    const uint64_t n_tiles = (n_states + (1u << lpt) - 1) >> lpt;
    const size_t slot_bytes = C128 ? 16 : 8;
    const bool aligned16 = ((uintptr_t)state & 15) == 0;
    for (uint64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const uint64_t k0 = tile << lpt, left = n_states - k0;
        const Tile tl = {q, F, left < (1u << lpt) ? (unsigned)left : 1u << lpt, magic};
        Loaded<G> ld;
        load_tile(ld, in + k0 * F, tl.states * F);
        __syncthreads(); /* a previous tile's writes have read sh.x */
        stage_tile(sh.x, ld, tl);
        __syncthreads();
        tile_tree<G>(thread_sum<G>(sh.x, tl), tl, sh.warp_sums,
                     [sums, k0](unsigned s, double sum) {
                         sums[k0 + s] = sum;
                         sh.coeff[s] = coeff_of(sum);
                     });
        __syncthreads();
        write_tile<G, C128>((char *)state + (k0 * (uint64_t)slot_bytes << q), sh.x, sh.coeff, tl,
                            aligned16);
    }
}

// Chunk c (tile slots) of a state whose values start at x: loaded and staged.
template <typename G>
__device__ __forceinline__ Tile stage_chunk(Shared<G> &sh, const typename G::type *x, unsigned F,
                                            unsigned c)
{
    constexpr unsigned tile = G::tile;
    const unsigned lo = c * tile;
    const Tile tl = {G::tile_log2, F <= lo ? 0u : F - lo < tile ? F - lo : tile, 1, 0};
    Loaded<G> ld;
    load_tile(ld, x + lo, tl.fc);
    __syncthreads(); /* earlier readers of sh.x are done */
    stage_tile(sh.x, ld, tl);
    __syncthreads();
    return tl;
}

// Whole states of period 2^q, tile < 2^q <= 2^QM_RED_LOG2_BLOCK: one state per block at a time.
template <typename G, bool C128>
__global__ void __launch_bounds__(G::threads, 3) /* 4 would spill for float64 */
    amp_batch_chunks_kernel(void *state, unsigned q, unsigned F, uint64_t, uint64_t n_states,
                            const typename G::type *__restrict__ in, double *__restrict__ sums)
{
    __shared__ Shared<G> sh;
    const unsigned n_chunks = 1u << (q - G::tile_log2);
    const size_t slot_bytes = C128 ? 16 : 8;
    const bool aligned16 = ((uintptr_t)state & 15) == 0;
    for (uint64_t k = blockIdx.x; k < n_states; k += gridDim.x) {
        const typename G::type *x = in + k * F;
        for (unsigned c = 0; c < n_chunks; ++c) {
            const Tile tl = stage_chunk(sh, x, F, c);
            tile_tree<G>(thread_sum<G>(sh.x, tl), tl, sh.warp_sums,
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
            write_tile<G, C128>(o + (uint64_t)c * G::tile * slot_bytes, sh.x, sh.coeff, tl,
                                aligned16);
        }
    }
}

using launch_fn = int (*)(void *, uint64_t, uint64_t, uint64_t, const void *, double *,
                          cudaStream_t);

// Tiles of shape G for states of 2^q <= G::tile slots; D (a one-leaf shape) for the rest: its
// tiles for states of fewer than 8 * G::leaves slots, its chunked kernel beyond D::tile.
template <typename G, typename D, bool C128>
int launch(void *state, uint64_t period, uint64_t F, uint64_t n_states, const void *in,
           double *sums, cudaStream_t s)
{
    using T = typename G::type;
    const unsigned q = (unsigned)__builtin_ctzll(period);
    void (*kernel)(void *, unsigned, unsigned, uint64_t, uint64_t, const T *, double *);
    unsigned lpt = 0, threads;
    if (q <= G::tile_log2 && q >= 3 + G::leaves_log2) {
        kernel = amp_batch_tiles_kernel<G, C128>;
        lpt = tile_states_log2<G>(q);
        threads = G::threads;
    } else if (q <= D::tile_log2) {
        kernel = amp_batch_tiles_kernel<D, C128>;
        lpt = tile_states_log2<D>(q);
        threads = D::threads;
    } else {
        kernel = amp_batch_chunks_kernel<D, C128>;
        threads = D::threads;
    }
    const uint64_t work = (n_states + ((uint64_t)1 << lpt) - 1) >> lpt;
    const unsigned grid = work < 0x7fffffffu ? (unsigned)work : 0x7fffffffu;
    kernel<<<grid, threads, 0, s>>>(state, q, (unsigned)F, 0x100000000ull / F + 1, n_states,
                                    (const T *)in, sums);
    return (int)cudaGetLastError();
}

// The shapes the sweep compares (shape 0: the default; float64 shape 1, float32 shape 2). Per
// input type: the shape for states of 8 * L to tile slots; states shorter or longer use the
// one-leaf shape.
template <bool C128> launch_fn shape_f64(int shape)
{
    switch (shape) {
    case 2: return launch<Geo<double, 128, 2, 8>, GeoF64, C128>;
    case 3: return launch<Geo<double, 128, 2, 6>, GeoF64, C128>;
    case 4: return launch<Geo<double, 64, 4, 8>, GeoF64, C128>;
    case 5: return launch<Geo<double, 128, 1, 8>, GeoF64, C128>;
    default: return launch<GeoF64, GeoF64, C128>;
    }
}
template <bool C128> launch_fn shape_f32(int shape)
{
    switch (shape) {
    case 1: return launch<GeoF32, GeoF32, C128>;
    case 3: return launch<Geo<float, 256, 2, 4>, GeoF32, C128>;
    case 4: return launch<Geo<float, 128, 4, 8>, GeoF32, C128>;
    case 5: return launch<Geo<float, 256, 1, 6>, GeoF32, C128>;
    default: return launch<GeoF32Pairs, GeoF32, C128>; /* 0 and 2 */
    }
}

} // namespace

/* Loads the default shapes' batch kernels on the current device (float64 and float32 input,
 * complex128 and complex64 states). */
extern "C" int qm_cuda_preload_batch_kernels(void)
{
    const void *k[] = {(const void *)amp_batch_tiles_kernel<GeoF64, true>,
                       (const void *)amp_batch_tiles_kernel<GeoF64, false>,
                       (const void *)amp_batch_tiles_kernel<GeoF32Pairs, false>,
                       (const void *)amp_batch_tiles_kernel<GeoF32Pairs, true>,
                       (const void *)amp_batch_tiles_kernel<GeoF32, false>,
                       (const void *)amp_batch_tiles_kernel<GeoF32, true>};
    return qm_cuda_load_functions(k, (int)(sizeof k / sizeof k[0]));
}

extern "C" int qm_cuda_launch_amp_batch_shape(int shape, void *state, int c128, uint64_t period,
                                              uint64_t period_valid, uint64_t n_states,
                                              const void *in, int in_f64, double *sums,
                                              void *stream)
{
    if (n_states == 0)
        return (int)cudaGetLastError();
    const launch_fn f = in_f64 ? (c128 ? shape_f64<true>(shape) : shape_f64<false>(shape))
                               : (c128 ? shape_f32<true>(shape) : shape_f32<false>(shape));
    return f(state, period, period_valid, n_states, in, sums, (cudaStream_t)stream);
}
