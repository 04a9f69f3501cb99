/* io_csv.c — CSV input, plain or gzip-compressed, read whole into a float64 matrix.
 *
 * In: a path and options (header: auto/yes/no; a column to drop by header name or 0-based index).
 * Out: B x F doubles (rows = samples, columns = features) and what was decided (header row, gzip,
 * dropped column).
 * Must not: guess by file name (gzip is recognised by its magic bytes 1f 8b), accept a field it did
 * not consume whole, or read in ranges: ranged reads are `.npy`-only (io_npy.c); a CSV file is
 * decompressed into memory and parsed in place (each field is NUL-terminated inside the text
 * buffer, so the text costs one copy and the values B x F doubles).
 * Memory follows the data: a plain file takes one buffer of its size; gzip text grows by doubling
 * from 64 KiB (zlib's inflate, member by member: concatenated members are read whole, anything
 * else after a member is trailing garbage, a member cut short is truncated); both stop at
 * max_text_bytes. The value matrix grows by doubling as rows are parsed. A UTF-8 byte-order mark
 * is skipped, so it cannot turn the first data row into a header.
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
    opt->max_text_bytes = 0;
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

/* The text being read: buf[0, len) plus room for one spare byte (a NUL at the end). */
typedef struct text_buf {
    char *buf;
    size_t len, cap;
    uint64_t max; /* the most text bytes allowed */
} text_buf;

static qm_code too_large(const char *path, uint64_t max, int gzip, qm_status *st)
{
    return qm_fail(st, QM_E_INPUT, "%s: the CSV text is larger than the limit of %llu bytes%s; "
                   "convert it to .npy (read by ranges, never whole)", path,
                   (unsigned long long)max, gzip ? " after gzip decompression" : "");
}

/* Room for at least one more text byte and the spare byte: the buffer doubles (from its first
 * size) up to max + 2 bytes (max text bytes, one more that proves the text too large, the spare);
 * E-INPUT past max, E-NOMEM when realloc fails. */
static qm_code text_room(text_buf *t, const char *path, int gzip, qm_status *st)
{
    if (t->cap - t->len >= 2)
        return QM_OK;
    if ((uint64_t)t->len > t->max)
        return too_large(path, t->max, gzip, st);
    uint64_t ncap = (uint64_t)t->cap * 2;
    if (ncap > t->max + 2)
        ncap = t->max + 2;
    if (ncap > SIZE_MAX)
        return qm_fail(st, QM_E_NOMEM, "%s: the CSV text does not fit this host's address space",
                       path);
    char *nb = realloc(t->buf, (size_t)ncap);
    if (!nb)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %llu bytes for the CSV text", path,
                       (unsigned long long)ncap);
    t->buf = nb;
    t->cap = (size_t)ncap;
    return QM_OK;
}

/* read(2) retrying on EINTR; -1 with errno set on failure. */
static ssize_t read_some(int fd, void *buf, size_t n)
{
    ssize_t r;
    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    return r;
}

/* A plain file: read to its end (a file that grows while read is read as far as it goes). */
static qm_code read_plain(int fd, const char *path, text_buf *t, qm_status *st)
{
    for (;;) {
        qm_code rc = text_room(t, path, 0, st);
        if (rc != QM_OK)
            return rc;
        size_t want = t->cap - t->len - 1;
        if (want > ((size_t)1 << 30))
            want = (size_t)1 << 30;
        const ssize_t got = read_some(fd, t->buf + t->len, want);
        if (got < 0)
            return qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
        if (got == 0)
            return QM_OK;
        t->len += (size_t)got;
    }
}

/* A gzip file: every member inflated in turn (concatenated members are one gzip file, as gzip -d
 * reads them); after a member ends, the next bytes must start another member (1f 8b), else they
 * are trailing garbage; input that ends inside a member is a truncated file. */
static qm_code read_gzip(int fd, const char *path, uint64_t file_bytes, text_buf *t, qm_status *st)
{
    enum { IN_BYTES = 1 << 17 };
    unsigned char *in = malloc(IN_BYTES);
    z_stream z;
    memset(&z, 0, sizeof z);
    qm_code rc = QM_OK;
    int zinit = 0, member = 1, ended = 0, eof = 0;
    uint64_t consumed = 0; /* file bytes handed to zlib (those still in z.avail_in included) */
    if (!in) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the gzip input buffer", path);
        goto done;
    }
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot set up zlib to read the file", path);
        goto done;
    }
    zinit = 1;
    for (;;) {
        /* input: refill when empty; at a member boundary make sure 2 bytes are visible */
        while (!eof && (z.avail_in == 0 || (ended && z.avail_in < 2))) {
            if (z.avail_in > 0)
                memmove(in, z.next_in, z.avail_in);
            const ssize_t got = read_some(fd, in + z.avail_in, IN_BYTES - z.avail_in);
            if (got < 0) {
                rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
                goto done;
            }
            z.next_in = in;
            z.avail_in += (uInt)got;
            consumed += (uint64_t)got;
            eof = got == 0;
        }
        if (ended) {
            if (z.avail_in == 0)
                break; /* the last member ended at the end of the file */
            if (z.next_in[0] != 0x1f || z.avail_in < 2 || z.next_in[1] != 0x8b) {
                const uint64_t at = consumed - z.avail_in;
                rc = qm_fail(st, QM_E_INPUT, "%s: trailing garbage after gzip member %d (%llu "
                             "bytes at byte %llu of %llu, first byte %02x); the file is not a "
                             "gzip file as written", path, member,
                             (unsigned long long)(file_bytes > at ? file_bytes - at : z.avail_in),
                             (unsigned long long)at, (unsigned long long)file_bytes,
                             z.next_in[0]);
                goto done;
            }
            if (inflateReset(&z) != Z_OK) {
                rc = qm_fail(st, QM_E_INTERNAL, "%s: zlib inflateReset failed", path);
                goto done;
            }
            ended = 0;
            member++;
        }
        if ((rc = text_room(t, path, 1, st)) != QM_OK)
            goto done;
        size_t room = t->cap - t->len - 1;
        if (room > ((size_t)1 << 30))
            room = (size_t)1 << 30;
        z.next_out = (Bytef *)(t->buf + t->len);
        z.avail_out = (uInt)room;
        const int zr = inflate(&z, Z_NO_FLUSH);
        t->len += room - z.avail_out;
        if (zr == Z_STREAM_END) {
            ended = 1;
        } else if (zr == Z_BUF_ERROR && eof && z.avail_in == 0) {
            /* there was room, and no input is left: the member stops in the middle */
            rc = qm_fail(st, QM_E_INPUT, "%s: truncated gzip data after %zu decompressed "
                         "bytes (member %d ends early; the file has %llu bytes)", path, t->len,
                         member, (unsigned long long)file_bytes);
            goto done;
        } else if (zr == Z_OK || zr == Z_BUF_ERROR) {
            continue; /* more input or more room: the loop gets either */
        } else if (zr == Z_MEM_ERROR) {
            rc = qm_fail(st, QM_E_NOMEM, "%s: zlib is out of memory", path);
            goto done;
        } else if (zr != Z_STREAM_END) {
            rc = qm_fail(st, QM_E_INPUT, "%s: corrupt gzip data after %zu decompressed "
                         "bytes (zlib: %s; in member %d)", path, t->len,
                         z.msg ? z.msg : "unknown error", member);
            goto done;
        }
    }
