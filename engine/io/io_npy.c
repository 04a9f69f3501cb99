/* io_npy.c — `.npy` input: a strict header parser and a reader of element ranges.
 *
 * In: a path (or the first bytes of a file and its size). Out: a qm_npy_info (dtype, shape, data
 * offset) and, on demand, any element range read with pread, so that each MPI rank can read only
 * its own slice of a large file and a single process can stream it in chunks.
 * Must not: read past a buffer on arbitrary bytes (the parser only ever looks at bytes[0, n)),
 * read the data when only the header is asked for, or accept anything it cannot read exactly:
 * accepted are NumPy format 1.0/2.0/3.0, dtype '<f4' or '<f8', C or Fortran order, 1-D or 2-D,
 * non-empty, with exactly shape x itemsize data bytes after the header (docs/io.md).
 * Ranged reads are always in the row-major order of the (samples, features) view: a C-order file
 * is one pread; a Fortran-order 2-D file is read by column segments (or whole short columns) in
 * blocks of at most 8 MiB and transposed; a dropped label column (qm_npy_reader_drop_column) is
 * skipped in blocks of whole rows. Every path reads only the rows of the range asked for.
 * Also here: qm_input_format_query (which reader a file needs, from its magic bytes) and
 * qm_input_file_open (every input opened without blocking, regular files only).
 */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "io.h"
#include "status_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__)
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "qmesh I/O copies little-endian .npy bytes as they are: big-endian hosts are unsupported"
#endif
#endif

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
static const unsigned char hdf5_magic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

#define NPY_MAX_DIMS 32 /* more than NumPy's own limit, so any real header parses */
#define NPY_STR_CAP 64  /* keys and dtype strings we keep (longer ones are reported truncated) */

/* ---- small helpers --------------------------------------------------------------------------- */

/* Read up to n bytes at offset off, retrying on EINTR and short reads; *got is what was read
 * (short only at end of file). Returns 0 or an errno value. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
    unsigned char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, p + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

/* Printable copy of s (at most 32 characters, then "..."), for messages. */
static const char *printable(const char *s, size_t len, char *buf, size_t buf_bytes)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < buf_bytes; ++i) {
        if (i == 32) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    buf[o] = '\0';
    return buf;
}

/* "(2, 3, 4)", "(5,)", "()" — truncated with "...)" when it does not fit. */
static const char *shape_text(const uint64_t *dims, int ndim, char *buf, size_t buf_bytes)
{
    size_t o = 0;
    buf[o++] = '(';
    for (int i = 0; i < ndim; ++i) {
        char num[32];
        int k = snprintf(num, sizeof num, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
        if (k < 0 || o + (size_t)k + 6 >= buf_bytes) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, num, (size_t)k);
        o += (size_t)k;
    }
    if (ndim == 1)
        buf[o++] = ',';
    buf[o++] = ')';
    buf[o] = '\0';
    return buf;
}

/* ---- the header dict ------------------------------------------------------------------------- */

typedef struct npy_parser {
    const char *subject;
    const unsigned char *begin, *p, *end; /* the header bytes (after the preamble) */
    qm_status *st;
} npy_parser;

static qm_code malformed(npy_parser *ps, const char *what)
{
    return qm_fail(ps->st, QM_E_INPUT,
                   "%s: malformed .npy header: %s (at header byte %zu of %zu)", ps->subject, what,
                   (size_t)(ps->p - ps->begin), (size_t)(ps->end - ps->begin));
}

static qm_code unterminated(npy_parser *ps)
{
    return qm_fail(ps->st, QM_E_INPUT,
                   "%s: malformed .npy header: unterminated dict (no closing '}' within the "
                   "%zu-byte header)",
                   ps->subject, (size_t)(ps->end - ps->begin));
}

