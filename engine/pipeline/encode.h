/* encode.h — the whole encode request, file to file: the job `qmesh encode` runs.
 *
 * In: an input file (.npy or CSV, optionally gzip), a request (qubits, dtype, policy; defaults
 * from the input), a scenario (or the built-in default mesh) and an output choice. Out: the plan
 * used, the state materialized on the simulated mesh (or the CUDA backend), the norm check, and
 * the output file(s), written atomically. Nothing is allocated on a device before the plan is known
 * to fit; nothing is left under an output name when any step fails.
 *
 * Run lifecycle (docs/io.md "Run lifecycle"): the output paths are checked right after the plan,
 * before any device or host work (qm_out_check: E-OUTPUT); temporaries of dead runs are removed
 * then (qm_out_stale_sweep); the norm check decides before anything is committed (E-NUMERIC); the
 * ranks vote once before the commit; a cancel flag (set by the CLI's SIGINT/SIGTERM handler) is
 * honoured at the phase points and between read-back chunks (E-INTERRUPTED, temporaries removed).
 * Deterministic faults for tests (qm_encode_fault, from QM_FAULT_RANK) fire at the named phases.
 */
#ifndef QM_ENCODE_H
#define QM_ENCODE_H

#include "io.h"
#include "materialize_internal.h"
#include "pipeline.h"
#include "plan.h"

#include <signal.h>
#include <stdio.h>

/* Named points of qm_encode_run, in order (QM_FAULT_RANK=R:PHASE:MODE; docs/io.md):
 *   plan        after every rank holds the same plan, before the output checks
 *   materialize before the state is materialized (after the output checks)
 *   readback    before this rank reads back its first chunk of the state (the gathered --out of a
 *               rank other than 0 keeps sending every chunk after a failure here, so rank 0 is
 *               never left waiting in a receive)
 *   write       this rank's output data is in its temporaries (not yet synced)
 *   check       before the norm check, which runs on the devices (every temporary synced)
 *   commit      before the ranks vote on committing (nothing renamed yet)
 *   swap        rank 0 only: the new output is in place, the previous content not yet removed */
typedef enum qm_enc_phase {
    QM_ENC_PHASE_NONE = 0,
    QM_ENC_PHASE_PLAN,
    QM_ENC_PHASE_MATERIALIZE,
    QM_ENC_PHASE_READBACK,
    QM_ENC_PHASE_WRITE,
    QM_ENC_PHASE_CHECK,
    QM_ENC_PHASE_COMMIT,
    QM_ENC_PHASE_SWAP,
} qm_enc_phase;

typedef enum qm_enc_fault_mode {
    QM_ENC_FAULT_NONE = 0,
    QM_ENC_FAULT_FAIL,    /* a coded error (E-BACKEND "injected failure") through the verdicts */
    QM_ENC_FAULT_EXIT,    /* _exit(3): no cleanup, no MPI_Finalize, as a crash */
    QM_ENC_FAULT_KILL,    /* raise(SIGKILL) */
    QM_ENC_FAULT_SIGINT,  /* raise(SIGINT): the CLI's handler sets the cancel flag */
    QM_ENC_FAULT_SIGTERM, /* raise(SIGTERM) */
    QM_ENC_FAULT_NAN,     /* this rank's first amplitude becomes NaN on its device (phase check) */
    QM_ENC_FAULT_SKEW,    /* ... gets 0.001 added to its real part (phase check) */
} qm_enc_fault_mode;

typedef struct qm_encode_fault {
    int rank;               /* the rank it fires on (0 in one process) */
    uint64_t batch;         /* a streamed run (--batch-size): the batch it fires at (0: the first;
                               a one-shot run is batch 0) */
    qm_enc_phase phase;     /* QM_ENC_PHASE_NONE: no fault */
    qm_enc_fault_mode mode;
} qm_encode_fault;

/* Parse "R:PHASE:MODE[:BATCH]" (e.g. "1:commit:kill", "0:materialize:sigint:3"); E-ARG naming the
 * bad part and the accepted words. nan and skew take the phase check only. */
qm_code qm_encode_fault_parse(const char *spec, qm_encode_fault *out, qm_status *st);
const char *qm_enc_phase_name(qm_enc_phase phase);

