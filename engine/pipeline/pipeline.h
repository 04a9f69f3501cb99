/* pipeline.h — the one chain of stages every entry runs: scenario → validate → topology graph →
 * mesh → plan (feasibility, gather, frontier, estimates) → layout → backend → materialize.
 *
 * The CLI (plan, encode), the scenario runner, the file-to-file job (encode.c), the public API
 * (api.c) and the test fixtures all go through these calls; none chains the stages itself.
 *
 * A qm_pipeline holds what the stages produced, each member owned by the pipeline and replaced
 * when its stage runs again (a later stage's product is dropped with it):
 *   topology  qm_pipeline_load / _load_text (owned) or qm_pipeline_use (borrowed: must outlive it)
 *   graph     built once per topology
 *   mesh      qm_pipeline_mesh, or by qm_pipeline_plan for the request's rank count
 *   plan      qm_pipeline_plan: kept also when infeasible (plan->feasible false, plan->error set);
 *             a caller may take it (set p->plan to NULL, then destroy it itself)
 *   layout    qm_pipeline_layout: the plan projected onto this process's devices
 *   hal       qm_pipeline_open_backend: a backend for exactly the layout's devices
 * Order: each call needs the products before it (E-ARG naming the missing stage otherwise).
 * Must not: allocate device memory before the plan is known to fit (open_backend and materialize
 * refuse an infeasible plan with the plan's own code and message).
 * Thread safety: a pipeline is used by one thread at a time; distinct pipelines are independent
 * (a borrowed topology may be shared: no stage writes to it).
 */
#ifndef QM_PIPELINE_H
#define QM_PIPELINE_H

#include "backend.h"
#include "io.h"
#include "layout.h"
#include "materialize_internal.h"
#include "plan.h"
#include "scenario_loader.h"

typedef struct qm_pipeline {
    qm_topology *topology;
    bool owns_topology;
    qm_topo_graph *graph;
    qm_mesh *mesh;
    int mesh_ranks;            /* the rank count the mesh was made for (0: all) */
    qm_request request;        /* the request planned (a copy) */
    qm_host_budget host_budget; /* copied into the mesh by qm_pipeline_plan (zero: host memory not
                                   checked; docs/planner.md "Host memory") */
    qm_datapath datapath;      /* the input file and output the plan's data path estimates are
                                  for (zeroed: none; docs/planner.md "Data path") */
    qm_plan *plan;
    qm_layout *layout;
    qm_hal *hal;
} qm_pipeline;

void qm_pipeline_init(qm_pipeline *p);
/* Free every product (the topology only when owned) and zero the pipeline. NULL is a no-op. */
void qm_pipeline_fini(qm_pipeline *p);

/* The scenario: a file, or the built-in default mesh when path is NULL; YAML text (name is used
 * in messages); or a topology the caller keeps (borrowed). Diagnostics beyond the first go to
 * diags (may be NULL). Drops every earlier product. */
qm_code qm_pipeline_load(qm_pipeline *p, const char *path, qm_diags *diags, qm_status *st);
qm_code qm_pipeline_load_text(qm_pipeline *p, const char *text, size_t len, const char *name,
                              qm_diags *diags, qm_status *st);
void qm_pipeline_use(qm_pipeline *p, const qm_topology *t);

/* The topology graph (once per topology). */
qm_code qm_pipeline_graph(qm_pipeline *p, qm_status *st);
/* The topology graph (once), then the mesh of the first `ranks` ranks (0: all), reused when it was
 * made for the same count. */
qm_code qm_pipeline_mesh(qm_pipeline *p, int ranks, qm_status *st);

/* validate (qm_request_validate) → graph → mesh (r->ranks) → plan (with p->datapath's read,
 * staging and write estimates when it names an input file or an output). Returns what qm_plan_create
 * returns: QM_OK for a feasible plan, the plan's code (p->plan set, infeasible) otherwise, or the
 * validator's / mesh's code with p->plan NULL. */
qm_code qm_pipeline_plan(qm_pipeline *p, const qm_request *r, qm_status *st);

/* The plan projected onto rank `rank` of `world` ranks (qm_layout_create); rank < 0: one process
 * holding every rank's devices (qm_layout_create_all). */
qm_code qm_pipeline_layout(qm_pipeline *p, int rank, int world, qm_status *st);

/* A backend for the layout's devices through the factory: `base` gives the kind, the memory mode,
 * the CUDA first GPU and a fault shim (NULL: a materialized simulator). */
qm_code qm_pipeline_open_backend(qm_pipeline *p, const qm_backend_desc *base, qm_status *st);

