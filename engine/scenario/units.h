/* units.h — dimensioned values of `qmesh/1` scenarios: sizes, bandwidths, times, plain numbers.
 *
 * Role: the only place where "80 GiB", "450 GB/s", "400 Gb/s" or "0.9 us" become numbers, and
 * where numbers become such text again (the dumper). Used by the scenario loader and the CLI.
 * In: one NUL-terminated text. Out: bytes (uint64), bytes per second per direction (double) or
 * seconds (double); or, for formatting, a text that parses back to exactly the same value.
 * Must not: touch YAML, allocate, or print. Messages have no subject of their own: they start with
 * the quoted text, and the caller prefixes where the value was found (qm_status_prefix).
 *
 * Grammar (docs/scenarios.md, "Units"): NUMBER [" "] UNIT, with at most one space between them
 * and nothing before or after. NUMBER is a decimal: an optional sign, digits with an optional
 * fraction, an optional exponent ("1.5", ".5", "2e3"); hexadecimal is not accepted.
 *   sizes       B KiB MiB GiB TiB (binary) and KB MB GB TB (decimal); the byte count must be a
 *               whole number ("1.5 GiB" is fine, "0.1 KiB" is E-RANGE) that fits in 64 bits.
 *   bandwidths  MB/s GB/s TB/s GiB/s and bits Mb/s Gb/s (400 Gb/s = 50e9 B/s), plus B/s (an
 *               the dumper uses it when no other unit is exact; docs/scenario-format.md, "Units").
 *   times       ns us ms s.
 * Decimal values are rounded once (strtod of the whole decimal, unit exponent included), binary
 * and bit scalings are exact, so "0.9 us" is the double nearest to 9e-7.
 * Codes: E-UNIT for a missing, unknown or wrong-dimension unit and malformed text; E-RANGE for
 * negative, zero (unless QM_UNITS_ALLOW_ZERO), NaN, Inf, overflowing or underflowing values.
 */
#ifndef QM_UNITS_H
#define QM_UNITS_H

#include "qmesh.h"

#include <stddef.h>
#include <stdint.h>

typedef enum qm_unit_dim {
    QM_UNIT_SIZE = 0,
    QM_UNIT_BANDWIDTH,
    QM_UNIT_TIME,
    QM_UNIT_DIM_COUNT_
} qm_unit_dim;

/* Flags for the *_ex parsers. */
#define QM_UNITS_ALLOW_ZERO 1u /* accept "0 B", "0 us" (a reserve, a latency, a headroom) */

/* Strictly positive values. */
qm_code qm_units_parse_size(const char *text, uint64_t *out, qm_status *st);
qm_code qm_units_parse_bandwidth(const char *text, double *out, qm_status *st);
qm_code qm_units_parse_time(const char *text, double *out, qm_status *st);
/* Same, with flags (QM_UNITS_ALLOW_ZERO). */
qm_code qm_units_parse_size_ex(const char *text, unsigned flags, uint64_t *out, qm_status *st);
qm_code qm_units_parse_bandwidth_ex(const char *text, unsigned flags, double *out, qm_status *st);
qm_code qm_units_parse_time_ex(const char *text, unsigned flags, double *out, qm_status *st);

/* A plain unsigned integer in [min, max], digits only ("36"; no sign, no fraction, no exponent).
 * E-TYPE when the text is not an integer, E-RANGE when it is outside [min, max]. */
qm_code qm_units_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out,
                            qm_status *st);
/* A plain finite decimal number ("0.9", "1e-3"). E-TYPE when the text is not a number (or has a
 * unit), E-RANGE for NaN, Inf or overflow. The range is the caller's to check. */
qm_code qm_units_parse_real(const char *text, double *out, qm_status *st);

/* "sizes", "bandwidths", "times" and the list of their units ("B, KiB, ..."). Cannot fail. */
const char *qm_unit_dim_name(qm_unit_dim dim);
const char *qm_unit_dim_units(qm_unit_dim dim);

/* Exact formatting for the dumper: parsing the text gives back exactly the same value.
 * Sizes use the largest binary unit that divides the byte count (else B); bandwidths and times the
 * shortest exact text over their units (B/s and s as the last resort, %.17g). Return buf; the
 * buffer should hold at least 40 bytes. Cannot fail (a value the parser would reject, such as NaN,
 * is written as it is, e.g. "nan s"). */
const char *qm_units_format_size(uint64_t bytes, char *buf, size_t buf_bytes);
const char *qm_units_format_bandwidth(double bytes_per_s, char *buf, size_t buf_bytes);
const char *qm_units_format_time(double seconds, char *buf, size_t buf_bytes);
/* Shortest "%.{15,16,17}g" text of a plain double that strtod reads back exactly. */
const char *qm_units_format_real(double v, char *buf, size_t buf_bytes);

#endif
