/* io_out.c — output files of `qmesh encode`: complex `.npy` arrays, small text files (the
 * manifest), the `--out-dir` directory replaced as one step, the checks made on output paths
 * before any work, the removal of temporaries left by dead runs, and the I/O fault hook.
 *
 * In: a path, a dtype and shape, then the data in chunks (or a whole text). Out: the file under
 * its requested name, complete, or nothing there at all.
 * Must not: write under the requested name directly. Every file is written to a temporary
 * `.<name>.qmesh-tmp.<host>.<pid>` in the same directory (same filesystem, so the rename is
 * atomic; the host and pid let a later run recognise and remove temporaries of dead processes,
 * qm_out_stale_sweep), written with write(2) in a loop, fsync'd and closed with every step checked,
 * and only then renamed over the requested name; any failure removes the temporary file. A
 * directory (`--out-dir`) is built as a sibling temporary directory of the same form and swapped in
 * with renameat2(RENAME_EXCHANGE) (rename(2) when the target does not exist yet). The parent
 * directory is fsync'd after a rename on a best-effort basis (some filesystems refuse).
 *
 * Fault hook (docs/io.md "Fault injection"): every I/O step that makes an output — open/create,
 * each write, fsync, close, rename, mkdir, the directory exchange — goes through io_step(), which
 * counts it and fails the K-th one with the configured errno (qm_io_fault_set). Cleanup steps
 * (unlink of our own temporaries, removal of the previous directory's content after the swap,
 * the stale sweep, the best-effort directory fsync) are not fault points: their failure cannot
 * change what is under a requested name, only leave a temporary that the next run removes.
 * Known wart: the hook is process-wide state (hooks on an instance would be cleaner); the CLI sets
 * it once from QM_FAULT_IO before any work, and only the encode path reads it.
 */
#define _GNU_SOURCE /* renameat2, RENAME_EXCHANGE (glibc 2.28+) */
#define _FILE_OFFSET_BITS 64

#include "io.h"
#include "io_internal.h"
#include "status_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- the fault hook -------------------------------------------------------------------------- */

static long g_fault_k;      /* 0: off */
static int g_fault_errno = EIO;
static _Atomic long g_fault_steps; /* I/O steps counted (numbered) so far */

void qm_io_fault_set(long k, int err)
{
    g_fault_k = k;
    g_fault_errno = err ? err : EIO;
    atomic_store(&g_fault_steps, 0);
}

long qm_io_fault_steps(void)
{
    return atomic_load(&g_fault_steps);
}

long qm_io_step_take(void)
{
    return atomic_fetch_add(&g_fault_steps, 1) + 1;
}

int qm_io_step_check(long step)
{
    if (g_fault_k > 0 && step == g_fault_k) {
        errno = g_fault_errno;
        return -1;
    }
    return 0;
}

/* Count one I/O step; -1 with errno set when it is the one to fail. */
static int io_step(void)
{
    return qm_io_step_check(qm_io_step_take());
}

static int io_open(const char *path, int flags, mode_t mode)
{
    return io_step() ? -1 : open(path, flags, mode);
}

static int io_fsync(int fd)
{
    return io_step() ? -1 : fsync(fd);
}

