// session 24 microbenchmark: one 2^30 complex64 product state (angle: scale 1; phase: 2^-15), the
// library's round 4 (A in registers) and round 5 (lo in registers) launches against a copy of round
// 5's kernel whose stores are streaming (__stcs, evict-first, as the batch kernels store), and a
// cudaMemset of the same bytes, in one process. On an H100 (session 24 run 1) round 5 was slower
// than round 4 for complex64 (91.5% against 95.7% of a fill), on the H200 round 4 reached 81.0%
// (session 23). Every variant's bytes are compared with round 4's.
//
// Build (from the repository root):
//   nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/pc64 \
//     bench/results/2026-12-07-s24-product-c64.cu
// Run: /tmp/pc64 (8 GiB of GPU memory, a few seconds). Exit code 1 when bytes differ or a CUDA
// call fails.
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

/* round 5's kernel (product_states_kernel REG 2, MODE 2), states of more than 10 qubits, with
 * streaming stores: whole tiles only (the range is one whole state here) */
template <bool UNIT>
__global__ void __launch_bounds__(QM_PD_THREADS, 4)
stcs_kernel(void *state, uint64_t n, unsigned qubits, const double *f, double scale)
{
    double2 lo[4];
    __shared__ double2 ab[64];
    __shared__ double2 t1[1u << QM_PRODUCT_LO_BITS];
    const uint64_t tiles = n >> QM_PRODUCT_LO_BITS;
    const uint64_t per = (tiles + gridDim.x - 1) / gridDim.x;
    const uint64_t ta = blockIdx.x * per, tb = ta + per < tiles ? ta + per : tiles;
    const unsigned top = qubits < 2 * QM_PRODUCT_LO_BITS ? qubits : 2 * QM_PRODUCT_LO_BITS;
    const uint64_t vmask = ((uint64_t)1 << (top - QM_PRODUCT_LO_BITS)) - 1;
    if (threadIdx.x < 64)
        ab[threadIdx.x] = product_ab_entry(f, threadIdx.x);
    product_t1_build(t1, f, top, vmask);
    __syncthreads();
#pragma unroll
    for (unsigned u = 0; u < 4; ++u)
        lo[u] = product_lo3<false, false>(ab, 2 * (threadIdx.x + QM_PD_THREADS * (u >> 1)) + (u & 1u));
    uint64_t up_have = UINT64_MAX;
    double ur = 1.0, ui = 0.0;
    for (uint64_t t = ta; t < tb; ++t) {
        const uint64_t first = t << QM_PRODUCT_LO_BITS;
        const double2 h = product_tile_hi(t1, vmask, f, qubits, first, up_have, ur, ui);
#pragma unroll
        for (unsigned u = 0; u < 2; ++u) {
            const double2 a0 = product_amp3<UNIT, false>(h, lo[2 * u], scale);
            const double2 a1 = product_amp3<UNIT, false>(h, lo[2 * u + 1], scale);
            __stcs((float4 *)((float2 *)state + first + 2 * (threadIdx.x + QM_PD_THREADS * u)),
                   make_float4((float)a0.x, (float)a0.y, (float)a1.x, (float)a1.y));
        }
    }
}

template <typename K>
float time_ms(K launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 2; ++i)
        launch();
    std::vector<float> t;
    for (int i = 0; i < 11; ++i) {
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

} // namespace

int main()
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    std::printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
    const unsigned q = 30;
    const uint64_t n = (uint64_t)1 << q;
    const size_t bytes = n * 8;
    std::vector<double> table(4 * q);
    for (size_t i = 0; i < table.size(); ++i) /* bench_cuda's table */
        table[i] = std::cos(0.001 * (double)i);
    double *dtab = nullptr;
    void *st = nullptr;
    CK(cudaMalloc(&dtab, table.size() * sizeof(double)));
    CK(cudaMemcpy(dtab, table.data(), table.size() * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&st, bytes));
    std::vector<unsigned char> ref(bytes / 64), got(bytes / 64); /* the first 1/64 compared */
    int bad = 0;
    const float fill = time_ms([&] { cudaMemset(st, 1, bytes); });
    std::printf("complex64 2^30: fill %.4f ms\n", fill);
    for (double scale : {1.0, std::ldexp(1.0, -15)}) {
        auto r4 = [&] { qm_cuda_product_round4(st, 0, n, 0, q, 0, dtab, scale, nullptr); };
        auto r5 = [&] { qm_cuda_product_round5(st, 0, n, 0, q, 0, dtab, scale, nullptr); };
        auto k = scale == 1.0 ? stcs_kernel<true> : stcs_kernel<false>;
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, QM_PD_THREADS, 0));
        const unsigned grid = (unsigned)(per_sm * p.multiProcessorCount);
        auto r5s = [&] { k<<<grid, QM_PD_THREADS>>>(st, n, q, dtab, scale); };
        CK(cudaMemset(st, 0xff, bytes));
        r4();
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(ref.data(), (char *)st + bytes - ref.size(), ref.size(), cudaMemcpyDeviceToHost));
        const char *names[] = {"round4", "round5", "round5 stcs"};
        for (int v = 0; v < 3; ++v) {
            auto go = [&] { v == 0 ? r4() : v == 1 ? r5() : r5s(); };
            CK(cudaMemset(st, 0xff, bytes));
            go();
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            CK(cudaMemcpy(got.data(), (char *)st + bytes - got.size(), got.size(), cudaMemcpyDeviceToHost));
            const bool same = std::memcmp(got.data(), ref.data(), ref.size()) == 0;
            const float t = time_ms(go);
            std::printf("  scale %-8g %-12s %.4f ms  %5.1f%%  %s\n", scale, names[v], t, 100.0 * fill / t,
                        same ? "= round4" : "!= round4 FAIL");
            bad |= !same;
        }
    }
    cudaFree(st);
    cudaFree(dtab);
    std::printf("%s\n", bad ? "FAILED" : "every variant gave round 4's bytes");
    return bad;
}
