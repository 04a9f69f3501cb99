// bench_read.cpp — file -> device at the limit (issue 17 item 1): a float64 .npy in the page cache
// to a normalized state, against two ceilings measured in the same run by this binary:
//   BM_ReadCeiling   the parallel page-cache read rate of the file: T threads pread blocks of
//                    8 MiB (QM_NPY_BLOCK_BYTES) into page-locked host memory (each thread its own
//                    buffer), nothing else; the best thread count is the ceiling;
//   BM_ReaderChunks  the reader alone (qm_npy_read_range, T threads), the file in 32 MiB chunks
//                    into one page-locked buffer, as ingest reads it (not a ceiling: a diagnosis);
//   BM_H2DCeiling    page-locked host -> device copies of 32 MiB (the staging half) on one stream;
//                    on the simulator this is a memcpy;
//   BM_FileToState   the pipeline's ingest + norm + encode of the file (qm_input_open, then
//                    qm_materialize_amplitude over every device of the backend, the reader's
//                    threads as QM_READ_THREADS says), bytes = the file's data bytes; its rate /
//                    min(read ceiling, H2D ceiling) is printed after the runs;
//   BM_FileToStatePrepared  the one-shot encode as `qmesh encode --backend cuda` runs it: the host
//                    memory of its page-locked buffers made ready before it (not timed; the CLI
//                    does this while the CUDA context is created);
//   BM_FileToStateKept  the same with one encode cache kept across the encodes (reuse.h), as a C
//                    API context or a Python process has it: ring, staging and state buffers made
//                    once (the one-shot BM_FileToState page-locks its ring on every encode);
//   BM_FileToStateContext  the first encode of a public C API context, as a program runs it:
//                    qm_context_create and qm_context_open (not timed: the backend's start-up,
//                    during which a CUDA context makes its staging memory ready), then
//                    qm_context_encode_file (timed), on the scenario QM_BENCH_SCENARIO (default
//                    the built-in one) with the backend QM_BENCH_BACKEND;
//   BM_MemToState    the same pipeline from the values already in page-locked host memory (no
//                    read): what file -> state would reach if reading were free.
// Two files: one state of 2^QM_BENCH_READ_LOG2 float64 values (default 28: 2 GiB) and a batch of
// QM_BENCH_READ_ROWS x 1021 float64 (default 65536 rows: 535 MB), 10 qubits each. The files are
// written once to QM_BENCH_READ_DIR (default /tmp) and read once before timing, so they are in the
// page cache (the machine needs the file, the state and the file's page cache in memory).
// Backend: QM_BENCH_BACKEND=sim (default: QM_BENCH_DEVICES simulated devices, default 1) or cuda
// (QM_BENCH_DEVICES GPUs, default 1).
// Run: build-bench/bench/bench_read --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include "backend.h"
#include "ingest.h"
#include "io.h"
#include "materialize_internal.h"
#include "pipeline.h"
#include "qmesh.h"
#include "reuse.h"
#include "sim.h"
}

// A run that failed or was skipped: Google Benchmark 1.7 (Debian 12) names it error_occurred,
// 1.8 and later skipped; the overloads pick whichever member this version has.
template <typename R> auto run_failed(const R &r, int) -> decltype(r.error_occurred, bool())
{
    return r.error_occurred;
}
template <typename R> auto run_failed(const R &r, long) -> decltype(r.skipped, bool())
{
    return r.skipped != 0;
}

