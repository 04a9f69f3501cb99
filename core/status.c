#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* status.c — the status model: code names, failure helpers, size/rate/time formatting, and the
 * "did you mean" distance shared by the scenario loader and the command line.
 *
 * In: codes and printf-style messages from whichever function detects a failure.
 * Out: a filled qm_status (fixed size: never allocates, so it works when memory is gone).
 */
#include "status_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const code_names[QM_CODE_COUNT_] = {
    [QM_OK] = "OK",
    [QM_E_ARG] = "E-ARG",
    [QM_E_NOMEM] = "E-NOMEM",
    [QM_E_BOUNDS] = "E-BOUNDS",
    [QM_E_BACKEND] = "E-BACKEND",
    [QM_E_UNSUPPORTED] = "E-UNSUPPORTED",
    [QM_E_IO] = "E-IO",
    [QM_E_DTYPE] = "E-DTYPE",
    [QM_E_INTERNAL] = "E-INTERNAL",
    [QM_E_QUBITS] = "E-QUBITS",
    [QM_E_CAPACITY] = "E-CAPACITY",
    [QM_E_NOT_POW2] = "E-NOT-POW2",
    [QM_E_SHARDS] = "E-SHARDS",
    [QM_E_NO_GATHER] = "E-NO-GATHER",
    [QM_E_POLICY] = "E-POLICY",
    [QM_E_INPUT] = "E-INPUT",
    [QM_E_YAML_SYNTAX] = "E-YAML-SYNTAX",
    [QM_E_SCHEMA_VERSION] = "E-SCHEMA-VERSION",
    [QM_E_UNKNOWN_KEY] = "E-UNKNOWN-KEY",
    [QM_E_DUP_KEY] = "E-DUP-KEY",
    [QM_E_MERGE_KEY] = "E-MERGE-KEY",
    [QM_E_MISSING_FIELD] = "E-MISSING-FIELD",
    [QM_E_TYPE] = "E-TYPE",
    [QM_E_DUP_ID] = "E-DUP-ID",
    [QM_E_UNKNOWN_REF] = "E-UNKNOWN-REF",
    [QM_E_SELF_LINK] = "E-SELF-LINK",
    [QM_E_UNIT] = "E-UNIT",
    [QM_E_RANGE] = "E-RANGE",
    [QM_E_RESERVE] = "E-RESERVE",
    [QM_E_ENUM] = "E-ENUM",
    [QM_E_NUMA] = "E-NUMA",
    [QM_E_CROSS_HOST_LINK] = "E-CROSS-HOST-LINK",
    [QM_E_RANK] = "E-RANK",
    [QM_E_DISCONNECTED] = "E-DISCONNECTED",
    [QM_E_NUMERIC] = "E-NUMERIC",
    [QM_E_OUTPUT] = "E-OUTPUT",
    [QM_E_INTERRUPTED] = "E-INTERRUPTED",
};

const char *qm_code_name(qm_code code)
{
    if ((int)code < 0 || code >= QM_CODE_COUNT_ || !code_names[code])
        return "E-?";
    return code_names[code];
}

void qm_status_clear(qm_status *st)
{
    if (!st)
        return;
    st->code = QM_OK;
    st->backend_code = 0;
    st->file[0] = '\0';
    st->line = st->col = 0;
    st->msg[0] = '\0';
}

