#define _DEFAULT_SOURCE /* mincore, MAP_SHARED; also pread, fdatasync, mkstemp, posix_fadvise */
/* discover_storage.c — a quick, bounded measurement of a file system's write, storage read and
 * page-cache read rates for `qmesh topo dump` of this machine (docs/discover.md "Storage"): the
 * figures a scenario's `storage: {read, write, cached_read}` states for the encode's data path;
 * and how much of an input file is in the page cache (qm_discover_file_resident), for the plan.
 *
 * In: a folder (the dump's output folder, else TMPDIR, else /tmp) and a byte count (default
 * 256 MiB). Out: write rate = bytes / the time `qmesh encode --out` takes to write them, made the
 * way it makes them, with the same code (io.h: qm_npy_writer_open of a complex128 .npy over a new
 * temporary name there, fallocate, QM_OUT_POOL_THREADS threads writing QM_OUT_POOL_BUFS chunks of
 * QM_OUT_CHUNK_AMPS amplitudes (2 MiB) in flight with pwrite at their offsets, fsync, rename:
 * qm_npy_writer_commit); only encode's device copies into the chunks, which the cost model
 * charges apart, are left out. Then the file's pages are dropped from the page cache
 * (posix_fadvise POSIX_FADV_DONTNEED after the sync) and it is read back once: read rate = bytes /
 * that read
 * (from storage where the file system honours the advice; tmpfs keeps the pages, and both read
 * rates are then the page cache's); then cached_read = the bytes of repeated passes over the now
 * cached file (up to QM_CACHED_PROBE_BYTES in all and QM_CACHED_PROBE_PASSES passes; no pass
 * starts after QM_CACHED_PROBE_SECONDS) / their time, timed QM_CACHED_PROBE_REPEATS times and
 * the median rate kept; last the file is removed as an encode's commit removes the output that
 * its new one replaces (unlink, then the folder fsync'd, when a file system that trims freed
 * blocks trims them): remove rate = bytes / that time. Every read is by as many threads as
 * encode's .npy reader uses (qm_npy_default_threads: QM_READ_THREADS, else min(32, online CPUs)),
 * each its own contiguous
 * slice with pread in 8 MiB steps into a buffer touched before the clock starts (a first touch
 * of 8 x 8 MiB costs page faults that the reader's reused staging does not pay: that is why a
 * single 256 MiB pass measured 17 GB/s on an H200 host where encode read at 32 GB/s). A
 * one-line note says so, with the folder, the sizes, the passes and the threads. The file is
 * removed on every path. QM_STORAGE_RATES="READ,WRITE[,CACHED_READ]" (bandwidths, e.g.
 * "6 GB/s,2 GB/s,20 GB/s") replaces the measurement: the test hook that makes a dump
 * deterministic.
 * Residency: mincore over a read-only mapping of the file, in windows of 1 GiB (a 256-byte
 * vector per MiB), every window for files up to 64 GiB, else 64 windows spread evenly (a sample).
 * QM_INPUT_RESIDENT=FRACTION (0 to 1) replaces the measurement (the test hook).
 * Must not: leave the temporary behind, write more than `bytes` (+ the .npy header and one
 * element) anywhere, or read more than bytes x (1 + QM_CACHED_PROBE_PASSES).
 * Known wart: one file, one run: a busy disk or a cold cache reads differently; the
 * dumped figures are a starting point the scenario's author may edit.
 */
#include "discover.h"
#include "io.h"
#include "status_internal.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEP_BYTES ((size_t)8 << 20)
/* the page-cache probe: passes over the file until this many bytes are read (2 GiB: the size of
 * the 2^28 float64 input the model was checked against), at most this many passes */
#define QM_CACHED_PROBE_BYTES ((uint64_t)2 << 30)
#define QM_CACHED_PROBE_PASSES 16
/* ... and no thread starts a pass after this many seconds (a slow page cache stops early) */
#define QM_CACHED_PROBE_SECONDS 2.0
/* ... timed this many times (odd), the median rate reported */
#define QM_CACHED_PROBE_REPEATS 3

