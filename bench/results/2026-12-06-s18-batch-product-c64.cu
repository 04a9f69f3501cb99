// session 18 microbenchmark: the 10-qubit complex64 batch product (round 4, MODE 2: float4 pairs)
// reaches ~80% of a cudaMemset of the same 512 MiB (target 85%). This file times, in one process,
// the fill, constant-store kernels of round 4's pattern, an exact copy of round 4's kernel,
// variants of it and three diagnostics, and checks every variant bit for bit against a reference.
//
// Build (from bench/results):
//   nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -o /tmp/pb18 2026-12-06-s18-batch-product-c64.cu
// Run: /tmp/pb18 (needs only the CUDA runtime and ~3.1 GiB of GPU memory; a few seconds of host
// checks, well under 60 s). Exit code 1 if a variant is not bit-exact, the GPU reference disagrees
// with the host, the table misses a signed-zero case, or a CUDA call fails.
//
// Checks: the reference is a one-thread-per-amplitude kernel with the CPU's definition
// (qm_product_lo, qm_product_hi, qm_product_amp; --fmad=false), checked against the host for all
// 2^26 amplitudes (and 512 straight from qm_product_lo). Each variant runs once into a poisoned
// buffer that is then compared with the reference 16 bytes at a time on the device, then is timed
// (CUDA events, median of 21 after 3 warm-ups). The factor table mixes generic, angle, phase,
// basis, special (+-0, +-1, 2^-600, subnormals), tiny (2^-110 factors) and signed-zero states (see
// make_table).
//
// Variants (kernel v_kernel<MODE, UNIT, STEP, FOLD, ST, MINB, UNR, PF, LL, DIAG>):
//   r4        round 4's kernel, copied unchanged (r4_kernel; MODE 2 and MODE 0).
//   a0        r4 through v_kernel (STEP 0): a control; it also happens not to spill (below).
//   a1        STEP 1: (1,0)*(x,y) = (x - 0y, y + 0x) with 0y, 0x made by masking the sign bit
//             (LOP3) instead of DMUL: 2 DADD + 2 LOP3 per amplitude instead of 2 DMUL + 2 DADD.
//   a2, a3    STEP 2 / 3: the same step as an integer select, no FP64 operation (64-bit compares /
//             32-bit halves); proof at one_mul. a1-a3 also replace the first product of each A/B
//             chain, which is the same (1,0)*f.
//   +b        FOLD: the scale (a power of two: 2^-5 for 10-qubit phase states) folded into B once
//             per state instead of 2 DMUL per amplitude, under a per-state guard that makes it
//             exact (proof at fold_range_ok); states failing the guard take the unfolded loop.
//   ll        LL: the next state's factor loads issued after B's store (removes the spills).
//   st.wb / st.na   plain st.global / st.global.L1::no_allocate instead of __stcs (st.global.cs).
//   minbN     __launch_bounds__(256, N) (round 4: 3). unrN: #pragma unroll N of the store loop
//             (round 4: 4 for pairs, 8 for complex128). nopf: without round 4's L2 prefetch.
//   diag      not exact by design: "state 0" reads state 0's factors for every state (the same
//             arithmetic without the table's 20 MiB of DRAM reads); "loads+stores" keeps the loads,
//             B's shared buffer and the stores but no arithmetic (the memory side's ceiling).
//   coop      (COOP, added after the first H100 run, below) lanes 0..19 load the next state's whole
//             factor table (320 bytes) with one coalesced 16-byte __ldg each into one double2
//             register; at the start of a state it goes to a per-warp shared tab[2][20] (parity k
//             like B), __syncwarp, the next load is issued, and each lane reads its factors as
//             tab[2 q + b] (broadcast LDS.128). Same values, same arithmetic code: bit-exact with
//             the per-lane kernel of the same knobs (a0 = round 4's products; a3, a3+b). Rows: a0 /
//             a3 / a3+b, nopf, minb4 (complex64), and a0 / a3 / a3+b, nopf, minb4 (complex128).
//   (d) __double2float_rn: skipped, nvcc emits the same F2F.F32.F64 as the cast (probe kernels of
//   each compiled to byte-identical SASS). Two states per warp iteration: not tried, round 4 is at
//   the 80-register cap of 3 blocks of 256 with one state's 22 prefetched factor doubles.
//
// First H100 run (complex64, % of cudaMemset): r4 ~81.9%, every a/b/ll/st/minb/unr/nopf variant
// 79.6-82.5%; "diag loads + stores, no arithmetic" 81.9% (= r4: the arithmetic costs nothing);
// "diag state 0's factors" 91.9% (the same arithmetic, all factor loads hitting L1). complex128:
// r4 86.9%, a3+b 87.7%, loads+stores diag 85.5%. So the limiter is the per-lane factor loads: ~22
// scattered 8-byte __ldg a lane per state (22 warp-wide LDG.64 for 320 bytes of table), the next
// state's held in ~22 registers. The coop variants replace them with 1 LDG.128 (lanes 0..19) + 11
// broadcast LDS.128 a lane per state and free registers (60-74 instead of 80, no spills): coop
// kernels at 64 registers or fewer run 4 blocks an SM even without minb4 (see the grid column).
//
// SASS (sm_90, nvcc 13.0, the flags above), static counts per kernel. cuobjdump/nvdisasm are not
// installed on the build machine: counted with the ELF reader at the end of this file from the
// opcode field (bits 0..8) of each 128-bit instruction, opcodes identified with probe kernels (DMUL
// 0x028, DADD 0x029, DFMA 0x02b, F2F 0x110, STG 0x186, LDS 0x184, LOP3 0x012, SEL 0x007, ISETP
// 0x00c). "all" counts every instruction (alignment NOPs included); registers and spill bytes
// (stores + loads) from ptxas -v. Static counts hold both store paths (whole state,
// bounds-checked), the build, and for +b two copies of the loop. No kernel has a DFMA (--fmad=false
// holds). Note: __launch_bounds__(256, 3) caps at 80 registers (allocation in units of 8), not the
// 85 round 4's comment says, and with nvcc 13.0 round 4's complex64 kernels spill 24 (unit) / 48
// (phase) bytes; the spills go with the bounds-checked path's pressure plus the early factor loads
// (a0 and ll variants have none).
//
//   kernel                   regs spill   all  DMUL  DADD DFMA  F2F  STG  LDS  LOP3  SEL ISETP
//   c64 r4 unit                80    24   616   102    62    0   16   17    4    35    0    57
//   c64 r4 phase               79    48   632   118    62    0   16   17    4    35    0    57
//   c64 a0 unit                80     0   616   102    62    0   16   17    4    20    0    54
//   c64 a0 phase ll            80     0   624   118    62    0   16   17    4    21    0    51
//   c64 a1 unit                80     0   640    80    62    0   16   17    4    42    0    54
//   c64 a1 phase               79    48   656    96    62    0   16   17    4    43    0    54
//   c64 a2 unit                80     0   680    80    40    0   16   17    4    21    0   131
//   c64 a2 phase               80    24   712    96    40    0   16   17    4    21    0   131
//   c64 a3 unit                80     0   664    80    40    0   16   17    4    76   22    54
//   c64 a3 phase               80    24   672    96    40    0   16   17    4    76   22    54
//   c64 a1+b phase             80    24   976   130    94    0   32   34    8   100    0   113
//   c64 a3+b phase             80     0  1016   130    56    0   32   34    8   157   38   113
//   c64 a3 unit ll             80     0   656    80    40    0   16   17    4    76   22    51
//   c64 a3 phase ll            80     0   672    96    40    0   16   17    4    76   22    51
//   c64 a3+b phase ll          80     0  1000   130    56    0   32   34    8   157   38   110
//   c64 a3 unit st.wb          80     0   664    80    40    0   16   17    4    76   22    54
//   c64 a3 unit st.na          80     0   664    80    40    0   16   17    4    76   22    54
//   c64 a3+b phase st.na       80     0  1016   130    56    0   32   34    8   157   38   113
//   c64 a3 unit minb2          94     0   656    80    40    0   16   17    4    76   22    54
//   c64 a3+b phase minb2       90     0   984   130    56    0   32   34    8   147   38   110
//   c64 a3 unit minb4          64   176   688    80    40    0   16   17    4    81   22    54
//   c64 a3 unit unr8           80     0   936   112    56    0   32   33    8   120   38    90
//   c64 a3 unit unr16          80     0  1376   176    88    0   64   65   16   209   70   161
//   c64 a3+b phase unr8        80    24  1512   210    88    0   64   66   16   252   70   190
//   c64 a3 unit nopf           80     0   624    80    40    0   16   17    4    75   22    48
//   c64 diag a0 state-0        80     0   600   102    62    0   16   17    4    39    0    54
//   c64 diag a3 state-0        80     0   656    80    40    0   16   17    4    94   22    54
//   c64 diag loads+stores      80     0   288     0     0    0    0    4    4    41    1    14
//   c64 const f4 stcs          17     0    56     0     0    0    0    4    0     1    0     5
//   c64 const f4 st.wb         17     0    56     0     0    0    0    4    0     1    0     5
//   c64 const f4 st.na         17     0    56     0     0    0    0    4    0     1    0     5
//   c128 r4 unit               80     0   488    84    52    0    0    8    8    13    0    49
//   c128 r4 phase              76     0   512   100    52    0    0    8    8    13    0    49
//   c128 a1 unit               76     0   512    64    52    0    0    8    8    33    0    49
//   c128 a1 phase              76     0   528    80    52    0    0    8    8    33    0    49
//   c128 a3 unit               78     0   536    64    32    0    0    8    8    63   20    49
//   c128 a3 phase              78     0   544    80    32    0    0    8    8    63   20    49
//   c128 a1+b phase            76     0   896   114    84    0    0   16   16   101    0   107
//   c128 a3+b phase            76     0   920   114    48    0    0   16   16   155   36   107
//   c128 diag loads+stores     80     0   304     0     0    0    0    8    8    42    0    13
//   c128 const d2 stcs         17     0    56     0     0    0    0    4    0     1    0     5
//
// The coop kernels (same counter; smem 13312 bytes a block: bs 8 KiB + tab 5 KiB). LDG is opcode
// 0x181 and STS 0x188 (identified from the counts: r4 c64 has 44 = 2 x 22 of 0x181 and 1 of
// 0x188, its B store). Without +b ptxas duplicates the build (a peeled first state): LDS 26 (c64)
// = 2 x 11 factor reads + 4 B reads of the store loop, 28 (c128) = 2 x 10 + 8, hence DMUL/DADD
// above the per-lane kernels'; the +b kernels keep one build and two loops (19 = 11 + 2 x 4).
//   kernel                   regs spill   all  DMUL  DADD  F2F  STG  LDS  LOP3  SEL ISETP  LDG  STS
//   c64 coop a0 unit           66     0   688   156    92   16   17   26    22    0    61    3    3
//   c64 coop a0 phase          66     0   712   172    92   16   17   26    22    0    61    3    3
//   c64 coop a3 unit           66     0   744   128    64   16   17   26    92   28    61    3    3
//   c64 coop a3 phase          66     0   760   144    64   16   17   26    92   28    61    3    3
//   c64 coop a3+b phase        64     0   928   130    56   32   34   19   150   39   114    2    2
//   c64 coop a0 unit nopf      70     0   648   156    92   16   17   26    22    0    55    3    3
//   c64 coop a3 unit nopf      70     0   704   128    64   16   17   26    92   28    55    3    3
//   c64 coop a3+b phase nopf   68     0   888   130    56   32   34   19   150   39   108    2    2
//   c64 coop a0 unit minb4     60     0   704   156    92   16   17   26    28    0    61    3    3
//   c64 coop a3 unit minb4     64     0   768   128    64   16   17   26    98   28    61    3    3
//   c64 coop a3+b ph. minb4    62     0   928   130    56   32   34   19   152   39   114    2    2
//   c64 coop a3 u. minb4 nopf  64     0   728   128    64   16   17   26    98   28    55    3    3
//   c128 coop a0 unit          68     0   576   120    72    0    8   28    31    0    58    3    3
//   c128 coop a0 phase         74     0   608   136    72    0    8   28    31    0    59    3    3
//   c128 coop a3 unit          66     0   616    96    48    0    8   28    77   24    54    3    3
//   c128 coop a3+b phase       70     0   824   114    48    0   16   26   133   36   103    2    2
//   c128 coop a3+b ph. nopf    70     0   784   114    48    0   16   26   133   36    97    2    2
//   c128 coop a3 unit minb4    60     0   624    96    48    0    8   28    79   24    54    3    3
//   c128 coop a3+b ph. minb4   64     0   840   114    48    0   16   26   134   36   103    2    2
// (no DFMA in any; the per-lane kernels have LDG 40 (c128) / 44 (c64) and STS 1.)
//
// Per 16-byte store of the whole-state loop (two complex64 / one complex128 amplitude), from the
// difference of unroll 4 and 8 (8 and 16) of a copy with the bounds-checked path removed:
//   c64:  r4 unit 32 instr: 12 DMUL 8 DADD 4 F2F 1 STG 1 LDS; r4 phase 36: 16 DMUL 8 DADD
//         a1 unit 36: 8 DMUL 8 DADD 5 LOP3;                   a1 phase 40: 12 DMUL 8 DADD
//         a2 unit 44: 8 DMUL 4 DADD 14 ISETP;                 a2 phase 52: 12 DMUL 4 DADD
//         a3 unit 42: 8 DMUL 4 DADD 11 LOP3 4 SEL;            a3 phase 46: 12 DMUL 4 DADD
//         a3+b phase: a3 unit's loop on folding states (12 FP64 ops instead of r4 phase's 24)
//   c128: r4 unit 17: 6 DMUL 4 DADD; phase 19: 8 DMUL; a1 unit 19: 4 DMUL 4 DADD 2 LOP3;
//         a3 unit 22: 4 DMUL 2 DADD 5 LOP3 2 SEL; a3 phase 23
// So the FP64 pipe's work per store falls from 20 (unit) / 24 (phase) to 12 while the issued
// instructions rise by 10-30%: which one binds is what the timings tell.
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <type_traits>
#include "../../kernels/qm_math.h"

