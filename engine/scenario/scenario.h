/* scenario.h — the in-memory topology description (what a `qmesh/1` scenario file says).
 *
 * Role: the contract between the scenario loader (scenario_load.c and the files that
 * scenario_internal.h lists; scenario_doc.c is the only one that includes libyaml), the topology
 * graph (topology.c), the planner, the simulated backend and the dumper.
 * Everything is plain data owned by one qm_topology (freed by qm_topology_destroy). Indices refer to
 * the arrays of the same topology; ids are the scenario's strings. Units are SI base units: bytes,
 * bytes per second (per direction), seconds. Every entity carries the location it was parsed from
 * (line/col 1-based; 0 for entities built in C or expanded without a location of their own).
 */
#ifndef QM_SCENARIO_H
#define QM_SCENARIO_H

#include "qmesh.h"

#include <stdbool.h>
#include <stdio.h>

#define QM_ID_BYTES 64

typedef struct qm_loc {
    int line, col;
} qm_loc;

/* Link classes, best first (the order paths compare by; NCCL: NVL < PIX/PXB < PHB < SYS < NET). */
typedef enum qm_link_class {
    QM_LINK_NVLINK = 0,
    QM_LINK_C2C,
    QM_LINK_PCIE,
    QM_LINK_SYS,
    QM_LINK_NET,
    QM_LINK_CLASS_COUNT_
} qm_link_class;
const char *qm_link_class_name(qm_link_class c); /* "nvlink", ... ; NULL when out of range */

typedef enum qm_node_kind {
    QM_NODE_GPU = 0,
    QM_NODE_NUMA,          /* a CPU/memory node: id "<host>.numa<id>" */
    QM_NODE_PCIE_SWITCH,
    QM_NODE_NVSWITCH,
    QM_NODE_NIC,
    QM_NODE_FABRIC_SWITCH, /* implicit switch of a fabric declared without `switch:` */
} qm_node_kind;

typedef struct qm_device_type {
    char name[QM_ID_BYTES];
    uint64_t memory_bytes;
    double hbm_bw_bytes_per_s;
    int sm_count;          /* 0 when not given */
    char arch[32];         /* "" when not given */
    qm_loc loc;
} qm_device_type;

typedef struct qm_node {
    char id[QM_ID_BYTES];
    qm_node_kind kind;
    int host;              /* index into hosts; -1 for fabric switches between hosts */
    int numa;              /* node index of the NUMA node it hangs off; -1 when none */
    /* GPU */
    int type;              /* index into device_types, -1 when memory/bandwidth given inline */
    uint64_t memory_bytes;
    uint64_t reserve_bytes;
    double hbm_bw_bytes_per_s;
    /* NIC */
    double nic_bw_bytes_per_s;
    int attach;            /* node index the NIC is attached to, -1 when none */
    qm_loc loc;
} qm_node;

typedef struct qm_link {
    int a, b;              /* node indices */
    qm_link_class cls;
    double bw_ab_bytes_per_s, bw_ba_bytes_per_s;
    double latency_s;      /* < 0: not given (the class default from `defaults.latency` applies) */
    int fabric;            /* index into fabrics when expanded from one, else -1 */
    qm_loc loc;
} qm_link;

typedef struct qm_fabric {
    char id[QM_ID_BYTES];
    qm_link_class cls;
    int switch_node;       /* node index (declared switch, or the implicit one) */
    bool implicit_switch;
    int n_members;
    int *members;          /* node indices */
    double port_bw_bytes_per_s;
    double latency_s;      /* < 0 when not given */
    qm_loc loc;
} qm_fabric;

typedef struct qm_host {
    char id[QM_ID_BYTES];
    uint64_t memory_bytes; /* 0 when not given */
    /* storage: {read, write}: the rates of the host's file system for the encode's input and
     * output (bytes/s); 0 when not given (defaults.storage then applies: qm_host_storage_bw) */
    double storage_read_bw_bytes_per_s, storage_write_bw_bytes_per_s;
    /* storage.cached_read: the rate of reading a file that is in the page cache (bytes/s, by the
     * reader's threads); 0 when not given (defaults.storage.cached_read applies) */
    double storage_cached_read_bw_bytes_per_s;
    /* storage.remove: the rate of removing a file, its blocks freed (bytes of the file a second);
     * 0 when not given (defaults.storage.remove applies) */
    double storage_remove_bw_bytes_per_s;
    char storage_note[448]; /* how the figures were found (topo dump's measurement); "" if given */
    qm_loc loc;
} qm_host;

typedef struct qm_rank_desc {
    int rank;
    int host;              /* index into hosts */
    int n_devices;
    int *devices;          /* GPU node indices, in the order given */
    qm_loc loc;
} qm_rank_desc;