/* The descriptor is closed in every case. */
static int io_close(int fd)
{
    if (io_step()) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

static int io_rename(const char *from, const char *to)
{
    return io_step() ? -1 : rename(from, to);
}

static int io_mkdir(const char *path)
{
    return io_step() ? -1 : mkdir(path, 0777);
}

/* Write all n bytes at byte offset `at` with pwrite (no fault point: the caller counted the step);
 * -1 with errno on failure, *done = bytes written. */
static int pwrite_all(int fd, const void *data, size_t n, uint64_t at, size_t *done)
{
    *done = 0;
    const char *p = data;
    while (*done < n) {
        const ssize_t k = pwrite(fd, p + *done, n - *done, (off_t)(at + *done));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        *done += (size_t)k;
    }
    return 0;
}

/* ---- names ----------------------------------------------------------------------------------- */

#define TMP_TAG ".qmesh-tmp."
#define OLD_TAG ".qmesh-old."

/* This host's name with anything but [A-Za-z0-9_-] turned into '_' (so the name holds no '.'). */
static void host_tag(char *buf, size_t cap)
{
    char h[256] = {0};
    if (gethostname(h, sizeof h - 1) != 0 || !h[0])
        snprintf(h, sizeof h, "unknown");
    size_t i = 0;
    for (; h[i] && i + 1 < cap && i < 64; ++i) {
        const char c = h[i];
        buf[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_')
                     ? c
                     : '_';
    }
    buf[i] = '\0';
}

/* dir (without the trailing slash; "." when none) and base of path, in caller buffers. */
static int split_path(const char *path, char *dir, size_t dcap, const char **base)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        --len; /* "dir/" names dir */
    const char *slash = NULL;
    for (size_t i = 0; i < len; ++i)
        if (path[i] == '/')
            slash = path + i;
    int k;
    if (!slash)
        k = snprintf(dir, dcap, ".");
    else if (slash == path)
        k = snprintf(dir, dcap, "/");
    else
        k = snprintf(dir, dcap, "%.*s", (int)(slash - path), path);
    *base = slash ? slash + 1 : path;
    return k < 0 || (size_t)k >= dcap ? -1 : 0;
}

/* "<dir>/.<base><tag><host>.<pid>" */
static size_t tagged_name(const char *path, const char *tag, long pid, char *buf, size_t cap)
{
    char dir[4096], host[72];
    const char *base;
    if (split_path(path, dir, sizeof dir, &base) != 0)
        return 0;
    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/')
        --blen;
    host_tag(host, sizeof host);
    const int k = snprintf(buf, cap, "%s/.%.*s%s%s.%ld", dir, (int)blen, base, tag, host, pid);
    return k < 0 || (size_t)k >= cap ? 0 : (size_t)k;
}

size_t qm_out_tmp_name(const char *path, char *buf, size_t cap)
{
    return path ? tagged_name(path, TMP_TAG, (long)getpid(), buf, cap) : 0;
}

/* Best effort: make a rename in path's directory durable. */
static void fsync_parent(const char *path)
{
    char dir[4096];
    const char *base;
    if (split_path(path, dir, sizeof dir, &base) != 0)
        return;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void human(uint64_t bytes, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        ++u;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.2f %s", v, unit[u]);
}

/* A failed write: E-OUTPUT for a file-size limit or a full device (naming the numbers), E-IO
 * otherwise. */
static qm_code write_error(const char *path, const char *tmp, int e, uint64_t at, uint64_t total,
                           qm_status *st)
{
    char a[32], b[32];
    human(at, a, sizeof a);
    human(total, b, sizeof b);
    if (e == EFBIG) {
        struct rlimit rl;
        char l[32] = "unknown";
        if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY)
            snprintf(l, sizeof l, "unlimited");
        else if (getrlimit(RLIMIT_FSIZE, &rl) == 0)
            snprintf(l, sizeof l, "%llu bytes", (unsigned long long)rl.rlim_cur);
        return qm_fail(st, QM_E_OUTPUT,
                       "%s: the file-size limit stopped the write at %s of %s (%llu of %llu "
                       "bytes; RLIMIT_FSIZE %s); raise it (ulimit -f) or use --out-dir",
                       path, a, b, (unsigned long long)at, (unsigned long long)total, l);
    }
    if (e == ENOSPC || e == EDQUOT)
        return qm_fail(st, QM_E_OUTPUT,
                       "%s: %s after %s of %s (%llu of %llu bytes); free space or choose another "
                       "location", path, strerror(e), a, b, (unsigned long long)at,
                       (unsigned long long)total);
    return qm_fail(st, QM_E_IO, "%s: writing %s failed at byte %llu of %llu: %s", path, tmp,
                   (unsigned long long)at, (unsigned long long)total, strerror(e));
}

/* ---- the temporary file and the rename ------------------------------------------------------- */

/* Create (exclusively) the temporary file for path; returns the descriptor or -1 (st set). */
static int tmp_open(const char *path, char *tmp, size_t cap, qm_status *st)
{
    if (qm_out_tmp_name(path, tmp, cap) == 0) {
        qm_fail(st, QM_E_IO, "%s: the path is too long for a temporary name", path);
        return -1;
    }
    (void)unlink(tmp); /* ours from an earlier writer of this process */
    const int fd = io_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int e = errno;
        qm_fail(st, e == ENOSPC || e == EDQUOT ? QM_E_OUTPUT : QM_E_IO,
                "%s: cannot create the temporary file %s: %s%s", path, tmp, strerror(e),
                e == ENOENT ? "; the directory must exist (create it first, or use "
                              "--out-dir, which does)"
                            : "");
    }
    return fd;
}

