#define _POSIX_C_SOURCE 200809L
/* test_inputs.c — issue 13's input items (docs/io.md, docs/cli.md), in the library and through the
 * CLI:
 *   - Fortran-order `.npy`: qm_npy_read_range of every range (or a dense sample of them) on odd
 *     shapes (1xF, Bx1, ...), both dtypes, with and without a dropped column, at block sizes that
 *     cross every edge, against the C-order values; and `qmesh encode` of the same data written C-
 *     and F-order giving byte-identical outputs (one file, per-shard files, tiny staging chunks);
 *   - `--drop-column` on a 2-D `.npy` (by 0-based index; a name, a 1-D array, an index out of
 *     range are coded errors), `--header yes|no` on a `.npy` refused;
 *   - a FIFO (and a directory, a device) as input or scenario refused at once: every call runs in
 *     a child under alarm() / the CLI under `timeout 20`, so a regression reports "hung" and never
 *     hangs the test;
 *   - CSV: a UTF-8 byte-order mark (plain and gzip), UTF-16 refused, concatenated gzip members,
 *     trailing garbage, truncation at every length, the text limit, and memory bounded by the data
 *     (a child under RLIMIT_AS; skipped under AddressSanitizer, which reserves terabytes).
 * Arguments: the qmesh binary, the source dir. Works in a fresh directory under /tmp, removed at the
 * end. Run with an older qmesh binary, the CLI checks show which behaviours it lacks. */
#include "io.h"
#include "scenario_loader.h"
#include "testlib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define QM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QM_TEST_ASAN 1
#endif
#endif
#ifndef QM_TEST_ASAN
#define QM_TEST_ASAN 0
#endif

static const char *qmesh;
static char g_dir[64];

static const char *at(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}




/* ---- .npy files ------------------------------------------------------------------------------ */

/* v[r][c] of the test matrices: exact in float32 and float64, distinct per element. */
static double value_at(uint64_t r, uint64_t c)
{
    return (double)r * 1000.0 + (double)c + 0.25;
}

/* Write a .npy of shape (rows, cols) (ndim 2) or (cols,) (ndim 1), dtype '<f4' or '<f8', in C or
 * Fortran order, with values value_at (skipping file column `skip` when >= 0: the reference of a
 * dropped column). */
static void write_npy(const char *path, int ndim, uint64_t rows, uint64_t cols, int f8,
                      int fortran, long skip)
{
    const uint64_t fc = cols - (skip >= 0 ? 1 : 0);
    char dict[160];
    if (ndim == 1)
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%llu,), }",
                 f8 ? "<f8" : "<f4", fortran ? "True" : "False", (unsigned long long)fc);
    else
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%llu, %llu), }",
                 f8 ? "<f8" : "<f4", fortran ? "True" : "False", (unsigned long long)rows,
                 (unsigned long long)fc);
    size_t hlen = strlen(dict) + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    const size_t item = f8 ? 8 : 4, n = (size_t)(rows * fc);
    unsigned char *img = calloc(1, 10 + hlen + n * item);
    if (!img)
        return;
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = (unsigned char)(hlen & 0xff);
    img[9] = (unsigned char)(hlen >> 8);
    memset(img + 10, ' ', hlen - 1);
    memcpy(img + 10, dict, strlen(dict));
    img[10 + hlen - 1] = '\n';
    unsigned char *d = img + 10 + hlen;
    size_t k = 0;
    for (uint64_t a = 0; a < (fortran ? fc : rows); ++a)
        for (uint64_t b = 0; b < (fortran ? rows : fc); ++b) {
            const uint64_t r = fortran ? b : a, c0 = fortran ? a : b;
            const uint64_t c = skip >= 0 && c0 >= (uint64_t)skip ? c0 + 1 : c0;
            if (f8) {
                const double v = value_at(r, c);
                memcpy(d + k * 8, &v, 8);
            } else {
                const float v = (float)value_at(r, c);
                memcpy(d + k * 4, &v, 4);
            }
            k++;
        }
    qm_test_write_file(path, img, 10 + hlen + n * item);
    free(img);
}

