#define _POSIX_C_SOURCE 200809L
/* test_npy_read.c — the `.npy` reader's pieces and threads, and its dtype conversions (docs/io.md
 * "Reading in parallel", "Integer and big-endian .npy"):
 *   - every dtype (f4 f8 i1 i2 i4 i8 u1 u2 u4 u8, little- and big-endian), C and Fortran order,
 *     1-D, a dropped column: ranges starting and ending mid-piece, tiny ranges, whole files, at
 *     pieces of a few elements and of the default block, with 1, 3 and 8 threads; every value
 *     against the value written (computed here, not read back), and the bytes of every thread
 *     count equal to the bytes of one thread;
 *   - exact integers (qm_npy_read_int_range): INT64_MIN, -1, 2^53 + 1, UINT64_MAX as they are; the
 *     float64 view of them rounded as C's conversion rounds;
 *   - faults (qm_io_read_fault_set): an EIO or a short read in any piece is one error naming the
 *     caller's range, every thread joined (the next read works), nothing leaked (ASan);
 *   - four threads reading through one reader at once (the worker pool and threads of their own);
 *   - background reads (qm_npy_read_submit / qm_npy_read_wait): up to 8 in flight, waited in
 *     order, each range's values exact, with synchronous reads mixed in; a fault in one of them is
 *     reported by that read's wait only; every read waited for before close (ASan: no leak);
 *   - the thread count's checks (QM_READ_THREADS, qm_npy_reader_set_threads) and O_DIRECT (on
 *     when the filesystem allows it, the same values either way).
 * Deterministic: no timing. Works in a fresh directory under /tmp, removed at the end. */
#include "io.h"
#include "testlib.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static const char *at(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", g_dir, name);
    return buf;
}

typedef struct dt {
    const char *descr; /* as written in the header */
    char kind;
    unsigned item;
    int big;
} dt;

static const dt k_types[] = {
    {"<f4", 'f', 4, 0}, {"<f8", 'f', 8, 0}, {">f4", 'f', 4, 1}, {">f8", 'f', 8, 1},
    {"|i1", 'i', 1, 0}, {"<i2", 'i', 2, 0}, {"<i4", 'i', 4, 0}, {"<i8", 'i', 8, 0},
    {">i2", 'i', 2, 1}, {">i8", 'i', 8, 1}, {"|u1", 'u', 1, 0}, {"<u2", 'u', 2, 0},
    {"<u4", 'u', 4, 0}, {"<u8", 'u', 8, 0}, {">u4", 'u', 4, 1},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

/* The 64-bit pattern of element e (row-major index of the file's array) of an integer file. */
static uint64_t int_bits(const dt *t, uint64_t e)
{
    uint64_t v = e * 0x9E3779B97F4A7C15ull + 0x0123456789ABCDEFull;
    if (t->item < 8) {
        v &= (((uint64_t)1) << (8 * t->item)) - 1;
        if (t->kind == 'i' && (v >> (8 * t->item - 1)) & 1u)
            v |= ~(uint64_t)0 << (8 * t->item); /* sign-extend */
    }
    return v;
}

/* Element e as what qm_npy_read_range delivers: a float (f4), else a double. */
static double value_of(const dt *t, uint64_t e)
{
    if (t->kind == 'f')
        return (double)e * 0.25 - 3.0; /* exact in float32 for these sizes */
    const uint64_t b = int_bits(t, e);
    return t->kind == 'i' ? (double)(int64_t)b : (double)b;
}

static void put(unsigned char *p, uint64_t v, unsigned n, int big)
{
    for (unsigned i = 0; i < n; ++i)
        p[big ? n - 1 - i : i] = (unsigned char)(v >> (8 * i));
}

/* Write an array of rows x cols (rows 0: 1-D of cols) of type t, C or Fortran order; returns the
 * path. Values: value_of / int_bits of the row-major index. */
static const char *write_npy(char *p, size_t cap, const char *name, const dt *t, uint64_t rows,
                             uint64_t cols, int fortran)
{
    char dict[160], shape[64];
    if (rows)
        snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)rows,
                 (unsigned long long)cols);
    else
        snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)cols);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                     t->descr, fortran ? "True" : "False", shape);
    const size_t hlen = ((size_t)10 + (size_t)n + 1 + 63) / 64 * 64 - 10;
    const uint64_t R = rows ? rows : 1, N = R * cols;
    const size_t bytes = 10 + hlen + (size_t)(N * t->item);
    unsigned char *img = malloc(bytes);
    CHECK(img != NULL);
    if (!img)
        return p;
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = (unsigned char)(hlen & 0xff);
    img[9] = (unsigned char)(hlen >> 8);
    memset(img + 10, ' ', hlen);
    memcpy(img + 10, dict, (size_t)n);
    img[10 + hlen - 1] = '\n';
    for (uint64_t e = 0; e < N; ++e) {
        const uint64_t r = e / cols, c = e % cols;
        const uint64_t pos = fortran && rows ? c * R + r : e;
        unsigned char *d = img + 10 + hlen + pos * t->item;
        if (t->kind == 'f' && t->item == 4) {
            const float f = (float)value_of(t, e);
            uint32_t w;
            memcpy(&w, &f, 4);
            put(d, w, 4, t->big);
        } else if (t->kind == 'f') {
            const double f = value_of(t, e);
            uint64_t w;
            memcpy(&w, &f, 8);
            put(d, w, 8, t->big);
        } else {
            put(d, int_bits(t, e), t->item, t->big);
        }
    }
    qm_test_write_file(at(p, cap, name), img, bytes);
    free(img);
    return p;
}

