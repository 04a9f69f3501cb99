/* io_csv.c — CSV input, plain or gzip-compressed: a reader that parses rows in order in bounded
 * memory (qm_csv_open, qm_csv_read_rows, qm_csv_skip_rows, qm_csv_count_rows, qm_csv_rewind,
 * qm_csv_close), and the whole-file load (qm_csv_load) as a loop over it: one parser for both.
 *
 * In: a path and options (header: auto/yes/no; a column to drop by header name or 0-based index;
 * an optional limit on the text). Out: rows of F doubles (rows = samples, columns = features) in
 * the caller's buffer, and what was decided (header row, gzip, dropped column); qm_csv_load: the
 * whole B x F matrix.
 * How: the file is read in chunks of QM_CSV_CHUNK_BYTES bytes (the environment; default 4 MiB)
 * appended to a window of text; a line is parsed in place once its line end is in the window
 * (fields NUL-terminated inside it), so a row cut by any chunk boundary, even of 1-byte chunks,
 * parses as it would whole; a line longer than a chunk makes the window grow to hold it (the
 * window starts at 64 KiB and grows to a chunk only for a file that fills it). gzip text
 * (recognised by the magic bytes 1f 8b, never by the name) is inflated by zlib into the same
 * chunks (the compressed bytes are read in chunks of the same size, or of the file's size when
 * smaller, at least 2), member by member:
 * concatenated members are read whole, anything else after a member is trailing garbage, a member
 * cut short is truncated. inflate is called directly rather than through gzread, which would read
 * trailing garbage as the end of the file without a word.
 * Errors in text order: a failure of the source (a read error, a damaged or cut gzip stream, text
 * over the limit) is kept until the parser needs text past the point where it happened, so the
 * lines before it are parsed first and the error reported is the same for every chunk size.
 * Memory: the window (about two chunks, or the longest line and a chunk), the gzip input chunk and
 * a copy of the first row; qm_csv_load adds the value matrix, grown by doubling as rows are parsed
 * (from at most 1 MiB, never sized from a guess).
 * Must not: accept a field it did not consume whole, parse a row differently depending on where
 * the chunks cut it, or read by ranges: a row's place in the file is known only by reading what
 * comes before it, so rows are read in order and qm_csv_rewind starts over.
 * A UTF-8 byte-order mark is skipped, so it cannot turn the first data row into a header.
 * Fields: the text between delimiters (',' unless the options say otherwise), blanks around it
 * ignored; a field quoted as RFC 4180 writes it may hold delimiters and "" (one quote), on one line.
 * The delimiter ' ' stands for blanks: fields are separated by runs of spaces and tabs, and blanks
 * at the start and end of a line separate nothing (NumPy's savetxt and loadtxt default).
 * A line whose first non-blank byte is '#' is a comment (NumPy's savetxt header): skipped
 * wherever it is, like no line at all (row numbers stay the file's line numbers).
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
    opt->delimiter = ',';
}

void qm_csv_data_fini(qm_csv_data *data)
{
    if (!data)
        return;
    free(data->values);
    memset(data, 0, sizeof *data);
    data->dropped_column = -1;
}

qm_code qm_csv_chunk_bytes_query(const char *path, uint64_t *out, qm_status *st)
{
    *out = QM_CSV_CHUNK_BYTES_DEFAULT;
    const char *v = getenv("QM_CSV_CHUNK_BYTES");
    if (!v || !*v)
        return QM_OK;
    uint64_t n = 0;
    int digits = 1;
    for (const char *p = v; *p && digits; ++p) {
        if (*p < '0' || *p > '9' || n > QM_CSV_CHUNK_BYTES_MAX)
            digits = 0;
        else
            n = n * 10 + (uint64_t)(*p - '0');
    }
    if (!digits || n < 1 || n > QM_CSV_CHUNK_BYTES_MAX)
        return qm_fail(st, QM_E_ARG, "%s: QM_CSV_CHUNK_BYTES is '%.40s'; give a chunk size in "
                       "bytes in [1, %llu] (default %llu)", path ? path : "csv", v,
                       (unsigned long long)QM_CSV_CHUNK_BYTES_MAX,
                       (unsigned long long)QM_CSV_CHUNK_BYTES_DEFAULT);
    *out = n;
    return QM_OK;
}

/* ---- the reader ------------------------------------------------------------------------------ */

