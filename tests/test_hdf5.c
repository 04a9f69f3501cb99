#define _POSIX_C_SOURCE 200809L
/* test_hdf5.c — HDF5 input (docs/io.md "HDF5 input"), in the library and through the CLI.
 *
 * Files are written here with the HDF5 C API in a fresh directory under /tmp (removed at the end):
 * 1-D and 2-D datasets, float32 / float64 / int32 / int64, contiguous and chunked (gzip) layouts,
 * several datasets in groups, a 3-D, a scalar and an empty dataset, a truncated file, a file of
 * garbage named .h5 and a chunk whose compressed bytes are damaged. Checked:
 *   - qm_hdf5_read_range of every range, at block sizes from one element up (every piece edge),
 *     with and without a dropped column, against the values written;
 *   - the exact error lines and codes (several datasets, an unknown one, types, shapes, damage);
 *   - `qmesh encode` of an HDF5 dataset writes the same bytes as of the same data as .npy (one
 *     file, per-shard files with tiny staging chunks, --drop-column, --dataset, a file detected by
 *     its signature alone), and under mpiexec with 2 ranks when an mpiexec is given.
 * Arguments: the qmesh binary, the source dir, [mpiexec]. */
#include "io.h"
#include "testlib.h"

#include <hdf5.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *qmesh;
static char g_dir[64];

static const char *at(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

/* v[r][c]: exact in float32, float64 and int32, distinct per element. */
static double val(uint64_t r, uint64_t c)
{
    return (double)r * 1000.0 + (double)c;
}

/* ---- writing files ------------------------------------------------------------------------- */

typedef struct ds_spec {
    const char *name;  /* "/x", "/g/y" (groups are created) */
    int ndim;          /* 0 (scalar), 1, 2, 3 */
    hsize_t dims[3];
    hid_t file_type;   /* H5T_IEEE_F32LE, H5T_IEEE_F64BE, H5T_STD_I32LE, ... */
    hsize_t chunk[3];  /* chunk[0] 0: contiguous; else chunked with gzip */
} ds_spec;

static void h5_add(hid_t f, const ds_spec *d)
{
    const char *slash = strrchr(d->name, '/');
    if (slash && slash != d->name) {
        char g[64];
        snprintf(g, sizeof g, "%.*s", (int)(slash - d->name), d->name);
        if (H5Lexists(f, g, H5P_DEFAULT) <= 0)
            H5Gclose(H5Gcreate2(f, g, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    }
    const hid_t space = d->ndim ? H5Screate_simple(d->ndim, d->dims, NULL) : H5Screate(H5S_SCALAR);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (d->chunk[0]) {
        H5Pset_chunk(dcpl, d->ndim, d->chunk);
        H5Pset_deflate(dcpl, 6);
    }
    const hid_t ds = H5Dcreate2(f, d->name, d->file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(ds >= 0);
    uint64_t n = 1, cols = d->ndim >= 1 ? d->dims[d->ndim - 1] : 1;
    for (int i = 0; i < d->ndim; ++i)
        n *= d->dims[i];
    if (n) {
        double *v = malloc(n * sizeof *v);
        for (uint64_t i = 0; i < n; ++i)
            v[i] = val(i / cols, i % cols);
        CHECK(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        free(v);
    }
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
}

static void h5_write(const char *path, const ds_spec *specs, int n)
{
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0);
    for (int i = 0; i < n; ++i)
        h5_add(f, &specs[i]);
    H5Fclose(f);
}

/* A C-order .npy of shape (cols,) (ndim 1) or (rows, cols), values val (file column `skip` left
 * out when >= 0): the reference of the same data. */
static void npy_write(const char *path, int ndim, uint64_t rows, uint64_t cols, int f8, long skip)
{
    const uint64_t fc = cols - (skip >= 0);
    char dict[128], shape[48];
    if (ndim == 1)
        snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)fc);
    else
        snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)rows,
                 (unsigned long long)fc);
    const int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': "
                            "%s, }", f8 ? "<f8" : "<f4", shape);
    const size_t hlen = (size_t)dl + 1 + (64 - (10 + (size_t)dl + 1) % 64) % 64;
    const size_t item = f8 ? 8 : 4, bytes = 10 + hlen + (size_t)(rows * fc) * item;
    unsigned char *img = calloc(1, bytes);
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = (unsigned char)(hlen & 0xff);
    img[9] = (unsigned char)(hlen >> 8);
    memset(img + 10, ' ', hlen - 1);
    memcpy(img + 10, dict, (size_t)dl);
    img[10 + hlen - 1] = '\n';
    unsigned char *p = img + 10 + hlen;
    for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < cols; ++c) {
            if ((long)c == skip)
                continue;
            const double d = val(r, c);
            const float s = (float)d;
            memcpy(p, f8 ? (const void *)&d : (const void *)&s, item);
            p += item;
        }
    qm_test_write_file(path, img, bytes);
    free(img);
}

