/* test_csv_reader.c — the chunked CSV reader of engine/io/io_csv.c (qm_csv_open, read_rows,
 * count_rows, rewind, close, info) against qm_csv_load and against the values the files were
 * written from, for chunk sizes (QM_CSV_CHUNK_BYTES) 1, 2, 3, 7, 64, 4096 and the default; and
 * qm_input_open's reader of a CSV file (pipeline.c) by element ranges.
 *  - generated files: a header row, CRLF line ends, no final newline, blanks around fields, a
 *    byte-order mark, trailing blank lines, a dropped label column (by name and by index), rows of
 *    12 KB (longer than most chunks), NaN/Inf/subnormal text, quoted fields (names with a comma
 *    and "", a label dropped by its quoted name, numbers in quotes), gzip (one member, and two members
 *    split inside a row); every value compared bit for bit, read in pieces of 1, 2, 5 and 13 rows,
 *    after a count and after a rewind; half the rows skipped (qm_csv_skip_rows), the rest read;
 *    through qm_input_open: ranges cut inside rows, three parts read in turns, backwards, single
 *    elements;
 *  - skipped rows are not parsed: bad rows before the rows read are not reported, a blank line
 *    skipped over is; qm_input_open's read reports a bad row with the load's message exactly,
 *    qm_input_open_stream's with the element range in front;
 *  - errors with their exact text, the same at every chunk size: a bad value, a ragged row, an
 *    empty field, a quote not closed on its line, text after a closing quote, a lone quote
 *    inside quotes, a blank line, an out-of-range number in a late row (the rows before it read,
 *    the failure sticky until a rewind), a header with no data (at the count), empty files,
 *    UTF-16, a drop column not found, gzip cut short, damaged (inside, or its CRC) or followed
 *    by garbage, a bad row before the damaged part of a gzip stream (text order), the text limit;
 *  - QM_CSV_CHUNK_BYTES: bad values are E-ARG naming the variable and the value; empty is unset.
 */
#define _POSIX_C_SOURCE 200809L

#include "io.h"
#include "ingest.h"
#include "pipeline.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[64];