struct qm_csv_reader {
    char *path;                  /* a copy, for messages */
    int fd;
    uint64_t file_bytes;
    size_t chunk;
    uint64_t max_text;           /* the most text bytes read (0: no limit) */
    qm_csv_header header_opt;
    char delim;                  /* the field delimiter: ',' (default), ';', '\t', ... */
    char *drop_opt;              /* a copy of options.drop_column, or NULL */
    /* gzip: the inflate state and its input chunk */
    z_stream z;
    int zinit;
    unsigned char *zin;
    size_t zin_cap;
    int member, ended, zeof;
    uint64_t consumed;           /* file bytes handed to zlib (those still in z.avail_in included) */
    /* the window of text: win[start, end) not yet taken as lines; the line-end search resumes at
     * scan; cap > end always (the spare byte a last line without a line end is cut with) */
    char *win;
    size_t cap, start, end, scan;
    int text_eof;                /* the source is at its end */
    int full;                    /* the last read filled all the room it was given */
    qm_code src_rc;              /* a source failure, reported when text past it is needed */
    qm_status src_st;
    uint64_t text_bytes;         /* text bytes taken from the source since the last begin */
    long line_no, blank_no;
    long comments;               /* comment lines passed since the last begin */
    /* the first row: a copy split into fields (the header names, or the first data row) */
    char *first_text;
    char **names;
    long first_no;
    int first_pending;           /* no header: the first row is still to be read as data */
    int at_start;                /* nothing read since the last begin */
    qm_code failed;              /* sticky until a rewind */
    qm_status fail_st;
    qm_csv_reader_info info;
};

static qm_code too_large(const char *path, uint64_t max, int gzip, qm_status *st)
{
    return qm_fail(st, QM_E_INPUT, "%s: the CSV text is larger than the limit of %llu bytes%s; "
                   "convert it to .npy (read by ranges, never whole)", path,
                   (unsigned long long)max, gzip ? " after gzip decompression" : "");
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

/* Up to `want` bytes of gzip text into dst (*got; 0 only at the end of the last member). On
 * failure *got still counts what this call inflated before it. Every member is inflated in turn
 * (concatenated members are one gzip file, as gzip -d reads them); after a member ends, the next
 * bytes must start another member (1f 8b), else they are trailing garbage; input that ends inside
 * a member is a truncated file. */
static qm_code gzip_text(qm_csv_reader *r, char *dst, size_t want, size_t *got, qm_status *st)
{
    z_stream *z = &r->z;
    *got = 0;
    for (;;) {
        /* input: refill when empty; at a member boundary make sure 2 bytes are visible */
        while (!r->zeof && (z->avail_in == 0 || (r->ended && z->avail_in < 2))) {
            if (z->avail_in > 0)
                memmove(r->zin, z->next_in, z->avail_in);
            const ssize_t n = read_some(r->fd, r->zin + z->avail_in, r->zin_cap - z->avail_in);
            if (n < 0)
                return qm_fail(st, QM_E_IO, "%s: cannot read: %s", r->path, strerror(errno));
            z->next_in = r->zin;
            z->avail_in += (uInt)n;
            r->consumed += (uint64_t)n;
            r->zeof = n == 0;
        }
        if (r->ended) {
            if (z->avail_in == 0)
                return QM_OK; /* the last member ended at the end of the file */
            if (z->next_in[0] != 0x1f || z->avail_in < 2 || z->next_in[1] != 0x8b) {
                const uint64_t at = r->consumed - z->avail_in;
                return qm_fail(st, QM_E_INPUT, "%s: trailing garbage after gzip member %d (%llu "
                               "bytes at byte %llu of %llu, first byte %02x); the file is not a "
                               "gzip file as written", r->path, r->member,
                               (unsigned long long)(r->file_bytes > at ? r->file_bytes - at
                                                                       : z->avail_in),
                               (unsigned long long)at, (unsigned long long)r->file_bytes,
                               z->next_in[0]);
            }
            if (inflateReset(z) != Z_OK)
                return qm_fail(st, QM_E_INTERNAL, "%s: zlib inflateReset failed", r->path);
            r->ended = 0;
            r->member++;
        }
        z->next_out = (Bytef *)dst;
        z->avail_out = (uInt)want;
        const int zr = inflate(z, Z_NO_FLUSH);
        *got = want - z->avail_out;
        const unsigned long long total = (unsigned long long)(r->text_bytes + *got);
        if (zr == Z_STREAM_END)
            r->ended = 1;
        else if (zr == Z_BUF_ERROR && r->zeof && z->avail_in == 0)
            /* there was room, and no input is left: the member stops in the middle */
            return qm_fail(st, QM_E_INPUT, "%s: truncated gzip data after %llu decompressed "
                           "bytes (member %d ends early; the file has %llu bytes)", r->path,
                           total, r->member, (unsigned long long)r->file_bytes);
        else if (zr == Z_MEM_ERROR)
            return qm_fail(st, QM_E_NOMEM, "%s: zlib is out of memory", r->path);
        else if (zr != Z_OK && zr != Z_BUF_ERROR)
            return qm_fail(st, QM_E_INPUT, "%s: corrupt gzip data after %llu decompressed "
                           "bytes (zlib: %s; in member %d)", r->path, total,
                           z->msg ? z->msg : "unknown error", r->member);
        if (*got > 0)
            return QM_OK;
        /* nothing yet: more input (Z_BUF_ERROR before the end) or the next member */
    }
}

/* Up to `want` bytes of plain text into dst (*got; 0 at the end of the file). */
static qm_code plain_text(qm_csv_reader *r, char *dst, size_t want, size_t *got, qm_status *st)
{
    const ssize_t n = read_some(r->fd, dst, want);
    *got = n > 0 ? (size_t)n : 0;
    return n < 0 ? qm_fail(st, QM_E_IO, "%s: cannot read: %s", r->path, strerror(errno)) : QM_OK;
}

/* Append up to one chunk of text to the window, first moving the untaken text to its front when
 * a chunk does not fit after it. The window starts at min(chunk, 64 KiB) + 1 bytes and doubles
 * when it is full, or when the last read filled all the room it had while that room was less than
 * a chunk: so a file larger than a chunk is soon read a whole chunk at a time, a small one never
 * costs a chunk of memory, and a line longer than the window makes it grow. At the end of the
 * source text_eof is set; a source failure (or text past max_text, cut at the limit) is kept in
 * src_rc, with what it delivered before it appended. Returns only the window's own failure
 * (E-NOMEM). */
static qm_code fill(qm_csv_reader *r, qm_status *st)
{
    if (r->cap - r->end < r->chunk + 1 && r->start > 0) {
        memmove(r->win, r->win + r->start, r->end - r->start);
        r->end -= r->start;
        r->scan -= r->start;
        r->start = 0;
    }
    size_t room = r->cap - r->end - 1;
    if (room < r->chunk && (room == 0 || r->full)) {
        if (r->cap > SIZE_MAX / 2)
            return qm_fail(st, QM_E_NOMEM, "%s: a CSV line does not fit this host's address "
                           "space", r->path);
        const size_t ncap = r->cap * 2;
        char *nw = realloc(r->win, ncap);
        if (!nw)
            return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu bytes for a CSV line of "
                           "more than %zu bytes", r->path, ncap, r->end - r->start);
        r->win = nw;
        r->cap = ncap;
        room = ncap - r->end - 1;
    }
    const size_t want = room < r->chunk ? room : r->chunk;
    size_t got = 0;
    qm_status why;
    qm_status_clear(&why);
    qm_code rc = r->info.gzip ? gzip_text(r, r->win + r->end, want, &got, &why)
                              : plain_text(r, r->win + r->end, want, &got, &why);
    r->full = got == want;
    if (r->max_text && got > r->max_text - r->text_bytes) {
        got = (size_t)(r->max_text - r->text_bytes); /* the text up to the limit still parses */
        rc = too_large(r->path, r->max_text, r->info.gzip, &why);
    }
    r->end += got;
    r->text_bytes += got;
    if (rc != QM_OK) {
        r->src_rc = rc;
        r->src_st = why;
    } else if (got == 0) {
        r->text_eof = 1;
    }
    return QM_OK;
}

