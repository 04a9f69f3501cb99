/* test_io.c — `qmesh encode` input and output files (engine/io.h, docs/io.md): `.npy` headers
 * written byte by byte and ranged reads, every rejection with its message, a fuzzed header parser,
 * CSV (header detection, dropped label column, errors, gzip), the atomic `.npy` and text writers
 * and the --out-dir helper. Works in a fresh directory under /tmp and removes it. */
#define _POSIX_C_SOURCE 200809L

#include "io.h"
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[64];

static const char *at(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}


static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f)
        return NULL;
    unsigned char *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A .npy file image: magic, version major.0, header length (2 bytes for v1, 4 for v2/v3), the dict
 * padded with spaces and '\n' so that the data starts at a multiple of 64 (or, with align 0, just
 * the dict and '\n'), then the data. Returns the byte count. */
static size_t npy_image(unsigned char *buf, unsigned major, const char *dict, int align,
                        const void *data, size_t data_bytes)
{
    const size_t pre = major == 1 ? 10 : 12;
    size_t hlen = strlen(dict) + 1;
    if (align)
        hlen += (64 - (pre + hlen) % 64) % 64;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    if (major != 1) {
        buf[10] = (unsigned char)(hlen >> 16);
        buf[11] = (unsigned char)(hlen >> 24);
    }
    memcpy(buf + pre, dict, strlen(dict));
    memset(buf + pre + strlen(dict), ' ', hlen - 1 - strlen(dict));
    buf[pre + hlen - 1] = '\n';
    if (data_bytes)
        memcpy(buf + pre + hlen, data, data_bytes);
    return pre + hlen + data_bytes;
}

/* Write an image to name and expect qm_npy_open to fail with code and a message part. */
static void expect_open_error(const char *name, const unsigned char *img, size_t n, qm_code code,
                              const char *part)
{
    char p[128];
    at(p, sizeof p, name);
    qm_test_write_file(p, img, n);
    qm_status st;
    qm_status_clear(&st);
    qm_npy_reader *r = (qm_npy_reader *)&st; /* must be reset to NULL */
    CHECK(qm_npy_open(p, &r, &st) == code);
    CHECK(r == NULL);
    CHECK_ERR(st, code, part);
    CHECK(strstr(st.msg, p) == st.msg); /* the message starts with the file name */
    CHECK(strchr(st.msg, '\n') == NULL);
    unlink(p);
}

static void expect_dict_error(const char *dict, const void *data, size_t data_bytes,
                              const char *part)
{
    unsigned char img[1024];
    const size_t n = npy_image(img, 1, dict, 1, data, data_bytes);
    expect_open_error("bad.npy", img, n, QM_E_INPUT, part);
}

/* ---- .npy input ------------------------------------------------------------------------------ */

static void test_npy_v1_f32_1d(void)
{
    /* every byte by hand: magic, v1.0, header length 118 (0x76), dict, 60 spaces, '\n' */
    static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }";
    unsigned char img[256];
    memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(img + 10, dict, 57);
    memset(img + 67, ' ', 60);
    img[127] = '\n';
    const float v[5] = {1.5f, -2.25f, 0.0f, 1e-30f, 3.0e30f};
    memcpy(img + 128, v, sizeof v);
    char p[128];
    qm_test_write_file(at(p, sizeof p, "f32.npy"), img, 128 + sizeof v);

    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (!r)
        return;
    const qm_npy_info *in = qm_npy_reader_info(r);
    CHECK(in->version_major == 1);
    CHECK(in->dtype == QM_DTYPE_FLOAT32);
    CHECK(in->ndim == 1);
    CHECK_EQ_U64(in->shape[0], 5);
    CHECK_EQ_U64(in->shape[1], 0);
    CHECK_EQ_U64(in->n_samples, 1);
    CHECK_EQ_U64(in->n_features, 5);
    CHECK_EQ_U64(in->n_elems, 5);
    CHECK_EQ_U64(in->data_offset, 128);
    CHECK_EQ_U64(in->data_bytes, 20);
    float got[5] = {0};
    CHECK(qm_npy_read_range(r, 0, 5, got, &st) == QM_OK);
    CHECK(memcmp(got, v, sizeof v) == 0);
    float mid[2] = {0};
    CHECK(qm_npy_read_range(r, 3, 2, mid, &st) == QM_OK);
    CHECK(mid[0] == 1e-30f && mid[1] == 3.0e30f);
    CHECK(qm_npy_read_range(r, 5, 0, NULL, &st) == QM_OK); /* empty range at the end */
    CHECK(qm_npy_read_range(r, 4, 2, mid, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "read of elements [4, 4 + 2) is outside the array's 5 elements");
    CHECK(qm_npy_read_range(r, UINT64_MAX, 2, mid, &st) == QM_E_BOUNDS);
    qm_npy_close(r);
    qm_npy_close(NULL);

    qm_input_format fmt = QM_INPUT_CSV;
    CHECK(qm_input_format_query(p, &fmt, &st) == QM_OK && fmt == QM_INPUT_NPY);
    unlink(p);
}