typedef enum qm_estimate_kind { QM_ESTIMATE_MODEL = 0, QM_ESTIMATE_REALITY = 1 } qm_estimate_kind;

typedef enum qm_phase {
    QM_PHASE_INGEST = 0,
    QM_PHASE_LOCAL_NORM,
    QM_PHASE_NORM_ALLREDUCE,
    QM_PHASE_ENCODE,
    QM_PHASE_GATHER,
    QM_PHASE_COUNT_
} qm_phase;
const char *qm_phase_name(qm_phase p); /* "ingest", "local_norm", ... */

/* qm_request (what `qmesh plan`, scenario cases and the public API ask for) and qm_request_init
 * are public: include/qmesh.h. */

typedef struct qm_expect_estimate {
    bool set;
    double value_s;
    double rel_tol;
    qm_estimate_kind kind;
} qm_expect_estimate;

typedef struct qm_case_expect {
    bool feasible;
    bool has_error;   qm_code error;
    bool has_shards;  int shards;
    bool has_pages;   uint64_t pages;
    bool has_shard_bytes; uint64_t shard_bytes;
    int n_devices;    char (*devices)[QM_ID_BYTES]; /* -1: not given */
    int n_ranks;      int *ranks;                   /* -1: not given */
    bool has_gather;  bool gather_feasible; char gather_target[QM_ID_BYTES]; /* "" = not given */
    bool has_max_qubits; unsigned max_qubits_c64, max_qubits_c128;
    bool has_min_headroom; uint64_t min_headroom_bytes;
    qm_expect_estimate estimates[QM_PHASE_COUNT_];
} qm_case_expect;

typedef struct qm_case {
    char id[QM_ID_BYTES];
    qm_request request;
    qm_case_expect expect;
    qm_loc loc;
} qm_case;

typedef struct qm_topology {
    char file[256];            /* path it was loaded from, "" when built in memory */
    char name[QM_ID_BYTES];
    char *description;         /* NULL when not given */
    int n_sources;
    char **sources;
    /* defaults */
    uint64_t default_reserve_bytes;
    double efficiency[QM_LINK_CLASS_COUNT_]; /* default 1 */
    double hbm_efficiency;                    /* default 1 */
    double latency_s[QM_LINK_CLASS_COUNT_];  /* default per class: see scenario_names.c */
    double host_link_bw_bytes_per_s;          /* defaults.host_link: implicit device links */
    double storage_read_bw_bytes_per_s;       /* defaults.storage.read (QM_DEFAULT_STORAGE_READ_BW) */
    double storage_write_bw_bytes_per_s;      /* defaults.storage.write (QM_DEFAULT_STORAGE_WRITE_BW) */
    double storage_cached_read_bw_bytes_per_s;/* defaults.storage.cached_read (QM_DEFAULT_CACHED_READ_BW) */
    double storage_remove_bw_bytes_per_s;     /* defaults.storage.remove (QM_DEFAULT_STORAGE_REMOVE_BW) */
    double launch_s;                          /* defaults.launch: one device launch or
                                                 synchronization round trip (QM_DEFAULT_LAUNCH_S) */
    double page_lock_s;                       /* defaults.page_lock.buffer: per page-locked
                                                 buffer made (QM_DEFAULT_PAGE_LOCK_S) */
    double page_lock_bw_bytes_per_s;          /* defaults.page_lock.rate (QM_DEFAULT_PAGE_LOCK_BW) */
    double staging_setup_s;                   /* defaults.staging_setup: one device's encode
                                                 setup outside the reads' span: its state and
                                                 block sums allocated before them, its staging
                                                 pipe closed after them
                                                 (QM_DEFAULT_STAGING_SETUP_S) */
    double state_alloc_bw_bytes_per_s;        /* defaults.state_alloc: a device state's first
                                                 allocation beyond its first
                                                 QM_STATE_ALLOC_FIRST_BYTES (which staging_setup
                                                 holds), bytes a second
                                                 (QM_DEFAULT_STATE_ALLOC_BW) */
    double staging_open_s;                    /* defaults.staging_open: one device's staging pipe
                                                 opened and first used, inside the reads' span,
                                                 before its first copy (QM_DEFAULT_STAGING_OPEN_S) */
    double piece_roots_s;                     /* defaults.piece_roots: local_norm's round trip on
                                                 a device: a tree_combine of a state's block sums
                                                 into its root, the root copied into plain host
                                                 memory, the stream synchronized
                                                 (QM_DEFAULT_PIECE_ROOTS_S) */
    double host_piece_s;                      /* defaults.host_batch.pieces: an amplitude batch's
                                                 piece sum of one state on the host, local_norm
                                                 (QM_DEFAULT_HOST_PIECE_S) */
    double host_coeff_s;                      /* defaults.host_batch.coefficients: its merge and
                                                 coefficient per state, norm_allreduce
                                                 (QM_DEFAULT_HOST_COEFF_S) */
    double host_copy_bw_bytes_per_s;          /* defaults.host_copy (QM_DEFAULT_HOST_COPY_BW) */
    int n_device_types;  qm_device_type *device_types;
    int n_hosts;         qm_host *hosts;
    int n_nodes;         qm_node *nodes;
    int n_links;         qm_link *links;     /* explicit links, then fabric expansions */
    int n_fabrics;       qm_fabric *fabrics;
    int n_ranks;         qm_rank_desc *ranks;  /* always filled: default one rank per host */
    bool ranks_given;    /* whether the file had a ranks: section */
    int n_cases;         qm_case *cases;
    int n_gpus;          int *gpus;          /* GPU node indices in file order = mesh device order */
} qm_topology;

