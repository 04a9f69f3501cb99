/* validate.c — the validate stage: request checks that need no device and no mesh.
 *
 * In: a request (and the scenario's rank count). Out: QM_OK, or the first problem as a one-line
 * error with its code and numbers. Also the one qubit cap (from the dtype and the 64-bit index
 * type) that every other check uses. Parsers parse; this file decides.
 * Must not: touch a backend or allocate.
 */
#include "plan.h"
#include "status_internal.h"

#include <stdio.h>
#include <string.h>

unsigned qm_request_max_qubits(qm_dtype dt, uint64_t batch)
{
    const uint64_t es = qm_dtype_size(dt);
    unsigned n = 0;
    while (es && n < 63 && ((uint64_t)1 << (n + 1)) <= UINT64_MAX / es / (batch ? batch : 1))
        ++n;
    return n;
}

unsigned qm_qubits_for_values(uint64_t n_values)
{
    return n_values <= 2 ? 1 : (unsigned)(64 - __builtin_clzll(n_values - 1));
}

qm_code qm_request_validate(const qm_request *r, int scenario_ranks, qm_status *st)
{
    if (!r)
        return qm_fail(st, QM_E_ARG, "request: must not be NULL");
    if (r->dtype != QM_DTYPE_COMPLEX64 && r->dtype != QM_DTYPE_COMPLEX128)
        return qm_fail(st, QM_E_DTYPE, "request: dtype must be complex64 or complex128 (got %s)",
                       qm_dtype_name(r->dtype) ? qm_dtype_name(r->dtype) : "an unknown dtype");
    if ((int)r->policy < 0 || r->policy >= QM_POLICY_COUNT_)
        return qm_fail(st, QM_E_POLICY, "request: unknown policy %d", (int)r->policy);
    if ((int)r->encoding < 0 || r->encoding >= QM_ENCODING_COUNT_)
        return qm_fail(st, QM_E_ARG, "request: unknown encoding %d", (int)r->encoding);
    if (r->batch < 1)
        return qm_fail(st, QM_E_ARG, "request: batch must be at least 1 (got %llu)",
                       (unsigned long long)r->batch);
    if (r->qubits < 1)
        return qm_fail(st, QM_E_QUBITS, "request: qubits must be at least 1 (got %u)", r->qubits);
    const unsigned cap = qm_request_max_qubits(r->dtype, r->batch);
    if (r->qubits > cap)
        return qm_fail(st, QM_E_QUBITS, "request: %u qubits of %s%s overflow 64-bit byte counts "
                       "(2^%u amplitudes x %zu B); at most %u qubits", r->qubits,
                       qm_dtype_name(r->dtype), r->batch > 1 ? " in this batch" : "", r->qubits,
                       qm_dtype_size(r->dtype), cap);
    const uint64_t n_amps = (uint64_t)1 << r->qubits;
    const uint64_t want = qm_encoding_features(r->encoding, r->qubits);
    if (r->encoding != QM_ENCODING_AMPLITUDE && r->features != 0 && r->features != want) {
        const unsigned fit = qm_encoding_qubits(r->encoding, r->features);
        char hint[192] = "", phrase[96];
        if (r->encoding == QM_ENCODING_BASIS)
            snprintf(hint, sizeof hint, "; basis takes one index per sample");
        else if (fit)
            snprintf(hint, sizeof hint, "; %llu values make %u qubits",
                     (unsigned long long)r->features, fit);
        else {
            qm_encoding_fit_phrase(r->encoding, r->features, phrase, sizeof phrase);
            snprintf(hint, sizeof hint, "; no qubit count takes %llu values (%s)",
                     (unsigned long long)r->features, phrase);
        }
        return qm_fail(st, QM_E_INPUT, "request: the %s encoding of %u qubits takes %llu value%s "
                       "per sample, got %llu%s", qm_encoding_name(r->encoding), r->qubits,
                       (unsigned long long)want, want == 1 ? "" : "s",
                       (unsigned long long)r->features, hint);
    }
    if (r->features > n_amps)
        return qm_fail(st, QM_E_INPUT, "request: %llu features exceed the state vector size %llu "
                       "(%u qubits); use at least %u qubits", (unsigned long long)r->features,
                       (unsigned long long)n_amps, r->qubits,
                       qm_qubits_for_values(r->features));
    if (r->ranks < 0 || r->ranks > scenario_ranks)
        return qm_fail(st, QM_E_RANK, "request: %d ranks requested but the scenario has %d",
                       r->ranks, scenario_ranks);
    return QM_OK;
}
