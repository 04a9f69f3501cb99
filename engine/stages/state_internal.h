/* state_internal.h — the state object as the engine sees it (materialize.c builds it, state.c
 * reads and frees it). */
#ifndef QM_STATE_INTERNAL_H
#define QM_STATE_INTERNAL_H

#include "hal.h"
#include "qmesh.h"

#include <stdatomic.h>

typedef struct qm_state_shard {
    int rank;
    int device;
    uint64_t start, end;  /* global amplitude range */
    qm_hal_buf *buf;      /* (end - start) amplitudes of the state's dtype */
} qm_state_shard;

struct qm_state {
    atomic_int refs;      /* qm_state_retain / qm_state_destroy; DLPack tensors hold one */
    qm_hal *hal;          /* borrowed: must outlive the state */
    unsigned qubits;
    qm_dtype dtype;
    uint64_t n_amps;      /* 2^qubits: amplitudes per state */
    uint64_t batch;       /* states (1 unless batch mode) */
    double norm;          /* the input's 2-norm (batch 1; 0 in batch mode) */
    int n_shards;
    qm_state_shard *shards;
    uint64_t serial;      /* unique per state; registered while the state lives */
    /* What keeps the backend alive (the public API's context): retained for every state made from
     * this one (gather), released when the state is destroyed, after its buffers. NULL: none (the
     * caller keeps the backend alive). */
    void (*owner_retain)(void *owner);
    void (*owner_release)(void *owner);
    void *owner;
    /* The owner's encode cache (reuse.h), when the buffers came from its pool: they go back there
     * at destroy (before the owner is released) instead of being freed. NULL: freed. */
    struct qm_reuse *reuse;
};

/* An empty state with n_shards zeroed shards (buffers NULL). */
qm_code qm_state_create_empty(qm_hal *hal, unsigned qubits, qm_dtype dtype, int n_shards,
                              qm_state **out, qm_status *st);

struct qm_comm;
/* Σ|ψ|² of every state (sums[0 .. batch)), from the amplitudes as written, computed on the devices
 * of shards 0 .. n_norm - 1 (state_norm.c; n_norm 1 for a replicated state) and merged per state as
 * the fixed pairwise tree of kernels/qm_math.h in global index order. distributed: the ranks of comm
 * hold parts of the index space, and every rank's piece sums are exchanged first (collective;
 * every rank gets the same bits). No amplitude crosses to the host. E-ARG, E-NOMEM, a backend's
 * error (named by shard), or the verdict of another rank's failure. */
qm_code qm_state_norms(const qm_state *s, int n_norm, struct qm_comm *comm, bool distributed,
                       double *sums, qm_status *st);

#endif