/* The page-locked host buffers an encode of `req` makes first on each of `ranks` ranks, whose
 * memory a caller can have made ready while the CUDA context starts (qm_backend_host_prepare):
 * for the amplitude encoding, the ingest's ring when a rank's share of `input_bytes` (the input
 * file's data) fills it, and the norm's sums (one double per state: a fused state's sum, or the
 * root of a larger state's block sums; for a larger state only when more than
 * QM_BLOCK_SUMS_PAGEABLE_MAX bytes: fewer are copied to plain memory). Writes at most 2 sizes to
 * bytes[]; returns how many. Cannot fail. */
int qm_pipeline_staging_bytes(const qm_request *req, uint64_t input_bytes, int ranks,
                              uint64_t bytes[2]);

/* The devices `qmesh devices` and qm_devices_list show: the visible CUDA GPUs (kind CUDA, or AUTO
 * when there is at least one GPU), else the built-in default scenario's mesh as a phantom
 * simulated backend (capacities and ids, no memory taken). The caller destroys *out. */
qm_code qm_pipeline_devices_backend(qm_backend_kind kind, qm_hal **out, qm_status *st);

/* Account the plan's shards on a phantom simulated mesh of the plan's mesh (every rank; capacity
 * accounting, no memory): each shard's bytes are reserved on its device through the HAL's checking
 * allocator (E-CAPACITY if one does not fit), read back per device into reserved_bytes[0 ..
 * mesh->n_devices - 1] (mesh device order), then released; the backend is gone on return. Needs a
 * feasible plan (E-ARG otherwise). Nothing is allocated for the state, so a 2^45-amplitude plan
 * costs what its bookkeeping costs. */
qm_code qm_pipeline_phantom_account(const qm_pipeline *p, uint64_t *reserved_bytes, qm_status *st);

/* Destroy the backend (its states must be gone). */
void qm_pipeline_close_backend(qm_pipeline *p);

/* Amplitude-encode `in` into the layout's shards on the pipeline's backend (materialize.c); the
 * state borrows p->hal (it must be destroyed before the pipeline is finished). */
qm_code qm_pipeline_materialize(const qm_pipeline *p, const qm_amp_input *in,
                                const qm_materialize_opts *opts, qm_state **out, qm_status *st);

/* A CSV file read by ranges through a few readers of it (pipeline.c). */
typedef struct qm_csv_cursors qm_csv_cursors;

/* An input file opened for materialize: a .npy file (header only: values are read per shard on
 * demand), an HDF5 dataset (`dataset`, or NULL for the file's only one; metadata only, values read
 * per shard through hyperslabs) or a CSV file (plain or gzip: its rows counted when it is opened,
 * one pass over the text with no value parsed; values parsed when their rows are read, in bounded
 * memory, never held whole). The CSV options apply to CSV files; on a .npy or HDF5 input
 * --drop-column takes a 0-based index and --header only auto; `dataset` on anything but HDF5 is
 * E-ARG. */
typedef struct qm_input_file {
    qm_input_format format;
    qm_npy_reader *npy;
    qm_hdf5_reader *hdf5;
    qm_csv_cursors *csv_cursors; /* a CSV file */
    qm_amp_input in;             /* what materialize reads (points into this object) */
    int ndim;                    /* 1 or 2 (a CSV file is a table: 2) */
} qm_input_file;

/* A CSV file: `in.read` reads any range of elements (row-major, F per row) through up to 8
 * readers of the file, each going forward from where it stands: a read goes to the one standing at
 * its first row (a reader of interleaved ranges, such as ingest's chunks dealt to the shards in
 * turn, keeps one per range); a read that starts before every reader starts one over (the basis
 * encoding's scan for the largest index, then the encode). Rows before a read's first row are
 * skipped (qm_csv_skip_rows: line ends found, no value parsed), so a rank whose range starts late
 * in the file parses only its own rows. A bad value is found when its row is read: E-INPUT naming
 * the file line and column, as qm_csv_load words it (in.read_placed: no element range is put in
 * front of it); the file shrinking below the count is E-INPUT too. Only `in.read`'s one caller at
 * a time. */
qm_code qm_input_open(const char *path, const qm_csv_options *csv, const char *dataset,
                      qm_input_file *out, qm_status *st);
/* The same for a stream (docs/api.md "Streams"): read in order, batch after batch, in bounded
 * memory. .npy, HDF5 and CSV as qm_input_open, but a CSV read error is prefixed with the batch's
 * element range (in.read_placed false: "encode: reading input [a, b): f.csv: row 42, ..."). */
qm_code qm_input_open_stream(const char *path, const qm_csv_options *csv, const char *dataset,
                             qm_input_file *out, qm_status *st);
void qm_input_close(qm_input_file *f); /* NULL and a zeroed object are no-ops */

#endif