typedef struct qm_encode_job {
    const char *input;        /* path */
    const char *scenario;     /* NULL: the built-in default mesh */
    qm_request request;       /* qubits 0: smallest n with 2^n >= features; dtype as set by
                                 dtype_given, else from the input */
    bool dtype_given;
    bool qubits_given;        /* --qubits was given (then 0 is an error, not the default) */
    qm_csv_options csv;
    const char *dataset;      /* HDF5 input: the dataset (--dataset); NULL: the file's only one */
    qm_backend_kind backend;  /* AUTO: sim (the scenario's devices) */
    uint64_t host_available_bytes; /* sim in one process: this machine's available memory for the
                                      host-memory check; 0: read it (QM_MEMAVAILABLE, else /proc) */
    const char *out;          /* gathered .npy, or NULL */
    const char *out_dir;      /* per-shard .npy + manifest.json, or NULL */
    uint64_t chunk_bytes;     /* staging chunk; 0 = default */
    int read_threads;         /* --read-threads: threads of a .npy reader; 0 = QM_READ_THREADS or
                                 min(32, CPUs) (docs/io.md "Reading in parallel") */
    FILE *progress;           /* diagnostics of a failed scenario load (NULL: none) */
    bool show_progress;       /* a progress line on stderr while materializing (a terminal) */
    struct qm_comm *comm;     /* ranks of an mpirun job (NULL: one process); borrowed */
    bool force;               /* --force: replace an --out-dir that is not a qmesh output */
    /* nonzero (the signal number) asks the run to stop at the next safe point with E-INTERRUPTED
     * (st->backend_code = the signal); NULL: never. Set from a signal handler. */
    const volatile sig_atomic_t *cancel;
    qm_encode_fault fault;    /* a deterministic fault for tests (phase NONE: off) */
    uint64_t batch_size;      /* > 0: stream the input in batches of this many samples
                                 (qm_encode_stream_run); 0: one shot */
    int prefetch;             /* a streamed run: batches read ahead (qm_stream_options) */
} qm_encode_job;

typedef struct qm_encode_result {
    qm_pipeline pipeline;     /* owned: qm_encode_result_fini (topology, mesh, plan, layout;
                                 the backend is closed before qm_encode_run returns) */
    uint64_t batch, features;
    qm_dtype input_dtype;
    double seconds_read_plan, seconds_materialize, seconds_check, seconds_output;
    /* --backend cuda: the CUDA start-up (runtime and primary context) as timed on the thread that
     * ran it while the input header was read, the plan made and the outputs checked, and how long
     * the run then waited for it before opening the backend (the part not hidden); 0 otherwise */
    double seconds_backend_start, seconds_backend_wait;
    qm_materialize_times phases; /* materialize's phases on this rank */
    /* the data path measured on this rank (docs/planner.md "Data path"): read = opening the input
     * (a CSV file's rows counted there) + the seconds inside the input's reader; staging = the
     * ingest's seconds outside the reader; write = read-back, output and commit (seconds_output
     * less the norm check, which runs on the devices) when an output was asked for, else -1 */
    double read_open_s, read_s, staging_s, write_s;
    double norm_max_error;    /* max over states of |sum |psi|^2 - 1| */
    uint64_t norm_worst_state;
    int n_files;              /* output files written */
    int input_ndim;           /* 1 or 2: the output keeps it ((2^n,) or (B, 2^n)) */
    int n_stale_removed;      /* temporaries of dead runs removed before this run's work */
    /* a streamed run (qm_encode_stream_run) */
    unsigned qubits;
    qm_dtype dtype;
    uint64_t batches, batch_size;
    int prefetch, input_buffers;
    uint64_t batch_input_bytes, input_bytes_peak, device_bytes_peak;
    double seconds_read, seconds_wait, seconds_total, samples_per_s;
    char *batch_plan_json;    /* the plan of a full batch (JSON text; freed by fini) */
} qm_encode_result;

/* The request of an input, as `qmesh encode` makes it: qubits (when 0 and not given) from the
 * values per sample by the encoding (amplitude: the smallest n with 2^n >= F; basis: the fewest
 * that hold the largest index, the input scanned in chunks; E-INPUT when F makes no state), batch
 * and features from the input. The dtype is the caller's. Shared by the one-shot and the streamed
 * encode. */
qm_code qm_encode_request_complete(qm_request *req, bool qubits_given, const qm_amp_input *in,
                                   qm_status *st);
/* basis takes one index per sample: a 1-D input of B values becomes B samples of one value
 * (*ndim 2, the output (B, 2^n)); a 2-D input must have one column (E-INPUT otherwise). */
qm_code qm_encode_basis_shape(qm_amp_input *in, int *ndim, qm_status *st);

