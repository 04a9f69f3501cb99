/* io_hdf5.c — HDF5 datasets as `qmesh encode` input (docs/io.md "HDF5 input").
 *
 * In: a file with the HDF5 signature (or named *.h5 / *.hdf5) and a dataset path, or none (then
 * the file's only dataset). Out: the dataset's facts (dtype, shape) and element ranges read on
 * demand through hyperslab selections, in pieces of at most the reader's block, never the whole
 * dataset at once.
 * Must not: print (HDF5's own error printing is switched off: H5Eset_auto2 per calling thread; its
 * reason is taken from the error stack into our one-line message), write to the file, or touch a
 * backend.
 *
 * Types: 32-bit floats are read as float32, 64-bit floats as float64 (any byte order: HDF5
 * converts to the host's); 16-bit floats, integers of up to 64 bits and enums of them (h5py's
 * booleans: FALSE = 0, TRUE = 1; an enum reads as its members' values, as h5py reads it) are
 * converted to float64 by HDF5 (exact, but for 64-bit integers beyond 2^53, rounded to the nearest
 * float64 as a .npy file's are); anything else (128-bit floats, strings, compounds, ...) is
 * E-DTYPE. A dropped column is left out by the selection itself (two
 * hyperslabs joined by H5S_SELECT_OR, iterated in row-major order), so no staging copy is made.
 * Known warts: serial HDF5 only; under MPI every rank opens the file itself and reads its own
 * range (parallel HDF5 would add collective MPI-IO reads, one open shared by the ranks, which
 * matters on parallel filesystems, not for correctness). HDF5 calls of one reader are serialised
 * by a mutex (a library built without thread safety is then still safe within one reader).
 */
#define _POSIX_C_SOURCE 200809L

#include "io.h"
#include "status_internal.h"

#include <hdf5.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define H5_LIST_CAP 512 /* bytes of dataset names listed in a message */

struct qm_hdf5_reader {
    char path[512];
    qm_hdf5_info info;
    hid_t file, dset, space, memtype;
    uint64_t cols;        /* the dataset's columns (1-D: its length) */
    uint64_t block_bytes; /* the most bytes per H5Dread */
    pthread_mutex_t lock;
};

/* ---- HDF5's reason, quiet ----------------------------------------------------------------- */

static void h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static herr_t reason_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    char *buf = data;
    if (n == 0 && e->desc && e->desc[0])
        snprintf(buf, 160, "%s", e->desc);
    return 0;
}

/* The innermost message of this thread's HDF5 error stack, on one line; the stack is cleared. */
static void h5_reason(char buf[160])
{
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_cb, buf);
    H5Eclear2(H5E_DEFAULT);
    if (!buf[0])
        snprintf(buf, 160, "%s", "HDF5 gave no reason");
    for (char *p = buf; *p; ++p)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* ---- datasets of a file ------------------------------------------------------------------- */

typedef struct ds_list {
    int n;
    char first[256];
    char text[H5_LIST_CAP];
} ds_list;

static herr_t list_cb(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    ds_list *l = data;
    if (info->type != H5L_TYPE_HARD)
        return 0;
    const hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    if (H5Iget_type(obj) == H5I_DATASET) {
        if (l->n == 0)
            snprintf(l->first, sizeof l->first, "/%s", name);
        const size_t used = strlen(l->text);
        if (used + 8 < sizeof l->text)
            snprintf(l->text + used, sizeof l->text - used, "%s'/%s'", l->n ? ", " : "", name);
        l->n++;
    }
    H5Oclose(obj);
    return 0;
}

static void list_datasets(hid_t file, ds_list *l)
{
    memset(l, 0, sizeof *l);
    H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, list_cb, l);
    H5Eclear2(H5E_DEFAULT);
    if (strlen(l->text) + 8 >= sizeof l->text)
        snprintf(l->text + sizeof l->text - 5, 5, "%s", "...");
}

/* ---- types -------------------------------------------------------------------------------- */