/* The host reference uses qm_math.h's functions compiled by the host compiler. They must not be
 * contracted into fused multiply-adds (the project builds its C code with -ffp-contract=off). The
 * x86-64 baseline that nvcc's host pass targets has no FMA instruction, so nothing can be
 * contracted; a build for a host with FMA (-march=native, -mfma) is refused here rather than
 * silently compared against a contracted reference. */
#if !defined(__CUDA_ARCH__) && (defined(__FMA__) || defined(__FP_FAST_FMA))
#error "host reference would be contracted: build without -mfma/-march=native"
#endif

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

template <typename F> double med(F f, int reps = 21)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int w = 0; w < 3; ++w)
        f(); /* warm-up */
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

#define QM_PD_THREADS 256

// ---- round 4, copied from kernels/cuda_featuremap.cu (store_pair_f32, product_amp3, kernel) ----

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

template <int MODE, bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 3) /* 85 registers, no spills */
r4_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state, const double *table,
          double scale, uint64_t l2_bytes)
{
    __shared__ double2 bs[QM_PD_THREADS / 32][2][32]; /* per warp, B of alternate states */
    const unsigned y = threadIdx.x & 31u;
    double2(*bw)[32] = bs[threadIdx.x >> 5];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n;
    const uint64_t stride = (uint64_t)gridDim.x * (QM_PD_THREADS / 32);
    unsigned k = 0; /* the warp's state count: its B buffer */
    uint64_t t = t0 + (uint64_t)blockIdx.x * (QM_PD_THREADS / 32) + (threadIdx.x >> 5);
    constexpr int NA = MODE == 2 ? 2 : 1; /* A entries per lane */
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double fr[2][5], fi[2][5], f1r = 0.0, f1i = 0.0;
    auto load = [&](uint64_t ts) {
        if (ts <= tl) {
            const double *f = table + (ts - first_state) * 4 * QM_PRODUCT_LO_BITS;
#pragma unroll
            for (int w = 0; w < 2; ++w)
#pragma unroll
                for (unsigned k = 0; k < 5; ++k) {
                    const unsigned q = w == 0 ? k : 5 + k, bits = w == 0 ? a0 : y;
                    const double *p = f + 4 * q + 2 * ((bits >> k) & 1u);
                    fr[w][k] = __ldg(p);
                    fi[w][k] = __ldg(p + 1);
                }
            if (NA == 2) {
                f1r = __ldg(f + 2);
                f1i = __ldg(f + 3);
            }
        }
    };
    {
        const char *f0 = (const char *)(table + (t0 - first_state) * 4 * QM_PRODUCT_LO_BITS);
        const uint64_t bytes = (tl - t0 + 1) * 4 * QM_PRODUCT_LO_BITS * sizeof(double);
        if (bytes <= l2_bytes / 2)
            for (uint64_t o = ((uint64_t)blockIdx.x * QM_PD_THREADS + threadIdx.x) * 128; o < bytes;
                 o += (uint64_t)gridDim.x * QM_PD_THREADS * 128)
                asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(f0 + o));
    }
    load(t);
    for (; t <= tl; t += stride) {
        double2 ab[NA + 1];
#pragma unroll
        for (int w = 0; w <= NA; ++w) {
            const int src = w == NA ? 1 : 0;
            double r = 1.0, m = 0.0;
#pragma unroll
            for (unsigned k = 0; k < 5; ++k) {
                const bool one = w == 1 && NA == 2 && k == 0;
                qm_cmul(r, m, one ? f1r : fr[src][k], one ? f1i : fi[src][k], &r, &m);
            }
            ab[w] = make_double2(r, m);
        }
        load(t + stride);
        double2 *B = bw[k & 1u];
        ++k;
        B[y] = ab[NA];
        __syncwarp();
        const uint64_t first = t << QM_PRODUCT_LO_BITS;
        const bool inside = first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1; /* uniform */
        if (MODE != 2) {
#pragma unroll 8
            for (unsigned m = 0; m < 32; ++m) {
                const double2 b = B[m];
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
                const double2 b = B[2 * m + (y >= 16 ? 1u : 0u)];
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
}

// ---- the variants ------------------------------------------------------------------------------

QM_HD uint64_t dbits(double d)
{
    union {
        double d;
        uint64_t u;
    } v;
    v.d = d;
    return v.u;
}
QM_HD double dfrom(uint64_t u)
{
    union {
        uint64_t u;
        double d;
    } v;
    v.u = u;
    return v.d;
}
#define SIGN64 0x8000000000000000ull

/* (1, 0) * (x, y) as qm_cmul(1, 0, x, y) evaluates it, for finite x and y:
 * (fl(1 x) - fl(0 y), fl(1 y) + fl(0 x)) = (x - z, y + w), z = 0 y, w = 0 x (1 x = x exactly).
 * STEP 0 (round 4): as written, 2 DMUL + 2 DADD.
 * STEP 1: for finite y, 0 y is the zero with y's sign (IEEE 754: the sign of a product is the
 *   exclusive or of the signs, and 0 times a finite number is a zero), i.e. y's bits masked to
 *   the sign bit; likewise w. The two DADDs stay: the same operations on the same values.
 * STEP 2: no FP64 operation. x - z: if x != 0, x - (+-0) = x exactly. If x = +-0, x - z =
 *   x + (-z) adds two zeros, which in round-to-nearest gives -0 when both are -0 and +0
 *   otherwise: -0 iff x = -0 and -z = -0, i.e. y's sign bit clear. So x - z equals x except when
 *   x = -0 and y's sign bit is set, where it is +0. Likewise y + w equals y except when y = -0
 *   and x's sign bit is clear (w = +0, -0 + +0 = +0), where it is +0. In both exceptions the
 *   value -0 (bits 0x8000000000000000) becomes +0 (bits 0): the select below.
 * Domain: finite x and y. For an infinite or NaN operand 0 y is NaN and the result differs. The
 * project's factor components are cosines, sines, 0 and 1 (angle, phase, basis; non-finite input
 * values are rejected before the tables are built): factors of modulus at most 1, so every A, B
 * and lo component is finite (about 1 at most). The check exercises both exceptions (the host
 * counts them). */
template <int STEP>
QM_HD double2 one_mul(double x, double y)
{
    double2 v;
    if (STEP == 0) {
        v.x = x - 0.0 * y;
        v.y = y + 0.0 * x;
    } else if (STEP == 1) {
        const double z = dfrom(dbits(y) & SIGN64), w = dfrom(dbits(x) & SIGN64);
        v.x = x - z;
        v.y = y + w;
    } else if (STEP == 2) {
        const uint64_t xb = dbits(x), yb = dbits(y);
        v.x = dfrom(xb == SIGN64 && (yb & SIGN64) ? 0 : xb);
        v.y = dfrom(yb == SIGN64 && !(xb & SIGN64) ? 0 : yb);
    } else {
        /* STEP 3: STEP 2 on 32-bit halves. Only the high word can change, and only when the
         * component is +-0, whose high word is its sign bit alone: x = +-0 gives x.sign & !y.sign,
         * y = +-0 gives y.sign & x.sign (the sign bits of x + (-z) and y + w above). */
        const uint64_t xb = dbits(x), yb = dbits(y);
        const uint32_t xh = (uint32_t)(xb >> 32), xl = (uint32_t)xb;
        const uint32_t yh = (uint32_t)(yb >> 32), yl = (uint32_t)yb;
        const bool xz = ((xh & 0x7fffffffu) | xl) == 0, yz = ((yh & 0x7fffffffu) | yl) == 0;
        const uint32_t rh = xz ? xh & ~yh : xh, ih = yz ? yh & xh : yh;
        v.x = dfrom((uint64_t)rh << 32 | xl);
        v.y = dfrom((uint64_t)ih << 32 | yl);
    }
    return v;
}

/* Folding the scale (FOLD): the unfolded amplitude is s * one_mul(lo), lo = cmul(A, B); the folded
 * one is one_mul(lo'), lo' = cmul(A, B'), B' = (s B.x, s B.y) formed once per state. With s = 2^k
 * these are bit-identical whenever no nonzero intermediate value of either computation is
 * subnormal or overflows:
 * - For a real t whose rounding fl(t) and s fl(t) both lie in the normal range, fl(s t) = s fl(t):
 *   the floating-point grid scales exactly by a power of two there. Zeros keep their signs under
 *   s > 0, and the sign of a zero result (a product of a zero, an exact cancellation u - u = +0,
 *   a sum of two zeros) depends on the operands' signs only, which scaling by s > 0 keeps.
 * - So B' = s B exactly, then fl(a s b) = s fl(a b) for each product of the cmul, then
 *   fl(s p - s q) = s fl(p - q): lo' = s lo component by component, zeros and signs included.
 *   one_mul depends on the signs and zero-ness of its operands only (and returns them or their
 *   zeros), so one_mul(lo') = s one_mul(lo), and the unfolded s * one_mul(lo) is exact too.
 * The guard (per state, all 32 lanes agree): every component of every A and B entry is 0 or
 * 2^-400 <= |c| < 2^401, and s = 2^k with |k| <= 170. Then each nonzero product a b of the cmul
 * lies in [2^-800, 2^802); a nonzero difference p - q of two doubles of magnitude >= 2^-800 is a
 * multiple of 2^-852 (their ulps are >= 2^-852) so it lies in [2^-852, 2^803]; times s it stays
 * in [2^-1022, 2^973]: all normal, in both computations (and s B in [2^-570, 2^571]). A state
 * whose entries fall outside (factors below ~2^-80, subnormals, products near underflow) takes
 * the unfolded loop, so the output is the reference's for every finite table. The host counts
 * the states that fold, and the amplitudes an unguarded fold would change. */
QM_HD bool fold_range_ok(double c)
{
    const uint64_t b = dbits(c);
    const unsigned e = (unsigned)(b >> 52) & 0x7ffu;
    return (e - 623u <= 800u) | ((b & ~SIGN64) == 0); /* 2^-400 <= |c| < 2^401, or +-0 */
}
QM_HD bool fold_scale_ok(double s)
{
    const uint64_t b = dbits(s);
    const unsigned e = (unsigned)(b >> 52); /* sign bit included: s > 0 */
    return (b & 0xfffffffffffffull) == 0 && e >= 1023u - 170u && e <= 1023u + 170u;
}

enum { ST_CS = 0, ST_WB = 1, ST_NA = 2 }; /* st.global.cs, st.global, st.global.L1::no_allocate */

template <int ST> __device__ __forceinline__ void st16(float4 *p, float4 v)
{
    if (ST == ST_CS)
        __stcs(p, v);
    else if (ST == ST_WB)
        asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
                     "f"(v.z), "f"(v.w));
    else
        asm volatile("st.global.L1::no_allocate.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p),
                     "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
}
template <int ST> __device__ __forceinline__ void st16(double2 *p, double2 v)
{
    if (ST == ST_CS)
        __stcs(p, v);
    else if (ST == ST_WB)
        asm volatile("st.global.v2.f64 [%0], {%1, %2};" ::"l"(p), "d"(v.x), "d"(v.y));
    else
        asm volatile("st.global.L1::no_allocate.v2.f64 [%0], {%1, %2};" ::"l"(p), "d"(v.x),
                     "d"(v.y));
}

/* One state's amplitudes from A (ab, in registers) and B (the warp's shared buffer); SCALE: times
 * scale (not folded). Round 4's loops otherwise. */
template <int MODE, bool SCALE, int STEP, int ST, int UNR>
__device__ __forceinline__ void v_tile(void *state, uint64_t first, uint64_t g0, uint64_t g1,
                                       bool inside, const double2 *B, const double2 *ab,
                                       unsigned y, double scale)
{
    if (MODE == 0) {
#pragma unroll UNR
        for (unsigned m = 0; m < 32; ++m) {
            const double2 b = B[m];
            double2 lo;
            qm_cmul(ab[0].x, ab[0].y, b.x, b.y, &lo.x, &lo.y);
            double2 a = one_mul<STEP>(lo.x, lo.y);
            if (SCALE) {
                a.x = scale * a.x;
                a.y = scale * a.y;
            }
            const uint64_t g = first + y + 32 * m;
            if (!inside && (g < g0 || g >= g1))
                continue;
            st16<ST>((double2 *)state + (g - g0), a);
        }
    } else {
#pragma unroll UNR
        for (unsigned m = 0; m < 16; ++m) {
            const double2 b = B[2 * m + (y >= 16 ? 1u : 0u)];
            float v[4];
#pragma unroll
            for (int w = 0; w < 2; ++w) {
                double2 lo;
                qm_cmul(ab[w].x, ab[w].y, b.x, b.y, &lo.x, &lo.y);
                double2 a = one_mul<STEP>(lo.x, lo.y);
                if (SCALE) {
                    a.x = scale * a.x;
                    a.y = scale * a.y;
                }
                v[2 * w] = (float)a.x;
                v[2 * w + 1] = (float)a.y;
            }
            const uint64_t g = first + 2 * (y + 32 * m);
            if (inside) {
                st16<ST>((float4 *)((float2 *)state + (g - g0)),
                         make_float4(v[0], v[1], v[2], v[3]));
                continue;
            }
            store_pair_f32(state, g, g0, g1, v);
        }
    }
}

/* Round 4's kernel with the variants' knobs (see the top of the file). LL: the next state's factor
 * loads after B's store and __syncwarp instead of before (ptxas otherwise issues them during the
 * build, with both states' factors live: 24-48 bytes of spills at 80 registers in the complex64
 * phase kernels, none with LL). DIAG (diagnostics, not exact): 1 every state reads state 0's
 * factors (the same arithmetic without the table's DRAM traffic); 2 the factor loads and B's
 * shared buffer as round 4 but no arithmetic: the loaded bits are xor-ed into B and B's bits are
 * stored (the store pattern plus the table reads).
 * COOP: the factor table read cooperatively instead of per lane. The next state's whole table
 * (10 qubits x 2 bits x (re, im) = 20 double2, 320 bytes, 16-byte aligned) is one coalesced
 * 16-byte __ldg by each of lanes 0..19, held in one double2 register (nx) while the current state
 * is stored. At the start of a state the lanes write nx to the warp's tab[k & 1] (k: the state
 * count, the same parity as B's buffer), __syncwarp, issue the next state's load into nx, then
 * read each factor from shared memory: (re, im) of qubit q for bit b is tab[2 q + b] (one LDS.128;
 * 2 distinct addresses a qubit across the warp: broadcast, no bank conflict). Reuse of tab[k & 1]
 * by state k + 2: its writes follow state k + 1's __syncwarp (both of them), which every lane
 * reaches after its reads of tab[k & 1] in state k, as for B. The values read are the doubles the
 * per-lane loads read (f + 4 q + 2 b, f + 4 q + 2 b + 1), and the arithmetic after is the same
 * code: bit-exact with the per-lane kernel of the same knobs. LL does not apply (the next state's
 * load is always issued right after the __syncwarp, before the build). */
template <int MODE, bool UNIT, int STEP, bool FOLD, int ST, int MINB, int UNR, bool PF,
          bool LL = false, int DIAG = 0, bool COOP = false>
__global__ void __launch_bounds__(QM_PD_THREADS, MINB)
v_kernel(void *state, uint64_t n, uint64_t g0, uint64_t first_state, const double *table,
         double scale, uint64_t l2_bytes)
{
    static_assert(MODE == 0 || MODE == 2, "complex128 or complex64 pairs");
    static_assert(!(FOLD && UNIT), "nothing to fold at scale 1");
    static_assert(!(COOP && (LL || DIAG)), "COOP has its own load placement");
    __shared__ double2 bs[QM_PD_THREADS / 32][2][32];
    __shared__ double2 fs[COOP ? QM_PD_THREADS / 32 : 1][2][20]; /* COOP: per warp, factor tables */
    const unsigned y = threadIdx.x & 31u;
    double2(*bw)[32] = bs[threadIdx.x >> 5];
    double2(*tw)[20] = fs[COOP ? threadIdx.x >> 5 : 0];
    const uint64_t t0 = g0 >> QM_PRODUCT_LO_BITS, tl = (g0 + n - 1) >> QM_PRODUCT_LO_BITS;
    const uint64_t g1 = g0 + n;
    const uint64_t stride = (uint64_t)gridDim.x * (QM_PD_THREADS / 32);
    unsigned k = 0;
    uint64_t t = t0 + (uint64_t)blockIdx.x * (QM_PD_THREADS / 32) + (threadIdx.x >> 5);
    constexpr int NA = MODE == 2 ? 2 : 1;
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double fr[2][5], fi[2][5], f1r = 0.0, f1i = 0.0;
    double2 nx = make_double2(0.0, 0.0); /* COOP: lane y < 20's part of the next state's table */
    auto load = [&](uint64_t ts) {
        if (COOP) {
            if (ts <= tl && y < 2 * QM_PRODUCT_LO_BITS)
                nx = __ldg((const double2 *)(table + (ts - first_state) * 4 * QM_PRODUCT_LO_BITS) +
                           y);
        } else if (ts <= tl) {
            const double *f = table + (DIAG == 1 ? 0 : ts - first_state) * 4 * QM_PRODUCT_LO_BITS;
#pragma unroll
            for (int w = 0; w < 2; ++w)
#pragma unroll
                for (unsigned q = 0; q < 5; ++q) {
                    const unsigned bits = w == 0 ? a0 : y;
                    const double *p = f + 4 * (w == 0 ? q : 5 + q) + 2 * ((bits >> q) & 1u);
                    fr[w][q] = __ldg(p);
                    fi[w][q] = __ldg(p + 1);
                }
            if (NA == 2) {
                f1r = __ldg(f + 2);
                f1i = __ldg(f + 3);
            }
        }
    };
    if (PF) {
        const char *f0 = (const char *)(table + (t0 - first_state) * 4 * QM_PRODUCT_LO_BITS);
        const uint64_t bytes = (tl - t0 + 1) * 4 * QM_PRODUCT_LO_BITS * sizeof(double);
        if (bytes <= l2_bytes / 2)
            for (uint64_t o = ((uint64_t)blockIdx.x * QM_PD_THREADS + threadIdx.x) * 128; o < bytes;
                 o += (uint64_t)gridDim.x * QM_PD_THREADS * 128)
                asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(f0 + o));
    }
    const bool scale_ok = FOLD && fold_scale_ok(scale);
    load(t);
    for (; t <= tl; t += stride) {
        if constexpr (DIAG == 2) {
            uint64_t xr = dbits(f1r) ^ dbits(fr[0][0]), xi = dbits(f1i) ^ dbits(fi[0][0]);
            uint64_t br = dbits(fr[1][0]), bi = dbits(fi[1][0]);
#pragma unroll
            for (unsigned q = 1; q < 5; ++q) {
                xr ^= dbits(fr[0][q]), xi ^= dbits(fi[0][q]);
                br ^= dbits(fr[1][q]), bi ^= dbits(fi[1][q]);
            }
            double2 *B = bw[k & 1u];
            ++k;
            B[y] = make_double2(dfrom(xr ^ br), dfrom(xi ^ bi));
            /* the next state's loads after the barrier: issued before the xors (nothing orders
             * them otherwise), they kept both states' factors live and spilled 220 bytes */
            __syncwarp();
            load(t + stride);
            const uint64_t first = t << QM_PRODUCT_LO_BITS;
            constexpr unsigned U = MODE == 2 ? 16 : 32; /* 16-byte stores a lane (whole states) */
#pragma unroll UNR
            for (unsigned m = 0; m < U; ++m) {
                const double2 b = B[MODE == 2 ? 2 * m + (y >= 16 ? 1u : 0u) : m];
                const uint64_t g = first + (MODE == 2 ? 2 : 1) * (y + 32 * m);
                if (MODE == 2)
                    st16<ST>((float4 *)((float2 *)state + (g - g0)),
                             make_float4(__int_as_float(__double2loint(b.x)),
                                         __int_as_float(__double2hiint(b.x)),
                                         __int_as_float(__double2loint(b.y)),
                                         __int_as_float(__double2hiint(b.y))));
                else
                    st16<ST>((double2 *)state + (g - g0), b);
            }
        } else {
            if (COOP) {
                double2 *T = tw[k & 1u]; /* k: incremented with B below */
                if (y < 2 * QM_PRODUCT_LO_BITS)
                    T[y] = nx;
                __syncwarp();
                load(t + stride);
#pragma unroll
                for (int w = 0; w < 2; ++w)
#pragma unroll
                    for (unsigned q = 0; q < 5; ++q) {
                        const unsigned bits = w == 0 ? a0 : y;
                        const double2 v = T[2 * (w == 0 ? q : 5 + q) + ((bits >> q) & 1u)];
                        fr[w][q] = v.x;
                        fi[w][q] = v.y;
                    }
                if (NA == 2) {
                    const double2 v = T[1]; /* qubit 0, bit 1 */
                    f1r = v.x;
                    f1i = v.y;
                }
            }
            double2 ab[NA + 1]; /* A entries, then B[y]: (1, 0) * f first, then 4 products */
#pragma unroll
            for (int w = 0; w <= NA; ++w) {
                const int src = w == NA ? 1 : 0;
                const bool one = w == 1 && NA == 2; /* A[a0 + 1]: qubit 0's factor for bit 1 */
                double2 r = one_mul<STEP>(one ? f1r : fr[src][0], one ? f1i : fi[src][0]);
#pragma unroll
                for (unsigned q = 1; q < 5; ++q)
                    qm_cmul(r.x, r.y, fr[src][q], fi[src][q], &r.x, &r.y);
                ab[w] = r;
            }
            if (!LL && !COOP)
                load(t + stride);
            bool fold = false;
            if (FOLD) {
                bool ok = scale_ok;
#pragma unroll
                for (int w = 0; w <= NA; ++w)
                    ok = ok & fold_range_ok(ab[w].x) & fold_range_ok(ab[w].y);
                fold = __all_sync(0xffffffffu, ok);
            }
            double2 *B = bw[k & 1u];
            ++k;
            B[y] = fold ? make_double2(scale * ab[NA].x, scale * ab[NA].y) : ab[NA];
            __syncwarp();
            if (LL)
                load(t + stride);
            const uint64_t first = t << QM_PRODUCT_LO_BITS;
            const bool inside = /* uniform */
                first >= g0 && first + (1u << QM_PRODUCT_LO_BITS) <= g1;
            if (FOLD && fold)
                v_tile<MODE, false, STEP, ST, UNR>(state, first, g0, g1, inside, B, ab, y, scale);
            else
                v_tile<MODE, !UNIT, STEP, ST, UNR>(state, first, g0, g1, inside, B, ab, y, scale);
        }
    }
}

// ---- ceilings, reference, compare --------------------------------------------------------------

/* Round 4's store pattern with constants: warp per state (grid-stride), lane y writes 16-byte
 * units y + 32 m of the state's 8 KiB (complex64) or 16 KiB (complex128). */
template <typename V, int ST>
__global__ void __launch_bounds__(QM_PD_THREADS) const_kernel(V *x, uint64_t states)
{
    constexpr unsigned U = std::is_same<V, float4>::value ? 512 : 1024; /* 16-byte units a state */
    const uint64_t stride = (uint64_t)gridDim.x * (QM_PD_THREADS / 32);
    const unsigned y = threadIdx.x & 31u;
    V c;
    if constexpr (std::is_same<V, float4>::value)
        c = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    else
        c = make_double2(1.0, 2.0);
    for (uint64_t t = (uint64_t)blockIdx.x * (QM_PD_THREADS / 32) + (threadIdx.x >> 5); t < states;
         t += stride)
#pragma unroll 4
        for (unsigned m = 0; m < U / 32; ++m)
            st16<ST>(x + t * U + y + 32 * m, c);
}

/* The reference: one thread per amplitude, the CPU's definition (qm_product_lo, qm_product_hi,
 * qm_product_amp) under --fmad=false, as product_direct_kernel. */
template <bool C128>
__global__ void ref_kernel(void *out, uint64_t n, const double *table, double scale)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
        const double *f = table + (g >> QM_PRODUCT_LO_BITS) * 4 * QM_PRODUCT_LO_BITS;
        double lr, li, hr, hi, re, im;
        qm_product_lo(f, QM_PRODUCT_LO_BITS, g, &lr, &li);
        qm_product_hi(f, QM_PRODUCT_LO_BITS, g, &hr, &hi);
        qm_product_amp(hr, hi, lr, li, scale, &re, &im);
        if (C128)
            ((double2 *)out)[g] = make_double2(re, im);
        else
            ((float2 *)out)[g] = make_float2((float)re, (float)im);
    }
}