static void skip_ws(npy_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* A Python string literal in ' or " quotes, no escapes. Keeps up to NPY_STR_CAP - 1 bytes in buf
 * and the full length in *len. */
static qm_code parse_string(npy_parser *ps, char *buf, size_t *len)
{
    if (ps->p >= ps->end)
        return unterminated(ps);
    const unsigned char q = *ps->p;
    if (q != '\'' && q != '"')
        return malformed(ps, "expected a quoted string");
    ps->p++;
    size_t n = 0;
    for (;;) {
        if (ps->p >= ps->end)
            return malformed(ps, "unterminated string");
        const unsigned char c = *ps->p;
        if (c == q)
            break;
        if (c == '\\')
            return malformed(ps, "escape sequences in strings are not supported");
        if (c == '\n' || c == '\r' || c == '\0')
            return malformed(ps, "line break or NUL inside a string");
        if (n < NPY_STR_CAP - 1)
            buf[n] = (char)c;
        n++;
        ps->p++;
    }
    ps->p++; /* closing quote */
    buf[n < NPY_STR_CAP - 1 ? n : NPY_STR_CAP - 1] = '\0';
    *len = n;
    return QM_OK;
}

static qm_code parse_bool(npy_parser *ps, int *out)
{
    const unsigned char *w = ps->p;
    while (ps->p < ps->end &&
           ((*ps->p >= 'A' && *ps->p <= 'Z') || (*ps->p >= 'a' && *ps->p <= 'z')))
        ps->p++;
    const size_t n = (size_t)(ps->p - w);
    if (n == 4 && memcmp(w, "True", 4) == 0)
        *out = 1;
    else if (n == 5 && memcmp(w, "False", 5) == 0)
        *out = 0;
    else {
        ps->p = w;
        return malformed(ps, "'fortran_order' must be True or False");
    }
    return QM_OK;
}

static qm_code parse_uint(npy_parser *ps, uint64_t *out)
{
    if (ps->p >= ps->end)
        return unterminated(ps);
    if (*ps->p < '0' || *ps->p > '9')
        return malformed(ps, "expected a non-negative integer in 'shape'");
    uint64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        const unsigned d = (unsigned)(*ps->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return malformed(ps, "a 'shape' dimension does not fit in 64 bits");
        v = v * 10 + d;
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == 'L') /* Python 2 long literal, as old NumPy wrote */
        ps->p++;
    *out = v;
    return QM_OK;
}

/* A tuple of integers: (), (5,), (3, 4), (3, 4,). */
static qm_code parse_shape(npy_parser *ps, uint64_t *dims, int *ndim)
{
    if (ps->p >= ps->end)
        return unterminated(ps);
    if (*ps->p != '(')
        return malformed(ps, "'shape' must be a tuple");
    ps->p++;
    int n = 0;
    int trailing_comma = 0;
    skip_ws(ps);
    while (ps->p < ps->end && *ps->p != ')') {
        if (n == NPY_MAX_DIMS)
            return malformed(ps, "'shape' has more than 32 dimensions");
        qm_code rc = parse_uint(ps, &dims[n]);
        if (rc != QM_OK)
            return rc;
        n++;
        skip_ws(ps);
        trailing_comma = 0;
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            trailing_comma = 1;
            skip_ws(ps);
        } else if (ps->p < ps->end && *ps->p != ')') {
            return malformed(ps, "expected ',' or ')' in 'shape'");
        }
    }
    if (ps->p >= ps->end)
        return unterminated(ps);
    if (n == 1 && !trailing_comma)
        return malformed(ps, "'shape' must be a tuple: a 1-D shape is written (n,)");
    ps->p++; /* ')' */
    *ndim = n;
    return QM_OK;
}

typedef struct npy_dict {
    char descr[NPY_STR_CAP];
    size_t descr_len;
    int fortran;
    uint64_t dims[NPY_MAX_DIMS];
    int ndim;
} npy_dict;