/* The file's row-major element of view element v (a dropped column skipped). */
static uint64_t file_elem(uint64_t v, uint64_t cols, long drop)
{
    if (drop < 0)
        return v;
    const uint64_t F = cols - 1, r = v / F, c = v % F;
    return r * cols + (c >= (uint64_t)drop ? c + 1 : c);
}

/* Check one range against the values written; *bytes1 (the one-thread read) compared too when
 * given. Returns 0 when everything matched. */
static int check_range(qm_npy_reader *r, const dt *t, uint64_t cols, long drop, uint64_t first,
                       uint64_t count, unsigned char *buf, const unsigned char *bytes1)
{
    qm_status st;
    const size_t oi = t->kind == 'f' && t->item == 4 ? 4 : 8;
    memset(buf, 0xA5, (size_t)(count * oi) + 8);
    if (qm_npy_read_range(r, first, count, buf, &st) != QM_OK) {
        qm_test_fail(__FILE__, __LINE__, "%s read [%llu, +%llu): %s", t->descr,
                     (unsigned long long)first, (unsigned long long)count, st.msg);
        return 1;
    }
    for (uint64_t i = 0; i < count; ++i) {
        const double want = value_of(t, file_elem(first + i, cols, drop));
        double got;
        if (oi == 4) {
            float f;
            memcpy(&f, buf + i * 4, 4);
            got = (double)f;
        } else {
            memcpy(&got, buf + i * 8, 8);
        }
        if (got != want) {
            qm_test_fail(__FILE__, __LINE__, "%s cols %llu drop %ld: element %llu of [%llu, +%llu) "
                         "is %.17g, expected %.17g", t->descr, (unsigned long long)cols, drop,
                         (unsigned long long)(first + i), (unsigned long long)first,
                         (unsigned long long)count, got, want);
            return 1;
        }
    }
    if (buf[count * oi] != 0xA5) {
        qm_test_fail(__FILE__, __LINE__, "%s: wrote past the range", t->descr);
        return 1;
    }
    if (bytes1 && memcmp(buf, bytes1, (size_t)(count * oi)) != 0) {
        qm_test_fail(__FILE__, __LINE__, "%s: bytes differ from the one-thread read", t->descr);
        return 1;
    }
    if (t->kind != 'f') { /* the exact view */
        uint64_t *u = (uint64_t *)(void *)buf;
        if (qm_npy_read_int_range(r, first, count, u, &st) != QM_OK) {
            qm_test_fail(__FILE__, __LINE__, "%s int read: %s", t->descr, st.msg);
            return 1;
        }
        for (uint64_t i = 0; i < count; ++i)
            if (u[i] != int_bits(t, file_elem(first + i, cols, drop))) {
                qm_test_fail(__FILE__, __LINE__, "%s: exact element %llu is %llx", t->descr,
                             (unsigned long long)(first + i), (unsigned long long)u[i]);
                return 1;
            }
    }
    return 0;
}

