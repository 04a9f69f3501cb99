/* plan.h — the plan, feasibility and cost stages (engine-internal).
 *
 * A plan is a pure function of (mesh, request): which device holds which global amplitude range,
 * whether it fits (per device: shard bytes + staging <= usable), where a gather could go, the
 * largest state that fits, and what each phase is estimated to cost. Planning allocates no device
 * memory and is deterministic.
 */
#ifndef QM_PLAN_H
#define QM_PLAN_H

#include "mesh.h"
#include "scenario.h"

/* Device-side staging for ingest: two chunks of this size (double-buffered), or less when a device's
 * input slice is smaller. Counted by feasibility, used by the materializer. */
#define QM_STAGING_CHUNK_BYTES ((uint64_t)32 << 20)
/* A one-shot encode (and a norm check without a context's cache) copies its piece roots (8 bytes
 * per canonical piece of a stashed shard: about one per state, the block sums being combined on
 * the device) back to plain host memory when they take at most this many bytes: the copy of so
 * few bytes costs less than page-locking a buffer for it (making and freeing it took 0.3-0.6 ms
 * on the H200 host, most of a 2^28 state's local_norm once its sums came with the ingest). */
#define QM_BLOCK_SUMS_PAGEABLE_MAX ((uint64_t)1 << 20)
/* The encode reads a state back in chunks of this many amplitudes (one host buffer per process):
 * the output assembly that the host-memory check counts. */
#define QM_READBACK_AMPS ((uint64_t)1 << 20)
/* Upper bound on pages when searching a weighted layout. */
#define QM_MAX_PAGES ((uint64_t)1 << 24)

typedef struct qm_plan_shard {
    int rank;
    int device;               /* mesh device index */
    uint64_t start, end;      /* global amplitude range (batch: of the concatenated states) */
    uint64_t bytes;
    uint64_t input_elems;     /* input values that land in this shard (the rest is padding) */
} qm_plan_shard;

typedef struct qm_plan_device {
    uint64_t shard_bytes;     /* sum over its shards */
    uint64_t staging_bytes;
    uint64_t scratch_bytes;   /* iqp cut over devices: one shard for the exchanges */
    uint64_t planned_bytes;   /* shard + staging + scratch */
    uint64_t usable_bytes;
    uint64_t input_bytes;     /* host input it receives */
} qm_plan_device;

/* Host memory a simulated host's devices take (feasibility.c; only when mesh->host_budget.sim). */
typedef struct qm_plan_host {
    uint64_t device_bytes;    /* sum of its devices' planned bytes: their memory is this host's RAM */
    uint64_t staging_bytes;   /* the encode's host staging: two page-locked halves per device */
    uint64_t output_bytes;    /* the encode's read-back chunk (rank 0's host) */
    uint64_t planned_bytes;   /* device + staging + output */
    uint64_t memory_bytes;    /* the scenario's hosts[].memory; 0: not given, not checked */
} qm_plan_host;

typedef struct qm_plan_gather {
    bool requested;           /* false for "none" */
    bool feasible;
    int device;               /* mesh index of the target device, -1 for host or none */
    char target[QM_ID_BYTES]; /* device id, "host" or "none" */
    char reason[256];
} qm_plan_gather;

/* The data path around a plan (docs/planner.md "Data path"): where the input comes from and
 * where the output goes, for the cost model's read, staging and write phases. Zeroed: no input
 * file and no output (the three phases are then not estimated). */
typedef enum qm_dp_output {
    QM_DP_OUTPUT_NONE = 0,
    QM_DP_OUTPUT_FILE,        /* --out: one gathered .npy, written by rank 0's host */
    QM_DP_OUTPUT_DIR,         /* --out-dir: one .npy per shard, each rank writes its own */
} qm_dp_output;

