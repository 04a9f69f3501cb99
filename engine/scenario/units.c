/* units.c — parse and format the dimensioned values of `qmesh/1` (see units.h for the grammar).
 *
 * In: text such as "80 GiB", "400 Gb/s", "0.9 us". Out: bytes, bytes/s, seconds, or the reverse.
 * How: one decimal scanner keeps the significant digits and a power of ten, so that sizes are
 * computed exactly in integers (a fractional size must come out as a whole number of bytes) and
 * doubles are rounded once by strtod on the whole decimal (the unit's power of ten folded into
 * the exponent); binary (2^10k) and bit (1/8) scalings are exact in binary floating point.
 * Must not: allocate, print, or accept anything but the whole text (full consumption).
 */
#include "units.h"

#include "status_internal.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the decimal scanner ---------------------------------------------------------------------- */

#define NUM_SIG_MAX 40 /* significant digits kept; more is E-RANGE */

typedef struct num {
    bool neg;
    bool nan, inf;           /* "nan", "inf", "infinity", ".nan", ".inf" in any case */
    bool too_many_digits;
    char sig[NUM_SIG_MAX + 1]; /* significant digits, no leading or trailing zeros; "" = zero */
    int n_sig;
    long exp10;              /* value = sig * 10^exp10 */
} num;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive prefix match; returns the length of word on a match, else 0. */
static size_t match_word(const char *s, const char *word)
{
    size_t i = 0;
    for (; word[i]; ++i)
        if (lower(s[i]) != word[i])
            return 0;
    return i;
}

/* Scan a decimal number at the start of s. Returns the number of characters consumed (0 when s
 * does not start with a number). */
static size_t scan_number(const char *s, num *n)
{
    memset(n, 0, sizeof *n);
    const char *p = s;
    if (*p == '+' || *p == '-')
        n->neg = *p++ == '-';
    static const char *const specials[] = {".nan", ".inf", "nan", "infinity", "inf"};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) {
        size_t len = match_word(p, specials[i]);
        if (len) {
            n->nan = strstr(specials[i], "nan") != NULL;
            n->inf = !n->nan;
            return (size_t)(p + len - s);
        }
    }
    long exp_adj = 0;
    int pending = 0, n_digits = 0;
    bool in_frac = false;
    for (;; ++p) {
        if (*p == '.' && !in_frac) {
            in_frac = true;
            continue;
        }
        if (!is_digit(*p))
            break;
        ++n_digits;
        if (in_frac)
            --exp_adj;
        if (*p == '0') {
            if (n->n_sig > 0)
                ++pending;
            continue;
        }
        if (n->n_sig + pending + 1 > NUM_SIG_MAX) {
            n->too_many_digits = true;
            pending = 0;
            continue;
        }
        for (; pending > 0; --pending)
            n->sig[n->n_sig++] = '0';
        n->sig[n->n_sig++] = *p;
    }
    if (n_digits == 0)
        return 0;
    exp_adj += pending;
    n->sig[n->n_sig] = '\0';
    if ((*p == 'e' || *p == 'E') &&
        (is_digit(p[1]) || ((p[1] == '+' || p[1] == '-') && is_digit(p[2])))) {
        ++p;
        bool eneg = false;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        long e = 0;
        for (; is_digit(*p); ++p)
            if (e < 1000000)
                e = e * 10 + (*p - '0');
        exp_adj += eneg ? -e : e;
    }
    n->exp10 = n->n_sig ? exp_adj : 0;
    return (size_t)(p - s);
}

/* The double nearest to sig * 10^(exp10 + dec), then scaled by 2^bin (exact). */
static double num_to_double(const num *n, int dec, int bin)
{
    if (n->n_sig == 0)
        return 0.0;
    char buf[NUM_SIG_MAX + 32];
    long e = n->exp10 + dec;
    if (e > 100000)
        e = 100000;
    if (e < -100000)
        e = -100000;
    snprintf(buf, sizeof buf, "%se%ld", n->sig, e);
    double v = strtod(buf, NULL);
    return ldexp(v, bin);
}

/* ---- units ------------------------------------------------------------------------------------- */

