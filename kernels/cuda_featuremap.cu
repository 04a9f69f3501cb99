// cuda_featuremap.cu — the feature-map kernels written for the H200's write bandwidth (issue 16):
// the product op from per-state digit tables, IQP's phase and low 10 Walsh-Hadamard stages fused
// in one pass, and the higher stages 10 bits per pass; rounds 1 and 2 of the first two (round 2
// the default, round 1 kept reachable so that both are timed in one run).
// Role: launchers called by cuda_kernels.cu (qm_cuda_launch_product, qm_cuda_launch_wht,
// qm_cuda_launch_iqp), which also keep the round-0 kernels reachable, for bisection.
// In: device pointers already at the range's first slot, plain numbers. Out: enqueued kernels, the
// launch's cudaError_t as an int. Must not: allocate, synchronise, format messages, read the
// environment. The maths (evaluation orders) is kernels/qm_math.h's, so every kernel here writes
// the CPU kernels' bits (the product op and wht exactly; iqp's cos/sin are CUDA's).
//
// Index, bank and occupancy reasoning (H200: 132 SMs, 228 KiB shared memory and 64 Ki registers
// per SM, 32 banks of 4 bytes; a warp's 16-byte shared access is served 8 lanes at a time, an
// 8-byte one 16 lanes at a time, so 8 (16) lanes touching 128 consecutive bytes are conflict-free):
//
// product_digits_kernel (qubits >= 10): one tile = 2^10 aligned amplitudes of one state per block
// iteration, 256 threads, grid-stride over tiles. Shared: A and B (32 double2 each) of the tile's
// state and hi of the tile, double-buffered by iteration parity so that one barrier per tile
// suffices (a buffer written in iteration k was last read in iteration k - 2, and every thread has
// passed iteration k - 1's barrier since). A and B are rebuilt only when the state changes (each
// buffer remembers its state: every thread runs the same loop, so the tags agree). Threads 0..63
// build A, B (5 products each), thread 64 forms hi (qm_product_hi: at most n - 10 products plus
// one per digit). complex128: thread t writes amplitudes j = t + 256u (u < 4) of the tile: A[j &
// 31] is A[lane] (32 consecutive double2, conflict-free), B[j >> 5] one value per warp
// (broadcast); stores are 16 bytes per lane, 512 consecutive bytes per warp. complex64, 16-byte
// aligned pairs: thread t writes the pairs j = 2p, 2p + 1 for p = t + 256u (u < 2) as one float4
// (16 bytes per lane, 512 consecutive bytes per warp); A[2p & 31] and A[(2p + 1) & 31] are read
// at a 32-byte lane stride (a 2-way conflict, 16 distinct addresses per warp, accepted: 4 shared
// wavefronts per 64 amplitudes against 256 bytes written). Misaligned complex64 ranges take the
// one-amplitude mapping with 8-byte stores. Shared 2.1 KiB per block: up to 8 blocks (2048
// threads) per SM when registers allow (launch bound 256 x 4 caps them at 64).
//
// iqp_fused_kernel (qubits >= 10, tiles of 2^10 aligned slots of one state): one warp per tile, 2
// warps per block, each warp with its own 16.5 KiB (complex128; 8.25 KiB complex64) of data plus
// 2.3 KiB of tables, so only __syncwarp is needed. (1) tables: lane y builds W_a[y], W_b[y],
// C_l[y] (l = 5..9), lanes 0..9 e_k, lane 31 W_h (qm_math.h, the same functions as the CPU);
// then E_a[y], E_b[y] from the e_k. (2) phase: in step s (0..31) lane y computes x = y + 32s:
// phi = ((((W_a[y] + W_b[s]) + X) + (E_a[y] + E_b[s])) + W_h, X = the C_l[y] of the bits of s
// (a branch uniform over the warp), then scale * (cos phi, sin phi), stored at padded slot
// x + (x >> 5) (one pad slot per 32: consecutive lanes, conflict-free). (3) round 1: lane o loads
// x = j + 32o (j < 32, padded address j + 33o: a lane stride of 33 slots = 528 bytes, which is 16
// bytes mod 128 (complex64: 8 mod 128), so the 8 (16) lanes of a wavefront hit distinct banks),
// runs stages 0..4 in registers (bit b of j is bit b of x), stores back. (4) round 2: lane y loads
// x = y + 32j (consecutive lanes: conflict-free), runs stages 5..9 (bit b of j is bit 5 + b of x),
// writes slot x of the tile to global memory: 32 consecutive slots per warp store. Registers: 32
// slots per lane (128 for complex128); launch bound 64 threads. Shared per block 38.6 KiB
// (complex128): 5 blocks = 10 warps per SM.
//
// Round 2 (measured round 1, run 17: product 56-92% of the fill, iqp 30-38%; the why, from the
// code: latency, not bandwidth):
// product_states_kernel (> 10 qubits): round 1 paid, per 8-16 KiB tile, a barrier behind thread
// 64's hi (up to n - 10 dependent complex products with their loads) and, in a batch, a global-
// load latency for A and B. Round 2 gives each block a contiguous share of tiles and keeps per
// state, in shared memory, A, B and T1 (the digit-1 product of every value of bits 10..19, 16
// KiB): two barriers per state change, none per tile; hi = T1[v] (n <= 20) or T1[v] * U, U (the
// digits from bit 20 up) in registers, recomputed once per 1024 tiles of a share. 60-64
// registers, 17 KiB: 4 blocks of 256 per SM (registers), 32 warps, as round 1.
// product_batch10_kernel (10-qubit batch): round 1 built one state's A and B with 64 threads per
// tile; round 2 builds 4 states' tables with all 256 threads (one entry each, 5 independent
// loads), then writes 4 tiles (64 KiB complex128) per barrier pair. 48-64 registers, 4 KiB.
// iqp_fused2_kernel: round 1 had 10 warps per SM (shared memory 38.6 KiB per 2 warps; 158
// registers) and 32 sincos in sequence per lane, so the SM sat waiting on sincos latency. Round 2
// puts 4 warps on a tile (8 phases per thread, 8 slots per thread in the stages): 64 registers
// (complex128) and 18.4 KiB, 8 blocks = 32 warps per SM (complex64: 48 registers, 10 blocks = 40
// warps). Its price is shared-memory traffic: 4 round trips of the tile instead of 2, 128 KiB per
// complex128 tile, about 0.5 us per tile per SM at 128 bytes per clock, which is under the
// float64 issue time of the tile's sincos (about 0.7 us at 64 float64 operations per clock). The
// XOR swizzle (iq2_swz) keeps every access at the minimum number of wavefronts (4 per warp for
// 16-byte slots, 2 for 8-byte ones), checked exhaustively over the four rounds' index maps.
//
// wht_pass_kernel (stages [b, b + w), w <= 10, 2^b >= C): a unit = C consecutive columns (low
// indices) x 2^w rows (the indices differing in bits b..b+w-1) of one aligned block of 2^(b+w)
// slots; element (r, c) is slot r * 2^b + c of the unit. C = 4 for complex128, 8 for complex64
// (64 contiguous bytes per row and load). Round 1: thread (c, o) = (t % C, t / C) holds rows
// j | (o << k1), j < 2^k1, k1 = min(w, 5): the loads of one warp instruction are 32 / C rows of
// 64 contiguous bytes; stages b .. b + k1 - 1 in registers; when k2 = w - k1 > 0 the slots go to
// shared memory at (r + (r >> 5)) * C + c (a pad row per 32 rows: threads o and o + 1 are 33 C
// slots = 2112 bytes apart, 64 mod 128, so the two row segments of a wavefront use both halves of
// the banks), then round 2: group (c, o) = (g % C, g / C) holds rows o | (j << k1), j < 2^k2,
// read at consecutive addresses, stages b + k1 .. b + w - 1, written back to global memory.
// Shared 66 KiB for w = 10 (both dtypes): 3 blocks per SM; threads C * 2^k2 (128 complex128, 256
// complex64 at w = 10) with launch bounds (128, 3) and (256, 2) so the registers allow them.
#include "cuda_featuremap.h"
#include "qm_math.h"
#include "qm_passes.h"

#include <cuda_runtime.h>
#include <math.h>
#include <mutex>
#include <stdint.h>

namespace {

/* Blocks for a grid-stride launch of `kernel` (threads per block, dynamic shared bytes): as many
 * as are resident at once on every multiprocessor of the current device (the occupancy
 * calculator: registers, shared memory and threads), at most `units`, at least 1. A grid larger
 * than what is resident would run in waves of unequal length. The answer is kept per device,
 * kernel, block size and shared bytes (a few microseconds of host time per launch otherwise, a
 * few percent of a 0.3 ms batch). */
struct grid_memo {
    int dev, threads;
    const void *kernel;
    size_t smem;
    unsigned blocks;
};
template <typename K>
unsigned grid_of(K kernel, int threads, size_t smem, uint64_t units)
{
    static std::mutex lock;
    static grid_memo memo[32];
    static int n_memo = 0;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        dev = -1;
    unsigned blocks = 0;
    {
        std::lock_guard<std::mutex> g(lock);
        for (int i = 0; i < n_memo && !blocks; ++i)
            if (memo[i].dev == dev && memo[i].kernel == (const void *)kernel &&
                memo[i].threads == threads && memo[i].smem == smem)
                blocks = memo[i].blocks;
    }
    if (!blocks) {
        int sms = 0, per_sm = 0;
        if (dev < 0 || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                           cudaSuccess ||
            sms < 1)
            sms = 132;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) !=
                cudaSuccess ||
            per_sm < 1)
            per_sm = 1;
        (void)cudaGetLastError(); /* nothing sticky: the fallback counts are fine */
        blocks = (unsigned)sms * (unsigned)per_sm;
        std::lock_guard<std::mutex> g(lock);
        if (n_memo < 32)
            memo[n_memo++] = grid_memo{dev, threads, (const void *)kernel, smem, blocks};
    }
    return units == 0 ? 1u : units < blocks ? (unsigned)units : blocks;
}

/* The current device's L2 size in bytes (0 when it cannot be read), kept per device. */
uint64_t l2_bytes()
{
    static std::mutex lock;
    static int have[64];
    static uint64_t size[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        (void)cudaGetLastError();
        return 0;
    }
    std::lock_guard<std::mutex> g(lock);
    if (!have[dev]) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, dev) != cudaSuccess || v < 0)
            v = 0;
        (void)cudaGetLastError();
        size[dev] = (uint64_t)v;
        have[dev] = 1;
    }
    return size[dev];
}

// ---- product op -------------------------------------------------------------------------------

#define QM_PD_THREADS 256

/* Slots g and g + 1 (global indices; slot g - g0 of `state`) of a complex64 range [g0, g1) from
 * v = (re, im) of both: one 16-byte store when both lie in the range, else the one that does. */
__device__ __forceinline__ void store_pair_f32(void *state, uint64_t g, uint64_t g0, uint64_t g1,
                                               const float (&v)[4])
{
    const bool in0 = g >= g0 && g < g1, in1 = g + 1 >= g0 && g + 1 < g1;
    if (in0 && in1)
        *(float4 *)((float2 *)state + (g - g0)) = make_float4(v[0], v[1], v[2], v[3]);
    else if (in0)
        ((float2 *)state)[g - g0] = make_float2(v[0], v[1]);
    else if (in1)
        ((float2 *)state)[g + 1 - g0] = make_float2(v[2], v[3]);
}

/* The amplitudes of one tile (global indices [first, first + 2^10)) that lie in [g0, g1), from the
 * tile's state's A = ab[0..31], B = ab[32..63] and the tile's hi. MODE 0: complex128, thread t
 * writes j = t + 256u (u < 4); 1: complex64, one amplitude per lane, the same j; 2: complex64,
 * 16-byte aligned pairs j = 2p, 2p + 1 for p = t + 256u (u < 2), one float4 per pair (j and j + 1
 * share B[j >> 5], j being even). AREG (round 4, states of more than 10 qubits): the thread's A
 * entries come from registers, ar[0] (MODE 0, 1: A[t mod 32]) and ar[1] (MODE 2: A[2t mod 32],
 * A[2t + 1 mod 32]), loaded once per state: a thread's slots have the same index mod 32 in every
 * tile, so only B is read from shared memory, 2 loads per thread and tile instead of 8 (for
 * complex64 the loads were 32 bytes of shared memory per 8 bytes stored). The same values, so the
 * same bits. */
template <int MODE, bool AREG = false>
__device__ __forceinline__ void product_tile_store(void *state, uint64_t first, uint64_t g0,
                                                   uint64_t g1, const double2 *ab, double2 h,
                                                   double scale, const double2 *ar = nullptr)
{
    if (MODE != 2) {
        double2 amp[4];
        uint64_t slot[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const unsigned j = threadIdx.x + QM_PD_THREADS * u;
            const double2 a = AREG ? ar[0] : ab[j & 31u], b = ab[32 + (j >> 5)];
            double lr, li;
            qm_cmul(a.x, a.y, b.x, b.y, &lr, &li);
            qm_product_amp(h.x, h.y, lr, li, scale, &amp[u].x, &amp[u].y);
            const uint64_t g = first + j;
            slot[u] = g >= g0 && g < g1 ? g - g0 : UINT64_MAX;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (slot[u] == UINT64_MAX)
                continue;
            if (MODE == 0)
                ((double2 *)state)[slot[u]] = amp[u];
            else
                ((float2 *)state)[slot[u]] = make_float2((float)amp[u].x, (float)amp[u].y);
        }
    } else {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const unsigned j = 2 * (threadIdx.x + QM_PD_THREADS * u);
            const double2 b = ab[32 + (j >> 5)];
            float v[4];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const double2 a = AREG ? ar[e] : ab[(j + e) & 31u];
                double lr, li, re, im;
                qm_cmul(a.x, a.y, b.x, b.y, &lr, &li);
                qm_product_amp(h.x, h.y, lr, li, scale, &re, &im);
                v[2 * e] = (float)re;
                v[2 * e + 1] = (float)im;
            }
            const uint64_t g = first + j;
            store_pair_f32(state, g, g0, g1, v);
        }
    }
}

/* Entry e (< 64) of a state's A (e < 32: qubits 0..4 of index e) or B (qubits 5..9 of index
 * (e - 32) << 5), as qm_product_lo forms them. */
__device__ __forceinline__ double2 product_ab_entry(const double *f, unsigned e)
{
    double r, m;
    if (e < 32)
        qm_product_range(f, 0, 5, e, &r, &m);
    else
        qm_product_range(f, 5, 10, (uint64_t)(e - 32) << 5, &r, &m);
    return make_double2(r, m);
}