typedef struct qm_datapath {
    bool input;               /* the input is a file (read, staging estimated) */
    uint64_t input_elem_bytes;/* bytes of one input value as staged (float32 4, float64 8) */
    uint64_t input_file_bytes;/* CSV: the file's bytes (every rank reads the whole text); 0: the
                                 values are read by range (npy, HDF5: input_elems x elem bytes) */
    double input_resident;    /* the fraction of the input file in the page cache (0 to 1): read
                                 at storage.cached_read, the rest at storage.read */
    bool input_background;    /* the input's reader reads in the background (the .npy reader's
                                 threads, ahead of the copies); else it reads each piece on the
                                 ingest's thread (CSV, HDF5) */
    bool sim;                 /* staging is a host memory copy (the simulator), not a link */
    qm_dp_output output;
    uint64_t output_bytes;    /* QM_DP_OUTPUT_FILE: the .npy file's bytes */
    uint64_t output_replaced_bytes; /* the bytes already at the output's path (an earlier
                                 output's file, or its directory's files), which the commit
                                 removes: rank 0's host's storage.remove */
} qm_datapath;

/* The data path's phases, reported after the plan's own in estimates_s. */
typedef enum qm_io_phase {
    QM_IO_READ = 0,           /* file -> host memory at the host's storage read rate */
    QM_IO_STAGING,            /* host memory -> device (not hidden behind the read) */
    QM_IO_WRITE,              /* device -> host, then host memory -> file at the write rate */
    QM_IO_PHASE_COUNT_
} qm_io_phase;
const char *qm_io_phase_name(qm_io_phase k); /* "read", "staging", "write"; NULL outside */

typedef struct qm_plan {
    qm_request request;       /* as asked (features resolved: never 0) */
    qm_policy policy;         /* the policy used (auto resolved) */
    bool feasible;
    qm_status error;          /* code QM_OK when feasible */
    uint64_t n_amps;          /* per state: 2^qubits */
    uint64_t global_amplitudes;
    uint64_t state_bytes;
    uint64_t pages;
    int n_shards;
    qm_plan_shard *shards;
    int n_devices;            /* = mesh devices */
    qm_plan_device *devices;
    bool host_checked;        /* host memory was checked (mesh->host_budget.sim) */
    bool host_over;           /* the plan's E-CAPACITY is host memory's */
    int n_hosts;              /* = the topology's hosts */
    qm_plan_host *hosts;
    uint64_t local_planned_bytes; /* every host's planned bytes: one process holds them all */
    qm_plan_gather gather;
    bool has_max_qubits;
    unsigned max_qubits[2];   /* [0] complex64, [1] complex128; 0 when nothing fits */
    bool has_estimates;
    double estimates_s[QM_PHASE_COUNT_];
    bool estimate_set[QM_PHASE_COUNT_];
    char estimates_note[320]; /* why an estimate is missing (the first reason); "" when none */
    qm_datapath datapath;     /* as given to qm_cost_datapath (zeroed: none) */
    double io_s[QM_IO_PHASE_COUNT_];  /* the data path's estimates (seconds) */
    bool io_set[QM_IO_PHASE_COUNT_];  /* false: not estimated (no input / no output), null */
    uint64_t hash;            /* FNV-1a of the request and the layout (multi-rank agreement) */
} qm_plan;

/* Validate a request against what needs no mesh (qubits, dtype, policy, batch, features,
 * encoding, ranks against the scenario). E-QUBITS, E-DTYPE, E-POLICY, E-ARG, E-INPUT, E-RANK. */
qm_code qm_request_validate(const qm_request *r, int scenario_ranks, qm_status *st);

/* The one qubit cap: the largest n whose `batch` (0 means 1) states of 2^n amplitudes of `dtype`
 * have a byte count representable in the 64-bit index and size type (complex64: 60, complex128:
 * 59 for one state). 0 for a dtype outside the enum. Cannot fail. */
unsigned qm_request_max_qubits(qm_dtype dtype, uint64_t batch);
/* The fewest qubits (at least 1) whose 2^n amplitudes hold n_values values. Cannot fail. */
unsigned qm_qubits_for_values(uint64_t n_values);

/* Plan a request on a mesh: layout, feasibility, gather, frontier and estimates. A plan is always
 * returned for a valid request (*out non-NULL) — infeasible ones with feasible=false and error set —
 * and the return code is the plan's error code (QM_OK when feasible). Invalid requests return their
 * code with *out NULL. */
