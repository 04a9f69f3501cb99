// bench_output.cpp — qmesh's output path against a plain parallel pwrite writer on the same file
// system, in the same run (issue 17 item 3: the output at >= 80% of the plain writer's rate).
//
// BM_PlainPwrite (the ceiling): a host buffer of QM_BENCH_OUTPUT_BYTES written to a new file by 4
// threads, each a contiguous quarter in 2 MiB pwrites at their offsets, then fsync and close (the unlink
// after it is not timed);
// BM_PlainPwriteReserved the same after fallocate of the whole size (as qmesh's writer does).
// BM_QmeshOut: `qmesh encode --out` of a float64 .npy that gives a complex128 state of the same
// bytes (2^k amplitudes, one state), through qm_encode_run; the time counted is the output phase
// as the run measures it (seconds.check_and_output minus seconds.check: the read-back through the
// page-locked staging, the writer threads' pwrites, fsync and the rename), the input and the
// encode not counted; the file is removed after each run (not timed). Both report bytes per second of the same byte count.
// Environment: QM_BENCH_DIR (default "."): where both write (the file system under test);
// QM_BENCH_OUTPUT_BYTES (default 256 MiB, a power of two, at least 1 MiB); QM_BENCH_BACKEND=cuda:
// the qmesh path on the CUDA backend (its device-to-host copies then overlap the writes).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" {
#include "encode.h"
}

namespace {

std::string dir() { const char *d = std::getenv("QM_BENCH_DIR"); return d && *d ? d : "."; }

uint64_t out_bytes()
{
    const char *e = std::getenv("QM_BENCH_OUTPUT_BYTES");
    const uint64_t b = e && *e ? std::strtoull(e, nullptr, 10) : (uint64_t)256 << 20;
    return b < ((uint64_t)1 << 20) ? (uint64_t)1 << 20 : b;
}

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// reserve: fallocate the file's size first, as qmesh's writer does (the fairer ceiling on a
// filesystem where allocating extents during the writes costs)
void plain_pwrite(benchmark::State &state, bool reserve)
{
    const uint64_t bytes = out_bytes(), chunk = (uint64_t)2 << 20;
    const int T = 4;
    std::vector<char> data(bytes);
    for (uint64_t i = 0; i < bytes; i += 4096)
        data[i] = (char)(i >> 12);
    const std::string path = dir() + "/bench-plain.bin";
    for (auto _ : state) {
        const double t0 = now_s();
        const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 && reserve)
            (void)fallocate(fd, 0, 0, (off_t)bytes);
        if (fd < 0) {
            state.SkipWithError("cannot create the file in QM_BENCH_DIR");
            break;
        }
        std::vector<std::thread> th;
        bool ok = true;
        for (int t = 0; t < T; ++t)
            th.emplace_back([&, t] {
                const uint64_t lo = bytes / T * t, hi = t == T - 1 ? bytes : bytes / T * (t + 1);
                for (uint64_t at = lo; at < hi;) {
                    const uint64_t n = hi - at < chunk ? hi - at : chunk;
                    const ssize_t k = pwrite(fd, data.data() + at, n, (off_t)at);
                    if (k <= 0) {
                        ok = false;
                        return;
                    }
                    at += (uint64_t)k;
                }
            });
        for (auto &t : th)
            t.join();
        ok = ok && fsync(fd) == 0;
        close(fd);
        state.SetIterationTime(now_s() - t0);
        unlink(path.c_str()); /* not timed: freeing the blocks is the next file's cost elsewhere */
        if (!ok) {
            state.SkipWithError("a write failed");
            break;
        }
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)bytes);
}

void BM_PlainPwrite(benchmark::State &state) { plain_pwrite(state, false); }
void BM_PlainPwriteReserved(benchmark::State &state) { plain_pwrite(state, true); }

// A (N,) float64 .npy of N = bytes / 16 values (a complex128 state of `bytes`).
bool write_input(const std::string &path, uint64_t n)
{
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f)
        return false;
    char head[128];
    std::memset(head, ' ', sizeof head);
    char dict[96];
    const int k = std::snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, "
                                "'shape': (%llu,), }", (unsigned long long)n);
    std::memcpy(head, "\x93NUMPY\x01\x00\x76\x00", 10);
    std::memcpy(head + 10, dict, (size_t)k);
    head[127] = '\n';
    bool ok = std::fwrite(head, 1, sizeof head, f) == sizeof head;
    std::vector<double> v(1 << 16);
    for (uint64_t at = 0; ok && at < n; at += v.size()) {
        const uint64_t m = n - at < v.size() ? n - at : v.size();
        for (uint64_t i = 0; i < m; ++i)
            v[i] = std::sin(0.001 * (double)(at + i)) + 1.5;
        ok = std::fwrite(v.data(), 8, m, f) == m;
    }
    return std::fclose(f) == 0 && ok;
}

void BM_QmeshOut(benchmark::State &state)
{
    const uint64_t bytes = out_bytes();
    const std::string in = dir() + "/bench-in.npy", out = dir() + "/bench-out.npy";
    if (!write_input(in, bytes / 16)) {
        state.SkipWithError("cannot write the input in QM_BENCH_DIR");
        return;
    }
    const char *be = std::getenv("QM_BENCH_BACKEND");
    for (auto _ : state) {
        qm_encode_job job;
        qm_encode_job_init(&job);
        job.input = in.c_str();
        job.out = out.c_str();
        job.backend = be && std::strcmp(be, "cuda") == 0 ? QM_BACKEND_CUDA : QM_BACKEND_SIM;
        job.host_available_bytes = (uint64_t)1 << 40;
        job.request.policy = QM_POLICY_SINGLE;
        qm_encode_result r;
        qm_status st;
        const qm_code rc = qm_encode_run(&job, &r, &st);
        state.SetIterationTime(r.seconds_output - r.seconds_check);
        qm_encode_result_fini(&r);
        unlink(out.c_str()); /* each run writes a new file, as the plain writer does */
        if (rc != QM_OK) {
            state.SkipWithError(st.msg);
            break;
        }
    }
    unlink(out.c_str());
    unlink(in.c_str());
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(bytes + 128));
}

} // namespace

BENCHMARK(BM_PlainPwrite)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_PlainPwriteReserved)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_QmeshOut)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK_MAIN();