namespace {

uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

qm_hal *backend()
{
    static qm_hal *h = nullptr;
    if (h)
        return h;
    const char *b = std::getenv("QM_BENCH_BACKEND");
    const int n = (int)env_u64("QM_BENCH_DEVICES", 1);
    qm_status st;
    qm_code rc;
    if (b && std::strcmp(b, "cuda") == 0) {
        qm_backend_desc d{};
        d.kind = QM_BACKEND_CUDA;
        d.cuda_devices = n;
        rc = qm_backend_open(&d, &h, &st);
    } else {
        static char ids[64][16];
        std::vector<qm_sim_device_desc> dd((size_t)n);
        for (int i = 0; i < n; ++i) {
            std::snprintf(ids[i], sizeof ids[i], "sim.g%d", i);
            dd[(size_t)i] = qm_sim_device_desc{ids[i], "sim", (uint64_t)64 << 30, 0, 3.35e12, 53e9, 0};
        }
        qm_sim_desc desc{n, dd.data(), 0, nullptr, QM_SIM_MATERIALIZED, QM_SIM_POISON_ENV};
        rc = qm_hal_sim_create(&desc, &h, &st);
    }
    if (rc != QM_OK) {
        std::fprintf(stderr, "bench_read: %s\n", st.msg);
        std::exit(1);
    }
    return h;
}

// A float64 .npy of rows x cols (rows 0: 1-D) with values that are never all zero in a row;
// written once, then read once so that it is in the page cache. Returns its path.
std::string make_file(const char *name, uint64_t rows, uint64_t cols)
{
    const char *dir = std::getenv("QM_BENCH_READ_DIR");
    std::string path = std::string(dir && *dir ? dir : "/tmp") + "/" + name;
    const uint64_t n = (rows ? rows : 1) * cols;
    struct stat sb;
    char dict[128];
    if (rows)
        std::snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (%llu, %llu), }",
                      (unsigned long long)rows, (unsigned long long)cols);
    else
        std::snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (%llu,), }",
                      (unsigned long long)cols);
    std::string hdr(dict);
    hdr.append(118 - 1 - hdr.size(), ' ');
    hdr += '\n';
    if (stat(path.c_str(), &sb) != 0 || (uint64_t)sb.st_size != 128 + n * 8) {
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f) {
            std::fprintf(stderr, "bench_read: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
            std::exit(1);
        }
        std::fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, f);
        std::fwrite(hdr.data(), 1, hdr.size(), f);
        std::vector<double> blk(1 << 20);
        for (uint64_t at = 0; at < n; at += blk.size()) {
            const uint64_t k = std::min<uint64_t>(blk.size(), n - at);
            for (uint64_t i = 0; i < k; ++i)
                blk[i] = 1.0 + 1e-3 * (double)((at + i) % 100003) - 1e-2 * (double)((at + i) % 17);
            std::fwrite(blk.data(), 8, k, f);
        }
        std::fclose(f);
    }
    // into the page cache
    std::vector<char> buf((size_t)8 << 20);
    const int fd = open(path.c_str(), O_RDONLY);
    while (fd >= 0 && read(fd, buf.data(), buf.size()) > 0) {
    }
    if (fd >= 0)
        close(fd);
    return path;
}

const std::string &big_file()
{
    static std::string p = make_file("qm_bench_read_state.npy", 0,
                                     (uint64_t)1 << env_u64("QM_BENCH_READ_LOG2", 28));
    return p;
}

const std::string &batch_file()
{
    static std::string p = make_file("qm_bench_read_batch.npy", env_u64("QM_BENCH_READ_ROWS", 65536), 1021);
    return p;
}

double g_read_ceiling = 0, g_h2d_ceiling = 0; // bytes per second, the best seen

// T threads pread the file's data in 8 MiB blocks (thread t takes blocks t, t + T, ...) into
// their own page-locked buffer.
void BM_ReadCeiling(benchmark::State &state)
{
    const int T = (int)state.range(0);
    const std::string &path = big_file();
    qm_hal *h = backend();
    const uint64_t blk = QM_NPY_BLOCK_BYTES;
    std::vector<void *> bufs((size_t)T, nullptr);
    qm_status st;
    for (int t = 0; t < T; ++t)
        if (qm_hal_host_alloc(h, blk, &bufs[(size_t)t], &st) != QM_OK) {
            state.SkipWithError(st.msg);
            return;
        }
    const int fd = open(path.c_str(), O_RDONLY);
    struct stat sb;
    fstat(fd, &sb);
    const uint64_t size = (uint64_t)sb.st_size - 128, nb = (size + blk - 1) / blk;
    std::atomic<bool> bad{false};
    for (auto _ : state) {
        std::vector<std::thread> th;
        for (int t = 0; t < T; ++t)
            th.emplace_back([&, t] {
                for (uint64_t b = (uint64_t)t; b < nb; b += (uint64_t)T) {
                    const uint64_t n = std::min(blk, size - b * blk);
                    if (pread(fd, bufs[(size_t)t], n, (off_t)(128 + b * blk)) != (ssize_t)n)
                        bad = true;
                }
            });
        for (auto &x : th)
            x.join();
    }
    close(fd);
    for (void *p : bufs)
        qm_hal_host_free(h, p);
    if (bad)
        state.SkipWithError("short read");
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)size);
}

