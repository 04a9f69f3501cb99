/* io_csv.c — CSV input, plain or gzip-compressed, read whole into a float64 matrix.
 *
 * In: a path and options (header: auto/yes/no; a column to drop by header name or 0-based index).
 * Out: B x F doubles (rows = samples, columns = features) and what was decided (header row, gzip,
 * dropped column).
 * Must not: guess by file name (gzip is recognised by its magic bytes 1f 8b), accept a field it did
 * not consume whole, or read in ranges: ranged reads are `.npy`-only (io_npy.c); a CSV file is
 * decompressed into memory and parsed in place (each field is NUL-terminated inside the text
 * buffer, so the text costs one copy and the values B x F doubles).
 * Quoting is not supported: a field is the text between commas (blank space around it ignored).
 * strtod follows LC_NUMERIC; qmesh never calls setlocale, so the decimal point is '.'.
 */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "io.h"
#include "status_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void qm_csv_options_init(qm_csv_options *opt)
{
    if (!opt)
        return;
    opt->header = QM_CSV_HEADER_AUTO;
    opt->drop_column = NULL;
}

void qm_csv_data_fini(qm_csv_data *data)
{
    if (!data)
        return;
    free(data->values);
    memset(data, 0, sizeof *data);
    data->dropped_column = -1;
}

/* ---- reading the whole (decompressed) text --------------------------------------------------- */