static qm_code parse_dict(npy_parser *ps, npy_dict *d)
{
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    qm_code rc;
    if (ps->p >= ps->end)
        return qm_fail(ps->st, QM_E_INPUT, "%s: malformed .npy header: header is empty",
                       ps->subject);
    if (*ps->p != '{') {
        char c[8];
        const unsigned char b = *ps->p;
        snprintf(c, sizeof c, (b >= 0x20 && b < 0x7f) ? "'%c'" : "0x%02x", b);
        return qm_fail(ps->st, QM_E_INPUT,
                       "%s: malformed .npy header: header is not a dict (it starts with %s, "
                       "expected '{')",
                       ps->subject, c);
    }
    ps->p++;
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end)
            return unterminated(ps);
        if (*ps->p == '}')
            break;
        char key[NPY_STR_CAP];
        size_t key_len = 0;
        const unsigned char *key_at = ps->p;
        if ((rc = parse_string(ps, key, &key_len)) != QM_OK)
            return rc;
        skip_ws(ps);
        if (ps->p >= ps->end)
            return unterminated(ps);
        if (*ps->p != ':')
            return malformed(ps, "expected ':' after a key");
        ps->p++;
        skip_ws(ps);
        int *seen = NULL;
        if (key_len == 5 && strcmp(key, "descr") == 0)
            seen = &seen_descr;
        else if (key_len == 13 && strcmp(key, "fortran_order") == 0)
            seen = &seen_fortran;
        else if (key_len == 5 && strcmp(key, "shape") == 0)
            seen = &seen_shape;
        if (!seen) {
            char pk[48], what[128];
            ps->p = key_at;
            snprintf(what, sizeof what,
                     "unexpected key '%s' (expected 'descr', 'fortran_order', 'shape')",
                     printable(key, key_len < NPY_STR_CAP ? key_len : NPY_STR_CAP - 1, pk,
                               sizeof pk));
            return malformed(ps, what);
        }
        if (*seen) {
            ps->p = key_at;
            char what[96];
            snprintf(what, sizeof what, "duplicate key '%s'", key);
            return malformed(ps, what);
        }
        *seen = 1;
        if (seen == &seen_descr) {
            if (ps->p < ps->end && *ps->p == '[')
                return qm_fail(ps->st, QM_E_INPUT,
                               "%s: unsupported dtype: a structured dtype (a list of fields); "
                               "accepted: '<f4' float32, '<f8' float64",
                               ps->subject);
            if ((rc = parse_string(ps, d->descr, &d->descr_len)) != QM_OK)
                return rc;
        } else if (seen == &seen_fortran) {
            if ((rc = parse_bool(ps, &d->fortran)) != QM_OK)
                return rc;
        } else {
            if ((rc = parse_shape(ps, d->dims, &d->ndim)) != QM_OK)
                return rc;
        }
        skip_ws(ps);
        if (ps->p >= ps->end)
            return unterminated(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p != '}')
            return malformed(ps, "expected ',' or '}' after a value");
    }
    ps->p++; /* '}' */
    skip_ws(ps);
    if (ps->p != ps->end)
        return malformed(ps, "unexpected bytes after the closing '}'");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return qm_fail(ps->st, QM_E_INPUT,
                       "%s: malformed .npy header: missing key '%s' (a header holds 'descr', "
                       "'fortran_order' and 'shape')",
                       ps->subject,
                       !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
    return QM_OK;
}

/* Why a dtype string is not accepted, in a few words. */
static const char *descr_problem(const char *s, size_t len)
{
    if (len < 2)
        return "not a NumPy type string";
    const char order = s[0], kind = s[1];
    if (order != '<' && order != '>' && order != '=' && order != '|')
        return "not a NumPy type string";
    if (order == '>')
        return "big-endian";
    switch (kind) {
    case 'f': return order == '<' ? "a float of another size" : "not explicitly little-endian";
    case 'i': return "integer";
    case 'u': return "unsigned integer";
    case 'c': return "complex";
    case 'b':
    case '?': return "boolean";
    case 'U':
    case 'S':
    case 'a': return "string";
    case 'O': return "Python objects";
    case 'M':
    case 'm': return "datetime";
    case 'V': return "raw bytes or records";
    default: return "not a NumPy type string";
    }
}

/* ---- the preamble and the checks ------------------------------------------------------------- */

