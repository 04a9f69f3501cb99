// session 24 microbenchmark: the 10-qubit IQP batch (65536 states of 55 coefficients, scale 2^-10)
// on round 4's kernel (iqp_fused4_kernel<V, MINB, true>, the library's own template) at several
// launch bounds, against the library's launch (qm_cuda_iqp_fused, round 4) and a cudaMemset of the
// same bytes in the same process. Session 24's Nsight Compute run on an H100 (complex64, order 3f)
// put the kernel at 60% of its issue slots with 23% achieved occupancy (116 registers: 8 blocks of
// 2 warps per SM) and 5.6 cycles per issued instruction: latency, not a pipe, bounds it. A higher
// MINB caps the registers (65536 / (64 MINB)) so that more warps fit, at the price of spills.
// Every variant's bytes are compared with the library's (the same kernel, so they must be equal).
//
// Build (from the repository root):
//   nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/iqpminb \
//     bench/results/2026-12-07-s24-iqp-minb.cu
// Run: /tmp/iqpminb (1.6 GiB of GPU memory, a few seconds). Exit code 1 when bytes differ or a
// CUDA call fails.
#include "cuda_featuremap.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

template <typename V>
int run(const double *dtab, uint64_t B, unsigned nc)
{
    const uint64_t n = B << 10;
    const size_t bytes = n * sizeof(V);
    const double scale = 0x1p-10;
    V *st = nullptr;
    CK(cudaMalloc(&st, bytes));
    const float fill = time_ms([&] { cudaMemset(st, 1, bytes); });
    std::printf("\n%s, %llu x 2^10: fill %.4f ms\n", sizeof(V) == 16 ? "complex128" : "complex64",
                (unsigned long long)B, fill);
    std::vector<unsigned char> ref(bytes), got(bytes);
    auto lib = [&] { qm_cuda_iqp_fused(st, sizeof(V) == 16, n, 0, 10, nc, 0, dtab, scale, 4, nullptr); };
    CK(cudaMemset(st, 0xff, bytes));
    lib();
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ref.data(), st, bytes, cudaMemcpyDeviceToHost));
    const float tl = time_ms(lib);
    std::printf("  %-10s %.4f ms  %5.1f%%\n", "library", tl, 100.0 * fill / tl);
    int bad = 0;
    auto variant = [&](const char *name, auto kernel) {
        int per_sm = 0, sms = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * QM_IQ4_WARPS, 0));
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        const uint64_t tiles = n >> 10;
        const unsigned grid = (unsigned)std::min<uint64_t>((uint64_t)per_sm * sms,
                                                           (tiles + QM_IQ4_WARPS - 1) / QM_IQ4_WARPS);
        auto go = [&] { kernel<<<grid, 32 * QM_IQ4_WARPS>>>(st, tiles, 0, 10, nc, 0, dtab, scale); };
        CK(cudaMemset(st, 0xff, bytes));
        go();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        CK(cudaMemcpy(got.data(), st, bytes, cudaMemcpyDeviceToHost));
        const bool same = std::memcmp(got.data(), ref.data(), bytes) == 0;
        const float t = time_ms(go);
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, kernel));
        std::printf("  %-10s %.4f ms  %5.1f%%  %s  regs %d local %zu smem %zu, %d blocks per SM\n",
                    name, t, 100.0 * fill / t, same ? "= library" : "!= library FAIL", fa.numRegs,
                    fa.localSizeBytes, fa.sharedSizeBytes, per_sm);
        bad |= !same;
    };
    if constexpr (sizeof(V) == 16) {
        variant("minb 6", iqp_fused4_kernel<V, 6, true>);
        variant("minb 7", iqp_fused4_kernel<V, 7, true>);
        variant("minb 8", iqp_fused4_kernel<V, 8, true>);
    } else {
        variant("minb 8", iqp_fused4_kernel<V, 8, true>);
        variant("minb 9", iqp_fused4_kernel<V, 9, true>);
        variant("minb 10", iqp_fused4_kernel<V, 10, true>);
        variant("minb 12", iqp_fused4_kernel<V, 12, true>);
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
    const uint64_t B = 65536;
    const unsigned nc = 55;
    std::vector<double> htab(B * nc);
    std::mt19937_64 rng(24);
    std::uniform_real_distribution<double> u(-M_PI, M_PI);
    for (auto &v : htab)
        v = u(rng);
    double *dtab = nullptr;
    CK(cudaMalloc(&dtab, htab.size() * sizeof(double)));
    CK(cudaMemcpy(dtab, htab.data(), htab.size() * sizeof(double), cudaMemcpyHostToDevice));
    int bad = run<float2>(dtab, B, nc);
    bad |= run<double2>(dtab, B, nc);
    std::printf("\n%s\n", bad ? "FAILED" : "every variant gave the library's bytes");
    return bad;
}
