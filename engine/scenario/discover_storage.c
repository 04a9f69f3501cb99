#define _POSIX_C_SOURCE 200809L /* pread, fdatasync, mkstemp */
/* discover_storage.c — a quick, bounded measurement of a file system's write and read rates for
 * `qmesh topo dump` of this machine (docs/discover.md "Storage"): the figures a scenario's
 * `storage: {read, write}` states for the encode's data path.
 *
 * In: a folder (the dump's output folder, else TMPDIR, else /tmp) and a byte count (default
 * 256 MiB). Out: write rate = bytes / (the writes in 8 MiB steps + fdatasync) of a new temporary
 * file there; read rate = bytes / its read back with pread right after (from the page cache, as an
 * input file that was just written or read is), by as many threads as encode's .npy reader uses
 * (qm_npy_default_threads: QM_READ_THREADS, else min(32, online CPUs)), each its own contiguous
 * slice, because that is how encode reads an input; a one-line note saying so, with the folder,
 * the size and the threads. The file is removed on every path. QM_STORAGE_RATES="READ,WRITE"
 * (two bandwidths, e.g. "6 GB/s,2 GB/s") replaces the measurement: the test hook that makes a
 * dump deterministic.
 * Must not: leave the temporary behind, or write more than `bytes` (+ one step) anywhere.
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
#include <unistd.h>

#define STEP_BYTES ((size_t)8 << 20)

typedef struct slice_read {
    int fd;
    uint64_t first, end; /* bytes [first, end) of the file */
    int err;             /* errno of a failed pread; -1 for a short file */
    uint64_t failed_at;
} slice_read;

static void *read_slice(void *arg)
{
    slice_read *r = arg;
    char *buf = malloc(STEP_BYTES);
    if (!buf) {
        r->err = ENOMEM;
        r->failed_at = r->first;
        return NULL;
    }
    for (uint64_t at = r->first; at < r->end;) {
        const size_t n = r->end - at < STEP_BYTES ? (size_t)(r->end - at) : STEP_BYTES;
        const ssize_t got = pread(r->fd, buf, n, (off_t)at);
        if (got <= 0) {
            r->err = got < 0 ? errno : -1;
            r->failed_at = at;
            break;
        }
        at += (uint64_t)got;
    }
    free(buf);
    return NULL;
}

/* QM_STORAGE_RATES="READ,WRITE": both bandwidths, or E-ARG naming the variable. */
static qm_code rates_from_env(const char *v, qm_discover_storage *out, qm_status *st)
{
    char buf[128];
    const char *comma = strchr(v, ',');
    if (!comma || strlen(v) >= sizeof buf)
        return qm_fail(st, QM_E_ARG, "QM_STORAGE_RATES: expected READ,WRITE bandwidths such as "
                       "'6 GB/s,2 GB/s' (got '%.64s')", v);
    snprintf(buf, sizeof buf, "%.*s", (int)(comma - v), v);
    if (qm_units_parse_bandwidth(buf, &out->read_bw_bytes_per_s, st) != QM_OK ||
        qm_units_parse_bandwidth(comma + 1, &out->write_bw_bytes_per_s, st) != QM_OK)
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
    /* the read back: T threads, each a contiguous slice (the first ones one byte longer when T
     * does not divide it), joined before the time is taken */
    int nt = 1;
    if (rc == QM_OK)
        rc = qm_npy_default_threads("storage", &nt, st);
    slice_read parts[QM_NPY_MAX_THREADS];
    pthread_t tid[QM_NPY_MAX_THREADS];
    int started = 0;
    t0 = qm_clock_now_s();
    for (int k = 0; rc == QM_OK && k < nt; ++k) {
        const uint64_t base = bytes / (uint64_t)nt, extra = bytes % (uint64_t)nt;
        const uint64_t first = base * (uint64_t)k + ((uint64_t)k < extra ? (uint64_t)k : extra);
        parts[k] = (slice_read){fd, first, first + base + ((uint64_t)k < extra), 0, 0};
        if (k + 1 < nt && pthread_create(&tid[k], NULL, read_slice, &parts[k]) == 0)
            started = k + 1;
        else
            read_slice(&parts[k]); /* the last slice (or one whose thread could not start) here */
    }
    for (int k = 0; k < started; ++k)
        pthread_join(tid[k], NULL);
    for (int k = 0; rc == QM_OK && k < nt; ++k)
        if (parts[k].err)
            rc = qm_fail(st, QM_E_IO, "storage: reading %s back failed at byte %llu of %llu: %s",
                         path, (unsigned long long)parts[k].failed_at, (unsigned long long)bytes,
                         parts[k].err > 0 ? strerror(parts[k].err) : "short file");
    const double tr = qm_clock_now_s() - t0;
    close(fd);
    unlink(path);
    if (rc == QM_OK) {
        /* a clock too coarse for the size reads as no time: keep the figure finite */
        out->write_bw_bytes_per_s = (double)bytes / (tw > 1e-9 ? tw : 1e-9);
        out->read_bw_bytes_per_s = (double)bytes / (tr > 1e-9 ? tr : 1e-9);
        char sz[32];
        snprintf(out->note, sizeof out->note, "measured by qmesh topo dump: %s written to %.60s "
                 "with fdatasync, then read back (page cache) by %d thread%s",
                 qm_format_bytes(bytes, sz, sizeof sz), dir, nt, nt == 1 ? "" : "s");
    }
done:
    free(buf);
    return rc;
}