qm_code qm_npy_header_parse(const char *subject, const unsigned char *bytes, size_t n_bytes,
                            uint64_t file_bytes, qm_npy_info *out, qm_status *st)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!subject)
        subject = "npy";
    if (!out || (!bytes && n_bytes))
        return qm_fail(st, QM_E_ARG, "%s: npy header parse: out and bytes must not be NULL",
                       subject);
    const size_t avail = (uint64_t)n_bytes < file_bytes ? n_bytes : (size_t)file_bytes;

    /* magic */
    const size_t nm = avail < 6 ? avail : 6;
    if (avail == 0 || memcmp(bytes, npy_magic, nm) != 0) {
        char hex[32] = "";
        size_t o = 0;
        for (size_t i = 0; i < nm; ++i)
            o += (size_t)snprintf(hex + o, sizeof hex - o, "%s%02x", i ? " " : "", bytes[i]);
        return qm_fail(st, QM_E_INPUT,
                       "%s: not a .npy file: bad magic (first bytes: %s; expected "
                       "93 4e 55 4d 50 59, \"\\x93NUMPY\")",
                       subject, nm ? hex : "none, the file is empty");
    }
    if (avail < 8)
        return qm_fail(st, QM_E_INPUT,
                       "%s: truncated .npy preamble (%zu bytes, need at least 10)", subject, avail);
    const unsigned major = bytes[6], minor = bytes[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return qm_fail(st, QM_E_INPUT,
                       "%s: unsupported .npy format version %u.%u (accepted: 1.0, 2.0, 3.0)",
                       subject, major, minor);
    const size_t pre = major == 1 ? 10 : 12;
    if (avail < pre)
        return qm_fail(st, QM_E_INPUT,
                       "%s: truncated .npy preamble (%zu bytes, need %zu for version %u.0)",
                       subject, avail, pre, major);
    uint64_t hlen = (uint64_t)bytes[8] | ((uint64_t)bytes[9] << 8);
    if (major != 1)
        hlen |= ((uint64_t)bytes[10] << 16) | ((uint64_t)bytes[11] << 24);
    if (hlen > QM_NPY_MAX_HEADER_BYTES)
        return qm_fail(st, QM_E_INPUT,
                       "%s: .npy header length %llu exceeds the limit of %u bytes", subject,
                       (unsigned long long)hlen, QM_NPY_MAX_HEADER_BYTES);
    const uint64_t data_offset = pre + hlen;
    if (data_offset > file_bytes)
        return qm_fail(st, QM_E_INPUT,
                       "%s: .npy header length %llu runs past the end of the file (%zu + %llu = "
                       "%llu bytes, the file has %llu)",
                       subject, (unsigned long long)hlen, pre, (unsigned long long)hlen,
                       (unsigned long long)data_offset, (unsigned long long)file_bytes);
    if (data_offset > n_bytes)
        return qm_fail(st, QM_E_ARG,
                       "%s: npy header parse: given %zu bytes, the header needs %llu", subject,
                       n_bytes, (unsigned long long)data_offset);

    /* the dict */
    npy_dict d;
    memset(&d, 0, sizeof d);
    npy_parser ps = {subject, bytes + pre, bytes + pre, bytes + data_offset, st};
    qm_code rc = parse_dict(&ps, &d);
    if (rc != QM_OK)
        return rc;

    char shp[160];
    shape_text(d.dims, d.ndim, shp, sizeof shp);
    qm_dtype dtype;
    if (d.descr_len == 3 && strcmp(d.descr, "<f4") == 0)
        dtype = QM_DTYPE_FLOAT32;
    else if (d.descr_len == 3 && strcmp(d.descr, "<f8") == 0)
        dtype = QM_DTYPE_FLOAT64;
    else {
        char pd[48];
        return qm_fail(st, QM_E_INPUT,
                       "%s: unsupported dtype '%s' (%s; accepted: '<f4' float32, '<f8' float64); "
                       "convert with a.astype('<f8')",
                       subject,
                       printable(d.descr, d.descr_len < NPY_STR_CAP ? d.descr_len : NPY_STR_CAP - 1,
                                 pd, sizeof pd),
                       descr_problem(d.descr, d.descr_len));
    }
    if (d.ndim != 1 && d.ndim != 2)
        return qm_fail(st, QM_E_INPUT,
                       "%s: %d-D array (shape %s) is not supported (expected 1-D (features,) or "
                       "2-D (samples, features))",
                       subject, d.ndim, shp);
    uint64_t n_elems = 1;
    for (int i = 0; i < d.ndim; ++i) {
        if (d.dims[i] == 0)
            return qm_fail(st, QM_E_INPUT, "%s: empty array (shape %s): nothing to encode", subject,
                           shp);
    }
    const uint64_t item = qm_dtype_size(dtype);
    for (int i = 0; i < d.ndim; ++i) {
        if (n_elems > UINT64_MAX / d.dims[i])
            goto too_big;
        n_elems *= d.dims[i];
    }
    if (n_elems > (UINT64_MAX - data_offset) / item)
        goto too_big;
    const uint64_t data_bytes = n_elems * item;
    const uint64_t found = file_bytes - data_offset;
    if (found < data_bytes)
        return qm_fail(st, QM_E_INPUT,
                       "%s: truncated: expected %llu data bytes, found %llu (shape %s of %s, data "
                       "at byte %llu)",
                       subject, (unsigned long long)data_bytes, (unsigned long long)found, shp,
                       qm_dtype_name(dtype), (unsigned long long)data_offset);
    if (found > data_bytes)
        return qm_fail(st, QM_E_INPUT,
                       "%s: %llu unexpected bytes after the data (expected %llu data bytes, found "
                       "%llu); the header's shape %s may be wrong",
                       subject, (unsigned long long)(found - data_bytes),
                       (unsigned long long)data_bytes, (unsigned long long)found, shp);

    out->version_major = (int)major;
    out->fortran_order = d.fortran ? 1 : 0;
    out->dropped_column = -1;
    out->dtype = dtype;
    out->ndim = d.ndim;
    out->shape[0] = d.dims[0];
    out->shape[1] = d.ndim == 2 ? d.dims[1] : 0;
    out->n_samples = d.ndim == 2 ? d.dims[0] : 1;
    out->n_features = d.ndim == 2 ? d.dims[1] : d.dims[0];
    out->n_elems = n_elems;
    out->data_offset = data_offset;
    out->data_bytes = data_bytes;
    return QM_OK;

too_big:
    return qm_fail(st, QM_E_INPUT,
                   "%s: shape %s is too large: its byte count overflows 64 bits (the header lies "
                   "about the shape)",
                   subject, shp);
}