void qm_topology_destroy(qm_topology *t); /* NULL is a no-op */
/* The `defaults:` a scenario gets when it gives none: efficiencies 1 (hbm too), no reserve, class
 * latencies 0.6 us (nvlink, c2c), 1 us (pcie, sys), 2.7 us (net) — NCCL's per-step figures. */
void qm_topology_defaults_init(qm_topology *t);

/* The line rate of a device's implicit link to its NUMA node when `defaults.host_link` is not
 * given: PCIe Gen4 x16 per direction (16 GT/s x 16 lanes x 128/130 / 8 bits). */
#define QM_DEFAULT_HOST_LINK_BW 31.5e9
/* The data path's defaults when a scenario states no storage (docs/scenario-format.md "defaults"):
 * a file read by one thread from the page cache (a kernel copy to user memory, about 6 GB/s), a
 * file written and synced to one NVMe drive (about 2 GB/s sustained), and one thread's host
 * memory copy of large buffers (about 10 GB/s: the simulator's staging). */
#define QM_DEFAULT_STORAGE_READ_BW 6e9
#define QM_DEFAULT_STORAGE_WRITE_BW 2e9
#define QM_DEFAULT_HOST_COPY_BW 10e9
/* A file in the page cache read by the .npy reader's threads: 20 GB/s, below what an H200 host
 * measured (bench_read, 2026-12-03: 22.1 GiB/s with 4 threads, 34.6 GiB/s with 8) so that a host
 * with fewer cores is not overestimated; topo dump measures it. */
#define QM_DEFAULT_CACHED_READ_BW 20e9
/* Removing a file (an output that a new one replaces, at its commit): its blocks freed at 100 GB/s
 * of the file, tens of milliseconds for a few GiB on a file system that frees extents without
 * trimming them. With ext4's `discard` option the blocks are trimmed on the drive as they are
 * freed, and the GPU hosts of session 24 removed a 2 GiB file at about 4 GB/s; topo dump
 * measures it. */
#define QM_DEFAULT_STORAGE_REMOVE_BW 100e9
/* One kernel launch, async copy or stream synchronization as the pipeline issues them: 10 us, the
 * order of a CUDA launch plus synchronization round trip (topo dump measures it on a CUDA
 * machine: a 4-byte cudaMemsetAsync and cudaStreamSynchronize, repeated). */
#define QM_DEFAULT_LAUNCH_S 10e-6
/* Making a page-locked host buffer of B bytes (the CUDA backend's staging: 2 MiB-aligned memory
 * on huge pages registered with the driver) costs buffer + B rounded up to 2 MiB / rate: the
 * line through the two sizes measured on the H200 host on 2026-12-03, 64 MiB in 5-11 ms (8 ms)
 * and 512 MiB in 36-39 ms (37.5 ms): rate 448 MiB / 29.5 ms = 16 GB/s, buffer 8 ms - 64 MiB /
 * 16 GB/s = 3.8 ms. topo dump measures both on a CUDA machine. */
#define QM_DEFAULT_PAGE_LOCK_S 3.8e-3
#define QM_DEFAULT_PAGE_LOCK_BW 16e9
/* One device's encode setup outside the span of its background reads, which the measured
 * `staging` phase (ingest less that span) holds: the state and its block sums allocated before
 * the first read, the staging pipe closed (events and streams destroyed, the halves given back)
 * after the last: 0.7 ms, the order of the H200 traces of session 23 (0.65-1.05 ms from the
 * ingest's start to its first read for a 4 GiB state; the close about 0.05 ms). topo dump
 * measures it on a CUDA machine. */
#define QM_DEFAULT_STAGING_SETUP_S 0.7e-3
/* staging_setup holds a state of this size's first allocation (topo dump's probe allocates one);
 * a larger shard's state takes longer: each byte beyond at defaults.state_alloc */