/* Every range [first, first + count) of the view (a sample for big arrays) equals value_at. */
static int check_ranges(qm_npy_reader *r, uint64_t rows, uint64_t F, long drop, int f8,
                        char *why, size_t why_bytes)
{
    const uint64_t n = rows * F, item = f8 ? 8 : 4;
    unsigned char *got = malloc((size_t)(n * item));
    qm_status st;
    int bad = 0;
    const uint64_t step = n <= 60 ? 1 : n / 23 + 1;
    for (uint64_t first = 0; first < n && !bad; first += step) {
        for (uint64_t count = 1; first + count <= n && !bad;
             count += (count < 12 || n <= 60) ? 1 : count / 2 + 1) {
            memset(got, 0xee, (size_t)(n * item));
            if (qm_npy_read_range(r, first, count, got, &st) != QM_OK) {
                snprintf(why, why_bytes, "read [%llu, +%llu): %s", (unsigned long long)first,
                         (unsigned long long)count, st.msg);
                bad = 1;
                break;
            }
            for (uint64_t i = 0; i < count; ++i) {
                const uint64_t e = first + i, row = e / F, c0 = e % F;
                const uint64_t c = drop >= 0 && c0 >= (uint64_t)drop ? c0 + 1 : c0;
                double v;
                if (f8) {
                    memcpy(&v, got + i * 8, 8);
                } else {
                    float fv;
                    memcpy(&fv, got + i * 4, 4);
                    v = fv;
                }
                const double want = f8 ? value_at(row, c) : (double)(float)value_at(row, c);
                if (v != want) {
                    snprintf(why, why_bytes, "read [%llu, +%llu): element %llu is %g, want %g",
                             (unsigned long long)first, (unsigned long long)count,
                             (unsigned long long)e, v, want);
                    bad = 1;
                    break;
                }
            }
            /* nothing written past the range */
            if (!bad && count < n && got[count * item] != 0xee) {
                snprintf(why, why_bytes, "read [%llu, +%llu) wrote past its end",
                         (unsigned long long)first, (unsigned long long)count);
                bad = 1;
            }
        }
    }
    free(got);
    return bad;
}

static void test_npy_fortran_ranges(void)
{
    static const uint64_t shapes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 4}, {5, 3},
                                         {13, 7}, {64, 3}, {3, 64}, {600, 5}, {9, 700}};
    static const uint64_t blocks[] = {0, 8, 24, 40, 200, 4096};
    char p[128], why[1024];
    int combos = 0, failed = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        const uint64_t rows = shapes[s][0], cols = shapes[s][1];
        for (int f8 = 0; f8 <= 1; ++f8)
            for (int fortran = 0; fortran <= 1; ++fortran) {
                at(p, sizeof p, "ranges.npy");
                write_npy(p, 2, rows, cols, f8, fortran, -1);
                const long drops[] = {-1, 0, (long)cols / 2, (long)cols - 1};
                for (size_t di = 0; di < 4; ++di) {
                    const long drop = drops[di];
                    if (drop >= 0 && cols < 2)
                        continue;
                    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; ++bi) {
                        qm_status st;
                        qm_npy_reader *r = NULL;
                        CHECK(qm_npy_open(p, &r, &st) == QM_OK);
                        if (!r)
                            continue;
                        CHECK(qm_npy_reader_info(r)->fortran_order == fortran);
                        if (blocks[bi])
                            CHECK(qm_npy_reader_set_block_bytes(r, blocks[bi], &st) == QM_OK);
                        if (drop >= 0)
                            CHECK(qm_npy_reader_drop_column(r, (uint64_t)drop, &st) == QM_OK);
                        const uint64_t F = cols - (drop >= 0 ? 1 : 0);
                        CHECK_EQ_U64(qm_npy_reader_info(r)->n_features, F);
                        CHECK_EQ_U64(qm_npy_reader_info(r)->n_elems, rows * F);
                        combos++;
                        why[0] = '\0';
                        if (check_ranges(r, rows, F, drop, f8, why, sizeof why)) {
                            failed++;
                            qm_test_fail(__FILE__, __LINE__,
                                         "shape (%llu, %llu) %s %s drop %ld block %llu: %s",
                                         (unsigned long long)rows, (unsigned long long)cols,
                                         f8 ? "<f8" : "<f4", fortran ? "F" : "C", drop,
                                         (unsigned long long)blocks[bi], why);
                        }
                        qm_npy_close(r);
                    }
                }
            }
    }
    printf("fortran/drop ranges: %d reader configurations, %d failed\n", combos, failed);
    /* a 1-D Fortran-order array is the same bytes as C order */
    write_npy(at(p, sizeof p, "f1d.npy"), 1, 1, 5, 1, 1, -1);
    qm_status st;
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    if (r) {
        double g[5];
        CHECK(qm_npy_read_range(r, 1, 3, g, &st) == QM_OK);
        CHECK(g[0] == 1.25 && g[1] == 2.25 && g[2] == 3.25);
        qm_npy_close(r);
    }
    unlink(p);
}