static void test_npy_v1_f64_2d_ranges(void)
{
    double v[12];
    for (int i = 0; i < 12; ++i)
        v[i] = 0.5 * i - 1.0;
    unsigned char img[512];
    const size_t n =
        npy_image(img, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", 1, v,
                  sizeof v);
    char p[128];
    qm_test_write_file(at(p, sizeof p, "f64.npy"), img, n);
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (!r)
        return;
    const qm_npy_info *in = qm_npy_reader_info(r);
    CHECK(in->dtype == QM_DTYPE_FLOAT64 && in->ndim == 2);
    CHECK_EQ_U64(in->shape[0], 3);
    CHECK_EQ_U64(in->shape[1], 4);
    CHECK_EQ_U64(in->n_samples, 3);
    CHECK_EQ_U64(in->n_features, 4);
    CHECK_EQ_U64(in->n_elems, 12);
    CHECK_EQ_U64(in->data_offset, 128);
    CHECK_EQ_U64(in->data_bytes, 96);
    /* elements 5..9: row 1 cols 1..3 and row 2 cols 0..1 */
    double got[5] = {0};
    CHECK(qm_npy_read_range(r, 5, 5, got, &st) == QM_OK);
    CHECK(got[0] == 1.5 && got[1] == 2.0 && got[2] == 2.5 && got[3] == 3.0 && got[4] == 3.5);
    /* each row on its own, as ranks would */
    for (int row = 0; row < 3; ++row) {
        double rv[4];
        CHECK(qm_npy_read_range(r, (uint64_t)row * 4, 4, rv, &st) == QM_OK);
        CHECK(memcmp(rv, v + row * 4, sizeof rv) == 0);
    }
    double last;
    CHECK(qm_npy_read_range(r, 11, 1, &last, &st) == QM_OK && last == 4.5);
    CHECK(qm_npy_read_range(r, 12, 1, &last, &st) == QM_E_BOUNDS);
    qm_npy_close(r);
    unlink(p);
}

static void test_npy_v2_v3_and_variants(void)
{
    const double v[6] = {1, 2, 3, 4, 5, 6};
    unsigned char img[512];
    char p[128];
    qm_status st;
    for (unsigned major = 2; major <= 3; ++major) {
        const size_t n = npy_image(img, major,
                                   "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                                   1, v, sizeof v);
        CHECK_EQ_U64(img[8], 116); /* 12 + 116 = 128 */
        CHECK_EQ_U64(img[9] | img[10] | img[11], 0);
        qm_test_write_file(at(p, sizeof p, "v2.npy"), img, n);
        qm_npy_reader *r = NULL;
        CHECK(qm_npy_open(p, &r, &st) == QM_OK);
        if (!r)
            continue;
        CHECK(qm_npy_reader_info(r)->version_major == (int)major);
        CHECK_EQ_U64(qm_npy_reader_info(r)->data_offset, 128);
        double got[3];
        CHECK(qm_npy_read_range(r, 3, 3, got, &st) == QM_OK);
        CHECK(got[0] == 4 && got[1] == 5 && got[2] == 6);
        qm_npy_close(r);
    }
    /* no alignment padding, keys in another order, double quotes, trailing-comma-free tuple,
     * Python 2 long suffix: all accepted */
    const float f[3] = {7, 8, 9};
    static const char dict[] = "{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<f4\"}";
    const size_t n = npy_image(img, 1, dict, 0, f, sizeof f);
    qm_test_write_file(p, img, n);
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (r) {
        CHECK_EQ_U64(qm_npy_reader_info(r)->data_offset, 10 + strlen(dict) + 1); /* 67 */
        CHECK_EQ_U64(qm_npy_reader_info(r)->n_features, 3);
        float g[3];
        CHECK(qm_npy_read_range(r, 0, 3, g, &st) == QM_OK && g[0] == 7 && g[2] == 9);
        qm_npy_close(r);
    }
    unlink(p);
}

/* float16 ('<f2', '>f2') and bool ('|b1') files are read as float64, exactly: every half is a
 * double (normal, subnormal, the largest, signed zero, infinities) and a bool byte is 0 or 1 (any
 * byte but 0 is true); a bool file's exact integer read (basis indices) gives 0 and 1. */
static void test_npy_half_bool(void)
{
    char p[256];
    qm_status st;
    unsigned char img[512];
    /* 1, -2, 0.5, 65504 (the largest), 2^-24 (the smallest subnormal), 0x03ff (the largest
     * subnormal, 1023 * 2^-24), 2^-14 (the smallest normal), -0, +inf, 1 + 2^-10 */
    static const uint16_t h[10] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001,
                                   0x03ff, 0x0400, 0x8000, 0x7c00, 0x3c01};
    const double want[10] = {1, -2, 0.5, 65504, 0x1p-24, 1023 * 0x1p-24, 0x1p-14, -0.0, INFINITY,
                             1 + 0x1p-10};
    for (int big = 0; big < 2; ++big) {
        unsigned char raw[20];
        for (int i = 0; i < 10; ++i) {
            raw[2 * i + big] = (unsigned char)(h[i] & 0xff);
            raw[2 * i + 1 - big] = (unsigned char)(h[i] >> 8);
        }
        const size_t n = npy_image(img, 1, big ? "{'descr': '>f2', 'fortran_order': False, "
                                                 "'shape': (10,), }"
                                               : "{'descr': '<f2', 'fortran_order': False, "
                                                 "'shape': (10,), }",
                                   1, raw, sizeof raw);
        qm_test_write_file(at(p, sizeof p, "half.npy"), img, n);
        qm_npy_reader *r = NULL;
        CHECK(qm_npy_open(p, &r, &st) == QM_OK);
        if (!r)
            continue;
        CHECK(qm_npy_reader_info(r)->dtype == QM_DTYPE_FLOAT64);
        CHECK_EQ_U64(qm_npy_reader_info(r)->item_bytes, 2);
        double got[10];
        CHECK(qm_npy_read_range(r, 0, 10, got, &st) == QM_OK);
        for (int i = 0; i < 10; ++i) {
            CHECK(got[i] == want[i]);
            CHECK(signbit(got[i]) == signbit(want[i]));
        }
        CHECK(qm_npy_read_range(r, 3, 2, got, &st) == QM_OK && got[0] == 65504 &&
              got[1] == 0x1p-24);
        uint64_t iv[2];
        CHECK(qm_npy_read_int_range(r, 0, 2, iv, &st) == QM_E_DTYPE);
        CHECK_ERR(st, QM_E_DTYPE, "exact integer read of a float16 file");
        qm_npy_close(r);
    }
    static const unsigned char b[4] = {0, 1, 2, 0};
    const size_t n = npy_image(img, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }",
                               1, b, sizeof b);
    qm_test_write_file(at(p, sizeof p, "bool.npy"), img, n);
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (r) {
        double got[4];
        CHECK(qm_npy_read_range(r, 0, 4, got, &st) == QM_OK);
        CHECK(got[0] == 0 && got[1] == 1 && got[2] == 1 && got[3] == 0);
        uint64_t iv[4];
        CHECK(qm_npy_read_int_range(r, 0, 4, iv, &st) == QM_OK);
        CHECK(iv[0] == 0 && iv[1] == 1 && iv[2] == 1 && iv[3] == 0);
        qm_npy_close(r);
    }
    unlink(p);
    unlink(at(p, sizeof p, "half.npy"));
}

