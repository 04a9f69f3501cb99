/* mesh.h — the mesh stage: the devices this request may use, in global index order.
 *
 * In: a topology (scenario.h) and its graph (topology.h), the number of ranks to use. Out: the
 * mesh: each rank's GPUs in affinity order, ranks in order (rank r's devices precede rank r+1's, so
 * ranks own contiguous global ranges and the high index bits), each device with usable capacity
 * (memory - reserve), HBM bandwidth and its host. Also the backend opened for a mesh (through the
 * factory, hal/backend.h). Must not: allocate device memory (the backend qm_mesh_open_backend
 * opens does, on demand).
 */
#ifndef QM_MESH_H
#define QM_MESH_H

#include "backend.h"
#include "hal.h"
#include "scenario.h"
#include "topology.h"

typedef struct qm_mesh_device {
    int node;                       /* GPU node index in the topology */
    char id[QM_ID_BYTES];
    int rank;
    int host;                       /* host index */
    uint64_t memory_bytes;
    uint64_t usable_bytes;          /* memory - reserve */
    double hbm_bw_bytes_per_s;      /* declared figure (efficiency not applied) */
} qm_mesh_device;

/* The host-memory check of feasibility (feasibility.c; docs/planner.md "Host memory"). Zero, the
 * default: the devices' memory is their own (CUDA, a phantom simulator, `qmesh plan` without
 * --backend sim) and host memory is not checked. */
typedef struct qm_host_budget {
    bool sim;                       /* a materialized simulator: every shard lives in host RAM */
    uint64_t available_bytes;       /* this machine's MemAvailable when this process holds every
                                       device of the mesh; 0: not checked */
} qm_host_budget;

typedef struct qm_mesh {
    const qm_topology *topo;        /* borrowed */
    qm_host_budget host_budget;     /* zero from qm_mesh_create; set by the pipeline */
    qm_topo_graph *graph;           /* borrowed */
    int n_ranks;
    int *rank_first;                /* n_ranks + 1 entries: rank r owns devices [first[r], first[r+1]) */
    int n_devices;
    qm_mesh_device *devices;
} qm_mesh;

/* Build the mesh of the first `ranks` ranks (0 = all). E-RANK when more ranks are asked for than
 * the scenario has, or a rank has no device; E-DISCONNECTED when two devices of one rank have no
 * path. `topo` and `graph` must outlive the mesh. */
qm_code qm_mesh_create(const qm_topology *topo, qm_topo_graph *graph, int ranks, qm_mesh **out,
                       qm_status *st);
void qm_mesh_destroy(qm_mesh *mesh);

/* The best-connected device (topology.h's rule) among mesh devices [first, first + n), as a mesh
 * index in *out. */
qm_code qm_mesh_best_connected(const qm_mesh *mesh, int first, int n, int *out, qm_status *st);

/* Index of a device id in the mesh, or -1. */
int qm_mesh_find(const qm_mesh *mesh, const char *id);

/* A backend for the mesh's devices (rank < 0: all of them, backend device i = mesh device i; else
 * rank `rank`'s devices only, backend device i = mesh device mesh->rank_first[rank] + i), opened
 * through the factory. `base` gives the kind, the simulator's memory mode, the CUDA backend's first
 * GPU and a fault shim (NULL: a materialized simulator); the devices are the mesh's: for the
 * simulator with their ids, capacities, bandwidths and peers wherever the topology has a path
 * between two devices of one host (none for a phantom simulator: it never copies, and one host of
 * 8192 devices would list 33 million pairs); for CUDA as many logical devices. E-RANK for a rank
 * out of range. */
qm_code qm_mesh_open_backend(const qm_mesh *mesh, int rank, const qm_backend_desc *base,
                             qm_hal **out, qm_status *st);

#endif