/* "64-bit signed integer", "16-bit float", "string", ... */
static void type_name(hid_t t, char *buf, size_t cap)
{
    const H5T_class_t c = H5Tget_class(t);
    const unsigned bits = (unsigned)H5Tget_size(t) * 8u;
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, cap, "%u-bit %s integer", bits,
                 H5Tget_sign(t) == H5T_SGN_NONE ? "unsigned" : "signed");
        return;
    case H5T_FLOAT: snprintf(buf, cap, "%u-bit float", bits); return;
    case H5T_STRING: snprintf(buf, cap, "%s", "string"); return;
    case H5T_COMPOUND: snprintf(buf, cap, "%s", "compound"); return;
    case H5T_ENUM: snprintf(buf, cap, "%s", "enum"); return;
    case H5T_ARRAY: snprintf(buf, cap, "%s", "array"); return;
    case H5T_BITFIELD: snprintf(buf, cap, "%s", "bitfield"); return;
    case H5T_OPAQUE: snprintf(buf, cap, "%s", "opaque"); return;
    case H5T_REFERENCE: snprintf(buf, cap, "%s", "reference"); return;
    case H5T_VLEN: snprintf(buf, cap, "%s", "variable-length"); return;
    default: snprintf(buf, cap, "%s", "unknown"); return;
    }
}

static qm_code pick_type(qm_hdf5_reader *r, qm_status *st)
{
    const hid_t t = H5Dget_type(r->dset);
    if (t < 0) {
        char why[160];
        h5_reason(why);
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s': cannot read its type: %s", r->path,
                       r->info.dataset, why);
    }
    const H5T_class_t c = H5Tget_class(t);
    const size_t size = H5Tget_size(t);
    qm_code rc = QM_OK;
    if (c == H5T_FLOAT && size == 4) {
        r->info.dtype = QM_DTYPE_FLOAT32;
        r->memtype = H5T_NATIVE_FLOAT;
    } else if ((c == H5T_FLOAT && (size == 8 || size == 2)) || (c == H5T_INTEGER && size <= 8) ||
               (c == H5T_ENUM && size <= 8)) {
        r->info.dtype = QM_DTYPE_FLOAT64;
        r->memtype = H5T_NATIVE_DOUBLE;
    } else {
        char name[64];
        type_name(t, name, sizeof name);
        rc = qm_fail(st, QM_E_DTYPE, "%s: dataset '%s' holds %s values (accepted: 16-, 32- or "
                     "64-bit floats, integers of up to 64 bits and enums of them (h5py's bool), "
                     "32-bit floats read as float32, the others as float64); convert it, e.g. "
                     "h5py: f['x'] = a.astype('f8')", r->path, r->info.dataset, name);
    }
    H5Tclose(t);
    return rc;
}

/* ---- shape -------------------------------------------------------------------------------- */

static void shape_text(const hsize_t *d, int nd, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < nd && used < cap; ++i)
        used += (size_t)snprintf(buf + used, cap - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)d[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s", nd == 1 ? ",)" : ")");
}

static qm_code pick_shape(qm_hdf5_reader *r, qm_status *st)
{
    const char *p = r->path, *ds = r->info.dataset;
    if ((r->space = H5Dget_space(r->dset)) < 0) {
        char why[160];
        h5_reason(why);
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s': cannot read its shape: %s", p, ds, why);
    }
    const H5S_class_t cls = H5Sget_simple_extent_type(r->space);
    if (cls == H5S_NULL)
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s' has no data (a null dataspace): nothing "
                       "to encode", p, ds);
    const int nd = H5Sget_simple_extent_ndims(r->space);
    hsize_t d[H5S_MAX_RANK] = {0};
    if (cls == H5S_SCALAR || nd <= 0)
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s' is a 0-D scalar and is not supported; "
                       "store one sample as a 1-D dataset (F,) or samples as 2-D (B, F)", p, ds);
    H5Sget_simple_extent_dims(r->space, d, NULL);
    char shape[128];
    shape_text(d, nd, shape, sizeof shape);
    if (nd > 2)
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s' is %d-D (shape %s) and is not supported; "
                       "store one sample as 1-D (F,) or samples as 2-D (B, F)", p, ds, nd, shape);
    for (int i = 0; i < nd; ++i)
        if (d[i] == 0)
            return qm_fail(st, QM_E_INPUT, "%s: dataset '%s' is empty (shape %s): nothing to "
                           "encode", p, ds, shape);
    const uint64_t rows = nd == 2 ? d[0] : 1, cols = nd == 2 ? d[1] : d[0];
    if (cols > UINT64_MAX / 8 / rows)
        return qm_fail(st, QM_E_INPUT, "%s: dataset '%s' shape %s is too large: its byte count "
                       "overflows 64 bits", p, ds, shape);
    r->info.ndim = nd;
    r->info.shape[0] = d[0];
    r->info.shape[1] = nd == 2 ? d[1] : 0;
    r->info.n_samples = rows;
    r->info.n_features = cols;
    r->info.n_elems = rows * cols;
    r->cols = cols;
    const hid_t dcpl = H5Dget_create_plist(r->dset);
    r->info.chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return QM_OK;
}