typedef struct unit {
    const char *name;
    qm_unit_dim dim;
    int dec; /* power of ten */
    int bin; /* power of two */
} unit;

static const unit units[] = {
    {"B", QM_UNIT_SIZE, 0, 0},          {"KiB", QM_UNIT_SIZE, 0, 10},
    {"MiB", QM_UNIT_SIZE, 0, 20},       {"GiB", QM_UNIT_SIZE, 0, 30},
    {"TiB", QM_UNIT_SIZE, 0, 40},       {"KB", QM_UNIT_SIZE, 3, 0},
    {"MB", QM_UNIT_SIZE, 6, 0},         {"GB", QM_UNIT_SIZE, 9, 0},
    {"TB", QM_UNIT_SIZE, 12, 0},        {"MB/s", QM_UNIT_BANDWIDTH, 6, 0},
    {"GB/s", QM_UNIT_BANDWIDTH, 9, 0},  {"TB/s", QM_UNIT_BANDWIDTH, 12, 0},
    {"GiB/s", QM_UNIT_BANDWIDTH, 0, 30}, {"Mb/s", QM_UNIT_BANDWIDTH, 6, -3},
    {"Gb/s", QM_UNIT_BANDWIDTH, 9, -3}, {"B/s", QM_UNIT_BANDWIDTH, 0, 0},
    {"ns", QM_UNIT_TIME, -9, 0},        {"us", QM_UNIT_TIME, -6, 0},
    {"ms", QM_UNIT_TIME, -3, 0},        {"s", QM_UNIT_TIME, 0, 0},
};
#define N_UNITS ((int)(sizeof units / sizeof units[0]))

/* Common misspellings that case-folding does not catch. */
static const struct {
    const char *typed, *meant;
} unit_aliases[] = {
    {"\xc2\xb5s", "us"}, {"\xce\xbcs", "us"}, {"sec", "s"},      {"secs", "s"},
    {"Gbps", "Gb/s"},    {"Mbps", "Mb/s"},    {"GBps", "GB/s"},  {"MBps", "MB/s"},
    {"TBps", "TB/s"},    {"bytes", "B"},      {"byte", "B"},     {"KiB/s", "MB/s"},
    {"MiB/s", "MB/s"},   {"TiB/s", "TB/s"},   {"Tb/s", "TB/s"},  {"kB", "KB"},
    {"usec", "us"},      {"msec", "ms"},      {"nsec", "ns"},    {"PiB", "TiB"},
};

static const char *const dim_names[QM_UNIT_DIM_COUNT_] = {"size", "bandwidth", "time"};
static const char *const dim_plural[QM_UNIT_DIM_COUNT_] = {"sizes", "bandwidths", "times"};
static const char *const dim_units[QM_UNIT_DIM_COUNT_] = {
    "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB",
    "MB/s, GB/s, TB/s, GiB/s, Mb/s, Gb/s, B/s",
    "ns, us, ms, s",
};
static const char *const dim_example[QM_UNIT_DIM_COUNT_] = {"80 GiB", "450 GB/s", "0.9 us"};

const char *qm_unit_dim_name(qm_unit_dim dim)
{
    return (int)dim >= 0 && dim < QM_UNIT_DIM_COUNT_ ? dim_plural[dim] : "?";
}

const char *qm_unit_dim_units(qm_unit_dim dim)
{
    return (int)dim >= 0 && dim < QM_UNIT_DIM_COUNT_ ? dim_units[dim] : "";
}

static const unit *find_unit(const char *name)
{
    for (int i = 0; i < N_UNITS; ++i)
        if (strcmp(units[i].name, name) == 0)
            return &units[i];
    return NULL;
}

static bool equal_nocase(const char *a, const char *b)
{
    for (; *a && *b; ++a, ++b)
        if (lower(*a) != lower(*b))
            return false;
    return *a == *b;
}

/* A known unit close to an unknown one, preferring the expected dimension; NULL when none. */
static const char *suggest_unit(const char *typed, qm_unit_dim dim)
{
    for (size_t i = 0; i < sizeof unit_aliases / sizeof unit_aliases[0]; ++i)
        if (strcmp(typed, unit_aliases[i].typed) == 0)
            return unit_aliases[i].meant;
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < N_UNITS; ++i)
            if ((pass == 1 || units[i].dim == dim) && equal_nocase(typed, units[i].name))
                return units[i].name;
    return NULL;
}