/* Every layout and dtype, ranges of every shape, 1..8 threads, tiny and default pieces. */
static void test_ranges(void)
{
    static const struct { uint64_t rows, cols; int fortran; long drop; } shapes[] = {
        {7, 5, 0, -1}, {7, 5, 1, -1}, {0, 29, 0, -1}, {7, 5, 0, 2}, {7, 5, 1, 0}, {13, 1, 1, -1},
        {1, 9, 1, -1},
    };
    static const int threads[] = {1, 3, 8};
    unsigned char buf[64 * 8 + 8], one[64 * 8];
    for (size_t ti = 0; ti < N_TYPES; ++ti) {
        const dt *t = &k_types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
            /* the drop and 1-D variants for a few types only: the paths do not depend on it */
            if ((shapes[si].drop >= 0 || shapes[si].rows <= 1) && ti % 4 != 1)
                continue;
            char p[128];
            write_npy(p, sizeof p, "r.npy", t, shapes[si].rows, shapes[si].cols,
                      shapes[si].fortran);
            qm_status st;
            qm_npy_reader *r = NULL;
            CHECK(qm_npy_open(p, &r, &st) == QM_OK);
            if (!r)
                continue;
            CHECK(qm_npy_reader_info(r)->kind == t->kind);
            CHECK_EQ_U64(qm_npy_reader_info(r)->item_bytes, t->item);
            CHECK_EQ_U64(qm_npy_reader_info(r)->big_endian, t->big);
            if (shapes[si].drop >= 0)
                CHECK(qm_npy_reader_drop_column(r, (uint64_t)shapes[si].drop, &st) == QM_OK);
            const uint64_t n = qm_npy_reader_info(r)->n_elems;
            const size_t oi = qm_dtype_size(qm_npy_reader_info(r)->dtype);
            int bad = 0;
            /* pieces of 1 or 3 elements (by type, alternately), of 17, and of the default block */
            static const uint64_t blocks[] = {1, 3, 17, QM_NPY_BLOCK_BYTES};
            for (size_t bi = ti % 2; bi < 4 && !bad; bi += 1 + (bi == 0)) {
                CHECK(qm_npy_reader_set_block_bytes(r, blocks[bi] == QM_NPY_BLOCK_BYTES
                                                           ? blocks[bi] : blocks[bi] * t->item,
                                                    &st) == QM_OK);
                for (uint64_t first = 0; first < n && !bad; ++first) {
                    const uint64_t counts[] = {1, 2, 4, 11, n - first};
                    for (size_t ci = 0; ci < 5 && !bad; ++ci) {
                        const uint64_t count = counts[ci];
                        if (count > n - first)
                            continue;
                        CHECK(qm_npy_reader_set_threads(r, 1, &st) == QM_OK);
                        bad |= check_range(r, t, shapes[si].cols, shapes[si].drop, first, count,
                                           buf, NULL);
                        memcpy(one, buf, (size_t)(count * oi));
                        for (size_t k = 1; k < 3 && !bad; ++k) {
                            CHECK(qm_npy_reader_set_threads(r, threads[k], &st) == QM_OK);
                            bad |= check_range(r, t, shapes[si].cols, shapes[si].drop, first,
                                               count, buf, t->kind == 'f' ? one : NULL);
                        }
                    }
                }
            }
            qm_test_checks++;
            qm_npy_close(r);
        }
    }
}