// page-locked host -> device copies of 32 MiB, 32 per iteration (1 GiB), on one stream
void BM_H2DCeiling(benchmark::State &state)
{
    qm_hal *h = backend();
    const uint64_t half = (uint64_t)32 << 20;
    void *host = nullptr;
    qm_hal_buf *dev = nullptr;
    qm_hal_stream *s = nullptr;
    qm_status st;
    if (qm_hal_host_alloc(h, half, &host, &st) != QM_OK || qm_hal_buf_alloc(h, 0, 2 * half, &dev, &st) != QM_OK ||
        qm_hal_stream_create(h, 0, &s, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        return;
    }
    std::memset(host, 1, half);
    for (auto _ : state) {
        for (int i = 0; i < 32; ++i)
            qm_hal_copy_h2d(h, dev, (uint64_t)(i & 1) * half, host, half, s, &st);
        qm_hal_stream_sync(h, s, &st);
    }
    qm_hal_stream_destroy(h, s);
    qm_hal_buf_free(h, dev);
    qm_hal_host_free(h, host);
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(32 * half));
}

// The reader alone: the file in 32 MiB chunks (a staging half) through qm_npy_read_range with
// range(0) threads into one page-locked buffer, as ingest reads it.
void BM_ReaderChunks(benchmark::State &state)
{
    qm_hal *h = backend();
    const uint64_t half = (uint64_t)32 << 20;
    qm_npy_reader *r = nullptr;
    void *host = nullptr;
    qm_status st;
    if (qm_npy_open(big_file().c_str(), &r, &st) != QM_OK || qm_hal_host_alloc(h, half, &host, &st) != QM_OK ||
        qm_npy_reader_set_threads(r, (int)state.range(0), &st) != QM_OK) {
        state.SkipWithError(st.msg);
        qm_npy_close(r);
        return;
    }
    const uint64_t n = qm_npy_reader_info(r)->n_elems, c = half / 8;
    bool ok = true;
    for (auto _ : state)
        for (uint64_t at = 0; ok && at < n; at += c)
            ok = qm_npy_read_range(r, at, std::min(c, n - at), host, &st) == QM_OK;
    if (!ok)
        state.SkipWithError(st.msg);
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(n * 8));
    qm_hal_host_free(h, host);
    qm_npy_close(r);
}