/* Round 1 (QM_CUDA_KERNELS=round1). MODE as product_tile_store's. */
template <int MODE>
__global__ void __launch_bounds__(QM_PD_THREADS, 4)
product_digits_kernel(void *state, uint64_t n, uint64_t g0, unsigned qubits, uint64_t first_state,
                      const double *table, double scale)
{
    __shared__ double2 ab[2][64]; /* per buffer: A[0..31], B[32..63] */
    __shared__ double2 hi[2];
    uint64_t tag0 = UINT64_MAX, tag1 = UINT64_MAX; /* the state each buffer holds */
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, t1 = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n;
    unsigned k = 0;
    for (uint64_t t = t0 + blockIdx.x; t <= t1; t += gridDim.x, ++k) {
        const unsigned p = k & 1u;
        const uint64_t first = t << QM_PRODUCT_LO_BITS, s = first >> qubits;
        const double *f = table + (s - first_state) * 4 * (uint64_t)qubits;
        if ((p ? tag1 : tag0) != s) {
            if (threadIdx.x < 64)
                ab[p][threadIdx.x] = product_ab_entry(f, threadIdx.x);
            if (p)
                tag1 = s;
            else
                tag0 = s;
        }
        if (threadIdx.x == 64) {
            double r, m;
            qm_product_hi(f, qubits, first, &r, &m);
            hi[p] = make_double2(r, m);
        }
        __syncthreads();
        product_tile_store<MODE>(state, first, g0, g1, ab[p], hi[p], scale);
    }
}

// ---- product op, round 3 (QM_CUDA_KERNELS=round3; the default product op is round 2) -------------
// Where round 2's time goes (run 19: 2^30 complex64 81% of the fill, batches 65536 x 2^10 76-80%),
// reasoned from the code and the H200's rates (132 SMs at ~1.98 GHz; float64: 64 lanes per clock
// per SM, i.e. 2 warp instructions; conversions to and from float64: 16 lanes per clock; one
// shuffle and one shared-memory wavefront per clock; stores of 4.7 TB/s = ~18 bytes per clock per
// SM):
// - > 10 qubits: every amplitude paid lo = A * B and then hi * lo and the scale: 14 float64
//   operations (no FMA: --fmad=false). For 2^30 amplitudes that is 2^30 * 14 / 32 warp
//   instructions over 132 SMs x 2 per clock: ~0.9 ms of the float64 pipe, plus ~0.5 ms of
//   float64 -> float32 conversions for complex64, against a fill of 1.87 ms (complex64): the
//   arithmetic pipes were busy ~75% of the time the stores needed, and the stores stall whenever
//   both meet. Complex64 pairs also read A[2p & 31] and A[(2p + 1) & 31] at a 32-byte lane stride
//   (2-way bank conflict). Round 3 keeps the state's lo table L[j] = qm_cmul(A[j & 31], B[j >> 5])
//   for all 1024 j in shared memory (built once per state: 1024 products, after A and B), so an
//   amplitude costs hi * L[j] (6 operations) and the scale (2; none when scale is 1, since 1 * r is
//   r bit for bit for every non-NaN r: angle and basis): ~0.4-0.5 ms of float64 per 2^30. The
//   products are the same ones in the same order as qm_product_lo/qm_product_amp: the same bits.
//   Complex64 pairs keep L split by parity (even j at [j / 2], odd j at [512 + j / 2]), so the two
//   16-byte reads of a pair are at consecutive addresses across the warp: 4 wavefronts per warp
//   read, no conflict. Complex128 and unaligned complex64 read L[t + 256 u]: consecutive too.
//   Shared: L 16 KiB + T1 16 KiB + A, B 1 KiB = 33 KiB static (6 blocks would fit in 228 KiB);
//   registers (ptxas -v, sm_90) 56 (complex128 with a scale, complex64 single slots) to 64
//   (complex64 pairs, complex128 unit scale), no spills, capped at 64 by
//   __launch_bounds__(256, 4): 4 blocks = 32 warps per SM, as round 2 (stores are fire-and-forget,
//   so 32 warps with 2-4 16-byte stores per tile iteration and no load on the critical path keep
//   more bytes in flight than the ~4.7 TB/s x ~1 us a store needs).
// - 10-qubit batches: there the float64 work is the same as round 2's (each L entry would be used
//   once), ~23% (complex128) and ~45% (complex64, with the conversions) of the fill time; what
//   round 2 exposed is latency: per group of 4 tiles the block loaded the 4 states' factors from
//   global memory (~1 us under load), chained 5 dependent products per entry, and only then, after
//   a barrier, stored 64 KiB (~8 us at a quarter of an SM's share of the bandwidth): ~1.5 us of
//   each ~9.5 us iteration without stores from that block. And 16384 groups over 528 resident
//   blocks is 31.03 per block: 16 blocks ran a 32nd group while the others idled (3%). Round 3
//   loads the next group's factors into registers (5 complex factors per thread, one entry of one
//   tile's A or B) before it stores the current group, forms the entries after the stores into the
//   other half of a double-buffered table, and needs one barrier per group; the states are split
//   evenly (block b takes tiles [b T / G, (b + 1) T / G)), so blocks differ by at most one tile.
//   Registers 62-64, no spills (the 10 prefetched factor doubles included), 8 KiB of shared
//   memory: 4 blocks = 32 warps per SM.
//   Complex64 pairs read A[2p % 32] and A[(2p + 1) % 32] at a 32-byte lane stride: 8 shared
//   wavefronts per warp read instead of 4, 18 per 64 amplitudes with B; at 2^26 amplitudes that is
//   ~70 us of the LSU pipe per SM against a 124 us fill, and the stores issue through the same
//   pipe. Round 3 keeps A by parity there (product_ab_pos): 2 + 2 + 1 wavefronts per 64.
// - Both: a tile wholly inside the range skips the per-amplitude bounds checks (64-bit compares).

/* Where entry e (< 64) of A, B sits in a batch table: with SPLIT (complex64 pairs) A is kept by
 * parity (even entries at 0..15, odd at 16..31), so the pair j = 2p, 2p + 1 reads A at p % 16 and
 * 16 + p % 16: 16 distinct 16-byte values per warp read, the 2 wavefronts a 256-byte read needs,
 * where A[2p % 32] at a 32-byte lane stride took 8 (2-way conflict) — shared-memory wavefronts
 * share the LSU pipe with the stores. */
template <bool SPLIT>
__device__ __forceinline__ unsigned product_ab_pos(unsigned e)
{
    return SPLIT && e < 32 ? ((e & 1u) << 4) | (e >> 1) : e;
}

/* lo of tile position j from a state's table: L[j] (LTAB; split by parity when SPLIT) or the
 * product of A and B (A at product_ab_pos, B = tab[32..63]). */
template <bool LTAB, bool SPLIT>
__device__ __forceinline__ double2 product_lo3(const double2 *tab, unsigned j)
{
    if (LTAB)
        return tab[SPLIT ? ((j & 1u) << 9) | (j >> 1) : j];
    const double2 a = tab[product_ab_pos<SPLIT>(j & 31u)], b = tab[32 + (j >> 5)];
    double2 lo;
    qm_cmul(a.x, a.y, b.x, b.y, &lo.x, &lo.y);
    return lo;
}

/* scale * (h * lo), qm_product_amp's operations; UNIT: scale is 1, whose product is the identity
 * for every non-NaN value. ONE: h is (1, 0) (10-qubit states), where qm_cmul's (1 lr - 0 li,
 * 1 li + 0 lr) is (lr - 0 li, li + 0 lr) bit for bit (1 x is x): 4 operations instead of 6. The
 * products by 0 stay: they carry the signs of zeros (-0 - +0 is -0, -0 - -0 is +0). */
template <bool UNIT, bool ONE>
__device__ __forceinline__ double2 product_amp3(double2 h, double2 lo, double scale)
{
    double2 v;
    if (ONE) {
        v.x = lo.x - 0.0 * lo.y;
        v.y = lo.y + 0.0 * lo.x;
    } else {
        qm_cmul(h.x, h.y, lo.x, lo.y, &v.x, &v.y);
    }
    if (!UNIT) {
        v.x = scale * v.x;
        v.y = scale * v.y;
    }
    return v;
}

/* The amplitudes of one tile (global [first, first + 2^10)) in [g0, g1); MODE as
 * product_tile_store's. LTAB: lo from the state's L table (more than 10 qubits); else from A and
 * B, and h is (1, 0) (10-qubit states). */
template <int MODE, bool UNIT, bool LTAB>
__device__ __forceinline__ void product_tile_store3(void *state, uint64_t first, uint64_t g0,
                                                    uint64_t g1, const double2 *tab, double2 h,
                                                    double scale)
{
    const bool inside = first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1; /* uniform */
    if (MODE != 2) {
        double2 amp[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            amp[u] = product_amp3<UNIT, !LTAB>(
                h, product_lo3<LTAB, false>(tab, threadIdx.x + QM_PD_THREADS * u), scale);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const uint64_t g = first + threadIdx.x + QM_PD_THREADS * u;
            if (!inside && (g < g0 || g >= g1))
                continue;
            if (MODE == 0)
                ((double2 *)state)[g - g0] = amp[u];
            else
                ((float2 *)state)[g - g0] = make_float2((float)amp[u].x, (float)amp[u].y);
        }
    } else {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const unsigned p = threadIdx.x + QM_PD_THREADS * u, j = 2 * p;
            const double2 a0 =
                product_amp3<UNIT, !LTAB>(h, product_lo3<LTAB, true>(tab, j), scale);
            const double2 a1 =
                product_amp3<UNIT, !LTAB>(h, product_lo3<LTAB, true>(tab, j + 1), scale);
            const float v[4] = {(float)a0.x, (float)a0.y, (float)a1.x, (float)a1.y};
            const uint64_t g = first + j;
            if (inside) {
                *(float4 *)((float2 *)state + (g - g0)) = make_float4(v[0], v[1], v[2], v[3]);
                continue;
            }
            store_pair_f32(state, g, g0, g1, v);
        }
    }
}

/* Round 5's tile store (states of more than 10 qubits): the thread's 4 lo values in registers, in
 * product_tile_store's positions (MODE 0, 1: j = t + 256 u; MODE 2: pairs 2p, 2p + 1 for
 * p = t + 256 u', lo[2u'] and lo[2u' + 1]), amplitude = scale * (h * lo). complex64 stores are
 * streaming (__stcs, evict-first): on an H100 (session 24,
 * bench/results/2026-12-07-s24-product-c64.cu) a 2^30 complex64 state took 2.68 ms against
 * 2.88 ms with plain stores and round 4's 2.74 ms (fill 2.62 ms); complex128 keeps plain stores,
 * measured at round 4's 97.8% of a fill. */
template <int MODE, bool UNIT>
__device__ __forceinline__ void product_tile_store_lo(void *state, uint64_t first, uint64_t g0,
                                                      uint64_t g1, const double2 (&lo)[4], double2 h,
                                                      double scale)
{
    const bool inside = first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1; /* uniform */
    if (MODE != 2) {
#pragma unroll
        for (unsigned u = 0; u < 4; ++u) {
            const double2 a = product_amp3<UNIT, false>(h, lo[u], scale);
            const uint64_t g = first + threadIdx.x + QM_PD_THREADS * u;
            if (!inside && (g < g0 || g >= g1))
                continue;
            if (MODE == 0)
                ((double2 *)state)[g - g0] = a;
            else
                __stcs((float2 *)state + (g - g0), make_float2((float)a.x, (float)a.y));
        }
    } else {
#pragma unroll
        for (unsigned u = 0; u < 2; ++u) {
            const double2 a0 = product_amp3<UNIT, false>(h, lo[2 * u], scale);
            const double2 a1 = product_amp3<UNIT, false>(h, lo[2 * u + 1], scale);
            const float v[4] = {(float)a0.x, (float)a0.y, (float)a1.x, (float)a1.y};
            const uint64_t g = first + 2 * (threadIdx.x + QM_PD_THREADS * u);
            if (inside) {
                __stcs((float4 *)((float2 *)state + (g - g0)), make_float4(v[0], v[1], v[2], v[3]));
                continue;
            }
            store_pair_f32(state, g, g0, g1, v);
        }
    }
}

/* T1[v] = qm_product_range(f, 10, top, v << 10) for v <= vmask, the block's threads a few each
 * (rounds 2 and 3). */
__device__ __forceinline__ void product_t1_build(double2 *t1, const double *f, unsigned top,
                                                 uint64_t vmask)
{
    for (unsigned v = threadIdx.x; v <= vmask; v += QM_PD_THREADS) {
        double r, m;
        qm_product_range(f, QM_PRODUCT_LO_BITS, top, (uint64_t)v << QM_PRODUCT_LO_BITS, &r, &m);
        t1[v] = make_double2(r, m);
    }
}

/* hi of the tile at global index `first` of a state of `qubits` > 10 (rounds 2 and 3): T1[bits
 * 10..19], times U = (ur, ui), the digits from bit 20 up, which is recomputed (qm_product_hi's
 * loop without its last step) when bits 20.. differ from up_have. */
__device__ __forceinline__ double2 product_tile_hi(const double2 *t1, uint64_t vmask,
                                                   const double *f, unsigned qubits,
                                                   uint64_t first, uint64_t &up_have, double &ur,
                                                   double &ui)
{
    const double2 d = t1[(first >> QM_PRODUCT_LO_BITS) & vmask];
    double2 h = d;
    if (qubits > 2 * QM_PRODUCT_LO_BITS) {
        const uint64_t up = first >> (2 * QM_PRODUCT_LO_BITS);
        if (up != up_have) {
            unsigned d0 = QM_PRODUCT_LO_BITS * ((qubits - 1) / QM_PRODUCT_LO_BITS);
            qm_product_range(f, d0, qubits, first, &ur, &ui);
            while (d0 > 2 * QM_PRODUCT_LO_BITS) {
                d0 -= QM_PRODUCT_LO_BITS;
                double tr, ti;
                qm_product_range(f, d0, d0 + QM_PRODUCT_LO_BITS, first, &tr, &ti);
                qm_cmul(tr, ti, ur, ui, &ur, &ui);
            }
            up_have = up;
        }
        qm_cmul(d.x, d.y, ur, ui, &h.x, &h.y);
    }
    return h;
}

/* Rounds 2 and 3 (R3; UNIT: scale is 1, used by round 3 only), states of more than 10 qubits.
 * Round 3 adds the state's whole lo table L (see "product op, round 3" above) and splits the tiles
 * evenly. Round 2: block b takes the tiles [ta, tb), a contiguous share
 * of the range's tiles, in order. The tables of the tile's state live in shared memory and are
 * rebuilt only when the state changes (two barriers, then none until the next state): A, B
 * (threads 0..63) and T1[v] = qm_product_range(f, 10, min(n, 20), v << 10), the digit-1 product
 * for every value v of bits 10..min(n,20)-1 (2^min(n - 10, 10) entries, every thread a few).
 * hi of a tile is then T1[v] for n <= 20, and qm_cmul(T1[v], U) above, U the product of the
 * digits from the top one down to digit 2 (qm_product_hi's loop without its last step, which is
 * exactly qm_cmul(T_1, U)): the same complex multiplies in the same order, so the same bits. U
 * depends on bits 20.. of the index only: every thread keeps it in registers and recomputes it
 * (n - 20 products) when those bits change, once per 1024 tiles of a contiguous share. */