qm_code qm_plan_create(const qm_mesh *mesh, const qm_request *r, qm_plan **out, qm_status *st);
void qm_plan_destroy(qm_plan *plan);

/* Layout and feasibility only (no gather, frontier or estimates): the frontier's inner step. */
qm_code qm_plan_layout(const qm_mesh *mesh, const qm_request *r, qm_plan **out, qm_status *st);

/* Largest qubit count that fits under the request's policy, batch and ranks, per dtype. */
void qm_plan_frontier(const qm_mesh *mesh, const qm_request *r, unsigned out[2]);

/* The largest batch (samples of r->features values in r->qubits qubits, r's dtype, policy and
 * ranks) that fits; 0 when not one sample does. Cannot fail (out of host memory reads as "does
 * not fit"). */
uint64_t qm_plan_max_batch(const qm_mesh *mesh, const qm_request *r);

/* The policy auto picks for r (its policy ignored), by the cost model; QM_POLICY_AUTO when no
 * policy fits. Cannot fail (as above). */
qm_policy qm_plan_auto_choice(const qm_mesh *mesh, const qm_request *r);

/* `qmesh plan --max`: the largest request that fits, per dtype and policy. */
typedef struct qm_plan_max {
    bool batch;               /* features given: largest batch; else largest state */
    uint64_t features;        /* batch: values per sample */
    unsigned qubits;          /* batch: qubits per sample (the fewest that hold features) */
    uint64_t value[2][QM_POLICY_COUNT_]; /* [complex64, complex128][policy]: qubits or samples;
                                          * 0 when nothing fits */
    qm_policy auto_pick[2];   /* what auto picks at its largest; QM_POLICY_AUTO when nothing fits */
} qm_plan_max;

/* Fill *out for the mesh: r->features (0: a state) and r->ranks are used, r's qubits, dtype,
 * policy and batch are not. State values come from qm_plan_frontier, batch values from
 * qm_plan_max_batch. E-INPUT when the features need more qubits than any dtype allows. */
qm_code qm_plan_max_query(const qm_mesh *mesh, const qm_request *r, qm_plan_max *out,
                          qm_status *st);

/* The cost model (cost.c): fills plan->estimates_s. */
qm_code qm_cost_estimate(const qm_mesh *mesh, qm_plan *plan, qm_status *st);

/* The data path's estimates (cost.c; docs/planner.md "Data path"): with an input file, read =
 * max over hosts of the bytes its ranks read, the resident fraction at the host's cached_read
 * and the rest at its storage read rate; on devices ingest = the read and the copies (the link
 * model + launches x defaults.launch + fused HBM passes) overlapped chunk by chunk (the slower
 * plus one chunk of the faster), staging = ingest - read; on the simulator staging = bytes /
 * defaults.host_copy and ingest = read + staging. On devices (amplitude) local_norm and encode
 * get their launches, and fused shards' passes move into the ingest. With an output, write =
 * the read-back (link time + 2 launches per chunk; none on the simulator) overlapped with the
 * file write (the output bytes / the writing host's storage write rate; --out-dir: max over
 * hosts of their ranks' shard files). Needs a plan with estimates, fresh from qm_cost_estimate
 * (ingest, local_norm and encode are adjusted in place: call it once per estimate); E-NOMEM. */
qm_code qm_cost_datapath(const qm_mesh *mesh, qm_plan *plan, const qm_datapath *dp, qm_status *st);

/* The path a gather takes from mesh device `device` to the plan's gather target (a device, or
 * the host: the device's host path back to its NUMA node); the cost model charges it, `plan
 * --dot` draws it. out->found is false when there is none. Needs p->gather planned and
 * requested. */
qm_code qm_gather_path(const qm_mesh *mesh, const qm_plan *p, int device, qm_topo_path *out,
                       qm_status *st);

/* NCCL-style ring all-reduce time of `bytes` over the devices with shards (mesh order). */
double qm_cost_allreduce_s(const qm_mesh *mesh, const int *devices, int n, uint64_t bytes);

#endif
