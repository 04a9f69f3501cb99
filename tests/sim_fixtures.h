/* sim_fixtures.h — small simulated meshes built in C for the tests, opened through the backend
 * factory (hal/backend.h) as the engine opens them. */
#ifndef QM_SIM_FIXTURES_H
#define QM_SIM_FIXTURES_H

#include "backend.h"
#include "sim.h" /* qm_sim_memory: the mode argument */
#include "status_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* n devices "d0".."d<n-1>" of `memory` bytes each (no reserve), all pairs peers when `peers`.
 * Thread-safe: the id strings live in this call's own allocation (the simulator copies them), so
 * rank threads may build their meshes at the same time. A shared static buffer here once made
 * test_materialize_ranks fail about once in 40 runs: one thread rewrote "d1" while another read it
 * as empty, that rank returned before the first collective and the others waited 30 s for it.
 * `fault` (NULL: none) puts the factory's fault shim over the mesh. Materialized memory is poisoned
 * (0xFF, NaN for every float type, on allocation and free: the simulator's debug switch), so that
 * a slot an encode forgets to write shows up as NaN rather than as a lucky zero. */
static inline qm_code fixture_mesh_fault(int n, uint64_t memory, bool peers, qm_sim_memory mode,
                                         const qm_backend_fault *fault, qm_hal **out, qm_status *st)
{
    char (*ids)[16] = calloc((size_t)n, sizeof *ids);
    qm_backend_device *dd = calloc((size_t)n, sizeof *dd);
    qm_backend_peer *pp = calloc((size_t)n * (size_t)n + 1, sizeof *pp);
    if (!ids || !dd || !pp) {
        free(ids);
        free(dd);
        free(pp);
        return qm_fail(st, QM_E_NOMEM, "fixture_mesh: out of host memory for %d devices", n);
    }
    int np = 0;
    for (int i = 0; i < n; ++i) {
        snprintf(ids[i], sizeof ids[i], "d%d", i);
        dd[i] = (qm_backend_device){.id = ids[i], .name = "sim test", .memory_bytes = memory,
                                    .hbm_bw_bytes_per_s = 1e12, .host_bw_bytes_per_s = 5e10,
                                    .numa = 0};
        for (int j = i + 1; peers && j < n; ++j)
            pp[np++] = (qm_backend_peer){.a = i, .b = j};
    }
    const qm_backend_desc desc = {.kind = QM_BACKEND_SIM, .n_devices = n, .devices = dd,
                                  .n_peers = np, .peers = pp, .phantom = mode == QM_SIM_PHANTOM,
                                  .poison = true, .fault = fault};
    qm_code rc = qm_backend_open(&desc, out, st);
    free(ids);
    free(dd);
    free(pp);
    return rc;
}

/* The same mesh without a fault shim. */
static inline qm_code fixture_mesh(int n, uint64_t memory, bool peers, qm_sim_memory mode,
                                   qm_hal **out, qm_status *st)
{
    return fixture_mesh_fault(n, memory, peers, mode, NULL, out, st);
}

#endif