/* fsync and close fd (closed in every case); E-IO naming the step. */
static qm_code tmp_sync(int fd, const char *tmp, const char *path, qm_status *st)
{
    qm_code rc = QM_OK;
    if (io_fsync(fd) != 0) {
        const int e = errno;
        rc = qm_fail(st, e == ENOSPC || e == EDQUOT ? QM_E_OUTPUT : QM_E_IO,
                     "%s: fsync of %s failed: %s", path, tmp, strerror(e));
        close(fd);
        return rc;
    }
    if (io_close(fd) != 0)
        rc = qm_fail(st, QM_E_IO, "%s: closing %s failed: %s", path, tmp, strerror(errno));
    return rc;
}

/* Rename tmp over path; tmp is gone in every case. */
static qm_code tmp_rename(const char *tmp, const char *path, qm_status *st)
{
    if (io_rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        return qm_fail(st, QM_E_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(e));
    }
    fsync_parent(path);
    return QM_OK;
}

/* ---- the .npy writer ------------------------------------------------------------------------- */

/* Data is written with pwrite at its element's offset (the file was preallocated at its final size
 * when the filesystem can), so writes of disjoint ranges may come from several threads
 * (qm_npy_writer_write_at; io_pool.c); the counters are atomic for that. */
struct qm_npy_writer {
    int fd;                /* -1 once synced and closed */
    qm_dtype dtype;
    uint64_t n_total;
    _Atomic uint64_t n_written;
    uint64_t head_bytes, bytes_total;
    _Atomic uint64_t bytes_written;
    _Atomic int write_failed;
    char tmp[4096];
    char path[];
};

#define NPY_ALIGN 64

/* Magic, version 1.0, header length, the dict padded with spaces to a multiple of 64 and '\n'.
 * Returns the byte count (0 when buf is too small). */
static size_t npy_header(char *buf, size_t cap, const char *descr, int ndim, const uint64_t *shape)
{
    char dict[256];
    int k;
    if (ndim == 1)
        k = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,), }", descr,
                     (unsigned long long)shape[0]);
    else
        k = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %llu), }", descr,
                     (unsigned long long)shape[0], (unsigned long long)shape[1]);
    if (k < 0 || (size_t)k >= sizeof dict)
        return 0;
    const size_t dlen = (size_t)k;
    const size_t pad = NPY_ALIGN - ((10 + dlen + 1) % NPY_ALIGN); /* 1..64, as NumPy does */
    const size_t hlen = dlen + pad + 1;
    const size_t total = 10 + hlen;
    if (total > cap || hlen > 0xffff)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, dlen);
    memset(buf + 10 + dlen, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

uint64_t qm_npy_file_bytes(qm_dtype dtype, int ndim, const uint64_t *shape)
{
    char head[512];
    const char *descr = dtype == QM_DTYPE_COMPLEX64 ? "<c8" : "<c16";
    const size_t h = npy_header(head, sizeof head, descr, ndim, shape);
    uint64_t n = qm_dtype_size(dtype);
    for (int i = 0; i < ndim; ++i)
        n *= shape[i];
    return h + n;
}

qm_code qm_npy_writer_open(const char *path, qm_dtype dtype, int ndim, const uint64_t *shape,
                           qm_npy_writer **out, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_npy_writer *w = NULL;
    if (out)
        *out = NULL;
    if (!path || !out || !shape)
        return qm_fail(st, QM_E_ARG, "npy writer: path, shape and out must not be NULL");
    if (dtype != QM_DTYPE_COMPLEX64 && dtype != QM_DTYPE_COMPLEX128)
        return qm_fail(st, QM_E_DTYPE, "%s: the npy writer takes complex64 or complex128 (got %s)",
                       path, qm_dtype_name(dtype) ? qm_dtype_name(dtype) : "an unknown dtype");
    if (ndim != 1 && ndim != 2)
        return qm_fail(st, QM_E_ARG, "%s: the npy writer takes a 1-D or 2-D shape (got %d-D)", path,
                       ndim);
    const uint64_t item = qm_dtype_size(dtype);
    uint64_t n = 1;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] == 0)
            return qm_fail(st, QM_E_ARG,
                           "%s: the npy writer got an empty shape (dimension %d is 0)", path, i);
        if (n > UINT64_MAX / item / shape[i])
            return qm_fail(st, QM_E_ARG, "%s: the npy writer's shape overflows 64-bit byte counts",
                           path);
        n *= shape[i];
    }
    const char *descr = dtype == QM_DTYPE_COMPLEX64 ? "<c8" : "<c16";
    char head[512];
    const size_t head_bytes = npy_header(head, sizeof head, descr, ndim, shape);
    if (head_bytes == 0)
        return qm_fail(st, QM_E_INTERNAL, "%s: internal: npy header does not fit", path);

    const size_t plen = strlen(path);
    w = calloc(1, sizeof *w + plen + 1);
    if (!w)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the npy writer", path);
    memcpy(w->path, path, plen + 1);
    w->dtype = dtype;
    w->n_total = n;
    w->bytes_total = head_bytes + n * item;
    w->fd = tmp_open(path, w->tmp, sizeof w->tmp, st);
    if (w->fd < 0) {
        rc = st ? st->code : QM_E_IO;
        w->tmp[0] = '\0'; /* nothing was created */
        goto fail;
    }
    size_t done = 0;
    if (io_step() != 0 || pwrite_all(w->fd, head, head_bytes, 0, &done) != 0) {
        rc = write_error(path, w->tmp, errno, done, w->bytes_total, st);
        goto fail;
    }
    w->head_bytes = head_bytes;
    atomic_store(&w->bytes_written, head_bytes);
    *out = w;
    return QM_OK;

