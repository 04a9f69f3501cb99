// bench_cuda.cpp — the CUDA backend against ceilings measured in the same run (issue 7):
//  - device-to-device copy (bytes read + written) and pinned / pageable host->device copies;
//  - one 2^30-amplitude state from device-resident float64 (and 2^31 from float32 -> complex64):
//    block sums + amplitudes, counted as two reads of the input and one write of the state;
//  - one 2^30-amplitude state from host memory (pinned and pageable), the whole materializer.
// Timing: host clock around synchronized work (each kernel path ends with a device sync).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "cuda_backend.h"
#include "cuda_featuremap.h"
#include "cuda_kernels.h"
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

// Input values made once per process (filling 8 GiB takes seconds; every repetition reuses them):
// pageable float64 / float32, and page-locked float64.
const void *cached_input(uint64_t n, bool f64, bool pinned)
{
    static void *bufs[3];
    static uint64_t lens[3];
    const int k = pinned ? 2 : f64 ? 0 : 1;
    if (lens[k] < n) {
        if (pinned) {
            if (bufs[k])
                cudaFreeHost(bufs[k]);
            if (cudaHostAlloc(&bufs[k], n * 8, cudaHostAllocPortable) != cudaSuccess)
                return nullptr;
        } else {
            std::free(bufs[k]);
            bufs[k] = std::malloc(n * (f64 ? 8 : 4));
            if (!bufs[k])
                return nullptr;
        }
        fill_host(bufs[k], n, f64 || pinned);
        lens[k] = n;
    }
    return bufs[k];
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

// The write ceiling of the product-state encodings: a plain fill (cudaMemset) of the same bytes.
void BM_WriteFill(benchmark::State &state)
{
    const size_t bytes = (size_t)state.range(0);
    void *a = nullptr;
    cudaMalloc(&a, bytes);
    cudaMemset(a, 0, bytes);
    cudaDeviceSynchronize();
    for (auto _ : state) {
        cudaMemset(a, 1, bytes);
        cudaDeviceSynchronize();
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    cudaFree(a);
}

// ---- issue 16: the feature-map kernels against ceilings of the same bytes, in the same run ------
// Each case times its kernels with CUDA events (the benchmark's time is the kernel time: manual
// time), then, on the same buffer, the ceiling: a cudaMemset of the same bytes (the write
// ceiling) and, for IQP's later passes, a device-to-device copy of the state (one read and one
// write of every byte). Counters: bytes (the state), kernel_ms, fill_ms (and copy_ms), bound_ms
// (the time the passes would take at the ceilings) and pct = 100 * bound_ms / kernel_ms. The
// `kernels` argument picks the generation (cuda_kernels.h): 5 round 5 (what the library runs by
// default for products), 4 round 4 (the default for IQP), 0 round 2 (QM_CUDA_KERNELS_CURRENT, the name from before rounds 3 and 4: not the
// default), 3 round 3 (QM_CUDA_KERNELS=round3's), 2 round 1 (QM_CUDA_KERNELS=round1's), 1 round 0
// (QM_CUDA_KERNELS=legacy's), so one run times them all. The label names the generation.

const char *generation(int kernels)
{
    return kernels == QM_CUDA_KERNELS_LEGACY   ? "legacy"
           : kernels == QM_CUDA_KERNELS_ROUND1 ? "round1"
           : kernels == QM_CUDA_KERNELS_ROUND3 ? "round3"
           : kernels == QM_CUDA_KERNELS_ROUND4 ? "round4"
           : kernels == QM_CUDA_KERNELS_ROUND5 ? "round5"
                                               : "round2";
}

template <typename F>
double median_ms(F f, int reps)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The case's kernel under manual timing; returns the median kernel time in ms (0 on an error).
template <typename F>
double timed_loop(benchmark::State &state, F launch)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> t;
    for (auto _ : state) {
        cudaEventRecord(a);
        const int le = launch();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        if (le != 0 || cudaGetLastError() != cudaSuccess) {
            state.SkipWithError(cudaGetErrorString((cudaError_t)le));
            break;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        state.SetIterationTime(ms * 1e-3);
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (t.empty())
        return 0;
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void report(benchmark::State &state, size_t bytes, double kernel_ms, double bound_ms,
            double fill_ms, double copy_ms, const char *what)
{
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    state.counters["bytes"] = (double)bytes;
    state.counters["kernel_ms"] = kernel_ms;
    state.counters["fill_ms"] = fill_ms;
    if (copy_ms > 0)
        state.counters["copy_ms"] = copy_ms;
    state.counters["bound_ms"] = bound_ms;
    state.counters["pct"] = kernel_ms > 0 ? 100.0 * bound_ms / kernel_ms : 0.0;
    state.SetLabel(what);
}

// angle/phase/basis (the product op): `batch` states of 2^qubits amplitudes from per-qubit
// factors, complex128 (arg 2 = 1) or complex64; the bound is one fill of the state's bytes.
// BM_Product runs with scale 1 (angle, basis), BM_ProductPhase with phase's 2^(-qubits/2).
void product_bench(benchmark::State &state, double scale)
{
    const unsigned q = (unsigned)state.range(0);
    const uint64_t batch = (uint64_t)state.range(1);
    const int c128 = (int)state.range(2), kernels = (int)state.range(3);
    const uint64_t n = batch << q;
    const size_t bytes = (size_t)n * (c128 ? 16 : 8);
    std::vector<double> table((size_t)batch * 4 * q);
    for (size_t i = 0; i < table.size(); ++i)
        table[i] = std::cos(0.001 * (double)i);
    void *st = nullptr, *tb = nullptr;
    if (cudaMalloc(&st, bytes) != cudaSuccess ||
        cudaMalloc(&tb, table.size() * sizeof(double)) != cudaSuccess) {
        state.SkipWithError("cudaMalloc failed");
        cudaFree(st);
        return;
    }
    cudaMemcpy(tb, table.data(), table.size() * sizeof(double), cudaMemcpyHostToDevice);
    auto launch = [&] {
        return qm_cuda_launch_product(st, c128, n, 0, q, 0, (const double *)tb, scale, kernels,
                                      nullptr);
    };
    launch(); /* module load */
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double fill = median_ms([&] { cudaMemset(st, 1, bytes); }, 5);
    char what[96];
    std::snprintf(what, sizeof what, "%s %llu x 2^%u %s%s; bound = 1 fill", generation(kernels),
                  (unsigned long long)batch, q, c128 ? "complex128" : "complex64",
                  scale == 1.0 ? "" : " phase scale");
    report(state, bytes, k, fill, fill, 0, what);
    cudaFree(st);
    cudaFree(tb);
}
void BM_Product(benchmark::State &state) { product_bench(state, 1.0); }
void BM_ProductPhase(benchmark::State &state)
{
    const int q = (int)state.range(0);
    const double half = std::ldexp(1.0, -(q / 2));
    product_bench(state, q % 2 ? half * 0.70710678118654752440 : half);
}

// ---- issue 17 item 2: the sums of squares on the device against a read of the same bytes ------
// op 0: the norm check (state_sumsq: sum of |psi|^2 per block of the written state); op 1: the
// amplitude encoding's input sums over the stash (sumsq: the `local_norm` phase of an encode
// whose input was staged into the state buffer); op 2: the same sums over device-resident input
// (float64 when complex128 is asked, else float32; the bytes are the input's). Blocks as the
// encode cuts them: 2^min(qubits, 14) slots. The buffer holds the byte 0x3f everywhere (finite
// values of every dtype). Ceiling: a plain read of the bytes the op reads (bench_cuda_ceil.cu: 16-byte loads, nothing written), timed
// on the same buffer; pct = 100 * read_ms / kernel_ms. `kernels` as BM_Product's (0 the current
// kernels, 3 round 3).
extern "C" int qm_bench_read_ceiling(const void *x, uint64_t bytes, double *sink, void *stream);

void BM_NormCheck(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const uint64_t batch = (uint64_t)state.range(1);
    const int c128 = (int)state.range(2), kernels = (int)state.range(3), op = (int)state.range(4);
    const uint64_t n = batch << q;
    const size_t bytes = (size_t)n * (op == 2 ? (c128 ? 8 : 4) : (c128 ? 16 : 8));
    const unsigned lb = q < QM_RED_LOG2_BLOCK ? q : QM_RED_LOG2_BLOCK;
    const uint64_t nb = n >> lb;
    void *st = nullptr;
    double *sums = nullptr;
    if (cudaMalloc(&st, bytes) != cudaSuccess ||
        cudaMalloc((void **)&sums, (nb + 1) * sizeof(double)) != cudaSuccess) {
        state.SkipWithError("cudaMalloc failed");
        cudaFree(st);
        return;
    }
    cudaMemset(st, 0x3f, bytes);
    auto launch = [&] {
        if (op == 0)
            return qm_cuda_launch_state_sumsq(st, c128, n, 0, lb, sums, kernels, nullptr);
        return qm_cuda_launch_sumsq(op == 2 ? nullptr : st, c128, 0, (uint64_t)1 << q,
                                    (uint64_t)1 << q, lb, nb, 1.0, sums, op == 2 ? st : nullptr,
                                    c128, 0, kernels, nullptr);
    };
    launch();
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double rd = median_ms([&] { qm_bench_read_ceiling(st, bytes, sums + nb, nullptr); }, 5);
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    state.counters["bytes"] = (double)bytes;
    state.counters["kernel_ms"] = k;
    state.counters["read_ms"] = rd;
    state.counters["pct"] = k > 0 ? 100.0 * rd / k : 0.0;
    char what[128];
    std::snprintf(what, sizeof what, "%s %s %llu x 2^%u %s, blocks of 2^%u; bound = 1 read",
                  generation(kernels),
                  op == 0 ? "state_sumsq" : op == 1 ? "sumsq(stash)" : "sumsq(input)",
                  (unsigned long long)batch, q,
                  op == 2 ? (c128 ? "float64" : "float32") : c128 ? "complex128" : "complex64", lb);
    state.SetLabel(what);
    cudaFree(st);
    cudaFree(sums);
}

// An iqp case on the device (ZZ terms included): `batch` states of 2^qubits amplitudes, the
// coefficient table, and with `copy` a second state buffer for the copy ceiling. The buffers are
// freed by the destructor; ok is false (the benchmark skipped) when an allocation failed.
struct iqp_case {
    unsigned q, nc;
    uint64_t n;
    size_t bytes;
    double scale;
    void *st = nullptr, *tb = nullptr, *cp = nullptr;
    bool ok;
    iqp_case(benchmark::State &state, unsigned qubits, uint64_t batch, int c128, bool copy)
        : q(qubits), nc(qubits + qubits * (qubits - 1) / 2), n(batch << qubits),
          bytes((size_t)(batch << qubits) * (c128 ? 16 : 8)), scale(std::ldexp(1.0, -(int)qubits))
    {
        std::vector<double> table((size_t)batch * nc);
        for (size_t i = 0; i < table.size(); ++i)
            table[i] = std::sin(0.37 * (double)i);
        ok = cudaMalloc(&st, bytes) == cudaSuccess &&
             cudaMalloc(&tb, table.size() * sizeof(double)) == cudaSuccess &&
             (!copy || cudaMalloc(&cp, bytes) == cudaSuccess);
        if (!ok) {
            state.SkipWithError("cudaMalloc failed");
            return;
        }
        cudaMemcpy(tb, table.data(), table.size() * sizeof(double), cudaMemcpyHostToDevice);
    }
    ~iqp_case()
    {
        cudaFree(st);
        cudaFree(tb);
        cudaFree(cp);
    }
    // the iqp op with stages [0, b1) under generation `kernels`
    int iqp(int c128, unsigned b1, int kernels) const
    {
        return qm_cuda_launch_iqp(st, c128, n, 0, q, nc, 0, (const double *)tb, scale, b1, kernels,
                                  nullptr);
    }
    double fill_ms() const { return median_ms([&] { cudaMemset(st, 1, bytes); }, 5); }
    double copy_ms() const
    {
        return median_ms([&] { cudaMemcpyAsync(cp, st, bytes, cudaMemcpyDeviceToDevice); }, 5);
    }
};

// iqp: the iqp op (qubits <= 10: the phase and every stage in one pass; above: that pass for the
// low 10 bits, then the higher stages 10 per pass, round 3: at most 8 per pass). Bound = one fill
// (the first pass writes) + one copy (read + write) per later pass: ceil((qubits - 10) / 10) of
// them, round 3 qm_cuda_wht3_split's count (3 for 30 qubits).
void BM_Iqp(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const uint64_t batch = (uint64_t)state.range(1);
    const int c128 = (int)state.range(2), kernels = (int)state.range(3);
    const unsigned later = q <= 10                            ? 0
                           : qm_cuda_kernels_r3(kernels) == QM_CUDA_KERNELS_ROUND3
                               ? qm_cuda_wht3_split(10, q, 0)
                                                               : (q - 10 + 9) / 10;
    const iqp_case ic(state, q, batch, c128, later > 0);
    if (!ic.ok)
        return;
    auto launch = [&] { return ic.iqp(c128, q, kernels); };
    launch();
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double fill = ic.fill_ms(), copy = later ? ic.copy_ms() : 0;
    char what[128];
    std::snprintf(what, sizeof what, "%s %llu x 2^%u %s; bound = 1 fill + %u copies",
                  generation(kernels), (unsigned long long)batch, q,
                  c128 ? "complex128" : "complex64", later);
    report(state, ic.bytes, k, fill + later * copy, fill, copy, what);
}

// One pass of the iqp op alone, on the BM_Iqp case: pass 0 = the phase and stages 0..9 (the fused
// kernel of the generation; bound one fill of the state), pass p >= 1 = the wht stages of bits
// [10p, min(10p + 10, qubits)) on the state the fused pass left (bound one device copy of it;
// round 3's passes are BM_Wht3Pass's).
void BM_IqpPass(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const uint64_t batch = (uint64_t)state.range(1);
    const int c128 = (int)state.range(2), pass = (int)state.range(3), kernels = (int)state.range(4);
    const unsigned b0 = 10 * (unsigned)pass, b1 = b0 + 10 < q ? b0 + 10 : q;
    if (q < 10 || (pass && b0 >= q)) {
        state.SkipWithError("no such pass");
        return;
    }
    const iqp_case ic(state, q, batch, c128, pass > 0);
    if (!ic.ok)
        return;
    auto launch = [&] {
        return pass ? qm_cuda_launch_wht(ic.st, c128, ic.n, b0, b1, nullptr, 0, kernels, nullptr)
                    : ic.iqp(c128, 10, kernels);
    };
    ic.iqp(c128, 10, kernels);
    launch();
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double fill = ic.fill_ms(), copy = pass ? ic.copy_ms() : 0;
    char what[128];
    std::snprintf(what, sizeof what, "%s %llu x 2^%u %s pass %d (bits %u..%u); bound = 1 %s",
                  generation(kernels), (unsigned long long)batch, q,
                  c128 ? "complex128" : "complex64", pass, b0, b1 - 1, pass ? "copy" : "fill");
    report(state, ic.bytes, k, pass ? copy : fill, fill, copy, what);
}

// Round 3's wht passes (issue 16, item 2): the stages [10, qubits) of one state in
// qm_cuda_wht3_split(10, qubits, w_max) passes on rows of row_bytes (256 or 512) contiguous bytes,
// or, row_bytes 64, round 2's passes (10 stages on 64-byte rows). Args {qubits, complex128, w_max,
// row_bytes}; bound = one copy per pass. Before timing, the same variant runs on a 2^22-slot
// state of random values and must give round 2's bits there (the additions are the same; a
// mismatch skips the case with an error).
// 0: the same bits; 1: a CUDA call failed; 2: the bits differ (or the passes changed nothing).
int wht3_matches_round2(int c128, unsigned w_max, unsigned row_bytes)
{
    const unsigned q = 22;
    const uint64_t n = (uint64_t)1 << q;
    const size_t bytes = (size_t)n * (c128 ? 16 : 8);
    std::vector<unsigned char> h(bytes), a(bytes), b(bytes);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < 2 * n; ++i) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const double v = (double)(r >> 11) * 0x1p-53 * 2.0 - 1.0;
        if (c128)
            std::memcpy(&h[8 * i], &v, 8);
        else {
            const float f = (float)v;
            std::memcpy(&h[4 * i], &f, 4);
        }
    }
    void *x = nullptr, *y = nullptr;
    bool ok = cudaMalloc(&x, bytes) == cudaSuccess && cudaMalloc(&y, bytes) == cudaSuccess &&
              cudaMemcpy(x, h.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(y, h.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
              (row_bytes == 64 ? qm_cuda_wht_passes(x, c128, n, 10, q, nullptr)
                               : qm_cuda_wht_passes3(x, c128, n, 10, q, w_max, row_bytes,
                                                     nullptr)) == 0 &&
              qm_cuda_wht_passes(y, c128, n, 10, q, nullptr) == 0 &&
              cudaMemcpy(a.data(), x, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(b.data(), y, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(x);
    cudaFree(y);
    return !ok ? 1 : a == b && a != h ? 0 : 2;
}

void BM_WhtSplit(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const int c128 = (int)state.range(1);
    const unsigned w_max = (unsigned)state.range(2), row = (unsigned)state.range(3);
    const int check = wht3_matches_round2(c128, w_max, row);
    if (check) {
        state.SkipWithError(check == 1 ? "a CUDA call of the 2^22 bit check failed"
                                       : "the passes differ from round 2's on a 2^22 state");
        return;
    }
    const unsigned passes = row == 64 ? (q - 10 + 9) / 10 : qm_cuda_wht3_split(10, q, w_max);
    const iqp_case ic(state, q, 1, c128, true);
    if (!ic.ok)
        return;
    ic.iqp(c128, 10, QM_CUDA_KERNELS_CURRENT);
    auto launch = [&] {
        return row == 64 ? qm_cuda_wht_passes(ic.st, c128, ic.n, 10, q, nullptr)
                         : qm_cuda_wht_passes3(ic.st, c128, ic.n, 10, q, w_max, row, nullptr);
    };
    launch();
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double fill = ic.fill_ms(), copy = ic.copy_ms();
    char what[160];
    std::snprintf(what, sizeof what, "stages 10..%u of 2^%u %s: %u passes, %s rows%s; bound = %u copies",
                  q - 1, q, c128 ? "complex128" : "complex64", passes,
                  row == 64 ? "64-byte" : row >= 512 ? "512-byte" : "256-byte",
                  row == 64 ? " (round 2)" : "", passes);
    report(state, ic.bytes, k, passes * copy, fill, copy, what);
}

// One round-3 pass alone (BM_IqpPass for round 3): stages [b, b + w) of a 2^qubits state on rows
// of row_bytes. Args {qubits, complex128, b, w, row_bytes}; bound = one copy.
void BM_Wht3Pass(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const int c128 = (int)state.range(1);
    const unsigned b = (unsigned)state.range(2), w = (unsigned)state.range(3);
    const unsigned row = (unsigned)state.range(4);
    if (b < 10 || b + w > q) {
        state.SkipWithError("no such pass");
        return;
    }
    const iqp_case ic(state, q, 1, c128, true);
    if (!ic.ok)
        return;
    ic.iqp(c128, 10, QM_CUDA_KERNELS_CURRENT);
    auto launch = [&] { return qm_cuda_wht_passes3(ic.st, c128, ic.n, b, b + w, w, row, nullptr); };
    launch();
    cudaDeviceSynchronize();
    const double k = timed_loop(state, launch);
    const double fill = ic.fill_ms(), copy = ic.copy_ms();
    char what[128];
    std::snprintf(what, sizeof what, "round3 2^%u %s bits %u..%u, %u-byte rows; bound = 1 copy", q,
                  c128 ? "complex128" : "complex64", b, b + w - 1, row >= 512 ? 512 : 256);
    report(state, ic.bytes, k, copy, fill, copy, what);
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

// The two passes of one device-resident state of N values: block sums of the input (to sums, N /
// 2^14 doubles), and amplitudes with one coefficient.
qm_code sums_pass(qm_hal *h, const qm_hal_buf *in, qm_dtype in_dt, uint64_t N, double *sums,
                  qm_status *st)
{
    qm_hal_sumsq_args a{};
    a.state_dtype = QM_DTYPE_COMPLEX128; /* not read: the values come from the input */
    a.period = a.period_valid = N;
    a.log2_block = QM_RED_LOG2_BLOCK;
    a.n_blocks = N >> QM_RED_LOG2_BLOCK;
    a.scale = 1.0;
    a.out_sums = sums;
    a.input = in;
    a.in_dtype = in_dt;
    return qm_hal_sumsq_sync(h, &a, st);
}

qm_code amp_pass(qm_hal *h, qm_hal_buf *out, qm_dtype st_dt, const qm_hal_buf *in, qm_dtype in_dt,
                 uint64_t N, const double *coeff, qm_status *st)
{
    qm_hal_amp_scale_args w{};
    w.state = out;
    w.state_dtype = st_dt;
    w.n = w.period = w.period_valid = N;
    w.n_coeffs = 1;
    w.coeffs = coeff;
    w.input = in;
    w.in_dtype = in_dt;
    return qm_hal_amp_scale(h, &w, nullptr, st);
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
    qm_hal_copy_h2d(h, in, 0, cached_input(N, f64, false), N * is, nullptr, &st);
    const uint64_t nb = N >> QM_RED_LOG2_BLOCK;
    std::vector<double> sums(nb);
    for (auto _ : state) {
        if (sums_pass(h, in, in_dt, N, sums.data(), &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        const double coeff = 1.0 / std::sqrt(qm_tree_combine(sums.data(), nb));
        if (amp_pass(h, out, st_dt, in, in_dt, N, &coeff, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(N * (2 * is + os)));
    qm_hal_buf_free(h, in);
    qm_hal_buf_free(h, out);
    qm_hal_trim(h); /* raw cudaMalloc in other benchmarks needs the memory */
}

// The two passes of BM_DeviceResident apart: the block sums alone (one read of the input) and the
// amplitudes alone (one read, one write), for float64 -> complex128 and float32 -> complex64, so
// the gap to the ceiling can be placed.
void BM_Pass(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const bool sums_only = state.range(1) != 0, f64 = state.range(2) != 0;
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
    qm_hal_copy_h2d(h, in, 0, cached_input(N, f64, false), N * is, nullptr, &st);
    const uint64_t nb = N >> QM_RED_LOG2_BLOCK;
    std::vector<double> sums(nb);
    const double coeff = 0.5;
    for (auto _ : state) {
        const qm_code rc = sums_only ? sums_pass(h, in, in_dt, N, sums.data(), &st)
                                     : amp_pass(h, out, st_dt, in, in_dt, N, &coeff, &st);
        if (rc != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(N * (sums_only ? is : is + os)));
    state.SetLabel(std::string(f64 ? "float64" : "float32 -> complex64") +
                   (sums_only ? " block sums: 1 read" : " amplitudes: 1 read + 1 write"));
    qm_hal_buf_free(h, in);
    qm_hal_buf_free(h, out);
    qm_hal_trim(h); /* raw cudaMalloc in other benchmarks needs the memory */
}

// Where the host path's time goes besides the copy: allocating (and freeing) a state's buffer of
// `bytes`, and 8 GiB of pinned input copied in 32 MiB chunks on one stream (the ingest's pattern).
void BM_AllocFree(benchmark::State &state)
{
    const uint64_t bytes = (uint64_t)state.range(0);
    const bool kept = state.range(1) != 0; /* else given back after each free: cudaMalloc + cudaFree */
    qm_hal *h = gpu();
    qm_status st;
    for (auto _ : state) {
        qm_hal_buf *b = nullptr;
        if (qm_hal_buf_alloc(h, 0, bytes, &b, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        qm_hal_buf_free(h, b);
        if (!kept)
            qm_hal_trim(h);
    }
    qm_hal_trim(h);
    state.SetLabel(kept ? "qm_hal_buf_alloc + qm_hal_buf_free, buffer kept"
                        : "qm_hal_buf_alloc + qm_hal_buf_free + qm_hal_trim (cudaMalloc + cudaFree)");
}

void BM_CopyH2DChunks(benchmark::State &state)
{
    const uint64_t n = (uint64_t)1 << 30, chunk = (uint64_t)32 << 20;
    const char *x = (const char *)cached_input(n, true, true);
    void *d = nullptr;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (!x || cudaMalloc(&d, n * 8) != cudaSuccess) {
        state.SkipWithError("no memory");
        return;
    }
    for (auto _ : state) {
        for (uint64_t off = 0; off < n * 8; off += chunk)
            cudaMemcpyAsync((char *)d + off, x + off, chunk, cudaMemcpyHostToDevice, s);
        cudaStreamSynchronize(s);
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(n * 8));
    state.SetLabel("8 GiB pinned in 32 MiB chunks");
    cudaFree(d);
    cudaStreamDestroy(s);
}

// Host input, the whole materializer (streamed through the ingest pipe: copies overlapped with
// the stash kernel, then block sums over the stash and amplitudes in place).
void BM_HostInput(benchmark::State &state)
{
    const unsigned q = (unsigned)state.range(0);
    const bool pinned = state.range(1) != 0;
    /* 1: the state's buffer is the one the previous encode freed (kept by the backend, hal.h);
     * 0: given back before each encode, so every encode pays cudaMalloc and cudaFree */
    const bool kept = state.range(2) != 0;
    const uint64_t N = (uint64_t)1 << q;
    qm_hal *h = gpu();
    const double *x = (const double *)cached_input(N, true, pinned);
    if (!x) {
        state.SkipWithError("out of host memory for the input");
        return;
    }
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
        if (!kept)
            qm_hal_trim(h);
        state.ResumeTiming();
    }
    qm_hal_trim(h);
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(N * 8));
    state.SetLabel(std::string(pinned ? "pinned" : "pageable") +
                   (kept ? " input, kept state buffer" : " input, cudaMalloc'd state buffer") +
                   "; rate = input bytes / s");
}

// The fused batch kernel (amp_batch) on device-resident input: n samples of F features into
// states of 2^q slots, each read once and written once; counted as one read of the input and one
// write of the states, against BM_CopyD2D. The input (hundreds of MB) is far beyond L2, so one
// buffer set serves every iteration.
void BM_Batch(benchmark::State &state)
{
    const bool f64 = state.range(0) != 0;
    const uint64_t n = (uint64_t)state.range(1), F = (uint64_t)state.range(2);
    const unsigned q = (unsigned)state.range(3);
    /* calls per synchronisation: 1 = each call on the default stream and waited for (the HAL's
     * blocking path, launch + sync in every figure); 8 = back to back on a stream, then one wait */
    const int per_sync = state.range(4) > 1 ? (int)state.range(4) : 1;
    const uint64_t P = (uint64_t)1 << q;
    const size_t is = f64 ? 8 : 4, os = f64 ? 16 : 8;
    qm_hal *h = gpu();
    qm_status st;
    qm_hal_buf *in = nullptr, *out = nullptr, *sums = nullptr;
    if (qm_hal_buf_alloc(h, 0, n * F * is, &in, &st) != QM_OK ||
        qm_hal_buf_alloc(h, 0, n * P * os, &out, &st) != QM_OK ||
        qm_hal_buf_alloc(h, 0, n * 8, &sums, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        qm_hal_buf_free(h, in);
        qm_hal_buf_free(h, out);
        return;
    }
    std::vector<char> host(n * F * is);
    fill_host(host.data(), n * F, f64);
    qm_hal_amp_batch_args a{};
    a.state = out;
    a.state_dtype = f64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    a.period = P;
    a.period_valid = F;
    a.n_states = n;
    a.input = in;
    a.in_dtype = f64 ? QM_DTYPE_FLOAT64 : QM_DTYPE_FLOAT32;
    a.sums = sums;
    /* upload, then one untimed call (module load) */
    if (qm_hal_copy_h2d(h, in, 0, host.data(), n * F * is, nullptr, &st) != QM_OK ||
        qm_hal_amp_batch(h, &a, nullptr, &st) != QM_OK)
        state.SkipWithError(st.msg);
    cudaDeviceSynchronize();
    qm_hal_stream *s = nullptr;
    if (per_sync > 1 && qm_hal_stream_create(h, 0, &s, &st) != QM_OK)
        state.SkipWithError(st.msg);
    for (auto _ : state) {
        bool ok = true;
        for (int c = 0; c < per_sync && ok; ++c)
            ok = qm_hal_amp_batch(h, &a, s, &st) == QM_OK;
        if (!ok || (s && qm_hal_stream_sync(h, s, &st) != QM_OK)) {
            state.SkipWithError(st.msg);
            break;
        }
        cudaDeviceSynchronize();
    }
    qm_hal_stream_destroy(h, s);
    state.SetBytesProcessed((int64_t)state.iterations() * per_sync *
                            (int64_t)(n * F * is + n * P * os));
    char label[128];
    std::snprintf(label, sizeof label, "%llu x %llu %s -> %u qubits %s, %d call(s) per sync; "
                  "rate = (in + state) / s", (unsigned long long)n, (unsigned long long)F,
                  f64 ? "float64" : "float32", q, f64 ? "complex128" : "complex64", per_sync);
    state.SetLabel(label);
    qm_hal_buf_free(h, in);
    qm_hal_buf_free(h, out);
    qm_hal_buf_free(h, sums);
    qm_hal_trim(h);
}

// G devices, one per GPU (qm_hal_cuda_open_logical); nullptr (the benchmark skipped) when the
// machine has fewer GPUs, unless QM_BENCH_LOGICAL=1 (several logical devices per GPU).
qm_hal *open_devices(benchmark::State &state, int G)
{
    const char *logical = std::getenv("QM_BENCH_LOGICAL");
    if (G > qm_cuda_device_count() && !(logical && std::strcmp(logical, "1") == 0)) {
        state.SkipWithError("fewer GPUs than shards (QM_BENCH_LOGICAL=1 runs them as logical devices)");
        return nullptr;
    }
    qm_hal *h = nullptr;
    qm_status st;
    if (qm_hal_cuda_open_logical(G, &h, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        return nullptr;
    }
    return h;
}

// [0, N) in G equal shards, shard g on device g.
std::vector<qm_shard_spec> equal_shards(uint64_t N, int G)
{
    std::vector<qm_shard_spec> sh((size_t)G);
    for (int g = 0; g < G; ++g)
        sh[(size_t)g] = qm_shard_spec{0, g, N / (uint64_t)G * (uint64_t)g,
                                      N / (uint64_t)G * (uint64_t)(g + 1)};
    return sh;
}

// A 2^range(0) state in range(1) equal shards, one device each (h nullptr: skipped).
struct Sharded {
    unsigned q;
    int G;
    uint64_t N;
    qm_hal *h;
    std::vector<qm_shard_spec> sh;
};
Sharded sharded(benchmark::State &state)
{
    Sharded m{(unsigned)state.range(0), (int)state.range(1), 0, nullptr, {}};
    m.N = (uint64_t)1 << m.q;
    if ((m.h = open_devices(state, m.G)))
        m.sh = equal_shards(m.N, m.G);
    return m;
}

// Scaling (issue 8): one 2^q state from pinned host float64, sharded equally over G GPUs of this
// machine (one logical device per GPU, qm_hal_cuda_open_logical), the whole materializer with
// its state buffers kept between encodes. Reports input bytes/s and, as counters, the median
// phase seconds of materialize (ingest, local_norm, norm_allreduce, encode). G larger than the GPU
// count is skipped, unless QM_BENCH_LOGICAL=1 (several logical devices per GPU: checks the
// harness on a one-GPU machine; no scaling is expected there). Efficiency = rate(G) / (G *
// rate(1)) of the same run.
void BM_Sharded(benchmark::State &state)
{
    const Sharded m = sharded(state);
    if (!m.h)
        return;
    qm_status st;
    const double *x = (const double *)cached_input(m.N, true, true);
    qm_amp_input in{};
    in.dtype = QM_DTYPE_FLOAT64;
    in.data = x;
    in.n = m.N;
    qm_materialize_times t{};
    qm_materialize_opts o{};
    o.times = &t;
    std::vector<double> ph[4];
    for (auto _ : state) {
        qm_state *s = nullptr;
        if (!x || qm_materialize_amplitude(m.h, m.q, QM_DTYPE_COMPLEX128, m.sh.data(), m.G, &in,
                                           &o, &s, &st) != QM_OK) {
            state.SkipWithError(x ? st.msg : "out of pinned host memory");
            break;
        }
        state.PauseTiming();
        qm_state_destroy(s);
        ph[0].push_back(t.ingest);
        ph[1].push_back(t.local_norm);
        ph[2].push_back(t.norm_allreduce);
        ph[3].push_back(t.encode);
        state.ResumeTiming();
    }
    static const char *const names[4] = {"ingest_ms", "local_norm_ms", "norm_allreduce_ms",
                                         "encode_ms"};
    for (int i = 0; i < 4 && !ph[i].empty(); ++i) {
        std::sort(ph[i].begin(), ph[i].end());
        state.counters[names[i]] = 1e3 * ph[i][ph[i].size() / 2];
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(m.N * 8));
    char label[64];
    std::snprintf(label, sizeof label, "%d shard(s) on %d GPU(s); rate = input bytes / s", m.G,
                  m.G < qm_cuda_device_count() ? m.G : qm_cuda_device_count());
    state.SetLabel(label);
    qm_hal_destroy(m.h);
}

// Issue 8 item 5: gather a 2^q complex64 state sharded equally over G GPUs onto device 0
// (qm_state_gather: peer copies where the GPUs have a path), rate = bytes moved (the other
// shards) / s, to set against `qmesh plan --gather` on the machine's dumped scenario. The state
// is made once from computed float32 values (no host copy). Written for the multi-GPU machines;
// not yet run (docs/multigpu.md). G beyond the GPU count is skipped unless QM_BENCH_LOGICAL=1.
qm_code computed_f32(void *, uint64_t first, uint64_t count, void *dst, qm_status *)
{
    for (uint64_t i = 0; i < count; ++i)
        ((float *)dst)[i] = 1.0f + (float)((first + i) % 1000) * 1e-3f;
    return QM_OK;
}

void BM_Gather(benchmark::State &state)
{
    const Sharded m = sharded(state);
    if (!m.h)
        return;
    qm_status st;
    qm_amp_input in{};
    in.dtype = QM_DTYPE_FLOAT32;
    in.n = m.N;
    in.read = computed_f32;
    qm_state *s = nullptr;
    if (qm_materialize_amplitude(m.h, m.q, QM_DTYPE_COMPLEX64, m.sh.data(), m.G, &in, nullptr, &s,
                                 &st) != QM_OK) {
        state.SkipWithError(st.msg);
        qm_hal_destroy(m.h);
        return;
    }
    for (auto _ : state) {
        qm_state *g = nullptr;
        if (qm_state_gather(s, 0, &g, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
        state.PauseTiming();
        qm_state_destroy(g);
        state.ResumeTiming();
    }
    const uint64_t moved = m.N / (uint64_t)m.G * (uint64_t)(m.G - 1) * 8; /* the other shards */
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)moved);
    char label[96];
    std::snprintf(label, sizeof label, "2^%u complex64 from %d device(s) onto device 0; rate = "
                  "bytes from other devices / s", m.q, m.G);
    state.SetLabel(label);
    qm_state_destroy(s);
    qm_hal_destroy(m.h);
}

// The batch kernel's block shapes (kernels/cuda_batch.cu: 0 = the default, 1..5 the sweep),
// launched directly, 8 calls per sync, on the batch workload; the shape's states are compared
// with the default's byte for byte first (a shape that differs is reported as an error).
void BM_BatchShape(benchmark::State &state)
{
    const bool f64 = state.range(0) != 0;
    const int shape = (int)state.range(1);
    const uint64_t n = 65536, F = 1021, P = 1024;
    const size_t is = f64 ? 8 : 4, os = f64 ? 16 : 8;
    void *in = nullptr, *out = nullptr, *ref = nullptr;
    double *sums = nullptr;
    cudaStream_t s = nullptr;
    if (cudaMalloc(&in, n * F * is) != cudaSuccess || cudaMalloc(&out, n * P * os) != cudaSuccess ||
        cudaMalloc(&ref, n * P * os) != cudaSuccess ||
        cudaMalloc((void **)&sums, n * 8) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        state.SkipWithError("cudaMalloc failed");
    } else {
        std::vector<char> host(n * F * is);
        fill_host(host.data(), n * F, f64);
        cudaMemcpy(in, host.data(), n * F * is, cudaMemcpyHostToDevice);
        cudaMemset(out, 0xFF, n * P * os);
        qm_cuda_launch_amp_batch_shape(0, ref, !!f64, P, F, n, in, f64, sums, s);
        qm_cuda_launch_amp_batch_shape(shape, out, !!f64, P, F, n, in, f64, sums, s);
        cudaStreamSynchronize(s);
        std::vector<char> a(n * P * os), b(n * P * os);
        cudaMemcpy(a.data(), ref, n * P * os, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), out, n * P * os, cudaMemcpyDeviceToHost);
        if (cudaGetLastError() != cudaSuccess)
            state.SkipWithError("CUDA error");
        else if (std::memcmp(a.data(), b.data(), a.size()) != 0)
            state.SkipWithError("this shape's states differ from the default's");
    }
    for (auto _ : state) {
        for (int c = 0; c < 8; ++c)
            qm_cuda_launch_amp_batch_shape(shape, out, !!f64, P, F, n, in, f64, sums, s);
        if (cudaStreamSynchronize(s) != cudaSuccess) {
            state.SkipWithError("CUDA error");
            break;
        }
    }
    state.SetBytesProcessed((int64_t)state.iterations() * 8 * (int64_t)(n * F * is + n * P * os));
    char label[96];
    std::snprintf(label, sizeof label, "shape %d, %s, 8 calls per sync; rate = (in + state) / s",
                  shape, f64 ? "float64 -> complex128" : "float32 -> complex64");
    state.SetLabel(label);
    cudaFree(in);
    cudaFree(out);
    cudaFree(ref);
    cudaFree(sums);
    if (s)
        cudaStreamDestroy(s);
}

} // namespace

BENCHMARK(BM_CopyD2D)->Arg((int64_t)8 << 30)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_WriteFill)->Arg((int64_t)16 << 30)->Arg((int64_t)8 << 30)->Arg((int64_t)65536 * 1024 * 16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
// issue 16's targets: {qubits, batch, complex128, kernels: 0 round 2, 5 round 5 (the default:
// burst-loaded 10-qubit batches, lo in registers above), 4 round 4 (its own kernel for 10-qubit
// batches), 3 round 3, 2 round 1, 1 round 0}; BM_ProductPhase: the
// same with phase's scale (rounds 3 and 4 skip the scale's multiplications only when it is 1)
BENCHMARK(BM_Product)->ArgsProduct({{30}, {1}, {1, 0}, {0, 5, 4, 3, 2, 1}})->ArgsProduct({{10}, {65536}, {1, 0}, {0, 5, 4, 3, 2, 1}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);
BENCHMARK(BM_ProductPhase)->ArgsProduct({{30}, {1}, {1, 0}, {0, 5, 4, 3}})->ArgsProduct({{10}, {65536}, {1, 0}, {0, 5, 4, 3}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(0.5);
// issue 17 item 2: {qubits, batch, complex128, kernels: 0 current, 3 round 3, op: 0 state_sumsq
// (the norm check), 1 sumsq over the stash (an encode's local_norm), 2 sumsq over device input
// (float64 for complex128 = 1, float32 for 0)}
BENCHMARK(BM_NormCheck)->ArgsProduct({{28, 30}, {1}, {1, 0}, {0, 3}, {0, 1}})->ArgsProduct({{10}, {65536}, {1, 0}, {0, 3}, {0, 1}})->ArgsProduct({{28}, {1}, {1, 0}, {0, 3}, {2}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(0.5);
BENCHMARK(BM_Iqp)->ArgsProduct({{30}, {1}, {1, 0}, {0, 4, 3, 2, 1}})->ArgsProduct({{10}, {65536}, {1, 0}, {0, 4, 3, 2, 1}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);
// where IQP's time goes: {qubits, batch, complex128, pass, kernels}; pass 0 the fused phase +
// stages 0..9 (bound: 1 fill; rounds 2, 4, 3 and 1), pass p >= 1 the wht pass of bits [10p, 10p + 10)
// (bound: 1 copy; the same kernel in rounds 1 and 2)
BENCHMARK(BM_IqpPass)->ArgsProduct({{30}, {1}, {1, 0}, {0}, {0, 4, 3, 2}})->ArgsProduct({{30}, {1}, {1, 0}, {1, 2}, {0}})->ArgsProduct({{10}, {65536}, {1, 0}, {0}, {0, 4, 3, 2}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);
// round 3's wht passes against round 2's (issue 16 item 2): {qubits, complex128, w_max, row_bytes};
// row_bytes 64 = round 2 (2 passes of 10); w_max 7 = 3 passes (7, 7, 6) at 256- and 512-byte rows
BENCHMARK(BM_WhtSplit)->ArgsProduct({{30}, {1, 0}, {10}, {64}})->ArgsProduct({{30}, {1, 0}, {7}, {256, 512}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);
// round 3's passes one at a time: {qubits, complex128, b, w, row_bytes}
BENCHMARK(BM_Wht3Pass)->ArgsProduct({{30}, {1, 0}, {10, 17}, {7}, {256, 512}})->ArgsProduct({{30}, {1, 0}, {24}, {6}, {256, 512}})->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(0.5);
BENCHMARK(BM_CopyH2D)->Args({(int64_t)1 << 30, 1})->Args({(int64_t)1 << 30, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_DeviceResident)->Args({30, 1})->Args({31, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Pass)->Args({30, 1, 1})->Args({30, 0, 1})->Args({31, 1, 0})->Args({31, 0, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_AllocFree)->Args({(int64_t)16 << 30, 0})->Args({(int64_t)16 << 30, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_CopyH2DChunks)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_HostInput)->Args({30, 1, 1})->Args({30, 1, 0})->Args({30, 0, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Batch)->Args({1, 65536, 1021, 10, 1})->Args({0, 65536, 1021, 10, 1})->Args({1, 65536, 1021, 10, 8})->Args({0, 65536, 1021, 10, 8})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_BatchShape)->ArgsProduct({{1, 0}, {1, 2, 3, 4, 5}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_Sharded)->ArgsProduct({{30}, {1, 2, 4, 8}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Gather)->ArgsProduct({{32}, {2, 4, 8}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0)->Repetitions(1); // the 32 GiB state is made per run
BENCHMARK_MAIN();