// the whole file -> normalized state(s): ingest + norm + encode, the file read by the reader; with
// `from_memory`, the file's values first loaded into page-locked host memory (not timed) and
// encoded from there: the same pipeline without the read, to show what the read costs
// With `keep`, the encodes share one encode cache (reuse.h), as the encodes of one C API context or
// one Python process do: the page-locked ring, the device staging and the state buffers are made by
// the warm-up encode and used again by every timed one. Without it each encode makes its own, as a
// one-shot `qmesh encode` does (the ring's page-locking is then on every encode's critical path).
// With `prepare`, before each encode (not timed) the host memory of its page-locked buffers is made
// ready as `qmesh encode --backend cuda` does while the CUDA context is created
// (qm_backend_host_prepare: the ring, the sums; the encode's own start-up is not part of this
// benchmark either), and the reader is prepared as `qmesh encode` prepares it when its plan finds
// the file in the page cache (qm_npy_reader_prepare: threads started, no read-ahead advice).
void file_to_state(benchmark::State &state, const std::string &path, unsigned q, bool from_memory = false,
                   bool keep = false, bool prepare = false)
{
    qm_hal *h = backend();
    const int D = qm_hal_device_count(h);
    qm_input_file f;
    qm_status st;
    if (qm_input_open(path.c_str(), nullptr, nullptr, &f, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        return;
    }
    const uint64_t B = f.in.batch ? f.in.batch : 1, N = (uint64_t)1 << q, total = B * N;
    std::vector<qm_shard_spec> sh((size_t)D);
    for (int d = 0; d < D; ++d) // whole states per device when a batch
        sh[(size_t)d] = qm_shard_spec{0, d, B > 1 ? B / D * d * N : total / D * d,
                                      d == D - 1 ? total : (B > 1 ? B / D * (d + 1) * N : total / D * (d + 1))};
    qm_amp_input in = f.in;
    if (B == 1)
        in.batch = 0;
    if (prepare) // the file was read once before the benchmarks: it is in the page cache
        qm_npy_reader_prepare(f.npy, true);
    void *mem = nullptr;
    if (from_memory) {
        const uint64_t bytes = qm_npy_reader_info(f.npy)->data_bytes;
        if (qm_hal_host_alloc(h, bytes, &mem, &st) != QM_OK ||
            qm_npy_read_range(f.npy, 0, qm_npy_reader_info(f.npy)->n_elems, mem, &st) != QM_OK) {
            state.SkipWithError(st.msg);
            qm_hal_host_free(h, mem);
            qm_input_close(&f);
            return;
        }
        in.data = mem;
        in.read = nullptr;
        in.read_ctx = nullptr;
        in.read_submit = nullptr;
        in.read_wait = nullptr;
    }
    qm_materialize_times tm{}, sum{};
    qm_materialize_opts opts{};
    opts.times = &tm;
    qm_reuse *reuse = nullptr;
    if (keep && qm_reuse_create(h, &reuse, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        qm_hal_host_free(h, mem);
        qm_input_close(&f);
        return;
    }
    opts.reuse = reuse;
    auto once = [&]() {
        qm_state *s = nullptr;
        const qm_code rc = qm_materialize_amplitude(h, q, QM_DTYPE_COMPLEX128, sh.data(), D, &in, &opts, &s, &st);
        sum.ingest += tm.ingest, sum.local_norm += tm.local_norm, sum.encode += tm.encode;
        qm_state_destroy(s);
        return rc == QM_OK;
    };
    bool ok = once(); // warm-up: fresh device memory, the reader's first pages
    sum = qm_materialize_times{};
    const uint64_t ready[2] = {qm_ingest_ring_bytes_max(), 8 * B * std::max<uint64_t>(1, N >> QM_HAL_RED_LOG2_BLOCK)};
    const char *kind = std::getenv("QM_BENCH_BACKEND");
    const qm_backend_kind bk = kind && std::strcmp(kind, "cuda") == 0 ? QM_BACKEND_CUDA : QM_BACKEND_SIM;
    for (auto _ : state) {
        if (!ok)
            break;
        if (prepare) {
            state.PauseTiming();
            qm_backend_host_prepare(bk, ready, 2);
            state.ResumeTiming();
        }
        ok = once();
        if (prepare)
            qm_backend_host_release();
    }
    if (!ok)
        state.SkipWithError(st.msg);
    const qm_npy_info *info = qm_npy_reader_info(f.npy);
    const double bytes = (double)(info ? info->data_bytes : 0);
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    state.counters["read_threads"] = qm_npy_reader_threads(f.npy);
    const double it = (double)std::max<int64_t>(1, (int64_t)state.iterations());
    state.counters["ingest_ms"] = 1e3 * sum.ingest / it; // the phases of one run, as materialize times them
    state.counters["norm_ms"] = 1e3 * sum.local_norm / it;
    state.counters["encode_ms"] = 1e3 * sum.encode / it;
    qm_reuse_destroy(reuse);
    qm_hal_host_free(h, mem);
    qm_input_close(&f);
}

// A new context per iteration: create and open it (not timed), encode the file (timed), destroy
// the state and the context (not timed).
void context_first(benchmark::State &state, const std::string &path, unsigned q)
{
    const char *kind = std::getenv("QM_BENCH_BACKEND");
    const qm_backend_kind bk = kind && std::strcmp(kind, "cuda") == 0 ? QM_BACKEND_CUDA : QM_BACKEND_SIM;
    const char *scen = std::getenv("QM_BENCH_SCENARIO");
    qm_scenario *sc = nullptr;
    qm_status st;
    uint64_t rows = 0, features = 0;
    if (qm_scenario_open(scen && *scen ? scen : nullptr, &sc, &st) != QM_OK ||
        qm_input_file_shape(path.c_str(), &rows, &features, nullptr, nullptr, &st) != QM_OK) {
        state.SkipWithError(st.msg);
        qm_scenario_destroy(sc);
        return;
    }
    qm_request r;
    qm_request_init(&r);
    r.qubits = q;
    r.dtype = QM_DTYPE_COMPLEX128;
    r.batch = rows;
    r.features = features;
    bool ok = true;
    for (auto _ : state) {
        state.PauseTiming();
        qm_context *ctx = nullptr;
        qm_state *s = nullptr;
        ok = qm_context_create(sc, &r, &ctx, &st) == QM_OK && qm_context_open(ctx, bk, &st) == QM_OK;
        state.ResumeTiming();
        ok = ok && qm_context_encode_file(ctx, path.c_str(), &s, &st) == QM_OK;
        state.PauseTiming();
        qm_state_destroy(s);
        qm_context_destroy(ctx);
        state.ResumeTiming();
        if (!ok)
            break;
    }
    if (!ok)
        state.SkipWithError(st.msg);
    struct stat sb;
    const double bytes = stat(path.c_str(), &sb) == 0 ? (double)sb.st_size - 128 : 0; // the .npy header
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
    qm_scenario_destroy(sc);
}

void BM_FileToStateContext(benchmark::State &state)
{
    context_first(state, big_file(), (unsigned)env_u64("QM_BENCH_READ_LOG2", 28));
}

void BM_FileToStateBatchContext(benchmark::State &state)
{
    context_first(state, batch_file(), 10);
}

void BM_FileToState(benchmark::State &state)
{
    file_to_state(state, big_file(), (unsigned)env_u64("QM_BENCH_READ_LOG2", 28));
}

void BM_FileToStateBatch(benchmark::State &state)
{
    file_to_state(state, batch_file(), 10);
}

void BM_FileToStatePrepared(benchmark::State &state)
{
    file_to_state(state, big_file(), (unsigned)env_u64("QM_BENCH_READ_LOG2", 28), false, false, true);
}

void BM_FileToStateBatchPrepared(benchmark::State &state)
{
    file_to_state(state, batch_file(), 10, false, false, true);
}

void BM_FileToStateKept(benchmark::State &state)
{
    file_to_state(state, big_file(), (unsigned)env_u64("QM_BENCH_READ_LOG2", 28), false, true);
}

void BM_FileToStateBatchKept(benchmark::State &state)
{
    file_to_state(state, batch_file(), 10, false, true);
}

void BM_MemToState(benchmark::State &state)
{
    file_to_state(state, big_file(), (unsigned)env_u64("QM_BENCH_READ_LOG2", 28), true);
}

void BM_MemToStateBatch(benchmark::State &state)
{
    file_to_state(state, batch_file(), 10, true);
}

// Rates and the ratio, printed after the runs from the reporter's numbers.
class RatioReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run> &runs) override
    {
        for (const Run &r : runs) {
            // single runs, or with repetitions the median (what --benchmark_report_aggregates_only
            // leaves: the reporter then sees no single run)
            if (run_failed(r, 0) || r.iterations == 0 ||
                (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median"))
                continue;
            auto it = r.counters.find("bytes_per_second");
            if (it == r.counters.end())
                continue;
            const double rate = it->second.value;
            const std::string name = r.benchmark_name();
            if (name.rfind("BM_ReadCeiling", 0) == 0)
                g_read_ceiling = std::max(g_read_ceiling, rate);
            else if (name.rfind("BM_H2DCeiling", 0) == 0)
                g_h2d_ceiling = std::max(g_h2d_ceiling, rate);
            else if (name.rfind("BM_FileToState", 0) == 0 || name.rfind("BM_MemToState", 0) == 0)
                results.push_back({name, rate});
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override
    {
        ConsoleReporter::Finalize();
        const double ceil = std::min(g_read_ceiling, g_h2d_ceiling);
        std::printf("\nceilings: page-cache read %.2f GB/s (best thread count), H2D %.2f GB/s; "
                    "min %.2f GB/s\n", g_read_ceiling / 1e9, g_h2d_ceiling / 1e9, ceil / 1e9);
        for (const auto &x : results)
            std::printf("%-40s %.2f GB/s = %.1f%% of min(ceilings)\n", x.first.c_str(), x.second / 1e9,
                        ceil > 0 ? 100.0 * x.second / ceil : 0.0);
    }
    std::vector<std::pair<std::string, double>> results;
};

} // namespace

BENCHMARK(BM_ReadCeiling)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_ReaderChunks)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_H2DCeiling)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_FileToState)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateBatch)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStatePrepared)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateBatchPrepared)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateKept)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateBatchKept)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateContext)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_FileToStateBatchContext)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_MemToState)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_MemToStateBatch)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    RatioReporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    return 0;
}