fail:
    qm_npy_writer_abort(w);
    return rc;
}

qm_code qm_npy_writer_reserve(qm_npy_writer *writer, qm_status *st)
{
    if (!writer || writer->fd < 0)
        return qm_fail(st, QM_E_ARG, "npy writer: an open writer is needed");
    /* fallocate: the blocks are reserved, no zeros written; glibc's posix_fallocate would write
     * zeros on a filesystem without it, which costs a second pass over the file */
    if (io_step() == 0 && (fallocate(writer->fd, 0, 0, (off_t)writer->bytes_total) == 0 ||
                           errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL))
        return QM_OK;
    const int e = errno;
    char b[32];
    human(writer->bytes_total, b, sizeof b);
    atomic_store(&writer->write_failed, 1);
    if (e == ENOSPC || e == EDQUOT || e == EFBIG)
        return qm_fail(st, QM_E_OUTPUT, "%s: cannot reserve %s for the file (%llu bytes): %s; "
                       "free space or choose another location", writer->path, b,
                       (unsigned long long)writer->bytes_total, strerror(e));
    return qm_fail(st, QM_E_IO, "%s: reserving %llu bytes for %s failed: %s", writer->path,
                   (unsigned long long)writer->bytes_total, writer->tmp, strerror(e));
}

qm_code qm_npy_writer_write_at(qm_npy_writer *writer, uint64_t elem_off, const void *data,
                               uint64_t n_elems, long step, qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    if (elem_off > writer->n_total || n_elems > writer->n_total - elem_off)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s: writing elements [%llu, %llu) would exceed the shape's %llu",
                       writer->path, (unsigned long long)elem_off,
                       (unsigned long long)(elem_off + n_elems),
                       (unsigned long long)writer->n_total);
    if (n_elems == 0)
        return QM_OK;
    if (!data)
        return qm_fail(st, QM_E_ARG, "%s: npy writer: data must not be NULL", writer->path);
    /* A write that comes after another's failure still writes its own bytes: the file can only
     * be aborted now (sync refuses), and refusing here would let a pool thread that started this
     * write a moment late report "failed" for a chunk numbered before the one that did fail
     * (io_pool.c reports the lowest-numbered failure, whatever the thread timing). */
    if (writer->fd < 0)
        return qm_fail(st, QM_E_ARG, "%s: npy writer: already synced", writer->path);
    const uint64_t es = qm_dtype_size(writer->dtype);
    const size_t bytes = (size_t)(n_elems * es);
    const uint64_t at = writer->head_bytes + elem_off * es;
    size_t done = 0;
    if (qm_io_step_check(step) != 0 || pwrite_all(writer->fd, data, bytes, at, &done) != 0) {
        const int e = errno;
        atomic_store(&writer->write_failed, 1);
        return write_error(writer->path, writer->tmp, e, at + done, writer->bytes_total, st);
    }
    atomic_fetch_add(&writer->bytes_written, bytes);
    atomic_fetch_add(&writer->n_written, n_elems);
    return QM_OK;
}