/* Bytewise comparison (16 bytes at a time) of two buffers: the count of differing 16-byte units
 * and the first one. */
__global__ void cmp_kernel(const uint4 *a, const uint4 *b, uint64_t units, unsigned long long *bad,
                           unsigned long long *first)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < units; i += stride) {
        const uint4 u = a[i], v = b[i];
        if (u.x != v.x || u.y != v.y || u.z != v.z || u.w != v.w) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

// ---- host ---------------------------------------------------------------------------------------

static const uint64_t S = 65536, N = S << QM_PRODUCT_LO_BITS; /* 2^26 amplitudes */
static const double PHASE_SCALE = 0x1p-5; /* product_scale(phase, 10) */

static uint64_t rng_state = 0x5eed2026120618ull;
static uint64_t rng()
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uni() { return (double)(rng() >> 11) * 0x1p-53; } /* [0, 1) */
static double angle() { return (2.0 * uni() - 1.0) * 3.14159265358979323846; }

/* State kinds by s % 64: 1 angle (cos x, +0), (sin x, +0); 2 phase (1, +0), (cos x, sin x);
 * 3 basis (1, 0)/(0, 0); 4 special components (+-0 half the time, +-1, +-0.5, +-2^-600,
 * subnormals); 5 tiny (qubits scaled by 2^-110 at random: A, B below the fold guard, products
 * that underflow); 6 generic with a quarter of the components replaced by +-0; the rest generic:
 * bit 0 (cos a, sin a), bit 1 u (cos b, sin b), u in [0.5, 1). */
static const char *const KIND_NAMES[7] = {"generic", "angle", "phase", "basis", "special",
                                          "tiny", "signed-zero"};
static int kind_of(uint64_t s) { return s % 64 < 7 ? (int)(s % 64) : 0; }
static void make_table(std::vector<double> &tab)
{
    static const double special[12] = {0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0x1p-600,
                                       -0x1p-600, 0x1p-1074, -0x1p-1050};
    tab.assign(S * 4 * QM_PRODUCT_LO_BITS, 0.0);
    for (uint64_t s = 0; s < S; ++s) {
        double *f = &tab[s * 4 * QM_PRODUCT_LO_BITS];
        const int kind = kind_of(s);
        const uint64_t j = rng();
        for (unsigned q = 0; q < QM_PRODUCT_LO_BITS; ++q) {
            double *g = f + 4 * q;
            if (kind == 1) {
                const double x = angle();
                g[0] = cos(x), g[1] = 0.0, g[2] = sin(x), g[3] = 0.0;
            } else if (kind == 2) {
                const double x = angle();
                g[0] = 1.0, g[1] = 0.0, g[2] = cos(x), g[3] = sin(x);
            } else if (kind == 3) {
                const bool one = (j >> q) & 1u;
                g[0] = one ? 0.0 : 1.0, g[1] = 0.0, g[2] = one ? 1.0 : 0.0, g[3] = 0.0;
            } else if (kind == 4) {
                for (int c = 0; c < 4; ++c)
                    g[c] = special[rng() % 12];
            } else {
                const double a = angle(), b = angle(), u = 0.5 + 0.5 * uni();
                g[0] = cos(a), g[1] = sin(a), g[2] = u * cos(b), g[3] = u * sin(b);
                if (kind == 5 && (rng() & 1))
                    for (int c = 0; c < 4; ++c)
                        g[c] *= 0x1p-110;
                if (kind == 6)
                    for (int c = 0; c < 4; ++c)
                        if (rng() % 4 == 0)
                            g[c] = (rng() & 1) ? -0.0 : 0.0;
            }
        }
    }
}

static bool is_m0(double v) { return dbits(v) == SIGN64; }
static bool sgn(double v) { return (dbits(v) & SIGN64) != 0; }

struct host_stats {
    uint64_t lo_re_fix = 0, lo_im_fix = 0, f_re_fix = 0, f_im_fix = 0; /* one_mul's exceptions */
    uint64_t fold_states = 0, unguarded_fold_diff = 0;
};

/* A and B of state s as qm_product_lo forms them (qm_product_range over bits 0..4, 5..9). */
static void host_ab(const double *f, double2 *A, double2 *B)
{
    for (unsigned e = 0; e < 32; ++e) {
        qm_product_range(f, 0, 5, e, &A[e].x, &A[e].y);
        qm_product_range(f, 5, 10, (uint64_t)e << 5, &B[e].x, &B[e].y);
    }
}

/* Every amplitude of the reference `ref` (copied from the device) against the host: A and B per
 * state, lo = qm_cmul(A, B) (qm_product_lo's operations), then qm_product_amp with hi = (1, 0) as
 * qm_product_hi gives for 10 qubits; plus 512 random amplitudes straight from qm_product_lo /
 * qm_product_hi (the A/B shortcut checked too). With st: the signed-zero cases and the fold
 * guard's statistics (complex64 phase pass). Returns the number of differing amplitudes. */
static uint64_t host_check(const std::vector<double> &tab, const void *ref, bool c128, double scale,
                           host_stats *st)
{
    uint64_t bad = 0;
    double2 A[32], B[32];
    for (uint64_t s = 0; s < S; ++s) {
        const double *f = &tab[s * 4 * QM_PRODUCT_LO_BITS];
        host_ab(f, A, B);
        bool fold = fold_scale_ok(scale);
        if (st) {
            for (int q = 0; q < 10; q += 5) /* chain starts: (1, 0) * f_0, (1, 0) * f_5 */
                for (int b = 0; b < 2; ++b) {
                    const double x = f[4 * q + 2 * b], y = f[4 * q + 2 * b + 1];
                    st->f_re_fix += is_m0(x) && sgn(y);
                    st->f_im_fix += is_m0(y) && !sgn(x);
                }
            for (unsigned e = 0; e < 32; ++e)
                fold = fold && fold_range_ok(A[e].x) && fold_range_ok(A[e].y) &&
                       fold_range_ok(B[e].x) && fold_range_ok(B[e].y);
            st->fold_states += fold;
        }
        for (unsigned i = 0; i < 1024; ++i) {
            double lr, li, re, im;
            qm_cmul(A[i & 31].x, A[i & 31].y, B[i >> 5].x, B[i >> 5].y, &lr, &li);
            qm_product_amp(1.0, 0.0, lr, li, scale, &re, &im);
            const uint64_t g = (s << QM_PRODUCT_LO_BITS) + i;
            bool same;
            if (c128) {
                const double *r = (const double *)ref + 2 * g;
                same = dbits(r[0]) == dbits(re) && dbits(r[1]) == dbits(im);
            } else {
                const float *r = (const float *)ref + 2 * g;
                const float fre = (float)re, fim = (float)im;
                same = memcmp(r, &fre, 4) == 0 && memcmp(r + 1, &fim, 4) == 0;
            }
            if (!same && bad++ < 5)
                fprintf(stderr, "reference differs from the host: state %llu slot %u\n",
                        (unsigned long long)s, i);
            if (st) {
                st->lo_re_fix += is_m0(lr) && sgn(li);
                st->lo_im_fix += is_m0(li) && !sgn(lr);
                /* what folding s into B without the guard would give */
                double br = scale * B[i >> 5].x, bi = scale * B[i >> 5].y, fr2, fi2;
                qm_cmul(A[i & 31].x, A[i & 31].y, br, bi, &fr2, &fi2);
                const double2 u = one_mul<0>(fr2, fi2);
                st->unguarded_fold_diff += dbits(u.x) != dbits(re) || dbits(u.y) != dbits(im);
            }
        }
    }
    for (int r = 0; r < 512; ++r) {
        const uint64_t g = rng() % N;
        const double *f = &tab[(g >> QM_PRODUCT_LO_BITS) * 4 * QM_PRODUCT_LO_BITS];
        double lr, li, hr, hi, re, im;
        qm_product_lo(f, QM_PRODUCT_LO_BITS, g, &lr, &li);
        qm_product_hi(f, QM_PRODUCT_LO_BITS, g, &hr, &hi);
        qm_product_amp(hr, hi, lr, li, scale, &re, &im);
        bool same;
        if (c128) {
            const double *p = (const double *)ref + 2 * g;
            same = dbits(p[0]) == dbits(re) && dbits(p[1]) == dbits(im);
        } else {
            const float *p = (const float *)ref + 2 * g;
            const float fre = (float)re, fim = (float)im;
            same = memcmp(p, &fre, 4) == 0 && memcmp(p + 1, &fim, 4) == 0;
        }
        if (!same && bad++ < 5)
            fprintf(stderr, "reference differs from qm_product_lo: amplitude %llu\n",
                    (unsigned long long)g);
    }
    return bad;
}

typedef void (*pkernel)(void *, uint64_t, uint64_t, uint64_t, const double *, double, uint64_t);

struct ctx {
    int sms;
    uint64_t l2;
    void *out;
    double *table;
    unsigned long long *cnt; /* [0] bad, [1] first */
    int failures;
};

template <typename K> static int per_sm(K k)
{
    int per = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, QM_PD_THREADS, 0));
    return per;
}