static void test_npy_rejections(void)
{
    const double d10[10] = {0};
    /* Fortran order is accepted: tests/test_inputs.c reads it */
    /* dtypes: each named, with what is accepted */
    /* '>f8', '<i4', '<i8' are accepted (tests/test_npy_read.c reads them), '<f2' and '|b1' too
     * (test_npy_half_bool); other sizes are not */
    expect_dict_error("{'descr': '<f16', 'fortran_order': False, 'shape': (5,), }", d10, 80,
                      "unsupported dtype '<f16' (a float of another size; accepted: f2, f4, f8, b1, "
                      "i1, i2, i4, i8, u1, u2, u4, u8, either byte order); convert with "
                      "a.astype('<f8')");
    expect_dict_error("{'descr': '<i16', 'fortran_order': False, 'shape': (10,), }", d10, 80,
                      "unsupported dtype '<i16' (a signed integer of another size;");
    expect_dict_error("{'descr': '<u3', 'fortran_order': False, 'shape': (10,), }", d10, 30,
                      "unsupported dtype '<u3' (an unsigned integer of another size;");
    expect_dict_error("{'descr': '|i2', 'fortran_order': False, 'shape': (10,), }", d10, 20,
                      "unsupported dtype '|i2' (a signed integer of another size;");
    expect_dict_error("{'descr': '<c8', 'fortran_order': False, 'shape': (10,), }", d10, 80,
                      "unsupported dtype '<c8' (complex;");
    expect_dict_error("{'descr': '|b2', 'fortran_order': False, 'shape': (10,), }", d10, 20,
                      "unsupported dtype '|b2' (a boolean of another size;");
    expect_dict_error("{'descr': '|f2', 'fortran_order': False, 'shape': (10,), }", d10, 20,
                      "unsupported dtype '|f2' (a float of another size;");
    expect_dict_error("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (10,), }", d10,
                      80, "unsupported dtype: a structured dtype");
    /* shapes */
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", d10, 8,
                      "0-D array (shape ()) is not supported (expected 1-D (features,) or 2-D "
                      "(samples, features))");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2, 2), }", d10, 64,
                      "3-D array (shape (2, 2, 2)) is not supported");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }", NULL, 0,
                      "empty array (shape (0,)): nothing to encode");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", NULL, 0,
                      "empty array (shape (3, 0))");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (5), }", d10, 40,
                      "'shape' must be a tuple: a 1-D shape is written (n,)");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': [5], }", d10, 40,
                      "'shape' must be a tuple (at header byte 50 of 118)");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (-5,), }", d10, 40,
                      "expected a non-negative integer in 'shape'");
    /* the shape lies: its byte count overflows, or a dimension does not fit in 64 bits */
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296), }",
                      d10, 80, "shape (4294967296, 4294967296) is too large: its byte count "
                               "overflows 64 bits");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                      d10, 80, "is too large");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), "
                      "}",
                      d10, 80, "a 'shape' dimension does not fit in 64 bits");
    /* data shorter or longer than the shape */
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (10,), }", d10, 40,
                      "truncated: expected 80 data bytes, found 40 (shape (10,) of float64, data "
                      "at byte 128)");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", d10, 40,
                      "8 unexpected bytes after the data (expected 32 data bytes, found 40)");
    /* malformed dicts */
    expect_dict_error("[1, 2]", NULL, 0, "header is not a dict (it starts with '[', expected '{')");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, ", NULL, 0,
                      "unterminated dict (no closing '}' within the 54-byte header)");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False}", NULL, 0,
                      "missing key 'shape'");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", d10, 8,
                      "unexpected key 'x' (expected 'descr', 'fortran_order', 'shape')");
    expect_dict_error("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}",
                      d10, 8, "duplicate key 'descr'");
    expect_dict_error("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}", d10, 8,
                      "'fortran_order' must be True or False");
    expect_dict_error("{'descr': '<f8' 'fortran_order': False, 'shape': (1,)}", d10, 8,
                      "expected ',' or '}' after a value (at header byte 16 of 118)");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)} x", d10, 8,
                      "unexpected bytes after the closing '}'");
    expect_dict_error("{'descr: '<f8'}", NULL, 0, "expected ':' after a key");
    expect_dict_error("{'descr': '<\\f8', 'fortran_order': False, 'shape': (1,)}", d10, 8,
                      "escape sequences in strings are not supported");

    unsigned char img[1024];
    size_t n;
    /* bad magic, an empty file, a file shorter than the preamble */
    expect_open_error("zip.npy", (const unsigned char *)"PK\x03\x04\x14\x00\x00\x00\x08\x00xx", 12,
                      QM_E_INPUT,
                      "not a .npy file: bad magic (first bytes: 50 4b 03 04 14 00; expected 93 4e "
                      "55 4d 50 59");
    expect_open_error("empty.npy", img, 0, QM_E_INPUT, "bad magic (first bytes: none, the file is "
                                                       "empty; expected");
    expect_open_error("short.npy", (const unsigned char *)"\x93NUMPY\x01", 7, QM_E_INPUT,
                      "truncated .npy preamble (7 bytes, need at least 10)");
    expect_open_error("short2.npy", (const unsigned char *)"\x93NUMPY\x02\x00\x10\x00", 10,
                      QM_E_INPUT, "truncated .npy preamble (10 bytes, need 12 for version 2.0)");
    /* versions */
    n = npy_image(img, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, d10, 8);
    img[6] = 4;
    expect_open_error("v4.npy", img, n, QM_E_INPUT,
                      "unsupported .npy format version 4.0 (accepted: 1.0, 2.0, 3.0)");
    img[6] = 1;
    img[7] = 1;
    expect_open_error("v11.npy", img, n, QM_E_INPUT, "unsupported .npy format version 1.1");
    img[7] = 0;
    /* a header length that lies: past the end of the file */
    img[8] = 0x88;
    img[9] = 0x13; /* 5000 */
    expect_open_error("lie.npy", img, n, QM_E_INPUT,
                      "header length 5000 runs past the end of the file (10 + 5000 = 5010 bytes, "
                      "the file has 136)");
    /* a v2 header length over the cap */
    n = npy_image(img, 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, d10, 8);
    img[10] = 0x01; /* 65536 + 116 */
    expect_open_error("huge.npy", img, n, QM_E_INPUT,
                      "header length 65652 exceeds the limit of 65536 bytes");
    /* a zero-length header */
    memcpy(img, "\x93NUMPY\x01\x00\x00\x00", 10);
    expect_open_error("nohdr.npy", img, 10, QM_E_INPUT, "header is empty");

    /* file problems are E-IO */
    char p[128];
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(at(p, sizeof p, "missing.npy"), &r, &st) == QM_E_IO && r == NULL);
    CHECK_ERR(st, QM_E_IO, "missing.npy: cannot open for reading: No such file or directory");
    CHECK(qm_npy_open(g_dir, &r, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "not a regular file (it is a directory)");
    CHECK(qm_npy_open(NULL, &r, &st) == QM_E_ARG);
}