static const char *at(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

/* the chunk sizes every case runs at (NULL: QM_CSV_CHUNK_BYTES unset, the 4 MiB default) */
static const char *const k_chunks[] = {"1", "2", "3", "7", "64", "4096", NULL};
#define N_CHUNKS (sizeof k_chunks / sizeof k_chunks[0])

static void set_chunk(const char *v)
{
    if (v)
        setenv("QM_CSV_CHUNK_BYTES", v, 1);
    else
        unsetenv("QM_CSV_CHUNK_BYTES");
}

/* ---- a growing text ---------------------------------------------------------------------------- */

typedef struct text {
    char *s;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) QM_TEST_PRINTF_AT(2, 3);
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k >= 0 && t->s && (size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        t->cap = (t->cap + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
}

static unsigned char *gzip_bytes(const void *data, size_t n, size_t *out_n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    const size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* ---- generated files with known values ---------------------------------------------------------- */

typedef struct gen {
    const char *name;
    text t;               /* the CSV text */
    int gz;               /* 0 plain, 1 one gzip member, 2 two members (split inside a row) */
    qm_csv_header header;
    const char *drop;
    double *v;            /* the expected rows x feats values */
    uint64_t rows, feats, cols;
    int has_header;
    long dropped;
    char delim;           /* the options' delimiter (0: the default, ',') */
} gen;

/* a value exact through "%.17g" and strtod, distinct per element, of varied magnitude */
static double value(uint64_t i)
{
    return sin(0.37 * (double)i + 0.1) * pow(10.0, (double)((int)(i % 9) - 4));
}

static void expect(gen *g, uint64_t r, uint64_t c, double x)
{
    g->v[r * g->feats + c] = x;
}

/* A file of `rows` rows of two features after `header` (a header row), with a dropped column at
 * `dropped` (-1: none; then two columns) named `drop`, read with delimiter `delim` (0: ','). */
static void two_features(gen *g, const char *name, const char *header, uint64_t rows, long dropped,
                         const char *drop, char delim)
{
    g->name = name;
    put(&g->t, "%s", header);
    g->rows = rows;
    g->feats = 2;
    g->cols = dropped >= 0 ? 3 : 2;
    g->dropped = dropped;
    g->has_header = 1;
    g->drop = drop;
    g->delim = delim;
    g->v = calloc(2 * rows, sizeof(double));
}

/* Row r of a two_features file holds value(2 r + k) and value(2 r + k + 1): both expected; the
 * first returned (the second is value(2 r + k + 1)). */
static double expect_pair(gen *g, int r, uint64_t k)
{
    const uint64_t i = 2 * (uint64_t)r + k;
    expect(g, (uint64_t)r, 0, value(i));
    expect(g, (uint64_t)r, 1, value(i + 1));
    return value(i);
}

/* rows x cols numeric rows; `label` >= 0: that column holds text labels (dropped); line ends
 * `eol`; the last newline left out when !final_nl; blanks around fields when pad */
static void numeric(gen *g, uint64_t rows, uint64_t cols, int header, long label, const char *eol,
                    int final_nl, int pad)
{
    g->rows = rows;
    g->cols = cols;
    g->feats = cols - (label >= 0 ? 1 : 0);
    g->has_header = header;
    g->dropped = label;
    g->v = calloc(rows * g->feats, sizeof *g->v);
    if (header) {
        for (uint64_t c = 0; c < cols; ++c)
            put(&g->t, "%s%s", c ? "," : "", (long)c == label ? "label" : c % 2 ? "x" : "y");
        put(&g->t, "%s", eol);
    }
    for (uint64_t r = 0; r < rows; ++r) {
        uint64_t f = 0;
        for (uint64_t c = 0; c < cols; ++c) {
            put(&g->t, "%s%s", c ? "," : "", pad && c % 3 == 1 ? " \t" : "");
            if ((long)c == label) {
                put(&g->t, "%s", r % 2 ? "cat" : "dog");
                continue;
            }
            const double x = value(r * cols + c);
            put(&g->t, "%.17g%s", x, pad && c % 2 ? "  " : "");
            expect(g, r, f++, x);
        }
        if (r + 1 < rows || final_nl)
            put(&g->t, "%s", eol);
    }
}

static void write_gen(const gen *g, const char *path)
{
    if (!g->gz) {
        qm_test_write_file(path, g->t.s, g->t.n);
        return;
    }
    const size_t cut = g->gz == 2 ? g->t.n / 2 + 3 : g->t.n; /* inside a row */
    size_t n1 = 0, n2 = 0;
    unsigned char *a = gzip_bytes(g->t.s, cut, &n1);
    unsigned char *b = g->gz == 2 ? gzip_bytes(g->t.s + cut, g->t.n - cut, &n2) : NULL;
    unsigned char *all = malloc(n1 + n2 + 1);
    memcpy(all, a, n1);
    if (b)
        memcpy(all + n1, b, n2);
    qm_test_write_file(path, all, n1 + n2);
    free(a);
    free(b);
    free(all);
}

/* *dst: src's text and values, written as gzip of `members` members */
static void gzip_of(gen *dst, const gen *src, const char *name, int members)
{
    const size_t bytes = (size_t)(src->rows * src->feats) * sizeof(double);
    *dst = *src;
    dst->name = name;
    dst->gz = members;
    dst->t.s = malloc(src->t.n + 1);
    memcpy(dst->t.s, src->t.s, src->t.n + 1);
    dst->v = malloc(bytes);
    memcpy(dst->v, src->v, bytes);
}

static int same_values(const double *a, const double *b, uint64_t n)
{
    return n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* The same file through qm_input_open's reader (pipeline.c), by element ranges that start and end
 * inside rows, interleaved (three readers of three parts, in turns, as ingest deals chunks to
 * shards), backwards, and one element at a time. */
static void check_ranges(const gen *g, const char *path, const qm_csv_options *o)
{
    qm_status st;
    qm_input_file f;
    const qm_code rc = qm_input_open(path, o, NULL, &f, &st);
    CHECK(rc == QM_OK);
    if (rc != QM_OK) {
        printf("%s: qm_input_open: %s\n", g->name, st.msg);
        return;
    }
    const uint64_t n = g->rows * g->feats;
    CHECK(f.in.batch == g->rows && f.in.n == g->feats && f.in.data == NULL && f.in.read &&
          f.in.read_placed && f.in.read_in_order && f.ndim == 2);
    double *buf = calloc(n + 1, sizeof *buf);
    /* three parts cut inside rows, read in turns in pieces of 5 elements */
    const uint64_t cut[4] = {0, n / 3, 2 * n / 3 + (n > 2), n};
    uint64_t at[3] = {cut[0], cut[1], cut[2]};
    for (bool more = true; more;) {
        more = false;
        for (int p = 0; p < 3; ++p) {
            const uint64_t c = cut[p + 1] - at[p] < 5 ? cut[p + 1] - at[p] : 5;
            if (c == 0)
                continue;
            CHECK(qm_input_read(&f.in, at[p], c, buf + at[p], &st) == QM_OK);
            at[p] += c;
            more = true;
        }
    }
    CHECK(same_values(buf, g->v, n));
    /* backwards: the last half-row first, then everything, then single elements */
    memset(buf, 0, (size_t)n * sizeof *buf);
    const uint64_t h = n - (g->feats + 1) / 2;
    CHECK(qm_input_read(&f.in, h, n - h, buf + h, &st) == QM_OK);
    CHECK(qm_input_read(&f.in, 0, h, buf, &st) == QM_OK);
    CHECK(same_values(buf, g->v, n));
    for (uint64_t e = n; e-- > 0;) {
        double x = -1;
        CHECK(qm_input_read(&f.in, e, 1, &x, &st) == QM_OK && same_values(&x, g->v + e, 1));
        if (e > 40)
            e -= e / 3; /* a sample of the elements: every one of the last 40 */
    }
    free(buf);
    qm_input_close(&f);
}

/* One file at one chunk size: load and reader against the expected values. */
static void check_gen(const gen *g, const char *path, const char *chunk)
{
    const char *cs = chunk ? chunk : "default";
    qm_status st;
    qm_csv_options o;
    qm_csv_options_init(&o);
    o.header = g->header;
    o.drop_column = g->drop;
    if (g->delim)
        o.delimiter = g->delim;
    /* the whole load */
    qm_csv_data d;
    const qm_code lrc = qm_csv_load(path, &o, &d, &st);
    if (lrc != QM_OK)
        printf("%s (chunk %s): load: %s\n", g->name, cs, st.msg);
    CHECK(lrc == QM_OK);
    CHECK_EQ_U64(d.n_samples, g->rows);
    CHECK_EQ_U64(d.n_features, g->feats);
    CHECK(d.has_header == g->has_header && d.gzip == (g->gz != 0) && d.dropped_column == g->dropped);
    CHECK(d.n_samples == g->rows && d.n_features == g->feats &&
          same_values(d.values, g->v, g->rows * g->feats));
    qm_csv_data_fini(&d);

    /* the reader: open, info, count, pieces of 1, 2, 5, 13 rows */
    qm_csv_reader *r = NULL;
    CHECK(qm_csv_open(path, &o, &r, &st) == QM_OK);
    if (!r) {
        printf("%s (chunk %s): open: %s\n", g->name, cs, st.msg);
        return;
    }
    const qm_csv_reader_info *info = qm_csv_reader_info_get(r);
    CHECK_EQ_U64(info->chunk_bytes, chunk ? strtoull(chunk, NULL, 10) : QM_CSV_CHUNK_BYTES_DEFAULT);
    CHECK_EQ_U64(info->n_columns, g->cols);
    CHECK_EQ_U64(info->n_features, g->feats);
    CHECK(info->has_header == g->has_header && info->gzip == (g->gz != 0) &&
          info->dropped_column == g->dropped && !info->rows_known && info->n_rows == 0);
    CHECK_STR(info->path, path);
    double *buf = calloc(g->rows * g->feats + 13 * g->feats, sizeof *buf);
    /* read a few rows before the count: the count starts over and comes back to row 0 */
    uint64_t got = 0, rows = 0;
    CHECK(qm_csv_read_rows(r, 1, buf, &got, &st) == QM_OK && got == 1);
    CHECK(qm_csv_count_rows(r, &rows, &st) == QM_OK);
    CHECK_EQ_U64(rows, g->rows);
    CHECK(info->rows_known && info->n_rows == g->rows && info->rows_read == 0);
    static const uint64_t pieces[] = {1, 2, 5, 13};
    uint64_t total = 0;
    for (int i = 0; total < g->rows + 1; ++i) {
        const uint64_t want = pieces[i % 4];
        got = 99;
        const qm_code rc = qm_csv_read_rows(r, want, buf + total * g->feats, &got, &st);
        CHECK(rc == QM_OK);
        if (rc != QM_OK) {
            printf("%s (chunk %s): read: %s\n", g->name, cs, st.msg);
            break;
        }
        CHECK(got == want || total + got == g->rows); /* short only at the end */
        total += got;
        if (got < want)
            break;
    }
    CHECK_EQ_U64(total, g->rows);
    CHECK_EQ_U64(info->rows_read, g->rows);
    CHECK(same_values(buf, g->v, g->rows * g->feats));
    CHECK(qm_csv_read_rows(r, 4, buf, &got, &st) == QM_OK && got == 0); /* the end stays the end */
    /* after a rewind, everything in one read; rows checked only (NULL) after another */
    memset(buf, 0, (size_t)(g->rows * g->feats) * sizeof *buf);
    CHECK(qm_csv_rewind(r, &st) == QM_OK && info->rows_read == 0);
    CHECK(qm_csv_read_rows(r, g->rows + 7, buf, &got, &st) == QM_OK);
    CHECK_EQ_U64(got, g->rows);
    CHECK(same_values(buf, g->v, g->rows * g->feats));
    CHECK(qm_csv_rewind(r, &st) == QM_OK);
    CHECK(qm_csv_read_rows(r, g->rows, NULL, &got, &st) == QM_OK && got == g->rows);
    /* skipped rows are passed (line ends only), then the rows after them read as before */
    const uint64_t k = g->rows / 2;
    CHECK(qm_csv_rewind(r, &st) == QM_OK);
    CHECK(qm_csv_skip_rows(r, k, &got, &st) == QM_OK && got == k && info->rows_read == k);
    CHECK(qm_csv_read_rows(r, g->rows, buf, &got, &st) == QM_OK && got == g->rows - k);
    CHECK(same_values(buf, g->v + k * g->feats, (g->rows - k) * g->feats));
    CHECK(qm_csv_skip_rows(r, 3, &got, &st) == QM_OK && got == 0 && info->rows_read == g->rows);
    CHECK(qm_csv_rewind(r, &st) == QM_OK);
    CHECK(qm_csv_skip_rows(r, g->rows + 5, &got, &st) == QM_OK && got == g->rows);
    free(buf);
    qm_csv_close(r);
    check_ranges(g, path, &o);
}

static void test_generated(void)
{
    gen g[14];
    memset(g, 0, sizeof g);
    int n = 0;
    /* 0: a header, LF, a final newline */
    g[n].name = "header, LF";
    numeric(&g[n], 50, 3, 1, -1, "\n", 1, 0);
    n++;
    /* 1: no header, CRLF, no final newline, blanks around fields */
    g[n].name = "CRLF, no final newline, blanks";
    numeric(&g[n], 40, 4, 0, -1, "\r\n", 0, 1);
    n++;
    /* 2: a byte-order mark, a header, a label column dropped by name, trailing blank lines */
    g[n].name = "BOM, drop 'label', trailing blank lines";
    put(&g[n].t, "\xef\xbb\xbf");
    numeric(&g[n], 33, 5, 1, 2, "\n", 1, 0);
    put(&g[n].t, "\n  \r\n\t\n");
    g[n].drop = "label";
    n++;
    /* 3: no header (the label column does not count for auto), dropped by index 0 */
    g[n].name = "drop 0, text labels, no header";
    numeric(&g[n], 21, 3, 0, 0, "\n", 1, 0);
    g[n].drop = "0";
    n++;
    /* 4: rows of about 12 KB: longer than every chunk but the default */
    g[n].name = "rows of 12 KB";
    numeric(&g[n], 4, 700, 1, -1, "\n", 0, 0);
    n++;
    /* 5: special values as strtod reads them; --header no */
    g[n].name = "nan, inf, subnormals";
    {
        static const char *const tok[] = {"nan", "inf", "-inf", "1e-320", "-0", "4.9e-324",
                                          "1.7976931348623157e308", "0x1p-3"};
        g[n].rows = 2;
        g[n].cols = g[n].feats = 8;
        g[n].dropped = -1;
        g[n].header = QM_CSV_HEADER_NO;
        g[n].v = calloc(16, sizeof(double));
        for (int r = 0; r < 2; ++r) {
            for (int c = 0; c < 8; ++c) {
                put(&g[n].t, "%s%s", c ? "," : "", tok[(c + r) % 8]);
                expect(&g[n], (uint64_t)r, (uint64_t)c, strtod(tok[(c + r) % 8], NULL));
            }
            put(&g[n].t, "\n");
        }
    }
    n++;
    /* 6: one value, no newline */
    g[n].name = "one value";
    put(&g[n].t, "5");
    g[n].rows = g[n].cols = g[n].feats = 1;
    g[n].dropped = -1;
    g[n].v = calloc(1, sizeof(double));
    g[n].v[0] = 5;
    n++;
    /* 7: quoted fields (RFC 4180): quoted names with a comma and a "" inside, the label column
     * dropped by its quoted name, quoted numbers with blanks inside and outside the quotes */
    two_features(&g[n], "quoted fields", "\"x, 1\",\"the \"\"label\"\"\" , y\r\n", 3, 1,
                 "the \"label\"", 0);
    for (int r = 0; r < 3; ++r) {
        if (r == 1) /* blanks around and inside the quotes; a label with a comma and quotes */
            put(&g[n].t, " \" %.17g \" ,\"a,\"\"b\"\"\",%.17g\r\n", expect_pair(&g[n], r, 0),
                value(2 * (uint64_t)r + 1));
        else
            put(&g[n].t, "\"%.17g\",c%d,\"%.17g\"\r\n", expect_pair(&g[n], r, 0), r,
                value(2 * (uint64_t)r + 1));
    }
    n++;
    /* 8: tab-separated: spaces around fields ignored, a tab inside a quoted label kept, commas
     * are text; 9: semicolon-separated, a quoted name holding a semicolon */
    two_features(&g[n], "tabs", "x\t\"l,\tab\"\t y \n", 2, 1, "l,\tab", '\t');
    for (int r = 0; r < 2; ++r)
        put(&g[n].t, " %.17g\t\"a\tb\"\t%.17g \n", expect_pair(&g[n], r, 0),
            value(2 * (uint64_t)r + 1));
    n++;
    two_features(&g[n], "semicolons", "\"a;1\"; b\n", 2, -1, NULL, ';');
    for (int r = 0; r < 2; ++r)
        put(&g[n].t, "%.17g ; \"%.17g\"\n", expect_pair(&g[n], r, 7), value(2 * (uint64_t)r + 8));
    n++;
    /* 10: blanks as the delimiter (' '), as NumPy's savetxt writes: a '#' comment header, runs
     * of spaces and tabs between fields, blanks at the line ends, a comment line between rows,
     * a quoted name with a space, the label column dropped by index */
    two_features(&g[n], "blanks, comments", "# written by savetxt\n  x \"l b\"\ty  \r\n", 3, 1,
                 "1", ' ');
    for (int r = 0; r < 3; ++r) {
        put(&g[n].t, "%s%.17g \t lab%d   %.17g%s\n", r == 1 ? "\t " : "", expect_pair(&g[n], r, 3),
            r, value(2 * (uint64_t)r + 4), r == 2 ? " \t" : "");
        if (r == 0)
            put(&g[n].t, "   # a comment between rows, with, commas\n");
    }
    n++;
    /* 11: comma-separated with comment lines first, between the header and the data, and after
     * the data before trailing blank lines (row numbers stay the file's lines) */
    two_features(&g[n], "comments around a header", "# c1\n#c2\na,b\n # c3\n", 2, -1, NULL, 0);
    for (int r = 0; r < 2; ++r)
        put(&g[n].t, "%.17g,%.17g\n", expect_pair(&g[n], r, 11), value(2 * (uint64_t)r + 12));
    put(&g[n].t, "# the end\n\n");
    n++;
    /* 12: gzip, one member: file 2's text; 13: two members split inside a row: file 1's text */
    gzip_of(&g[n++], &g[2], "gzip: BOM, drop 'label'", 1);
    gzip_of(&g[n++], &g[1], "gzip, two members, CRLF", 2);
    char p[128];
    for (int i = 0; i < n; ++i) {
        at(p, sizeof p, "g.csv");
        write_gen(&g[i], p);
        for (size_t k = 0; k < N_CHUNKS; ++k) {
            set_chunk(k_chunks[k]);
            check_gen(&g[i], p, k_chunks[k]);
        }
        printf("generated '%s': %llu x %llu values at %zu chunk sizes\n", g[i].name,
               (unsigned long long)g[i].rows, (unsigned long long)g[i].feats, N_CHUNKS);
        free(g[i].t.s);
        free(g[i].v);
    }
    set_chunk(NULL);
    unlink(p);
}

/* ---- errors: the same text at every chunk size ------------------------------------------------- */

/* The file's load fails with code and exactly `want` (after "<path>: "; NULL: the default
 * chunk's message, whatever it is, starting with `prefix`) at every chunk size; the reader fails
 * the same way at open, at the count, or at a read after `rows_before` good rows (-1: not at a
 * read; -2: any). */
static void expect_error(const char *label, const void *bytes, size_t n, qm_csv_header header,
                         const char *drop, qm_code code, const char *want, const char *prefix,
                         long rows_before, uint64_t max_text)
{
    char p[128], full[640], ref[QM_STATUS_MSG_BYTES] = "";
    at(p, sizeof p, "e.csv");
    qm_test_write_file(p, bytes, n);
    qm_csv_options o;
    qm_csv_options_init(&o);
    o.header = header;
    o.drop_column = drop;
    o.max_text_bytes = max_text;
    if (want)
        snprintf(full, sizeof full, "%s: %s", p, want);
    int bad = 0;
    for (size_t k = N_CHUNKS; k-- > 0;) { /* the default first: the reference */
        set_chunk(k_chunks[k]);
        qm_status st;
        qm_csv_data d;
        const qm_code rc = qm_csv_load(p, &o, &d, &st);
        if (!want && !ref[0]) {
            snprintf(ref, sizeof ref, "%s", st.msg);
            snprintf(full, sizeof full, "%s", st.msg);
            CHECK(strncmp(st.msg, p, strlen(p)) == 0 &&
                  strncmp(st.msg + strlen(p), ": ", 2) == 0 &&
                  strncmp(st.msg + strlen(p) + 2, prefix, strlen(prefix)) == 0);
        }
        if (rc != code || strcmp(st.msg, full) != 0 || d.values || d.n_samples) {
            printf("%s: chunk %s: load: %s: '%s'\n   want %s: '%s'\n", label,
                   k_chunks[k] ? k_chunks[k] : "default", qm_code_name(rc), st.msg,
                   qm_code_name(code), full);
            bad++;
        }
        /* the reader: open, rows, count; the error from whichever step finds it */
        qm_csv_reader *r = NULL;
        qm_code rrc = qm_csv_open(p, &o, &r, &st);
        uint64_t got = 0, rows = 0;
        long at_read = -1;
        if (rrc == QM_OK) {
            rrc = qm_csv_read_rows(r, 1000, NULL, &got, &st);
            if (rrc != QM_OK) {
                at_read = (long)got;
                /* sticky, with the same text, until a rewind */
                qm_status again;
                uint64_t g2 = 7;
                if (qm_csv_read_rows(r, 1, NULL, &g2, &again) != rrc || g2 != 0 ||
                    strcmp(again.msg, st.msg) != 0)
                    bad++;
                if (qm_csv_rewind(r, &again) != QM_OK ||
                    qm_csv_read_rows(r, (uint64_t)at_read, NULL, &g2, &again) != QM_OK ||
                    g2 != (uint64_t)at_read)
                    bad++;
            } else {
                rrc = qm_csv_count_rows(r, &rows, &st);
            }
        }
        if (rrc != code || strcmp(st.msg, full) != 0 || (rows_before != -2 && at_read != rows_before)) {
            printf("%s: chunk %s: reader: %s: '%s' after %ld rows (want %ld)\n", label,
                   k_chunks[k] ? k_chunks[k] : "default", qm_code_name(rrc), st.msg, at_read,
                   rows_before);
            bad++;
        }
        qm_csv_close(r);
    }
    set_chunk(NULL);
    CHECK_EQ_U64(bad, 0);
    printf("error '%s': %s\n", label, full);
    unlink(p);
}

#define TXT(s) s, sizeof s - 1

static void test_errors(void)
{
    const qm_csv_header A = QM_CSV_HEADER_AUTO;
    expect_error("a bad value in row 4", TXT("a,b\n1,2\n3,4\n5,x\n"), A, NULL, QM_E_INPUT,
                 "row 4, column 2 ('b'): 'x' is not a number", NULL, 2, 0);
    expect_error("a ragged last row", TXT("1,2\n3,4\n5\n"), A, NULL, QM_E_INPUT,
                 "row 3 has 1 fields, expected 2 (as in row 1)", NULL, 2, 0);
    expect_error("an empty field", TXT("1,2\n3,\n"), A, NULL, QM_E_INPUT,
                 "row 2, column 2: empty field", NULL, 1, 0);
    /* a delimiter after every line's last field: the empty last column named, with the way out */
    expect_error("a delimiter at every line's end", TXT("1,2,\n3,4,\n"), A, NULL, QM_E_INPUT,
                 "row 1, column 3: empty field (the line ends with a delimiter? --drop-column 2 "
                 "leaves the empty last column out)", NULL, 0, 0);
    expect_error("a delimiter at every line's end, header too", TXT("a,b,\n1,2,\n"), A, NULL,
                 QM_E_INPUT, "row 2, column 3 (''): empty field (the line ends with a delimiter? "
                 "--drop-column 2 leaves the empty last column out)", NULL, 0, 0);
    expect_error("a quote not closed on its line", TXT("a,b\n1,2\n\"3,4\n"), A, NULL, QM_E_INPUT,
                 "row 3, column 1: the quoted field is not closed on its line (a quoted field may "
                 "not span lines)", NULL, 1, 0);
    expect_error("text after a closing quote", TXT("a,b\n\"1\"x,2\n"), A, NULL, QM_E_INPUT,
                 "row 2, column 1 ('a'): '\"1\"x' is not a number", NULL, 0, 0);
    expect_error("a lone quote inside quotes", TXT("a,b\n\"1\",2\n\"1\"2\",3\n"), A, NULL,
                 QM_E_INPUT, "row 3, column 1 ('a'): '\"1\"2\"' is not a number", NULL, 1, 0);
    expect_error("a tab-separated file read with commas", TXT("a\tb\n1\t2\n"), A, NULL, QM_E_INPUT,
                 "row 2, column 1 ('a?b'): '1?2' is not a number (the fields look separated by a "
                 "tab, not ',': --delimiter tab)", NULL, 0, 0);
    expect_error("a space-separated file read with commas", TXT("1 2\n3 4\n"), A, NULL,
                 QM_E_INPUT, "row 2, column 1 ('1 2'): '3 4' is not a number (the fields look "
                 "separated by a space, not ',': --delimiter space)", NULL, 0, 0);
    expect_error("one semicolon-separated row read with commas", TXT("1;2;3\n"), A, NULL,
                 QM_E_INPUT, "empty: no data rows (only the header row 1) (the fields look "
                 "separated by a semicolon, not ',': --delimiter semicolon)", NULL, -1, 0);
    expect_error("a label column made the first row a header (Iris)",
                 TXT("5.1,3.5,setosa\n4.9,3.0,setosa\n"), A, NULL, QM_E_INPUT,
                 "row 2, column 3 ('setosa'): 'setosa' is not a number (a column of labels? "
                 "--drop-column 2 leaves it out, and row 1 is then data, not a header)", NULL, 0, 0);
    expect_error("only comments", TXT("# a\n#b\n"), A, NULL, QM_E_INPUT,
                 "empty: no rows (7 bytes, 2 comment lines ('#'))", NULL, -1, 0);
    expect_error("a comment, then a row of a different width", TXT("1,2\n# x\n3\n"), A, NULL,
                 QM_E_INPUT, "row 3 has 1 fields, expected 2 (as in row 1)", NULL, 1, 0);
    expect_error("a blank line", TXT("1,2\n\n3,4\n"), A, NULL, QM_E_INPUT,
                 "row 2 is empty (blank lines are allowed only at the end of the file)", NULL, 1,
                 0);
    expect_error("out of range", TXT("a,b\n1,2\n1,1e999\r\n"), A, NULL, QM_E_INPUT,
                 "row 3, column 2 ('b'): '1e999' is out of range for float64", NULL, 1, 0);
    expect_error("header only", TXT("a,b\n\n \n"), A, NULL, QM_E_INPUT,
                 "empty: no data rows (only the header row 1)", NULL, -1, 0);
    expect_error("no rows", TXT("\n \r\n"), A, NULL, QM_E_INPUT, "empty: no rows (4 bytes)", NULL,
                 -1, 0);
    expect_error("nothing", "", 0, A, NULL, QM_E_INPUT, "empty: no rows (0 bytes)", NULL, -1, 0);
    expect_error("a blank first line", TXT("\n1,2\n"), A, NULL, QM_E_INPUT,
                 "row 1 is empty (blank lines are allowed only at the end of the file)", NULL, -1,
                 0);
    expect_error("UTF-16", TXT("\xff\xfe" "1\0,\0" "2\0"), A, NULL, QM_E_INPUT,
                 "UTF-16 text (byte-order mark ff fe) is not supported; save the CSV as UTF-8",
                 NULL, -1, 0);
    expect_error("no such column", TXT("a,b\n1,2\n"), A, "label", QM_E_INPUT,
                 "no column named 'label' in the header (columns: 'a', 'b')", NULL, -1, 0);
    expect_error("text limit, plain", TXT("1,2\n3,4\n"), A, NULL, QM_E_INPUT,
                 "the CSV text is larger than the limit of 7 bytes; convert it to .npy (read by "
                 "ranges, never whole)", NULL, -1, 7);

    /* gzip: the limit after rows within it; a bare BOM; garbage; cut short; damaged */
    size_t gn = 0;
    unsigned char *gz = gzip_bytes(TXT("1\n2\n3\n"), &gn);
    expect_error("text limit, gzip", gz, gn, A, NULL, QM_E_INPUT,
                 "the CSV text is larger than the limit of 4 bytes after gzip decompression; "
                 "convert it to .npy (read by ranges, never whole)", NULL, 2, 4);
    free(gz);
    gz = gzip_bytes(TXT("\xef\xbb\xbf"), &gn);
    expect_error("gzip: a BOM alone", gz, gn, A, NULL, QM_E_INPUT,
                 "empty: no rows (3 bytes after gzip decompression)", NULL, -1, 0);
    free(gz);
    text t = {0};
    for (int r = 0; r < 400; ++r)
        put(&t, "%d,%.17g,%d\n", r, value((uint64_t)r), r * 3);
    gz = gzip_bytes(t.s, t.n, &gn);
    unsigned char *b = malloc(gn + 16);
    memcpy(b, gz, gn);
    memcpy(b + gn, "garbage!", 8);
    char want[256];
    snprintf(want, sizeof want, "trailing garbage after gzip member 1 (8 bytes at byte %zu of %zu, "
             "first byte 67); the file is not a gzip file as written", gn, gn + 8);
    expect_error("gzip: trailing garbage", b, gn + 8, A, NULL, QM_E_INPUT, want, NULL, 400, 0);
    expect_error("gzip: cut short", b, gn - 9, A, NULL, QM_E_INPUT, NULL,
                 "truncated gzip data after ", -2, 0);
    memcpy(b, gz, gn);
    b[gn / 2] ^= 0x55;
    b[gn / 2 + 1] ^= 0xaa;
    expect_error("gzip: damaged", b, gn, A, NULL, QM_E_INPUT, NULL, "", -2, 0);
    /* the trailer's CRC damaged: every row read first, then zlib's verdict */
    memcpy(b, gz, gn);
    b[gn - 6] ^= 0xff;
    snprintf(want, sizeof want, "corrupt gzip data after %zu decompressed bytes (zlib: incorrect "
             "data check; in member 1)", t.n);
    expect_error("gzip: a bad CRC", b, gn, A, NULL, QM_E_INPUT, want, NULL, 400, 0);
    free(gz);
    free(b);
    /* a bad row early and the stream cut late: the row is reported (text order), at every chunk */
    memcpy(strstr(t.s, "\n3,") + 1, "x", 1);
    gz = gzip_bytes(t.s, t.n, &gn);
    expect_error("gzip: a bad row before the cut", gz, gn - 9, A, NULL, QM_E_INPUT,
                 "row 4, column 1: 'x' is not a number", NULL, 3, 0);
    free(gz);
    free(t.s);
}

/* ---- skipping, and the reader of qm_input_open ------------------------------------------------ */

/* Rows skipped are not parsed: a bad value, a ragged row and an empty field before the rows read
 * are not reported; a blank line skipped over is (by the next read, as the load reports it). A read
 * through qm_input_open that starts after the bad rows succeeds, one that covers them fails with
 * the load's message exactly (no element range in front); qm_input_open_stream's read puts the
 * range in front. At every chunk size. */
static void test_skip(void)
{
    char p[128];
    at(p, sizeof p, "s.csv");
    static const char body[] = "a,b,c\n1,2,3\n4,x7,6\n7,8\n9,,1\n10,11,12\n13,14,15\n";
    qm_test_write_file(p, TXT(body));
    char want[256];
    snprintf(want, sizeof want, "%s: row 3, column 2 ('b'): 'x7' is not a number", p);
    for (size_t k = 0; k < N_CHUNKS; ++k) {
        set_chunk(k_chunks[k]);
        qm_status st;
        qm_csv_reader *r = NULL;
        CHECK(qm_csv_open(p, NULL, &r, &st) == QM_OK && r);
        if (!r)
            continue;
        uint64_t got = 0;
        double v[6] = {0};
        CHECK(qm_csv_skip_rows(r, 4, &got, &st) == QM_OK && got == 4);
        CHECK(qm_csv_read_rows(r, 5, v, &got, &st) == QM_OK && got == 2);
        CHECK(v[0] == 10 && v[2] == 12 && v[3] == 13 && v[5] == 15);
        CHECK(qm_csv_rewind(r, &st) == QM_OK);
        CHECK(qm_csv_skip_rows(r, 1, &got, &st) == QM_OK && got == 1);
        CHECK(qm_csv_read_rows(r, 1, v, &got, &st) == QM_E_INPUT && got == 0);
        CHECK_STR(st.msg, want);
        CHECK(qm_csv_skip_rows(r, 1, &got, &st) == QM_E_INPUT && got == 0); /* sticky */
        CHECK_STR(st.msg, want);
        qm_csv_close(r);

        qm_input_file f;
        CHECK(qm_input_open(p, NULL, NULL, &f, &st) == QM_OK && f.in.batch == 6 && f.in.n == 3);
        CHECK(qm_input_read(&f.in, 13, 5, v, &st) == QM_OK && v[0] == 11 && v[4] == 15);
        CHECK(qm_input_read(&f.in, 4, 3, v, &st) == QM_E_INPUT);
        CHECK_STR(st.msg, want);
        qm_input_close(&f);
        CHECK(qm_input_open_stream(p, NULL, NULL, &f, &st) == QM_OK);
        CHECK(qm_input_read(&f.in, 3, 6, v, &st) == QM_E_INPUT);
        char pre[300];
        snprintf(pre, sizeof pre, "encode: reading input [3, 9): %s", want);
        CHECK_STR(st.msg, pre);
        qm_input_close(&f);
    }
    /* a blank line skipped over: the next read reports it */
    qm_test_write_file(p, TXT("1,2\n3,4\n\n5,6\n7,8\n"));
    for (size_t k = 0; k < N_CHUNKS; ++k) {
        set_chunk(k_chunks[k]);
        qm_status st;
        qm_csv_reader *r = NULL;
        uint64_t got = 0;
        double v[2];
        CHECK(qm_csv_open(p, NULL, &r, &st) == QM_OK);
        CHECK(qm_csv_skip_rows(r, 3, &got, &st) == QM_OK && got == 3);
        CHECK(qm_csv_read_rows(r, 1, v, &got, &st) == QM_E_INPUT && got == 0);
        snprintf(want, sizeof want, "%s: row 3 is empty (blank lines are allowed only at the end "
                 "of the file)", p);
        CHECK_STR(st.msg, want);
        qm_csv_close(r);
    }
    unsetenv("QM_CSV_CHUNK_BYTES");
    qm_status st;
    uint64_t got = 9;
    CHECK(qm_csv_skip_rows(NULL, 1, &got, &st) == QM_E_ARG && got == 0);
    unlink(p);
}

/* ---- QM_CSV_CHUNK_BYTES ------------------------------------------------------------------------ */

static void test_chunk_env(void)
{
    char p[128], want[256];
    at(p, sizeof p, "c.csv");
    qm_test_write_file(p, TXT("1,2\n"));
    static const char *const bad[] = {"0", "-1", "abc", "4k", " 5", "1e3", "+8", "1073741825",
                                      "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        setenv("QM_CSV_CHUNK_BYTES", bad[i], 1);
        snprintf(want, sizeof want, "%s: QM_CSV_CHUNK_BYTES is '%s'; give a chunk size in bytes in "
                 "[1, 1073741824] (default 4194304)", p, bad[i]);
        qm_status st;
        qm_csv_reader *r = NULL;
        CHECK(qm_csv_open(p, NULL, &r, &st) == QM_E_ARG && r == NULL);
        CHECK_STR(st.msg, want);
        qm_csv_data d;
        CHECK(qm_csv_load(p, NULL, &d, &st) == QM_E_ARG);
        CHECK_STR(st.msg, want);
        uint64_t c = 0;
        CHECK(qm_csv_chunk_bytes_query(p, &c, &st) == QM_E_ARG);
    }
    uint64_t c = 0;
    qm_status st;
    setenv("QM_CSV_CHUNK_BYTES", "1073741824", 1);
    CHECK(qm_csv_chunk_bytes_query(p, &c, &st) == QM_OK && c == ((uint64_t)1 << 30));
    setenv("QM_CSV_CHUNK_BYTES", "", 1); /* empty: unset */
    CHECK(qm_csv_chunk_bytes_query(p, &c, &st) == QM_OK && c == QM_CSV_CHUNK_BYTES_DEFAULT);
    qm_csv_reader *r = NULL;
    CHECK(qm_csv_open(p, NULL, &r, &st) == QM_OK && r &&
          qm_csv_reader_info_get(r)->chunk_bytes == ((uint64_t)4 << 20));
    qm_csv_close(r);
    qm_csv_close(NULL);
    unsetenv("QM_CSV_CHUNK_BYTES");
    CHECK(qm_csv_chunk_bytes_query(p, &c, &st) == QM_OK && c == 4194304);
    /* the other arguments */
    CHECK(qm_csv_open(NULL, NULL, &r, &st) == QM_E_ARG && r == NULL);
    CHECK_STR(st.msg, "csv open: path and out must not be NULL");
    uint64_t got = 5;
    CHECK(qm_csv_read_rows(NULL, 1, NULL, &got, &st) == QM_E_ARG && got == 0);
    CHECK(qm_csv_count_rows(NULL, &got, &st) == QM_E_ARG);
    CHECK(qm_csv_rewind(NULL, &st) == QM_E_ARG);
    unlink(p);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qm_csv_reader_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("QM_CSV_CHUNK_BYTES");
    test_generated();
    test_errors();
    test_skip();
    test_chunk_env();
    rmdir(g_dir);
    return qm_test_end("test_csv_reader");
}