qm_code qm_npy_writer_write(qm_npy_writer *writer, const void *data, uint64_t n_elems,
                            qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    const uint64_t done = atomic_load(&writer->n_written);
    if (n_elems > writer->n_total - done)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s: writing %llu more elements would exceed the shape's %llu "
                       "(%llu written)",
                       writer->path, (unsigned long long)n_elems,
                       (unsigned long long)writer->n_total, (unsigned long long)done);
    if (n_elems == 0)
        return QM_OK;
    if (atomic_load(&writer->write_failed)) /* appending after a hole: the file is lost anyway */
        return qm_fail(st, QM_E_IO, "%s: not written: an earlier write to %s failed",
                       writer->path, writer->tmp);
    return qm_npy_writer_write_at(writer, done, data, n_elems, qm_io_step_take(), st);
}

qm_code qm_npy_writer_sync(qm_npy_writer *writer, qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    if (writer->fd < 0)
        return QM_OK; /* already synced */
    if (atomic_load(&writer->write_failed))
        return qm_fail(st, QM_E_IO, "%s: not committed: an earlier write to %s failed",
                       writer->path, writer->tmp);
    if (atomic_load(&writer->n_written) != writer->n_total)
        return qm_fail(st, QM_E_ARG, "%s: not committed: wrote %llu of %llu elements",
                       writer->path, (unsigned long long)atomic_load(&writer->n_written),
                       (unsigned long long)writer->n_total);
    const int fd = writer->fd;
    writer->fd = -1;
    return tmp_sync(fd, writer->tmp, writer->path, st);
}

qm_code qm_npy_writer_commit(qm_npy_writer *writer, qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    qm_code rc = qm_npy_writer_sync(writer, st);
    if (rc != QM_OK) {
        qm_npy_writer_abort(writer);
        return rc;
    }
    rc = tmp_rename(writer->tmp, writer->path, st);
    free(writer);
    return rc;
}

void qm_npy_writer_abort(qm_npy_writer *writer)
{
    if (!writer)
        return;
    if (writer->fd >= 0)
        close(writer->fd);
    if (writer->tmp[0])
        unlink(writer->tmp);
    free(writer);
}

/* ---- small text files ------------------------------------------------------------------------ */

qm_code qm_atomic_write_text(const char *path, const char *text, qm_status *st)
{
    if (!path || !text)
        return qm_fail(st, QM_E_ARG, "atomic write: path and text must not be NULL");
    char tmp[4096];
    const int fd = tmp_open(path, tmp, sizeof tmp, st);
    if (fd < 0)
        return st ? st->code : QM_E_IO;
    const size_t n = strlen(text);
    size_t done = 0;
    qm_code rc = QM_OK;
    if (io_step() != 0 || pwrite_all(fd, text, n, 0, &done) != 0) {
        rc = write_error(path, tmp, errno, done, n, st);
        close(fd);
    } else {
        rc = tmp_sync(fd, tmp, path, st);
    }
    if (rc != QM_OK) {
        unlink(tmp);
        return rc;
    }
    return tmp_rename(tmp, path, st);
}

/* ---- --out-dir ------------------------------------------------------------------------------- */