/* Split text into a number and a unit. On success *u is the unit (NULL is never returned). */
static qm_code split(const char *text, qm_unit_dim dim, num *n, const unit **u, qm_status *st)
{
    if (!text)
        return qm_fail(st, QM_E_ARG, "units: text must not be NULL");
    size_t len = scan_number(text, n);
    if (len == 0) {
        if (!*text)
            return qm_fail(st, QM_E_UNIT, "'' is empty; a %s is written like '%s' (units: %s)",
                           dim_names[dim], dim_example[dim], dim_units[dim]);
        return qm_fail(st, QM_E_UNIT,
                       "'%.64s' is not a number with a unit; a %s is written like '%s' (units: %s)",
                       text, dim_names[dim], dim_example[dim], dim_units[dim]);
    }
    const char *r = text + len;
    if (*r == ' ')
        ++r;
    if (*r == '\0')
        return qm_fail(st, QM_E_UNIT, "'%.64s' has no unit; a %s needs one of %s (e.g. '%s')",
                       text, dim_names[dim], dim_units[dim], dim_example[dim]);
    if (*r == ' ' || *r == '\t')
        return qm_fail(st, QM_E_UNIT,
                       "'%.64s' has more than one space between the number and the unit; write "
                       "e.g. '%s'",
                       text, dim_example[dim]);
    const unit *found = find_unit(r);
    if (!found) {
        const char *hint = suggest_unit(r, dim);
        if (hint)
            return qm_fail(st, QM_E_UNIT,
                           "'%.64s' has an unknown unit '%.32s'; did you mean '%s'? %s use %s",
                           text, r, hint, dim_plural[dim], dim_units[dim]);
        return qm_fail(st, QM_E_UNIT, "'%.64s' has an unknown unit '%.32s'; %s use %s", text, r,
                       dim_plural[dim], dim_units[dim]);
    }
    if (found->dim != dim)
        return qm_fail(st, QM_E_UNIT, "'%.64s' is a %s, but a %s is expected here; use %s", text,
                       dim_names[found->dim], dim_names[dim], dim_units[dim]);
    *u = found;
    if (n->nan)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is not a number (NaN); a %s must be finite", text,
                       dim_names[dim]);
    if (n->inf)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is infinite; a %s must be finite", text,
                       dim_names[dim]);
    if (n->too_many_digits)
        return qm_fail(st, QM_E_RANGE, "'%.64s' has more than %d significant digits", text,
                       NUM_SIG_MAX);
    return QM_OK;
}

/* Sign and zero rules shared by all dimensions. */
static qm_code check_sign(const char *text, const num *n, qm_unit_dim dim, unsigned flags,
                          qm_status *st)
{
    bool allow_zero = (flags & QM_UNITS_ALLOW_ZERO) != 0;
    if (n->neg && n->n_sig > 0)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is negative; a %s must be %s", text,
                       dim_names[dim], allow_zero ? "zero or positive" : "positive");
    if (n->n_sig == 0 && !allow_zero)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is zero; a %s must be positive", text,
                       dim_names[dim]);
    return QM_OK;
}

static int count_factor(uint64_t v, unsigned f)
{
    int c = 0;
    while (v && v % f == 0) {
        v /= f;
        ++c;
    }
    return c;
}