/* The parser on arbitrary bytes: random buffers and random mutations of a valid file image must
 * give QM_OK with consistent facts or an E-INPUT one-line message, never read outside the buffer
 * (each case is parsed from an exactly-sized heap copy, so ASan sees any overread). */
static void test_npy_fuzz(void)
{
    const double v[4] = {1, 2, 3, 4};
    unsigned char valid[256];
    const size_t vn = npy_image(valid, 1,
                                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", 1,
                                v, sizeof v);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int ok = 0, bad = 0, wrong = 0;
    for (int it = 0; it < 20000; ++it) {
        unsigned char img[256];
        size_t n = vn;
        memcpy(img, valid, vn);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int mode = (int)(s >> 60) & 3;
        if (mode == 0) { /* pure garbage, keeping the magic half the time */
            n = (size_t)(s >> 33) % 200;
            for (size_t i = 0; i < n; ++i) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                img[i] = (unsigned char)(s >> 56);
            }
            if ((s >> 40) & 1 && n >= 10)
                memcpy(img, valid, 10);
        } else { /* flip 1-4 bytes of the preamble or header, maybe cut the file */
            const int flips = 1 + (int)((s >> 50) & 3);
            for (int k = 0; k < flips; ++k) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                img[(s >> 33) % 128] = (unsigned char)(s >> 56);
            }
            if (mode == 3)
                n = (size_t)(s >> 20) % vn;
        }
        unsigned char *heap = malloc(n ? n : 1);
        memcpy(heap, img, n);
        qm_status st;
        qm_status_clear(&st);
        qm_npy_info info;
        const qm_code rc = qm_npy_header_parse("fuzz.npy", heap, n, n, &info, &st);
        if (rc == QM_OK) {
            ok++;
            if (info.data_offset + info.data_bytes != n || info.n_elems == 0 ||
                (info.ndim != 1 && info.ndim != 2))
                wrong++;
        } else {
            bad++;
            if (rc != QM_E_INPUT || strncmp(st.msg, "fuzz.npy: ", 10) != 0 ||
                strchr(st.msg, '\n'))
                wrong++;
        }
        free(heap);
    }
    CHECK(ok > 0 && bad > 0);
    CHECK_EQ_U64(wrong, 0);
    /* a buffer shorter than the header it announces is the caller's error, not an overread */
    qm_status st;
    qm_npy_info info;
    CHECK(qm_npy_header_parse("x.npy", valid, 64, vn, &info, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "given 64 bytes, the header needs 128");
}