/* ---- the library ---------------------------------------------------------------------------- */

/* Every range of the view at block sizes of 1, 3, 7 elements and the default equals val. */
static void check_ranges(const char *path, const char *ds, long drop)
{
    qm_status st;
    qm_hdf5_reader *r = NULL;
    CHECK_OK(qm_hdf5_open(path, ds, &r, &st));
    if (!r)
        return;
    if (drop >= 0)
        CHECK_OK(qm_hdf5_reader_drop_column(r, (uint64_t)drop, &st));
    const qm_hdf5_info *in = qm_hdf5_reader_info(r);
    const uint64_t n = in->n_elems, F = in->n_features, item = in->dtype == QM_DTYPE_FLOAT32 ? 4 : 8;
    unsigned char *got = malloc(n * item);
    const uint64_t blocks[] = {1, 3, 7, 1u << 20};
    int bad = 0;
    for (int b = 0; b < 4 && !bad; ++b) {
        CHECK_OK(qm_hdf5_reader_set_block_bytes(r, blocks[b] * item, &st));
        for (uint64_t first = 0; first < n && !bad; ++first)
            for (uint64_t count = 1; first + count <= n && !bad; ++count) {
                memset(got, 0xee, n * item);
                if (qm_hdf5_read_range(r, first, count, got, &st) != QM_OK) {
                    fprintf(stderr, "%s: [%llu, +%llu): %s\n", path, (unsigned long long)first,
                            (unsigned long long)count, st.msg);
                    bad = 1;
                }
                for (uint64_t i = 0; i < count && !bad; ++i) {
                    const uint64_t e = first + i, row = e / F, k = e % F;
                    const uint64_t c = drop >= 0 && k >= (uint64_t)drop ? k + 1 : k;
                    double v;
                    if (item == 4) {
                        float f;
                        memcpy(&f, got + i * 4, 4);
                        v = f;
                    } else {
                        memcpy(&v, got + i * 8, 8);
                    }
                    if (v != val(row, c)) {
                        fprintf(stderr, "%s: block %llu, [%llu, +%llu) element %llu: %g != %g\n",
                                path, (unsigned long long)blocks[b], (unsigned long long)first,
                                (unsigned long long)count, (unsigned long long)e, v, val(row, c));
                        bad = 1;
                    }
                }
            }
    }
    CHECK(!bad);
    free(got);
    qm_hdf5_close(r);
}