qm_code qm_units_parse_size_ex(const char *text, unsigned flags, uint64_t *out, qm_status *st)
{
    num n;
    const unit *u = NULL;
    qm_code rc = split(text, QM_UNIT_SIZE, &n, &u, st);
    if (rc == QM_OK)
        rc = check_sign(text, &n, QM_UNIT_SIZE, flags, st);
    if (rc != QM_OK)
        return rc;
    if (n.n_sig == 0) {
        *out = 0;
        return QM_OK;
    }
    if (n.exp10 + u->dec + n.n_sig > 20) /* >= 10^20 before any binary scaling */
        goto overflow;
    if (n.n_sig > 20)
        return qm_fail(st, QM_E_RANGE, "'%.64s' has more than 20 significant digits", text);
    errno = 0;
    uint64_t r = strtoull(n.sig, NULL, 10);
    if (errno == ERANGE)
        goto overflow;
    long e = n.exp10 + u->dec;
    int bin = u->bin;
    if (e >= 0) {
        for (long i = 0; i < e; ++i) {
            if (r > UINT64_MAX / 10)
                goto overflow;
            r *= 10;
        }
    } else {
        int d = (int)-e;
        int v2 = count_factor(r, 2), v5 = count_factor(r, 5);
        if (v5 < d || v2 + bin < d)
            return qm_fail(st, QM_E_RANGE, "'%.64s' is not a whole number of bytes (%.10g B)",
                           text, num_to_double(&n, u->dec, u->bin));
        for (int i = 0; i < d; ++i)
            r /= 5;
        int a = v2 < d ? v2 : d;
        r >>= a;
        bin -= d - a;
    }
    if (bin > 0 && r > (UINT64_MAX >> bin))
        goto overflow;
    *out = r << bin;
    return QM_OK;
overflow:
    return qm_fail(st, QM_E_RANGE, "'%.64s' overflows 64 bits (largest size %llu B = 16 EiB - 1)",
                   text, (unsigned long long)UINT64_MAX);
}

static qm_code parse_double(const char *text, qm_unit_dim dim, unsigned flags, double *out,
                            qm_status *st)
{
    num n;
    const unit *u = NULL;
    qm_code rc = split(text, dim, &n, &u, st);
    if (rc == QM_OK)
        rc = check_sign(text, &n, dim, flags, st);
    if (rc != QM_OK)
        return rc;
    double v = num_to_double(&n, u->dec, u->bin);
    if (isinf(v))
        return qm_fail(st, QM_E_RANGE, "'%.64s' is too large (overflows a double)", text);
    if (v == 0.0 && n.n_sig > 0)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is too small to represent (underflows to 0)",
                       text);
    *out = v;
    return QM_OK;
}

qm_code qm_units_parse_bandwidth_ex(const char *text, unsigned flags, double *out, qm_status *st)
{
    return parse_double(text, QM_UNIT_BANDWIDTH, flags, out, st);
}

qm_code qm_units_parse_time_ex(const char *text, unsigned flags, double *out, qm_status *st)
{
    return parse_double(text, QM_UNIT_TIME, flags, out, st);
}

qm_code qm_units_parse_size(const char *text, uint64_t *out, qm_status *st)
{
    return qm_units_parse_size_ex(text, 0, out, st);
}

qm_code qm_units_parse_bandwidth(const char *text, double *out, qm_status *st)
{
    return parse_double(text, QM_UNIT_BANDWIDTH, 0, out, st);
}

qm_code qm_units_parse_time(const char *text, double *out, qm_status *st)
{
    return parse_double(text, QM_UNIT_TIME, 0, out, st);
}

/* ---- plain numbers ------------------------------------------------------------------------------ */

qm_code qm_units_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out,
                            qm_status *st)
{
    if (!text || !out)
        return qm_fail(st, QM_E_ARG, "units: text and out must not be NULL");
    const char *p = text;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return qm_fail(st, QM_E_TYPE, "'%.64s' is not an integer", text);
    uint64_t v = 0;
    bool overflow = false;
    for (; is_digit(*p); ++p) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    if (*p)
        return qm_fail(st, QM_E_TYPE, "'%.64s' is not an integer", text);
    if (neg && v != 0)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is negative; expected an integer in [%llu, %llu]",
                       text, (unsigned long long)min, (unsigned long long)max);
    if (overflow || v < min || v > max)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is out of range; expected an integer in [%llu, %llu]",
                       text, (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return QM_OK;
}

