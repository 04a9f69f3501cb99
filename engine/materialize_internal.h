/* materialize_internal.h — allocate shards, stream input in, compute the global norm, write. */
#ifndef QM_MATERIALIZE_INTERNAL_H
#define QM_MATERIALIZE_INTERNAL_H

#include "hal.h"
#include "qmesh.h"

/* One shard of a plan projected onto devices: global amplitude range [start, end) on `device`. */
typedef struct qm_shard_spec {
    int rank;
    int device;
    uint64_t start, end;
} qm_shard_spec;

/* Host input of amplitude encoding: n values of dtype float32|float64. */
typedef struct qm_amp_input {
    qm_dtype dtype;
    const void *data;
    uint64_t n;
} qm_amp_input;

/* Amplitude-encode `in` into a state of 2^qubits amplitudes of out_dtype laid out as `shards`:
 * either a partition of [0, 2^qubits) in index order, or (replicated) every shard [0, 2^qubits).
 * Each shard receives only its own range of the input. The norm is the fixed pairwise tree of
 * kernels/qm_math.h over the global index space, so the result does not depend on the layout.
 * Errors: E-INPUT (empty, too long, NaN/Inf with the first global index, zero norm), E-ARG for a
 * bad layout, and whatever the HAL reports; on failure nothing stays allocated and *out is NULL. */
qm_code qm_materialize_amplitude(qm_hal *hal, unsigned qubits, qm_dtype out_dtype,
                                 const qm_shard_spec *shards, int n_shards, const qm_amp_input *in,
                                 qm_state **out, qm_status *st);

#endif