static void test_reader(void)
{
    char p[128];
    qm_status st;
    qm_hdf5_reader *r = NULL;
    /* 2-D float64, chunked (3 x 2 chunks, gzip), big-endian in the file */
    const ds_spec a = {"/data", 2, {7, 5, 0}, H5T_IEEE_F64BE, {3, 2, 0}};
    h5_write(at(p, sizeof p, "a.h5"), &a, 1);
    CHECK_OK(qm_hdf5_open(p, NULL, &r, &st));
    if (r) {
        const qm_hdf5_info *in = qm_hdf5_reader_info(r);
        CHECK_STR(in->dataset, "/data");
        CHECK(in->dtype == QM_DTYPE_FLOAT64 && in->ndim == 2 && in->chunked);
        CHECK_EQ_U64(in->shape[0], 7);
        CHECK_EQ_U64(in->shape[1], 5);
        CHECK_EQ_U64(in->n_samples, 7);
        CHECK_EQ_U64(in->n_features, 5);
        CHECK_EQ_U64(in->n_elems, 35);
        CHECK(in->dropped_column == -1);
        unsigned char buf[8];
        CHECK_ERR((qm_hdf5_read_range(r, 30, 6, buf, &st), st), QM_E_BOUNDS,
                  "dataset '/data': elements [30, 36) are outside the 35 elements");
        CHECK_ERR((qm_hdf5_reader_set_block_bytes(r, 0, &st), st), QM_E_ARG, "at least 1 byte");
        CHECK_ERR((qm_hdf5_reader_drop_column(r, 5, &st), st), QM_E_INPUT,
                  "drop column 5 is out of range (the file has 5 columns, indices 0..4)");
        qm_hdf5_close(r);
    }
    check_ranges(p, NULL, -1);
    for (long d = 0; d < 5; ++d)
        check_ranges(p, "data", d);
    /* 2-D float32, contiguous */
    const ds_spec b = {"/x", 2, {4, 6, 0}, H5T_IEEE_F32LE, {0}};
    h5_write(at(p, sizeof p, "b.h5"), &b, 1);
    CHECK_OK(qm_hdf5_open(p, "/x", &r, &st));
    if (r) {
        CHECK(qm_hdf5_reader_info(r)->dtype == QM_DTYPE_FLOAT32);
        CHECK(!qm_hdf5_reader_info(r)->chunked);
        qm_hdf5_close(r);
    }
    check_ranges(p, NULL, -1);
    check_ranges(p, NULL, 0);
    check_ranges(p, NULL, 5);
    /* 1-D float64 contiguous; 1-D float32 chunked; a column of a 1-D dataset cannot be dropped */
    const ds_spec c = {"/v", 1, {23, 0, 0}, H5T_IEEE_F64LE, {0}};
    h5_write(at(p, sizeof p, "c.h5"), &c, 1);
    check_ranges(p, NULL, -1);
    CHECK_OK(qm_hdf5_open(p, NULL, &r, &st));
    if (r) {
        CHECK(qm_hdf5_reader_info(r)->ndim == 1 && qm_hdf5_reader_info(r)->n_samples == 1);
        CHECK_ERR((qm_hdf5_reader_drop_column(r, 0, &st), st), QM_E_INPUT,
                  "cannot drop column 0 of a 1-D array (shape (23,))");
        qm_hdf5_close(r);
    }
    const ds_spec d = {"/v", 1, {19, 0, 0}, H5T_IEEE_F32LE, {4, 0, 0}};
    h5_write(at(p, sizeof p, "d.h5"), &d, 1);
    check_ranges(p, NULL, -1);
    /* int32: converted to float64 (exact) */
    const ds_spec e = {"/i", 2, {3, 4, 0}, H5T_STD_I32LE, {0}};
    h5_write(at(p, sizeof p, "e.h5"), &e, 1);
    CHECK_OK(qm_hdf5_open(p, NULL, &r, &st));
    if (r) {
        CHECK(qm_hdf5_reader_info(r)->dtype == QM_DTYPE_FLOAT64);
        qm_hdf5_close(r);
    }
    check_ranges(p, NULL, -1);
}

/* 64-bit integers beyond 2^53 (signed and unsigned) are rounded to the nearest float64, as the
 * C cast (a .npy file's int64 through the npy reader) rounds them; 16-bit floats are exact in
 * float64 (both byte orders); an enum (h5py's bool: FALSE = 0, TRUE = 1) reads as its members'
 * values, as h5py reads it; a string is E-DTYPE. */
