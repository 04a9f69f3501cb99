/* io_npy.c — `.npy` input: a strict header parser and a reader of element ranges.
 *
 * In: a path (or the first bytes of a file and its size). Out: a qm_npy_info (dtype, shape, data
 * offset) and, on demand, any element range read with pread, so that each MPI rank can read only
 * its own slice of a large file and a single process can stream it in chunks.
 * Must not: read past a buffer on arbitrary bytes (the parser only ever looks at bytes[0, n)),
 * read the data when only the header is asked for, or accept anything it cannot read exactly:
 * accepted are NumPy format 1.0/2.0/3.0, dtype f4, f8, i1..i8 or u1..u8 in either byte order,
 * C or Fortran order, 1-D or 2-D, non-empty, with exactly shape x itemsize data bytes after the
 * header (docs/io.md).
 * Ranged reads are always in the row-major order of the (samples, features) view, cut into pieces
 * of one block (8 MiB of file bytes) that a few threads read at once (read_pieces: each thread takes
 * the next piece, the calling thread works too, all are joined before the call returns): a C-order
 * piece is one pread (O_DIRECT optionally); a Fortran-order 2-D file is read by column segments (or
 * whole short columns) and transposed; a dropped label column (qm_npy_reader_drop_column) is skipped
 * in blocks of whole rows. Integer and big-endian elements go through a bounce buffer per thread
 * and are converted there (integers to float64, or exactly to 64 bits for basis indices). Every
 * path reads only the rows of the range asked for.
 * Also here: qm_input_format_query (which reader a file needs, from its magic bytes) and
 * qm_input_file_open (every input opened without blocking, regular files only).
 */
#define _GNU_SOURCE /* O_DIRECT */
#define _FILE_OFFSET_BITS 64

#include "io.h"
#include "status_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
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
/* The dtypes read, as the messages list them (descr_parse) */
#define NPY_ACCEPTED "f2, f4, f8, b1, i1, i2, i4, i8, u1, u2, u4, u8"

/* ---- small helpers --------------------------------------------------------------------------- */

/* The read fault (qm_io_read_fault_set): the countdown to the failing data pread, and its errno
 * (-1: a short read). */
static atomic_long read_fault_left;
static atomic_int read_fault_err;

void qm_io_read_fault_set(long k, int err)
{
    atomic_store(&read_fault_err, err ? err : EIO);
    atomic_store(&read_fault_left, k > 0 ? k : 0);
}

/* pread, or the injected fault when its countdown reaches this call (data reads only). */
static ssize_t pread_data(int fd, void *buf, size_t n, off_t off)
{
    if (atomic_load_explicit(&read_fault_left, memory_order_relaxed) > 0 &&
        atomic_fetch_sub(&read_fault_left, 1) == 1) {
        const int e = atomic_load(&read_fault_err);
        if (e == -1)
            return 0; /* the end of the file, early */
        errno = e;
        return -1;
    }
    return pread(fd, buf, n, off);
}

/* Read up to n bytes at offset off, retrying on EINTR and short reads; *got is what was read
 * (short only at end of file). Returns 0 or an errno value. `data`: a data read (fault point). */
