#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
/* cuda_discover.c — GPU facts from the CUDA runtime for `qmesh topo dump` (cuda_discover.h).
 *
 * In: the devices this process can see. Out: per GPU the model name, total and free memory, HBM
 * bandwidth (2 x memory clock x bus width / 8, as cuda.c computes it), SM count, compute
 * capability and PCI bus id (normalized to sysfs's lower-case form), the peer access matrix, then
 * the NVLink facts from NVML (nvml_discover.c); then the copy and launch probe, per GPU, one GPU
 * at a time (probe_device): pinned host -> device and device -> pinned host rates from
 * QM_DISCOVER_PROBE_REPS cudaMemcpyAsync copies of QM_DISCOVER_PROBE_BYTES each way timed with
 * CUDA events (one untimed copy each way first), and the launch round trip: the mean wall time
 * of QM_DISCOVER_LAUNCH_REPS (4-byte cudaMemsetAsync, cudaStreamSynchronize) pairs after 10
 * untimed ones (what every launch-and-wait of the pipeline pays; a memset stands in for an empty
 * kernel, which plain C cannot launch). The probe allocates 64 MiB page-locked and 64 MiB on the
 * device and frees both. Then, once for the host (page_lock_probe), the cost of making and
 * freeing a page-locked buffer the way `qmesh encode --backend cuda` makes and frees its staging
 * (2 MiB-aligned memory advised to use huge pages and touched while the CUDA context is made, not
 * timed; registered with cudaHostRegister; cudaHostUnregister, free):
 * the median of 3 of 2 MiB and of 3 of 64 MiB give rate = 62 MiB / (t64 - t2) and buffer = t2 -
 * 2 MiB / rate. Then, on the first GPU (staging_probe), an encode's device-side setup inside its
 * ingest, timed in the two parts that its background reads split it into (ingest.c submits the
 * first reads before it opens the staging pipe, and the last read ends before the last copies
 * and the close): outside the reads, a 1 GiB state allocated (when a quarter of the free memory
 * holds it; freed untimed) and its block sums' device buffer, then, after the pipe's use, the
 * pipe closed as the CUDA backend closes it (the device synchronized, events and streams
 * destroyed; the halves are kept by the backend, their cudaFree untimed): the first of 3 state
 * allocations (an encode's is its process's first) + the median of 3 of the rest is
 * defaults.staging_setup; inside the reads, the pipe opened and first used as ingest.c does it:
 * 2 non-blocking streams, 4 + 8 events without timing and 2 x 32 MiB of device memory made, 2
 * chunks of 32 MiB copied into them from page-locked memory (made before, not timed) and
 * synchronized: the median of 3 less the two copies at the GPU's measured host->device rate is
 * defaults.staging_open. Before those, and kept allocated through them, a 4 GiB state's first
 * allocation (when a quarter of the free memory holds it): the 3 GiB between it and the first
 * 1 GiB one over the time between them is defaults.state_alloc. Per GPU also the device copy
 * rate (probe_hbm: 8 copies of 512 MiB between two device buffers, read + write bytes / time),
 * which the dump turns into defaults.efficiency.hbm.
 * sysfs facts are the caller's next step.
 * Must not: print, abort, enable peer access (only asks whether it is possible), or leave a device
 * current other than the one it found. CUDA errors are translated here with the call, the device
 * and the error name, and the sticky error is cleared.
 * Known wart: cudaMemGetInfo needs a context on every device, so discovery costs one context
 * creation per GPU (and its memory shows up in the reserve, as it does for a qmesh run).
 */
#include "cuda_discover.h"
#include "status_internal.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>