typedef struct slice_read {
    int fd;
    uint64_t first, end; /* bytes [first, end) of the file */
    int passes;          /* times the slice is read, at most */
    double deadline;     /* no pass starts after this clock reading */
    char *buf;           /* STEP_BYTES, touched before the clock starts */
    uint64_t done;       /* bytes read */
    int err;             /* errno of a failed pread; -1 for a short file */
    uint64_t failed_at;
} slice_read;

static void *read_slice(void *arg)
{
    slice_read *r = arg;
    for (int p = 0; p < r->passes && !r->err && (p == 0 || qm_clock_now_s() < r->deadline); ++p)
        for (uint64_t at = r->first; at < r->end;) {
            const size_t n = r->end - at < STEP_BYTES ? (size_t)(r->end - at) : STEP_BYTES;
            const ssize_t got = pread(r->fd, r->buf, n, (off_t)at);
            if (got <= 0) {
                r->err = got < 0 ? errno : -1;
                r->failed_at = at;
                break;
            }
            at += (uint64_t)got;
            r->done += (uint64_t)got;
        }
    return NULL;
}

/* The file [0, bytes) read up to `passes` times by nt threads, each its own slice (the first ones
 * one byte longer when nt does not divide it), no pass but the first started after
 * QM_CACHED_PROBE_SECONDS, joined before the time is taken: the seconds in *secs, the bytes
 * read in *total, or E-IO naming the byte that failed. */
static qm_code timed_read(int fd, const char *path, uint64_t bytes, int nt, int passes,
                          char *const *bufs, double *secs, uint64_t *total, qm_status *st)
{
    slice_read parts[QM_NPY_MAX_THREADS];
    pthread_t tid[QM_NPY_MAX_THREADS];
    int started = 0;
    const double t0 = qm_clock_now_s();
    *total = 0;
    for (int k = 0; k < nt; ++k) {
        const uint64_t base = bytes / (uint64_t)nt, extra = bytes % (uint64_t)nt;
        const uint64_t first = base * (uint64_t)k + ((uint64_t)k < extra ? (uint64_t)k : extra);
        parts[k] = (slice_read){fd, first, first + base + ((uint64_t)k < extra), passes,
                                t0 + QM_CACHED_PROBE_SECONDS, bufs[k], 0, 0, 0};
        if (k + 1 < nt && started == k && pthread_create(&tid[k], NULL, read_slice, &parts[k]) == 0)
            started = k + 1;
        else
            read_slice(&parts[k]); /* the last slice (or one whose thread could not start) here */
    }
    for (int k = 0; k < started; ++k)
        pthread_join(tid[k], NULL);
    *secs = qm_clock_now_s() - t0;
    for (int k = 0; k < nt; ++k)
        *total += parts[k].done;
    for (int k = 0; k < nt; ++k)
        if (parts[k].err)
            return qm_fail(st, QM_E_IO, "storage: reading %s back failed at byte %llu of %llu: %s",
                           path, (unsigned long long)parts[k].failed_at, (unsigned long long)bytes,
                           parts[k].err > 0 ? strerror(parts[k].err) : "short file");
    return QM_OK;
}

/* One timing of the page-cache probe, ordered by rate (the median one is kept). */
typedef struct cached_timing {
    double secs, rate;
    uint64_t bytes;
} cached_timing;

static int cached_timing_cmp(const void *a, const void *b)
{
    const double x = ((const cached_timing *)a)->rate, y = ((const cached_timing *)b)->rate;
    return (x > y) - (x < y);
}