/* A larger file: many pieces per read, 8 threads against 1, ranges by a fixed LCG. */
static void test_many_pieces(void)
{
    char p[128];
    const dt *t = &k_types[1]; /* <f8 */
    write_npy(p, sizeof p, "big.npy", t, 1000, 37, 0);
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (!r)
        return;
    const uint64_t n = 37000;
    unsigned char *a = malloc(n * 8 + 8), *b = malloc(n * 8);
    CHECK(a && b);
    CHECK(qm_npy_reader_set_block_bytes(r, 4096, &st) == QM_OK);
    uint64_t x = 12345;
    for (int i = 0; a && b && i < 200; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t first = (x >> 20) % n, count = 1 + (x >> 40) % (n - first);
        CHECK(qm_npy_reader_set_threads(r, 1, &st) == QM_OK);
        if (check_range(r, t, 37, -1, first, count, a, NULL))
            break;
        memcpy(b, a, (size_t)(count * 8));
        CHECK(qm_npy_reader_set_threads(r, 8, &st) == QM_OK);
        if (check_range(r, t, 37, -1, first, count, a, b))
            break;
        qm_test_checks++;
    }
    free(a);
    free(b);
    qm_npy_close(r);
}

/* Background reads: K in flight at once, waited in submission order, every value checked; a
 * synchronous read between them; a fault in the j-th read reported by its wait, the others
 * exact. */
static void test_submit(void)
{
    char p[128];
    const dt *t = &k_types[1]; /* <f8 */
    write_npy(p, sizeof p, "bg.npy", t, 1000, 37, 0);
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (!r)
        return;
    const uint64_t n = 37000, K = 8, piece = 4625; /* 8 reads cover the file exactly */
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
    CHECK(v && w);
    CHECK(qm_npy_reader_set_block_bytes(r, 4096, &st) == QM_OK);
    const int threads[] = {1, 3, 8};
    for (int ti = 0; v && w && ti < 3; ++ti) {
        CHECK(qm_npy_reader_set_threads(r, threads[ti], &st) == QM_OK);
        /* prepared: the workers run before the first read (none for one thread), and a reader
         * told the file is resident reads the same bytes without read-ahead advice */
        if (ti == 0)
            CHECK(qm_npy_reader_workers(r) == 0);
        qm_npy_reader_prepare(r, ti == 1);
        CHECK(qm_npy_reader_workers(r) == (ti == 0 ? 0 : threads[ti]));
        for (int round = 0; round < 3; ++round) {
            memset(v, 0xA5, n * sizeof *v);
            qm_npy_read_ticket *tk[8] = {0};
            for (uint64_t k = 0; k < K; ++k)
                CHECK(qm_npy_read_submit(r, k * piece, piece, v + k * piece, &tk[k], &st) == QM_OK);
            /* a synchronous read while they are in flight */
            CHECK(check_range(r, t, 37, -1, 100, 5000, (unsigned char *)w, NULL) == 0);
            for (uint64_t k = 0; k < K; ++k)
                CHECK(qm_npy_read_wait(r, tk[k], &st) == QM_OK);
            for (uint64_t e = 0; e < n; ++e)
                if (v[e] != value_of(t, e)) {
                    qm_test_fail(__FILE__, __LINE__, "threads %d: element %llu is %.17g, expected "
                                 "%.17g", threads[ti], (unsigned long long)e, v[e], value_of(t, e));
                    break;
                }
            qm_test_checks++;
        }
        /* a fault in a piece of the read submitted third: its wait fails, the others read */
        memset(v, 0xA5, n * sizeof *v);
        qm_npy_read_ticket *tk[8] = {0};
        for (uint64_t k = 0; k < 2; ++k)
            CHECK(qm_npy_read_submit(r, k * piece, piece, v + k * piece, &tk[k], &st) == QM_OK);
        for (uint64_t k = 0; k < 2; ++k)
            CHECK(qm_npy_read_wait(r, tk[k], &st) == QM_OK);
        qm_io_read_fault_set(1, EIO);
        CHECK(qm_npy_read_submit(r, 2 * piece, piece, v + 2 * piece, &tk[2], &st) == QM_OK);
        CHECK(qm_npy_read_wait(r, tk[2], &st) == QM_E_IO);
        char want[256];
        snprintf(want, sizeof want, "%s: cannot read elements [9250, 13875): %s", p, strerror(EIO));
        CHECK_STR(st.msg, want);
        qm_io_read_fault_set(0, 0);
        CHECK(qm_npy_read_submit(r, 3 * piece, piece, v + 3 * piece, &tk[3], &st) == QM_OK);
        CHECK(qm_npy_read_wait(r, tk[3], &st) == QM_OK);
        for (uint64_t e = 0; e < 2 * piece; ++e)
            if (v[e] != value_of(t, e)) {
                qm_test_fail(__FILE__, __LINE__, "after fault: element %llu", (unsigned long long)e);
                break;
            }
        for (uint64_t e = 3 * piece; e < 4 * piece; ++e)
            if (v[e] != value_of(t, e)) {
                qm_test_fail(__FILE__, __LINE__, "after fault: element %llu", (unsigned long long)e);
                break;
            }
        /* submit errors: out of range (no ticket), no ticket pointer */
        qm_npy_read_ticket *none = (qm_npy_read_ticket *)1;
        CHECK(qm_npy_read_submit(r, n - 5, 10, v, &none, &st) == QM_E_BOUNDS);
        CHECK(none == NULL);
        CHECK(qm_npy_read_submit(r, 0, 0, v, &none, &st) == QM_OK);
        CHECK(qm_npy_read_wait(r, none, &st) == QM_OK);
    }
    free(v);
    free(w);
    qm_npy_close(r);
}