qm_code qm_out_dir_create(const char *path, qm_status *st)
{
    if (!path || !*path)
        return qm_fail(st, QM_E_ARG, "out dir: the path must not be empty");
    if (mkdir(path, 0777) == 0)
        return QM_OK;
    const int e = errno;
    struct stat sb;
    if (e == EEXIST) {
        if (stat(path, &sb) != 0)
            return qm_fail(st, QM_E_IO, "%s: cannot stat the output directory: %s", path,
                           strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            return qm_fail(st, QM_E_IO, "%s: exists and is not a directory; choose another "
                           "--out-dir or remove the file", path);
        return QM_OK;
    }
    if (e == ENOENT)
        return qm_fail(st, QM_E_IO, "%s: cannot create the output directory: its parent directory "
                       "does not exist (only one level is created)", path);
    if (e == ENOTDIR)
        return qm_fail(st, QM_E_IO, "%s: cannot create the output directory: a component of the "
                       "path is not a directory", path);
    return qm_fail(st, QM_E_IO, "%s: cannot create the output directory: %s", path, strerror(e));
}

qm_code qm_out_dir_stage(const char *path, char *tmp, size_t cap, qm_status *st)
{
    if (!path || !*path || !tmp)
        return qm_fail(st, QM_E_ARG, "out dir: the path must not be empty");
    if (qm_out_tmp_name(path, tmp, cap) == 0)
        return qm_fail(st, QM_E_IO, "%s: the path is too long for a temporary name", path);
    qm_out_dir_remove(tmp); /* ours from an earlier stage of this process */
    if (io_mkdir(tmp) != 0) {
        const int e = errno;
        const qm_code rc = qm_fail(st, e == ENOSPC || e == EDQUOT ? QM_E_OUTPUT : QM_E_IO,
                                   "%s: cannot create the temporary directory %s: %s", path, tmp,
                                   strerror(e));
        tmp[0] = '\0';
        return rc;
    }
    return QM_OK;
}

qm_code qm_out_dir_swap(const char *path, const char *tmp, bool *replaced, qm_status *st)
{
    *replaced = false;
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (io_rename(tmp, path) != 0)
            return qm_fail(st, QM_E_IO, "%s: cannot rename %s to it: %s", path, tmp,
                           strerror(errno));
        fsync_parent(path);
        return QM_OK;
    }
    if (io_step() == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
        *replaced = true;
        fsync_parent(path);
        return QM_OK;
    }
    const int e = errno;
    if (e != EINVAL && e != ENOSYS && e != ENOTSUP)
        return qm_fail(st, QM_E_IO, "%s: cannot exchange it with %s: %s", path, tmp, strerror(e));
    /* the filesystem has no RENAME_EXCHANGE: move the old directory aside under a name the stale
     * sweep restores when a crash leaves it there, then move the new one in */
    char old[4096];
    if (tagged_name(path, OLD_TAG, (long)getpid(), old, sizeof old) == 0)
        return qm_fail(st, QM_E_IO, "%s: the path is too long for a temporary name", path);
    if (io_rename(path, old) != 0)
        return qm_fail(st, QM_E_IO, "%s: cannot move it aside to %s: %s", path, old,
                       strerror(errno));
    if (io_rename(tmp, path) != 0) {
        const int e2 = errno;
        (void)rename(old, path);
        return qm_fail(st, QM_E_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(e2));
    }
    (void)rename(old, tmp); /* the old content where the caller expects it */
    *replaced = true;
    fsync_parent(path);
    return QM_OK;
}

/* Remove a file, or a directory and the files in it (one level: our directories hold no others,
 * but a nested one is removed as deep as it goes). Best effort. */