/* ---- lines and fields ------------------------------------------------------------------------ */

/* A line of text: [s, e) without its line end; its 1-based number in the file. */
typedef struct csv_line {
    char *s, *e;
    long no;
} csv_line;

/* The next line of the text, [*s, *e) without its '\n' (*got 0 at the end). Valid until the next
 * call. The source's failure is reported here, once the lines before it are taken. */
static qm_code raw_line(qm_csv_reader *r, char **s, char **e, int *got, qm_status *st)
{
    *got = 0;
    for (;;) {
        char *nl = memchr(r->win + r->scan, '\n', r->end - r->scan);
        if (!nl && r->src_rc != QM_OK) {
            if (st)
                *st = r->src_st;
            return r->src_rc;
        }
        if (nl || (r->text_eof && r->start < r->end)) {
            const size_t e_off = nl ? (size_t)(nl - r->win) : r->end;
            *s = r->win + r->start;
            *e = r->win + e_off;
            r->start = r->scan = nl ? e_off + 1 : e_off;
            *got = 1;
            return QM_OK;
        }
        r->scan = r->end;
        if (r->text_eof)
            return QM_OK;
        const qm_code rc = fill(r, st);
        if (rc != QM_OK)
            return rc;
    }
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* A blank around a field: a space, or a tab unless the tab is the delimiter. */
static int is_pad(char c, char d)
{
    return c == ' ' || (c == '\t' && d != '\t');
}

/* The next non-blank line that is not a comment (*got 0 at the end of the text). A blank line
 * followed by a non-blank one is an error the caller reports (through blank_no, the first blank
 * line's number); a comment line is skipped wherever it is. */
static qm_code next_line(qm_csv_reader *r, csv_line *out, int *got, qm_status *st)
{
    for (;;) {
        char *s = NULL, *e = NULL;
        const qm_code rc = raw_line(r, &s, &e, got, st);
        if (rc != QM_OK || !*got)
            return rc;
        ++r->line_no;
        if (e > s && e[-1] == '\r')
            e--;
        const char *p = s;
        while (p < e && is_blank(*p))
            p++;
        if (p == e) {
            if (!r->blank_no)
                r->blank_no = r->line_no;
            continue;
        }
        if (*p == '#') {
            r->comments++;
            continue;
        }
        *out = (csv_line){s, e, r->line_no};
        return QM_OK;
    }
}

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

/* The end of the field that starts at f in [f, e): the delimiter d after it (d ' ': the first
 * blank), or e. A field whose first non-blank character is '"' is quoted (RFC 4180): delimiters up
 * to its closing quote are its text, "" inside it is one quote; a quote that is not closed on the
 * line runs the field to e and sets *open (when not NULL; else it is left as it was). */
static char *field_end(char *f, char *e, char d, int *open)
{
    char *p = f;
    while (p < e && is_pad(*p, d))
        p++;
    if (p < e && *p == '"') {
        for (++p; p < e; ++p)
            if (*p == '"') {
                if (p + 1 < e && p[1] == '"')
                    ++p; /* an escaped quote */
                else
                    break;
            }
        if (p == e) {
            if (open)
                *open = 1;
            return e;
        }
        f = p + 1;
    } else {
        f = p;
    }
    if (d == ' ') {
        while (f < e && !is_blank(*f))
            f++;
        return f;
    }
    char *c = memchr(f, d, (size_t)(e - f));
    return c ? c : e;
}

/* The start of the field after the one that ends at fe (field_end: at a delimiter, or e), or NULL
 * when the line has none: fe is e, or with blanks as the delimiter (d ' ') only blanks follow (a
 * run of them is one delimiter). Called before field_text writes its NUL at fe. */
static char *field_next(char *fe, char *e, char d)
{
    if (fe >= e)
        return NULL;
    if (d != ' ')
        return fe + 1;
    while (fe < e && is_blank(*fe))
        fe++;
    return fe < e ? fe : NULL;
}

/* The field [a, b) without the blanks around it, unquoted in place when it is one quoted string
 * ("..." with "" for a quote inside; blanks inside the quotes trimmed too), NUL-terminated (the
 * byte at b is a blank, the delimiter, '\r', '\n' or the spare byte, so writing there is safe). A
 * field with a stray or unclosed quote is kept as it is (it is then not a number). */
static char *field_text(char *a, char *b, char d)
{
    while (a < b && is_pad(*a, d))
        a++;
    while (b > a && is_pad(b[-1], d))
        b--;
    int quoted = b - a >= 2 && *a == '"' && b[-1] == '"';
    for (char *p = a + 1; quoted && p < b - 1; ++p) /* every quote inside is one of a pair */
        if (*p == '"' && !(p + 1 < b - 1 && *++p == '"'))
            quoted = 0;
    if (!quoted) {
        *b = '\0';
        return a;
    }
    char *w = a;
    for (char *p = a + 1; p < b - 1; ++p) {
        if (*p == '"')
            ++p; /* "" -> " */
        *w++ = *p;
    }
    char *t = a;
    while (t < w && is_pad(*t, d))
        t++;
    while (w > t && is_pad(w[-1], d))
        w--;
    *w = '\0';
    return t;
}

/* Split the line [s, e) into its fields (field_end), each trimmed, unquoted and NUL-terminated in
 * place (field_text). Stores up to max_fields field starts in fields (when not NULL); returns the
 * field count. */
static size_t split_line(char *s, char *e, char d, char **fields, size_t max_fields)
{
    size_t n = 0;
    for (char *f = s; f;) {
        char *fe = field_end(f, e, d, NULL);
        char *next = field_next(fe, e, d);
        char *t = field_text(f, fe, d);
        if (fields && n < max_fields)
            fields[n] = t;
        n++;
        f = next;
    }
    return n;
}

/* The 1-based column of the first field of [s, e) whose opening quote is not closed on the line,
 * or 0 (field_end runs such a field to the end of the line). */
static size_t open_quote_column(char *s, char *e, char d)
{
    size_t c = 1;
    for (char *f = s; f; ++c) {
        int open = 0;
        char *fe = field_end(f, e, d, &open);
        if (open)
            return c;
        f = field_next(fe, e, d);
    }
    return 0;
}

/* Count the fields of [s, e) without changing it. */
static size_t count_fields(char *s, char *e, char d)
{
    size_t n = 1;
    for (char *f = field_next(field_end(s, e, d, NULL), e, d); f;
         f = field_next(field_end(f, e, d, NULL), e, d))
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

/* ---- the start of the text and the first row ------------------------------------------------- */

/* Start over at byte 0 of the file: the source and the window reset, a byte-order mark skipped
 * (UTF-16 refused), the first non-blank line into *first (E-INPUT when there is none, or when a
 * blank line comes before it). */
static qm_code begin(qm_csv_reader *r, csv_line *first, qm_status *st)
{
    if (lseek(r->fd, 0, SEEK_SET) < 0)
        return qm_fail(st, QM_E_IO, "%s: cannot go back to the start of the file: %s", r->path,
                       strerror(errno));
    if (r->info.gzip) {
        if (inflateReset(&r->z) != Z_OK)
            return qm_fail(st, QM_E_INTERNAL, "%s: zlib inflateReset failed", r->path);
        r->z.next_in = r->zin;
        r->z.avail_in = 0;
        r->member = 1;
        r->ended = r->zeof = 0;
        r->consumed = 0;
    }
    r->start = r->end = r->scan = 0;
    r->text_eof = r->full = 0;
    r->src_rc = QM_OK;
    r->text_bytes = 0;
    r->line_no = r->blank_no = r->comments = 0;
    r->first_pending = 0;
    r->at_start = 1;
    r->info.rows_read = 0;
    qm_code rc = QM_OK;
    while (rc == QM_OK && r->end < 3 && !r->text_eof && r->src_rc == QM_OK)
        rc = fill(r, st);
    if (rc != QM_OK)
        return rc;
    /* a UTF-8 byte-order mark (Excel, Notepad) is not part of the first field; UTF-16 is refused */
    const unsigned char *u = (const unsigned char *)r->win;
    if (r->end >= 3 && memcmp(u, "\xef\xbb\xbf", 3) == 0)
        r->start = r->scan = 3;
    else if (r->end >= 2 && (u[0] == 0xff || u[0] == 0xfe) && (u[1] ^ u[0]) == 0x01)
        return qm_fail(st, QM_E_INPUT, "%s: UTF-16 text (byte-order mark %02x %02x) is not "
                       "supported; save the CSV as UTF-8", r->path, u[0], u[1]);
    int got = 0;
    if ((rc = next_line(r, first, &got, st)) != QM_OK)
        return rc;
    if (!got) {
        char comments[48] = "";
        if (r->comments)
            snprintf(comments, sizeof comments, ", %ld comment line%s ('#')", r->comments,
                     r->comments == 1 ? "" : "s");
        return qm_fail(st, QM_E_INPUT, "%s: empty: no rows (%llu bytes%s%s)", r->path,
                       (unsigned long long)r->text_bytes,
                       r->info.gzip ? " after gzip decompression" : "", comments);
    }
    if (r->blank_no)
        return qm_fail(st, QM_E_INPUT, "%s: row %ld is empty (blank lines are allowed only at the "
                       "end of the file)", r->path, r->blank_no);
    return QM_OK;
}

/* The first row's fields (a copy), then header or data, then the dropped column. */
static qm_code first_row(qm_csv_reader *r, const csv_line *first, qm_status *st)
{
    const size_t len = (size_t)(first->e - first->s);
    const size_t ncols = count_fields(first->s, first->e, r->delim);
    r->first_no = first->no;
    r->first_text = malloc(len + 1);
    r->names = malloc(ncols * sizeof *r->names);
    if (!r->first_text || !r->names)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu column names", r->path, ncols);
    memcpy(r->first_text, first->s, len);
    r->first_text[len] = '\0';
    split_line(r->first_text, r->first_text + len, r->delim, r->names, ncols);
    char **names = r->names;
    const char *drop_opt = r->drop_opt;
    size_t drop_idx = 0;
    const int drop_is_index = drop_opt && decimal_index(drop_opt, &drop_idx);
    int header = r->header_opt == QM_CSV_HEADER_YES;
    if (r->header_opt == QM_CSV_HEADER_AUTO) {
        for (size_t c = 0; c < ncols && !header; ++c) {
            double v;
            if (drop_is_index && c == drop_idx)
                continue;
            header = parse_number(names[c], &v) == NUM_BAD;
        }
    }
    long drop = -1;
    if (drop_opt) {
        char pn[48];
        if (header) {
            for (size_t c = 0; c < ncols; ++c) {
                if (strcmp(names[c], drop_opt) != 0)
                    continue;
                if (drop >= 0)
                    return qm_fail(st, QM_E_INPUT, "%s: the header names column '%s' twice "
                                   "(columns %ld and %zu); drop it by 0-based index instead",
                                   r->path, printable(drop_opt, pn, sizeof pn), drop + 1, c + 1);
                drop = (long)c;
            }
        }
        if (drop < 0 && drop_is_index) {
            if (drop_idx >= ncols)
                return qm_fail(st, QM_E_INPUT, "%s: drop column %zu is out of range (the file "
                               "has %zu columns, indices 0..%zu)", r->path, drop_idx, ncols,
                               ncols - 1);
            drop = (long)drop_idx;
        }
        if (drop < 0 && !header)
            return qm_fail(st, QM_E_INPUT, "%s: drop column '%s' is not a 0-based column index "
                           "and the file has no header row to look the name up in", r->path,
                           printable(drop_opt, pn, sizeof pn));
        if (drop < 0) {
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
            return qm_fail(st, QM_E_INPUT, "%s: no column named '%s' in the header (columns: %s)",
                           r->path, printable(drop_opt, pn, sizeof pn), cols);
        }
    }
    const size_t nfeat = ncols - (drop >= 0 ? 1 : 0);
    if (nfeat == 0)
        return qm_fail(st, QM_E_INPUT, "%s: no feature columns left after dropping column %ld "
                       "(the file has %zu column)", r->path, drop, ncols);
    r->info.n_columns = ncols;
    r->info.n_features = nfeat;
    r->info.has_header = header;
    r->info.dropped_column = drop;
    r->first_pending = !header;
    return QM_OK;
}

/* ---- rows ------------------------------------------------------------------------------------ */

/* " (the fields look separated by a tab, not ',': --delimiter tab)" into hint when the field text
 * (trimmed: blanks inside it are between its characters) holds another common delimiter, tried in
 * the order tab, semicolon, comma, space; else "". */
static void delimiter_hint(const qm_csv_reader *r, const char *field, char *hint, size_t bytes)
{
    static const struct { char c; const char *name; } common[] = {
        {'\t', "tab"}, {';', "semicolon"}, {',', "comma"}, {' ', "space"}};
    hint[0] = '\0';
    for (size_t k = 0; k < sizeof common / sizeof common[0]; ++k) {
        if (common[k].c == r->delim || !strchr(field, common[k].c))
            continue;
        char now[8] = "blanks"; /* the delimiter read with: '\t', ',', ... or blanks */
        if (r->delim == '\t')
            snprintf(now, sizeof now, "'\\t'");
        else if (r->delim != ' ')
            snprintf(now, sizeof now, "'%c'", r->delim);
        snprintf(hint, bytes, " (the fields look separated by a %s, not %s: --delimiter %s)",
                 common[k].name, now, common[k].name);
        return;
    }
}

/* Whether the first row was taken for a header (auto) only because its column c is not a
 * number: every other field of it is one. A text label column (Iris's species) then makes its
 * first row a header, and the message should say so. */
static int label_header(const qm_csv_reader *r, size_t c)
{
    if (r->header_opt != QM_CSV_HEADER_AUTO || !r->info.has_header || !r->names ||
        r->info.n_columns < 2)
        return 0;
    for (size_t k = 0; k < (size_t)r->info.n_columns; ++k) {
        double v;
        if (k != c && parse_number(r->names[k], &v) != NUM_OK)
            return 0;
    }
    return 1;
}

/* Parse one data row into dst (n_features values; NULL: checked only). The first row (is_first)
 * was split when the reader opened: its fields are the names. */
static qm_code parse_row(const qm_csv_reader *r, const csv_line *ln, int is_first, double *dst,
                         qm_status *st)
{
    const size_t ncols = (size_t)r->info.n_columns;
    const size_t nf = is_first ? ncols : count_fields(ln->s, ln->e, r->delim);
    if (nf != ncols) {
        const size_t oq = open_quote_column(ln->s, ln->e, r->delim);
        if (oq)
            return qm_fail(st, QM_E_INPUT, "%s: row %ld, column %zu: the quoted field is not "
                           "closed on its line (a quoted field may not span lines)", r->path,
                           ln->no, oq);
        return qm_fail(st, QM_E_INPUT, "%s: row %ld has %zu fields, expected %zu (as in row %ld)",
                       r->path, ln->no, nf, ncols, r->first_no);
    }
    char *f = ln->s;
    for (size_t c = 0; c < ncols; ++c) {
        char *field = r->names[c];
        if (!is_first) { /* count_fields found ncols fields: each but the last has a next */
            char *fe = field_end(f, ln->e, r->delim, NULL);
            char *next = field_next(fe, ln->e, r->delim);
            field = field_text(f, fe, r->delim);
            f = next;
        }
        if ((long)c == r->info.dropped_column)
            continue;
        double v = 0.0;
        const num_result nr = parse_number(field, &v);
        if (nr != NUM_OK) {
            char pt[48], pc[48], col[80] = "", hint[160] = "";
            if (r->info.has_header)
                snprintf(col, sizeof col, " ('%s')", printable(r->names[c], pc, sizeof pc));
            if (nr == NUM_BAD)
                delimiter_hint(r, field, hint, sizeof hint);
            if (nr == NUM_BAD && !hint[0] && label_header(r, c))
                snprintf(hint, sizeof hint, " (a column of labels? --drop-column %zu leaves it "
                         "out, and row %ld is then data, not a header)", c, r->first_no);
            /* "1,2," exported with a delimiter after the last field: the last column empty in
             * the first row (or header) too */
            if (nr == NUM_EMPTY && c + 1 == ncols && ncols > 1 && r->delim != ' ' && r->names &&
                !r->names[c][0])
                snprintf(hint, sizeof hint, " (the line ends with a delimiter? --drop-column %zu "
                         "leaves the empty last column out)", c);
            return qm_fail(st, QM_E_INPUT, "%s: row %ld, column %zu%s: %s%s%s%s", r->path, ln->no,
                           c + 1, col, nr == NUM_EMPTY ? "empty field" : "'",
                           nr == NUM_EMPTY ? "" : printable(field, pt, sizeof pt),
                           nr == NUM_EMPTY ? ""
                           : nr == NUM_RANGE ? "' is out of range for float64"
                                             : "' is not a number",
                           hint);
        }
        if (dst)
            *dst++ = v;
    }
    return QM_OK;
}

/* A file with a header row and nothing after it. A header the reader took itself (auto) of one
 * field that holds another common delimiter gets delimiter_hint's hint: a one-row file separated
 * by something else looks like a header of one name. */
static qm_code no_data_rows(const qm_csv_reader *r, qm_status *st)
{
    char hint[96] = "";
    if (r->header_opt == QM_CSV_HEADER_AUTO && r->info.n_columns == 1 && r->names)
        delimiter_hint(r, r->names[0], hint, sizeof hint);
    return qm_fail(st, QM_E_INPUT, "%s: empty: no data rows (only the header row %ld)%s", r->path,
                   r->first_no, hint);
}

/* The reader's sticky failure: kept, and copied to st. */
static qm_code reader_failed(qm_csv_reader *r, qm_code rc, const qm_status *why, qm_status *st)
{
    r->failed = rc;
    r->fail_st = *why;
    if (st)
        *st = *why;
    return rc;
}

qm_code qm_csv_open(const char *path, const qm_csv_options *opt, qm_csv_reader **out,
                    qm_status *st)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "csv open: path and out must not be NULL");
    qm_csv_options defaults;
    if (!opt) {
        qm_csv_options_init(&defaults);
        opt = &defaults;
    }
    const char dl = opt->delimiter;
    if (dl == '"' || dl == '\r' || dl == '\n' || dl == '#')
        return qm_fail(st, QM_E_ARG, "%s: the CSV delimiter cannot be %s (it must be a byte other "
                       "than a quote, '#' (it starts a comment line) or a line end; ' ' stands "
                       "for blanks)", path, dl == '"' ? "'\"'" : dl == '#' ? "'#'" : "a line end");
    if (opt->header != QM_CSV_HEADER_AUTO && opt->header != QM_CSV_HEADER_YES &&
        opt->header != QM_CSV_HEADER_NO)
        return qm_fail(st, QM_E_ARG, "%s: csv load: header option %d is not auto, yes or no", path,
                       (int)opt->header);
    uint64_t chunk = 0;
    qm_code rc = qm_csv_chunk_bytes_query(path, &chunk, st);
    if (rc != QM_OK)
        return rc;
    qm_csv_reader *r = calloc(1, sizeof *r);
    if (!r)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate a CSV reader", path);
    r->fd = -1;
    r->chunk = (size_t)chunk;
    r->max_text = opt->max_text_bytes;
    r->header_opt = opt->header;
    r->delim = opt->delimiter ? opt->delimiter : ',';
    r->info.dropped_column = -1;
    r->info.chunk_bytes = chunk;
    r->path = strdup(path);
    r->drop_opt = opt->drop_column ? strdup(opt->drop_column) : NULL;
    r->info.path = r->path;
    if (!r->path || (opt->drop_column && !r->drop_opt)) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate a CSV reader", path);
        goto fail;
    }
    if ((rc = qm_input_file_open(path, &r->fd, &r->file_bytes, st)) != QM_OK)
        goto fail;
    unsigned char magic[2];
    ssize_t m;
    do
        m = pread(r->fd, magic, sizeof magic, 0);
    while (m < 0 && errno == EINTR);
    if (m < 0) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    r->info.gzip = m == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (!r->info.gzip && r->max_text && r->file_bytes > r->max_text) {
        rc = too_large(path, r->max_text, 0, st);
        goto fail;
    }
    r->cap = (r->chunk < ((size_t)1 << 16) ? r->chunk : ((size_t)1 << 16)) + 1;
    r->zin_cap = r->chunk < r->file_bytes ? r->chunk : (size_t)r->file_bytes;
    if (r->zin_cap < 2) /* a member boundary needs 2 bytes in view */
        r->zin_cap = 2;
    if (!(r->win = malloc(r->cap)) || (r->info.gzip && !(r->zin = malloc(r->zin_cap)))) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu bytes for a CSV chunk", path,
                     r->cap);
        goto fail;
    }
    if (r->info.gzip) {
        if (inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
            rc = qm_fail(st, QM_E_NOMEM, "%s: cannot set up zlib to read the file", path);
            goto fail;
        }
        r->zinit = 1;
    }
    csv_line first;
    if ((rc = begin(r, &first, st)) != QM_OK || (rc = first_row(r, &first, st)) != QM_OK)
        goto fail;
    *out = r;
    return QM_OK;