qm_code qm_units_parse_real(const char *text, double *out, qm_status *st)
{
    if (!text || !out)
        return qm_fail(st, QM_E_ARG, "units: text and out must not be NULL");
    num n;
    size_t len = scan_number(text, &n);
    if (len == 0 || text[len] != '\0')
        return qm_fail(st, QM_E_TYPE, "'%.64s' is not a plain number", text);
    if (n.nan)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is not a number (NaN)", text);
    if (n.inf)
        return qm_fail(st, QM_E_RANGE, "'%.64s' is infinite", text);
    if (n.too_many_digits)
        return qm_fail(st, QM_E_RANGE, "'%.64s' has more than %d significant digits", text,
                       NUM_SIG_MAX);
    double v = num_to_double(&n, 0, 0);
    if (isinf(v))
        return qm_fail(st, QM_E_RANGE, "'%.64s' is too large (overflows a double)", text);
    *out = n.neg ? -v : v;
    return QM_OK;
}

/* ---- formatting --------------------------------------------------------------------------------- */

const char *qm_units_format_real(double v, char *buf, size_t buf_bytes)
{
    for (int prec = 15; prec <= 17; ++prec) {
        snprintf(buf, buf_bytes, "%.*g", prec, v);
        if (strtod(buf, NULL) == v || isnan(v))
            break;
    }
    return buf;
}

const char *qm_units_format_size(uint64_t bytes, char *buf, size_t buf_bytes)
{
    /* the first unit that divides the byte count; KiB only for small counts; else B */
    static const struct {
        const char *name;
        uint64_t scale;
        uint64_t below; /* used only when the count in this unit is below this */
    } cands[] = {
        {"TiB", 1ull << 40, UINT64_MAX},        {"GiB", 1ull << 30, UINT64_MAX},
        {"MiB", 1ull << 20, UINT64_MAX},        {"TB", 1000000000000ull, UINT64_MAX},
        {"GB", 1000000000ull, UINT64_MAX},      {"MB", 1000000ull, UINT64_MAX},
        {"KiB", 1ull << 10, 10000},
    };
    for (size_t i = 0; bytes && i < sizeof cands / sizeof cands[0]; ++i) {
        if (bytes % cands[i].scale == 0 && bytes / cands[i].scale < cands[i].below) {
            snprintf(buf, buf_bytes, "%llu %s", (unsigned long long)(bytes / cands[i].scale),
                     cands[i].name);
            return buf;
        }
    }
    snprintf(buf, buf_bytes, "%llu B", (unsigned long long)bytes);
    return buf;
}

/* Shortest exact text of v over the units of dim, else "%.17g <last>". Ties go to a number in
 * [1, 1000) ("3.35 TB/s" rather than "3350 GB/s"), then to table order. */
static const char *format_double(double v, qm_unit_dim dim, const char *last, char *buf,
                                 size_t buf_bytes)
{
    char best[64] = "", tmp[64];
    size_t best_score = SIZE_MAX;
    if (isfinite(v) && v >= 0) {
        for (int i = 0; i < N_UNITS; ++i) {
            if (units[i].dim != dim)
                continue;
            double scale = ldexp(pow(10.0, units[i].dec), units[i].bin);
            for (int prec = 15; prec <= 17; ++prec) {
                snprintf(tmp, sizeof tmp, "%.*g %s", prec, v / scale, units[i].name);
                double back = -1;
                if (parse_double(tmp, dim, QM_UNITS_ALLOW_ZERO, &back, NULL) == QM_OK &&
                    back == v) {
                    double m = v / scale;
                    size_t score = 2 * strlen(tmp) + (m < 1 || m >= 1000) +
                                   3 * (units[i].bin < 0); /* bits only when clearly shorter */
                    if (score < best_score) {
                        best_score = score;
                        memcpy(best, tmp, sizeof best);
                    }
                    break;
                }
            }
        }
    }
    if (!best[0])
        snprintf(best, sizeof best, "%.17g %s", v, last);
    snprintf(buf, buf_bytes, "%s", best);
    return buf;
}

const char *qm_units_format_bandwidth(double bytes_per_s, char *buf, size_t buf_bytes)
{
    return format_double(bytes_per_s, QM_UNIT_BANDWIDTH, "B/s", buf, buf_bytes);
}

const char *qm_units_format_time(double seconds, char *buf, size_t buf_bytes)
{
    return format_double(seconds, QM_UNIT_TIME, "s", buf, buf_bytes);
}