#define QM_STATE_ALLOC_FIRST_BYTES ((uint64_t)1 << 30)
/* defaults.state_alloc: 6 TB/s, the H100 traces of sessions 24-26 (a 4 GiB state's first
 * allocation 0.82-1.02 ms in the encodes, a 1 GiB state's 0.29-0.55 ms: about 0.18 ms per further
 * GiB). topo dump measures it on a CUDA machine. */
#define QM_DEFAULT_STATE_ALLOC_BW 6e12
/* One device's staging pipe opened (two streams, the chunk and slot events, the two staging
 * halves) and first used (its first two chunks copied in), beyond the copies' bytes: inside the
 * reads' span, since the reads start before the pipe is opened, and before the first copy, so it
 * delays every copy after it. 1 ms, the order of the first chunk's extra time in the H200 traces
 * of session 23 (0.45-1.05 ms, after the pipes opened in 0.3 ms). topo dump measures it on a
 * CUDA machine. */
#define QM_DEFAULT_STAGING_OPEN_S 1e-3
/* local_norm's round trip on one device whose block sums are made: the tree_combine op over a
 * state's block sums (2^14 of them for a 2^28 state) into its root, the root's copy into plain
 * host memory (which returns once the kernel and the copy are done) and the stream's
 * synchronization: 60 us, within the 50-100 us the H200 traces of session 23 showed from the
 * combine's launch to the end of the copy. topo dump measures it on a CUDA machine. */
#define QM_DEFAULT_PIECE_ROOTS_S 60e-6
/* defaults.host_batch: the host's work per state of an amplitude batch on devices, from topo
 * dump's probe on an H100 host of session 26 (1.3-1.4 ns and 5.4-5.8 ns in three dumps: a fused
 * shard's sums copied into the per-state sums, the coefficients; the arrays prepared while the
 * CUDA context starts; docs/scenario-format.md). 12 and 20 ns until then: an H200 host of
 * session 9, arrays touched first inside the phases, a piece record per state. */
#define QM_DEFAULT_HOST_PIECE_S 1.5e-9
#define QM_DEFAULT_HOST_COEFF_S 6e-9

/* Host h's storage rates (bytes/s): its own storage figures, else defaults.storage. Cannot fail. */
void qm_host_storage_bw(const qm_topology *t, int h, double *read_bw, double *write_bw);
/* Host h's page-cache read rate (bytes/s): its storage.cached_read, else the defaults'. */
double qm_host_cached_read_bw(const qm_topology *t, int h);
/* Host h's file removal rate (bytes of the file a second): its storage.remove, else the
 * defaults'. */
double qm_host_remove_bw(const qm_topology *t, int h);

/* The implicit pcie links a scenario gets without writing them (docs/scenario-format.md):
 *  - a NIC to its `attach` node, else to its NUMA node, at the NIC's speed, unless a link joins
 *    the two already;
 *  - a device to its NUMA node, at defaults.host_link, unless the file links the device by a
 *    pcie, sys or c2c link of its own (it then modelled its host attachment itself).
 * Fills target[i] with the node node i's implicit link goes to, or -1, and returns how many
 * there are; target has t->n_nodes entries. One pass over the nodes and one over the links. */
int qm_topology_implicit_links(const qm_topology *t, int *target);
/* The line rate (bytes/s, both directions) of node i's implicit link. */
double qm_topology_implicit_bw(const qm_topology *t, int i);

/* How messages and outputs name a loaded topology: the file it came from, else its name
 * ("<built-in>"); "" for NULL. Valid while the topology lives. Cannot fail. */
const char *qm_topology_label(const qm_topology *t);
/* How the command line titles a topology for people, the same in every command: "NAME (FILE)",
 * or "NAME (built-in simulated mesh)" for the built-in default; written into buf (cap bytes,
 * truncated), which is returned. Cannot fail. */
const char *qm_topology_title(const qm_topology *t, char *buf, size_t cap);

/* Grow one of a topology's arrays (*array of *cap elements) to hold at least `need`, doubling
 * from 8; false (array unchanged) when out of memory. For the loader and the variant builder. */
bool qm_topology_grow(void **array, int *cap, int need, size_t elem_bytes);

/* A "did you mean" for an id that names no device: the device id of t nearest to `id` (edit
 * distance at most 2, ties by the smaller id), or NULL. Cannot fail. */
const char *qm_topology_closest_gpu(const qm_topology *t, const char *id);

/* For each device (t->gpus order): whether a chain of links, fabrics and NIC attachments (as the
 * topology graph builds them) joins it to the first device, into joined[0 .. n_gpus). E-NOMEM. */
qm_code qm_topology_joined(const qm_topology *t, bool *joined, qm_status *st);

#endif
