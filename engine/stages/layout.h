/* layout.h — the layout stage: a plan projected onto one rank of a world of ranks, or onto one
 * process that holds every rank's devices (the simulator without mpirun).
 *
 * In: a feasible plan (made for some number of ranks), this process's rank and the world size.
 * Out: the shards this rank owns (ids, and as shard specs on the devices of this rank's backend)
 * and the rank's one contiguous global range. The only place where a plan's mesh device index
 * becomes a backend device index. Must not: allocate device memory.
 */
#ifndef QM_LAYOUT_H
#define QM_LAYOUT_H

#include "materialize_internal.h"
#include "plan.h"

typedef struct qm_layout {
    int rank, world_size;       /* rank -1, world 1: one process holding every rank's devices */
    int n_local;
    int *local_shards;          /* shard ids (indices into plan->shards) owned by this rank */
    qm_shard_spec *specs;       /* n_local: the same shards on this rank's backend (device = mesh
                                   device - first_device), what materialize takes */
    int first_device, n_devices;/* the mesh devices [first, first + n) this rank's backend holds */
    uint64_t start, end;        /* this rank's contiguous global range ([0, 0) when it owns none) */
} qm_layout;

/* E-RANK when world_size < 1 ("world size must be at least 1"), rank >= world_size (naming both),
 * or world_size differs from the plan's rank count. */
qm_code qm_layout_create(const qm_plan *plan, const qm_mesh *mesh, int rank, int world_size,
                         qm_layout **out, qm_status *st);
/* The whole plan in one process: every shard local, backend device i = mesh device i; the range
 * [0, the largest end). E-ARG for NULL arguments, the plan's code when it is not feasible. */
qm_code qm_layout_create_all(const qm_plan *plan, const qm_mesh *mesh, qm_layout **out,
                             qm_status *st);
void qm_layout_destroy(qm_layout *layout);

/* One shard of the plan by id: E-ARG ("out of range") for an id outside 0..n_shards-1. */
qm_code qm_layout_shard(const qm_plan *plan, int shard, qm_plan_shard *out, qm_status *st);

/* The first GPU of `rank`'s devices on its host, for a backend that maps a rank's devices onto
 * the host's GPUs (qm_hal_cuda_open_logical_at): the ranks on one host (equal ids in host_ids,
 * world_size entries, as all-gathered) take the host's GPUs in rank order, each as many as it has
 * devices (rank_first[r + 1] - rank_first[r]; world_size + 1 entries). With one rank per GPU,
 * rank r of a host gets that host's r-th GPU. Cannot fail; 0 for a rank out of range. */
int qm_layout_host_first_device(const uint64_t *host_ids, const int *rank_first, int world_size,
                                int rank);

#endif