/* REG: what a thread keeps in registers from state to state: 0 nothing (rounds 2, 3), 1 its
 * entries of A (round 4, AREG of product_tile_store), 2 its 4 lo values (round 5: every amplitude
 * is then scale * (h * lo), product_amp3<UNIT, false>, qm_product_amp's bits). */
template <int MODE, bool R3, bool UNIT, int REG = 0>
__global__ void __launch_bounds__(QM_PD_THREADS, 4)
product_states_kernel(void *state, uint64_t n, uint64_t g0, unsigned qubits,
                      uint64_t first_state, const double *table, double scale)
{
    constexpr bool AREG = REG == 1;
    double2 ar[2]; /* REG 1 (round 4): the thread's entries of A (product_tile_store) */
    double2 lo[4]; /* REG 2 (round 5): the thread's lo of its 4 tile positions */
    __shared__ double2 ab[64];
    __shared__ double2 t1[1u << QM_PRODUCT_LO_BITS];
    __shared__ double2 lt[R3 ? 1u << QM_PRODUCT_LO_BITS : 1]; /* round 3's lo table */
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n, tiles = tl - t0 + 1;
    const uint64_t per = (tiles + gridDim.x - 1) / gridDim.x;
    /* round 3 splits evenly (shares differ by at most one tile), round 2 in shares of `per` */
    const uint64_t ta = R3 ? t0 + blockIdx.x * tiles / gridDim.x : t0 + blockIdx.x * per;
    const uint64_t tb = R3             ? t0 + (blockIdx.x + 1) * tiles / gridDim.x
                        : ta + per < tl + 1 ? ta + per
                                            : tl + 1;
    const unsigned top = qubits < 2 * QM_PRODUCT_LO_BITS ? qubits : 2 * QM_PRODUCT_LO_BITS;
    const uint64_t vmask = ((uint64_t)1 << (top - QM_PRODUCT_LO_BITS)) - 1;
    uint64_t have = UINT64_MAX, up_have = UINT64_MAX;
    double ur = 1.0, ui = 0.0;
    for (uint64_t t = ta; t < tb; ++t) {
        const uint64_t first = t << QM_PRODUCT_LO_BITS, s = first >> qubits;
        const double *f = table + (s - first_state) * 4 * (uint64_t)qubits;
        if (s != have) { /* uniform: every thread walks the same tiles */
            __syncthreads(); /* every thread is done with the previous state's tables */
            if (threadIdx.x < 64)
                ab[threadIdx.x] = product_ab_entry(f, threadIdx.x);
            product_t1_build(t1, f, top, vmask);
            __syncthreads(); /* A and B are complete */
            if (R3) {
                for (unsigned j = threadIdx.x; j < (1u << QM_PRODUCT_LO_BITS); j += QM_PD_THREADS)
                    lt[MODE == 2 ? ((j & 1u) << 9) | (j >> 1) : j] =
                        product_lo3<false, false>(ab, j);
                __syncthreads();
            }
            if (AREG) {
                ar[0] = ab[MODE == 2 ? (2 * threadIdx.x) & 31u : threadIdx.x & 31u];
                ar[1] = ab[(2 * threadIdx.x + 1) & 31u];
            }
            if (REG == 2)
#pragma unroll
                for (unsigned u = 0; u < 4; ++u) /* product_tile_store's positions and product */
                    lo[u] = product_lo3<false, false>(
                        ab, MODE == 2 ? 2 * (threadIdx.x + QM_PD_THREADS * (u >> 1)) + (u & 1u)
                                      : threadIdx.x + QM_PD_THREADS * u);
            have = s;
            up_have = UINT64_MAX;
        }
        const double2 h = product_tile_hi(t1, vmask, f, qubits, first, up_have, ur, ui);
        if (R3)
            product_tile_store3<MODE, UNIT, true>(state, first, g0, g1, lt, h, scale);
        else if (REG == 2)
            product_tile_store_lo<MODE, UNIT>(state, first, g0, g1, lo, h, scale);
        else
            product_tile_store<MODE, AREG>(state, first, g0, g1, ab, h, scale, ar);
    }
}

/* Round 2, states of exactly 10 qubits (a batch: every tile is its own state, hi = (1, 0) as
 * qm_product_hi gives it). Groups of QM_PD_GROUP consecutive tiles per block iteration,
 * grid-stride over the groups: all 256 threads build the group's tables at once (thread t: entry
 * t % 64 of tile t / 64's A or B: 5 independent factor loads, 5 products), one barrier, the
 * group's 4 tiles are written (64 KiB complex128, 32 KiB complex64 per barrier pair instead of
 * round 1's one tile per barrier with 64 of 256 threads building), one barrier before the tables
 * are rebuilt. */
#define QM_PD_GROUP 4
template <int MODE>
__global__ void __launch_bounds__(QM_PD_THREADS, 4)
product_batch10_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state,
                       const double *table, double scale)
{
    __shared__ double2 ab[QM_PD_GROUP][64];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n, groups = (tl - t0) / QM_PD_GROUP + 1;
    const double2 one = make_double2(1.0, 0.0);
    for (uint64_t q = blockIdx.x; q < groups; q += gridDim.x) {
        const uint64_t ts = t0 + q * QM_PD_GROUP;
        {
            const unsigned u = threadIdx.x >> 6, e = threadIdx.x & 63u;
            if (ts + u <= tl) /* tile index = state index at 10 qubits */
                ab[u][e] = product_ab_entry(table + (ts + u - first_state) * 4 * 10, e);
        }
        __syncthreads();
#pragma unroll
        for (unsigned u = 0; u < QM_PD_GROUP; ++u)
            if (ts + u <= tl)
                product_tile_store<MODE>(state, (ts + u) << QM_PRODUCT_LO_BITS, g0, g1, ab[u],
                                         one, scale);
        __syncthreads(); /* the tables are rebuilt for the next group */
    }
}

/* Round 3, 10-qubit states: block b takes the tiles (= states) [b T / G, (b + 1) T / G), in
 * groups of QM_PD_GROUP; thread t owns entry t % 64 of tile t / 64's A or B of a group. Its 5
 * factors for the next group are loaded before the current group is stored and multiplied (from
 * (1, 0) up, qm_product_range's order) after, into the other half of the table; one barrier per
 * group (a half written in group k was last read in group k - 1, before that group's barrier). */
template <int MODE, bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 4)
product_batch10_r3_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state,
                          const double *table, double scale)
{
    __shared__ double2 ab[2][QM_PD_GROUP][64];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n, tiles = tl - t0 + 1;
    const uint64_t ta = t0 + blockIdx.x * tiles / gridDim.x;
    const uint64_t tb = t0 + (blockIdx.x + 1) * tiles / gridDim.x;
    const unsigned u = threadIdx.x >> 6, e = threadIdx.x & 63u;
    const unsigned q0 = e < 32 ? 0 : 5, bits = e & 31u;
    const double2 one = make_double2(1.0, 0.0);
    double fr[5], fi[5];
    auto load = [&](uint64_t ts) {
        if (ts + u < tb) {
            const double *f = table + (ts + u - first_state) * 4 * QM_PRODUCT_LO_BITS;
#pragma unroll
            for (unsigned k = 0; k < 5; ++k) {
                const double *p = f + 4 * (q0 + k) + 2 * ((bits >> k) & 1u);
                fr[k] = __ldg(p);
                fi[k] = __ldg(p + 1);
            }
        }
    };
    auto build = [&](uint64_t ts, double2 *half) {
        if (ts + u < tb) {
            double r = 1.0, m = 0.0;
#pragma unroll
            for (unsigned k = 0; k < 5; ++k)
                qm_cmul(r, m, fr[k], fi[k], &r, &m);
            half[u * 64 + product_ab_pos<MODE == 2>(e)] = make_double2(r, m);
        }
    };
    if (ta >= tb)
        return; /* uniform over the block */
    load(ta);
    build(ta, &ab[0][0][0]);
    __syncthreads();
    unsigned k = 0;
    for (uint64_t ts = ta; ts < tb; ts += QM_PD_GROUP, ++k) {
        const uint64_t tn = ts + QM_PD_GROUP;
        load(tn); /* in flight while the group is stored */
#pragma unroll
        for (unsigned w = 0; w < QM_PD_GROUP; ++w)
            if (ts + w < tb)
                product_tile_store3<MODE, UNIT, false>(state, (ts + w) << QM_PRODUCT_LO_BITS, g0,
                                                       g1, ab[k & 1u][w], one, scale);
        build(tn, &ab[(k + 1) & 1u][0][0]);
        __syncthreads();
    }
}

/* Round 4, 10-qubit states (QM_CUDA_KERNELS=round4, the default): one warp per state, no block barrier.
 * Rounds 2 and 3 (run 2 of session 10: 76-78% of a fill for 65536 x 2^10) hold a block's 256
 * threads at two barriers per group of 4 states while 64 of them build each state's tables.
 * Here lane y builds A[y] (qubits 0..4 of index y) and B[y] (qubits 5..9 of index 32 y) in
 * registers, from factors loaded one state ahead (the loads of state k + 1 are in flight while
 * state k is written), and the warp writes its state in 32 store instructions of 32 consecutive
 * slots (512 bytes complex128), B[m] read from the warp's 1 KiB of shared memory as a broadcast
 * (one load per 32 slots; a shuffle of a double2 was four, and Nsight Compute's run 3 of session
 * 11 showed the shuffles' MIO queue stalling the warps): amplitude y + 32 m = scale * ((1, 0) *
 * (A[y] * B[m])), qm_product_amp's bits (product_amp3, as round 3). Complex64 pairs (MODE 2): lane y
 * writes slots 2y', 2y' + 1 (y' = y + 32 m', m' < 16) as one float4, so it builds A[2y mod 32] and
 * A[2y mod 32 + 1]; their B is B[2 m' + (y >= 16)]. Warps take states grid-stride (consecutive
 * warps, consecutive states). A range that starts or ends inside a state writes only its slots.
 * The factors (session 18): the next state's whole table (10 qubits x 2 bit values, 20 double2,
 * 320 bytes) is loaded by lanes 0..19 with one 16-byte load each, held in one register while the
 * current state is written, and put in the warp's shared memory when its state starts; each lane
 * then reads its 10 or 11 factors there (2 addresses per qubit over the warp: broadcasts). Until
 * then every lane loaded its 22 factor doubles from global memory itself and held them in 22
 * registers. The session 18 microbenchmark (bench/results/2026-12-06-s18-batch-product-c64.cu,
 * H100) showed them to be the limit: with the arithmetic removed those loads and the stores alone
 * reached only 81.9% of a fill, and with every state reading state 0's factors (all hits in L1)
 * the kernel reached 92%; the shared table took complex64 from 82.0 to 83.7% of a fill and
 * complex128 from 86.7 to 87.7%, at 60-68 registers instead of 80 (4 blocks per SM). Session 22
 * loaded the tables two states ahead (two registers taken in turn, 64 registers): the kernel time
 * did not move (0.2053 against 0.2050 ms complex64, 0.384 against 0.383 ms complex128, H100), so
 * one state ahead stays. */
/* Lane y's factors of a 10-qubit state from its table F (qubit q's factor for bit value b at
 * F[2 q + b]), qm_product_range's products from (1, 0): ab[0] = A[a0], for complex64 pairs (NA 2)
 * ab[1] = A[a0 + 1] (a0 even: qubit 0's bit is 1), and ab[NA] = B[y]. */
template <int NA>
__device__ __forceinline__ void batch10_ab(const double2 *F, unsigned y, unsigned a0,
                                           double2 (&ab)[NA + 1])
{
#pragma unroll
    for (int w = 0; w <= NA; ++w) {
        double r = 1.0, m = 0.0;
#pragma unroll
        for (unsigned q = 0; q < 5; ++q) {
            const unsigned bit = w == NA ? (y >> q) & 1u : w == 1 && q == 0 ? 1u : (a0 >> q) & 1u;
            const double2 f = F[2 * (w == NA ? 5 + q : q) + bit];
            qm_cmul(r, m, f.x, f.y, &r, &m);
        }
        ab[w] = make_double2(r, m);
    }
}

/* The warp's store of one 10-qubit state (global slots [first, first + 2^10), those in [g0, g1)):
 * lane y's A entries ab[0..NA-1] (batch10_ab), B the warp's shared row. Slot y + 32 m (MODE 0,
 * 1) is scale * ((1, 0) * (A[y] * B[m])), qm_product_amp's bits (product_amp3); complex64 pairs
 * (MODE 2): slots 2y', 2y' + 1, y' = y + 32 m', m' < 16, one float4, from A[2y mod 32],
 * A[2y mod 32 + 1] and B[2 m' + (y >= 16)]. Streaming stores (the states are not read again
 * here): 32 consecutive slots (or 16-byte pairs) per store instruction. */
template <int MODE, bool UNIT>
__device__ __forceinline__ void batch10_state_store(void *state, uint64_t first, uint64_t g0,
                                                    uint64_t g1, const double2 *ab,
                                                    const double2 *B, unsigned y, double scale)
{
    const bool inside = first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1; /* uniform */
    if (MODE != 2) {
#pragma unroll 8
        for (unsigned m = 0; m < 32; ++m) {
            const double2 b = B[m]; /* one address for the warp: a broadcast */
            double2 lo;
            qm_cmul(ab[0].x, ab[0].y, b.x, b.y, &lo.x, &lo.y);
            const double2 a = product_amp3<UNIT, true>(make_double2(1.0, 0.0), lo, scale);
            const uint64_t g = first + y + 32 * m;
            if (!inside && (g < g0 || g >= g1))
                continue;
            if (MODE == 0)
                __stcs((double2 *)state + (g - g0), a);
            else
                __stcs((float2 *)state + (g - g0), make_float2((float)a.x, (float)a.y));
        }
    } else {
#pragma unroll 4
        for (unsigned m = 0; m < 16; ++m) {
            const double2 b = B[2 * m + (y >= 16 ? 1u : 0u)]; /* two addresses: broadcasts */
            float v[4];
#pragma unroll
            for (int w = 0; w < 2; ++w) {
                double2 lo;
                qm_cmul(ab[w].x, ab[w].y, b.x, b.y, &lo.x, &lo.y);
                const double2 a = product_amp3<UNIT, true>(make_double2(1.0, 0.0), lo, scale);
                v[2 * w] = (float)a.x;
                v[2 * w + 1] = (float)a.y;
            }
            const uint64_t g = first + 2 * (y + 32 * m);
            if (inside) {
                __stcs((float4 *)((float2 *)state + (g - g0)), make_float4(v[0], v[1], v[2], v[3]));
                continue;
            }
            store_pair_f32(state, g, g0, g1, v);
        }
    }
}

