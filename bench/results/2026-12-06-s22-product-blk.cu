// session 22, prepared for the next device call (not yet run): the 10-qubit batch product with
// its factor tables read in bursts into shared memory, so that the state writes run with no
// global load between them.
//
// Background: round 4 (product_batch10_r4_kernel) reaches 83.5% (complex64) / 87.3% (complex128)
// of a fill on an H100 (session 22 run 2). Session 18's diagnostics: the same kernel with every
// state reading state 0's factors (all loads hitting L1) reached 91.9%, and with the arithmetic
// removed it stayed at 81.9%, so the per-state table loads (320 bytes a state, 20 MiB for 65536
// states, L2-prefetched) are the limit. Session 22 run 4 loaded them two states ahead instead of
// one: no change, so the latency of a load is not it. What is left: each load's DRAM or L2 read in
// the middle of the write stream. These variants separate the two: a block takes a contiguous
// range of states and loads the tables of CH of them at a time with all its threads (one burst of
// CH x 320 bytes), double-buffered (the next chunk's loads issued before the current chunk's
// states are written, stored to shared memory after them); its 8 warps then write the chunk's
// states, each state's arithmetic exactly round 4's (A from qubits 0..4, B from 5..9 through the
// warp's shared B, product_amp3). Bit-checked against round 4 (the library's launcher).
//
// Build (from the repository root):
//   nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/pblk \
//     bench/results/2026-12-06-s22-product-blk.cu
// Run: /tmp/pblk (1.6 GiB of GPU memory, a few seconds). Exit code 1 when a variant's bytes differ
// from round 4's or a CUDA call fails.
#include "cuda_featuremap.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

namespace {

constexpr unsigned TABE = 20; /* double2 entries of a state's table: (qubit, bit) */

/* MODE 0: complex128; MODE 2: complex64 pairs (16-byte aligned state). States [0, S) whole. */
template <int MODE, bool UNIT, int CH, int MINB>
__global__ void __launch_bounds__(QM_PD_THREADS, MINB)
blk_kernel(void *state, uint64_t S, const double *table, double scale)
{
    constexpr unsigned PER = (CH * TABE + QM_PD_THREADS - 1) / QM_PD_THREADS; /* loads a thread */
    __shared__ double2 tab[2][CH * TABE];
    __shared__ double2 bs[QM_PD_THREADS / 32][32];
    const unsigned warp = threadIdx.x >> 5, y = threadIdx.x & 31u;
    /* the block's contiguous states */
    const uint64_t s0 = S * blockIdx.x / gridDim.x, s1 = S * (blockIdx.x + 1) / gridDim.x;
    const double2 *T = (const double2 *)table;
    constexpr int NA = MODE == 2 ? 2 : 1;
    const unsigned a0 = MODE == 2 ? (2 * y) & 31u : y;
    double2 reg[PER];
    auto fetch = [&](uint64_t c0) { /* chunk from state c0: into registers */
#pragma unroll
        for (unsigned k = 0; k < PER; ++k) {
            const uint64_t e = (uint64_t)threadIdx.x + (uint64_t)k * QM_PD_THREADS;
            if (e < (uint64_t)CH * TABE && c0 * TABE + e < s1 * TABE)
                reg[k] = __ldg(T + c0 * TABE + e);
        }
    };
    auto put = [&](unsigned buf) {
#pragma unroll
        for (unsigned k = 0; k < PER; ++k) {
            const unsigned e = threadIdx.x + k * QM_PD_THREADS;
            if (e < CH * TABE)
                tab[buf][e] = reg[k];
        }
    };
    fetch(s0);
    put(0);
    __syncthreads();
    unsigned buf = 0;
    for (uint64_t c0 = s0; c0 < s1; c0 += CH) {
        const uint64_t cn = c0 + CH;
        if (cn < s1)
            fetch(cn); /* in flight while this chunk is written */
        const unsigned nst = (unsigned)(s1 - c0 < (uint64_t)CH ? s1 - c0 : (uint64_t)CH);
        for (unsigned j = warp; j < nst; j += QM_PD_THREADS / 32) {
            const double2 *F = tab[buf] + j * TABE;
            double2 ab[NA + 1];
            batch10_ab<NA>(F, y, a0, ab); /* round 4's */
            double2 *B = bs[warp];
            __syncwarp(); /* B's last reads (the previous state) are done */
            B[y] = ab[NA];
            __syncwarp();
            const uint64_t first = (c0 + j) << QM_PRODUCT_LO_BITS;
            if (MODE == 0) {
#pragma unroll 8
                for (unsigned m = 0; m < 32; ++m) {
                    const double2 b = B[m];
                    double2 lo;
                    qm_cmul(ab[0].x, ab[0].y, b.x, b.y, &lo.x, &lo.y);
                    const double2 a = product_amp3<UNIT, true>(make_double2(1.0, 0.0), lo, scale);
                    __stcs((double2 *)state + first + y + 32 * m, a);
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
                    __stcs((float4 *)((float2 *)state + first + 2 * (y + 32 * m)),
                           make_float4(v[0], v[1], v[2], v[3]));
                }
            }
        }
        if (cn < s1) {
            put(buf ^ 1u); /* its last reads were the previous chunk's, before the barrier below */
            __syncthreads();
            buf ^= 1u;
        }
    }
}

template <typename K>
float time_ms(K launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i)
        launch();
    std::vector<float> t;
    for (int i = 0; i < 21; ++i) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[t.size() / 2];
}