fail:
    qm_csv_close(r);
    return rc;
}

/* Up to max_rows data rows: parsed and checked (into out, or only checked when out is NULL) when
 * `parse`, else passed by their line ends only (the blank-line rule is the read's). */
static qm_code take_rows(qm_csv_reader *r, uint64_t max_rows, double *out, int parse,
                         uint64_t *n_done, qm_status *st)
{
    if (n_done)
        *n_done = 0;
    if (!r || !n_done)
        return qm_fail(st, QM_E_ARG, "csv %s: reader and %s must not be NULL",
                       parse ? "read" : "skip", parse ? "n_read" : "n_skipped");
    if (r->failed != QM_OK) {
        if (st)
            *st = r->fail_st;
        return r->failed;
    }
    qm_status why;
    qm_status_clear(&why);
    qm_code rc = QM_OK;
    const uint64_t F = r->info.n_features;
    uint64_t n = 0;
    while (n < max_rows) {
        const int is_first = r->first_pending;
        csv_line ln = {r->first_text, r->first_text, r->first_no};
        r->at_start = 0;
        if (is_first) {
            r->first_pending = 0;
        } else {
            int got = 0;
            if ((rc = next_line(r, &ln, &got, &why)) != QM_OK || !got)
                break;
            if (parse && r->blank_no) {
                rc = qm_fail(&why, QM_E_INPUT, "%s: row %ld is empty (blank lines are allowed "
                             "only at the end of the file)", r->path, r->blank_no);
                break;
            }
        }
        if (parse && (rc = parse_row(r, &ln, is_first, out ? out + n * F : NULL, &why)) != QM_OK)
            break;
        n++;
    }
    r->info.rows_read += n;
    *n_done = n;
    return rc == QM_OK ? QM_OK : reader_failed(r, rc, &why, st);
}