template <int MODE, bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 4) /* 60-68 registers, no spills */
product_batch10_r4_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state,
                          const double *table, double scale, uint64_t l2_bytes)
{
    constexpr unsigned TAB = 2 * QM_PRODUCT_LO_BITS; /* a state's factors: (qubit, bit) pairs */
    __shared__ double2 bs[QM_PD_THREADS / 32][2][32];  /* per warp, B of alternate states */
    __shared__ double2 fs[QM_PD_THREADS / 32][2][TAB]; /* per warp, the factors of alternate states */
    const unsigned y = threadIdx.x & 31u;
    double2(*bw)[32] = bs[threadIdx.x >> 5];
    double2(*fw)[TAB] = fs[threadIdx.x >> 5];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n;
    const uint64_t stride = (uint64_t)gridDim.x * (QM_PD_THREADS / 32);
    unsigned k = 0; /* the warp's state count: its buffers' parity */
    uint64_t t = t0 + (uint64_t)blockIdx.x * (QM_PD_THREADS / 32) + (threadIdx.x >> 5);
    constexpr int NA = MODE == 2 ? 2 : 1; /* A entries per lane */
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double2 next = make_double2(0.0, 0.0); /* lane y < TAB: entry y of the next state's table */
    auto load = [&](uint64_t ts) {
        if (ts <= tl && y < TAB)
            next = __ldg((const double2 *)(table + (ts - first_state) * 4 * QM_PRODUCT_LO_BITS) + y);
    };
    {
        /* the range's factor tables (320 bytes a state) to L2 first, in one burst and marked
         * evict-last, when they fit in half of it: the states' streaming stores (evict-first) then
         * run without a DRAM read between them */
        const char *f0 = (const char *)(table + (t0 - first_state) * 4 * QM_PRODUCT_LO_BITS);
        const uint64_t bytes = (tl - t0 + 1) * 4 * QM_PRODUCT_LO_BITS * sizeof(double);
        if (bytes <= l2_bytes / 2)
            for (uint64_t o = ((uint64_t)blockIdx.x * QM_PD_THREADS + threadIdx.x) * 128; o < bytes;
                 o += (uint64_t)gridDim.x * QM_PD_THREADS * 128)
                asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(f0 + o));
    }
    load(t);
    for (; t <= tl; t += stride) {
        /* this state's table to the warp's buffer k & 1 and B's to bw[k & 1]: each last read for
         * state k - 2, before state k - 1's first __syncwarp */
        const unsigned par = k & 1u;
        ++k;
        const double2 *F = fw[par];
        if (y < TAB)
            fw[par][y] = next;
        __syncwarp();
        load(t + stride); /* in flight while this state is written */
        double2 ab[NA + 1];
        batch10_ab<NA>(F, y, a0, ab);
        double2 *B = bw[par];
        B[y] = ab[NA];
        __syncwarp();
        batch10_state_store<MODE, UNIT>(state, t << QM_PRODUCT_LO_BITS, g0, g1, ab, B, y, scale);
    }
}

/* Round 5 (QM_CUDA_KERNELS=round5, the default from session 24): round 4 with two product kernels
 * of its own, both the same operations as round 4 (so the same bits).
 *
 * product_batch10_r5_kernel, batches of 10-qubit states. Round 4's warps each load their next
 * state's factors (320 bytes) while they write the current one: on the H200 (session 23) it
 * reached 84.0% (complex128) / 80.6% (complex64) of a fill, and session 18's diagnostic on an H100
 * (every state reading state 0's factors, all L1 hits: 91.9%) put the limit on those loads in the
 * middle of the write stream. Here block b takes a contiguous share of the range's states and reads
 * the factor tables of R5_CH = 64 of them at a time with all 256 threads (one burst of 20 KiB:
 * five 16-byte loads a thread, held in registers while the current chunk is written, stored to the
 * other half of a double-buffered shared table after it; one barrier a chunk). Its 8 warps then
 * write the chunk's states, a state a warp, with no global load between the stores: lane y forms
 * A and B from the shared table exactly as round 4 (batch10_ab), B goes through the warp's shared
 * row, and the stores are round 4's (streaming, 32 consecutive slots or 16-byte complex64 pairs a
 * store instruction; states cut by the range's ends store only their slots). Shared memory 44 KiB
 * (2 x 64 x 320 bytes + 4 KiB of B rows): 3 blocks per SM. The microbenchmark that chose the chunk
 * (bench/results/2026-12-06-s22-product-blk.cu, H200, session 23): CH 16 / 32 / 64 gave 81.7 / 84.4
 * / 88.6% of a fill (complex64) and 85.2 / 86.1 / 89.7% (complex128) against round 4's 80.6 / 84.0%.
 *
 * product_states_kernel with REG 2, states of more than 10 qubits: round 4's kernel (round 2's share of
 * tiles per block, A in registers) with the thread's whole lo = A * B in registers instead. A
 * thread writes the same 4 tile positions of every tile of a state (j = t + 256 u; complex64 pairs
 * 2p, 2p + 1 for p = t + 256 u), and lo depends on j only, so its 4 values are formed once per state
 * (qm_cmul(A[j mod 32], B[j / 32]), product_tile_store's product) and every amplitude costs only
 * scale * (h * lo): 6 float64 operations (8 with a scale) where round 4 spent 12 (14). On the H200
 * round 4's complex64 state (81.0% of a fill against 93.2% complex128, session 23) is bound by the
 * float64 pipe: 600 G amplitudes/s at a fill's rate, 14 operations and 2 conversions each. */
#define QM_R5_CH 64
#define QM_R5_TAB 20 /* double2 entries of a 10-qubit state's factor table: (qubit, bit) */

template <int MODE, bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 3)
product_batch10_r5_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state,
                          const double *table, double scale)
{
    constexpr unsigned PER = (QM_R5_CH * QM_R5_TAB + QM_PD_THREADS - 1) / QM_PD_THREADS;
    __shared__ double2 tab[2][QM_R5_CH * QM_R5_TAB];
    __shared__ double2 bs[QM_PD_THREADS / 32][32];
    const unsigned warp = threadIdx.x >> 5, y = threadIdx.x & 31u;
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n, tiles = tl - t0 + 1;
    /* the block's contiguous states [s0, s1) (state = tile at 10 qubits) */
    const uint64_t s0 = t0 + tiles * blockIdx.x / gridDim.x;
    const uint64_t s1 = t0 + tiles * (blockIdx.x + 1) / gridDim.x;
    if (s0 >= s1)
        return; /* uniform over the block */
    const double2 *T = (const double2 *)table;
    constexpr int NA = MODE == 2 ? 2 : 1; /* A entries per lane */
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double2 reg[PER];
    auto fetch = [&](uint64_t c0) { /* the chunk from state c0, into registers */
#pragma unroll
        for (unsigned k = 0; k < PER; ++k) {
            const uint64_t e = (uint64_t)threadIdx.x + (uint64_t)k * QM_PD_THREADS;
            if (e < (uint64_t)QM_R5_CH * QM_R5_TAB && e < (s1 - c0) * QM_R5_TAB)
                reg[k] = __ldg(T + (c0 - first_state) * QM_R5_TAB + e);
        }
    };
    auto put = [&](unsigned buf) {
#pragma unroll
        for (unsigned k = 0; k < PER; ++k) {
            const unsigned e = threadIdx.x + k * QM_PD_THREADS;
            if (e < QM_R5_CH * QM_R5_TAB)
                tab[buf][e] = reg[k];
        }
    };
    fetch(s0);
    put(0);
    __syncthreads();
    unsigned buf = 0;
    for (uint64_t c0 = s0; c0 < s1; c0 += QM_R5_CH) {
        const uint64_t cn = c0 + QM_R5_CH;
        if (cn < s1)
            fetch(cn); /* in flight while this chunk is written */
        const unsigned nst = (unsigned)(s1 - c0 < (uint64_t)QM_R5_CH ? s1 - c0 : (uint64_t)QM_R5_CH);
        for (unsigned j = warp; j < nst; j += QM_PD_THREADS / 32) {
            double2 ab[NA + 1];
            batch10_ab<NA>(tab[buf] + j * QM_R5_TAB, y, a0, ab); /* round 4's */
            double2 *B = bs[warp];
            __syncwarp(); /* the previous state's reads of B are done */
            B[y] = ab[NA];
            __syncwarp();
            batch10_state_store<MODE, UNIT>(state, (c0 + j) << QM_PRODUCT_LO_BITS, g0, g1, ab,
                                            B, y, scale);
        }
        if (cn < s1) {
            /* the other half's last reads were the previous chunk's, before the barrier that
             * ended it; this chunk's reads of `buf` end at the barrier below */
            put(buf ^ 1u);
            __syncthreads();
            buf ^= 1u;
        }
    }
}

/* Any qubit count (the states below 2^10 amplitudes): one amplitude per thread, its lo and hi
 * formed directly (qm_product_lo, qm_product_hi). */
__global__ void product_direct_kernel(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t g = g0 + i;
        const double *f = table + ((g >> qubits) - first_state) * 4 * (uint64_t)qubits;
        double lr, li, hr, hi, re, im;
        qm_product_lo(f, qubits, g, &lr, &li);
        qm_product_hi(f, qubits, g, &hr, &hi);
        qm_product_amp(hr, hi, lr, li, scale, &re, &im);
        if (c128)
            ((double2 *)state)[i] = make_double2(re, im);
        else
            ((float2 *)state)[i] = make_float2((float)re, (float)im);
    }
}

// ---- IQP: phase + stages 0..9 in one pass ----------------------------------------------------

#define QM_IQP_WARPS 2
#define QM_IQP_PAD_SLOTS (1024 + 32)
#define QM_IQP_TABLE_DOUBLES 304 /* W_a 32, W_b 32, C 5 x 32, E_a 32, E_b 32, e 10, W_h 1; padded */

__device__ __forceinline__ void bfly(double2 &u, double2 &w) { qm_wht_butterfly(&u.x, &u.y, &w.x, &w.y); }
__device__ __forceinline__ void bfly(float2 &u, float2 &w) { qm_wht_butterfly_f32(&u.x, &u.y, &w.x, &w.y); }

/* Stages on the register index bits [0, nb) of v (32 slots; the slots past 2^nb are not used),
 * in increasing bit order: slot j with bit b clear pairs with j | 2^b. */
template <typename V>
__device__ __forceinline__ void reg_stages(V (&v)[32], unsigned nb)
{
#pragma unroll
    for (unsigned b = 0; b < 5; ++b) {
        if (b >= nb)
            break;
#pragma unroll
        for (unsigned j = 0; j < 32; ++j)
            if (!(j & (1u << b)) && (j | (1u << b)) < (1u << nb))
                bfly(v[j], v[j | (1u << b)]);
    }
}

template <typename V> __device__ __forceinline__ V make_slot(double re, double im);
template <> __device__ __forceinline__ double2 make_slot<double2>(double re, double im)
{
    return make_double2(re, im);
}
template <> __device__ __forceinline__ float2 make_slot<float2>(double re, double im)
{
    return make_float2((float)re, (float)im);
}

/* The phase arithmetic of rounds 3 and 4 by slot type (qm_math.h): complex128 slots order 3
 * (float64 factors and products, v = scale * (Q * T), or Q * T with the scale in U when it folds),
 * complex64 slots order 3f (the float64 unit numbers rounded to float32, U after its product by
 * the scale, float32 products, v = Q * T). P: a factor; factor(): one from its float64
 * components; u_factor(): U's (fold: times the scale; complex64 always); mul(): qm_cmul or
 * qm_cmulf; slot(): v of Q and T. */
template <typename V> struct iqp_ph;
template <> struct iqp_ph<double2> {
    typedef double2 P;
    static __device__ __forceinline__ P factor(double r, double m) { return make_double2(r, m); }
    static __device__ __forceinline__ P u_factor(double r, double m, double scale, bool fold)
    {
        return fold ? make_double2(scale * r, scale * m) : make_double2(r, m);
    }
    static __device__ __forceinline__ P mul(P a, P b)
    {
        P o;
        qm_cmul(a.x, a.y, b.x, b.y, &o.x, &o.y);
        return o;
    }
    static __device__ __forceinline__ double2 slot(P q, P t, double scale, bool fold)
    {
        double2 v;
        if (fold) /* q carries the scale */
            qm_cmul(q.x, q.y, t.x, t.y, &v.x, &v.y);
        else
            qm_iqp_join(q.x, q.y, t.x, t.y, scale, &v.x, &v.y);
        return v;
    }
};
template <> struct iqp_ph<float2> {
    typedef float2 P;
    static __device__ __forceinline__ P factor(double r, double m)
    {
        return make_float2((float)r, (float)m);
    }
    static __device__ __forceinline__ P u_factor(double r, double m, double scale, bool)
    {
        return make_float2((float)(scale * r), (float)(scale * m));
    }
    static __device__ __forceinline__ P mul(P a, P b)
    {
        P o;
        qm_cmulf(a.x, a.y, b.x, b.y, &o.x, &o.y);
        return o;
    }
    static __device__ __forceinline__ float2 slot(P q, P t, double, bool) { return mul(q, t); }
};

/* Stages 0..9 of a tile of 1024 slots that one warp holds in buf at padded slots x + (x >> 5)
 * (rounds 1 and 4; after a __syncwarp): lane o loads slots j + 32 o (stages 0..4 in registers:
 * bit b of j is bit b of x), stores them back, and after a __syncwarp lane y loads slots y + 32 j
 * (stages 5..9), writing the tile to out from registers, 32 consecutive slots per store. */
template <typename V>
__device__ __forceinline__ void warp_tile_stages(V *buf, V *out, unsigned lane)
{
    V v[32];
#pragma unroll
    for (unsigned j = 0; j < 32; ++j) /* x = j + 32 lane */
        v[j] = buf[j + 33 * lane];
    reg_stages(v, 5);
#pragma unroll
    for (unsigned j = 0; j < 32; ++j)
        buf[j + 33 * lane] = v[j];
    __syncwarp();
#pragma unroll
    for (unsigned j = 0; j < 32; ++j) /* x = lane + 32 j */
        v[j] = buf[lane + 33 * j];
    reg_stages(v, 5);
#pragma unroll
    for (unsigned j = 0; j < 32; ++j)
        out[lane + 32 * j] = v[j];
}