static qm_code disc_err(qm_status *st, cudaError_t e, const char *op, int dev)
{
    (void)cudaGetLastError(); /* clear the sticky error of a recoverable failure */
    return qm_fail_backend(st, QM_E_BACKEND, (int)e, "cuda discover: %s on cuda:%d failed: %s (%s)",
                           op, dev, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* The copy and launch probe of device d (see the header comment) into g's h2d, d2h and launch
 * figures; every resource freed on every path. */
static qm_code probe_device(int d, qm_discover_gpu *g, qm_status *st)
{
    const size_t bytes = QM_DISCOVER_PROBE_BYTES;
    void *host = NULL, *dev = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    const char *op = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess && (e = cudaHostAlloc(&host, bytes, cudaHostAllocDefault)) != cudaSuccess)
        op = "cudaHostAlloc (64 MiB, the copy probe)";
    if (e == cudaSuccess && (e = cudaMalloc(&dev, bytes)) != cudaSuccess)
        op = "cudaMalloc (64 MiB, the copy probe)";
    if (e == cudaSuccess && (e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess)
        op = "cudaStreamCreateWithFlags";
    for (int k = 0; k < 2 && e == cudaSuccess; ++k)
        if ((e = cudaEventCreate(&ev[k])) != cudaSuccess)
            op = "cudaEventCreate";
    if (e == cudaSuccess)
        memset(host, 1, bytes); /* the pages exist before the first copy */
    /* k = 0: host -> device, k = 1: device -> host */
    for (int k = 0; k < 2 && e == cudaSuccess; ++k) {
        void *dst = k == 0 ? dev : host;
        const void *src = k == 0 ? host : dev;
        const enum cudaMemcpyKind kind = k == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
        op = k == 0 ? "cudaMemcpyAsync (host to device probe)" : "cudaMemcpyAsync (device to host probe)";
        if ((e = cudaMemcpyAsync(dst, src, bytes, kind, s)) != cudaSuccess ||
            (e = cudaStreamSynchronize(s)) != cudaSuccess || (e = cudaEventRecord(ev[0], s)) != cudaSuccess)
            break;
        for (int r = 0; r < QM_DISCOVER_PROBE_REPS && e == cudaSuccess; ++r)
            e = cudaMemcpyAsync(dst, src, bytes, kind, s);
        float ms = 0;
        if (e != cudaSuccess || (e = cudaEventRecord(ev[1], s)) != cudaSuccess ||
            (e = cudaEventSynchronize(ev[1])) != cudaSuccess ||
            (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) != cudaSuccess)
            break;
        const double bw = (double)bytes * QM_DISCOVER_PROBE_REPS / ((ms > 1e-6f ? ms : 1e-6f) * 1e-3);
        if (k == 0)
            g->h2d_bw_bytes_per_s = bw;
        else
            g->d2h_bw_bytes_per_s = bw;
    }
    if (e == cudaSuccess) {
        op = "cudaMemsetAsync + cudaStreamSynchronize (the launch probe)";
        double t0 = 0;
        for (int r = 0; r < 10 + QM_DISCOVER_LAUNCH_REPS && e == cudaSuccess; ++r) {
            if (r == 10)
                t0 = qm_clock_now_s();
            if ((e = cudaMemsetAsync(dev, 0, 4, s)) == cudaSuccess)
                e = cudaStreamSynchronize(s);
        }
        if (e == cudaSuccess)
            g->launch_s = (qm_clock_now_s() - t0) / QM_DISCOVER_LAUNCH_REPS;
    }
    const cudaError_t failed = e;
    for (int k = 0; k < 2; ++k)
        if (ev[k])
            (void)cudaEventDestroy(ev[k]);
    if (s)
        (void)cudaStreamDestroy(s);
    if (dev)
        (void)cudaFree(dev);
    if (host)
        (void)cudaFreeHost(host);
    if (failed != cudaSuccess) {
        g->h2d_bw_bytes_per_s = g->d2h_bw_bytes_per_s = g->launch_s = 0;
        return disc_err(st, failed, op, d);
    }
    return QM_OK;
}

/* The device copy probe of device d: QM_DISCOVER_HBM_REPS cudaMemcpyAsync of
 * QM_DISCOVER_HBM_BYTES between two buffers of the device, timed with CUDA events after one
 * untimed copy; the rate counts the bytes read and written (2 x the copy). This is the HBM rate
 * a pass that reads and writes reaches, against the one computed from the clock and the bus
 * width. A device without 2 x QM_DISCOVER_HBM_BYTES free is not measured (0: the efficiency stays
 * as stated); other CUDA errors are the dump's error. */
#define QM_DISCOVER_HBM_BYTES ((size_t)512 << 20)
#define QM_DISCOVER_HBM_REPS 8
static qm_code probe_hbm(int d, qm_discover_gpu *g, qm_status *st)
{
    void *a = NULL, *b = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    const char *op = "cudaSetDevice";
    g->hbm_copy_bw_bytes_per_s = 0;
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess && (cudaMalloc(&a, QM_DISCOVER_HBM_BYTES) != cudaSuccess ||
                             cudaMalloc(&b, QM_DISCOVER_HBM_BYTES) != cudaSuccess)) {
        (void)cudaGetLastError(); /* too little free memory: not measured */
        (void)cudaFree(a);
        (void)cudaFree(b);
        return QM_OK;
    }
    if (e == cudaSuccess && (e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess)
        op = "cudaStreamCreateWithFlags";
    for (int k = 0; k < 2 && e == cudaSuccess; ++k)
        if ((e = cudaEventCreate(&ev[k])) != cudaSuccess)
            op = "cudaEventCreate";
    float ms = 0;
    if (e == cudaSuccess) {
        op = "cudaMemcpyAsync (the device copy probe)";
        if ((e = cudaMemsetAsync(a, 1, QM_DISCOVER_HBM_BYTES, s)) == cudaSuccess &&
            (e = cudaMemcpyAsync(b, a, QM_DISCOVER_HBM_BYTES, cudaMemcpyDeviceToDevice, s)) == cudaSuccess)
            e = cudaEventRecord(ev[0], s);
        for (int r = 0; r < QM_DISCOVER_HBM_REPS && e == cudaSuccess; ++r)
            e = cudaMemcpyAsync(r & 1 ? a : b, r & 1 ? b : a, QM_DISCOVER_HBM_BYTES,
                                cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess && (e = cudaEventRecord(ev[1], s)) == cudaSuccess &&
            (e = cudaEventSynchronize(ev[1])) == cudaSuccess)
            e = cudaEventElapsedTime(&ms, ev[0], ev[1]);
    }
    if (e == cudaSuccess)
        g->hbm_copy_bw_bytes_per_s = 2.0 * (double)QM_DISCOVER_HBM_BYTES * QM_DISCOVER_HBM_REPS /
                                     ((ms > 1e-6f ? ms : 1e-6f) * 1e-3);
    for (int k = 0; k < 2; ++k)
        if (ev[k])
            (void)cudaEventDestroy(ev[k]);
    if (s)
        (void)cudaStreamDestroy(s);
    (void)cudaFree(a);
    (void)cudaFree(b);
    return e == cudaSuccess ? QM_OK : disc_err(st, e, op, d);
}

/* One page-locked buffer of `bytes` made and freed as `qmesh encode --backend cuda` makes and
 * frees its staging: from memory prepared while the CUDA context was made (2 MiB-aligned, advised
 * to use huge pages, touched: qm_hal_cuda_host_prepare; not timed, as the encode does it off its
 * critical path), registered, then unregistered and freed (c_host_free): the seconds of these,
 * since every staging buffer of an encode is freed inside the phase that made it. */
static cudaError_t page_lock_once(size_t bytes, double *secs)
{
    void *b = aligned_alloc((size_t)2 << 20, bytes);
    if (!b)
        return cudaErrorMemoryAllocation;
    (void)madvise(b, bytes, MADV_HUGEPAGE);
    for (size_t at = 0; at < bytes; at += 4096)
        ((volatile char *)b)[at] = 0;
    const double t0 = qm_clock_now_s();
    cudaError_t e = cudaHostRegister(b, bytes, cudaHostRegisterPortable);
    if (e == cudaSuccess)
        e = cudaHostUnregister(b);
    free(b);
    *secs = qm_clock_now_s() - t0;
    return e;
}

/* The page-locking probe (see the header comment) into f's page_lock figures. */
static qm_code page_lock_probe(qm_discover_facts *f, qm_status *st)
{
    double t[2][3], m[2];
    const size_t sizes[2] = {(size_t)2 << 20, (size_t)64 << 20};
    for (int k = 0; k < 2; ++k) {
        for (int r = 0; r < 3; ++r) {
            const cudaError_t e = page_lock_once(sizes[k], &t[k][r]);
            if (e != cudaSuccess)
                return disc_err(st, e, k ? "cudaHostRegister (64 MiB, the page-locking probe)"
                                         : "cudaHostRegister (2 MiB, the page-locking probe)", 0);
        }
        m[k] = qm_median(t[k], 3);
    }
    const double dt = m[1] - m[0];
    f->page_lock_bw_bytes_per_s = dt > 0 ? (double)(sizes[1] - sizes[0]) / dt
                                         : (double)sizes[1] / (m[1] > 1e-9 ? m[1] : 1e-9);
    const double buffer = m[0] - (double)sizes[0] / f->page_lock_bw_bytes_per_s;
    f->page_lock_s = buffer > 0 ? buffer : 0;
    return QM_OK;
}

/* The staging probe's sizes, as an encode's (engine/stages: QM_STAGING_CHUNK_BYTES halves,
 * QM_INGEST_SLOTS slot events beside the 4 chunk events). */
#define STAGING_PROBE_CHUNK ((size_t)32 << 20)
#define STAGING_PROBE_EVENTS 12

/* The state an encode allocates inside its ingest, before its staging (the probe's stand-in:
 * 1 GiB, when free memory allows; a 2^28 complex128 state of 4 GiB took 0.5-0.7 ms, a 1 GiB batch
 * 0.4 ms on an H100), and the device buffer of its block sums that a large state's ingest
 * allocates after it (one double per 2^14 amplitudes of a complex128 state, and the root) */
#define STAGING_PROBE_STATE ((size_t)QM_STATE_ALLOC_FIRST_BYTES)
#define STAGING_PROBE_SUMS (((STAGING_PROBE_STATE / 16 >> 14) + 1) * sizeof(double))

/* One encode's device-side setup, timed where its reads split it (ingest.c: the first reads are
 * submitted before the staging pipe is opened, and the last read ends before the last copies,
 * the drain and the close): *before_secs the state and its block sums allocated (the state kept,
 * as the encode keeps it) plus, after the pipe's use, its close as the CUDA backend closes it
 * (the device synchronized, the events and streams destroyed; the halves go back to the
 * backend's kept buffers, so their cudaFree is not timed); *open_secs the pipe opened (2
 * non-blocking streams, the events, 2 x 32 MiB of device memory) and its two halves filled from
 * src, synchronized; *alloc_secs the state's allocation alone. */
static cudaError_t staging_once(const char *src, double *before_secs, double *open_secs,
                                double *alloc_secs)
{
    cudaStream_t s[2] = {NULL, NULL};
    cudaEvent_t ev[STAGING_PROBE_EVENTS] = {NULL};
    char *dst = NULL;
    void *state = NULL, *sums = NULL;
    size_t free_b = 0, total_b = 0;
    double t0 = qm_clock_now_s(), alloc = 0, before = 0, open = 0, close = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e == cudaSuccess && free_b / 4 >= STAGING_PROBE_STATE) {
        t0 = qm_clock_now_s();
        e = cudaMalloc(&state, STAGING_PROBE_STATE);
        alloc = qm_clock_now_s() - t0;
    }
    t0 = qm_clock_now_s();
    if (e == cudaSuccess)
        e = cudaMalloc(&sums, STAGING_PROBE_SUMS);
    before = alloc + (qm_clock_now_s() - t0);
    t0 = qm_clock_now_s();
    for (int k = 0; k < 2 && e == cudaSuccess; ++k)
        e = cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking);
    for (int k = 0; k < STAGING_PROBE_EVENTS && e == cudaSuccess; ++k)
        e = cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&dst, 2 * STAGING_PROBE_CHUNK);
    for (int h = 0; h < 2 && e == cudaSuccess; ++h)
        if ((e = cudaMemcpyAsync(dst + h * STAGING_PROBE_CHUNK, src + h * STAGING_PROBE_CHUNK,
                                 STAGING_PROBE_CHUNK, cudaMemcpyHostToDevice, s[0])) == cudaSuccess)
            e = cudaEventRecord(ev[h], s[0]);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s[0]);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s[1]);
    open = qm_clock_now_s() - t0;
    t0 = qm_clock_now_s();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize(); /* as the backend does before it keeps a freed buffer */
    for (int k = 0; k < STAGING_PROBE_EVENTS; ++k)
        if (ev[k])
            (void)cudaEventDestroy(ev[k]);
    for (int k = 0; k < 2; ++k)
        if (s[k])
            (void)cudaStreamDestroy(s[k]);
    close = qm_clock_now_s() - t0;
    if (dst)
        (void)cudaFree(dst);
    *before_secs = before + close;
    *open_secs = open;
    *alloc_secs = alloc;
    if (sums)
        (void)cudaFree(sums);
    if (state)
        (void)cudaFree(state);
    return e;
}