/* Exact integers at the edges of int64/uint64, and the float64 view of them. */
static void test_exact_integers(void)
{
    static const int64_t iv[] = {INT64_MIN, -1, 0, (INT64_C(1) << 53) + 1, INT64_MAX};
    static const uint64_t uv[] = {0, (UINT64_C(1) << 53) + 1, UINT64_C(1) << 63, UINT64_MAX};
    unsigned char img[256];
    char p[128];
    qm_status st;
    for (int s = 0; s < 2; ++s) {
        const char *dict = s ? "{'descr': '>u8', 'fortran_order': False, 'shape': (4,), }"
                             : "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }";
        const size_t n = s ? 4 : 5;
        memset(img, ' ', 128);
        memcpy(img, "\x93NUMPY\x01\x00\x76\x00", 10);
        memcpy(img + 10, dict, strlen(dict));
        img[127] = '\n';
        for (size_t i = 0; i < n; ++i)
            put(img + 128 + 8 * i, s ? uv[i] : (uint64_t)iv[i], 8, s);
        qm_test_write_file(at(p, sizeof p, "edge.npy"), img, 128 + 8 * n);
        qm_npy_reader *r = NULL;
        CHECK(qm_npy_open(p, &r, &st) == QM_OK);
        if (!r)
            continue;
        CHECK(qm_npy_reader_info(r)->dtype == QM_DTYPE_FLOAT64);
        uint64_t u[5] = {0};
        double d[5] = {0};
        CHECK(qm_npy_read_int_range(r, 0, n, u, &st) == QM_OK);
        CHECK(qm_npy_read_range(r, 0, n, d, &st) == QM_OK);
        for (size_t i = 0; i < n; ++i) {
            CHECK_EQ_U64(u[i], s ? uv[i] : (uint64_t)iv[i]);
            CHECK(d[i] == (s ? (double)uv[i] : (double)iv[i]));
        }
        CHECK(s || (int64_t)u[0] == INT64_MIN);
        CHECK(d[1] == (s ? 9007199254740992.0 : -1.0)); /* 2^53 + 1 rounds to 2^53 */
        qm_npy_close(r);
    }
    /* a float file has no exact integer view */
    write_npy(p, sizeof p, "f.npy", &k_types[1], 0, 4, 0);
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    uint64_t u[4];
    CHECK(qm_npy_read_int_range(r, 0, 4, u, &st) == QM_E_DTYPE);
    CHECK_ERR(st, QM_E_DTYPE, "f.npy: exact integer read of a float64 file");
    qm_npy_close(r);
}

/* An injected EIO or short read in some piece: one error naming the caller's range; every thread
 * joined (the next read of the same reader works). */