/* phi of slot x = y + 32 s of a tile (round 1's order, qm_math.h): wa = W_a[y], ea = E_a[y],
 * cl[l] = C_l[y], wh = W_h, Wb and Eb the tables; X sums the C_l of the set bits of s. */
__device__ __forceinline__ double iqp_tile_phi(double wa, double ea, double wh, const double (&cl)[5],
                                               const double *Wb, const double *Eb, unsigned s)
{
    double xs = 0.0;
#pragma unroll
    for (unsigned l = 0; l < 5; ++l)
        if ((s >> l) & 1u)
            xs = xs + cl[l];
    return (((wa + Wb[s]) + xs) + (ea + Eb[s])) + wh;
}

template <typename V>
__global__ void __launch_bounds__(32 * QM_IQP_WARPS)
iqp_fused_kernel(V *state, uint64_t n_tiles, uint64_t g0, unsigned qubits, unsigned n_coeffs,
                 uint64_t first_state, const double *table, double scale)
{
    extern __shared__ double2 iqp_smem[]; /* 16-byte aligned */
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const size_t per_warp = QM_IQP_PAD_SLOTS * sizeof(V) + QM_IQP_TABLE_DOUBLES * sizeof(double);
    unsigned char *mine = (unsigned char *)iqp_smem + warp * per_warp;
    V *buf = (V *)mine;
    double *tb = (double *)(mine + QM_IQP_PAD_SLOTS * sizeof(V));
    double *Wa = tb, *Wb = tb + 32, *C = tb + 64, *Ea = tb + 224, *Eb = tb + 256, *e = tb + 288;
    double *Wh = tb + 298;
    const int pairs = n_coeffs > qubits;
    const uint64_t mask = qubits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << qubits) - 1;
    for (uint64_t t = (uint64_t)blockIdx.x * QM_IQP_WARPS + warp; t < n_tiles;
         t += (uint64_t)gridDim.x * QM_IQP_WARPS) {
        const uint64_t g = g0 + (t << 10), x0 = g & mask; /* x0: bits 0..9 clear */
        const double *c = table + ((g >> qubits) - first_state) * n_coeffs;
        __syncwarp(); /* the previous tile's reads of tb and buf are done */
        Wa[lane] = qm_iqp_group(c, qubits, pairs, 0, 5, lane);
        Wb[lane] = qm_iqp_group(c, qubits, pairs, 5, 10, (uint64_t)lane << 5);
        for (unsigned l = 0; l < 5; ++l)
            C[32 * l + lane] = pairs ? qm_iqp_cross(c, qubits, 0, 5, 5 + l, lane) : 0.0;
        if (lane < 10)
            e[lane] = pairs ? qm_iqp_edge(c, qubits, lane, x0) : 0.0;
        if (lane == 31)
            *Wh = qm_iqp_group(c, qubits, pairs, 10, qubits, x0);
        __syncwarp();
        {
            double sa = 0.0, sb = 0.0;
            for (unsigned k = 0; k < 5; ++k)
                if ((lane >> k) & 1u) {
                    sa = sa + e[k];
                    sb = sb + e[5 + k];
                }
            Ea[lane] = sa;
            Eb[lane] = sb;
        }
        __syncwarp();
        const double wa = Wa[lane], ea = Ea[lane], wh = *Wh;
        double cl[5];
#pragma unroll
        for (int l = 0; l < 5; ++l)
            cl[l] = C[32 * l + lane];
        for (unsigned s = 0; s < 32; ++s) { /* x = lane + 32 s */
            const double phi = iqp_tile_phi(wa, ea, wh, cl, Wb, Eb, s);
            double re, im;
            qm_iqp_amp(phi, scale, &re, &im);
            buf[lane + 33 * s] = make_slot<V>(re, im);
        }
        __syncwarp();
        warp_tile_stages(buf, state + (t << 10), lane);
    }
}

// ---- IQP round 2: the same pass, four warps per tile -------------------------------------------

#define QM_IQ2_THREADS 128
#define QM_IQ2_JOBS 235 /* table entries per tile: W_a 32, W_b 32, C 160, e 10, W_h 1 */

/* The shared slot of tile slot x: x with its low L bits XORed with the next L bits (L = 3 for
 * complex128, 8 slots per 128 bytes; 4 for complex64, 16 slots per 128 bytes). A bijection on
 * [0, 1024) that spreads every access pattern below over the banks (docs at the top). */
template <typename V> __device__ __forceinline__ unsigned iq2_swz(unsigned x)
{
    constexpr unsigned L = sizeof(V) == 16 ? 3 : 4;
    return x ^ ((x >> L) & ((1u << L) - 1));
}

/* Stages [B, B + K) of the tile in shared memory, thread t holding 8 slots: groups gi = t + 128q
 * (q < 8 >> K), group gi being the 2^K slots base + (r << B), base = gi with K zero bits inserted
 * at bit B. Loads, runs the stages in increasing bit order, and stores back (or, with `out`, writes
 * the slots to the tile in global memory instead). */
template <typename V, unsigned B, unsigned K>
__device__ __forceinline__ void iq2_round(V *buf, V *out)
{
    constexpr unsigned G = 8u >> K, R = 1u << K;
    V v[8];
#pragma unroll
    for (unsigned q = 0; q < G; ++q) {
        const unsigned gi = threadIdx.x + QM_IQ2_THREADS * q;
        const unsigned base = ((gi >> B) << (B + K)) | (gi & ((1u << B) - 1));
#pragma unroll
        for (unsigned r = 0; r < R; ++r)
            v[q * R + r] = buf[iq2_swz<V>(base + (r << B))];
    }
#pragma unroll
    for (unsigned q = 0; q < G; ++q)
#pragma unroll
        for (unsigned k = 0; k < K; ++k)
#pragma unroll
            for (unsigned r = 0; r < R; ++r)
                if (!(r & (1u << k)))
                    bfly(v[q * R + r], v[q * R + (r | (1u << k))]);
#pragma unroll
    for (unsigned q = 0; q < G; ++q) {
        const unsigned gi = threadIdx.x + QM_IQ2_THREADS * q;
        const unsigned base = ((gi >> B) << (B + K)) | (gi & ((1u << B) - 1));
#pragma unroll
        for (unsigned r = 0; r < R; ++r) {
            if (out)
                out[base + (r << B)] = v[q * R + r];
            else
                buf[iq2_swz<V>(base + (r << B))] = v[q * R + r];
        }
    }
}

/* Stages 0..9 of the tile in buf (the phases written, a barrier passed): three rounds of 3
 * stages in shared memory, then stage 9 written to the tile's slots in global memory. */
template <typename V> __device__ __forceinline__ void iq2_stages(V *buf, V *out)
{
    iq2_round<V, 0, 3>(buf, nullptr);
    __syncthreads();
    iq2_round<V, 3, 3>(buf, nullptr);
    __syncthreads();
    iq2_round<V, 6, 3>(buf, nullptr);
    __syncthreads();
    iq2_round<V, 9, 1>(buf, out);
}

/* Table job k of a tile (rounds 2 and 3; tb laid out as W_a 32, W_b 32, C 5 x 32, E_a, E_b, then
 * e 10 at 288): k < 10 e_k, then W_a[y], W_b[s], C_l[y] (qm_math.h's sums for the tile at x0). */
__device__ __forceinline__ void iqp_table_job(double *tb, const double *c, unsigned qubits,
                                              int pairs, uint64_t x0, unsigned k)
{
    if (k < 10)
        tb[288 + k] = pairs ? qm_iqp_edge(c, qubits, k, x0) : 0.0;
    else if (k < 42)
        tb[k - 10] = qm_iqp_group(c, qubits, pairs, 0, 5, k - 10);
    else if (k < 74)
        tb[32 + k - 42] = qm_iqp_group(c, qubits, pairs, 5, 10, (uint64_t)(k - 42) << 5);
    else
        tb[64 + k - 74] =
            pairs ? qm_iqp_cross(c, qubits, 0, 5, 5 + ((k - 74) >> 5), (k - 74) & 31u) : 0.0;
}

/* E of a group: the e_k (ek[0..4]) of the set bits of j, increasing, from +0 (qm_iqp_edges). */
__device__ __forceinline__ double iqp_edge_sum(const double *ek, unsigned j)
{
    double sum = 0.0;
    for (unsigned b = 0; b < 5; ++b)
        if ((j >> b) & 1u)
            sum = sum + ek[b];
    return sum;
}

/* Round 2 of the fused pass: one tile of 2^10 slots per block of 128 threads (4 warps), grid-
 * stride over the tiles. (1) tables: the 235 entries of round 1's tables (W_a, W_b, C_l, e_k, W_h,
 * the same qm_math.h calls): thread 0 W_h alone (the longest sum: the n - 10 high bits and their
 * pairs), threads 1..127 the 234 others, two at most each, the e_k (n - 10 terms) first;
 * barrier; E_a, E_b (threads 0..63); barrier.
 * (2) phase: thread t computes x = t + 128u (u < 8): y = x mod 32 = t mod 32 for every u, so W_a,
 * E_a and the five C_l of y are loaded once per tile; s = x / 32 = t / 32 + 4u is uniform over
 * the warp (the branches on its bits too); phi in round 1's order, sincos, stored at the
 * swizzled slot. (3) stages 0..8 in three rounds of 3 stages (8 slots per thread in registers,
 * a barrier between rounds), stage 9 in a fourth round that writes the tile to global memory:
 * thread t writes slots gi and gi + 512 (gi = t + 128q), consecutive lanes at consecutive
 * slots. */
template <typename V>
__global__ void __launch_bounds__(QM_IQ2_THREADS, 8)
iqp_fused2_kernel(V *state, uint64_t n_tiles, uint64_t g0, unsigned qubits, unsigned n_coeffs,
                  uint64_t first_state, const double *table, double scale)
{
    __shared__ V buf[1u << 10];
    __shared__ double tb[QM_IQP_TABLE_DOUBLES];
    double *Wa = tb, *Wb = tb + 32, *C = tb + 64, *Ea = tb + 224, *Eb = tb + 256, *e = tb + 288;
    double *Wh = tb + 298;
    const unsigned t = threadIdx.x, y = t & 31u, s0 = t >> 5;
    const int pairs = n_coeffs > qubits;
    const uint64_t mask = qubits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << qubits) - 1;
    for (uint64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const uint64_t g = g0 + (tile << 10), x0 = g & mask; /* x0: bits 0..9 clear */
        const double *c = table + ((g >> qubits) - first_state) * n_coeffs;
        if (t == 0) /* the longest sum (n - 10 terms and their pairs): a thread of its own */
            *Wh = qm_iqp_group(c, qubits, pairs, 10, qubits, x0);
        else
            for (unsigned k = t - 1; k < QM_IQ2_JOBS - 1; k += QM_IQ2_THREADS - 1)
                iqp_table_job(tb, c, qubits, pairs, x0, k);
        __syncthreads();
        if (t < 64) { /* E_a[y] (t < 32), E_b[y] (t >= 32): the e_k of the set bits of y */
            (t < 32 ? Ea : Eb)[y] = iqp_edge_sum(t < 32 ? e : e + 5, y);
        }
        __syncthreads();
        const double wa = Wa[y], ea = Ea[y], wh = *Wh;
        double cl[5];
#pragma unroll
        for (int l = 0; l < 5; ++l)
            cl[l] = C[32 * l + y];
#pragma unroll 2
        for (unsigned u = 0; u < 8; ++u) {
            /* x = y + 32 (s0 + 4u) = t + 128 u */
            const double phi = iqp_tile_phi(wa, ea, wh, cl, Wb, Eb, s0 + 4 * u);
            double re, im;
            qm_iqp_amp(phi, scale, &re, &im);
            buf[iq2_swz<V>(t + QM_IQ2_THREADS * u)] = make_slot<V>(re, im);
        }
        __syncthreads();
        iq2_stages(buf, state + (tile << 10));
        /* the next tile's first writes (tables) are to tb, last read before the phase barrier;
         * its buf writes come after its table barriers, which every thread reaches after its
         * round-4 loads */
    }
}

// ---- IQP round 3: the fused pass with the phases as products of unit numbers ------------------
//
// Round 2's fused pass (run 19: 14.5 ms for 2^30 complex128 against a 3.78 ms fill, 26%) spends
// its time in one double sincos per slot (about 58 float64 instructions, plus the argument
// reduction's latency). Round 3 evaluates qm_math.h's order 3, the CPU's: per tile of 1024 slots
// (h fixed) the 32 U and 32 T (65 sincos: T's unit(W_h) once per entry, a sincos each of 32
// threads), and per state the 160 V_l (unit(C_l), recomputed only when the tile's state differs
// from the block's previous tile's: once per block for one big state, every tile for a batch of
// 10-qubit states). The tables are 32 + 32 + 160 double2 (3.5 KiB) in shared memory. Per slot
// then: Q = U times the V_l of the set bits of s, built incrementally (below: 7 products per 8
// slots of a thread, 2 more for the base), and v = scale * (Q * T): 1 product. Float64 work per slot:
// about 3 complex products (18 operations without FMA) + the tables (65 sincos / 1024 slots,
// about 4 operations; a batch: 225 / 1024, about 13) against round 2's ~70; the fused pass should
// then be bound by its stores, not by float64 issue. Everything after the phases (the four
// stage rounds, the swizzle, the write) is round 2's code (iq2_round), unchanged.
// Thread t: y = t mod 32 (the bits of a), s = t / 32 + 4u for u < 8 (the bits of b; uniform over
// a warp). U[y], V_5..V_9[y] are read once per tile (consecutive lanes, consecutive double2:
// conflict-free), T[s] is a broadcast. Q(s0 + 4u): Q(s0) = the product of V_5, V_6 over the bits
// of s0 from U[y]; for u > 0, Q(s0 + 4u) = Q(s0 + 4(u without its top bit)) * V_(7 + top):
// exactly the left-to-right product of qm_iqp_q (Q(s without its top bit) * V_top). Table jobs
// per tile (k = t, t + 128): T (k < 32, 2 sincos), U (k < 64), V (k < 224, only on a new state).
// Registers: launch bound 128 x 8 (64 registers, as round 2, 8 blocks = 32 warps per SM);
// shared 16 KiB + 1.9 KiB + 3.5 KiB (complex128).

#define QM_IQ3_STATE_JOBS 234 /* e 10, W_a 32, W_b 32, C 160 (W_h: thread 0) */