done:
    if (zinit)
        inflateEnd(&z);
    free(in);
    return rc;
}

/* Read the file (plain, or gzip by its magic bytes) into a malloc'd buffer with one spare byte at
 * the end (*len excludes it). */
static qm_code read_all(const char *path, uint64_t max_text, char **text_out, size_t *len_out,
                        int *gzip_out, qm_status *st)
{
    text_buf t = {NULL, 0, 0, max_text};
    int fd = -1;
    uint64_t size = 0;
    *text_out = NULL;
    *len_out = 0;
    qm_code rc = qm_input_file_open(path, &fd, &size, st);
    if (rc != QM_OK)
        return rc;
    unsigned char magic[2];
    ssize_t m;
    do
        m = pread(fd, magic, sizeof magic, 0);
    while (m < 0 && errno == EINTR);
    if (m < 0) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
        goto done;
    }
    *gzip_out = m == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    /* plain: one allocation of the file's size (+ EOF probe + spare); gzip: doubling from 64 KiB */
    if (!*gzip_out && size > max_text) {
        rc = too_large(path, max_text, 0, st);
        goto done;
    }
    uint64_t cap = *gzip_out ? ((uint64_t)1 << 16) : size + 2;
    if (cap > max_text + 2)
        cap = max_text + 2;
    if (cap > SIZE_MAX || !(t.buf = malloc((size_t)cap))) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %llu bytes for the CSV text", path,
                     (unsigned long long)cap);
        goto done;
    }
    t.cap = (size_t)cap;
    rc = *gzip_out ? read_gzip(fd, path, size, &t, st) : read_plain(fd, path, &t, st);
    if (rc == QM_OK && (uint64_t)t.len > max_text)
        rc = too_large(path, max_text, *gzip_out, st);
    if (rc == QM_OK) {
        t.buf[t.len] = '\0';
        *text_out = t.buf;
        *len_out = t.len;
        t.buf = NULL;
    }
done:
    free(t.buf);
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
    uint64_t max_text = opt->max_text_bytes ? opt->max_text_bytes : QM_CSV_MAX_TEXT_BYTES;
    if (max_text > UINT64_MAX / 2)
        max_text = UINT64_MAX / 2; /* the buffer's max + 2 must not wrap */
    if ((rc = read_all(path, max_text, &text, &len, &gzip, st)) != QM_OK)
        return rc;

    /* a UTF-8 byte-order mark (Excel, Notepad) is not part of the first field; UTF-16 is refused */
    size_t bom = 0;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        bom = 3;
    } else if (len >= 2 && ((unsigned char)text[0] == 0xff || (unsigned char)text[0] == 0xfe) &&
               ((unsigned char)text[1] ^ (unsigned char)text[0]) == 0x01) {
        rc = qm_fail(st, QM_E_INPUT, "%s: UTF-16 text (byte-order mark %02x %02x) is not "
                     "supported; save the CSV as UTF-8", path, (unsigned char)text[0],
                     (unsigned char)text[1]);
        goto done;
    }
    char *pos = text + bom, *end = text + len;
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

    /* The value matrix grows with the rows actually parsed (doubling), never by a guess from the
     * line count: trailing blank lines or a ragged row must not make it ask for more. A row holds
     * at least ncols - 1 commas and a line end, which bounds the rows the text can hold. */
    const size_t row_min_bytes = ncols, text_rows = (size_t)(end - pos) / row_min_bytes + 2;
    size_t rows_cap = 0;

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
        if (rows == rows_cap) {
            size_t ncap = rows_cap ? rows_cap * 2 : 1024;
            if (ncap > text_rows)
                ncap = text_rows > rows ? text_rows : rows + 1;
            if (ncap > SIZE_MAX / sizeof(double) / nfeat) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: %zu rows x %zu features do not fit in memory",
                             path, ncap, nfeat);
                goto done;
            }
            double *nv = realloc(values, ncap * nfeat * sizeof *values);
            if (!nv) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu x %zu float64 values", path,
                             ncap, nfeat);
                goto done;
            }
            values = nv;
            rows_cap = ncap;
        }
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