/* ---- CSV input ------------------------------------------------------------------------------- */

static qm_code csv_text(const char *text, qm_csv_header header, const char *drop, qm_csv_data *d,
                        qm_status *st)
{
    char p[128];
    at(p, sizeof p, "in.csv");
    qm_test_write_file(p, text, strlen(text));
    qm_csv_options opt;
    qm_csv_options_init(&opt);
    opt.header = header;
    opt.drop_column = drop;
    qm_status_clear(st);
    const qm_code rc = qm_csv_load(p, &opt, d, st);
    unlink(p);
    return rc;
}

static void expect_csv_error(const char *text, qm_csv_header header, const char *drop,
                             const char *part)
{
    qm_csv_data d;
    qm_status st;
    CHECK(csv_text(text, header, drop, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, part);
    CHECK(d.values == NULL && d.n_samples == 0 && d.dropped_column == -1);
    CHECK(strstr(st.msg, "in.csv: ") != NULL);
}

static void test_csv(void)
{
    qm_csv_data d;
    qm_status st;

    /* no header, plain newlines, trailing newline */
    CHECK(csv_text("1,2,3\n4,5,6\n", QM_CSV_HEADER_AUTO, NULL, &d, &st) == QM_OK);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK_EQ_U64(d.n_features, 3);
    CHECK(d.has_header == 0 && d.gzip == 0 && d.dropped_column == -1);
    CHECK(d.values && d.values[0] == 1 && d.values[2] == 3 && d.values[3] == 4 && d.values[5] == 6);
    qm_csv_data_fini(&d);
    CHECK(d.values == NULL && d.n_samples == 0);
    qm_csv_data_fini(NULL);

    /* header auto-detected, \r\n line ends, blanks around fields, exponents */
    CHECK(csv_text("a, b ,c\r\n1, 2 ,3\r\n4.5,-6e-1,\t7\r\n", QM_CSV_HEADER_AUTO, NULL, &d, &st) ==
          QM_OK);
    CHECK(d.has_header == 1);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK_EQ_U64(d.n_features, 3);
    CHECK(d.values[1] == 2 && d.values[3] == 4.5 && d.values[4] == -0.6 && d.values[5] == 7);
    qm_csv_data_fini(&d);

    /* label column dropped by header name; its values are text and are not parsed */
    CHECK(csv_text("x1,label,x2\n1,cat,2\n3,dog,4\n", QM_CSV_HEADER_AUTO, "label", &d, &st) ==
          QM_OK);
    CHECK(d.has_header == 1 && d.dropped_column == 1);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK_EQ_U64(d.n_features, 2);
    CHECK(d.values[0] == 1 && d.values[1] == 2 && d.values[2] == 3 && d.values[3] == 4);
    qm_csv_data_fini(&d);

    /* dropped by index, no header, no final newline */
    CHECK(csv_text("0,1.5,2.5\n1,3.5,4.5", QM_CSV_HEADER_AUTO, "0", &d, &st) == QM_OK);
    CHECK(d.has_header == 0 && d.dropped_column == 0);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK_EQ_U64(d.n_features, 2);
    CHECK(d.values[0] == 1.5 && d.values[1] == 2.5 && d.values[2] == 3.5 && d.values[3] == 4.5);
    qm_csv_data_fini(&d);

    /* a text label dropped by index does not make the first row a header */
    CHECK(csv_text("cat,1,2\ndog,3,4\n\n\n", QM_CSV_HEADER_AUTO, "0", &d, &st) == QM_OK);
    CHECK(d.has_header == 0);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK(d.values[0] == 1 && d.values[3] == 4);
    qm_csv_data_fini(&d);

    /* header forced: an all-number first row is still a header; a name equal to an index wins */
    CHECK(csv_text("7,8\n1,2\n", QM_CSV_HEADER_YES, "8", &d, &st) == QM_OK);
    CHECK(d.has_header == 1 && d.dropped_column == 1);
    CHECK_EQ_U64(d.n_samples, 1);
    CHECK_EQ_U64(d.n_features, 1);
    CHECK(d.values[0] == 1);
    qm_csv_data_fini(&d);

    /* NaN and Inf text pass through as values (the encoder reports them by index) */
    CHECK(csv_text("nan,inf,-inf,1e-320\n", QM_CSV_HEADER_AUTO, NULL, &d, &st) == QM_OK);
    CHECK(d.has_header == 0);
    CHECK(isnan(d.values[0]) && isinf(d.values[1]) && d.values[1] > 0 && d.values[2] < 0);
    CHECK(d.values[3] > 0 && d.values[3] < 1e-300); /* a subnormal, not an error */
    qm_csv_data_fini(&d);

    /* errors: 1-based rows as lines in the file (the header counts), 1-based columns */
    expect_csv_error("a,b,c\n1,2,3\n4,5\n", QM_CSV_HEADER_AUTO, NULL,
                     "in.csv: row 3 has 2 fields, expected 3 (as in row 1)");
    expect_csv_error("1,2\n3,4\n5,6,7\n", QM_CSV_HEADER_AUTO, NULL,
                     "row 3 has 3 fields, expected 2");
    expect_csv_error("1,,3\n", QM_CSV_HEADER_AUTO, NULL, "row 1, column 2: empty field");
    expect_csv_error("1,abc,3\n", QM_CSV_HEADER_NO, NULL, "row 1, column 2: 'abc' is not a number");
    expect_csv_error("a,b\n1,2\n3,x7\n", QM_CSV_HEADER_AUTO, NULL,
                     "row 3, column 2 ('b'): 'x7' is not a number");
    expect_csv_error("a,b\n1,2\n3,1.5.2\n", QM_CSV_HEADER_AUTO, NULL, "'1.5.2' is not a number");
    expect_csv_error("a\n1\n2 3\n", QM_CSV_HEADER_AUTO, NULL, "row 3, column 1 ('a'): '2 3'");
    expect_csv_error("1,2\n3,"
                     "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\n",
                     QM_CSV_HEADER_AUTO, NULL,
                     "row 2, column 2: 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...' is not a number");
    expect_csv_error("1,1e999\n", QM_CSV_HEADER_AUTO, NULL,
                     "row 1, column 2: '1e999' is out of range for float64");
    expect_csv_error("1,2\n\n3,4\n", QM_CSV_HEADER_AUTO, NULL,
                     "row 2 is empty (blank lines are allowed only at the end of the file)");
    expect_csv_error("", QM_CSV_HEADER_AUTO, NULL, "in.csv: empty: no rows (0 bytes)");
    expect_csv_error("\n\r\n", QM_CSV_HEADER_AUTO, NULL, "empty: no rows");
    expect_csv_error("a,b\n", QM_CSV_HEADER_AUTO, NULL,
                     "empty: no data rows (only the header row 1)");
    expect_csv_error("a,b\n1,2\n", QM_CSV_HEADER_AUTO, "label",
                     "no column named 'label' in the header (columns: 'a', 'b')");
    expect_csv_error("1,2,3\n", QM_CSV_HEADER_AUTO, "5",
                     "drop column 5 is out of range (the file has 3 columns, indices 0..2)");
    expect_csv_error("1,2,3\n", QM_CSV_HEADER_AUTO, "label",
                     "drop column 'label' is not a 0-based column index and the file has no "
                     "header row");
    expect_csv_error("y\n1\n", QM_CSV_HEADER_AUTO, "y",
                     "no feature columns left after dropping column 0 (the file has 1 column)");
    expect_csv_error("y,x,y\n1,2,3\n", QM_CSV_HEADER_AUTO, "y",
                     "the header names column 'y' twice (columns 1 and 3)");

    CHECK(csv_text("1\n", (qm_csv_header)7, NULL, &d, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "header option 7 is not auto, yes or no");

    char p[128];
    CHECK(qm_csv_load(at(p, sizeof p, "none.csv"), NULL, &d, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "none.csv: cannot open for reading: No such file or directory");
    CHECK(qm_csv_load(g_dir, NULL, &d, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "not a regular file (it is a directory)");
}

static void test_csv_gzip(void)
{
    /* named .csv on purpose: gzip is recognised by its magic bytes */
    char p[128];
    at(p, sizeof p, "z.csv");
    static const char text[] = "f1,f2,label\n0.25,0.5,1\n-1,2,0\n";
    gzFile gz = gzopen(p, "wb");
    CHECK(gz != NULL);
    if (!gz)
        return;
    CHECK(gzwrite(gz, text, (unsigned)strlen(text)) == (int)strlen(text));
    CHECK(gzclose(gz) == Z_OK);

    qm_input_format fmt = QM_INPUT_NPY;
    qm_status st;
    CHECK(qm_input_format_query(p, &fmt, &st) == QM_OK && fmt == QM_INPUT_CSV_GZIP);

    qm_csv_options opt;
    qm_csv_options_init(&opt);
    opt.drop_column = "label";
    qm_csv_data d;
    CHECK(qm_csv_load(p, &opt, &d, &st) == QM_OK);
    CHECK(d.gzip == 1 && d.has_header == 1 && d.dropped_column == 2);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK_EQ_U64(d.n_features, 2);
    if (d.values)
        CHECK(d.values[0] == 0.25 && d.values[1] == 0.5 && d.values[2] == -1 && d.values[3] == 2);
    qm_csv_data_fini(&d);

    /* a cut-off gzip file is reported, not read as a shorter CSV */
    size_t n = 0;
    unsigned char *b = read_bytes(p, &n);
    CHECK(b && n > 20);
    qm_test_write_file(p, b, n - 10);
    free(b);
    CHECK(qm_csv_load(p, &opt, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "truncated gzip data after");
    /* gzip magic, garbage after it */
    qm_test_write_file(p, "\x1f\x8b\x08\x00garbage-garbage-garbage", 27);
    CHECK(qm_csv_load(p, &opt, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "gzip data after 0 decompressed bytes (zlib: ");

    at(p, sizeof p, "plain.csv");
    qm_test_write_file(p, "1,2\n", 4);
    CHECK(qm_input_format_query(p, &fmt, &st) == QM_OK && fmt == QM_INPUT_CSV);
    unlink(p);
    unlink(at(p, sizeof p, "z.csv"));
}

/* ---- outputs --------------------------------------------------------------------------------- */

static void tmp_of(char *buf, size_t n, const char *path)
{
    CHECK(qm_out_tmp_name(path, buf, n) > 0); /* ".<base>.qmesh-tmp.<host>.<pid>" */
}

static void test_npy_writer(void)
{
    char p[128], tmp[512];
    qm_status st;
    at(p, sizeof p, "out.npy");
    tmp_of(tmp, sizeof tmp, p);

    /* complex128 (4,), in two chunks */
    const double amp[8] = {0.5, 0, -0.5, 0.25, 0, -1, 1e-300, 3};
    uint64_t shape[2] = {4, 0};
    qm_npy_writer *w = NULL;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_OK);
    CHECK(w != NULL);
    CHECK(exists(tmp) && !exists(p)); /* only the temporary file while writing */
    CHECK(qm_npy_writer_write(w, amp, 2, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp + 4, 2, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp, 1, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "writing 1 more elements would exceed the shape's 4 (4 written)");
    CHECK(qm_npy_writer_commit(w, &st) == QM_OK);
    CHECK(exists(p) && !exists(tmp));
    size_t n = 0;
    unsigned char *b = read_bytes(p, &n);
    CHECK_EQ_U64(n, 128 + sizeof amp);
    if (b && n == 128 + sizeof amp) {
        char expect[128];
        memcpy(expect, "\x93NUMPY\x01\x00\x76\x00", 10);
        static const char dict[] = "{'descr': '<c16', 'fortran_order': False, 'shape': (4,), }";
        CHECK_EQ_U64(strlen(dict), 58);
        memcpy(expect + 10, dict, 58);
        memset(expect + 68, ' ', 59);
        expect[127] = '\n';
        CHECK(memcmp(b, expect, 128) == 0);
        CHECK(memcmp(b + 128, amp, sizeof amp) == 0);
    }
    free(b);

    /* complex64 (2, 3): header padded to 64, ends with '\n' */
    const float c64[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    shape[0] = 2;
    shape[1] = 3;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX64, 2, shape, &w, &st) == QM_OK);
    for (int i = 0; i < 6; ++i)
        CHECK(qm_npy_writer_write(w, c64 + 2 * i, 1, &st) == QM_OK);
    CHECK(qm_npy_writer_commit(w, &st) == QM_OK);
    b = read_bytes(p, &n);
    CHECK_EQ_U64(n, 128 + sizeof c64);
    if (b && n == 128 + sizeof c64) {
        static const char dict[] = "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }";
        CHECK(b[8] == 118 && b[9] == 0);
        CHECK(memcmp(b + 10, dict, strlen(dict)) == 0);
        CHECK(b[10 + strlen(dict)] == ' ' && b[126] == ' ' && b[127] == '\n');
        CHECK(memcmp(b + 128, c64, sizeof c64) == 0);
    }
    free(b);

    /* a large shape needs more digits; the data still starts at a multiple of 64 */
    shape[0] = 123456789012ull;
    shape[1] = 1;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX64, 2, shape, &w, &st) == QM_OK);
    qm_npy_writer_abort(w);
    CHECK(!exists(tmp));

    /* abort leaves neither the file nor the temporary file (the old file stays as it was) */
    unlink(p);
    shape[0] = 4;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp, 3, &st) == QM_OK);
    qm_npy_writer_abort(w);
    qm_npy_writer_abort(NULL);
    CHECK(!exists(p) && !exists(tmp));

    /* a short commit fails, removes the temporary file and keeps the old file */
    qm_test_write_file(p, "old", 3);
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_OK);
    CHECK(qm_npy_writer_write(w, amp, 1, &st) == QM_OK);
    CHECK(qm_npy_writer_commit(w, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "out.npy: not committed: wrote 1 of 4 elements");
    CHECK(!exists(tmp));
    b = read_bytes(p, &n);
    CHECK(b && n == 3 && memcmp(b, "old", 3) == 0);
    free(b);
    unlink(p);

    /* argument checks */
    CHECK(qm_npy_writer_open(p, QM_DTYPE_FLOAT64, 1, shape, &w, &st) == QM_E_DTYPE && w == NULL);
    CHECK_ERR(st, QM_E_DTYPE, "the npy writer takes complex64 or complex128 (got float64)");
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX64, 3, shape, &w, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "a 1-D or 2-D shape (got 3-D)");
    shape[0] = 0;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX64, 1, shape, &w, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "empty shape (dimension 0 is 0)");
    shape[0] = UINT64_MAX / 4;
    shape[1] = 4;
    CHECK(qm_npy_writer_open(p, QM_DTYPE_COMPLEX64, 2, shape, &w, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "overflows");
    CHECK(!exists(p) && !exists(tmp));

    /* a directory that does not exist: a clean E-IO, nothing created */
    char q[160];
    snprintf(q, sizeof q, "%s/nodir/out.npy", g_dir);
    shape[0] = 4;
    CHECK(qm_npy_writer_open(q, QM_DTYPE_COMPLEX128, 1, shape, &w, &st) == QM_E_IO && w == NULL);
    CHECK_ERR(st, QM_E_IO, "nodir/out.npy: cannot create the temporary file");
    CHECK_ERR(st, QM_E_IO, "No such file or directory; the directory must exist");
}