int run(bool c128, double scale, const double *dtab)
{
    const uint64_t S = 65536, n = S << 10;
    const size_t bytes = n * (c128 ? 16 : 8);
    void *st = nullptr;
    CK(cudaMalloc(&st, bytes));
    const float fill = time_ms([&] { cudaMemset(st, 1, bytes); });
    std::printf("\n%s%s, 65536 x 2^10: fill %.4f ms\n", c128 ? "complex128" : "complex64",
                scale == 1.0 ? "" : " phase scale", fill);
    std::vector<unsigned char> ref(bytes), got(bytes);
    auto r4 = [&] { qm_cuda_product_round4(st, c128, n, 0, 10, 0, dtab, scale, nullptr); };
    CK(cudaMemset(st, 0xff, bytes));
    r4();
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ref.data(), st, bytes, cudaMemcpyDeviceToHost));
    const float t4 = time_ms(r4);
    std::printf("  %-14s %.4f ms  %5.1f%%\n", "round4", t4, 100.0 * fill / t4);
    int bad = 0;
    auto variant = [&](const char *name, auto kernel) {
        int per_sm = 0, sms = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, QM_PD_THREADS, 0));
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        const unsigned grid = (unsigned)(per_sm * sms);
        auto go = [&] { kernel<<<grid, QM_PD_THREADS>>>(st, S, dtab, scale); };
        CK(cudaMemset(st, 0xff, bytes));
        go();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        CK(cudaMemcpy(got.data(), st, bytes, cudaMemcpyDeviceToHost));
        const bool same = std::memcmp(got.data(), ref.data(), bytes) == 0;
        const float t = time_ms(go);
        cudaFuncAttributes fa;
        cudaFuncGetAttributes(&fa, kernel);
        std::printf("  %-14s %.4f ms  %5.1f%%  %s  regs %d smem %zu grid %u (%d per SM)\n", name, t,
                    100.0 * fill / t, same ? "= round4" : "!= round4 FAIL", fa.numRegs,
                    fa.sharedSizeBytes, grid, per_sm);
        bad |= !same;
    };
    if (c128) {
        if (scale == 1.0) {
            variant("blk ch16", blk_kernel<0, true, 16, 4>);
            variant("blk ch32", blk_kernel<0, true, 32, 4>);
            variant("blk ch64", blk_kernel<0, true, 64, 3>);
        } else {
            variant("blk ch32", blk_kernel<0, false, 32, 4>);
        }
    } else {
        if (scale == 1.0) {
            variant("blk ch16", blk_kernel<2, true, 16, 4>);
            variant("blk ch32", blk_kernel<2, true, 32, 4>);
            variant("blk ch64", blk_kernel<2, true, 64, 3>);
        } else {
            variant("blk ch32", blk_kernel<2, false, 32, 4>);
        }
    }
    cudaFree(st);
    return bad;
}

} // namespace

int main()
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    std::printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
    const uint64_t S = 65536;
    std::vector<double> table(S * 40);
    for (size_t i = 0; i < table.size(); ++i) /* bench_cuda's table */
        table[i] = std::cos(0.001 * (double)i);
    double *dtab = nullptr;
    CK(cudaMalloc(&dtab, table.size() * sizeof(double)));
    CK(cudaMemcpy(dtab, table.data(), table.size() * sizeof(double), cudaMemcpyHostToDevice));
    int bad = 0;
    for (int c128 = 0; c128 < 2; ++c128) {
        bad |= run(c128 == 1, 1.0, dtab);
        bad |= run(c128 == 1, std::ldexp(1.0, -5), dtab);
    }
    std::printf("\n%s\n", bad ? "FAILED" : "all variants gave round 4's bytes");
    return bad;
}