static void one_line(char *s)
{
    for (; *s; ++s)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

QM_PRINTF(4, 0)
static qm_code vfail(qm_status *st, qm_code code, int backend_code, const char *fmt, va_list ap)
{
    if (!st)
        return code;
    st->code = code;
    st->backend_code = backend_code;
    st->file[0] = '\0'; /* a new failure: any location is attached afterwards (qm_status_locate) */
    st->line = st->col = 0;
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    one_line(st->msg);
    return code;
}

qm_code qm_fail(qm_status *st, qm_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(st, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

qm_code qm_fail_backend(qm_status *st, qm_code code, int backend_code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(st, code, backend_code, fmt, ap);
    va_end(ap);
    return code;
}

qm_code qm_status_prefix(qm_status *st, const char *fmt, ...)
{
    if (!st)
        return QM_OK;
    char head[QM_STATUS_MSG_BYTES];
    char old[QM_STATUS_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, st->msg, sizeof old);
    /* head ": " old, truncated to the message size */
    size_t cap = sizeof st->msg - 1, n = 0;
    for (const char *parts[3] = {head, ": ", old}, **p = parts; p < parts + 3; ++p)
        for (const char *c = *p; *c && n < cap; ++c)
            st->msg[n++] = *c;
    st->msg[n] = '\0';
    one_line(st->msg);
    return st->code;
}

void qm_status_locate(qm_status *st, const char *file, int line, int col)
{
    if (!st)
        return;
    snprintf(st->file, sizeof st->file, "%s", file ? file : "");
    st->line = line;
    st->col = col;
}

const char *qm_status_format(const qm_status *st, char *buf, size_t buf_bytes)
{
    if (!buf || buf_bytes == 0)
        return buf;
    if (!st) {
        snprintf(buf, buf_bytes, "error[E-ARG]: no status");
        return buf;
    }
    if (st->file[0])
        snprintf(buf, buf_bytes, "%s:%d:%d: error[%s]: %s", st->file, st->line, st->col,
                 qm_code_name(st->code), st->msg);
    else
        snprintf(buf, buf_bytes, "error[%s]: %s", qm_code_name(st->code), st->msg);
    return buf;
}

const char *qm_format_bytes(uint64_t bytes, char *buf, size_t buf_bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, buf_bytes, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    snprintf(buf, buf_bytes, "%.2f %s", v, units[u]);
    return buf;
}

const char *qm_format_rate(double bytes_per_s, char *buf, size_t buf_bytes)
{
    if (!(bytes_per_s >= 0) || isinf(bytes_per_s)) {
        snprintf(buf, buf_bytes, "%g B/s", bytes_per_s);
        return buf;
    }
    if (bytes_per_s >= 1e12)
        snprintf(buf, buf_bytes, "%.2f TB/s", bytes_per_s / 1e12);
    else if (bytes_per_s >= 1e9)
        snprintf(buf, buf_bytes, "%.1f GB/s", bytes_per_s / 1e9);
    else if (bytes_per_s >= 1e6)
        snprintf(buf, buf_bytes, "%.1f MB/s", bytes_per_s / 1e6);
    else
        snprintf(buf, buf_bytes, "%.0f B/s", bytes_per_s);
    return buf;
}

const char *qm_format_seconds(double s, char *buf, size_t buf_bytes)
{
    if (!(s >= 0) || isinf(s))
        snprintf(buf, buf_bytes, "%g s", s);
    else if (s >= 1.0)
        snprintf(buf, buf_bytes, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, buf_bytes, "%.3f ms", s * 1e3);
    else if (s >= 1e-6)
        snprintf(buf, buf_bytes, "%.2f us", s * 1e6);
    else
        snprintf(buf, buf_bytes, "%.0f ns", s * 1e9);
    return buf;
}

size_t qm_dtype_size(qm_dtype dtype)
{
    switch (dtype) {
    case QM_DTYPE_FLOAT32: return 4;
    case QM_DTYPE_FLOAT64: return 8;
    case QM_DTYPE_COMPLEX64: return 8;
    case QM_DTYPE_COMPLEX128: return 16;
    }
    return 0;
}

const char *qm_dtype_name(qm_dtype dtype)
{
    switch (dtype) {
    case QM_DTYPE_FLOAT32: return "float32";
    case QM_DTYPE_FLOAT64: return "float64";
    case QM_DTYPE_COMPLEX64: return "complex64";
    case QM_DTYPE_COMPLEX128: return "complex128";
    }
    return NULL;
}

qm_code qm_dtype_parse(const char *text, qm_dtype *out, qm_status *st)
{
    if (!text || !out)
        return qm_fail(st, QM_E_ARG, "dtype: text and out must not be NULL");
    for (int d = QM_DTYPE_FLOAT32; d <= QM_DTYPE_COMPLEX128; ++d) {
        if (strcmp(text, qm_dtype_name((qm_dtype)d)) == 0) {
            *out = (qm_dtype)d;
            return QM_OK;
        }
    }
    return qm_fail(st, QM_E_DTYPE,
                   "dtype: unknown dtype '%.64s'; use float32, float64, complex64 or complex128",
                   text);
}

const char *qm_policy_name(qm_policy p)
{
    static const char *const names[QM_POLICY_COUNT_] = {"auto", "single", "equal", "weighted",
                                                        "balanced", "replicated"};
    return (int)p >= 0 && p < QM_POLICY_COUNT_ ? names[p] : NULL;
}

const char *qm_encoding_name(qm_encoding e)
{
    static const char *const names[QM_ENCODING_COUNT_] = {"amplitude", "angle", "basis", "phase",
                                                          "iqp", "iqp-z"};
    return (int)e >= 0 && e < QM_ENCODING_COUNT_ ? names[e] : NULL;
}

uint64_t qm_encoding_features(qm_encoding e, unsigned n)
{
    if (n > 63)
        return 0;
    switch (e) {
    case QM_ENCODING_AMPLITUDE: return (uint64_t)1 << n;
    case QM_ENCODING_ANGLE:
    case QM_ENCODING_PHASE:
    case QM_ENCODING_IQP_Z: return n;
    case QM_ENCODING_BASIS: return 1;
    case QM_ENCODING_IQP: return (uint64_t)n + (uint64_t)n * (n - (n > 0)) / 2;
    case QM_ENCODING_COUNT_: break;
    }
    return 0;
}

unsigned qm_encoding_qubits(qm_encoding e, uint64_t f)
{
    switch (e) {
    case QM_ENCODING_AMPLITUDE:
        return f == 0 ? 0 : f <= 2 ? 1 : (unsigned)(64 - __builtin_clzll(f - 1));
    case QM_ENCODING_ANGLE:
    case QM_ENCODING_PHASE:
    case QM_ENCODING_IQP_Z: return f <= 63 ? (unsigned)f : 0;
    case QM_ENCODING_IQP:
        for (unsigned n = 1; n <= 63; ++n)
            if (qm_encoding_features(e, n) == f)
                return n;
        return 0;
    case QM_ENCODING_BASIS:
    case QM_ENCODING_COUNT_: break;
    }
    return 0;
}

void qm_encoding_fit_phrase(qm_encoding e, uint64_t f, char *buf, size_t n)
{
    if (e != QM_ENCODING_IQP) {
        snprintf(buf, n, "one value per qubit: at most 63");
        return;
    }
    unsigned q = 1;
    while (q < 63 && qm_encoding_features(e, q + 1) < f)
        ++q;
    const uint64_t lo = qm_encoding_features(e, q);
    if (q < 63 && f > lo)
        snprintf(buf, n, "n qubits take n + n(n-1)/2 values: %llu for %u, %llu for %u",
                 (unsigned long long)lo, q, (unsigned long long)qm_encoding_features(e, q + 1),
                 q + 1);
    else
        snprintf(buf, n, "n qubits take n + n(n-1)/2 values: at most %llu, for 63",
                 (unsigned long long)lo);
}

/* Levenshtein distance, or 3 when it is more than 2 (all "did you mean" needs). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || la > lb + 2 || lb > la + 2)
        return 3;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; ++j)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; ++i) {
        cur[0] = (int)i;
        int rowmin = cur[0];
        for (size_t j = 1; j <= lb; ++j) {
            int best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
            if (best < rowmin)
                rowmin = best;
        }
        if (rowmin > 2)
            return 3;
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb] > 2 ? 3 : prev[lb];
}

bool qm_hint_closer(const char *typed, const char *cand, int *best, const char *hint)
{
    int d = edit_distance(typed, cand);
    if (d > 2 || d > *best || (size_t)d >= strlen(typed) || (size_t)d >= strlen(cand))
        return false;
    if (d == *best && (!hint || strcmp(cand, hint) >= 0))
        return false;
    *best = d;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double qm_median(double *v, size_t n)
{
    qsort(v, n, sizeof v[0], cmp_double);
    return v[n / 2];
}

double qm_clock_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static int trace_level;
static double trace_origin;

static void trace_init(void)
{
    const char *v = getenv("QM_TRACE");
    trace_level = v && strcmp(v, "1") == 0 ? 1 : v && strcmp(v, "2") == 0 ? 2 : 0;
    trace_origin = qm_clock_now_s();
}

static bool trace_on(void)
{
    pthread_once(&trace_once, trace_init);
    return trace_level > 0;
}

bool qm_tracing(void) { return trace_on(); }

bool qm_tracing_all(void) { return trace_on() && trace_level == 2; }

void qm_trace(const char *fmt, ...)
{
    if (!trace_on())
        return;
    const double t = (qm_clock_now_s() - trace_origin) * 1e3;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "qmesh trace: %10.3f ms %s\n", t, what);
}