/* The staging probe (see the header comment) into f->staging_setup_s, staging_alloc_s,
 * staging_alloc_first_s and staging_open_s; device 0 is current. */
static qm_code staging_probe(qm_discover_facts *f, qm_status *st)
{
    char *src = NULL;
    cudaError_t e = cudaMallocHost((void **)&src, 2 * STAGING_PROBE_CHUNK);
    if (e != cudaSuccess)
        return disc_err(st, e, "cudaMallocHost (64 MiB, the staging probe)", 0);
    memset(src, 1, 2 * STAGING_PROBE_CHUNK);
    /* the big state's first allocation, before the 1 GiB ones and kept through them (freed, the
     * driver would hand its memory to them): an encode's 2^28 complex128 state is its process's
     * first allocation of that size */
    void *big = NULL;
    double tbig = 0;
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) == cudaSuccess &&
        free_b / 4 >= QM_DISCOVER_BIG_STATE_BYTES) {
        const double t0 = qm_clock_now_s();
        e = cudaMalloc(&big, QM_DISCOVER_BIG_STATE_BYTES);
        tbig = qm_clock_now_s() - t0;
    }
    double tb[3], to[3], ta[3];
    for (int r = 0; r < 3 && e == cudaSuccess; ++r)
        e = staging_once(src, &tb[r], &to[r], &ta[r]);
    (void)cudaFreeHost(src);
    if (big)
        (void)cudaFree(big);
    if (e != cudaSuccess)
        return disc_err(st, e, "the staging probe (streams, events, cudaMalloc, copies)", 0);
    /* defaults.state_alloc: the bytes between the two first allocations over the time between
     * them (not measured when either was not made or the big one was not the slower) */
    f->big_state_alloc_s = tbig;
    f->state_alloc_bw_bytes_per_s =
        big && ta[0] > 0 && tbig > ta[0]
            ? (double)(QM_DISCOVER_BIG_STATE_BYTES - STAGING_PROBE_STATE) / (tbig - ta[0])
            : 0;
    f->staging_alloc_first_s = ta[0]; /* the process's first allocation of that size */
    /* the state's allocation as the encode meets it: its process's first of that size (the
     * driver keeps freed memory for later allocations: on the H100 of session 24 the later two
     * took 0.10 ms where the first took 0.44 ms), beside the median of the rest (its block sums'
     * allocation and the close) */
    double rest[3];
    for (int r = 0; r < 3; ++r)
        rest[r] = tb[r] - ta[r];
    f->staging_alloc_s = qm_median(ta, 3);
    const double setup = f->staging_alloc_first_s + qm_median(rest, 3);
    f->staging_setup_s = setup > 1e-6 ? setup : 1e-6; /* 0 would read as "not measured" */
    const double h2d = f->gpus[0].h2d_bw_bytes_per_s;
    const double open = qm_median(to, 3) - (h2d > 0 ? 2.0 * (double)STAGING_PROBE_CHUNK / h2d : 0);
    f->staging_open_s = open > 1e-6 ? open : 1e-6;
    return QM_OK;
}