/* Poison, run once, compare with ref bytewise, then time; one line of the table. */
static void row(ctx &c, const char *name, pkernel k, double scale, const void *ref, size_t bytes,
                double fill, bool check = true)
{
    cudaFuncAttributes at;
    CK(cudaFuncGetAttributes(&at, (const void *)k));
    const unsigned grid = (unsigned)(per_sm(k) * c.sms);
    CK(cudaMemset(c.out, 0xa5, bytes));
    k<<<grid, QM_PD_THREADS>>>(c.out, N, 0, 0, c.table, scale, c.l2);
    CK(cudaGetLastError());
    unsigned long long h[2] = {0, ~0ull};
    CK(cudaMemcpy(c.cnt, h, sizeof h, cudaMemcpyHostToDevice));
    cmp_kernel<<<4 * c.sms, 256>>>((const uint4 *)c.out, (const uint4 *)ref, bytes / 16, c.cnt,
                                   c.cnt + 1);
    CK(cudaMemcpy(h, c.cnt, sizeof h, cudaMemcpyDeviceToHost));
    const double ms =
        med([&] { k<<<grid, QM_PD_THREADS>>>(c.out, N, 0, 0, c.table, scale, c.l2); });
    printf("%-34s %3d %5zu %5u %8.4f %6.1f%%  %s", name, at.numRegs, (size_t)at.localSizeBytes,
           grid, ms, 100.0 * fill / ms, !check ? "- (diagnostic)" : h[0] ? "NO" : "yes");
    if (check && h[0])
        printf(" (%llu of %zu 16-byte units differ, first %llu)", h[0], bytes / 16, h[1]);
    printf("\n");
    c.failures += check && h[0] != 0;
}