/* QM_STORAGE_RATES="READ,WRITE[,CACHED_READ]": the bandwidths, or E-ARG naming the variable. */
static qm_code rates_from_env(const char *v, qm_discover_storage *out, qm_status *st)
{
    char buf[128];
    const char *comma = strchr(v, ',');
    if (!comma || strlen(v) >= sizeof buf)
        return qm_fail(st, QM_E_ARG, "QM_STORAGE_RATES: expected READ,WRITE[,CACHED_READ] "
                       "bandwidths such as '6 GB/s,2 GB/s,20 GB/s' (got '%.64s')", v);
    snprintf(buf, sizeof buf, "%.*s", (int)(comma - v), v);
    const char *third = strchr(comma + 1, ',');
    char wbuf[128];
    snprintf(wbuf, sizeof wbuf, "%.*s", third ? (int)(third - comma - 1) : 127, comma + 1);
    if (qm_units_parse_bandwidth(buf, &out->read_bw_bytes_per_s, st) != QM_OK ||
        qm_units_parse_bandwidth(wbuf, &out->write_bw_bytes_per_s, st) != QM_OK ||
        (third && qm_units_parse_bandwidth(third + 1, &out->cached_read_bw_bytes_per_s, st) != QM_OK))
        return qm_status_prefix(st, "QM_STORAGE_RATES");
    snprintf(out->note, sizeof out->note, "from QM_STORAGE_RATES (not measured)");
    return QM_OK;
}

/* The write of the probe file at `path` (ours, made by mkstemp: the commit renames over it) as
 * encode --out writes its .npy (the header comment): ceil(bytes / 16) complex128 elements from
 * QM_OUT_POOL_BUFS buffers of a pattern, made before the clock starts as encode's staging is made
 * before its file is opened. The seconds from the open to the rename in *secs. */
static qm_code write_probe(const char *path, uint64_t bytes, double *secs, qm_status *st)
{
    const uint64_t es = 16, n = (bytes + es - 1) / es;
    void *bufs[QM_OUT_POOL_BUFS] = {0};
    qm_out_pool *pool = NULL;
    qm_npy_writer *w = NULL;
    qm_code rc = QM_OK;
    for (int k = 0; rc == QM_OK && k < QM_OUT_POOL_BUFS; ++k) {
        unsigned char *b = malloc((size_t)(QM_OUT_CHUNK_AMPS * es));
        if (!b) {
            rc = qm_fail(st, QM_E_NOMEM, "storage: out of host memory (%d x %llu bytes)",
                         QM_OUT_POOL_BUFS, (unsigned long long)(QM_OUT_CHUNK_AMPS * es));
            break;
        }
        for (size_t i = 0; i < QM_OUT_CHUNK_AMPS * es; ++i)
            b[i] = (unsigned char)(i * 131u + 7u + (unsigned)k); /* not zeros: no shortcut */
        bufs[k] = b;
    }
    if (rc == QM_OK)
        rc = qm_out_pool_create(bufs, QM_OUT_POOL_BUFS, QM_OUT_POOL_THREADS, &pool, st);
    const double t0 = qm_clock_now_s();
    if (rc == QM_OK && (rc = qm_npy_writer_open(path, QM_DTYPE_COMPLEX128, 1, &n, &w, st)) == QM_OK)
        rc = qm_npy_writer_reserve(w, st);
    for (uint64_t pos = 0; rc == QM_OK && pos < n && !qm_out_pool_failed(pool);) {
        const uint64_t m = n - pos < QM_OUT_CHUNK_AMPS ? n - pos : QM_OUT_CHUNK_AMPS;
        int idx;
        (void)qm_out_pool_acquire(pool, &idx); /* the pattern stands for encode's device copy */
        qm_out_pool_submit(pool, idx, w, pos, m);
        pos += m;
    }
    if (pool) {
        qm_status ignored;
        const qm_code d = qm_out_pool_drain(pool, rc == QM_OK ? st : &ignored);
        rc = rc == QM_OK ? d : rc;
    }
    if (rc == QM_OK) {
        rc = qm_npy_writer_commit(w, st); /* fsync, rename (consumes the writer) */
        w = NULL;
    }
    *secs = qm_clock_now_s() - t0;
    qm_npy_writer_abort(w);
    qm_out_pool_destroy(pool);
    for (int k = 0; k < QM_OUT_POOL_BUFS; ++k)
        free(bufs[k]);
    return rc == QM_OK ? rc : qm_status_prefix(st, "storage");
}