static qm_code discover_device(int d, qm_discover_gpu *g, qm_status *st)
{
    struct cudaDeviceProp p;
    cudaError_t e;
    if ((e = cudaGetDeviceProperties(&p, d)) != cudaSuccess)
        return disc_err(st, e, "cudaGetDeviceProperties", d);
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%.95s", p.name);
    g->memory_bytes = (uint64_t)p.totalGlobalMem;
    g->sm_count = p.multiProcessorCount;
    g->cc_major = p.major;
    g->cc_minor = p.minor;
    g->numa = -1;
    int mem_clock_khz = 0;
    if ((e = cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d)) != cudaSuccess)
        return disc_err(st, e, "cudaDeviceGetAttribute(cudaDevAttrMemoryClockRate)", d);
    g->hbm_bw_bytes_per_s = 2.0 * mem_clock_khz * 1e3 * (p.memoryBusWidth / 8.0);
    char bus[64];
    if ((e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d)) != cudaSuccess)
        return disc_err(st, e, "cudaDeviceGetPCIBusId", d);
    qm_code rc = qm_discover_bus_id_normalize(bus, g->bus_id, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "cuda:%d", d);
    size_t free_b = 0, total_b = 0;
    if ((e = cudaSetDevice(d)) != cudaSuccess)
        return disc_err(st, e, "cudaSetDevice", d);
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
        return disc_err(st, e, "cudaMemGetInfo", d);
    /* totalGlobalMem and cudaMemGetInfo's total agree; keep free only when it is consistent */
    g->free_bytes = free_b <= g->memory_bytes ? (uint64_t)free_b : 0;
    return QM_OK;
}