template <typename V>
__global__ void __launch_bounds__(QM_IQ2_THREADS, 8)
iqp_fused3_kernel(V *state, uint64_t n_tiles, uint64_t g0, unsigned qubits, unsigned n_coeffs,
                  uint64_t first_state, const double *table, double scale)
{
    typedef iqp_ph<V> ph;
    typedef typename ph::P P;
    __shared__ V buf[1u << 10];
    __shared__ double tb[QM_IQP_TABLE_DOUBLES];
    __shared__ P Ut[32], Tt[32], Vt[160];
    double *Wa = tb, *Wb = tb + 32, *C = tb + 64, *e = tb + 288, *Wh = tb + 298;
    const unsigned t = threadIdx.x, y = t & 31u, s0 = t >> 5;
    const int pairs = n_coeffs > qubits;
    const uint64_t mask = qubits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << qubits) - 1;
    uint64_t have = UINT64_MAX; /* the state whose W_a, W_b, C and V the tables hold */
    for (uint64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const uint64_t g = g0 + (tile << 10), x0 = g & mask, st = g >> qubits;
        const double *c = table + (st - first_state) * n_coeffs;
        const bool fresh = st != have; /* uniform: every thread walks the same tiles */
        have = st;
        /* (1) the sums: W_h (thread 0), e_k, and on a new state W_a, W_b, C_l */
        if (t == 0)
            *Wh = qm_iqp_group(c, qubits, pairs, 10, qubits, x0);
        else
            for (unsigned k = t - 1; k < (fresh ? QM_IQ3_STATE_JOBS : 10u); k += QM_IQ2_THREADS - 1)
                iqp_table_job(tb, c, qubits, pairs, x0, k);
        __syncthreads();
        /* (2) the unit numbers: T[j] = unit(W_b + E_b) * unit(W_h), U[j] = unit(W_a + E_a), and on
         * a new state V[32 l + y] = unit(C_l[y]); E summed over the set bits from +0, as
         * qm_iqp_edges */
        for (unsigned k = t; k < (fresh ? 224u : 64u); k += QM_IQ2_THREADS) {
            if (k < 64) {
                const unsigned j = k & 31u;
                const double sum = iqp_edge_sum(k < 32 ? e + 5 : e, j);
                double r, m;
                if (k < 32) {
                    double br, bi, hr, hi;
                    qm_iqp_unit(Wb[j] + sum, &br, &bi);
                    qm_iqp_unit(*Wh, &hr, &hi);
                    qm_cmul(br, bi, hr, hi, &r, &m);
                    Tt[j] = ph::factor(r, m);
                } else {
                    qm_iqp_unit(Wa[j] + sum, &r, &m);
                    Ut[j] = ph::u_factor(r, m, scale, false);
                }
            } else {
                double r, m;
                qm_iqp_unit(C[k - 64], &r, &m);
                Vt[k - 64] = ph::factor(r, m);
            }
        }
        __syncthreads();
        /* (3) the phases of slots y + 32 (s0 + 4u) */
        {
            const P v7 = Vt[64 + y], v8 = Vt[96 + y], v9 = Vt[128 + y];
            P p[4]; /* Q of slots y + 32 (s0 + 4q), q < 4 */
            p[0] = Ut[y];
            if (s0 & 1u)
                p[0] = ph::mul(p[0], Vt[y]);
            if (s0 & 2u)
                p[0] = ph::mul(p[0], Vt[32 + y]);
#pragma unroll
            for (unsigned q = 0; q < 8; ++q) {
                P pq;
                if (q == 0)
                    pq = p[0];
                else {
                    const unsigned top = q >= 4 ? 2u : q >= 2 ? 1u : 0u;
                    pq = ph::mul(p[q ^ (1u << top)], top == 2 ? v9 : top == 1 ? v8 : v7);
                    if (q < 4)
                        p[q] = pq;
                }
                buf[iq2_swz<V>(t + QM_IQ2_THREADS * q)] = ph::slot(pq, Tt[s0 + 4 * q], scale, false);
            }
        }
        __syncthreads();
        iq2_stages(buf, state + (tile << 10));
        /* the next tile writes tb in (1), last read in (2) here; Ut, Tt, Vt in (2), last read in
         * (3) here, before three barriers; buf in (3), after its two table barriers, which every
         * thread reaches after its round-4 loads */
    }
}

// ---- IQP round 4: one warp per tile, round 3's phases, two transposes ---------------------------
//
// Round 3 (run 2 of session 10: a batch of 65536 x 10 qubits in 0.535 ms complex128, 0.445 ms
// complex64, against fills of 0.239 and 0.124 ms) moves every tile through shared memory five
// times (the phase write, then four stage rounds of a load and a store): 144 KiB per complex128
// tile, about 1150 clocks at 128 bytes per clock, which alone is 0.29 ms for the 496 tiles each of
// the 132 SMs takes, above the fill. Round 4 keeps round 3's arithmetic (qm_math.h's order 3, the
// same calls in the same order, so the same bits) and round 1's data movement: one warp per tile,
// the phases written once to shared memory, read back with the 32 slots of one lane differing in
// bits 0..4 (stages 0..4 in registers), stored and read again with them differing in bits 5..9
// (stages 5..9), and written to global memory from registers: 64 KiB of shared traffic per
// complex128 tile (512 clocks), under the store's ~900 clocks per tile.
// Lane y does its own table entries: W_a[y] and W_b[y], the five C_l[y] and their unit numbers
// V_l[y] (on a new state only; kept in the warp's shared memory, read by lane y alone, so that
// the registers are free for the 32 slots of the stages), U[y] = unit(W_a[y] + E_a(y)) (a
// register), T[y] = unit(W_b[y] + E_b(y)) * unit(W_h) (the per-tile table every lane reads); lanes
// 0..9 the e_k, lane 31 W_h. A state of at most 64 coefficients (every 10-qubit iqp and iqp-z state) is loaded into
// shared memory one tile ahead (two coefficients per lane in registers while the current tile is
// built), so a batch's table sums read shared memory, not L2.
// Phases of lane y: slots y + 32 s, s = 0..31, Q(s) = Q(s without its top bit) * V_top from Q(0)
// = U[y] (qm_iqp_q's left-to-right product), visited in bit-reversed order of s so that every
// Q is formed after its parent and only the current path of parents is live (a few registers, not
// 32 double2); the slot is Q(s) * T[s] (qm_math.h's order 3: two complex products per slot). Shared slot of tile slot x: x + (x >> 5) (one pad slot per 32: the phase stores
// and the last reads are consecutive slots; the stage-0..4 accesses of lane o at j + 33 o are
// 528 (complex64: 264) bytes apart, 16 (8) mod 128, so a wavefront's lanes hit distinct banks).
// Shared memory per warp 16.5 KiB + 4.2 KiB complex128 (8.25 + 4.2 complex64; 10-qubit states
// 1.2 KiB less); two warps per block, no barrier but __syncwarp. Registers: 32 slots per lane
// during the stages (168 complex128, 128 / 121 complex64, spills of at most 64 bytes): 10 warps
// per SM complex128 (12 for 10-qubit states), 16 complex64.

#define QM_IQ4_WARPS 2

/* s with its 5 bits reversed, and the index of its top set bit (0 for s = 0): compile-time. */
__host__ __device__ constexpr unsigned iq4_rev5(unsigned i)
{
    return ((i & 1u) << 4) | ((i & 2u) << 2) | (i & 4u) | ((i & 8u) >> 2) | ((i & 16u) >> 4);
}
__host__ __device__ constexpr unsigned iq4_top(unsigned s)
{
    return s >= 16 ? 4 : s >= 8 ? 3 : s >= 4 ? 2 : s >= 2 ? 1 : 0;
}
/* The phase loop's order, checked when this file compiles: i -> iq4_rev5(i) visits every s < 32
 * once, s = 0 first, and every s > 0 after its parent (s without its top bit). */
constexpr bool iq4_order_ok()
{
    bool seen[32] = {};
    for (unsigned i = 0; i < 32; ++i) {
        const unsigned s = iq4_rev5(i);
        if (s >= 32 || seen[s] || (i == 0) != (s == 0))
            return false;
        if (s && ((s >> iq4_top(s)) != 1u || !seen[s ^ (1u << iq4_top(s))]))
            return false;
        seen[s] = true;
    }
    return true;
}
static_assert(iq4_order_ok(), "round 4's phase order must form every P after its parent");

/* qm_iqp_group(c, n, pairs, g0, g0 + 5, bits << g0) and qm_iqp_cross(c, n, 0, 5, l, bits) with the
 * loops unrolled: every term is added, a +0 where the bits leave it out, which gives the same bits
 * (no partial sum is -0: qm_math.h), and the loads no longer wait for each other's branches. */
__device__ __forceinline__ double iq4_group5(const double *c, unsigned n, int pairs, unsigned g0,
                                             unsigned bits)
{
    double s = 0.0;
#pragma unroll
    for (unsigned k = 0; k < 5; ++k)
        s = s + (((bits >> k) & 1u) ? c[g0 + k] : 0.0);
    if (pairs)
#pragma unroll
        for (unsigned k = 0; k < 5; ++k)
#pragma unroll
            for (unsigned l = k + 1; l < 5; ++l)
                s = s + (((bits >> k) & (bits >> l) & 1u) ? c[qm_iqp_pair(n, g0 + k, g0 + l)] : 0.0);
    return s;
}
__device__ __forceinline__ double iq4_cross5(const double *c, unsigned n, unsigned l, unsigned bits)
{
    double s = 0.0;
#pragma unroll
    for (unsigned k = 0; k < 5; ++k)
        s = s + (((bits >> k) & 1u) ? c[qm_iqp_pair(n, k, l)] : 0.0);
    return s;
}

/* s + t_0 + t_1 + ... + t_(cnt-1), left to right, t_i = c[index(i)]: four loads issued before
 * their additions (the high-bit sums of round 4's step (1)). */
template <typename F>
__device__ __forceinline__ double iq4_chain(double s, const double *c, unsigned cnt, F index)
{
    unsigned i = 0;
    for (; i + 4 <= cnt; i += 4) {
        const double a = c[index(i)], b = c[index(i + 1)], d = c[index(i + 2)],
                     f = c[index(i + 3)];
        s = s + a;
        s = s + b;
        s = s + d;
        s = s + f;
    }
    for (; i < cnt; ++i)
        s = s + c[index(i)];
    return s;
}

/* Whether scale is a power of two whose product with U can stand for the slot's last product by
 * it: no component comes near the subnormals (they are products of at most 8 cosines and sines,
 * and the scale's exponent is kept within +-900). */
__host__ __device__ __forceinline__ bool iq4_folds(double scale)
{
    int e = 0;
    return frexp(scale, &e) == 0.5 && e > -900 && e < 900;
}

/* B10: states of exactly 10 qubits (a batch: every tile a new state, at most 64 coefficients):
 * W_a, W_b and the V_l are not kept from tile to tile but computed where they are used, from the
 * staged coefficients, and the 3 KiB per warp that keeps them is not allocated: 6 blocks (12
 * warps) per SM instead of 5 for complex128. Its qubit count (constant pair indices) and a scale
 * that folds into U (launched only then) are known when it compiles, and from them the compiler
 * knows that its coefficients are read from shared memory and that its e_k and W_h are sums over
 * no bits >= 10, +0 (the loops gone): session 22 measured
 * this at 0.245 against 0.289 ms for a complex64 batch of 65536 on an H100 (the generic loads of
 * a pointer that may be global or shared, and the loops over no high bits, were the difference). */
