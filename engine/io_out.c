/* io_out.c — output files of `qmesh encode`: complex `.npy` arrays, small text files (the
 * manifest), and the `--out-dir` directory.
 *
 * In: a path, a dtype and shape, then the data in chunks (or a whole text). Out: the file under
 * its requested name, complete, or nothing there at all.
 * Must not: write under the requested name directly. Every file is written to "<name>.tmp.<pid>"
 * in the same directory (so that the rename cannot cross filesystems), flushed, fsync'd and closed
 * with every step checked, and only then renamed over the requested name; any failure removes the
 * temporary file. The directory is fsync'd after the rename on a best-effort basis (some
 * filesystems refuse to fsync a directory; that is not reported).
 */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "io.h"
#include "status_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- the temporary file and the rename ------------------------------------------------------- */

static char *tmp_name(const char *path)
{
    const size_t n = strlen(path) + 32;
    char *t = malloc(n);
    if (t)
        snprintf(t, n, "%s.tmp.%ld", path, (long)getpid());
    return t;
}

/* Create (truncate) the temporary file for path. *tmp_out is malloc'd; both are NULL on failure. */
static qm_code tmp_open(const char *path, char **tmp_out, FILE **f_out, qm_status *st)
{
    *tmp_out = NULL;
    *f_out = NULL;
    char *tmp = tmp_name(path);
    if (!tmp)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the temporary file name", path);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int e = errno;
        qm_code rc = qm_fail(st, QM_E_IO, "%s: cannot create the temporary file %s: %s%s", path,
                             tmp, strerror(e),
                             e == ENOENT ? "; the directory must exist (create it first, or use "
                                           "--out-dir, which does)"
                                         : "");
        free(tmp);
        return rc;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        const int e = errno;
        close(fd);
        unlink(tmp);
        qm_code rc =
            qm_fail(st, QM_E_IO, "%s: cannot open a stream on %s: %s", path, tmp, strerror(e));
        free(tmp);
        return rc;
    }
    *tmp_out = tmp;
    *f_out = f;
    return QM_OK;
}

/* Best effort: make the rename durable. */
static void fsync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Flush, fsync, close f and rename tmp over path; f is closed and tmp gone in every case. */
static qm_code tmp_finish(FILE *f, const char *tmp, const char *path, qm_status *st)
{
    qm_code rc = QM_OK;
    if (fflush(f) != 0) {
        rc = qm_fail(st, QM_E_IO, "%s: writing %s failed: %s", path, tmp, strerror(errno));
        goto close_file;
    }
    if (fsync(fileno(f)) != 0) {
        rc = qm_fail(st, QM_E_IO, "%s: fsync of %s failed: %s", path, tmp, strerror(errno));
        goto close_file;
    }
close_file:
    if (fclose(f) != 0 && rc == QM_OK)
        rc = qm_fail(st, QM_E_IO, "%s: closing %s failed: %s", path, tmp, strerror(errno));
    if (rc != QM_OK)
        goto remove_tmp;
    if (rename(tmp, path) != 0) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        goto remove_tmp;
    }
    fsync_parent(path);
    return QM_OK;

remove_tmp:
    unlink(tmp);
    return rc;
}

/* ---- the .npy writer ------------------------------------------------------------------------- */

struct qm_npy_writer {
    FILE *f;
    qm_dtype dtype;
    uint64_t n_total, n_written;
    int write_failed;
    char *tmp;
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
    if ((rc = tmp_open(path, &w->tmp, &w->f, st)) != QM_OK)
        goto fail;
    if (fwrite(head, 1, head_bytes, w->f) != head_bytes) {
        rc = qm_fail(st, QM_E_IO, "%s: writing the header to %s failed: %s", path, w->tmp,
                     strerror(errno));
        goto fail;
    }
    *out = w;
    return QM_OK;

fail:
    qm_npy_writer_abort(w);
    return rc;
}

qm_code qm_npy_writer_write(qm_npy_writer *writer, const void *data, uint64_t n_elems,
                            qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    if (n_elems > writer->n_total - writer->n_written)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s: writing %llu more elements would exceed the shape's %llu "
                       "(%llu written)",
                       writer->path, (unsigned long long)n_elems,
                       (unsigned long long)writer->n_total, (unsigned long long)writer->n_written);
    if (n_elems == 0)
        return QM_OK;
    if (!data)
        return qm_fail(st, QM_E_ARG, "%s: npy writer: data must not be NULL", writer->path);
    const size_t bytes = (size_t)(n_elems * qm_dtype_size(writer->dtype));
    if (fwrite(data, 1, bytes, writer->f) != bytes) {
        writer->write_failed = 1;
        return qm_fail(st, QM_E_IO, "%s: writing %zu bytes to %s failed: %s", writer->path, bytes,
                       writer->tmp, strerror(errno));
    }
    writer->n_written += n_elems;
    return QM_OK;
}

qm_code qm_npy_writer_commit(qm_npy_writer *writer, qm_status *st)
{
    if (!writer)
        return qm_fail(st, QM_E_ARG, "npy writer: writer must not be NULL");
    qm_code rc;
    if (writer->write_failed) {
        rc = qm_fail(st, QM_E_IO, "%s: not committed: an earlier write to %s failed", writer->path,
                     writer->tmp);
        qm_npy_writer_abort(writer);
        return rc;
    }
    if (writer->n_written != writer->n_total) {
        rc = qm_fail(st, QM_E_ARG, "%s: not committed: wrote %llu of %llu elements", writer->path,
                     (unsigned long long)writer->n_written, (unsigned long long)writer->n_total);
        qm_npy_writer_abort(writer);
        return rc;
    }
    rc = tmp_finish(writer->f, writer->tmp, writer->path, st);
    free(writer->tmp);
    free(writer);
    return rc;
}

void qm_npy_writer_abort(qm_npy_writer *writer)
{
    if (!writer)
        return;
    if (writer->f)
        fclose(writer->f);
    if (writer->tmp)
        unlink(writer->tmp);
    free(writer->tmp);
    free(writer);
}

/* ---- small text files ------------------------------------------------------------------------ */

qm_code qm_atomic_write_text(const char *path, const char *text, qm_status *st)
{
    if (!path || !text)
        return qm_fail(st, QM_E_ARG, "atomic write: path and text must not be NULL");
    char *tmp = NULL;
    FILE *f = NULL;
    qm_code rc = tmp_open(path, &tmp, &f, st);
    if (rc != QM_OK)
        return rc;
    const size_t n = strlen(text);
    if (fwrite(text, 1, n, f) != n) {
        rc = qm_fail(st, QM_E_IO, "%s: writing %zu bytes to %s failed: %s", path, n, tmp,
                     strerror(errno));
        fclose(f);
        unlink(tmp);
        goto done;
    }
    rc = tmp_finish(f, tmp, path, st);
done:
    free(tmp);
    return rc;
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