/* ---- the reader ------------------------------------------------------------------------------ */

struct qm_npy_reader {
    int fd;
    qm_npy_info info;
    uint64_t rows, cols; /* the file's array as rows x cols (1-D: 1 x F) */
    int transposed;      /* Fortran order with rows > 1 and cols > 1 (else the bytes are C order) */
    uint64_t block_bytes;/* buffer bound of ranged reads that are not one pread */
    char path[];         /* for messages */
};

/* A Fortran-order column of at most block_bytes / NPY_SHORT_COLUMN_RATIO bytes (4 KiB of the
 * default 8 MiB) is read whole: one pread for many columns. */
#define NPY_SHORT_COLUMN_RATIO 2048u

/* Preamble + header length announced by the first n bytes (0 when they do not announce one that
 * qm_npy_header_parse could accept; it then reports why from the preamble alone). */
static uint64_t header_extent(const unsigned char *b, size_t n)
{
    if (n < 10 || memcmp(b, npy_magic, 6) != 0 || b[7] != 0 || b[6] < 1 || b[6] > 3)
        return 0;
    const size_t pre = b[6] == 1 ? 10 : 12;
    if (n < pre)
        return 0;
    uint64_t hlen = (uint64_t)b[8] | ((uint64_t)b[9] << 8);
    if (pre == 12)
        hlen |= ((uint64_t)b[10] << 16) | ((uint64_t)b[11] << 24);
    return hlen > QM_NPY_MAX_HEADER_BYTES ? 0 : pre + hlen;
}

const char *qm_input_file_kind(unsigned mode)
{
    const mode_t m = (mode_t)mode;
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

qm_code qm_input_file_open(const char *path, int *fd_out, uint64_t *size_out, qm_status *st)
{
    if (fd_out)
        *fd_out = -1;
    if (!path || !fd_out || !size_out)
        return qm_fail(st, QM_E_ARG, "input open: path, fd_out and size_out must not be NULL");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return qm_fail(st, QM_E_IO, "%s: cannot open for reading: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return qm_fail(st, QM_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return qm_fail(st, QM_E_IO, "%s: not a regular file (it is %s); write the data to a file "
                       "first", path, qm_input_file_kind((unsigned)sb.st_mode));
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        const int e = errno;
        close(fd);
        return qm_fail(st, QM_E_IO, "%s: cannot set blocking mode: %s", path, strerror(e));
    }
    *fd_out = fd;
    *size_out = (uint64_t)sb.st_size;
    return QM_OK;
}

qm_code qm_npy_open(const char *path, qm_npy_reader **out, qm_status *st)
{
    qm_code rc = QM_OK;
    int fd = -1;
    uint64_t size = 0;
    unsigned char *head = NULL;
    qm_npy_reader *r = NULL;
    if (out)
        *out = NULL;
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "npy open: path and out must not be NULL");

    if ((rc = qm_input_file_open(path, &fd, &size, st)) != QM_OK)
        goto done;
    /* the preamble first, then exactly the header it announces (never the data) */
    unsigned char pre[QM_NPY_PREAMBLE_MAX];
    size_t got = 0;
    int e = pread_full(fd, pre, size < sizeof pre ? (size_t)size : sizeof pre, 0, &got);
    if (e) {
        rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(e));
        goto done;
    }
    size_t want = got;
    const uint64_t extent = header_extent(pre, got);
    if (extent > got && extent <= size)
        want = (size_t)extent;
    head = malloc(want ? want : 1);
    if (!head) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate %zu bytes for the .npy header", path,
                     want);
        goto done;
    }
    memcpy(head, pre, got);
    if (want > got) {
        size_t more = 0;
        e = pread_full(fd, head + got, want - got, got, &more);
        if (e) {
            rc = qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(e));
            goto done;
        }
        got += more;
    }
    /* a file that shrank since fstat is parsed as the size actually read */
    qm_npy_info info;
    if ((rc = qm_npy_header_parse(path, head, got, got < want ? got : size, &info, st)) != QM_OK)
        goto done;
    const size_t plen = strlen(path);
    r = malloc(sizeof *r + plen + 1);
    if (!r) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the .npy reader", path);
        goto done;
    }
    memcpy(r->path, path, plen + 1);
    r->fd = fd;
    r->info = info;
    r->rows = info.n_samples;
    r->cols = info.shape[info.ndim == 2 ? 1 : 0];
    r->transposed = info.fortran_order && r->rows > 1 && r->cols > 1;
    r->block_bytes = QM_NPY_BLOCK_BYTES;
    fd = -1; /* owned by the reader now */
    *out = r;