/* ---- open / close ------------------------------------------------------------------------- */

static qm_code open_dataset(qm_hdf5_reader *r, const char *dataset, qm_status *st)
{
    ds_list l;
    list_datasets(r->file, &l);
    if (!dataset) {
        if (l.n == 0)
            return qm_fail(st, QM_E_INPUT, "%s: the file holds no dataset: nothing to encode",
                           r->path);
        if (l.n > 1)
            return qm_fail(st, QM_E_INPUT, "%s: the file holds %d datasets (%s); choose one "
                           "with --dataset NAME", r->path, l.n, l.text);
        dataset = l.first;
    }
    r->dset = H5Dopen2(r->file, dataset, H5P_DEFAULT);
    if (r->dset < 0 || H5Iget_type(r->dset) != H5I_DATASET) {
        H5Eclear2(H5E_DEFAULT);
        if (l.n == 0)
            return qm_fail(st, QM_E_INPUT, "%s: no dataset '%.200s' (the file holds no dataset)",
                           r->path, dataset);
        return qm_fail(st, QM_E_INPUT, "%s: no dataset '%.200s' (the file holds %s)", r->path,
                       dataset, l.text);
    }
    if (H5Iget_name(r->dset, r->info.dataset, sizeof r->info.dataset) <= 0)
        snprintf(r->info.dataset, sizeof r->info.dataset, "%.255s", dataset);
    return QM_OK;
}

qm_code qm_hdf5_open(const char *path, const char *dataset, qm_hdf5_reader **out, qm_status *st)
{
    if (!out)
        return qm_fail(st, QM_E_ARG, "hdf5 open: out must not be NULL");
    *out = NULL;
    if (!path)
        return qm_fail(st, QM_E_ARG, "hdf5 open: path must not be NULL");
    int fd = -1;
    uint64_t size = 0;
    qm_code rc = qm_input_file_open(path, &fd, &size, st); /* a regular file, never a FIFO */
    if (rc != QM_OK)
        return rc;
    close(fd);
    qm_hdf5_reader *r = calloc(1, sizeof *r);
    if (!r)
        return qm_fail(st, QM_E_NOMEM, "%s: out of host memory for the HDF5 reader", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->file = r->dset = r->space = -1;
    r->info.dropped_column = -1;
    r->block_bytes = QM_HDF5_BLOCK_BYTES;
    pthread_mutex_init(&r->lock, NULL);
    h5_quiet();
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, false, true); /* read-only: no lock, so no failure without flock */
#endif
    r->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    char why[160] = ""; /* taken before the next call: every HDF5 call clears the error stack */
    if (r->file < 0)
        h5_reason(why);
    H5Pclose(fapl);
    if (r->file < 0) {
        rc = qm_fail(st, QM_E_INPUT, "%s: cannot open as HDF5 (%llu bytes): %s", path,
                     (unsigned long long)size, why);
    }
    if (rc == QM_OK)
        rc = open_dataset(r, dataset, st);
    if (rc == QM_OK)
        rc = pick_type(r, st);
    if (rc == QM_OK)
        rc = pick_shape(r, st);
    if (rc != QM_OK) {
        qm_hdf5_close(r);
        return rc;
    }
    *out = r;
    return QM_OK;
}