static void test_wide_types(void)
{
    char p[128], want[512];
    qm_status st;
    qm_hdf5_reader *r = NULL;
    const hid_t f = H5Fcreate(at(p, sizeof p, "wide.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = 4;
    const hid_t space = H5Screate_simple(1, &n, NULL);
    const long long iv[4] = {(1LL << 53) + 1, -3, (1LL << 62) + 12345, -(1LL << 60) - 7};
    const unsigned long long uv[4] = {(1ULL << 63) + 2049, 7, (1ULL << 53) + 3, 0};
    /* halves: 1, -2.5, 65504 (the largest), 2^-24 (the smallest subnormal) */
    const unsigned short hv[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};
    const hid_t half_le = H5Tcopy(H5T_IEEE_F32LE), half_be = H5Tcopy(H5T_IEEE_F32BE);
    for (int k = 0; k < 2; ++k) {
        const hid_t h = k ? half_be : half_le;
        H5Tset_fields(h, 15, 10, 5, 0, 10);
        H5Tset_size(h, 2);
        H5Tset_ebias(h, 15);
    }
    const hid_t half_mem = H5Tcopy(half_le);
    H5Tset_order(half_mem, H5T_ORDER_LE);
    struct {
        const char *name;
        hid_t file_type, mem_type;
        const void *data;
    } ds[] = {{"/i64", H5T_STD_I64LE, H5T_NATIVE_LLONG, iv},
              {"/u64", H5T_STD_U64BE, H5T_NATIVE_ULLONG, uv},
              {"/h", half_le, half_mem, hv},
              {"/hbe", half_be, half_mem, hv}};
    for (int i = 0; i < 4; ++i) {
        const hid_t d = H5Dcreate2(f, ds[i].name, ds[i].file_type, space, H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d >= 0 && H5Dwrite(d, ds[i].mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ds[i].data) >= 0);
        H5Dclose(d);
    }
    /* an enum of int8 with FALSE = 0, TRUE = 1 (what h5py writes for bool) */
    const hid_t en = H5Tenum_create(H5T_NATIVE_SCHAR);
    signed char fv = 0, tv = 1;
    H5Tenum_insert(en, "FALSE", &fv);
    H5Tenum_insert(en, "TRUE", &tv);
    const signed char bv[4] = {0, 1, 1, 0};
    hid_t d = H5Dcreate2(f, "/b", en, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, en, H5S_ALL, H5S_ALL, H5P_DEFAULT, bv) >= 0);
    H5Dclose(d);
    H5Tclose(en);
    const hid_t str = H5Tcopy(H5T_C_S1); /* fixed strings of 4 bytes */
    H5Tset_size(str, 4);
    d = H5Dcreate2(f, "/s", str, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, str, H5S_ALL, H5S_ALL, H5P_DEFAULT, "abcdefghijklmnop") >= 0);
    H5Dclose(d);
    H5Tclose(str);
    H5Tclose(half_le);
    H5Tclose(half_be);
    H5Tclose(half_mem);
    H5Sclose(space);
    H5Fclose(f);
    double v[4];
    CHECK_OK(qm_hdf5_open(p, "i64", &r, &st));
    CHECK(r && qm_hdf5_read_range(r, 0, 4, v, &st) == QM_OK);
    for (int i = 0; r && i < 4; ++i)
        CHECK(v[i] == (double)iv[i]);
    qm_hdf5_close(r);
    CHECK_OK(qm_hdf5_open(p, "u64", &r, &st));
    CHECK(r && qm_hdf5_read_range(r, 0, 4, v, &st) == QM_OK);
    for (int i = 0; r && i < 4; ++i)
        CHECK(v[i] == (double)uv[i]);
    qm_hdf5_close(r);
    for (int k = 0; k < 2; ++k) {
        CHECK_OK(qm_hdf5_open(p, k ? "hbe" : "h", &r, &st));
        CHECK(r && qm_hdf5_reader_info(r)->dtype == QM_DTYPE_FLOAT64);
        CHECK(r && qm_hdf5_read_range(r, 0, 4, v, &st) == QM_OK);
        CHECK(r && v[0] == 1.0 && v[1] == -2.5 && v[2] == 65504.0 && v[3] == 0x1p-24);
        qm_hdf5_close(r);
    }
    CHECK_OK(qm_hdf5_open(p, "b", &r, &st));
    CHECK(r && qm_hdf5_read_range(r, 0, 4, v, &st) == QM_OK);
    CHECK(r && v[0] == 0.0 && v[1] == 1.0 && v[2] == 1.0 && v[3] == 0.0);
    qm_hdf5_close(r);
    CHECK_ERR((qm_hdf5_open(p, "s", &r, &st), st), QM_E_DTYPE, "");
    snprintf(want, sizeof want, "%s: dataset '/s' holds string values (accepted: 16-, 32- or "
             "64-bit floats, integers of up to 64 bits and enums of them (h5py's bool), 32-bit "
             "floats read as float32, the others as float64); convert it, e.g. h5py: f['x'] = "
             "a.astype('f8')", p);
    CHECK_STR(st.msg, want);
}