done:
    free(head);
    if (fd >= 0)
        close(fd);
    return rc;
}

const qm_npy_info *qm_npy_reader_info(const qm_npy_reader *reader)
{
    return reader ? &reader->info : NULL;
}

/* pread elements [elem, elem + n) of the file (physical, in file order) into buf; the messages
 * name the caller's element range [first, first + count). */
static qm_code read_elems(const qm_npy_reader *r, void *buf, uint64_t elem, uint64_t n,
                          uint64_t first, uint64_t count, qm_status *st)
{
    const uint64_t item = qm_dtype_size(r->info.dtype);
    const uint64_t bytes = n * item;
    size_t got = 0;
    const int e = pread_full(r->fd, buf, (size_t)bytes, r->info.data_offset + elem * item, &got);
    if (e)
        return qm_fail(st, QM_E_IO, "%s: cannot read elements [%llu, %llu): %s", r->path,
                       (unsigned long long)first, (unsigned long long)(first + count),
                       strerror(e));
    if (got != bytes)
        return qm_fail(st, QM_E_IO,
                       "%s: unexpected end of file reading elements [%llu, %llu) (got %zu of %llu "
                       "bytes); the file shrank after it was opened",
                       r->path, (unsigned long long)first, (unsigned long long)(first + count), got,
                       (unsigned long long)bytes);
    return QM_OK;
}

static void copy_elem(unsigned char *dst, const unsigned char *src, uint64_t item)
{
    if (item == 8)
        memcpy(dst, src, 8);
    else
        memcpy(dst, src, 4);
}

/* The file column of view column c (the dropped column skipped). */
static uint64_t file_col(const qm_npy_reader *r, uint64_t c)
{
    return r->info.dropped_column >= 0 && c >= (uint64_t)r->info.dropped_column ? c + 1 : c;
}

/* C-order bytes with a dropped column: whole rows in blocks, or row pieces straight into dst when
 * one row is larger than a block. Rows r0..r1 of the view; [c0 of r0, cl of r1] inclusive. */
static qm_code read_c_dropped(const qm_npy_reader *r, uint64_t first, uint64_t count,
                              unsigned char *dst, qm_status *st)
{
    const uint64_t item = qm_dtype_size(r->info.dtype), F = r->info.n_features, cols = r->cols;
    const uint64_t drop = (uint64_t)r->info.dropped_column;
    const uint64_t last = first + count - 1, r0 = first / F, r1 = last / F;
    qm_code rc = QM_OK;
    if (cols * item > r->block_bytes) {
        for (uint64_t row = r0; row <= r1 && rc == QM_OK; ++row) {
            const uint64_t cs = row == r0 ? first % F : 0, ce = row == r1 ? last % F + 1 : F;
            /* view [cs, ce) is file [cs, min(ce, drop)) then file [max(cs, drop) + 1, ce + 1) */
            unsigned char *d = dst + (row * F + cs - first) * item;
            if (cs < drop) {
                const uint64_t n = (ce < drop ? ce : drop) - cs;
                rc = read_elems(r, d, row * cols + cs, n, first, count, st);
                d += n * item;
            }
            if (rc == QM_OK && ce > drop) {
                const uint64_t s = cs > drop ? cs : drop;
                rc = read_elems(r, d, row * cols + s + 1, ce - s, first, count, st);
            }
        }
        return rc;
    }
    const uint64_t block_rows = r->block_bytes / (cols * item);
    const uint64_t buf_bytes = (r1 - r0 + 1 < block_rows ? r1 - r0 + 1 : block_rows) * cols * item;
    unsigned char *buf = malloc((size_t)buf_bytes);
    if (!buf)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the read buffer (%llu bytes)", r->path,
                       (unsigned long long)buf_bytes);
    for (uint64_t ra = r0; ra <= r1 && rc == QM_OK; ra += block_rows) {
        const uint64_t rb = r1 + 1 - ra < block_rows ? r1 + 1 : ra + block_rows;
        if ((rc = read_elems(r, buf, ra * cols, (rb - ra) * cols, first, count, st)) != QM_OK)
            break;
        for (uint64_t row = ra; row < rb; ++row) {
            const uint64_t cs = row == r0 ? first % F : 0, ce = row == r1 ? last % F + 1 : F;
            const unsigned char *src = buf + (row - ra) * cols * item;
            unsigned char *d = dst + (row * F + cs - first) * item;
            if (cs < drop) {
                const uint64_t n = (ce < drop ? ce : drop) - cs;
                memcpy(d, src + cs * item, (size_t)(n * item));
                d += n * item;
            }
            if (ce > drop) {
                const uint64_t s = cs > drop ? cs : drop;
                memcpy(d, src + (s + 1) * item, (size_t)((ce - s) * item));
            }
        }
    }
    free(buf);
    return rc;
}