static void test_npy_drop_column_errors(void)
{
    char p[128];
    qm_status st;
    qm_npy_reader *r = NULL;
    write_npy(at(p, sizeof p, "one.npy"), 1, 1, 4, 1, 0, -1);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK(qm_npy_reader_drop_column(r, 0, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "one.npy: cannot drop column 0 of a 1-D array (shape (4,)): it is "
                              "one sample with no columns");
    qm_npy_close(r);
    write_npy(p, 2, 3, 4, 1, 0, -1);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK(qm_npy_reader_info(r)->dropped_column == -1);
    CHECK(qm_npy_reader_drop_column(r, 4, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "one.npy: drop column 4 is out of range (the file has 4 columns, "
                              "indices 0..3)");
    CHECK(qm_npy_reader_drop_column(r, 3, &st) == QM_OK);
    CHECK(qm_npy_reader_info(r)->dropped_column == 3);
    CHECK(qm_npy_reader_drop_column(r, 1, &st) == QM_E_ARG);
    CHECK_ERR(st, QM_E_ARG, "column 3 was already dropped");
    double g[9];
    CHECK(qm_npy_read_range(r, 0, 10, g, &st) == QM_E_BOUNDS);
    CHECK_ERR(st, QM_E_BOUNDS, "outside the array's 9 elements");
    CHECK(qm_npy_reader_set_block_bytes(r, 0, &st) == QM_E_ARG);
    qm_npy_close(r);
    write_npy(p, 2, 3, 1, 1, 0, -1);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK(qm_npy_reader_drop_column(r, 0, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "no feature columns left after dropping column 0 (the file has 1 "
                              "column)");
    qm_npy_close(r);
    CHECK(qm_npy_reader_drop_column(NULL, 0, &st) == QM_E_ARG);
    /* a C-order read with a dropped column reads only its own rows: cut the file after row 1 */
    write_npy(p, 2, 4, 3, 1, 0, -1);
    CHECK(qm_npy_open(p, &r, &st) == QM_OK);
    CHECK(qm_npy_reader_drop_column(r, 1, &st) == QM_OK);
    CHECK(truncate(p, (off_t)(qm_npy_reader_info(r)->data_offset + 2 * 3 * 8)) == 0);
    CHECK(qm_npy_read_range(r, 1, 3, g, &st) == QM_OK); /* rows 0..1 */
    CHECK(g[0] == 2.25 && g[1] == 1000.25 && g[2] == 1002.25);
    CHECK(qm_npy_read_range(r, 3, 2, g, &st) == QM_E_IO); /* row 2 is gone */
    CHECK_ERR(st, QM_E_IO, "unexpected end of file reading elements [3, 5)");
    qm_npy_close(r);
    unlink(p);
}

/* A file named *.npy with the wrong magic gets the .npy reader's error, not a CSV parse error. */
static void test_npy_name_with_wrong_magic(void)
{
    char p[128];
    qm_status st;
    qm_input_format fmt = QM_INPUT_CSV;
    qm_test_write_file(at(p, sizeof p, "wrong.NPY"), "1,2\n3,4\n", 8);
    CHECK(qm_input_format_query(p, &fmt, &st) == QM_OK && fmt == QM_INPUT_NPY);
    qm_npy_reader *r = NULL;
    CHECK(qm_npy_open(p, &r, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "wrong.NPY: not a .npy file: bad magic (first bytes: 31 2c 32 0a 33 "
                              "2c; expected 93 4e 55 4d 50 59");
    unlink(p);
    qm_test_write_file(at(p, sizeof p, "right.csv"), "1,2\n3,4\n", 8);
    CHECK(qm_input_format_query(p, &fmt, &st) == QM_OK && fmt == QM_INPUT_CSV);
    unlink(p);
}

/* ---- non-regular files: never block ---------------------------------------------------------- */

enum { OPEN_NPY, OPEN_FORMAT, OPEN_CSV, OPEN_SCENARIO };

/* Run one opener on path in a child under alarm(20): the child's exit code is 0 when the call
 * failed with `code` and a message containing `part`, 3 otherwise; a child killed by SIGALRM hung. */
static void expect_refused(int which, const char *path, qm_code code, const char *part)
{
    static const char *names[] = {"qm_npy_open", "qm_input_format_query", "qm_csv_load",
                                  "qm_scenario_load_file"};
    fflush(NULL);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(20);
        qm_status st;
        qm_status_clear(&st);
        qm_code rc = QM_OK;
        if (which == OPEN_NPY) {
            qm_npy_reader *r = NULL;
            rc = qm_npy_open(path, &r, &st);
            qm_npy_close(r);
        } else if (which == OPEN_FORMAT) {
            qm_input_format f;
            rc = qm_input_format_query(path, &f, &st);
        } else if (which == OPEN_CSV) {
            qm_csv_data d;
            rc = qm_csv_load(path, NULL, &d, &st);
            qm_csv_data_fini(&d);
        } else {
            qm_topology *t = NULL;
            rc = qm_scenario_load_file(path, &t, NULL, &st);
            qm_topology_destroy(t);
        }
        const int ok = rc == code && strstr(st.msg, part) != NULL;
        if (!ok)
            fprintf(stderr, "%s(%s): got %s: %s\n", names[which], path, qm_code_name(rc), st.msg);
        _exit(ok ? 0 : 3);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        qm_test_fail(__FILE__, __LINE__, "%s(%s) hung (killed after 20 s)", names[which], path);
    else
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_not_regular(void)
{
    char fifo[128], cmd_out[4096];
    at(fifo, sizeof fifo, "in.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    for (int w = OPEN_NPY; w <= OPEN_CSV; ++w)
        expect_refused(w, fifo, QM_E_IO, "in.fifo: not a regular file (it is a FIFO)");
    expect_refused(OPEN_SCENARIO, fifo, QM_E_IO, "is not a regular file (it is a FIFO)");
    expect_refused(OPEN_CSV, "/dev/null", QM_E_IO,
                   "/dev/null: not a regular file (it is a character device)");
    expect_refused(OPEN_NPY, g_dir, QM_E_IO, "not a regular file (it is a directory)");
    expect_refused(OPEN_SCENARIO, "/dev/null", QM_E_IO,
                   "scenario: '/dev/null' is not a regular file (it is a character device)");

    /* the CLI under a watchdog: 124 is timeout's "it hung" */
    char ok[128];
    write_npy(at(ok, sizeof ok, "ok.npy"), 1, 1, 4, 1, 0, -1);
    char args[4][400], want[4][400];
    snprintf(args[0], sizeof args[0], "encode --input %s", fifo);
    snprintf(want[0], sizeof want[0], "error[E-IO]: %s: not a regular file (it is a FIFO)", fifo);
    snprintf(args[1], sizeof args[1], "encode --input %s --scenario %s", ok, fifo);
    snprintf(args[2], sizeof args[2], "topo validate %s", fifo);
    snprintf(args[3], sizeof args[3], "plan --qubits 4 --scenario %s", fifo);
    for (int i = 1; i < 4; ++i)
        snprintf(want[i], sizeof want[i],
                 "error[E-IO]: scenario: '%s' is not a regular file (it is a FIFO)", fifo);
    for (int i = 0; i < 4; ++i) {
        const int rc = qm_test_runf(cmd_out, sizeof cmd_out, "timeout 20 %s %s", qmesh, args[i]);
        if (rc == 124)
            qm_test_fail(__FILE__, __LINE__, "qmesh %s hung on a FIFO (killed after 20 s)",
                         args[i]);
        else if (rc != 1 || !strstr(cmd_out, want[i]))
            qm_test_fail(__FILE__, __LINE__, "qmesh %s: exit %d, expected 1 and '%s'; got: %s",
                         args[i], rc, want[i], cmd_out);
        qm_test_checks++;
    }
    unlink(ok);
    unlink(fifo);
}

/* ---- CSV ------------------------------------------------------------------------------------- */

static unsigned char *gzip_bytes(const char *text, size_t *n)
{
    uLongf cap = compressBound((uLong)strlen(text)) + 32;
    unsigned char *out = malloc(cap);
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (Bytef *)(uintptr_t)text;
    z.avail_in = (uInt)strlen(text);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *n = z.total_out;
    deflateEnd(&z);
    return out;
}

static qm_code load(const char *path, qm_csv_header h, uint64_t max_text, qm_csv_data *d,
                    qm_status *st)
{
    qm_csv_options o;
    qm_csv_options_init(&o);
    CHECK(o.max_text_bytes == 0);
    o.header = h;
    o.max_text_bytes = max_text;
    return qm_csv_load(path, &o, d, st);
}

static void test_csv_bom_and_gzip(void)
{
    char p[128];
    qm_status st;
    qm_csv_data d;
    at(p, sizeof p, "b.csv");
    /* the file: a BOM before "0.5" made the first data row a header */
    static const char bom[] = "\xef\xbb\xbf" "0.5,2\n3,4\n";
    qm_test_write_file(p, bom, strlen(bom));
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_OK);
    CHECK_EQ_U64(d.n_samples, 2);
    CHECK(d.has_header == 0 && d.values && d.values[0] == 0.5 && d.values[3] == 4);
    qm_csv_data_fini(&d);
    /* a header after the BOM: its first name is "a", not "\xef\xbb\xbf" "a" */
    static const char bomh[] = "\xef\xbb\xbf" "a,label\n1,x\n";
    qm_test_write_file(p, bomh, strlen(bomh));
    qm_csv_options o;
    qm_csv_options_init(&o);
    o.drop_column = "label";
    CHECK(qm_csv_load(p, &o, &d, &st) == QM_OK && d.n_samples == 1 && d.n_features == 1);
    qm_csv_data_fini(&d);
    o.drop_column = "a";
    CHECK(qm_csv_load(p, &o, &d, &st) == QM_E_INPUT); /* the kept column is text: found by name */
    CHECK_ERR(st, QM_E_INPUT, "row 2, column 2 ('label'): 'x' is not a number");
    /* the same in gzip */
    size_t gn = 0;
    unsigned char *g = gzip_bytes(bom, &gn);
    qm_test_write_file(p, g, gn);
    free(g);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_OK);
    CHECK(d.gzip == 1 && d.n_samples == 2 && d.values[0] == 0.5);
    qm_csv_data_fini(&d);
    /* a BOM alone is an empty file; UTF-16 is refused by name */
    qm_test_write_file(p, "\xef\xbb\xbf", 3);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "b.csv: empty: no rows (3 bytes)");
    qm_test_write_file(p, "\xff\xfe" "1\0,\0" "2\0", 8);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "b.csv: UTF-16 text (byte-order mark ff fe) is not supported; save "
                              "the CSV as UTF-8");

    /* concatenated members: one file (gzip -d reads them all) */
    size_t n1 = 0, n2 = 0;
    unsigned char *m1 = gzip_bytes("1,2\n3,4\n", &n1), *m2 = gzip_bytes("5,6\n", &n2);
    unsigned char both[512];
    memcpy(both, m1, n1);
    memcpy(both + n1, m2, n2);
    qm_test_write_file(p, both, n1 + n2);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_OK);
    CHECK(d.n_samples == 3 && d.values[4] == 5 && d.values[5] == 6);
    qm_csv_data_fini(&d);
    /* trailing garbage after a member */
    memcpy(both + n1, "garbage!", 8);
    qm_test_write_file(p, both, n1 + 8);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_E_INPUT);
    char want[200];
    snprintf(want, sizeof want, "b.csv: trailing garbage after gzip member 1 (8 bytes at byte %zu "
             "of %zu, first byte 67)", n1, n1 + 8);
    CHECK_ERR(st, QM_E_INPUT, want);
    /* a second member cut short, and trailing zeros, are errors too */
    memcpy(both + n1, m2, n2);
    qm_test_write_file(p, both, n1 + 5);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "truncated gzip data after 8 decompressed bytes (member 2 ends early");
    memset(both + n1, 0, 4);
    qm_test_write_file(p, both, n1 + 4);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "trailing garbage after gzip member 1 (4 bytes");
    /* every cut of one member: a coded error, never a silent partial read */
    int silent = 0;
    for (size_t cut = 2; cut < n1; ++cut) {
        qm_test_write_file(p, m1, cut);
        const qm_code rc = load(p, QM_CSV_HEADER_AUTO, 0, &d, &st);
        if (rc != QM_E_INPUT || !strstr(st.msg, "gzip data after"))
            silent++;
        qm_csv_data_fini(&d);
    }
    CHECK_EQ_U64(silent, 0);
    free(m1);
    free(m2);

    /* the text limit, plain and gzip */
    qm_test_write_file(p, "1,2\n3,4\n", 8);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 8, &d, &st) == QM_OK && d.n_samples == 2);
    qm_csv_data_fini(&d);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 7, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "b.csv: the CSV text is larger than the limit of 7 bytes; convert it "
                              "to .npy");
    /* gzip: 300 KB of text (the buffer doubles from 64 KiB past the limit, then stops) */
    char *big = malloc(300001);
    memset(big, '\n', 300000);
    memcpy(big, "1\n2\n", 4); /* two rows, then blank lines to the end */
    big[300000] = '\0';
    g = gzip_bytes(big, &gn);
    qm_test_write_file(p, g, gn);
    free(g);
    free(big);
    CHECK(load(p, QM_CSV_HEADER_AUTO, 299999, &d, &st) == QM_E_INPUT);
    CHECK_ERR(st, QM_E_INPUT, "b.csv: the CSV text is larger than the limit of 299999 bytes after "
                              "gzip decompression; convert it to .npy");
    CHECK(load(p, QM_CSV_HEADER_AUTO, 0, &d, &st) == QM_OK);
    CHECK(d.n_samples == 2 && d.values[1] == 2);
    qm_csv_data_fini(&d);
    unlink(p);
}