static void test_errors(void)
{
    char p[128], want[512];
    qm_status st;
    qm_hdf5_reader *r = (qm_hdf5_reader *)&st; /* set to NULL on failure */
    const ds_spec many[] = {{"/a", 1, {4, 0, 0}, H5T_IEEE_F64LE, {0}},
                            {"/g/b", 2, {2, 2, 0}, H5T_IEEE_F32LE, {0}},
                            {"/i64", 1, {3, 0, 0}, H5T_STD_I64LE, {0}},
                            {"/cube", 3, {2, 2, 2}, H5T_IEEE_F64LE, {0}},
                            {"/s", 0, {0}, H5T_IEEE_F64LE, {0}},
                            {"/empty", 2, {0, 3, 0}, H5T_IEEE_F64LE, {0}},
                            {"/u8", 1, {5, 0, 0}, H5T_STD_U8LE, {0}}};
    h5_write(at(p, sizeof p, "many.h5"), many, 7);
    CHECK_ERR((qm_hdf5_open(p, NULL, &r, &st), st), QM_E_INPUT, "");
    snprintf(want, sizeof want, "%s: the file holds 7 datasets ('/a', '/cube', '/empty', '/g/b', "
             "'/i64', '/s', '/u8'); choose one with --dataset NAME", p);
    CHECK_STR(st.msg, want);
    CHECK(r == NULL);
    CHECK_ERR((qm_hdf5_open(p, "zz", &r, &st), st), QM_E_INPUT, "");
    snprintf(want, sizeof want, "%s: no dataset 'zz' (the file holds '/a', '/cube', '/empty', "
             "'/g/b', '/i64', '/s', '/u8')", p);
    CHECK_STR(st.msg, want);
    CHECK_ERR((qm_hdf5_open(p, "g", &r, &st), st), QM_E_INPUT, "no dataset 'g' (the file holds");
    CHECK_OK(qm_hdf5_open(p, "i64", &r, &st)); /* 64-bit integers: float64, as a .npy file's */
    if (r) {
        double v[3];
        CHECK(qm_hdf5_reader_info(r)->dtype == QM_DTYPE_FLOAT64);
        CHECK_OK(qm_hdf5_read_range(r, 0, 3, v, &st));
        CHECK(v[0] == 0 && v[1] == 1 && v[2] == 2);
        qm_hdf5_close(r);
    }
    CHECK_ERR((qm_hdf5_open(p, "cube", &r, &st), st), QM_E_INPUT, "");
    snprintf(want, sizeof want, "%s: dataset '/cube' is 3-D (shape (2, 2, 2)) and is not "
             "supported; store one sample as 1-D (F,) or samples as 2-D (B, F)", p);
    CHECK_STR(st.msg, want);
    CHECK_ERR((qm_hdf5_open(p, "/s", &r, &st), st), QM_E_INPUT,
              "dataset '/s' is a 0-D scalar and is not supported");
    CHECK_ERR((qm_hdf5_open(p, "empty", &r, &st), st), QM_E_INPUT,
              "dataset '/empty' is empty (shape (0, 3)): nothing to encode");
    CHECK_OK(qm_hdf5_open(p, "g/b", &r, &st));
    if (r) {
        CHECK_STR(qm_hdf5_reader_info(r)->dataset, "/g/b");
        qm_hdf5_close(r);
    }
    CHECK_OK(qm_hdf5_open(p, "/u8", &r, &st)); /* 8-bit unsigned: float64 */
    if (r) {
        double v[5];
        CHECK_OK(qm_hdf5_read_range(r, 0, 5, v, &st));
        CHECK(v[0] == 0 && v[4] == 4);
        qm_hdf5_close(r);
    }
    /* a file with no dataset */
    const hid_t f = H5Fcreate(at(p, sizeof p, "none.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    CHECK_ERR((qm_hdf5_open(p, NULL, &r, &st), st), QM_E_INPUT,
              "none.h5: the file holds no dataset: nothing to encode");
    /* truncated: the first half of a valid file */
    char q[128];
    const ds_spec big = {"/data", 2, {64, 32, 0}, H5T_IEEE_F64LE, {0}};
    h5_write(at(q, sizeof q, "whole.h5"), &big, 1);
    size_t n = 0;
    unsigned char *img = qm_test_read_file(q, &n);
    CHECK(img && n > 16384);
    qm_test_write_file(at(p, sizeof p, "cut.h5"), img, n / 2);
    CHECK_ERR((qm_hdf5_open(p, NULL, &r, &st), st), QM_E_INPUT, "");
    snprintf(want, sizeof want, "%s: cannot open as HDF5 (%zu bytes): truncated file: eof = %zu, "
             "sblock->base_addr = 0, stored_eof = %zu", p, n / 2, n / 2, n);
    CHECK_STR(st.msg, want);
    /* garbage named .h5: HDF5's reason, not a CSV parse error */
    qm_test_write_file(at(p, sizeof p, "junk.h5"), "a,b\n1,2\n", 8);
    CHECK_ERR((qm_hdf5_open(p, NULL, &r, &st), st), QM_E_INPUT, "");
    snprintf(want, sizeof want, "%s: cannot open as HDF5 (8 bytes): file signature not found", p);
    CHECK_STR(st.msg, want);
    qm_input_format fmt = QM_INPUT_CSV;
    CHECK_OK(qm_input_format_query(p, &fmt, &st));
    CHECK(fmt == QM_INPUT_HDF5);
    /* a damaged chunk: the compressed bytes of the last chunk overwritten */
    const ds_spec z = {"/z", 1, {4096, 0, 0}, H5T_IEEE_F64LE, {1024, 0, 0}};
    h5_write(at(p, sizeof p, "z.h5"), &z, 1);
    free(img);
    img = qm_test_read_file(p, &n);
    { /* where chunk 0's compressed bytes lie (H5Dget_chunk_info), then flip them all */
        const hid_t zf = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        const hid_t zd = H5Dopen2(zf, "/z", H5P_DEFAULT);
        const hid_t zs = H5Dget_space(zd);
        hsize_t off[1] = {0}, sz = 0;
        haddr_t addr = 0;
        unsigned mask = 0;
        CHECK(H5Dget_chunk_info(zd, zs, 0, off, &mask, &addr, &sz) >= 0 && sz > 16);
        H5Sclose(zs);
        H5Dclose(zd);
        H5Fclose(zf);
        for (hsize_t i = 0; img && addr + sz <= n && i < sz; ++i)
            img[addr + i] ^= 0x5a;
        qm_test_write_file(p, img, n);
    }
    CHECK_OK(qm_hdf5_open(p, NULL, &r, &st));
    if (r) {
        double *v = malloc(4096 * sizeof *v);
        CHECK_ERR((qm_hdf5_read_range(r, 0, 4096, v, &st), st), QM_E_IO, "");
        snprintf(want, sizeof want, "%s: dataset '/z': reading elements [0, 4096) failed: "
                 "inflate() failed", p);
        CHECK_STR(st.msg, want);
        free(v);
        qm_hdf5_close(r);
    }
    free(img);
}

/* ---- through the CLI ----------------------------------------------------------------------- */

/* `qmesh encode ARGS --input IN --out OUT`, exit 0 expected. */
static void encode_ok(const char *in, const char *extra, const char *outp)
{
    char out[8192];
    const int rc = qm_test_runf(out, sizeof out, "timeout 120 %s encode --input %s %s --out %s",
                                qmesh, in, extra, outp);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "encode %s %s: %s\n", in, extra, out);
}

