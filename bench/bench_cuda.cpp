// bench_cuda.cpp — the CUDA backend against ceilings measured in the same run (issue 7):
//  - device-to-device copy (bytes read + written) and pinned / pageable host->device copies;
//  - one 2^30-amplitude state from device-resident float64 (and 2^31 from float32 -> complex64):
//    block sums + amplitudes, counted as two reads of the input and one write of the state;
//  - one 2^30-amplitude state from host memory (pinned and pageable), the whole materializer.
// Timing: host clock around synchronized work (each kernel path ends with a device sync).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "cuda_backend.h"
#include "materialize_internal.h"
#include "qm_math.h"
}

namespace {

qm_hal *gpu()
{
    static qm_hal *h = nullptr;
    if (!h) {
        qm_status st;
        if (qm_hal_cuda_open(&h, &st) != QM_OK) {
            std::fprintf(stderr, "bench_cuda: %s\n", st.msg);
            std::exit(1);
        }
    }
    return h;
}

void fill_host(void *p, uint64_t n, bool f64)
{
    for (uint64_t i = 0; i < n; ++i) {
        double v = 1.0 + 1e-3 * (double)(i % 100003) - 1e-2 * (double)(i % 17); /* never all zero */
        if (f64)
            ((double *)p)[i] = v;
        else
            ((float *)p)[i] = (float)v;
    }
}

void BM_CopyD2D(benchmark::State &state)
{
    const size_t bytes = (size_t)state.range(0);
    void *a = nullptr, *b = nullptr;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMemset(a, 1, bytes);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    for (auto _ : state) {
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes * 2);
    cudaFree(a);
    cudaFree(b);
}

void BM_CopyH2D(benchmark::State &state)
{
    const size_t bytes = (size_t)state.range(0);
    const bool pinned = state.range(1) != 0;
    void *h = nullptr, *d = nullptr;
    if (pinned)
        cudaHostAlloc(&h, bytes, cudaHostAllocDefault);
    else
        h = std::malloc(bytes);
    std::memset(h, 1, bytes);
    cudaMalloc(&d, bytes);
    for (auto _ : state) {
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
        cudaDeviceSynchronize();
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    state.SetLabel(pinned ? "pinned" : "pageable");
    cudaFree(d);
    if (pinned)
        cudaFreeHost(h);
    else
        std::free(h);
}

// Device-resident input: block sums (fast kernel) + host combine + amplitudes (vectorized).
void BM_DeviceResident(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const bool f64 = state.range(1) != 0;
    const uint64_t N = (uint64_t)1 << q;
    const qm_dtype in_dt = f64 ? QM_DTYPE_FLOAT64 : QM_DTYPE_FLOAT32;
    const qm_dtype st_dt = f64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    const size_t is = f64 ? 8 : 4, os = f64 ? 16 : 8;
    qm_hal *h = gpu();
    qm_status st;
    qm_hal_buf *in = nullptr, *out = nullptr;
    if (qm_hal_buf_alloc(h, 0, N * is, &in, &st) != QM_OK ||
        qm_hal_buf_alloc(h, 0, N * os, &out, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        return;
    }
    std::vector<char> host(N * is);
    fill_host(host.data(), N, f64);
    qm_hal_copy_h2d(h, in, 0, host.data(), N * is, nullptr, &st);
    const unsigned lb = QM_RED_LOG2_BLOCK;
    const uint64_t nb = N >> lb;
    std::vector<double> sums(nb);
    for (auto _ : state) {
        qm_hal_sumsq_args a{};
        a.state_dtype = st_dt;
        a.g0 = 0;
        a.period = N;
        a.period_valid = N;
        a.log2_block = lb;
        a.n_blocks = nb;
        a.scale = 1.0;
        a.out_sums = sums.data();
        a.input = in;
        a.in_dtype = in_dt;
        if (qm_hal_sumsq_sync(h, &a, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        const double coeff = 1.0 / std::sqrt(qm_tree_combine(sums.data(), nb));
        qm_hal_amp_scale_args w{};
        w.state = out;
        w.state_dtype = st_dt;
        w.n = N;
        w.period = N;
        w.period_valid = N;
        w.n_coeffs = 1;
        w.coeffs = &coeff;
        w.input = in;
        w.in_dtype = in_dt;
        if (qm_hal_amp_scale(h, &w, nullptr, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(N * (2 * is + os)));
    qm_hal_buf_free(h, in);
    qm_hal_buf_free(h, out);
}

// Host input, the whole materializer (streamed through staging: copy, stash, sums, amplitudes).
void BM_HostInput(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const bool pinned = state.range(1) != 0;
    const uint64_t N = (uint64_t)1 << q;
    qm_hal *h = gpu();
    double *x = nullptr;
    if (pinned)
        cudaHostAlloc((void **)&x, N * 8, cudaHostAllocDefault);
    else
        x = (double *)std::malloc(N * 8);
    fill_host(x, N, true);
    qm_shard_spec sh{0, 0, 0, N};
    qm_amp_input in{};
    in.dtype = QM_DTYPE_FLOAT64;
    in.data = x;
    in.n = N;
    for (auto _ : state) {
        qm_state *s = nullptr;
        qm_status st;
        if (qm_materialize_amplitude(h, q, QM_DTYPE_COMPLEX128, &sh, 1, &in, nullptr, &s, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        state.PauseTiming();
        qm_state_destroy(s);
        state.ResumeTiming();
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(N * 8));
    state.SetLabel(pinned ? "pinned input; rate = input bytes / s" : "pageable input; rate = input bytes / s");
    if (pinned)
        cudaFreeHost(x);
    else
        std::free(x);
}

} // namespace

BENCHMARK(BM_CopyD2D)->Arg((int64_t)8 << 30)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_CopyH2D)->Args({(int64_t)1 << 30, 1})->Args({(int64_t)1 << 30, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_DeviceResident)->Args({30, 1})->Args({31, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_HostInput)->Args({30, 1})->Args({28, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK_MAIN();