template <typename V, int MINB, bool B10>
__global__ void __launch_bounds__(32 * QM_IQ4_WARPS, MINB)
iqp_fused4_kernel(V *state, uint64_t n_tiles, uint64_t g0, unsigned qubits_arg, unsigned n_coeffs,
                  uint64_t first_state, const double *table, double scale)
{
    /* B10: 10 when this compiles, so the pair indices of the table sums are constants */
    const unsigned qubits = B10 ? 10u : qubits_arg;
    typedef iqp_ph<V> ph;
    typedef typename ph::P P;
    __shared__ V bufs[QM_IQ4_WARPS][QM_IQP_PAD_SLOTS];
    __shared__ P tts[QM_IQ4_WARPS][32];
    __shared__ double cfs[QM_IQ4_WARPS][64];
    __shared__ double eks[QM_IQ4_WARPS][14]; /* e_0..e_9, W_h at 10, unit(W_h) at 11, 12 */
    __shared__ unsigned char kbs[QM_IQ4_WARPS][64]; /* the set bits >= 10 of the tile's x0 */
    /* lane y's own entries, kept while the warp stays in one state (shared memory, not
     * registers: the 32 slots of the stages need them) */
    __shared__ P vls[QM_IQ4_WARPS][B10 ? 1 : 5][32]; /* V_l[y] = unit(C_l[y]) */
    __shared__ double wabs[QM_IQ4_WARPS][2][B10 ? 1 : 32]; /* W_a[y], W_b[y] */
    /* scale a power of two (every IQP state's 2^-n): U * scale is exact, and so are the products
     * by it, so multiplying U once gives join's bits (iq4_folds; B10 is launched only then) */
    const bool fold = B10 || iq4_folds(scale);
    const unsigned warp = threadIdx.x >> 5, y = threadIdx.x & 31u;
    V *buf = bufs[warp];
    P *Tt = tts[warp];
    double *cf = cfs[warp], *e = eks[warp];
    const int pairs = n_coeffs > qubits;
    /* the state's coefficients through shared memory (B10: always, at most 55 of them; known
     * when this compiles, so their reads are shared loads, not generic ones) */
    const bool staged = B10 || n_coeffs <= 64;
    const uint64_t mask = qubits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << qubits) - 1;
    const uint64_t stride = (uint64_t)gridDim.x * QM_IQ4_WARPS;
    uint64_t tile = (uint64_t)blockIdx.x * QM_IQ4_WARPS + warp;
    uint64_t have = UINT64_MAX; /* the state whose W_a, W_b and V_l wabs and vls hold */
    double c0 = 0.0, c1 = 0.0;
    P(*vl)[32] = vls[warp];
    double *wa = wabs[warp][0], *wb = wabs[warp][1];
    auto fetch = [&](uint64_t tl) { /* the coefficients of tile tl's state, two per lane */
        if (staged && tl < n_tiles) {
            const double *c = table + (((g0 + (tl << 10)) >> qubits) - first_state) * n_coeffs;
            c0 = y < n_coeffs ? __ldg(c + y) : 0.0;
            c1 = y + 32 < n_coeffs ? __ldg(c + y + 32) : 0.0;
        }
    };
    fetch(tile);
    for (; tile < n_tiles; tile += stride) {
        const uint64_t g = g0 + (tile << 10), x0 = g & mask, st = g >> qubits;
        const bool fresh = B10 || st != have; /* uniform over the warp; B10: every tile a state */
        have = st;
        const double *c = table + (st - first_state) * n_coeffs;
        if (staged) {
            if (fresh) { /* cf was last read in the previous tile's (1), before its __syncwarp */
                cf[y] = c0;
                cf[y + 32] = c1;
                __syncwarp();
            }
            c = cf;
        }
        fetch(tile + stride); /* in flight while this tile is built */
        /* (1) the sums: e_k (lanes 0..9), W_h (lane 31), over the list kb of the set bits l >= 10
         * of x0 (lane y places bits 10 + y and 42 + y), the same terms in the same order as
         * qm_iqp_edge and qm_iqp_group, which skip the clear bits (round 3 spent most of a big
         * state's fused pass in those loops: lane 31's W_h is up to 190 pairs at 30 qubits, each
         * a branch and a dependent load); on a new state W_a[y], W_b[y], V_l[y] */
        unsigned char *kb = kbs[warp];
        const uint64_t hb = x0 >> 10;
        const unsigned h = (unsigned)__popcll(hb);
        if (!B10) {
#pragma unroll
            for (unsigned q = 0; q < 2; ++q) {
                const unsigned p = y + 32 * q;
                if (p < 54 && ((hb >> p) & 1u))
                    kb[__popcll(hb & (((uint64_t)1 << p) - 1))] = (unsigned char)(10 + p);
            }
            __syncwarp();
        }
        if (y < 10)
            e[y] = pairs ? iq4_chain(0.0, c, h,
                                     [&](unsigned i) { return qm_iqp_pair(qubits, y, kb[i]); })
                         : 0.0;
        else if (y == 31) { /* W_h and its unit number, once for the 32 T entries */
            double wh = iq4_chain(0.0, c, h, [&](unsigned i) { return (unsigned)kb[i]; });
            if (pairs)
                for (unsigned i = 0; i + 1 < h; ++i)
                    wh = iq4_chain(wh, c, h - 1 - i, [&](unsigned j) {
                        return qm_iqp_pair(qubits, kb[i], kb[i + 1 + j]);
                    });
            qm_iqp_unit(wh, &e[11], &e[12]);
        }
        if (fresh && !B10) {
            wa[y] = iq4_group5(c, qubits, pairs, 0, y);
            wb[y] = iq4_group5(c, qubits, pairs, 5, y);
#pragma unroll
            for (unsigned l = 0; l < 5; ++l) {
                double r, m;
                qm_iqp_unit(pairs ? iq4_cross5(c, qubits, 5 + l, y) : 0.0, &r, &m);
                vl[l][y] = ph::factor(r, m);
            }
        }
        __syncwarp();
        /* (2) T[y] = unit(W_b + E_b) * unit(W_h) (shared), U[y] = unit(W_a + E_a) (a register) */
        P u;
        {
            const double wav = B10 ? iq4_group5(c, qubits, pairs, 0, y) : wa[y];
            const double wbv = B10 ? iq4_group5(c, qubits, pairs, 5, y) : wb[y];
            double br, bi, r, m;
            qm_iqp_unit(wbv + iqp_edge_sum(e + 5, y), &br, &bi);
            qm_cmul(br, bi, e[11], e[12], &r, &m);
            Tt[y] = ph::factor(r, m);
            qm_iqp_unit(wav + iqp_edge_sum(e, y), &r, &m);
            u = ph::u_factor(r, m, scale, fold);
        }
        __syncwarp();
        /* (3) the phases of slots y + 32 s: scale * (Q(s) * T[s]) */
        {
            P vr[5]; /* B10: the V_l[y] here */
            if (B10)
#pragma unroll
                for (unsigned l = 0; l < 5; ++l) {
                    double r, m;
                    qm_iqp_unit(pairs ? iq4_cross5(c, qubits, 5 + l, y) : 0.0, &r, &m);
                    vr[l] = ph::factor(r, m);
                }
            P q[32]; /* Q(s), from q[0] = U (times the scale when folded; complex64 always) */
            q[0] = u;
#pragma unroll
            for (unsigned i = 0; i < 32; ++i) {
                const unsigned s = iq4_rev5(i);
                if (s) {
                    const unsigned top = iq4_top(s);
                    q[s] = ph::mul(q[s ^ (1u << top)], B10 ? vr[top] : vl[top][y]);
                }
                buf[y + 33 * s] = ph::slot(q[s], Tt[s], scale, fold);
            }
        }
        __syncwarp();
        /* (4) the stages, the tile written */
        warp_tile_stages(buf, state + (tile << 10), y);
        __syncwarp(); /* buf, Tt and e are written again by the next tile */
    }
}

// ---- Walsh-Hadamard: up to 10 stages per pass ------------------------------------------------

template <typename V, int CW, int MINB>
__global__ void __launch_bounds__(CW * 32, MINB)
wht_pass_kernel(V *x, uint64_t n_units, unsigned b, unsigned w)
{
    extern __shared__ double2 wht_smem[];
    V *buf = (V *)wht_smem;
    const unsigned k1 = w < 5 ? w : 5, k2 = w - k1;
    const unsigned lcol = b - (CW == 4 ? 2 : 3); /* log2 of the column tiles per block */
    const uint64_t ctmask = ((uint64_t)1 << lcol) - 1;
    for (uint64_t u = blockIdx.x; u < n_units; u += gridDim.x) {
        V *base = x + ((u >> lcol) << (b + w)) + (u & ctmask) * CW;
        const unsigned c = threadIdx.x % CW, o = threadIdx.x / CW;
        V v[32];
#pragma unroll
        for (unsigned j = 0; j < 32; ++j)
            if (j < (1u << k1))
                v[j] = base[((uint64_t)(j | (o << k1)) << b) + c];
        reg_stages(v, k1);
        if (k2 == 0) {
#pragma unroll
            for (unsigned j = 0; j < 32; ++j)
                if (j < (1u << k1))
                    base[((uint64_t)(j | (o << k1)) << b) + c] = v[j];
            continue; /* k2 is the same for every thread: no barrier is skipped unevenly */
        }
#pragma unroll
        for (unsigned j = 0; j < 32; ++j) {
            const unsigned r = j | (o << k1);
            buf[(r + (r >> 5)) * CW + c] = v[j];
        }
        __syncthreads();
        for (unsigned gi = threadIdx.x; gi < ((unsigned)CW << k1); gi += blockDim.x) {
            const unsigned c2 = gi % CW, o2 = gi / CW;
#pragma unroll
            for (unsigned j = 0; j < 32; ++j)
                if (j < (1u << k2)) {
                    const unsigned r = o2 | (j << k1);
                    v[j] = buf[(r + (r >> 5)) * CW + c2];
                }
            reg_stages(v, k2);
#pragma unroll
            for (unsigned j = 0; j < 32; ++j)
                if (j < (1u << k2))
                    base[((uint64_t)(o2 | (j << k1)) << b) + c2] = v[j];
        }
        __syncthreads(); /* buf is reused by the next unit */
    }
}

/* Stages [b, b + w) over n slots (whole blocks of 2^(b+w)), w <= 10, b large enough for CW
 * columns. */
template <typename V, int CW, int MINB>
int wht_pass_launch(V *x, uint64_t n, unsigned b, unsigned w, cudaStream_t s)
{
    const unsigned k1 = w < 5 ? w : 5, k2 = w - k1;
    const uint64_t units = (n >> (b + w)) << (b - (CW == 4 ? 2 : 3));
    const size_t smem = k2 ? (size_t)((1u << w) + ((1u << w) >> 5)) * CW * sizeof(V) : 0;
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(wht_pass_kernel<V, CW, MINB>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem);
        if (e != cudaSuccess)
            return (int)e;
    }
    const unsigned grid = grid_of(wht_pass_kernel<V, CW, MINB>, CW << k2, smem, units);
    wht_pass_kernel<V, CW, MINB><<<grid, CW << k2, smem, s>>>(x, units, b, w);
    return (int)cudaGetLastError();
}

// ---- Walsh-Hadamard round 3: passes of up to 8 stages on rows of 256 or 512 bytes ------------
//
// Round 2's pass (wht_pass_kernel) reads a unit of 4 (complex128) / 8 (complex64) columns, i.e.
// rows of 64 contiguous bytes, 2^10 rows 2^b slots apart; run 19 measured it at 42-45% of a device
// copy for bits 10..19 and 20..29. A 64-byte row is two 32-byte sectors: every row is a separate
// L2 request and (bits >= 20: rows 16 MiB apart) a separate DRAM page, so the request rate, not
// the bytes, limits the pass. Round 3 widens the row to CW = 2^LC columns, 256 bytes (LC = 4
// complex128, 5 complex64) or 512 bytes (LC = 5 / 6), 8 (16) full 128-byte lines per row. Shared
// memory then caps the rows per unit: CW * 2^w slots, 32 KiB for 256-byte rows at w = 7, 64 KiB
// at w = 8 or for 512-byte rows at w = 7. So the 20 stages above bit 10 of a 2^30 state take 3
// passes (7, 7, 6 stages) instead of 2: one more read and write of the state (bound fill + 3
// copies instead of fill + 2, within issue 16's ceil(n / 10) + 1 passes). Whether 3 passes at
// long rows beat 2 at 64-byte rows is a measurement (round 2 at 43% of 2 copies = 4.7 copies of
// time; round 3 wins if its 3 passes reach 64% of a copy each): bench_cuda's BM_WhtSplit times
// both splits and both row widths side by side.
//
// Mapping (w = k1 + k2, k1 = ceil(w / 2) <= 4, k2 <= 4; threads CW * 2^k2, <= 512):
// round 1: thread (c, o) = (t % CW, t / CW) loads rows j | (o << k1), j < 2^k1, column c: one
// warp instruction reads 32 / CW rows (complex128 LC = 4: 2 rows of 256 bytes; complex64 LC = 5:
// 1 row of 256 bytes), runs stages b .. b + k1 - 1 in registers (row bit j), stores to shared
// memory at r * CW + c. Round 2: group gi = (c2, o2) = (gi % CW, gi / CW), CW * 2^k1 groups
// dealt over the threads (2^(k1 - k2) each: 1 or 2), loads rows o2 | (j << k1), j < 2^k2, runs
// stages b + k1 .. b + w - 1, writes the rows back to global memory at the same places.
// Banks: a row of CW slots is 256 or 512 contiguous bytes in shared memory, and in both rounds
// consecutive lanes take consecutive columns of one row (a warp covers 32 / CW rows), so every
// wavefront (8 lanes x 16 bytes or 16 lanes x 8 bytes = 128 contiguous bytes) is one full set of
// 32 banks: conflict-free, no padding needed (round 2's padding served 64-byte rows).
// Registers (nvcc -Xptxas -v, sm_90, --fmad=false): 124 complex128, 64 complex64 (16 slots per
// thread: 64 / 32 registers of data, the rest 64-bit row addresses, kept for the write-back), no
// spill; the launch bound of 512 threads caps them at 128. Occupancy, complex128 at 256-byte rows
// and w = 7 (128 threads, 32 KiB): 4 blocks = 16 warps per SM by registers (6 by shared memory);
// complex64 (256 threads, 32 KiB): 4 blocks = 32 warps. In flight during a load phase 4 x 128 x
// 16 x 16 bytes = 128 KiB per SM, well over the ~40 KiB per SM that Little's law asks for (4.8
// TB/s x ~1 us / 132 SMs). Blocks alternate load and store phases; with 4 per SM the phases of
// different blocks overlap.
// The stages run in increasing bit order on every element, one qm_wht_butterfly each, as in every
// other pass: the state is bit-identical to rounds 0-2 and the CPU.

/* Stages on the register index bits [0, nb) of v (N slots, nb <= log2 N), increasing bit order. */
template <typename V, unsigned N>
__device__ __forceinline__ void reg_stages_n(V (&v)[N], unsigned nb)
{
#pragma unroll
    for (unsigned b = 0; (1u << b) < N; ++b) {
        if (b >= nb)
            break;
#pragma unroll
        for (unsigned j = 0; j < N; ++j)
            if (!(j & (1u << b)) && (j | (1u << b)) < (1u << nb))
                bfly(v[j], v[j | (1u << b)]);
    }
}

template <typename V, unsigned LC>
__global__ void __launch_bounds__(512)
wht_pass3_kernel(V *x, uint64_t n_units, unsigned b, unsigned w)
{
    extern __shared__ double2 wht3_smem[];
    V *buf = (V *)wht3_smem;
    constexpr unsigned CW = 1u << LC;
    const unsigned k1 = (w + 1) / 2, k2 = w - k1;
    const uint64_t ctmask = ((uint64_t)1 << (b - LC)) - 1;
    const unsigned c = threadIdx.x % CW, o = threadIdx.x / CW;
    for (uint64_t u = blockIdx.x; u < n_units; u += gridDim.x) {
        V *base = x + ((u >> (b - LC)) << (b + w)) + (u & ctmask) * CW;
        V v[16];
#pragma unroll
        for (unsigned j = 0; j < 16; ++j)
            if (j < (1u << k1))
                v[j] = base[((uint64_t)(j | (o << k1)) << b) + c];
        reg_stages_n(v, k1);
        if (k2 == 0) { /* the same for every thread: no barrier is skipped unevenly */
#pragma unroll
            for (unsigned j = 0; j < 16; ++j)
                if (j < (1u << k1))
                    base[((uint64_t)(j | (o << k1)) << b) + c] = v[j];
            continue;
        }
#pragma unroll
        for (unsigned j = 0; j < 16; ++j)
            if (j < (1u << k1))
                buf[(j | (o << k1)) * CW + c] = v[j];
        __syncthreads();
        for (unsigned gi = threadIdx.x; gi < (CW << k1); gi += blockDim.x) {
            const unsigned c2 = gi % CW, o2 = gi / CW;
#pragma unroll
            for (unsigned j = 0; j < 16; ++j)
                if (j < (1u << k2))
                    v[j] = buf[(o2 | (j << k1)) * CW + c2];
            reg_stages_n(v, k2);
#pragma unroll
            for (unsigned j = 0; j < 16; ++j)
                if (j < (1u << k2))
                    base[((uint64_t)(o2 | (j << k1)) << b) + c2] = v[j];
        }
        __syncthreads(); /* buf is reused by the next unit */
    }
}

/* Stages [b, b + w) over n slots (whole blocks of 2^(b+w)), w <= QM_WHT3_MAX_W, 2^b >= 2^LC. */
template <typename V, unsigned LC>
int wht_pass3_launch(V *x, uint64_t n, unsigned b, unsigned w, cudaStream_t s)
{
    const unsigned k1 = (w + 1) / 2, k2 = w - k1;
    const uint64_t units = (n >> (b + w)) << (b - LC);
    const size_t smem = k2 ? ((size_t)1 << (w + LC)) * sizeof(V) : 0;
    if (smem > 48 * 1024) {
        const cudaError_t e = cudaFuncSetAttribute(wht_pass3_kernel<V, LC>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem);
        if (e != cudaSuccess)
            return (int)e;
    }
    const unsigned threads = (1u << LC) << k2;
    const unsigned grid = grid_of(wht_pass3_kernel<V, LC>, (int)threads, smem, units);
    wht_pass3_kernel<V, LC><<<grid, threads, smem, s>>>(x, units, b, w);
    return (int)cudaGetLastError();
}