/* Fortran-order bytes (file element (row, col) at col * rows + row): the view's rows r0..r1 are
 * read in tiles and transposed into dst. Short columns: whole columns, many per pread. Long ones:
 * a tile of rows [ra, rb) x view columns [ca, cb), one pread per column segment, the tile's rows
 * chosen so that each segment is as long as the block allows. */
static qm_code read_fortran(const qm_npy_reader *r, uint64_t first, uint64_t count,
                            unsigned char *dst, qm_status *st)
{
    const uint64_t item = qm_dtype_size(r->info.dtype), F = r->info.n_features, rows = r->rows;
    const uint64_t last = first + count - 1, r0 = first / F, r1 = last / F;
    const uint64_t span = r1 - r0 + 1;
    /* the view columns any row of the range needs */
    const uint64_t ca0 = r0 == r1 ? first % F : 0, cb0 = r0 == r1 ? last % F + 1 : F;
    const uint64_t cap = r->block_bytes / item ? r->block_bytes / item : 1; /* per block */
    /* whole columns when they are short, or when the range covers half the rows or more (reading
     * at most twice the bytes needed, in large preads) and a column fits half a block */
    const int whole = rows * item <= r->block_bytes / NPY_SHORT_COLUMN_RATIO ||
                      (span * 2 >= rows && rows <= cap / 2);
    const uint64_t tile_rows = whole ? span : span < cap ? span : cap;
    uint64_t tile_cols = whole ? cap / rows : cap / tile_rows;
    if (tile_cols == 0)
        tile_cols = 1;
    if (tile_cols > cb0 - ca0)
        tile_cols = cb0 - ca0;
    /* whole columns: + the dropped column when it falls inside a tile */
    const uint64_t buf_elems = whole ? (tile_cols + 1) * rows : tile_cols * tile_rows;
    unsigned char *buf = malloc((size_t)(buf_elems * item));
    if (!buf)
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the read buffer (%llu bytes)", r->path,
                       (unsigned long long)(buf_elems * item));
    qm_code rc = QM_OK;
    for (uint64_t ra = r0; ra <= r1 && rc == QM_OK; ra += tile_rows) {
        const uint64_t rb = r1 + 1 - ra < tile_rows ? r1 + 1 : ra + tile_rows, nr = rb - ra;
        for (uint64_t ca = ca0; ca < cb0 && rc == QM_OK; ca += tile_cols) {
            const uint64_t cb = cb0 - ca < tile_cols ? cb0 : ca + tile_cols;
            const uint64_t fa = file_col(r, ca), fb = file_col(r, cb - 1) + 1;
            if (whole) { /* file columns [fa, fb), all rows: one pread */
                rc = read_elems(r, buf, fa * rows, (fb - fa) * rows, first, count, st);
            } else { /* column c's rows [ra, rb) at buf[(c - ca) * nr] */
                for (uint64_t c = ca; c < cb && rc == QM_OK; ++c)
                    rc = read_elems(r, buf + (c - ca) * nr * item, file_col(r, c) * rows + ra, nr,
                                    first, count, st);
            }
            if (rc != QM_OK)
                break;
            for (uint64_t row = ra; row < rb; ++row) {
                uint64_t cs = row == r0 ? first % F : 0, ce = row == r1 ? last % F + 1 : F;
                cs = cs > ca ? cs : ca;
                ce = ce < cb ? ce : cb;
                unsigned char *d = dst + (row * F + cs - first) * item;
                for (uint64_t c = cs; c < ce; ++c, d += item) {
                    const uint64_t at = whole ? (file_col(r, c) - fa) * rows + row
                                              : (c - ca) * nr + (row - ra);
                    copy_elem(d, buf + at * item, item);
                }
            }
        }
    }
    free(buf);
    return rc;
}