static int pread_any(int fd, void *buf, size_t n, uint64_t off, size_t *got, bool data)
{
    unsigned char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = data ? pread_data(fd, p + done, n - done, (off_t)(off + done))
                         : pread(fd, p + done, n - done, (off_t)(off + done));
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

static int pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
    return pread_any(fd, buf, n, off, got, false);
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
                               "accepted: " NPY_ACCEPTED,
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
    switch (kind) {
    case 'f': return "a float of another size";
    case 'b':
    case '?': return "a boolean of another size";
    case 'i': return "a signed integer of another size";
    case 'u': return "an unsigned integer of another size";
    case 'c': return "complex";
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

/* The accepted dtype strings: a byte order ('<' little, '>' big, '=' native = little here, '|'
 * not applicable: one-byte types only), a kind and a size: NPY_ACCEPTED (f2, float16, and b1,
 * NumPy's bool of 0 and 1, are read as float64 as the integers are: exactly). 0 when not
 * accepted. */
static int descr_parse(const char *s, size_t len, char *kind, unsigned *item, int *big)
{
    if (len != 3 || (s[0] != '<' && s[0] != '>' && s[0] != '=' && s[0] != '|'))
        return 0;
    const char k = s[1];
    const unsigned n = (unsigned)(s[2] - '0');
    const bool ok = (k == 'f' && (n == 2 || n == 4 || n == 8)) || (k == 'b' && n == 1) ||
                    ((k == 'i' || k == 'u') && (n == 1 || n == 2 || n == 4 || n == 8));
    if (!ok || (s[0] == '|' && n != 1))
        return 0;
    *kind = k;
    *item = n;
    *big = s[0] == '>' && n > 1;
    return 1;
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
    char kind = 0;
    unsigned fitem = 0;
    int big = 0;
    if (!descr_parse(d.descr, d.descr_len, &kind, &fitem, &big)) {
        char pd[48];
        return qm_fail(st, QM_E_INPUT,
                       "%s: unsupported dtype '%s' (%s; accepted: " NPY_ACCEPTED ", either byte "
                       "order); convert with a.astype('<f8')",
                       subject,
                       printable(d.descr, d.descr_len < NPY_STR_CAP ? d.descr_len : NPY_STR_CAP - 1,
                                 pd, sizeof pd),
                       descr_problem(d.descr, d.descr_len));
    }
    const qm_dtype dtype = kind == 'f' && fitem == 4 ? QM_DTYPE_FLOAT32 : QM_DTYPE_FLOAT64;
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
    const uint64_t item = fitem;
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
                       kind == 'f' && fitem > 2 ? qm_dtype_name(dtype) : d.descr,
                       (unsigned long long)data_offset);
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
    out->kind = kind;
    out->item_bytes = fitem;
    out->big_endian = big;
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
    int dfd;             /* the file opened with O_DIRECT (qm_npy_reader_set_direct), or -1 */
    qm_npy_info info;
    uint64_t rows, cols; /* the file's array as rows x cols (1-D: 1 x F) */
    int transposed;      /* Fortran order with rows > 1 and cols > 1 (else the bytes are C order) */
    uint64_t block_bytes;/* file bytes of one piece, and buffer bound of reads that are not one pread */
    int threads;         /* threads of one ranged read */
    struct qm_read_pool *pool; /* the worker threads: the reader's own, started by the first
                                  parallel read (or prepare), or a shared one (use_pool) */
    bool own_pool;       /* pool is the reader's own (closed with it) */
    bool resident;       /* the file is in the page cache (qm_npy_reader_prepare): no read-ahead advice */
    char path[];         /* for messages */
};

/* The smallest piece a range is cut into to give every thread one (when the block is larger). */
#define NPY_MIN_PIECE_BYTES ((uint64_t)1 << 20)

/* O_DIRECT alignment of file offsets, lengths and buffers (the logical block size of every common
 * filesystem is at most 4 KiB). */
#define NPY_DIRECT_ALIGN 4096u

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

qm_code qm_npy_default_threads(const char *path, int *out, qm_status *st)
{
    const char *v = getenv("QM_READ_THREADS");
    if (v && *v) {
        char *end = NULL;
        errno = 0;
        const long n = strtol(v, &end, 10);
        if (errno || *end || n < 1 || n > QM_NPY_MAX_THREADS)
            return qm_fail(st, QM_E_ARG, "%s: QM_READ_THREADS is '%.20s'; give a thread count in "
                           "[1, %d]", path, v, QM_NPY_MAX_THREADS);
        *out = (int)n;
        return QM_OK;
    }
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *out = cpus < 1 ? 1 : cpus > QM_NPY_DEFAULT_MAX_THREADS ? QM_NPY_DEFAULT_MAX_THREADS : (int)cpus;
    return QM_OK;
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
    r = calloc(1, sizeof *r + plen + 1); /* every field not set below starts zero / false */
    if (!r) {
        rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate the .npy reader", path);
        goto done;
    }
    memcpy(r->path, path, plen + 1);
    r->fd = fd;
    r->dfd = -1;
    r->pool = NULL;
    r->own_pool = true;
    r->resident = false;
    r->info = info;
    r->rows = info.n_samples;
    r->cols = info.shape[info.ndim == 2 ? 1 : 0];
    r->transposed = info.fortran_order && r->rows > 1 && r->cols > 1;
    r->block_bytes = QM_NPY_BLOCK_BYTES;
    fd = -1; /* owned by the reader now */
    (void)posix_fadvise(r->fd, (off_t)info.data_offset, 0, POSIX_FADV_SEQUENTIAL);
    if ((rc = qm_npy_default_threads(path, &r->threads, st)) == QM_OK) {
        const char *dir = getenv("QM_READ_DIRECT");
        if (dir && strcmp(dir, "1") == 0)
            rc = qm_npy_reader_set_direct(r, true, NULL, st);
        else if (dir && *dir && strcmp(dir, "0") != 0)
            rc = qm_fail(st, QM_E_ARG, "%s: QM_READ_DIRECT is '%.20s'; use 1 (O_DIRECT) or 0",
                         path, dir);
    }
    if (rc != QM_OK) {
        qm_npy_close(r);
        r = NULL;
        goto done;
    }
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
    const uint64_t item = r->info.item_bytes;
    const uint64_t bytes = n * item;
    size_t got = 0;
    const int e = pread_any(r->fd, buf, (size_t)bytes, r->info.data_offset + elem * item, &got,
                            true);
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

/* read_elems through O_DIRECT: the aligned file bytes around the elements into `al` (aligned,
 * al_bytes >= the elements' bytes + 2 * NPY_DIRECT_ALIGN), window by window, then copied to buf.
 * A read the filesystem refuses (EINVAL) is done through the page cache instead. */
static qm_code read_elems_direct(const qm_npy_reader *r, unsigned char *buf, uint64_t elem,
                                 uint64_t n, unsigned char *al, uint64_t al_bytes, uint64_t first,
                                 uint64_t count, qm_status *st)
{
    const uint64_t item = r->info.item_bytes, A = NPY_DIRECT_ALIGN;
    const uint64_t off = r->info.data_offset + elem * item, bytes = n * item;
    const uint64_t a0 = off / A * A, a1 = (off + bytes + A - 1) / A * A;
    if (a1 - a0 > al_bytes)
        return read_elems(r, buf, elem, n, first, count, st);
    size_t got = 0;
    const int e = pread_any(r->dfd, al, (size_t)(a1 - a0), a0, &got, true);
    if (e == EINVAL)
        return read_elems(r, buf, elem, n, first, count, st);
    if (e)
        return qm_fail(st, QM_E_IO, "%s: cannot read elements [%llu, %llu): %s", r->path,
                       (unsigned long long)first, (unsigned long long)(first + count),
                       strerror(e));
    if (got < off + bytes - a0)
        return qm_fail(st, QM_E_IO,
                       "%s: unexpected end of file reading elements [%llu, %llu) (got %llu of %llu "
                       "bytes); the file shrank after it was opened",
                       r->path, (unsigned long long)first, (unsigned long long)(first + count),
                       (unsigned long long)(got > off - a0 ? got - (off - a0) : 0),
                       (unsigned long long)bytes);
    memcpy(buf, al + (off - a0), (size_t)bytes);
    return QM_OK;
}

static void copy_elem(unsigned char *dst, const unsigned char *src, uint64_t item)
{
    switch (item) {
    case 8: memcpy(dst, src, 8); break;
    case 4: memcpy(dst, src, 4); break;
    case 2: memcpy(dst, src, 2); break;
    default: *dst = *src; break;
    }
}

/* The file column of view column c (the dropped column skipped). */
static uint64_t file_col(const qm_npy_reader *r, uint64_t c)
{
    return r->info.dropped_column >= 0 && c >= (uint64_t)r->info.dropped_column ? c + 1 : c;
}

/* C-order bytes with a dropped column: whole rows in blocks, or row pieces straight into dst when
 * one row is larger than a block. Rows r0..r1 of the view; [c0 of r0, cl of r1] inclusive. */
static qm_code read_c_dropped(const qm_npy_reader *r, uint64_t first, uint64_t count,
                              unsigned char *dst, uint64_t mf, uint64_t mc, qm_status *st)
{
    const uint64_t item = r->info.item_bytes, F = r->info.n_features, cols = r->cols;
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
                rc = read_elems(r, d, row * cols + cs, n, mf, mc, st);
                d += n * item;
            }
            if (rc == QM_OK && ce > drop) {
                const uint64_t s = cs > drop ? cs : drop;
                rc = read_elems(r, d, row * cols + s + 1, ce - s, mf, mc, st);
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
        if ((rc = read_elems(r, buf, ra * cols, (rb - ra) * cols, mf, mc, st)) != QM_OK)
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
                            unsigned char *dst, uint64_t mf, uint64_t mc, qm_status *st)
{
    const uint64_t item = r->info.item_bytes, F = r->info.n_features, rows = r->rows;
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
                rc = read_elems(r, buf, fa * rows, (fb - fa) * rows, mf, mc, st);
            } else { /* column c's rows [ra, rb) at buf[(c - ca) * nr] */
                for (uint64_t c = ca; c < cb && rc == QM_OK; ++c)
                    rc = read_elems(r, buf + (c - ca) * nr * item, file_col(r, c) * rows + ra, nr,
                                    mf, mc, st);
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

/* ---- pieces and threads ---------------------------------------------------------------------- */

/* The file's elements [first, first + count) of the view, as they lie in the file (item_bytes
 * each, file byte order), into raw. al: an aligned buffer for O_DIRECT (NULL: page cache). */
static qm_code read_raw(const qm_npy_reader *r, uint64_t first, uint64_t count, unsigned char *raw,
                        unsigned char *al, uint64_t al_bytes, uint64_t mf, uint64_t mc,
                        qm_status *st)
{
    if (r->transposed)
        return read_fortran(r, first, count, raw, mf, mc, st);
    if (r->info.dropped_column >= 0)
        return read_c_dropped(r, first, count, raw, mf, mc, st);
    if (al)
        return read_elems_direct(r, raw, first, count, al, al_bytes, mf, mc, st);
    return read_elems(r, raw, first, count, mf, mc, st);
}

static uint64_t load_be(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i)
        v = v << 8 | p[i];
    return v;
}

static uint64_t load_le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* An IEEE 754 binary16 value as a double (exact: every half is a double). */
static double half_to_double(uint16_t h)
{
    const unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    const double v = e == 0    ? ldexp((double)m, -24)                /* zero and subnormals */
                     : e == 31 ? (m ? NAN : INFINITY)
                               : ldexp((double)(m | 0x400u), (int)e - 25); /* (1024 + m) 2^(e-25) */
    return (h >> 15) ? -v : v;
}

/* Whether a read goes through convert(): exact integers, integers and booleans to double, half
 * floats, big-endian bytes. */
static bool needs_conv(const qm_npy_info *in, bool exact)
{
    return exact || in->kind != 'f' || in->item_bytes == 2 || in->big_endian;
}

/* n raw elements to what the read delivers: `exact` 64-bit integers (sign-extended for 'i'), or
 * info.dtype (floats swapped when big-endian, integers converted to double). */
static void convert(const qm_npy_reader *r, const unsigned char *raw, uint64_t n, bool exact,
                    unsigned char *out)
{
    const unsigned fi = r->info.item_bytes;
    const bool big = r->info.big_endian;
    const char kind = r->info.kind;
    for (uint64_t i = 0; i < n; ++i) {
        const unsigned char *p = raw + i * fi;
        uint64_t v = big ? load_be(p, fi) : load_le(p, fi);
        if (kind == 'f') {
            if (fi == 2) {
                const double d = half_to_double((uint16_t)v);
                memcpy(out + i * 8, &d, 8);
            } else if (fi == 4) {
                const uint32_t w = (uint32_t)v;
                memcpy(out + i * 4, &w, 4);
            } else {
                memcpy(out + i * 8, &v, 8);
            }
            continue;
        }
        if (kind == 'b')
            v = v != 0; /* NumPy's True is 1; any other byte but 0 is true too */
        if (kind == 'i' && fi < 8 && (v >> (8 * fi - 1)) & 1u)
            v |= ~(uint64_t)0 << (8 * fi); /* sign-extend */
        if (exact) {
            memcpy(out + i * 8, &v, 8);
        } else {
            const double d = kind == 'i' ? (double)(int64_t)v : (double)v;
            memcpy(out + i * 8, &d, 8);
        }
    }
}

static qm_code range_check(const qm_npy_reader *reader, uint64_t first_elem, uint64_t count,
                           const void *dst, size_t out_item, qm_status *st);

typedef struct npy_job {
    const qm_npy_reader *r;
    uint64_t first, count;   /* the caller's range */
    unsigned char *dst;
    size_t out_item;         /* bytes per delivered element */
    bool exact, conv;        /* deliver exact integers; convert through a bounce buffer */
    uint64_t piece;          /* elements per piece; pieces start at multiples of it */
    uint64_t n_pieces;
    atomic_uint_fast64_t next;
    atomic_bool stop;
    pthread_mutex_t mu;
    uint64_t err_piece;      /* the lowest failed piece, and its status */
    qm_code rc;
    qm_status err;
    /* the pool's side, under the pool's mu */
    struct npy_job *next_job;/* the pool's queue of jobs with pieces left to take */
    int max_workers;         /* pool workers that may work on it at once */
    int workers;             /* pool workers in job_work on it */
    int active;              /* threads in job_work on it (workers and the submitting caller) */
    bool done;               /* every piece taken (or the job stopped) and nobody in job_work */
} npy_job;

/* One thread: take pieces until none is left or one failed. */
static void job_work(npy_job *j)
{
    const qm_npy_reader *r = j->r;
    const uint64_t fi = r->info.item_bytes, b0 = j->first / j->piece;
    const bool direct = r->dfd >= 0 && !r->transposed && r->info.dropped_column < 0;
    unsigned char *bounce = NULL, *al = NULL;
    const uint64_t al_bytes = j->piece * fi + 2 * NPY_DIRECT_ALIGN;
    qm_status st;
    qm_status_clear(&st);
    qm_code rc = QM_OK;
    uint64_t i = 0;
    if (j->conv && !(bounce = malloc((size_t)(j->piece * fi))))
        rc = qm_fail(&st, QM_E_NOMEM, "%s: cannot allocate the read buffer (%llu bytes)", r->path,
                     (unsigned long long)(j->piece * fi));
    if (rc == QM_OK && direct && posix_memalign((void **)&al, NPY_DIRECT_ALIGN, (size_t)al_bytes))
        al = NULL; /* no aligned buffer: this thread reads through the page cache */
    while (rc == QM_OK && !atomic_load(&j->stop) &&
           (i = atomic_fetch_add(&j->next, 1)) < j->n_pieces) {
        const uint64_t lo0 = (b0 + i) * j->piece, hi0 = lo0 + j->piece, end = j->first + j->count;
        const uint64_t lo = lo0 > j->first ? lo0 : j->first, hi = hi0 < end ? hi0 : end;
        unsigned char *out = j->dst + (lo - j->first) * j->out_item;
        rc = read_raw(r, lo, hi - lo, j->conv ? bounce : out, al, al_bytes, j->first, j->count,
                      &st);
        if (rc == QM_OK && j->conv)
            convert(r, bounce, hi - lo, j->exact, out);
    }
    if (rc != QM_OK) {
        atomic_store(&j->stop, true);
        pthread_mutex_lock(&j->mu);
        if (j->rc == QM_OK || i < j->err_piece) {
            j->rc = rc;
            j->err = st;
            j->err_piece = i;
        }
        pthread_mutex_unlock(&j->mu);
    }
    free(bounce);
    free(al);
}

static void *job_thread(void *arg)
{
    job_work(arg);
    return NULL;
}

static bool job_has_pieces(npy_job *j)
{
    return !atomic_load(&j->stop) && atomic_load(&j->next) < j->n_pieces;
}

/* The reader's workers: started once (by the first read that needs them, grown by later ones),
 * joined by qm_npy_close. Reads are jobs in a FIFO queue: a worker takes pieces of the oldest job
 * that has pieces left and room for it (max_workers), so the workers move on to the next read as
 * soon as the pieces of the current one are all taken (not finished): a caller that submits reads
 * ahead (qm_npy_read_submit) keeps every worker busy across read boundaries, with no join per read.
 * A synchronous read (qm_npy_read_range) is a job its caller also works on, then waits for. */
typedef struct qm_read_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t tid[QM_NPY_MAX_THREADS];
    int n;                   /* workers started */
    bool quit;
    npy_job *head, *tail;    /* jobs that may still have pieces to take */
} npy_pool;

static pthread_mutex_t pool_init_mu = PTHREAD_MUTEX_INITIALIZER;

/* The oldest queued job a worker may take pieces of (dropping jobs with none left). mu held. */
static npy_job *pool_pick(npy_pool *p)
{
    npy_job *prev = NULL;
    for (npy_job *j = p->head; j;) {
        npy_job *nx = j->next_job;
        if (!job_has_pieces(j)) { /* unlink: its last pieces are being read, or it stopped */
            if (prev)
                prev->next_job = nx;
            else
                p->head = nx;
            if (p->tail == j)
                p->tail = prev;
            j->next_job = NULL;
        } else {
            if (j->workers < j->max_workers)
                return j;
            prev = j;
        }
        j = nx;
    }
    return NULL;
}

/* Remove j from the queue if it is still there. mu held. */
static void pool_unlink(npy_pool *p, npy_job *j)
{
    npy_job *prev = NULL;
    for (npy_job *q = p->head; q; prev = q, q = q->next_job)
        if (q == j) {
            if (prev)
                prev->next_job = j->next_job;
            else
                p->head = j->next_job;
            if (p->tail == j)
                p->tail = prev;
            j->next_job = NULL;
            return;
        }
}

/* A thread leaves job j (mu held): the job is done when nobody works on it and no piece is left;
 * it then leaves the queue too (its memory is the caller's again once pool_wait returns). */
static void job_leave(npy_pool *p, npy_job *j, bool worker)
{
    j->active--;
    if (worker)
        j->workers--;
    if (j->active == 0 && !job_has_pieces(j)) {
        pool_unlink(p, j);
        j->done = true;
        if (qm_tracing_all()) /* QM_TRACE=2: when each background read ends (its submit and wait
                                 are traced by the caller) */
            qm_trace("read: elements [%llu, +%llu) done", (unsigned long long)j->first,
                     (unsigned long long)j->count);
        pthread_cond_broadcast(&p->done);
    }
}

static void *pool_worker(void *arg)
{
    npy_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        npy_job *j = NULL;
        while (!p->quit && !(j = pool_pick(p)))
            pthread_cond_wait(&p->go, &p->mu);
        if (!j)
            break; /* quitting: qm_npy_close runs after every read has been waited for */
        j->workers++;
        j->active++;
        pthread_mutex_unlock(&p->mu);
        job_work(j);
        pthread_mutex_lock(&p->mu);
        job_leave(p, j, true);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Start workers up to `need` (fewer when a thread cannot start). mu held. */
static void pool_grow(npy_pool *p, int need)
{
    while (p->n < need && pthread_create(&p->tid[p->n], NULL, pool_worker, p) == 0)
        p->n++;
}

static npy_pool *pool_create(void)
{
    npy_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    return p;
}

static void pool_destroy(npy_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; ++i)
        pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Queue job j for `workers` pool workers; false when the pool has no worker to give it (it could
 * not start one), and the job is then not queued. */
static bool pool_submit(npy_pool *p, npy_job *j, int workers)
{
    if (!p || workers < 1)
        return false;
    pthread_mutex_lock(&p->mu);
    pool_grow(p, workers);
    const bool ok = p->n > 0;
    if (ok) {
        j->max_workers = workers < p->n ? workers : p->n;
        j->next_job = NULL;
        if (p->tail)
            p->tail->next_job = j;
        else
            p->head = j;
        p->tail = j;
        pthread_cond_broadcast(&p->go);
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void pool_wait(npy_pool *p, npy_job *j)
{
    pthread_mutex_lock(&p->mu);
    while (!j->done)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* Run job j on nt threads: the caller and nt - 1 workers of the pool, or threads of its own. */
static void run_job(npy_pool *p, npy_job *j, int nt)
{
    if (nt > 1 && pool_submit(p, j, nt - 1)) {
        pthread_mutex_lock(&p->mu);
        j->active++;
        pthread_mutex_unlock(&p->mu);
        job_work(j);
        pthread_mutex_lock(&p->mu);
        job_leave(p, j, false);
        pthread_mutex_unlock(&p->mu);
        pool_wait(p, j);
        return;
    }
    pthread_t tid[QM_NPY_MAX_THREADS];
    int started = 0;
    while (started + 1 < nt && pthread_create(&tid[started], NULL, job_thread, j) == 0)
        ++started; /* a thread that cannot start leaves its pieces to the others */
    job_work(j);
    for (int t = 0; t < started; ++t)
        pthread_join(tid[t], NULL);
}

/* Set up job j for [first, first + count) into dst (exact: 64-bit integers); the thread count it
 * wants, and in *pool the reader's pool when more than one thread is wanted (started by the first
 * such read, and read under the same lock: NULL otherwise, or when it cannot be made). */
/* The reader's pool, started by whoever asks first: two first reads at once start one pool, and
 * the lock also publishes it. */
static npy_pool *reader_pool(qm_npy_reader *r)
{
    pthread_mutex_lock(&pool_init_mu);
    if (!r->pool && r->own_pool)
        r->pool = pool_create();
    npy_pool *p = r->pool;
    pthread_mutex_unlock(&pool_init_mu);
    return p;
}

static int job_init(qm_npy_reader *r, npy_job *j, uint64_t first, uint64_t count, void *dst,
                    bool exact, npy_pool **pool)
{
    const qm_npy_info *in = &r->info;
    const uint64_t fi = in->item_bytes;
    *j = (npy_job){.r = r, .first = first, .count = count, .dst = dst,
                   .out_item = exact ? 8 : qm_dtype_size(in->dtype), .exact = exact,
                   .conv = needs_conv(in, exact), .rc = QM_OK};
    /* pieces of one block, or smaller so that every thread has one (an 8 MiB staging slot over 8
     * threads: 1 MiB each), but not below NPY_MIN_PIECE_BYTES unless the block is */
    uint64_t pb = r->block_bytes;
    const uint64_t share = (count * fi + (uint64_t)r->threads - 1) / (uint64_t)r->threads;
    if (share < pb)
        pb = share > NPY_MIN_PIECE_BYTES ? (share + NPY_MIN_PIECE_BYTES - 1) / NPY_MIN_PIECE_BYTES *
                                               NPY_MIN_PIECE_BYTES
                                         : NPY_MIN_PIECE_BYTES;
    pb = pb < r->block_bytes ? pb : r->block_bytes;
    j->piece = pb / fi ? pb / fi : 1;
    j->n_pieces = (first + count - 1) / j->piece - first / j->piece + 1;
    atomic_init(&j->next, 0);
    atomic_init(&j->stop, false);
    pthread_mutex_init(&j->mu, NULL);
    /* the next bytes of a sequential reader into the page cache while these are read */
    const uint64_t span = count * fi;
    if (!r->transposed && !r->resident && span >= ((uint64_t)1 << 20))
        (void)posix_fadvise(r->fd, (off_t)(in->data_offset + (first + count) * fi), (off_t)span,
                            POSIX_FADV_WILLNEED);
    uint64_t nt = (uint64_t)(r->threads > 0 ? r->threads : 1);
    nt = nt < j->n_pieces ? nt : j->n_pieces;
    *pool = NULL;
    if (nt > 1)
        *pool = reader_pool(r);
    return (int)nt;
}

static qm_code job_finish(npy_job *j, qm_status *st)
{
    pthread_mutex_destroy(&j->mu);
    if (j->rc != QM_OK && st)
        *st = j->err;
    return j->rc;
}

/* Read [first, first + count) into dst (exact: 64-bit integers) with the reader's threads. */
static qm_code read_pieces(qm_npy_reader *r, uint64_t first, uint64_t count, void *dst,
                           bool exact, qm_status *st)
{
    const qm_npy_info *in = &r->info;
    const bool conv = needs_conv(in, exact);
    if (r->threads <= 1 && !conv && r->dfd < 0) /* as it always was: the range in one call */
        return read_raw(r, first, count, dst, NULL, 0, first, count, st);
    npy_job j;
    npy_pool *pool;
    const int nt = job_init(r, &j, first, count, dst, exact, &pool);
    run_job(pool, &j, nt);
    return job_finish(&j, st);
}

struct qm_npy_read_ticket {
    npy_job job;
    npy_pool *pool;          /* the pool it is queued in; NULL: it ran in qm_npy_read_submit */
};

void qm_npy_reader_prepare(qm_npy_reader *r, bool resident)
{
    if (!r)
        return;
    r->resident = resident;
    if (r->threads <= 1)
        return;
    npy_pool *p = reader_pool(r);
    if (p) { /* every worker a submitted read may use (the submitter does not work on it) */
        pthread_mutex_lock(&p->mu);
        pool_grow(p, r->threads);
        pthread_mutex_unlock(&p->mu);
    }
}

qm_read_pool *qm_read_pool_create(int threads)
{
    npy_pool *p = pool_create();
    if (p && threads > 0) {
        pthread_mutex_lock(&p->mu);
        pool_grow(p, threads < QM_NPY_MAX_THREADS ? threads : QM_NPY_MAX_THREADS);
        pthread_mutex_unlock(&p->mu);
    }
    return p;
}

void qm_read_pool_destroy(qm_read_pool *pool) { pool_destroy(pool); }

void qm_npy_reader_use_pool(qm_npy_reader *r, qm_read_pool *pool)
{
    if (!r || !pool)
        return;
    pthread_mutex_lock(&pool_init_mu);
    npy_pool *own = r->own_pool ? r->pool : NULL; /* started by a prepare: no read uses it */
    r->pool = pool;
    r->own_pool = false;
    pthread_mutex_unlock(&pool_init_mu);
    pool_destroy(own);
}

int qm_npy_reader_workers(qm_npy_reader *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&pool_init_mu);
    npy_pool *p = r->pool;
    pthread_mutex_unlock(&pool_init_mu);
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    const int n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}

qm_code qm_npy_read_submit(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                           qm_npy_read_ticket **out, qm_status *st)
{
    if (out)
        *out = NULL;
    qm_code rc = range_check(reader, first_elem, count, dst,
                             reader ? qm_dtype_size(reader->info.dtype) : 1, st);
    if (rc != QM_OK)
        return rc;
    if (!out)
        return qm_fail(st, QM_E_ARG, "%s: read submit needs a ticket pointer", reader->path);
    qm_npy_read_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return qm_fail(st, QM_E_NOMEM, "%s: out of host memory for a read ticket", reader->path);
    if (count == 0) { /* nothing to read: a finished job */
        t->job.rc = QM_OK;
        pthread_mutex_init(&t->job.mu, NULL);
        *out = t;
        return QM_OK;
    }
    npy_pool *pool;
    const int nt = job_init(reader, &t->job, first_elem, count, dst, false, &pool);
    /* every thread of the reader is a pool worker here (the caller goes on with its own work);
     * without a pool the range is read now, by the caller and threads of its own */
    if (pool_submit(pool, &t->job, nt))
        t->pool = pool;
    else
        run_job(NULL, &t->job, nt);
    *out = t;
    return QM_OK;
}

qm_code qm_npy_read_wait(qm_npy_reader *reader, qm_npy_read_ticket *t, qm_status *st)
{
    if (!t)
        return qm_fail(st, QM_E_ARG, "npy read wait: no ticket");
    (void)reader;
    if (t->pool)
        pool_wait(t->pool, &t->job);
    qm_code rc = job_finish(&t->job, st);
    free(t);
    return rc;
}

/* The checks of both ranged reads; *done when there is nothing to read. */
static qm_code range_check(const qm_npy_reader *reader, uint64_t first_elem, uint64_t count,
                           const void *dst, size_t out_item, qm_status *st)
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
    if (count > SIZE_MAX / out_item)
        return qm_fail(st, QM_E_ARG, "%s: npy read of %llu elements is larger than this host's "
                       "address space", reader->path, (unsigned long long)count);
    return QM_OK;
}

qm_code qm_npy_read_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                          qm_status *st)
{
    qm_code rc = range_check(reader, first_elem, count, dst,
                             reader ? qm_dtype_size(reader->info.dtype) : 1, st);
    if (rc != QM_OK || count == 0)
        return rc;
    return read_pieces(reader, first_elem, count, dst, false, st);
}

qm_code qm_npy_read_int_range(qm_npy_reader *reader, uint64_t first_elem, uint64_t count,
                              uint64_t *dst, qm_status *st)
{
    qm_code rc = range_check(reader, first_elem, count, dst, 8, st);
    if (rc != QM_OK || count == 0)
        return rc;
    if (reader->info.kind == 'f')
        return qm_fail(st, QM_E_DTYPE, "%s: exact integer read of a float%u file", reader->path,
                       8 * reader->info.item_bytes);
    return read_pieces(reader, first_elem, count, dst, true, st);
}

qm_code qm_npy_reader_set_threads(qm_npy_reader *reader, int threads, qm_status *st)
{
    if (!reader || threads < 1 || threads > QM_NPY_MAX_THREADS)
        return qm_fail(st, QM_E_ARG, "npy threads: %d is not a thread count in [1, %d]", threads,
                       QM_NPY_MAX_THREADS);
    reader->threads = threads;
    return QM_OK;
}

int qm_npy_reader_threads(const qm_npy_reader *reader)
{
    return reader ? reader->threads : 0;
}

qm_code qm_npy_reader_set_direct(qm_npy_reader *reader, bool on, bool *active, qm_status *st)
{
    if (active)
        *active = false;
    if (!reader)
        return qm_fail(st, QM_E_ARG, "npy direct: reader must not be NULL");
    if (!on) {
        if (reader->dfd >= 0)
            close(reader->dfd);
        reader->dfd = -1;
        return QM_OK;
    }
    if (reader->dfd < 0) {
#ifdef O_DIRECT
        const int fd = open(reader->path, O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK | O_NOCTTY);
#else
        const int fd = -1;
#endif
        if (fd < 0)
            return QM_OK; /* the filesystem refuses O_DIRECT: the page cache it is */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || fstat(reader->fd, &b) != 0 || a.st_dev != b.st_dev ||
            a.st_ino != b.st_ino) {
            close(fd);
            return qm_fail(st, QM_E_IO, "%s: the file was replaced after it was opened (its "
                           "O_DIRECT open names another file)", reader->path);
        }
        const int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        reader->dfd = fd;
    }
    if (active)
        *active = true;
    return QM_OK;
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
    if (reader->own_pool)
        pool_destroy(reader->pool);
    if (reader->dfd >= 0)
        close(reader->dfd);
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
    const bool npz_name = plen >= 4 && strcasecmp(path + plen - 4, ".npz") == 0;
    const bool npy = got >= sizeof npy_magic && memcmp(b, npy_magic, sizeof npy_magic) == 0;
    if ((got >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) || (npz_name && !npy))
        return qm_fail(st, QM_E_INPUT, "%s: a zip archive (NumPy's .npz, or a spreadsheet) is not "
                       "an input qmesh reads; save the array as .npy (np.save('x.npy', "
                       "np.load('%.100s')['NAME'])), HDF5 or CSV", path, path);
    if (got >= 4 && memcmp(b, "PAR1", 4) == 0)
        return qm_fail(st, QM_E_INPUT, "%s: a Parquet file is not an input qmesh reads; save the "
                       "values as .npy (np.save('x.npy', pandas.read_parquet(...).to_numpy())), "
                       "HDF5 or CSV", path);
    if (npy || npy_name)
        *out = QM_INPUT_NPY;
    else if ((got == sizeof b && memcmp(b, hdf5_magic, sizeof hdf5_magic) == 0) || h5_name)
        *out = QM_INPUT_HDF5;
    else if (got >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        *out = QM_INPUT_CSV_GZIP;
    else
        *out = QM_INPUT_CSV;
    return QM_OK;
}