/* Read the file into a malloc'd buffer with one spare byte at the end (*len excludes it). */
static qm_code read_all(const char *path, char **text_out, size_t *len_out, int *gzip_out,
                        qm_status *st)
{
    qm_code rc = QM_OK;
    gzFile gz = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    *text_out = NULL;
    *len_out = 0;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return qm_fail(st, QM_E_IO, "%s: cannot open for reading: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail_fd;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = qm_fail(st, QM_E_IO, "%s: not a regular file%s", path,
                     S_ISDIR(sb.st_mode) ? " (it is a directory)" : "");
        goto fail_fd;
    }
    unsigned char magic[2];
    ssize_t m;
    do
        m = pread(fd, magic, sizeof magic, 0);
    while (m < 0 && errno == EINTR);
    if (m < 0) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail_fd;
    }
    *gzip_out = m == 2 && magic[0] == 0x1f && magic[1] == 0x8b;

    gz = gzdopen(fd, "rb"); /* reads plain files as they are ("transparent" mode) */
    if (!gz) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot set up zlib to read the file", path);
        goto fail_fd;
    }
    fd = -1; /* owned by gz now */
    gzbuffer(gz, 1u << 17);
    /* plain files: one allocation of the right size; gzip: grow by doubling */
    cap = *gzip_out ? ((size_t)1 << 16) : (size_t)sb.st_size + 2; /* + EOF probe + spare */
    if (cap < 2)
        cap = 2;
    for (;;) {
        if (cap - len < 2) {
            if (cap > SIZE_MAX / 2) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: the decompressed text does not fit in memory",
                             path);
                goto fail;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu bytes for the CSV text",
                             path, cap * 2);
                goto fail;
            }
            buf = nb;
            cap *= 2;
        } else if (!buf) {
            buf = malloc(cap);
            if (!buf) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu bytes for the CSV text",
                             path, cap);
                goto fail;
            }
        }
        size_t want = cap - len - 1; /* keep the spare byte */
        if (want > (1u << 30))
            want = 1u << 30;
        const int got = gzread(gz, buf + len, (unsigned)want);
        if (got < 0) {
            int zerr = Z_OK;
            const char *zmsg = gzerror(gz, &zerr);
            if (zerr == Z_ERRNO)
                rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
            else
                rc = qm_fail(st, QM_E_INPUT, "%s: corrupt gzip data after %zu decompressed bytes "
                             "(zlib: %s)", path, len, zmsg ? zmsg : "unknown error");
            goto fail;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    int zerr = Z_OK;
    const char *zmsg = gzerror(gz, &zerr);
    if (zerr != Z_OK) {
        rc = qm_fail(st, QM_E_INPUT, "%s: %s gzip data after %zu decompressed bytes (zlib: %s)",
                     path, zerr == Z_BUF_ERROR ? "truncated" : "corrupt", len,
                     zmsg ? zmsg : "unknown error");
        goto fail;
    }
    const int cz = gzclose_r(gz);
    gz = NULL;
    if (cz != Z_OK) {
        rc = qm_fail(st, QM_E_IO, "%s: closing the file failed (zlib code %d)", path, cz);
        goto fail;
    }
    buf[len] = '\0';
    *text_out = buf;
    *len_out = len;
    return QM_OK;

fail:
    free(buf);
    if (gz)
        gzclose_r(gz);
fail_fd:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- fields ---------------------------------------------------------------------------------- */

/* Printable copy of s (at most 32 characters, then "..."), for messages. */
static const char *printable(const char *s, char *buf, size_t buf_bytes)
{
    size_t o = 0;
    for (size_t i = 0; s[i] && o + 4 < buf_bytes; ++i) {
        if (i == 32) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        const unsigned char c = (unsigned char)s[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    buf[o] = '\0';
    return buf;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Split the line [s, e) at commas, trimming blanks, NUL-terminating each field in place (the byte
 * after a field is a blank, a comma, '\r', '\n' or the spare byte, so writing there is safe).
 * Stores up to max_fields field starts in fields (when not NULL); returns the field count. */
static size_t split_line(char *s, char *e, char **fields, size_t max_fields)
{
    size_t n = 0;
    char *f = s;
    for (;;) {
        char *c = memchr(f, ',', (size_t)(e - f));
        char *fe = c ? c : e;
        char *a = f, *b = fe;
        while (a < b && is_blank(*a))
            a++;
        while (b > a && is_blank(b[-1]))
            b--;
        *b = '\0';
        if (fields && n < max_fields)
            fields[n] = a;
        n++;
        if (!c)
            break;
        f = c + 1;
    }
    return n;
}

/* Count the fields of [s, e) without touching it. */
static size_t count_fields(const char *s, const char *e)
{
    size_t n = 1;
    for (const char *c = s; (c = memchr(c, ',', (size_t)(e - c))) != NULL; ++c)
        n++;
    return n;
}

typedef enum num_result { NUM_OK, NUM_EMPTY, NUM_BAD, NUM_RANGE } num_result;

static num_result parse_number(const char *f, double *out)
{
    if (!*f)
        return NUM_EMPTY;
    char *end = NULL;
    errno = 0;
    const double v = strtod(f, &end);
    if (end == f || *end != '\0')
        return NUM_BAD;
    /* ERANGE on overflow (HUGE_VAL from finite text) is an error; on underflow the tiny or zero
     * result is the correctly rounded value and passes. "inf" text sets no ERANGE. */
    if (errno == ERANGE && fabs(v) > DBL_MAX)
        return NUM_RANGE;
    *out = v;
    return NUM_OK;
}

/* Non-negative decimal integer text (no sign, no blanks) -> *out. 0 when it is not one. */
static int decimal_index(const char *s, size_t *out)
{
    if (!s || !*s)
        return 0;
    size_t v = 0;
    for (const char *p = s; *p; ++p) {
        if (*p < '0' || *p > '9')
            return 0;
        const size_t d = (size_t)(*p - '0');
        if (v > (SIZE_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* ---- the load -------------------------------------------------------------------------------- */

/* A line of text: [s, e) without its line end; its 1-based number in the file. */
typedef struct csv_line {
    char *s, *e;
    long no;
} csv_line;

/* The next non-blank line from *pos; 0 at the end of the text. A blank line followed by a
 * non-blank one is an error (reported through *blank_no, the first blank line's number). */
static int next_line(char **pos, char *end, long *line_no, long *blank_no, csv_line *out)
{
    while (*pos < end) {
        char *s = *pos;
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        *pos = nl ? nl + 1 : end;
        ++*line_no;
        if (e > s && e[-1] == '\r')
            e--;
        const char *p = s;
        while (p < e && is_blank(*p))
            p++;
        if (p == e) {
            if (!*blank_no)
                *blank_no = *line_no;
            continue;
        }
        out->s = s;
        out->e = e;
        out->no = *line_no;
        return 1;
    }
    return 0;
}

qm_code qm_csv_load(const char *path, const qm_csv_options *opt, qm_csv_data *out, qm_status *st)
{
    qm_code rc = QM_OK;
    char *text = NULL;
    size_t len = 0;
    char **names = NULL;
    double *values = NULL;
    qm_csv_options defaults;
    if (out) {
        memset(out, 0, sizeof *out);
        out->dropped_column = -1;
    }
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "csv load: path and out must not be NULL");
    if (!opt) {
        qm_csv_options_init(&defaults);
        opt = &defaults;
    }
    if (opt->header != QM_CSV_HEADER_AUTO && opt->header != QM_CSV_HEADER_YES &&
        opt->header != QM_CSV_HEADER_NO)
        return qm_fail(st, QM_E_ARG, "%s: csv load: header option %d is not auto, yes or no", path,
                       (int)opt->header);
    int gzip = 0;
    if ((rc = read_all(path, &text, &len, &gzip, st)) != QM_OK)
        return rc;

    char *pos = text, *end = text + len;
    long line_no = 0, blank_no = 0;
    csv_line first;
    if (!next_line(&pos, end, &line_no, &blank_no, &first)) {
        rc = qm_fail(st, QM_E_INPUT, "%s: empty: no rows (%zu bytes%s)", path, len,
                     gzip ? " after gzip decompression" : "");
        goto done;
    }
    if (blank_no) {
        rc = qm_fail(st, QM_E_INPUT, "%s: row %ld is empty (blank lines are allowed only at the "
                     "end of the file)", path, blank_no);
        goto done;
    }

    /* the first row: its fields, then header or data, then the dropped column */
    const size_t ncols = count_fields(first.s, first.e);
    names = malloc(ncols * sizeof *names);
    if (!names) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu column names", path, ncols);
        goto done;
    }
    split_line(first.s, first.e, names, ncols);
    size_t drop_idx = 0;
    const int drop_is_index = opt->drop_column && decimal_index(opt->drop_column, &drop_idx);
    int header = opt->header == QM_CSV_HEADER_YES;
    if (opt->header == QM_CSV_HEADER_AUTO) {
        for (size_t c = 0; c < ncols && !header; ++c) {
            double v;
            if (drop_is_index && c == drop_idx)
                continue;
            header = parse_number(names[c], &v) == NUM_BAD;
        }
    }
    long drop = -1;
    if (opt->drop_column) {
        char pn[48];
        if (header) {
            for (size_t c = 0; c < ncols; ++c) {
                if (strcmp(names[c], opt->drop_column) != 0)
                    continue;
                if (drop >= 0) {
                    rc = qm_fail(st, QM_E_INPUT, "%s: the header names column '%s' twice "
                                 "(columns %ld and %zu); drop it by 0-based index instead",
                                 path, printable(opt->drop_column, pn, sizeof pn), drop + 1, c + 1);
                    goto done;
                }
                drop = (long)c;
            }
        }
        if (drop < 0 && drop_is_index) {
            if (drop_idx >= ncols) {
                rc = qm_fail(st, QM_E_INPUT, "%s: drop column %zu is out of range (the file has "
                             "%zu columns, indices 0..%zu)", path, drop_idx, ncols, ncols - 1);
                goto done;
            }
            drop = (long)drop_idx;
        }
        if (drop < 0) {
            if (!header) {
                rc = qm_fail(st, QM_E_INPUT, "%s: drop column '%s' is not a 0-based column index "
                             "and the file has no header row to look the name up in", path,
                             printable(opt->drop_column, pn, sizeof pn));
            } else {
                char cols[160];
                size_t o = 0;
                for (size_t c = 0; c < ncols && o < sizeof cols; ++c) {
                    char pc[48];
                    int k = snprintf(cols + o, sizeof cols - o, "%s'%s'", c ? ", " : "",
                                     printable(names[c], pc, sizeof pc));
                    if (k < 0 || (size_t)k >= sizeof cols - o) {
                        snprintf(cols + (o < sizeof cols - 4 ? o : sizeof cols - 4), 4, "...");
                        break;
                    }
                    o += (size_t)k;
                }
                rc = qm_fail(st, QM_E_INPUT, "%s: no column named '%s' in the header (columns: %s)",
                             path, printable(opt->drop_column, pn, sizeof pn), cols);
            }
            goto done;
        }
    }
    const size_t nfeat = ncols - (drop >= 0 ? 1 : 0);
    if (nfeat == 0) {
        rc = qm_fail(st, QM_E_INPUT, "%s: no feature columns left after dropping column %ld (the "
                     "file has %zu column)", path, drop, ncols);
        goto done;
    }

    /* an upper bound on the data rows: the lines of the text */
    size_t max_rows = 2;
    for (const char *c = pos; (c = memchr(c, '\n', (size_t)(end - c))) != NULL; ++c)
        max_rows++;
    if (max_rows > SIZE_MAX / sizeof(double) / nfeat) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: %zu rows x %zu features do not fit in memory", path,
                     max_rows, nfeat);
        goto done;
    }
    values = malloc(max_rows * nfeat * sizeof *values);
    if (!values) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu x %zu float64 values", path, max_rows,
                     nfeat);
        goto done;
    }

    size_t rows = 0;
    csv_line ln = first;
    int have = !header;
    for (;;) {
        if (!have) {
            if (!next_line(&pos, end, &line_no, &blank_no, &ln))
                break;
            if (blank_no) {
                rc = qm_fail(st, QM_E_INPUT, "%s: row %ld is empty (blank lines are allowed only "
                             "at the end of the file)", path, blank_no);
                goto done;
            }
        }
        have = 0;
        const int is_first = ln.s == first.s; /* split already: its commas may be NULs now */
        const size_t nf = is_first ? ncols : count_fields(ln.s, ln.e);
        if (nf != ncols) {
            rc = qm_fail(st, QM_E_INPUT, "%s: row %ld has %zu fields, expected %zu (as in row %ld)",
                         path, ln.no, nf, ncols, first.no);
            goto done;
        }
                char *f = ln.s;
        double *dst = values + rows * nfeat;
        for (size_t c = 0; c < ncols; ++c) {
            char *field = names[c];
            if (!is_first) {
                char *comma = memchr(f, ',', (size_t)(ln.e - f));
                char *fe = comma ? comma : ln.e;
                split_line(f, fe, &field, 1);
                f = fe + 1;
            }
            if ((long)c == drop)
                continue;
            double v = 0.0;
            const num_result nr = parse_number(field, &v);
            if (nr != NUM_OK) {
                char pt[48], pc[48], col[80] = "";
                if (header)
                    snprintf(col, sizeof col, " ('%s')", printable(names[c], pc, sizeof pc));
                rc = qm_fail(st, QM_E_INPUT, "%s: row %ld, column %zu%s: %s%s%s", path, ln.no,
                             c + 1, col,
                             nr == NUM_EMPTY ? "empty field" : "'",
                             nr == NUM_EMPTY ? "" : printable(field, pt, sizeof pt),
                             nr == NUM_EMPTY ? ""
                             : nr == NUM_RANGE ? "' is out of range for float64"
                                               : "' is not a number");
                goto done;
            }
            *dst++ = v;
        }
        rows++;
    }
    if (rows == 0) {
        rc = qm_fail(st, QM_E_INPUT, "%s: empty: no data rows (only the header row %ld)", path,
                     first.no);
        goto done;
    }

    out->values = values;
    values = NULL;
    out->n_samples = rows;
    out->n_features = nfeat;
    out->has_header = header;
    out->gzip = gzip;
    out->dropped_column = drop;

done:
    free(values);
    free(names);
    free(text);
    return rc;
}