static void test_atomic_text(void)
{
    char p[128], tmp[512];
    qm_status st;
    at(p, sizeof p, "manifest.json");
    tmp_of(tmp, sizeof tmp, p);
    CHECK(qm_atomic_write_text(p, "{\"shards\": []}\n", &st) == QM_OK);
    size_t n = 0;
    unsigned char *b = read_bytes(p, &n);
    CHECK(b && n == 15 && memcmp(b, "{\"shards\": []}\n", 15) == 0);
    free(b);
    CHECK(qm_atomic_write_text(p, "x", &st) == QM_OK); /* replaces */
    b = read_bytes(p, &n);
    CHECK(b && n == 1 && b[0] == 'x');
    free(b);
    CHECK(!exists(tmp));
    unlink(p);
    char q[160];
    snprintf(q, sizeof q, "%s/nodir/manifest.json", g_dir);
    CHECK(qm_atomic_write_text(q, "x", &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "nodir/manifest.json: cannot create the temporary file");
    /* renaming over a directory fails: E-IO, and the temporary file is removed */
    at(p, sizeof p, "adir");
    CHECK(mkdir(p, 0777) == 0);
    tmp_of(tmp, sizeof tmp, p);
    CHECK(qm_atomic_write_text(p, "x", &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "adir: cannot rename");
    CHECK(!exists(tmp));
    rmdir(p);
}

static void test_out_dir(void)
{
    char p[128];
    qm_status st;
    at(p, sizeof p, "shards");
    CHECK(qm_out_dir_create(p, &st) == QM_OK);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK(qm_out_dir_create(p, &st) == QM_OK); /* already there */
    rmdir(p);
    at(p, sizeof p, "afile");
    qm_test_write_file(p, "x", 1);
    CHECK(qm_out_dir_create(p, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "afile: exists and is not a directory");
    char q[160];
    snprintf(q, sizeof q, "%s/afile/sub", g_dir);
    CHECK(qm_out_dir_create(q, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "a component of the path is not a directory");
    unlink(p);
    snprintf(q, sizeof q, "%s/no/such", g_dir);
    CHECK(qm_out_dir_create(q, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "no/such: cannot create the output directory: its parent directory "
                           "does not exist");
    CHECK(qm_out_dir_create("", &st) == QM_E_ARG);
}

/* Nothing may be left behind: the test directory must be empty at the end. */
static void check_dir_empty(void)
{
    DIR *dir = opendir(g_dir);
    CHECK(dir != NULL);
    if (!dir)
        return;
    int left = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        fprintf(stderr, "left behind: %s\n", e->d_name);
        left++;
    }
    closedir(dir);
    CHECK_EQ_U64(left, 0);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_test_io.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_npy_v1_f32_1d();
    test_npy_v1_f64_2d_ranges();
    test_npy_v2_v3_and_variants();
    test_npy_half_bool();
    test_npy_rejections();
    test_npy_fuzz();
    test_csv();
    test_csv_gzip();
    test_npy_writer();
    test_atomic_text();
    test_out_dir();
    check_dir_empty();
    rmdir(g_dir);
    return qm_test_end("test_io");
}