static void test_faults(void)
{
    char p[128];
    static const int fortran[] = {0, 1};
    for (int fi = 0; fi < 2; ++fi) {
        const dt *t = fi ? &k_types[7] : &k_types[1]; /* <f8 C order; <i8 Fortran order */
        write_npy(p, sizeof p, "fault.npy", t, 1000, 37, fortran[fi]);
        qm_status st;
        qm_npy_reader *r = NULL;
        CHECK(qm_npy_open(p, &r, &st) == QM_OK);
        if (!r)
            continue;
        CHECK(qm_npy_reader_set_block_bytes(r, 4096, &st) == QM_OK);
        double *v = malloc(37000 * sizeof *v);
        CHECK(v != NULL);
        char want[256];
        for (int threads = 1; v && threads <= 8; threads *= 2) {
            CHECK(qm_npy_reader_set_threads(r, threads, &st) == QM_OK);
            /* one thread reads a C-order range in one pread: only the first can fail */
            const long kmax = threads == 1 && !fortran[fi] ? 1 : 40;
            for (long k = 1; k <= kmax; k += 13) {
                qm_io_read_fault_set(k, EIO);
                CHECK(qm_npy_read_range(r, 1, 36998, v, &st) == QM_E_IO);
                snprintf(want, sizeof want, "%s: cannot read elements [1, 36999): %s", p,
                         strerror(EIO));
                CHECK_STR(st.msg, want);
                qm_io_read_fault_set(k, -1);
                CHECK(qm_npy_read_range(r, 1, 36998, v, &st) == QM_E_IO);
                snprintf(want, sizeof want, "%s: unexpected end of file reading elements [1, "
                         "36999) (got 0 of ", p);
                CHECK(strncmp(st.msg, want, strlen(want)) == 0);
                CHECK(strstr(st.msg, " bytes); the file shrank after it was opened") != NULL);
                CHECK(strchr(st.msg, '\n') == NULL);
                qm_io_read_fault_set(0, 0);
                CHECK(check_range(r, t, 37, -1, 1, 36998, (unsigned char *)v, NULL) == 0);
            }
        }
        free(v);
        qm_npy_close(r);
    }
}

