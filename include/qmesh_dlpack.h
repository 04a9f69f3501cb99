/* qmesh_dlpack.h — DLPack export of state shards (topic header; includes <dlpack/dlpack.h> from
 * Debian's libdlpack-dev, DLPack 0.6).
 *
 * A shard becomes a 1-D complex DLTensor (kDLComplex, 64 or 128 bits) over the shard's own memory,
 * zero-copy: kDLCPU on the simulated backend, kDLCUDA (device id = the CUDA device) on GPUs. The
 * tensor holds a reference to the state (qm_state_retain), dropped by its deleter: the memory
 * stays valid until the deleter runs, even after the caller's qm_state_destroy. The deleter may
 * be called from any thread.
 */
#ifndef QMESH_DLPACK_H
#define QMESH_DLPACK_H

#include "qmesh.h"

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* E-ARG for a shard out of range, E-UNSUPPORTED for phantom memory, E-NOMEM. *out is NULL on
 * failure; release with (*out)->deleter(*out). */
qm_code qm_state_shard_to_dlpack(const qm_state *state, int shard, DLManagedTensor **out,
                                 qm_status *st);

#ifdef __cplusplus
}
#endif
#endif