static void remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        char sub[4096];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
                remove_tree(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

void qm_out_dir_remove(const char *tmp)
{
    if (tmp && *tmp)
        remove_tree(tmp);
}

/* ---- temporaries of dead runs ---------------------------------------------------------------- */

/* No such process (ESRCH), or a zombie: a killed process whose parent has not reaped it (a
 * launcher such as mpiexec that exited first, under an init that does not reap) still answers
 * kill(pid, 0), but it will never touch its files again. Linux's /proc tells; elsewhere only
 * ESRCH counts. */
static bool pid_dead(long pid)
{
    if (kill((pid_t)pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

qm_code qm_out_stale_sweep(const char *path, int *n_removed, qm_status *st)
{
    if (n_removed)
        *n_removed = 0;
    if (!path || !*path)
        return qm_fail(st, QM_E_ARG, "stale sweep: the path must not be empty");
    char dir[4096], host[72], prefix[600];
    const char *base;
    if (split_path(path, dir, sizeof dir, &base) != 0)
        return QM_OK;
    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/')
        --blen;
    host_tag(host, sizeof host);
    DIR *d = opendir(dir);
    if (!d)
        return QM_OK; /* the checks before any work report a missing directory */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (n[0] != '.' || strncmp(n + 1, base, blen) != 0)
            continue;
        const char *rest = n + 1 + blen;
        bool old = false;
        if (strncmp(rest, TMP_TAG, strlen(TMP_TAG)) == 0)
            rest += strlen(TMP_TAG);
        else if (strncmp(rest, OLD_TAG, strlen(OLD_TAG)) == 0)
            rest += strlen(OLD_TAG), old = true;
        else
            continue;
        const size_t hl = strlen(host);
        if (strncmp(rest, host, hl) != 0 || rest[hl] != '.')
            continue; /* another host's: its process may be alive */
        char *end = NULL;
        errno = 0;
        const long pid = strtol(rest + hl + 1, &end, 10);
        if (errno || !end || *end || pid <= 0 || pid == (long)getpid())
            continue;
        if (!pid_dead(pid))
            continue; /* alive (or not ours to know) */
        snprintf(prefix, sizeof prefix, "%.*s", (int)(sizeof prefix - 1), n);
        char full[4700];
        snprintf(full, sizeof full, "%s/%s", dir, prefix);
        struct stat sb;
        if (old && lstat(path, &sb) != 0) {
            /* a crash between the two renames of the fallback swap: the old directory is the
             * only copy; put it back */
            if (rename(full, path) == 0 && n_removed)
                ++*n_removed;
            continue;
        }
        remove_tree(full);
        if (n_removed)
            ++*n_removed;
    }
    closedir(d);
    return QM_OK;
}

/* ---- checks before any work ------------------------------------------------------------------ */

qm_code qm_out_check(const char *path, bool is_dir, uint64_t total_bytes, uint64_t largest_file,
                     bool force, qm_status *st)
{
    if (!path || !*path)
        return qm_fail(st, QM_E_ARG, "output check: the path must not be empty");
    const char *opt = is_dir ? "--out-dir" : "--out";
    char dir[4096];
    const char *base;
    if (split_path(path, dir, sizeof dir, &base) != 0)
        return qm_fail(st, QM_E_OUTPUT, "%s: the path is too long", path);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return qm_fail(st, QM_E_OUTPUT, "%s: the directory %s %s; create it first", path, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return qm_fail(st, QM_E_OUTPUT, "%s: %s is not a directory", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return qm_fail(st, QM_E_OUTPUT, "%s: the directory %s is not writable (%s)", path, dir,
                       strerror(errno));
    if (stat(path, &sb) == 0) {
        if (!is_dir && S_ISDIR(sb.st_mode))
            return qm_fail(st, QM_E_OUTPUT, "%s: is a directory; --out names a file (use "
                           "--out-dir for a directory of shards)", path);
        if (is_dir && !S_ISDIR(sb.st_mode))
            return qm_fail(st, QM_E_OUTPUT, "%s: exists and is not a directory; choose another "
                           "--out-dir or remove the file", path);
        if (is_dir && !force) {
            /* replaced as a whole: only when it is empty or a qmesh output */
            DIR *d = opendir(path);
            int n = 0, manifest = 0;
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                    continue;
                ++n;
                manifest |= strcmp(e->d_name, "manifest.json") == 0;
            }
            if (d)
                closedir(d);
            if (n > 0 && !manifest)
                return qm_fail(st, QM_E_OUTPUT, "%s: holds %d entr%s but no manifest.json, so "
                               "it is not a qmesh output and replacing the whole directory would "
                               "delete them; pass --force or choose another --out-dir", path, n,
                               n == 1 ? "y" : "ies");
        }
    }
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0) {
        const uint64_t free_bytes = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
        if (free_bytes < total_bytes) {
            char a[32], b[32];
            human(total_bytes, a, sizeof a);
            human(free_bytes, b, sizeof b);
            return qm_fail(st, QM_E_OUTPUT, "%s: %s needs %s but %s is free on %s (%llu < %llu "
                           "bytes); free space or choose another location", path, opt, a, b, dir,
                           (unsigned long long)free_bytes, (unsigned long long)total_bytes);
        }
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)rl.rlim_cur < largest_file) {
        char a[32], b[32];
        human(largest_file, a, sizeof a);
        human((uint64_t)rl.rlim_cur, b, sizeof b);
        return qm_fail(st, QM_E_OUTPUT, "%s: a file of %s (%llu bytes) exceeds the file-size "
                       "limit %s (RLIMIT_FSIZE %llu bytes); raise it (ulimit -f)%s", path, a,
                       (unsigned long long)largest_file, b, (unsigned long long)rl.rlim_cur,
                       is_dir ? "" : " or use --out-dir (one file per shard)");
    }
    return QM_OK;
}