static void test_threads_and_direct(void)
{
    char p[128];
    qm_status st;
    write_npy(p, sizeof p, "t.npy", &k_types[1], 64, 65, 0);
    qm_npy_reader *r = NULL;
    CHECK(setenv("QM_READ_THREADS", "3", 1) == 0);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK(qm_npy_reader_threads(r) == 3);
    qm_npy_close(r);
    CHECK(setenv("QM_READ_THREADS", "0", 1) == 0);
    CHECK(qm_npy_open(p, &r, &st) == QM_E_ARG && r == NULL);
    char want[256];
    snprintf(want, sizeof want, "%s: QM_READ_THREADS is '0'; give a thread count in [1, 64]", p);
    CHECK_STR(st.msg, want);
    CHECK(setenv("QM_READ_THREADS", "8x", 1) == 0);
    CHECK(qm_npy_open(p, &r, &st) == QM_E_ARG && r == NULL);
    CHECK(unsetenv("QM_READ_THREADS") == 0);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK_EQ_U64(qm_npy_reader_threads(r), cpus > QM_NPY_DEFAULT_MAX_THREADS ? QM_NPY_DEFAULT_MAX_THREADS
                                           : cpus < 1                        ? 1
                                                                             : cpus);
    CHECK(qm_npy_reader_set_threads(r, 0, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "npy threads: 0 is not a thread count in [1, 64]");
    CHECK(qm_npy_reader_set_threads(r, 65, &st) == QM_E_ARG);
    /* O_DIRECT: on where the filesystem allows it; the values are the same either way */
    bool active = false;
    CHECK(qm_npy_reader_set_direct(r, true, &active, &st) == QM_OK);
    printf("O_DIRECT on %s: %s\n", g_dir, active ? "active" : "refused (page cache)");
    unsigned char *buf = malloc(64 * 65 * 8 + 8);
    CHECK(buf != NULL);
    static const uint64_t blocks[] = {8, 4096, 5000, QM_NPY_BLOCK_BYTES};
    for (size_t bi = 0; buf && bi < 4; ++bi) {
        CHECK(qm_npy_reader_set_block_bytes(r, blocks[bi], &st) == QM_OK);
        for (int th = 1; th <= 4; th += 3) {
            CHECK(qm_npy_reader_set_threads(r, th, &st) == QM_OK);
            CHECK(check_range(r, &k_types[1], 65, -1, 0, 64 * 65, buf, NULL) == 0);
            CHECK(check_range(r, &k_types[1], 65, -1, 511, 1030, buf, NULL) == 0);
            CHECK(check_range(r, &k_types[1], 65, -1, 4159, 1, buf, NULL) == 0);
        }
    }
    qm_io_read_fault_set(2, EIO); /* a failed O_DIRECT read is an error, not a fallback */
    CHECK(qm_npy_read_range(r, 0, 64 * 65, buf, &st) == QM_E_IO);
    CHECK_ERR(st, QM_E_IO, "cannot read elements [0, 4160): ");
    qm_io_read_fault_set(0, 0);
    CHECK(qm_npy_reader_set_direct(r, false, &active, &st) == QM_OK && !active);
    CHECK(check_range(r, &k_types[1], 65, -1, 0, 64 * 65, buf, NULL) == 0);
    CHECK(setenv("QM_READ_DIRECT", "yes", 1) == 0);
    qm_npy_reader *r2 = NULL;
    CHECK(qm_npy_open(p, &r2, &st) == QM_E_ARG && r2 == NULL);
    snprintf(want, sizeof want, "%s: QM_READ_DIRECT is 'yes'; use 1 (O_DIRECT) or 0", p);
    CHECK_STR(st.msg, want);
    CHECK(unsetenv("QM_READ_DIRECT") == 0);
    free(buf);
    qm_npy_close(r);
}

/* Several threads read through one reader at once: one uses the reader's worker pool, the others
 * start threads of their own; every value right, nothing leaked or left running. */
typedef struct conc_arg {
    qm_npy_reader *r;
    int id, bad;
} conc_arg;

static void *conc_reader(void *arg)
{
    conc_arg *a = arg;
    const dt *t = &k_types[7]; /* <i8: converted, through the bounce buffers */
    unsigned char *buf = malloc(37000 * 8 + 8);
    if (!buf) {
        a->bad = 1;
        return NULL;
    }
    uint64_t x = 99 + (uint64_t)a->id;
    for (int i = 0; i < 30 && !a->bad; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t first = (x >> 20) % 37000, count = 1 + (x >> 40) % (37000 - first);
        a->bad = check_range(a->r, t, 37, -1, first, count, buf, NULL);
    }
    free(buf);
    return NULL;
}

static void test_concurrent_reads(void)
{
    char p[128];
    write_npy(p, sizeof p, "conc.npy", &k_types[7], 1000, 37, 1);
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (!r)
        return;
    CHECK(qm_npy_reader_set_threads(r, 3, &st) == QM_OK);
    CHECK(qm_npy_reader_set_block_bytes(r, 8192, &st) == QM_OK);
    pthread_t tid[4];
    conc_arg args[4];
    for (int i = 0; i < 4; ++i) {
        args[i] = (conc_arg){r, i, 0};
        CHECK(pthread_create(&tid[i], NULL, conc_reader, &args[i]) == 0);
    }
    for (int i = 0; i < 4; ++i) {
        pthread_join(tid[i], NULL);
        CHECK(args[i].bad == 0);
    }
    /* the pool grows and shrinks its share with the thread count */
    unsigned char *buf = malloc(37000 * 8 + 8);
    static const int th[] = {8, 2, 5, 1, 8};
    for (int i = 0; buf && i < 5; ++i) {
        CHECK(qm_npy_reader_set_threads(r, th[i], &st) == QM_OK);
        CHECK(check_range(r, &k_types[7], 37, -1, 3, 36990, buf, NULL) == 0);
    }
    free(buf);
    qm_npy_close(r);
}

/* One pool shared by two readers of two files (a C API context's): the pool's threads run before
 * either reads, both readers' background reads are in flight at once and read exactly, the pool
 * outlives a closed reader, and a reader whose prepare started threads of its own stops them
 * when it takes the pool. */
static void test_shared_pool(void)
{
    char p1[128], p2[128];
    const dt *t = &k_types[1]; /* <f8 */
    write_npy(p1, sizeof p1, "sh1.npy", t, 1000, 37, 0);
    write_npy(p2, sizeof p2, "sh2.npy", t, 500, 20, 0);
    qm_read_pool *pool = qm_read_pool_create(5);
    CHECK(pool != NULL);
    qm_status st;
    qm_npy_reader *a = NULL, *b = NULL;
    CHECK(qm_npy_open(p1, &a, &st) == QM_OK);
    CHECK(qm_npy_open(p2, &b, &st) == QM_OK);
    if (!pool || !a || !b) {
        qm_npy_close(a);
        qm_npy_close(b);
        qm_read_pool_destroy(pool);
        return;
    }
    CHECK(qm_npy_reader_set_threads(a, 4, &st) == QM_OK);
    CHECK(qm_npy_reader_set_threads(b, 3, &st) == QM_OK);
    CHECK(qm_npy_reader_set_block_bytes(a, 4096, &st) == QM_OK);
    CHECK(qm_npy_reader_set_block_bytes(b, 4096, &st) == QM_OK);
    qm_npy_reader_prepare(b, false); /* b's own 3 threads, replaced by the pool's below */
    CHECK(qm_npy_reader_workers(b) == 3);
    qm_npy_reader_use_pool(a, pool);
    qm_npy_reader_use_pool(b, pool);
    CHECK(qm_npy_reader_workers(a) == 5);
    CHECK(qm_npy_reader_workers(b) == 5);
    const uint64_t na = 37000, nb = 10000;
    double *va = malloc(na * sizeof *va), *vb = malloc(nb * sizeof *vb);
    CHECK(va && vb);
    for (int round = 0; va && vb && round < 5; ++round) {
        memset(va, 0xA5, na * sizeof *va);
        memset(vb, 0xA5, nb * sizeof *vb);
        qm_npy_read_ticket *ta[4] = {0}, *tb[4] = {0};
        for (uint64_t k = 0; k < 4; ++k) {
            CHECK(qm_npy_read_submit(a, k * 9250, 9250, va + k * 9250, &ta[k], &st) == QM_OK);
            CHECK(qm_npy_read_submit(b, k * 2500, 2500, vb + k * 2500, &tb[k], &st) == QM_OK);
        }
        for (uint64_t k = 0; k < 4; ++k) {
            CHECK(qm_npy_read_wait(a, ta[k], &st) == QM_OK);
            CHECK(qm_npy_read_wait(b, tb[k], &st) == QM_OK);
        }
        uint64_t bad = UINT64_MAX;
        for (uint64_t e = 0; e < na && bad == UINT64_MAX; ++e)
            if (va[e] != value_of(t, e))
                bad = e;
        for (uint64_t e = 0; e < nb && bad == UINT64_MAX; ++e)
            if (vb[e] != value_of(t, e))
                bad = na + e;
        if (bad != UINT64_MAX) {
            qm_test_fail(__FILE__, __LINE__, "shared pool, round %d: element %llu of the two files "
                         "differs", round, (unsigned long long)bad);
            break;
        }
        qm_test_checks++;
    }
    qm_npy_close(b); /* the pool runs on for a */
    CHECK(qm_npy_reader_workers(a) == 5);
    if (va)
        CHECK(check_range(a, t, 37, -1, 77, 30000, (unsigned char *)va, NULL) == 0);
    qm_npy_close(a);
    qm_read_pool_destroy(pool);
    qm_read_pool_destroy(NULL);
    free(va);
    free(vb);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_test_npy_read.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("QM_READ_THREADS");
    unsetenv("QM_READ_DIRECT");
    test_ranges();
    test_many_pieces();
    test_exact_integers();
    test_faults();
    test_threads_and_direct();
    test_concurrent_reads();
    test_submit();
    test_shared_pool();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return qm_test_end("test_npy_read");
}