/* A 129-byte gzip CSV (one row of 10000 columns, then 70000 blank lines) made the loader ask for
 * 70002 x 10000 doubles (5.6 GB) up front. In a child limited to 1 GiB of address space it must
 * load (1 sample) — the matrix now grows with the rows actually parsed. */
static void test_csv_memory_follows_data(void)
{
    if (QM_TEST_ASAN) {
        printf("csv memory bound: skipped under AddressSanitizer (RLIMIT_AS)\n");
        return;
    }
    char p[128];
    at(p, sizeof p, "wide.csv.gz");
    const size_t row_bytes = 20000, text_bytes = row_bytes + 70000;
    char *text = malloc(text_bytes + 1);
    for (size_t i = 0; i < 10000; ++i)
        memcpy(text + 2 * i, "1,", 2);
    text[row_bytes - 1] = '\n';
    memset(text + row_bytes, '\n', 70000);
    text[text_bytes] = '\0';
    size_t gn = 0;
    unsigned char *g = gzip_bytes(text, &gn);
    qm_test_write_file(p, g, gn);
    free(g);
    free(text);
    fflush(NULL);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(4);
        qm_status st;
        qm_csv_data d;
        const qm_code rc = qm_csv_load(p, NULL, &d, &st);
        if (rc != QM_OK)
            fprintf(stderr, "wide.csv.gz: %s: %s\n", qm_code_name(rc), st.msg);
        const int ok = rc == QM_OK && d.n_samples == 1 && d.n_features == 10000;
        qm_csv_data_fini(&d);
        _exit(ok ? 0 : 3);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(p);
}

