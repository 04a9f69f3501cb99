/* status_internal.h — helpers for the function that detects a failure (engine, HAL and backends).
 *
 * qm_fail writes the code and a one-line message and returns the code, so a failure reads
 * `return qm_fail(st, QM_E_ARG, "plan: qubits must be at least 1 (got %d)", n);`.
 * qm_status_prefix adds context in front of a message already written (never replaces it).
 * Nothing here allocates.
 */
#ifndef QM_STATUS_INTERNAL_H
#define QM_STATUS_INTERNAL_H

#include "qmesh.h"

#include <stdbool.h>

#if defined(__GNUC__)
#define QM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define QM_PRINTF(f, a)
#endif

/* Set code and message (newlines are replaced by spaces); st may be NULL. Returns code. */
qm_code qm_fail(qm_status *st, qm_code code, const char *fmt, ...) QM_PRINTF(3, 4);
/* Same, with a backend error code (cudaError_t, MPI error class). */
qm_code qm_fail_backend(qm_status *st, qm_code code, int backend_code, const char *fmt, ...)
    QM_PRINTF(4, 5);
/* Prepend "prefix: " to the message already in st (truncating at the end). Returns st->code. */
qm_code qm_status_prefix(qm_status *st, const char *fmt, ...) QM_PRINTF(2, 3);
/* "Did you mean": whether cand is a better suggestion for the misspelt typed than hint (found at
 * distance *best; start with *best = 3 and hint = NULL). A candidate qualifies within edit
 * distance 2, when that is not a rewrite of a whole short word; it is better when closer, or as
 * close and first in byte order (so the hint does not depend on the order of candidates). On true,
 * *best is its distance and the caller keeps cand as the new hint. Used by the scenario loader
 * (keys, names) and the command line (commands, flags). */
bool qm_hint_closer(const char *typed, const char *cand, int *best, const char *hint);

/* What would fit when `features` values per sample make no state of encoding e
 * (qm_encoding_qubits gave 0), as a phrase into buf: iqp "n qubits take n + n(n-1)/2 values: 10
 * for 4, 15 for 5" (the counts around it) or "...: at most 2016, for 63"; angle, phase, iqp-z
 * "one value per qubit: at most 63". Cannot fail. */
void qm_encoding_fit_phrase(qm_encoding e, uint64_t features, char *buf, size_t n);

/* Seconds on the monotonic clock (for measured phase times; only differences mean anything).
 * Cannot fail. */
double qm_clock_now_s(void);
/* The median of n >= 1 timings v[0..n-1] (v[n / 2] once sorted; v is sorted in place): the
 * probes' figure of repeated measurements. Cannot fail. */
double qm_median(double *v, size_t n);
/* With QM_TRACE=1 or 2 (environment, read once), one line on stderr: "qmesh trace: T ms WHAT" (T since
 * the process's first qm_trace call), written with one fprintf so lines of different threads do
 * not mix; nothing otherwise. For finding where an encode's time goes on a real machine
 * (docs/planner.md). */
void qm_trace(const char *fmt, ...) QM_PRINTF(1, 2);
/* True when QM_TRACE=1: for trace lines that need work of their own (a wait) to be written. */
bool qm_tracing(void);
/* True when QM_TRACE=2: every step of a repeated kind (each ring piece of the ingest read and
 * copied), where QM_TRACE=1 writes a few of them. */
bool qm_tracing_all(void);
/* Attach a scenario location to st. */
void qm_status_locate(qm_status *st, const char *file, int line, int col);

/* Internal invariant check that stays on in every build type. Reports E-INTERNAL, never aborts. */
#define QM_CHECK(st, cond)                                                                        \
    do {                                                                                          \
        if (!(cond))                                                                              \
            return qm_fail((st), QM_E_INTERNAL, "internal: check failed: %s (%s:%d)", #cond,      \
                           __FILE__, __LINE__);                                                   \
    } while (0)

#endif