qm_code qm_npy_read_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                          qm_status *st)
{
    if (!reader)
        return qm_fail(st, QM_E_ARG, "npy read: reader must not be NULL");
    const qm_npy_info *in = &reader->info;
    if (first_elem > in->n_elems || count > in->n_elems - first_elem)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s: read of elements [%llu, %llu + %llu) is outside the array's %llu "
                       "elements",
                       reader->path, (unsigned long long)first_elem, (unsigned long long)first_elem,
                       (unsigned long long)count, (unsigned long long)in->n_elems);
    if (count == 0)
        return QM_OK;
    if (!dst)
        return qm_fail(st, QM_E_ARG, "%s: npy read: dst must not be NULL", reader->path);
    const uint64_t item = qm_dtype_size(in->dtype);
    const uint64_t bytes = count * item;
    if (bytes > SIZE_MAX)
        return qm_fail(st, QM_E_ARG, "%s: npy read of %llu bytes is larger than this host's "
                       "address space", reader->path, (unsigned long long)bytes);
    if (reader->transposed)
        return read_fortran(reader, first_elem, count, dst, st);
    if (in->dropped_column >= 0)
        return read_c_dropped(reader, first_elem, count, dst, st);
    return read_elems(reader, dst, first_elem, count, first_elem, count, st);
}

qm_code qm_npy_reader_set_block_bytes(qm_npy_reader *reader, uint64_t block_bytes, qm_status *st)
{
    if (!reader || block_bytes == 0)
        return qm_fail(st, QM_E_ARG, "npy block bytes: reader must not be NULL and the block must "
                       "not be 0 bytes");
    reader->block_bytes = block_bytes;
    return QM_OK;
}

qm_code qm_npy_reader_drop_column(qm_npy_reader *reader, uint64_t column, qm_status *st)
{
    if (!reader)
        return qm_fail(st, QM_E_ARG, "npy drop column: reader must not be NULL");
    qm_npy_info *in = &reader->info;
    return qm_input_drop_column(reader->path, "npy", in->ndim, in->shape, reader->cols, column,
                                &in->dropped_column, &in->n_features, &in->n_elems, st);
}

qm_code qm_input_drop_column(const char *subject, const char *what, int ndim,
                             const uint64_t shape[2], uint64_t cols, uint64_t column,
                             long *dropped, uint64_t *n_features, uint64_t *n_elems, qm_status *st)
{
    if (*dropped >= 0)
        return qm_fail(st, QM_E_ARG, "%s: %s drop column: column %ld was already dropped",
                       subject, what, *dropped);
    if (ndim != 2)
        return qm_fail(st, QM_E_INPUT,
                       "%s: cannot drop column %llu of a 1-D array (shape (%llu,)): it is one "
                       "sample with no columns; save a 2-D (samples, features) array to drop a "
                       "label column",
                       subject, (unsigned long long)column, (unsigned long long)shape[0]);
    if (column >= cols)
        return qm_fail(st, QM_E_INPUT, "%s: drop column %llu is out of range (the file has %llu "
                       "columns, indices 0..%llu)", subject, (unsigned long long)column,
                       (unsigned long long)cols, (unsigned long long)(cols - 1));
    if (cols == 1)
        return qm_fail(st, QM_E_INPUT, "%s: no feature columns left after dropping column %llu "
                       "(the file has 1 column)", subject, (unsigned long long)column);
    *dropped = (long)column;
    *n_features = cols - 1;
    *n_elems = shape[0] * *n_features;
    return QM_OK;
}

void qm_npy_close(qm_npy_reader *reader)
{
    if (!reader)
        return;
    close(reader->fd);
    free(reader);
}

/* ---- which reader a file needs --------------------------------------------------------------- */

qm_code qm_input_format_query(const char *path, qm_input_format *out, qm_status *st)
{
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "input format: path and out must not be NULL");
    int fd = -1;
    uint64_t size = 0;
    qm_code rc = qm_input_file_open(path, &fd, &size, st);
    if (rc != QM_OK)
        return rc;
    unsigned char b[8];
    size_t got = 0;
    const int e = pread_full(fd, b, sizeof b, 0, &got);
    close(fd);
    if (e)
        return qm_fail(st, QM_E_IO, "%s: cannot read: %s", path, strerror(e));
    /* the content decides; a name ending in ".npy" only picks which error a file that is no
     * .npy gets: "not a .npy file: bad magic ..." rather than a CSV parse error */
    const size_t plen = strlen(path);
    const bool npy_name = plen >= 4 && strcasecmp(path + plen - 4, ".npy") == 0;
    const bool h5_name = (plen >= 3 && strcasecmp(path + plen - 3, ".h5") == 0) ||
                         (plen >= 5 && strcasecmp(path + plen - 5, ".hdf5") == 0);
    if ((got >= sizeof npy_magic && memcmp(b, npy_magic, sizeof npy_magic) == 0) || npy_name)
        *out = QM_INPUT_NPY;
    else if ((got == sizeof b && memcmp(b, hdf5_magic, sizeof hdf5_magic) == 0) || h5_name)
        *out = QM_INPUT_HDF5;
    else if (got >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        *out = QM_INPUT_CSV_GZIP;
    else
        *out = QM_INPUT_CSV;
    return QM_OK;
}