/* Every file of directory a equals the one of the same name in b (and there are n of them). */
static int same_dirs(const char *a, const char *b, int *n)
{
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "cd %s && ls", a);
    *n = 0;
    if (qm_test_run(cmd, out, sizeof out) != 0)
        return 0;
    int same = 1;
    for (char *name = strtok(out, "\n"); name; name = strtok(NULL, "\n")) {
        char x[256], y[256];
        snprintf(x, sizeof x, "%s/%s", a, name);
        snprintf(y, sizeof y, "%s/%s", b, name);
        same = same && qm_test_same_file(x, y);
        ++*n;
    }
    return same;
}

static void test_cli(const char *srcdir, const char *mpiexec)
{
    char h[128], npy[128], o1[128], o2[128], out[8192], want[512];
    const ds_spec two[] = {{"/train/x", 2, {37, 11, 0}, H5T_IEEE_F64LE, {5, 4, 0}},
                           {"/y", 2, {37, 11, 0}, H5T_IEEE_F32LE, {0}}};
    h5_write(at(h, sizeof h, "in.h5"), two, 2);
    /* float64 chunked, one file */
    npy_write(at(npy, sizeof npy, "x.npy"), 2, 37, 11, 1, -1);
    encode_ok(npy, "", at(o1, sizeof o1, "o1.npy"));
    encode_ok(h, "--dataset /train/x", at(o2, sizeof o2, "o2.npy"));
    CHECK(qm_test_same_file(o1, o2));
    /* float32 contiguous: complex64, same bytes */
    npy_write(npy, 2, 37, 11, 0, -1);
    encode_ok(npy, "", o1);
    encode_ok(h, "--dataset y", o2);
    CHECK(qm_test_same_file(o1, o2));
    /* --drop-column by index, against the .npy without that column */
    npy_write(npy, 2, 37, 11, 1, 4);
    encode_ok(npy, "", o1);
    encode_ok(h, "--dataset train/x --drop-column 4 --chunk-bytes '88 B'", o2);
    CHECK(qm_test_same_file(o1, o2));
    /* shards of a multi-device scenario with tiny staging chunks: ranges across rows */
    char d1[128], d2[128];
    npy_write(npy, 2, 37, 11, 1, -1);
    snprintf(want, sizeof want, "--scenario %s/scenarios/dgx-h100.yaml --policy equal "
             "--chunk-bytes '104 B'", srcdir);
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s %s --out-dir %s", qmesh, npy,
                          want, at(d1, sizeof d1, "d1"));
    CHECK(rc == 0);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset /train/x %s --out-dir %s",
                      qmesh, h, want, at(d2, sizeof d2, "d2"));
    CHECK(rc == 0);
    int files = 0;
    CHECK(same_dirs(d1, d2, &files));
    CHECK(files > 2);
    /* 1-D: one state, (2^n,), detected by the signature alone (the name says nothing) */
    const ds_spec one = {"/v", 1, {100, 0, 0}, H5T_IEEE_F64LE, {7, 0, 0}};
    char dat[128];
    h5_write(at(dat, sizeof dat, "vector.dat"), &one, 1);
    npy_write(npy, 1, 1, 100, 1, -1);
    encode_ok(npy, "", o1);
    encode_ok(dat, "", o2);
    CHECK(qm_test_same_file(o1, o2));
    /* errors through the CLI: one line, exit 1 */
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, h, o2);
    snprintf(want, sizeof want, "error[E-INPUT]: %s: the file holds 2 datasets ('/train/x', "
             "'/y'); choose one with --dataset NAME\n", h);
    CHECK(rc == 1 && strstr(out, want));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset /nope --out %s", qmesh, h,
                      o2);
    snprintf(want, sizeof want, "error[E-INPUT]: %s: no dataset '/nope' (the file holds "
             "'/train/x', '/y')\n", h);
    CHECK(rc == 1 && strstr(out, want));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset x --out %s", qmesh, npy, o2);
    snprintf(want, sizeof want, "error[E-ARG]: %s: --dataset x applies to HDF5 input only (this "
             "file is a .npy file)\n", npy);
    CHECK(rc == 1 && strstr(out, want));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset y --header yes", qmesh, h);
    snprintf(want, sizeof want, "error[E-ARG]: %s: --header yes applies to CSV input only (a HDF5 "
             "dataset has no header row)\n", h);
    CHECK(rc == 1 && strstr(out, want));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset y --drop-column label", qmesh,
                      h);
    CHECK(rc == 1 && strstr(out, "--drop-column 'label' is not a 0-based column index"));
    /* the output was never touched by the failures */
    CHECK(qm_test_same_file(o1, o2));
    /* --phantom reads the dataset named */
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --dataset y --phantom --json", qmesh,
                      h);
    CHECK(rc == 0 && strstr(out, "\"batch\": 37"));
    if (!mpiexec)
        return;
    /* 2 ranks, each reading its own range of the dataset: the bytes of one process */
    snprintf(want, sizeof want, "--scenario %s/scenarios/a100-4node-hdr.yaml", srcdir);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s %s --out %s", qmesh, npy, want, o1);
    CHECK(rc == 0);
    char o3[128];
    rc = qm_test_runf(out, sizeof out, "timeout 120 %s -np 2 --oversubscribe --allow-run-as-root "
                      "%s encode --input %s %s --out %s", mpiexec, qmesh, dat, want,
                      at(o3, sizeof o3, "o3.npy"));
    CHECK(rc == 0 && strstr(out, "ranks:    2 (MPI)"));
    if (rc)
        fprintf(stderr, "mpi: %s\n", out);
    CHECK(qm_test_same_file(o1, o3));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_hdf5 QMESH SRCDIR [MPIEXEC]\n");
        return 2;
    }
    qmesh = argv[1];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_hdf5_XXXXXX");
    if (!mkdtemp(g_dir))
        return 1;
    if (argc > 3) {
        test_cli(argv[2], argv[3]); /* the mpi test: the CLI cases with 2 ranks */
    } else {
        test_reader();
        test_wide_types();
        test_errors();
        test_cli(argv[2], NULL);
    }
    char cmd[128], out[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    qm_test_run(cmd, out, sizeof out);
    return qm_test_end(argc > 3 ? "test_hdf5_mpi" : "test_hdf5");
}