qm_code qm_csv_read_rows(qm_csv_reader *r, uint64_t max_rows, double *out, uint64_t *n_read,
                         qm_status *st)
{
    return take_rows(r, max_rows, out, 1, n_read, st);
}

qm_code qm_csv_skip_rows(qm_csv_reader *r, uint64_t max_rows, uint64_t *n_skipped,
                         qm_status *st)
{
    return take_rows(r, max_rows, NULL, 0, n_skipped, st);
}

qm_code qm_csv_rewind(qm_csv_reader *r, qm_status *st)
{
    if (!r)
        return qm_fail(st, QM_E_ARG, "csv rewind: reader must not be NULL");
    qm_status why;
    qm_status_clear(&why);
    csv_line first;
    r->failed = QM_OK;
    const qm_code rc = begin(r, &first, &why);
    if (rc != QM_OK)
        return reader_failed(r, rc, &why, st);
    r->first_pending = !r->info.has_header; /* the first line is taken: its copy is the row */
    return QM_OK;
}

qm_code qm_csv_count_rows(qm_csv_reader *r, uint64_t *rows, qm_status *st)
{
    if (rows)
        *rows = 0;
    if (!r || !rows)
        return qm_fail(st, QM_E_ARG, "csv count: reader and rows must not be NULL");
    qm_code rc = r->at_start && r->failed == QM_OK ? QM_OK : qm_csv_rewind(r, st);
    if (rc != QM_OK)
        return rc;
    qm_status why;
    qm_status_clear(&why);
    uint64_t n = r->first_pending ? 1 : 0;
    for (;;) {
        csv_line ln;
        int got = 0;
        if ((rc = next_line(r, &ln, &got, &why)) != QM_OK)
            return reader_failed(r, rc, &why, st);
        if (!got)
            break;
        n++;
    }
    if (n == 0)
        return reader_failed(r, no_data_rows(r, &why), &why, st);
    if ((rc = qm_csv_rewind(r, st)) != QM_OK)
        return rc;
    r->info.n_rows = n;
    r->info.rows_known = true;
    *rows = n;
    return QM_OK;
}