/* The reference of one configuration into ref (device), checked against the host. */
static void make_ref(ctx &c, const std::vector<double> &tab, bool c128, double scale, void *ref,
                     host_stats *st)
{
    const size_t bytes = N * (c128 ? 16 : 8);
    CK(cudaMemset(ref, 0xa5, bytes));
    if (c128)
        ref_kernel<true><<<8 * c.sms, 256>>>(ref, N, c.table, scale);
    else
        ref_kernel<false><<<8 * c.sms, 256>>>(ref, N, c.table, scale);
    CK(cudaGetLastError());
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), ref, bytes, cudaMemcpyDeviceToHost));
    const uint64_t bad = host_check(tab, h.data(), c128, scale, st);
    printf("reference %s scale %g: %s against the host (all %llu amplitudes + 512 direct)\n",
           c128 ? "c128" : "c64 ", scale, bad ? "DIFFERS" : "identical", (unsigned long long)N);
    c.failures += bad != 0;
}

#define K2(UNIT, STEP, FOLD, ST, MINB, UNR, PF) v_kernel<2, UNIT, STEP, FOLD, ST, MINB, UNR, PF>
#define K2L(UNIT, STEP, FOLD) v_kernel<2, UNIT, STEP, FOLD, ST_CS, 3, 4, true, true>
#define K2D(STEP, DIAG) v_kernel<2, true, STEP, false, ST_CS, 3, 4, true, false, DIAG>
#define K0(UNIT, STEP, FOLD, ST, MINB, UNR, PF) v_kernel<0, UNIT, STEP, FOLD, ST, MINB, UNR, PF>
#define K2C(UNIT, STEP, FOLD, MINB, PF) \
    v_kernel<2, UNIT, STEP, FOLD, ST_CS, MINB, 4, PF, false, 0, true>