void qm_hdf5_close(qm_hdf5_reader *r)
{
    if (!r)
        return;
    h5_quiet();
    if (r->space >= 0)
        H5Sclose(r->space);
    if (r->dset >= 0)
        H5Dclose(r->dset);
    if (r->file >= 0)
        H5Fclose(r->file);
    H5Eclear2(H5E_DEFAULT);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

const qm_hdf5_info *qm_hdf5_reader_info(const qm_hdf5_reader *r)
{
    return &r->info;
}

qm_code qm_hdf5_reader_set_block_bytes(qm_hdf5_reader *r, uint64_t block_bytes, qm_status *st)
{
    if (!r || block_bytes == 0)
        return qm_fail(st, QM_E_ARG, "hdf5 block: a reader and a block of at least 1 byte are "
                       "needed");
    r->block_bytes = block_bytes;
    return QM_OK;
}

qm_code qm_hdf5_reader_drop_column(qm_hdf5_reader *r, uint64_t column, qm_status *st)
{
    if (!r)
        return qm_fail(st, QM_E_ARG, "hdf5 drop column: reader must not be NULL");
    qm_hdf5_info *in = &r->info;
    return qm_input_drop_column(r->path, "hdf5", in->ndim, in->shape, r->cols, column,
                                &in->dropped_column, &in->n_features, &in->n_elems, st);
}

/* ---- ranged reads ------------------------------------------------------------------------- */

/* Select rows [row, row + k) x kept columns [a, b) of the file's dataspace (the dropped column, if
 * any, left out: two hyperslabs joined). */
static herr_t select_piece(const qm_hdf5_reader *r, uint64_t row, uint64_t k, uint64_t a,
                           uint64_t b)
{
    if (r->info.ndim == 1) {
        const hsize_t start = a, count = b - a;
        return H5Sselect_hyperslab(r->space, H5S_SELECT_SET, &start, NULL, &count, NULL);
    }
    const long dc = r->info.dropped_column;
    const uint64_t d = dc < 0 ? UINT64_MAX : (uint64_t)dc;
    H5S_seloper_t op = H5S_SELECT_SET;
    if (a < d) { /* kept columns below the dropped one: file columns [a, min(b, d)) */
        const hsize_t start[2] = {row, a}, count[2] = {k, (b < d ? b : d) - a};
        if (H5Sselect_hyperslab(r->space, op, start, NULL, count, NULL) < 0)
            return -1;
        op = H5S_SELECT_OR;
    }
    if (b > d) { /* kept columns from the dropped one on: file columns shifted by one */
        const uint64_t lo = a > d ? a : d;
        const hsize_t start[2] = {row, lo + 1}, count[2] = {k, b - lo};
        if (H5Sselect_hyperslab(r->space, op, start, NULL, count, NULL) < 0)
            return -1;
    }
    return 0;
}

qm_code qm_hdf5_read_range(qm_hdf5_reader *r, uint64_t first, uint64_t count, void *dst,
                           qm_status *st)
{
    if (!r || (count && !dst))
        return qm_fail(st, QM_E_ARG, "hdf5 read: reader and destination must not be NULL");
    const qm_hdf5_info *in = &r->info;
    if (first > in->n_elems || count > in->n_elems - first)
        return qm_fail(st, QM_E_BOUNDS, "%s: dataset '%s': elements [%llu, %llu) are outside the "
                       "%llu elements", r->path, in->dataset, (unsigned long long)first,
                       (unsigned long long)(first + count), (unsigned long long)in->n_elems);
    if (count == 0)
        return QM_OK;
    const uint64_t esize = in->dtype == QM_DTYPE_FLOAT32 ? 4 : 8, F = in->n_features;
    const uint64_t per = r->block_bytes / esize ? r->block_bytes / esize : 1;
    unsigned char *out = dst;
    qm_code rc = QM_OK;
    pthread_mutex_lock(&r->lock);
    h5_quiet();
    for (uint64_t e = first, left = count; rc == QM_OK && left > 0;) {
        const uint64_t row = e / F, col = e % F;
        uint64_t k = 1, a = col, b, n;
        if (col != 0 || left < F || F > per) { /* a piece of one row */
            n = F - col < left ? F - col : left;
            n = n < per ? n : per;
            b = col + n;
        } else { /* whole rows, as many as the block holds */
            k = left / F < per / F ? left / F : per / F;
            b = F;
            n = k * F;
        }
        const hsize_t mdim = n;
        const hid_t mem = H5Screate_simple(1, &mdim, NULL);
        herr_t h = mem < 0 ? -1 : select_piece(r, row, k, a, b);
        if (h >= 0)
            h = H5Dread(r->dset, r->memtype, mem, r->space, H5P_DEFAULT, out);
        char why[160] = ""; /* before H5Sclose, which clears the error stack */
        if (h < 0)
            h5_reason(why);
        if (mem >= 0)
            H5Sclose(mem);
        if (h < 0) {
            rc = qm_fail(st, QM_E_IO, "%s: dataset '%s': reading elements [%llu, %llu) failed: %s",
                         r->path, in->dataset, (unsigned long long)e,
                         (unsigned long long)(e + n), why);
        }
        out += n * esize;
        e += n;
        left -= n;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}