const qm_csv_reader_info *qm_csv_reader_info_get(const qm_csv_reader *r)
{
    return &r->info;
}

void qm_csv_close(qm_csv_reader *r)
{
    if (!r)
        return;
    if (r->zinit)
        inflateEnd(&r->z);
    if (r->fd >= 0)
        close(r->fd);
    free(r->zin);
    free(r->win);
    free(r->names);
    free(r->first_text);
    free(r->drop_opt);
    free(r->path);
    free(r);
}

/* ---- the whole file ---------------------------------------------------------------------------- */

qm_code qm_csv_load(const char *path, const qm_csv_options *opt, qm_csv_data *out, qm_status *st)
{
    qm_csv_reader *r = NULL;
    double *values = NULL;
    if (out) {
        memset(out, 0, sizeof *out);
        out->dropped_column = -1;
    }
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "csv load: path and out must not be NULL");
    qm_csv_options o;
    if (opt)
        o = *opt;
    else
        qm_csv_options_init(&o);
    if (!o.max_text_bytes)
        o.max_text_bytes = QM_CSV_MAX_TEXT_BYTES;
    qm_code rc = qm_csv_open(path, &o, &r, st);
    if (rc != QM_OK)
        return rc;
    const qm_csv_reader_info *info = qm_csv_reader_info_get(r);
    const size_t nfeat = (size_t)info->n_features;
    /* The value matrix grows with the rows actually parsed (doubling, from at most 1 MiB), never
     * by a guess from the text: trailing blank lines or a ragged row must not make it ask for
     * more. */
    size_t rows = 0, rows_cap = 0;
    for (;;) {
        if (rows == rows_cap) {
            size_t ncap = rows_cap * 2;
            if (!rows_cap) {
                ncap = ((size_t)1 << 17) / nfeat;
                ncap = ncap < 1 ? 1 : ncap > 1024 ? 1024 : ncap;
            }
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
        uint64_t got = 0;
        if ((rc = qm_csv_read_rows(r, rows_cap - rows, values + rows * nfeat, &got, st)) != QM_OK)
            goto done;
        rows += (size_t)got;
        if (rows < rows_cap)
            break; /* the end of the text */
    }
    if (rows == 0) {
        rc = no_data_rows(r, st);
        goto done;
    }
    if (rows < rows_cap) { /* give back the matrix's unused rows */
        double *nv = realloc(values, rows * nfeat * sizeof *values);
        if (nv)
            values = nv;
    }
    out->values = values;
    values = NULL;
    out->n_samples = rows;
    out->n_features = nfeat;
    out->has_header = info->has_header;
    out->gzip = info->gzip;
    out->dropped_column = info->dropped_column;
done:
    free(values);
    qm_csv_close(r);
    return rc;
}