qm_code qm_discover_storage_measure(const char *dir, uint64_t bytes, qm_discover_storage *out,
                                    qm_status *st)
{
    memset(out, 0, sizeof *out);
    const char *env = getenv("QM_STORAGE_RATES");
    if (env && *env)
        return rates_from_env(env, out, st);
    if (bytes < STEP_BYTES)
        return qm_fail(st, QM_E_ARG, "storage: the measurement needs at least 8 MiB (got %llu "
                       "bytes)", (unsigned long long)bytes);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/.qmesh-storage-XXXXXX", dir) >= (int)sizeof path)
        return qm_fail(st, QM_E_ARG, "storage: the folder name is too long (%zu bytes)", strlen(dir));
    int fd = mkstemp(path); /* the name is ours: the writer's commit renames over it */
    if (fd < 0)
        return qm_fail(st, QM_E_IO, "storage: cannot create a temporary file in %s: %s", dir,
                       strerror(errno));
    close(fd);
    double tw = 0;
    qm_code rc = write_probe(path, bytes, &tw, st);
    fd = rc == QM_OK ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (rc == QM_OK && fd < 0)
        rc = qm_fail(st, QM_E_IO, "storage: cannot open %s to read it back: %s", path, strerror(errno));
    /* drop the pages just written, so that the first read back comes from storage */
    if (rc == QM_OK)
        (void)posix_fadvise(fd, 0, (off_t)bytes, POSIX_FADV_DONTNEED);
    int nt = 1;
    if (rc == QM_OK)
        rc = qm_npy_default_threads("storage", &nt, st);
    char *bufs[QM_NPY_MAX_THREADS] = {0};
    for (int k = 0; rc == QM_OK && k < nt; ++k) {
        if (!(bufs[k] = malloc(STEP_BYTES)))
            rc = qm_fail(st, QM_E_NOMEM, "storage: out of host memory (%d x %zu bytes)", nt,
                         STEP_BYTES);
        else
            memset(bufs[k], 0, STEP_BYTES); /* faulted in now, not inside the timed reads */
    }
    uint64_t passes = (QM_CACHED_PROBE_BYTES + bytes - 1) / bytes;
    if (passes > QM_CACHED_PROBE_PASSES)
        passes = QM_CACHED_PROBE_PASSES;
    double tr = 0, tc = 0;
    uint64_t read_once = 0, cached = 0;
    if (rc == QM_OK)
        rc = timed_read(fd, path, bytes, nt, 1, bufs, &tr, &read_once, st);
    /* the page cache timed QM_CACHED_PROBE_REPEATS times, the median rate kept: one timing of
     * a 2 GiB pass on the H100 host read 41-55 GB/s from run to run (bench/results
     * 2026-12-06-session21.md), where the encodes of the same run read at 49-51 GB/s */
    cached_timing ct[QM_CACHED_PROBE_REPEATS];
    for (int k = 0; rc == QM_OK && k < QM_CACHED_PROBE_REPEATS; ++k) {
        rc = timed_read(fd, path, bytes, nt, (int)passes, bufs, &ct[k].secs, &ct[k].bytes, st);
        ct[k].rate = (double)ct[k].bytes / (ct[k].secs > 1e-9 ? ct[k].secs : 1e-9);
    }
    if (rc == QM_OK) {
        qsort(ct, QM_CACHED_PROBE_REPEATS, sizeof ct[0], cached_timing_cmp);
        tc = ct[QM_CACHED_PROBE_REPEATS / 2].secs;
        cached = ct[QM_CACHED_PROBE_REPEATS / 2].bytes;
    }
    for (int k = 0; k < nt; ++k)
        free(bufs[k]);
    if (fd >= 0)
        close(fd);
    /* the file removed as an encode's commit removes the output it replaces: unlinked, then the
     * folder synced (the commit's rename over the old output, then its fsync of the folder),
     * which is when a file system that trims freed blocks (ext4's `discard`) trims them: on the
     * H100 host of session 24 an encode whose 4 GiB output replaced an earlier one wrote in
     * 3.53-3.64 s where one to a new path took 2.62-2.66 s */
    const double t0 = qm_clock_now_s();
    const bool removed = unlink(path) == 0;
    const int dfd = removed ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        (void)fsync(dfd); /* best effort, as the commit's */
        close(dfd);
    }
    const double trm = qm_clock_now_s() - t0;
    if (rc == QM_OK) {
        /* a clock too coarse for the size reads as no time: keep the figure finite */
        out->write_bw_bytes_per_s = (double)bytes / (tw > 1e-9 ? tw : 1e-9);
        out->read_bw_bytes_per_s = (double)bytes / (tr > 1e-9 ? tr : 1e-9);
        out->cached_read_bw_bytes_per_s = (double)cached / (tc > 1e-9 ? tc : 1e-9);
        out->remove_bw_bytes_per_s = removed ? (double)bytes / (trm > 1e-9 ? trm : 1e-9) : 0;
        char sz[32], tot[32], chunk[32];
        snprintf(out->note, sizeof out->note, "measured by qmesh topo dump: %s written to %.48s "
                 "as encode --out writes (fallocate, %d threads, %d x %s in flight, fsync, "
                 "rename), dropped from the page cache, read back; then %s (up to %d passes, 2 s) "
                 "from the page cache, the median of %d timings; %d reader thread%s; then removed "
                 "as an output that a new one replaces (unlink, the folder synced)",
                 qm_format_bytes(bytes, sz, sizeof sz), dir, QM_OUT_POOL_THREADS, QM_OUT_POOL_BUFS,
                 qm_format_bytes(QM_OUT_CHUNK_AMPS * 16, chunk, sizeof chunk),
                 qm_format_bytes(cached, tot, sizeof tot), (int)passes, QM_CACHED_PROBE_REPEATS, nt,
                 nt == 1 ? "" : "s");
    }
    return rc;
}

