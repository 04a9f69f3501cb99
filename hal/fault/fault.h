/* fault.h — a shim that wraps any backend and fails the k-th call of chosen kinds.
 *
 * Role: prove that every failure path of the engine returns the right error and leaks nothing. The
 * shim owns the wrapped HAL object. Calls are counted per kind of failure point (allocations, copies,
 * kernel launches); the k-th counted call fails with the configured code instead of
 * reaching the backend, exactly once. The counters live on the HAL object (no global hooks).
 */
#ifndef QM_FAULT_H
#define QM_FAULT_H

#include "hal.h"

typedef enum qm_fault_point {
    QM_FAULT_ALLOC = 1u << 0,
    QM_FAULT_COPY = 1u << 1,       /* h2d, d2h, d2d and peer copies */
    QM_FAULT_LAUNCH = 1u << 2,     /* kernel launches: every op (hal_ops.h) */
    QM_FAULT_ALL = 0x7u,
} qm_fault_point;

typedef struct qm_fault_config {
    unsigned points;   /* a mask of qm_fault_point: which calls are counted */
    uint64_t fail_at;  /* 1-based index of the counted call to fail; 0 = never fail (count only) */
    qm_code code;      /* the code the failing call returns (e.g. QM_E_BACKEND, QM_E_CAPACITY) */
} qm_fault_config;

/* Wrap `inner` (taken: destroyed with the shim, also when this call fails). */
qm_code qm_hal_fault_create(qm_hal *inner, const qm_fault_config *cfg, qm_hal **out, qm_status *st);
/* Counted calls so far. Cannot fail (0 for a HAL that is not a fault shim). */
uint64_t qm_hal_fault_calls(const qm_hal *hal);
/* Reset the counter and fail at the k-th counted call from now (0 = never). */
void qm_hal_fault_rearm(qm_hal *hal, uint64_t fail_at);
/* Whether the armed failure has fired. */
bool qm_hal_fault_fired(const qm_hal *hal);

#endif
