/* featuremap_fixtures.h — shared by the feature-map tests (test_featuremap.c, test_iqp.c): shard
 * layouts and one encode read back to host memory.
 * Must not: keep state between calls. */
#ifndef QM_FEATUREMAP_FIXTURES_H
#define QM_FEATUREMAP_FIXTURES_H

#include "materialize_internal.h"

#include <stdlib.h>

/* k (1..8) nearly equal shards of [0, total) on devices 0..k-1: total / k each, the last one
 * takes the remainder. */
static inline void fm_layout(uint64_t total, int k, qm_shard_spec sh[8])
{
    for (int i = 0; i < k && i < 8; ++i)
        sh[i] = (qm_shard_spec){.device = i, .start = total / (uint64_t)k * (uint64_t)i,
                                .end = i + 1 == k ? total : total / (uint64_t)k * (uint64_t)(i + 1)};
}

/* Encode B samples of F doubles (enc, q qubits, dtype dt) over the k shards `sh` of `hal`; the
 * amplitudes read back in dt (malloc'd, 16 bytes per amplitude) or NULL with st set. */
static inline double *fm_run(qm_hal *hal, qm_encoding enc, const double *x, uint64_t F, uint64_t B,
                             unsigned q, const qm_shard_spec *sh, int k, qm_dtype dt, qm_status *st)
{
    const uint64_t total = B << q;
    qm_amp_input in = {.dtype = QM_DTYPE_FLOAT64, .data = x, .n = F, .batch = B};
    qm_state *s = NULL;
    if (qm_materialize_featuremap(hal, enc, q, dt, sh, k, &in, NULL, &s, st) != QM_OK)
        return NULL;
    double *a = malloc((size_t)total * 2 * sizeof *a);
    if (a && qm_state_read(s, 0, total, dt, a, st) != QM_OK) {
        free(a);
        a = NULL;
    }
    qm_state_destroy(s);
    return a;
}

#endif