/* ---- through the CLI ------------------------------------------------------------------------- */

static void test_cli_npy(const char *srcdir)
{
    char out[16384], c[128], f[128], ref[128], o1[128], o2[128], o3[128];
    at(c, sizeof c, "c.npy");
    at(f, sizeof f, "f.npy");
    at(ref, sizeof ref, "ref.npy");
    at(o1, sizeof o1, "o1.npy");
    at(o2, sizeof o2, "o2.npy");
    at(o3, sizeof o3, "o3.npy");
    write_npy(c, 2, 37, 11, 1, 0, -1);
    write_npy(f, 2, 37, 11, 1, 1, -1);
    /* C and Fortran order: byte-identical outputs */
    int rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, c, o1);
    CHECK(rc == 0 && strstr(out, "37 samples x 11 features, float64"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, f, o2);
    CHECK(rc == 0 && strstr(out, "37 samples x 11 features, float64"));
    if (rc)
        fprintf(stderr, "F order: %s\n", out);
    CHECK(qm_test_same_file(o1, o2));
    /* sub-ranges: shards of a multi-device scenario, tiny staging chunks (ranges across rows) */
    char d1[128], d2[128];
    at(d1, sizeof d1, "dc");
    at(d2, sizeof d2, "df");
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --scenario %s/scenarios/dgx-h100.yaml "
             "--policy equal --chunk-bytes '104 B' --out-dir %s", qmesh, c, srcdir, d1);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "C shards: %s\n", out);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --scenario %s/scenarios/dgx-h100.yaml "
             "--policy equal --chunk-bytes '104 B' --out-dir %s", qmesh, f, srcdir, d2);
    CHECK(rc == 0);
    int shards = 0;
    for (int i = 0; i < 64; ++i) {
        char a[160], b[160];
        snprintf(a, sizeof a, "%s/shard-%04d.npy", d1, i);
        snprintf(b, sizeof b, "%s/shard-%04d.npy", d2, i);
        if (access(a, F_OK) != 0)
            break;
        CHECK(qm_test_same_file(a, b));
        shards++;
    }
    CHECK(shards >= 2);
    printf("cli: %d shard files of the C- and F-order runs compared\n", shards);

    /* --drop-column 4: the same as a file without that column, in both orders */
    write_npy(ref, 2, 37, 11, 1, 0, 4);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, ref, o1);
    CHECK(rc == 0 && strstr(out, "37 samples x 10 features"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 4 --chunk-bytes '88 B' --out %s",
             qmesh, c, o2);
    CHECK(rc == 0 && strstr(out, "37 samples x 10 features"));
    if (!strstr(out, "37 samples x 10 features"))
        fprintf(stderr, "drop on C order: %s\n", out);
    CHECK(qm_test_same_file(o1, o2));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 4 --chunk-bytes '88 B' --out %s",
             qmesh, f, o3);
    CHECK(rc == 0 && qm_test_same_file(o1, o3));

    /* flags that do not apply are refused, never ignored */
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column label --out %s", qmesh, c, o3);
    CHECK(rc == 1);
    CHECK(strstr(out, "error[E-INPUT]: ") && strstr(out, "c.npy: --drop-column 'label' is not a "
                 "0-based column index, and a .npy file has no header row to look a name up in"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 11", qmesh, c);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "c.npy: drop column 11 is out of range (the file has 11 columns, indices "
                      "0..10)"));
    write_npy(ref, 1, 1, 4, 1, 0, -1);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --drop-column 0", qmesh, ref);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "ref.npy: cannot drop column 0 of a 1-D array (shape (4,))"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --header yes", qmesh, c);
    CHECK(rc == 1 && strstr(out, "error[E-ARG]: ") &&
          strstr(out, "c.npy: --header yes applies to CSV input only (a .npy file has no header "
                      "row)"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --header auto --out %s", qmesh, c, o3);
    CHECK(rc == 0);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter tab", qmesh, c);
    CHECK(rc == 1 && strstr(out, "error[E-ARG]: ") &&
          strstr(out, "c.npy: --delimiter applies to CSV input only (a .npy file has no fields to "
                      "separate)"));

    /* the same values comma-, tab- and semicolon-separated (quoted, blanks around) give the same
     * bytes; plan --input reads the shape with the same flags */
    char t1[128], t2[128], t3[128];
    at(t1, sizeof t1, "v.csv");
    at(t2, sizeof t2, "v.tsv");
    at(t3, sizeof t3, "v.ssv");
    qm_test_write_file(t1, "a,b,c\n0.5,2,-1\n3,\"4\",1e-3\n", 26);
    qm_test_write_file(t2, "a\tb\tc\n0.5\t 2 \t-1\n3\t\"4\"\t1e-3\n", 28);
    qm_test_write_file(t3, "a;\"b\";c\n0.5;2;-1\n3;4;1e-3\n", 26);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, t1, o1);
    CHECK(rc == 0 && strstr(out, "v.csv: 2 samples x 3 features"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter tab --out %s", qmesh, t2, o2);
    CHECK(rc == 0 && qm_test_same_file(o1, o2));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter ';' --out %s", qmesh, t3, o3);
    CHECK(rc == 0 && qm_test_same_file(o1, o3));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, t2, o2);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "v.tsv: row 2, column 1 ('a?b?c'): '0.5? 2 ?-1' is not a number (the fields "
                      "look separated by a tab, not ',': --delimiter tab)"));
    rc = qm_test_runf(out, sizeof out, "%s plan --input %s --delimiter semicolon --json", qmesh, t3);
    CHECK(rc == 0 && strstr(out, "\"features\": 3"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter ab", qmesh, t3);
    CHECK(rc == 2 && strstr(out, "error[E-ARG]: encode: --delimiter takes comma, tab, semicolon, "
                                 "space (runs of blanks) or one character other than a quote or "
                                 "'#' (got 'ab')"));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter '#'", qmesh, t3);
    CHECK(rc == 2 && strstr(out, "(got '#')"));
    /* NumPy's savetxt default: blanks between fields, a '# ' header line (a comment); runs of
     * spaces and tabs, blanks at the line ends: the same bytes again, by name and as ' ' */
    char t4[128];
    at(t4, sizeof t4, "v.txt");
    qm_test_write_file(t4, "# a b c\n  5.0e-01 2.0e+00\t-1 \n3 \t 4   1e-3\n", 43);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter space --out %s", qmesh, t4, o2);
    CHECK(rc == 0 && strstr(out, "v.txt: 2 samples x 3 features") && qm_test_same_file(o1, o2));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --delimiter ' ' --out %s", qmesh, t4, o3);
    CHECK(rc == 0 && qm_test_same_file(o1, o3));
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s --out %s", qmesh, t4, o3);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "v.txt: row 3, column 1 ('5.0e-01 2.0e+00?-1'): '3 ? 4   1e-3' is not a "
                      "number (the fields look separated by a tab, not ',': --delimiter tab)"));
    unlink(t4);
    /* a zip archive (np.savez's .npz) and a Parquet file are refused by their magic bytes, with
     * what to do, not parsed as CSV text */
    at(t4, sizeof t4, "a.npz");
    qm_test_write_file(t4, "PK\x03\x04\x14\0\0\0", 8);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s", qmesh, t4);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "a.npz: a zip archive (NumPy's .npz, or a spreadsheet) is not an input qmesh "
                      "reads; save the array as .npy (np.save('x.npy', np.load("));
    unlink(t4);
    at(t4, sizeof t4, "p.parquet");
    qm_test_write_file(t4, "PAR1\x15\x04", 6);
    rc = qm_test_runf(out, sizeof out, "%s plan --input %s", qmesh, t4);
    CHECK(rc == 1 && strstr(out, "p.parquet: a Parquet file is not an input qmesh reads"));
    unlink(t4);
    rc = qm_test_runf(out, sizeof out, "%s plan --qubits 3 --delimiter tab", qmesh);
    CHECK(rc == 2 && strstr(out, "error[E-ARG]: plan: --delimiter says how to read --input FILE; "
                                 "give the file"));
    unlink(t1);
    unlink(t2);
    unlink(t3);

    /* the BOM file: 2 samples */
    char b[128];
    at(b, sizeof b, "bom.csv");
    qm_test_write_file(b, "\xef\xbb\xbf" "0.5,2\n3,4\n", 13);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s", qmesh, b);
    CHECK(rc == 0 && strstr(out, "bom.csv: 2 samples x 2 features, float64"));
    /* gzip with trailing garbage */
    size_t gn = 0;
    unsigned char *g = gzip_bytes("1,2\n", &gn);
    unsigned char img[256];
    memcpy(img, g, gn);
    memcpy(img + gn, "garbage", 7);
    free(g);
    qm_test_write_file(b, img, gn + 7);
    rc = qm_test_runf(out, sizeof out, "%s encode --input %s", qmesh, b);
    CHECK(rc == 1 && strstr(out, "error[E-INPUT]: ") &&
          strstr(out, "bom.csv: trailing garbage after gzip member 1 (7 bytes"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d1, d2);
    CHECK(system(cmd) == 0);
    unlink(c);
    unlink(f);
    unlink(ref);
    unlink(o1);
    unlink(o2);
    unlink(o3);
    unlink(b);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_inputs QMESH SRCDIR\n");
        return 2;
    }
    qmesh = argv[1];
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_test_inputs.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_npy_fortran_ranges();
    test_npy_drop_column_errors();
    test_npy_name_with_wrong_magic();
    test_not_regular();
    test_csv_bom_and_gzip();
    test_csv_memory_follows_data();
    test_cli_npy(argv[2]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return qm_test_end("test_inputs");
}