qm_code qm_cuda_discover_facts(qm_discover_facts *f, qm_status *st)
{
    if (!f)
        return qm_fail(st, QM_E_ARG, "cuda discover: facts must not be NULL");
    int n = 0, current = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return qm_fail_backend(st, QM_E_UNSUPPORTED, (int)e, "cuda: no CUDA device (%s)",
                               e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
    }
    if (n > QM_DISCOVER_MAX_GPUS)
        return qm_fail(st, QM_E_RANGE, "cuda discover: %d CUDA devices, at most %d are supported; "
                       "narrow them with CUDA_VISIBLE_DEVICES", n, QM_DISCOVER_MAX_GPUS);
    if (cudaGetDevice(&current) != cudaSuccess) {
        (void)cudaGetLastError();
        current = -1;
    }
    qm_code rc = QM_OK;
    f->n_gpus = 0;
    memset(f->peer, 0, sizeof f->peer);
    memset(f->nvlinks, 0, sizeof f->nvlinks);
    for (int d = 0; d < n && rc == QM_OK; ++d)
        if ((rc = discover_device(d, &f->gpus[d], st)) == QM_OK)
            f->n_gpus = d + 1;
    for (int a = 0; a < n && rc == QM_OK; ++a) {
        for (int b = 0; b < n && rc == QM_OK; ++b) {
            int can = 0;
            if (a == b)
                continue;
            if ((e = cudaDeviceCanAccessPeer(&can, a, b)) != cudaSuccess)
                rc = disc_err(st, e, "cudaDeviceCanAccessPeer", a);
            else
                f->peer[a][b] = can != 0;
        }
    }
    for (int d = 0; d < f->n_gpus && rc == QM_OK; ++d)
        if ((rc = probe_device(d, &f->gpus[d], st)) == QM_OK)
            rc = probe_hbm(d, &f->gpus[d], st);
    if (rc == QM_OK) { /* page-locking is the host's: measured once, with device 0 current */
        const cudaError_t e0 = cudaSetDevice(0);
        rc = e0 == cudaSuccess ? page_lock_probe(f, st) : disc_err(st, e0, "cudaSetDevice", 0);
        if (rc == QM_OK)
            rc = staging_probe(f, st);
    }
    if (current >= 0 && cudaSetDevice(current) != cudaSuccess)
        (void)cudaGetLastError();
    if (rc != QM_OK) {
        f->n_gpus = 0;
        return rc;
    }
    f->sources |= QM_DISCOVER_SRC_CUDA | QM_DISCOVER_SRC_PROBE;
    qm_nvml_discover_links("libnvidia-ml.so.1", f);
    return QM_OK;
}