qm_code qm_discover_file_resident(const char *path, double *fraction, qm_status *st)
{
    *fraction = 0;
    const char *env = getenv("QM_INPUT_RESIDENT");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        const double v = strtod(env, &end);
        if (errno || end == env || *end || !(v >= 0 && v <= 1))
            return qm_fail(st, QM_E_ARG, "QM_INPUT_RESIDENT: expected a fraction from 0 to 1 "
                           "(got '%.64s')", env);
        *fraction = v;
        return QM_OK;
    }
    const int fd = open(path, O_RDONLY);
    if (fd < 0)
        return QM_OK; /* the reader reports an unreadable file; nothing is known resident */
    struct stat sb;
    const long pg = sysconf(_SC_PAGESIZE);
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0 || pg <= 0) {
        close(fd);
        return QM_OK;
    }
    const uint64_t size = (uint64_t)sb.st_size, win = (uint64_t)1 << 30;
    const uint64_t n_win = (size + win - 1) / win;
    const uint64_t step = n_win > 64 ? n_win / 64 : 1; /* above 64 GiB: 64 windows, a sample */
    unsigned char *vec = malloc((size_t)(win / (uint64_t)pg) + 1);
    uint64_t seen = 0, resident = 0;
    for (uint64_t w = 0; vec && w < n_win; w += step) {
        const uint64_t off = w * win, len = size - off < win ? size - off : win;
        void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        if (m == MAP_FAILED)
            break;
        const uint64_t pages = (len + (uint64_t)pg - 1) / (uint64_t)pg;
        if (mincore(m, (size_t)len, vec) == 0) {
            for (uint64_t i = 0; i < pages; ++i)
                resident += vec[i] & 1;
            seen += pages;
        }
        munmap(m, (size_t)len);
    }
    free(vec);
    close(fd);
    *fraction = seen ? (double)resident / (double)seen : 0;
    return QM_OK;
}