#define K0C(UNIT, STEP, FOLD, MINB, PF) \
    v_kernel<0, UNIT, STEP, FOLD, ST_CS, MINB, 8, PF, false, 0, true>

int main()
{
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    ctx c{};
    c.sms = pr.multiProcessorCount;
    c.l2 = (uint64_t)pr.l2CacheSize;
    printf("device %s, %d SMs, L2 %llu MiB\n", pr.name, c.sms, (unsigned long long)(c.l2 >> 20));

    std::vector<double> tab;
    make_table(tab);
    {
        uint64_t kinds[7] = {0};
        for (uint64_t s = 0; s < S; ++s)
            ++kinds[kind_of(s)];
        printf("table: %llu states of 10 qubits:", (unsigned long long)S);
        for (int i = 0; i < 7; ++i)
            printf(" %s %llu", KIND_NAMES[i], (unsigned long long)kinds[i]);
        printf("\n");
    }
    const size_t b64 = N * 8, b128 = N * 16;
    void *ref_u, *ref_p;
    CK(cudaMalloc(&c.out, b128));
    CK(cudaMalloc(&ref_u, b128));
    CK(cudaMalloc(&ref_p, b128));
    CK(cudaMalloc((void **)&c.table, tab.size() * sizeof(double)));
    CK(cudaMalloc((void **)&c.cnt, 2 * sizeof(unsigned long long)));
    CK(cudaMemcpy(c.table, tab.data(), tab.size() * sizeof(double), cudaMemcpyHostToDevice));

    // ---- complex64 pairs (MODE 2), 512 MiB ----
    host_stats st;
    make_ref(c, tab, false, 1.0, ref_u, nullptr);
    make_ref(c, tab, false, PHASE_SCALE, ref_p, &st);
    printf("signed-zero cases of (1,0)*v: lo: x=-0,y<0: %llu  y=-0,x>=0: %llu; chain starts "
           "(1,0)*f: %llu, %llu\n",
           (unsigned long long)st.lo_re_fix, (unsigned long long)st.lo_im_fix,
           (unsigned long long)st.f_re_fix, (unsigned long long)st.f_im_fix);
    printf("fold guard at scale 2^-5: %llu of %llu states fold; an unguarded fold would change "
           "%llu amplitudes\n",
           (unsigned long long)st.fold_states, (unsigned long long)S,
           (unsigned long long)st.unguarded_fold_diff);
    if (!st.lo_re_fix || !st.lo_im_fix || !st.f_re_fix || !st.f_im_fix) {
        printf("COVERAGE: a signed-zero case of one_mul is not exercised by the table\n");
        ++c.failures;
    }

    const double f64 = med([&] { CK(cudaMemsetAsync(c.out, 1, b64)); });
    printf("\ncomplex64 pairs, 65536 x 2^10 (512 MiB): cudaMemset %.4f ms\n", f64);
    printf("%-34s %3s %5s %5s %8s %7s  %s\n", "variant", "reg", "local", "grid", "ms", "%fill",
           "exact");
    {
        auto t = [&](const char *name, auto k, unsigned grid) {
            const double ms = med([&] { k<<<grid, QM_PD_THREADS>>>((float4 *)c.out, S); });
            printf("%-34s %3s %5s %5u %8.4f %6.1f%%  -\n", name, "", "", grid, ms,
                   100.0 * f64 / ms);
        };
        t("const float4 stcs, r4 grid", const_kernel<float4, ST_CS>, 3 * c.sms);
        t("const float4 stcs, full occupancy", const_kernel<float4, ST_CS>,
          per_sm(const_kernel<float4, ST_CS>) * c.sms);
        t("const float4 st.wb, r4 grid", const_kernel<float4, ST_WB>, 3 * c.sms);
        t("const float4 st.na, r4 grid", const_kernel<float4, ST_NA>, 3 * c.sms);
    }
    const double P = PHASE_SCALE;
    row(c, "r4 unit", r4_kernel<2, true>, 1.0, ref_u, b64, f64);
    row(c, "r4 phase", r4_kernel<2, false>, P, ref_p, b64, f64);
    row(c, "a0 unit (r4 via v_kernel)", K2(true, 0, false, ST_CS, 3, 4, true), 1.0, ref_u, b64,
        f64);
    row(c, "a0 phase ll (r4, late loads)", K2L(false, 0, false), P, ref_p, b64, f64);
    row(c, "a1 unit", K2(true, 1, false, ST_CS, 3, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a1 phase", K2(false, 1, false, ST_CS, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a2 unit", K2(true, 2, false, ST_CS, 3, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a2 phase", K2(false, 2, false, ST_CS, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a3 unit", K2(true, 3, false, ST_CS, 3, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a3 phase", K2(false, 3, false, ST_CS, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a1+b phase", K2(false, 1, true, ST_CS, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a3+b phase", K2(false, 3, true, ST_CS, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a3 unit ll", K2L(true, 3, false), 1.0, ref_u, b64, f64);
    row(c, "a3 phase ll", K2L(false, 3, false), P, ref_p, b64, f64);
    row(c, "a3+b phase ll", K2L(false, 3, true), P, ref_p, b64, f64);
    row(c, "a3 unit st.wb", K2(true, 3, false, ST_WB, 3, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a3 unit st.na", K2(true, 3, false, ST_NA, 3, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a3+b phase st.na", K2(false, 3, true, ST_NA, 3, 4, true), P, ref_p, b64, f64);
    row(c, "a3 unit minb2", K2(true, 3, false, ST_CS, 2, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a3+b phase minb2", K2(false, 3, true, ST_CS, 2, 4, true), P, ref_p, b64, f64);
    row(c, "a3 unit minb4 (spills)", K2(true, 3, false, ST_CS, 4, 4, true), 1.0, ref_u, b64, f64);
    row(c, "a3 unit unr8", K2(true, 3, false, ST_CS, 3, 8, true), 1.0, ref_u, b64, f64);
    row(c, "a3 unit unr16", K2(true, 3, false, ST_CS, 3, 16, true), 1.0, ref_u, b64, f64);
    row(c, "a3+b phase unr8", K2(false, 3, true, ST_CS, 3, 8, true), P, ref_p, b64, f64);
    row(c, "a3 unit nopf", K2(true, 3, false, ST_CS, 3, 4, false), 1.0, ref_u, b64, f64);
    /* diagnostics: where round 4's time goes (not exact by construction) */
    row(c, "diag a0 unit, state 0's factors", K2D(0, 1), 1.0, ref_u, b64, f64, false);
    row(c, "diag a3 unit, state 0's factors", K2D(3, 1), 1.0, ref_u, b64, f64, false);
    row(c, "diag loads + stores, no arithmetic", K2D(0, 2), 1.0, ref_u, b64, f64, false);
    /* coop: the factor table loaded by lanes 0..19 (one 16-byte load each) through shared */
    row(c, "coop a0 unit", K2C(true, 0, false, 3, true), 1.0, ref_u, b64, f64);
    row(c, "coop a0 phase", K2C(false, 0, false, 3, true), P, ref_p, b64, f64);
    row(c, "coop a3 unit", K2C(true, 3, false, 3, true), 1.0, ref_u, b64, f64);
    row(c, "coop a3 phase", K2C(false, 3, false, 3, true), P, ref_p, b64, f64);
    row(c, "coop a3+b phase", K2C(false, 3, true, 3, true), P, ref_p, b64, f64);
    row(c, "coop a0 unit nopf", K2C(true, 0, false, 3, false), 1.0, ref_u, b64, f64);
    row(c, "coop a3 unit nopf", K2C(true, 3, false, 3, false), 1.0, ref_u, b64, f64);
    row(c, "coop a3+b phase nopf", K2C(false, 3, true, 3, false), P, ref_p, b64, f64);
    row(c, "coop a0 unit minb4", K2C(true, 0, false, 4, true), 1.0, ref_u, b64, f64);
    row(c, "coop a3 unit minb4", K2C(true, 3, false, 4, true), 1.0, ref_u, b64, f64);
    row(c, "coop a3+b phase minb4", K2C(false, 3, true, 4, true), P, ref_p, b64, f64);
    row(c, "coop a3 unit minb4 nopf", K2C(true, 3, false, 4, false), 1.0, ref_u, b64, f64);
    row(c, "r4 unit (again: drift check)", r4_kernel<2, true>, 1.0, ref_u, b64, f64);

    // ---- complex128 (MODE 0), 1 GiB ----
    make_ref(c, tab, true, 1.0, ref_u, nullptr);
    make_ref(c, tab, true, PHASE_SCALE, ref_p, nullptr);
    const double f128 = med([&] { CK(cudaMemsetAsync(c.out, 1, b128)); });
    printf("\ncomplex128, 65536 x 2^10 (1 GiB): cudaMemset %.4f ms\n", f128);
    printf("%-34s %3s %5s %5s %8s %7s  %s\n", "variant", "reg", "local", "grid", "ms", "%fill",
           "exact");
    {
        const unsigned grid = 3 * c.sms;
        const double ms = med(
            [&] { const_kernel<double2, ST_CS><<<grid, QM_PD_THREADS>>>((double2 *)c.out, S); });
        printf("%-34s %3s %5s %5u %8.4f %6.1f%%  -\n", "const double2 stcs, r4 grid", "", "", grid,
               ms, 100.0 * f128 / ms);
    }
    row(c, "r4 unit", r4_kernel<0, true>, 1.0, ref_u, b128, f128);
    row(c, "r4 phase", r4_kernel<0, false>, P, ref_p, b128, f128);
    row(c, "a1 unit", K0(true, 1, false, ST_CS, 3, 8, true), 1.0, ref_u, b128, f128);
    row(c, "a1 phase", K0(false, 1, false, ST_CS, 3, 8, true), P, ref_p, b128, f128);
    row(c, "a3 unit", K0(true, 3, false, ST_CS, 3, 8, true), 1.0, ref_u, b128, f128);
    row(c, "a3 phase", K0(false, 3, false, ST_CS, 3, 8, true), P, ref_p, b128, f128);
    row(c, "a1+b phase", K0(false, 1, true, ST_CS, 3, 8, true), P, ref_p, b128, f128);
    row(c, "a3+b phase", K0(false, 3, true, ST_CS, 3, 8, true), P, ref_p, b128, f128);
    row(c, "diag loads + stores, no arithmetic", (v_kernel<0, true, 0, false, ST_CS, 3, 8, true,
        false, 2>), 1.0, ref_u, b128, f128, false);
    row(c, "coop a0 unit", K0C(true, 0, false, 3, true), 1.0, ref_u, b128, f128);
    row(c, "coop a0 phase", K0C(false, 0, false, 3, true), P, ref_p, b128, f128);
    row(c, "coop a3 unit", K0C(true, 3, false, 3, true), 1.0, ref_u, b128, f128);
    row(c, "coop a3+b phase", K0C(false, 3, true, 3, true), P, ref_p, b128, f128);
    row(c, "coop a3+b phase nopf", K0C(false, 3, true, 3, false), P, ref_p, b128, f128);
    row(c, "coop a3 unit minb4", K0C(true, 3, false, 4, true), 1.0, ref_u, b128, f128);
    row(c, "coop a3+b phase minb4", K0C(false, 3, true, 4, true), P, ref_p, b128, f128);
    row(c, "r4 unit (again: drift check)", r4_kernel<0, true>, 1.0, ref_u, b128, f128);

    CK(cudaDeviceSynchronize());
    printf("\n%s: %d failure(s)\n", c.failures ? "FAIL" : "OK", c.failures);
    return c.failures ? 1 : 0;
}

/* The SASS counter used for the table at the top (python3; cubin from
 * nvcc -cubin -arch=sm_90 -O3 --fmad=false -std=c++17 -o pb18.cubin <this file>):
 *
 *   import struct, sys, collections
 *   d = open(sys.argv[1], 'rb').read()
 *   shoff, = struct.unpack_from('<Q', d, 0x28)
 *   shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
 *   sh = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
 *   strtab = sh[shstrndx][4]
 *   for s in sh:
 *       name = d[strtab + s[0]: d.index(b'\0', strtab + s[0])].decode()
 *       if name.startswith('.text.'):
 *           code = d[s[4]: s[4] + s[5]]
 *           ops = collections.Counter(struct.unpack_from('<Q', code, k)[0] & 0x1ff
 *                                     for k in range(0, len(code), 16))
 *           print(name[6:], len(code) // 16, {hex(o): n for o, n in sorted(ops.items())})
 */