/* The fused IQP kernel over n slots (whole tiles): round 1 with its shared memory allowed first,
 * round 2 or round 3 (static shared memory). */
template <typename V>
int iqp_fused_launch(V *state, uint64_t n, uint64_t g0, unsigned qubits, unsigned n_coeffs,
                     uint64_t first_state, const double *table, double scale, int round,
                     cudaStream_t s)
{
    const uint64_t tiles = n >> 10;
    if (round == 4) {
        /* 42 / 25 KiB of shared memory and 168 / 128 registers per block of 2 warps (10-qubit
         * states: 36 / 19 KiB) */
        constexpr int minb = sizeof(V) == 16 ? 5 : 8, minb10 = sizeof(V) == 16 ? 6 : 8;
        auto k = qubits == 10 && n_coeffs <= 64 && iq4_folds(scale)
                     ? iqp_fused4_kernel<V, minb10, true>
                     : iqp_fused4_kernel<V, minb, false>;
        const unsigned grid =
            grid_of(k, 32 * QM_IQ4_WARPS, 0, (tiles + QM_IQ4_WARPS - 1) / QM_IQ4_WARPS);
        k<<<grid, 32 * QM_IQ4_WARPS, 0, s>>>(state, tiles, g0, qubits, n_coeffs, first_state,
                                            table, scale);
        return (int)cudaGetLastError();
    }
    if (round == 3) {
        const unsigned grid = grid_of(iqp_fused3_kernel<V>, QM_IQ2_THREADS, 0, tiles);
        iqp_fused3_kernel<V><<<grid, QM_IQ2_THREADS, 0, s>>>(state, tiles, g0, qubits, n_coeffs,
                                                              first_state, table, scale);
        return (int)cudaGetLastError();
    }
    if (round != 1) {
        const unsigned grid = grid_of(iqp_fused2_kernel<V>, QM_IQ2_THREADS, 0, tiles);
        iqp_fused2_kernel<V><<<grid, QM_IQ2_THREADS, 0, s>>>(state, tiles, g0, qubits, n_coeffs,
                                                              first_state, table, scale);
        return (int)cudaGetLastError();
    }
    const uint64_t units = (tiles + QM_IQP_WARPS - 1) / QM_IQP_WARPS;
    const size_t smem =
        QM_IQP_WARPS * (QM_IQP_PAD_SLOTS * sizeof(V) + QM_IQP_TABLE_DOUBLES * sizeof(double));
    const cudaError_t e = cudaFuncSetAttribute(
        iqp_fused_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return (int)e;
    const unsigned grid = grid_of(iqp_fused_kernel<V>, 32 * QM_IQP_WARPS, smem, units);
    iqp_fused_kernel<V><<<grid, 32 * QM_IQP_WARPS, smem, s>>>(state, tiles, g0, qubits, n_coeffs,
                                                            first_state, table, scale);
    return (int)cudaGetLastError();
}

/* Whether a complex64 range's pairs of slots (even global index first) are 16-byte aligned: they
 * are when global index 0 would be. */
bool pair_stores(const void *state, int c128, uint64_t g0)
{
    return !c128 && ((uintptr_t)state & 7) == 0 && ((((uintptr_t)state >> 3) ^ g0) & 1) == 0;
}

/* A grid-stride product kernel over `tiles` tiles, as many blocks as are resident. */
template <typename K>
int product_launch(K kernel, uint64_t tiles, cudaStream_t s, void *state, uint64_t n, uint64_t g0,
                   unsigned qubits, uint64_t first_state, const double *table, double scale)
{
    kernel<<<grid_of(kernel, QM_PD_THREADS, 0, tiles), QM_PD_THREADS, 0, s>>>(
        state, n, g0, qubits, first_state, table, scale);
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int qm_cuda_product_digits(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale, int round1, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return (int)cudaSuccess;
    if (qubits < QM_PRODUCT_LO_BITS) {
        const unsigned grid = grid_of(product_direct_kernel, 256, 0, (n + 255) / 256);
        product_direct_kernel<<<grid, 256, 0, s>>>(state, c128, n, g0, qubits, first_state, table,
                                                  scale);
        return (int)cudaGetLastError();
    }
    const uint64_t tiles = ((g0 + n - 1) >> QM_PRODUCT_LO_BITS) - (g0 >> QM_PRODUCT_LO_BITS) + 1;
    /* pairs of complex64 slots are 16-byte aligned when global index 0 would be */
    const bool pairs = pair_stores(state, c128, g0);
    const int mode = c128 ? 0 : pairs ? 2 : 1;
    if (round1)
        return product_launch(mode == 0   ? product_digits_kernel<0>
                              : mode == 2 ? product_digits_kernel<2>
                                          : product_digits_kernel<1>,
                              tiles, s, state, n, g0, qubits, first_state, table, scale);
    if (qubits == QM_PRODUCT_LO_BITS) {
        auto k = mode == 0   ? product_batch10_kernel<0>
                 : mode == 2 ? product_batch10_kernel<2>
                             : product_batch10_kernel<1>;
        const uint64_t groups = (tiles - 1) / QM_PD_GROUP + 1;
        k<<<grid_of(k, QM_PD_THREADS, 0, groups), QM_PD_THREADS, 0, s>>>(state, n, g0, first_state,
                                                                         table, scale);
        return (int)cudaGetLastError();
    }
    return product_launch(mode == 0   ? product_states_kernel<0, false, false>
                          : mode == 2 ? product_states_kernel<2, false, false>
                                      : product_states_kernel<1, false, false>,
                          tiles, s, state, n, g0, qubits, first_state, table, scale);
}

/* Round 3's product op: the kernel for (MODE, UNIT) chosen at run time. */
extern "C" int qm_cuda_product_round3(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0)
        return (int)cudaSuccess;
    if (qubits < QM_PRODUCT_LO_BITS) /* one amplitude per thread, as round 2 */
        return qm_cuda_product_digits(state, c128, n, g0, qubits, first_state, table, scale, 0,
                                      stream);
    const uint64_t tiles = ((g0 + n - 1) >> QM_PRODUCT_LO_BITS) - (g0 >> QM_PRODUCT_LO_BITS) + 1;
    const bool pairs = pair_stores(state, c128, g0);
    const int mode = c128 ? 0 : pairs ? 2 : 1;
    const bool unit = scale == 1.0;
    if (qubits == QM_PRODUCT_LO_BITS) {
        void (*k)(void *, uint64_t, uint64_t, uint64_t, const double *, double) =
            mode == 0   ? (unit ? product_batch10_r3_kernel<0, true>
                                : product_batch10_r3_kernel<0, false>)
            : mode == 2 ? (unit ? product_batch10_r3_kernel<2, true>
                                : product_batch10_r3_kernel<2, false>)
                        : (unit ? product_batch10_r3_kernel<1, true>
                                : product_batch10_r3_kernel<1, false>);
        /* as many blocks as are resident, at least a group each */
        const unsigned grid = grid_of(k, QM_PD_THREADS, 0, (tiles - 1) / QM_PD_GROUP + 1);
        k<<<grid, QM_PD_THREADS, 0, s>>>(state, n, g0, first_state, table, scale);
        return (int)cudaGetLastError();
    }
    void (*k)(void *, uint64_t, uint64_t, unsigned, uint64_t, const double *, double) =
        mode == 0   ? (unit ? product_states_kernel<0, true, true>
                            : product_states_kernel<0, true, false>)
        : mode == 2 ? (unit ? product_states_kernel<2, true, true>
                            : product_states_kernel<2, true, false>)
                    : (unit ? product_states_kernel<1, true, true>
                            : product_states_kernel<1, true, false>);
    return product_launch(k, tiles, s, state, n, g0, qubits, first_state, table, scale);
}

namespace {

/* Rounds 4 and 5 of the product op (round: 4 or 5); below 10 qubits round 2's kernel. Round 4:
 * batches of 10-qubit states one warp per state, larger states on round 2's kernel with A in
 * registers (the fastest measured for them until round 5). Round 5: batches with their factor
 * tables read in bursts, larger states with each thread's lo in registers. */
int product_round45(int round, void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                    uint64_t first_state, const double *table, double scale, cudaStream_t s)
{
    if (n == 0 || qubits < QM_PRODUCT_LO_BITS)
        return qm_cuda_product_digits(state, c128, n, g0, qubits, first_state, table, scale, 0, s);
    const uint64_t tiles = ((g0 + n - 1) >> QM_PRODUCT_LO_BITS) - (g0 >> QM_PRODUCT_LO_BITS) + 1;
    const bool pairs = pair_stores(state, c128, g0);
    const bool unit = scale == 1.0;
    if (qubits > QM_PRODUCT_LO_BITS) {
        void (*k)(void *, uint64_t, uint64_t, unsigned, uint64_t, const double *, double) =
            round == 4 ? (c128    ? product_states_kernel<0, false, false, 1>
                          : pairs ? product_states_kernel<2, false, false, 1>
                                  : product_states_kernel<1, false, false, 1>)
            : c128     ? (unit ? product_states_kernel<0, false, true, 2>
                               : product_states_kernel<0, false, false, 2>)
            : pairs    ? (unit ? product_states_kernel<2, false, true, 2>
                               : product_states_kernel<2, false, false, 2>)
                       : (unit ? product_states_kernel<1, false, true, 2>
                               : product_states_kernel<1, false, false, 2>);
        return product_launch(k, tiles, s, state, n, g0, qubits, first_state, table, scale);
    }
    if (round == 4) {
        void (*k)(void *, uint64_t, uint64_t, uint64_t, const double *, double, uint64_t) =
            c128    ? (unit ? product_batch10_r4_kernel<0, true> : product_batch10_r4_kernel<0, false>)
            : pairs ? (unit ? product_batch10_r4_kernel<2, true> : product_batch10_r4_kernel<2, false>)
                    : (unit ? product_batch10_r4_kernel<1, true> : product_batch10_r4_kernel<1, false>);
        const unsigned grid = grid_of(k, QM_PD_THREADS, 0, (tiles + 7) / 8);
        k<<<grid, QM_PD_THREADS, 0, s>>>(state, n, g0, first_state, table, scale, l2_bytes());
        return (int)cudaGetLastError();
    }
    void (*k)(void *, uint64_t, uint64_t, uint64_t, const double *, double) =
        c128    ? (unit ? product_batch10_r5_kernel<0, true> : product_batch10_r5_kernel<0, false>)
        : pairs ? (unit ? product_batch10_r5_kernel<2, true> : product_batch10_r5_kernel<2, false>)
                : (unit ? product_batch10_r5_kernel<1, true> : product_batch10_r5_kernel<1, false>);
    /* at least 8 states a block (one a warp), as many blocks as are resident */
    const unsigned grid = grid_of(k, QM_PD_THREADS, 0, (tiles + 7) / 8);
    k<<<grid, QM_PD_THREADS, 0, s>>>(state, n, g0, first_state, table, scale);
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int qm_cuda_product_round4(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale, void *stream)
{
    return product_round45(4, state, c128, n, g0, qubits, first_state, table, scale,
                           (cudaStream_t)stream);
}

extern "C" int qm_cuda_product_round5(void *state, int c128, uint64_t n, uint64_t g0,
                                      unsigned qubits, uint64_t first_state, const double *table,
                                      double scale, void *stream)
{
    return product_round45(5, state, c128, n, g0, qubits, first_state, table, scale,
                           (cudaStream_t)stream);
}

extern "C" int qm_cuda_wht_passes(void *state, int c128, uint64_t n, unsigned b0, unsigned b1,
                                  void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    for (unsigned b = b0; b < b1;) {
        const unsigned w = b1 - b < 10 ? b1 - b : 10;
        const int le = c128 ? wht_pass_launch<double2, 4, 3>((double2 *)state, n, b, w, s)
                            : wht_pass_launch<float2, 8, 2>((float2 *)state, n, b, w, s);
        if (le != (int)cudaSuccess)
            return le;
        b += w;
    }
    return (int)cudaSuccess;
}

extern "C" unsigned qm_cuda_wht3_split(unsigned b0, unsigned b1, unsigned w_max)
{
    return qm_wht3_split(b0, b1, w_max); /* qm_passes.h: the rule the cost model counts too */
}

extern "C" int qm_cuda_wht_passes3(void *state, int c128, uint64_t n, unsigned b0, unsigned b1,
                                   unsigned w_max, unsigned row_bytes, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned passes = qm_cuda_wht3_split(b0, b1, w_max);
    const unsigned S = b1 - b0;
    for (unsigned p = 0, b = b0; p < passes; ++p) {
        /* stages dealt as evenly as possible, the longer passes first (20 over 3: 7, 7, 6) */
        const unsigned w = S / passes + (p < S % passes ? 1u : 0u);
        /* 512-byte rows: 2^(6 + k2) threads for complex64, over the 512 of the launch bound at
         * w = 8 (k2 = 4): that pass takes 256-byte rows */
        const bool wide = row_bytes >= 512 && (c128 || w < 8);
        int le;
        if (w > QM_WHT3_MAX_W) /* more rows than shared memory holds at long rows: round 2's pass */
            le = c128 ? wht_pass_launch<double2, 4, 3>((double2 *)state, n, b, w, s)
                      : wht_pass_launch<float2, 8, 2>((float2 *)state, n, b, w, s);
        else if (c128)
            le = wide ? wht_pass3_launch<double2, 5>((double2 *)state, n, b, w, s)
                      : wht_pass3_launch<double2, 4>((double2 *)state, n, b, w, s);
        else
            le = wide ? wht_pass3_launch<float2, 6>((float2 *)state, n, b, w, s)
                      : wht_pass3_launch<float2, 5>((float2 *)state, n, b, w, s);
        if (le != (int)cudaSuccess)
            return le;
        b += w;
    }
    return (int)cudaSuccess;
}

extern "C" int qm_cuda_iqp_fused(void *state, int c128, uint64_t n, uint64_t g0, unsigned qubits,
                                 unsigned n_coeffs, uint64_t first_state, const double *table,
                                 double scale, int round, void *stream)
{
    if (c128)
        return iqp_fused_launch((double2 *)state, n, g0, qubits, n_coeffs, first_state, table,
                                scale, round, (cudaStream_t)stream);
    return iqp_fused_launch((float2 *)state, n, g0, qubits, n_coeffs, first_state, table, scale,
                            round, (cudaStream_t)stream);
}