void qm_encode_job_init(qm_encode_job *job);
/* The job's input opened as encode opens it (job->input, csv, dataset; `stream`: as a stream
 * reads it, qm_input_open_stream: a CSV file's rows counted and read batch by batch, else
 * qm_input_open: a CSV file's rows counted and read by ranges) and the request encode derives
 * from it: qubits when not
 * given (amplitude: the fewest that hold the values; basis: the largest index; the feature maps:
 * from the value count), dtype from the input when not given, batch and features from the
 * input's shape (basis: one index per sample). *in and *ndim are the input as encoded. E-INPUT,
 * E-IO and the readers' codes; the caller closes *file. */
qm_code qm_encode_input_open(const qm_encode_job *job, bool stream, qm_input_file *file,
                             qm_amp_input *in, int *ndim, qm_request *req, qm_status *st);
/* The data path of a job for the cost model: the input file (NULL: none; CSV: its size on disk)
 * and the fraction of it in the page cache (qm_discover_file_resident), the output (--out: the
 * .npy's bytes for req; --out-dir), staging as the simulator's host copy unless the backend is
 * CUDA. E-ARG only for a malformed QM_INPUT_RESIDENT (the residency test hook). */
qm_code qm_encode_datapath(const qm_encode_job *job, const qm_input_file *file,
                           const qm_amp_input *in, int ndim, const qm_request *req, qm_datapath *dp,
                           qm_status *st);
/* Run the job. On failure st holds the error; result keeps what was known (the plan, when one was
 * made, so an infeasible request can still be shown). Always call qm_encode_result_fini. */
qm_code qm_encode_run(const qm_encode_job *job, qm_encode_result *result, qm_status *st);
void qm_encode_result_fini(qm_encode_result *result);

/* The job in batches (encode_stream.c; job->batch_size > 0): a qm_stream over the input (reading
 * ahead job->prefetch batches), each batch's state read back into the output and norm-checked
 * before the next is taken, then the whole output committed at once: --out one (samples, 2^n)
 * .npy written in order into its temporary (byte for byte the one-shot file), --out-dir one
 * batch-NNNNNN.npy per batch and manifest.json (format qmesh-batches/1) in a temporary directory
 * swapped in; no output: encode and check only. One process only (E-UNSUPPORTED under mpirun).
 * The faults of QM_FAULT_RANK fire at their phase of batch fault.batch (plan and commit: once).
 * Errors and cleanup as qm_encode_run. */
qm_code qm_encode_stream_run(const qm_encode_job *job, qm_encode_result *result, qm_status *st);

/* ---- shared by the one-shot and the streamed run (encode.c) ---------------------------------- */

/* E-INTERRUPTED ("interrupted by SIGINT; nothing was written") when the cancel flag is set. */
qm_code qm_encode_check_cancel(const qm_encode_job *job, qm_status *st);
/* The job's fault when it is for this rank, phase and batch; then the cancel flag. A failure in
 * rc passes through unchanged. */
qm_code qm_encode_fault_point(const qm_encode_job *job, int me, qm_enc_phase ph, uint64_t batch,
                              qm_code rc, qm_status *st);

/* The one-shot run's output path, for the streamed run: QM_OUT_BUFS page-locked staging buffers
 * (of hal: any CUDA device's copies read them at full speed) and writer threads (io_pool.c) that
 * pwrite each chunk at its offset while the next chunk is copied; simulated device memory is
 * written from where it lies. open once per run, write per batch (amplitudes [0, n) of s to
 * elements [at, at + n) of w, returning once every write has finished: the first failure), close
 * at the end (joins the threads, frees the staging; NULL is a no-op). */
typedef struct qm_encode_out qm_encode_out;
qm_code qm_encode_out_open(const qm_encode_job *job, qm_hal *hal, qm_dtype dtype,
                           qm_encode_out **out, qm_status *st);
qm_code qm_encode_out_write(qm_encode_out *o, const qm_state *s, uint64_t n, qm_npy_writer *w,
                            uint64_t at, qm_status *st);
void qm_encode_out_close(qm_encode_out *o);
/* QM_FAULT_RANK's nan and skew at the check: the state's first amplitude (of its shard 0) made NaN
 * or given 0.001 more real part where it lives, on its device, so a check on the devices sees it. */
qm_code qm_encode_corrupt_first(const qm_state *s, qm_enc_fault_mode mode, qm_status *st);
/* The norm check of states [first, first + batch) (docs/io.md "The norm check"): E-NUMERIC
 * naming the state; r's norm_max_error and norm_worst_state kept over the run. */
qm_code qm_encode_norm_check(qm_encode_result *r, const double *sums, uint64_t first,
                             uint64_t batch, unsigned qubits, qm_dtype dtype, uint64_t n_amps,
                             qm_status *st);

#endif
