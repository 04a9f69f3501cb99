/* encode.h — the whole encode request, file to file: the job `qmesh encode` runs.
 *
 * In: an input file (.npy or CSV, optionally gzip), a request (qubits, dtype, policy; defaults
 * from the input), a scenario (or the built-in default mesh) and an output choice. Out: the plan
 * used, the state materialized on the simulated mesh (or the CUDA backend), the norm check, and
 * the output file(s), written atomically. Nothing is allocated on a device before the plan is known
 * to fit; nothing is left under an output name when any step fails.
 */
#ifndef QM_ENCODE_H
#define QM_ENCODE_H

#include "io.h"
#include "materialize_internal.h"
#include "plan.h"

#include <stdio.h>

typedef enum qm_backend_choice {
    QM_BACKEND_AUTO = 0, /* sim (the scenario's devices) */
    QM_BACKEND_SIM,
    QM_BACKEND_CUDA,
} qm_backend_choice;

typedef struct qm_encode_job {
    const char *input;        /* path */
    const char *scenario;     /* NULL: the built-in default mesh */
    qm_request request;       /* qubits 0: smallest n with 2^n >= features; dtype as set by
                                 dtype_given, else from the input */
    bool dtype_given;
    bool qubits_given;        /* --qubits was given (then 0 is an error, not the default) */
    qm_csv_options csv;
    qm_backend_choice backend;
    const char *out;          /* gathered .npy, or NULL */
    const char *out_dir;      /* per-shard .npy + manifest.json, or NULL */
    uint64_t chunk_bytes;     /* staging chunk; 0 = default */
    FILE *progress;           /* diagnostics of a failed scenario load (NULL: none) */
    bool show_progress;       /* a progress line on stderr while materializing (a terminal) */
    struct qm_comm *comm;     /* ranks of an mpirun job (NULL: one process); borrowed */
} qm_encode_job;

typedef struct qm_encode_result {
    qm_plan *plan;            /* owned: qm_encode_result_fini */
    qm_mesh *mesh;
    qm_topology *topology;
    qm_topo_graph *graph;
    char scenario_name[256];
    uint64_t batch, features;
    qm_dtype input_dtype;
    double seconds_read_plan, seconds_materialize, seconds_check, seconds_output;
    qm_materialize_times phases; /* materialize's phases on this rank */
    double norm_max_error;    /* max over states of |sum |psi|^2 - 1| */
    uint64_t norm_worst_state;
    int n_files;              /* output files written */
} qm_encode_result;

void qm_encode_job_init(qm_encode_job *job);
/* Run the job. On failure st holds the error; result keeps what was known (the plan, when one was
 * made, so an infeasible request can still be shown). Always call qm_encode_result_fini. */
qm_code qm_encode_run(const qm_encode_job *job, qm_encode_result *result, qm_status *st);
void qm_encode_result_fini(qm_encode_result *result);

#endif
