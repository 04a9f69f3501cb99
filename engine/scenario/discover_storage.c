#define _DEFAULT_SOURCE /* mincore, MAP_SHARED; also pread, fdatasync, mkstemp, posix_fadvise */
/* discover_storage.c — a quick, bounded measurement of a file system's write, storage read and
 * page-cache read rates for `qmesh topo dump` of this machine (docs/discover.md "Storage"): the
 * figures a scenario's `storage: {read, write, cached_read}` states for the encode's data path;
 * and how much of an input file is in the page cache (qm_discover_file_resident), for the plan.
 *
 * In: a folder (the dump's output folder, else TMPDIR, else /tmp) and a byte count (default
 * 256 MiB). Out: write rate = bytes / (the writes in 8 MiB steps + fdatasync) of a new temporary
 * file there; then the file's pages are dropped from the page cache (posix_fadvise
 * POSIX_FADV_DONTNEED after the sync) and it is read back once: read rate = bytes / that read
 * (from storage where the file system honours the advice; tmpfs keeps the pages, and both read
 * rates are then the page cache's); then cached_read = the bytes of repeated passes over the now
 * cached file (up to QM_CACHED_PROBE_BYTES in all and QM_CACHED_PROBE_PASSES passes; no pass
 * starts after QM_CACHED_PROBE_SECONDS) / their time. Every read is by as many threads as
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
 * Must not: leave the temporary behind, write more than `bytes` (+ one step) anywhere, or read
 * more than bytes x (1 + QM_CACHED_PROBE_PASSES).
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
    char *buf = malloc(STEP_BYTES);
    if (!buf)
        return qm_fail(st, QM_E_NOMEM, "storage: out of host memory (%zu bytes)", STEP_BYTES);
    for (size_t i = 0; i < STEP_BYTES; ++i)
        buf[i] = (char)(i * 131u + 7u); /* not zeros: no file system shortcut */
    qm_code rc = QM_OK;
    const int fd = mkstemp(path);
    if (fd < 0) {
        rc = qm_fail(st, QM_E_IO, "storage: cannot create a temporary file in %s: %s", dir,
                     strerror(errno));
        goto done;
    }
    double t0 = qm_clock_now_s();
    for (uint64_t done = 0; rc == QM_OK && done < bytes;) {
        const size_t n = bytes - done < STEP_BYTES ? (size_t)(bytes - done) : STEP_BYTES;
        const ssize_t w = write(fd, buf, n);
        if (w <= 0)
            rc = qm_fail(st, QM_E_IO, "storage: writing %s failed at byte %llu of %llu: %s", path,
                         (unsigned long long)done, (unsigned long long)bytes,
                         w < 0 ? strerror(errno) : "no progress");
        else
            done += (uint64_t)w;
    }
    if (rc == QM_OK && fdatasync(fd) != 0)
        rc = qm_fail(st, QM_E_IO, "storage: fdatasync of %s failed: %s", path, strerror(errno));
    const double tw = qm_clock_now_s() - t0;
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
    if (rc == QM_OK)
        rc = timed_read(fd, path, bytes, nt, (int)passes, bufs, &tc, &cached, st);
    for (int k = 0; k < nt; ++k)
        free(bufs[k]);
    close(fd);
    unlink(path);
    if (rc == QM_OK) {
        /* a clock too coarse for the size reads as no time: keep the figure finite */
        out->write_bw_bytes_per_s = (double)bytes / (tw > 1e-9 ? tw : 1e-9);
        out->read_bw_bytes_per_s = (double)bytes / (tr > 1e-9 ? tr : 1e-9);
        out->cached_read_bw_bytes_per_s = (double)cached / (tc > 1e-9 ? tc : 1e-9);
        char sz[32], tot[32];
        snprintf(out->note, sizeof out->note, "measured by qmesh topo dump: %s written to %.48s "
                 "with fdatasync, dropped from the page cache, read back; then %s (up to %d "
                 "passes, 2 s) from the page cache; %d reader thread%s",
                 qm_format_bytes(bytes, sz, sizeof sz), dir, qm_format_bytes(cached, tot, sizeof tot),
                 (int)passes, nt, nt == 1 ? "" : "s");
    }
done:
    free(buf);
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
