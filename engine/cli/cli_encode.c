#define _POSIX_C_SOURCE 200809L /* sigaction */
/* cli_encode.c — `qmesh encode`: the main job.
 *
 * Its flags are the table encode_flags at the end of the file (the help prints the same table).
 * Prints the plan used, per-phase times measured on this machine and the norm check (a table), or
 * with --json one object of the same shape on every outcome (the plan filled once planned, the
 * encode's members once it ran; error set on failure); errors as one line `error[CODE]: ...` with
 * exit 1 (2 for usage errors).
 *
 * Run lifecycle (docs/io.md): SIGINT and SIGTERM set a flag the job polls at safe points (the run
 * then cleans up on its normal path and exits 130 / 143 with one E-INTERRUPTED line); a second
 * signal ends the process at once (the next run removes its temporaries). SIGXFSZ is ignored, so
 * a file-size limit is a write error (E-OUTPUT) rather than a silent death. The test switches are
 * read here, once, and handed to the library through the job: QM_FAULT_RANK=R:PHASE:MODE[:BATCH]
 * (qm_encode_fault_parse) and QM_FAULT_IO=K[:EIO|ENOSPC|EFBIG] or QM_FAULT_IO=count (prints
 * "fault: N I/O steps" on stderr at exit, per rank; QM_FAULT_IO_RANK=R limits K to one rank),
 * and QM_FAULT_READ=K[:EIO|SHORT] (the K-th data pread of the .npy reader fails: qm_io_read_fault_set).
 */
#include "cli_internal.h"
#include "comm.h"
#include "encode.h"
#include "plan_output.h"
#include "status_internal.h"
#include "units.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

static volatile sig_atomic_t g_cancel;

static void on_signal(int sig)
{
    if (g_cancel) { /* the second one: stop now */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_cancel = sig;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN);
}

/* QM_FAULT_IO=K[:EIO|ENOSPC|EFBIG] | count; returns 0, or 2 after a usage error. */
static int io_fault_from_env(int rank, bool *count)
{
    const char *v = getenv("QM_FAULT_IO");
    *count = false;
    if (!v || !*v)
        return 0;
    const char *only = getenv("QM_FAULT_IO_RANK");
    if (only && *only && atoi(only) != rank)
        return 0;
    if (strcmp(v, "count") == 0) {
        *count = true;
        qm_io_fault_set(0, 0);
        return 0;
    }
    char *end = NULL;
    const long k = strtol(v, &end, 10);
    int err = EIO;
    if (end && *end == ':') {
        if (strcmp(end + 1, "ENOSPC") == 0)
            err = ENOSPC;
        else if (strcmp(end + 1, "EFBIG") == 0)
            err = EFBIG;
        else if (strcmp(end + 1, "EIO") != 0)
            end = NULL;
        else
            err = EIO;
        if (end)
            end += strlen(end);
    }
    if (!end || *end || k < 1)
        return qm_cli_usage_error("encode", "QM_FAULT_IO takes K[:EIO|ENOSPC|EFBIG] with K >= 1, "
                                  "or count (got '%s')", v);
    qm_io_fault_set(k, err);
    return 0;
}

/* QM_FAULT_READ=K[:EIO|SHORT]: the K-th data pread of the .npy reader fails; returns 0, or 2 after
 * a usage error. */
static int read_fault_from_env(void)
{
    const char *v = getenv("QM_FAULT_READ");
    if (!v || !*v)
        return 0;
    char *end = NULL;
    const long k = strtol(v, &end, 10);
    int err = EIO;
    if (end && strcmp(end, ":SHORT") == 0)
        err = -1;
    else if (end && (strcmp(end, ":EIO") == 0 || *end == '\0'))
        err = EIO;
    else
        end = NULL;
    if (!end || k < 1)
        return qm_cli_usage_error("encode", "QM_FAULT_READ takes K[:EIO|SHORT] with K >= 1 (got "
                                  "'%s')", v);
    qm_io_read_fault_set(k, err);
    return 0;
}

/* The members of encode's JSON object. plan is the plan object of `qmesh plan --json` (also for an
 * infeasible plan); the others are null until the encode has run. */
static const char *const encode_json[] = {"input", "plan", "seconds", "measured_s", "norm_check",
                                          "output", "files", "phantom", "stream", NULL};

static void put_plan_json(const qm_encode_result *r)
{
    json_t *plan = NULL;
    qm_status st;
    if (r->batch_plan_json && (plan = json_loads(r->batch_plan_json, 0, NULL)))
        qm_cli_json_put(json_pack("{s:o}", "plan", plan));
    else if (r->pipeline.plan && qm_plan_to_json(r->pipeline.plan, r->pipeline.mesh,
                                            qm_topology_label(r->pipeline.topology), &plan,
                                            &st) == QM_OK)
        qm_cli_json_put(json_pack("{s:o}", "plan", plan));
}

static void put_json(const qm_encode_result *r, const char *out, const char *out_dir)
{
    put_plan_json(r);
    json_t *o = json_object(), *times = json_object(), *check = json_object();
    json_object_set_new(o, "input", json_pack("{s:s, s:I, s:I}", "dtype",
                                              qm_dtype_name(r->input_dtype), "samples",
                                              (json_int_t)r->batch, "features",
                                              (json_int_t)r->features));
    json_object_set_new(times, "read_and_plan", json_real(r->seconds_read_plan));
    json_object_set_new(times, "materialize", json_real(r->seconds_materialize));
    json_object_set_new(times, "check_and_output", json_real(r->seconds_output));
    json_object_set_new(times, "check", json_real(r->seconds_check));
    json_object_set_new(times, "backend_start", json_real(r->seconds_backend_start));
    json_object_set_new(times, "backend_wait", json_real(r->seconds_backend_wait));
    json_object_set_new(o, "seconds", times);
    /* materialize's phases and the data path as measured on this rank, keyed as the plan's
     * estimates_s (write: null without an output) */
    json_object_set_new(o, "measured_s",
                        json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:o}", "ingest", r->phases.ingest,
                                  "local_norm", r->phases.local_norm, "norm_allreduce",
                                  r->phases.norm_allreduce, "encode", r->phases.encode, "read",
                                  r->read_s, "staging", r->staging_s, "write",
                                  r->write_s >= 0 ? json_real(r->write_s) : json_null()));
    json_object_set_new(check, "max_abs_error", json_real(r->norm_max_error));
    json_object_set_new(check, "worst_state", json_integer((json_int_t)r->norm_worst_state));
    json_object_set_new(o, "norm_check", check);
    json_object_set_new(o, "output", out ? json_string(out) : out_dir ? json_string(out_dir) : json_null());
    json_object_set_new(o, "files", json_integer(r->n_files));
    if (r->batches) /* a streamed run: its batches, rate, times and memory high-water marks */
        json_object_set_new(
            o, "stream",
            json_pack("{s:I, s:I, s:i, s:f, s:{s:f, s:f, s:f, s:f, s:f}, s:I, s:i, s:I, s:I}",
                      "batches", (json_int_t)r->batches, "batch_size", (json_int_t)r->batch_size,
                      "prefetch", r->prefetch, "samples_per_s", r->samples_per_s, "seconds",
                      "read", r->seconds_read, "wait", r->seconds_wait, "materialize",
                      r->seconds_materialize, "output", r->seconds_output, "total",
                      r->seconds_total, "batch_input_bytes", (json_int_t)r->batch_input_bytes,
                      "input_buffers", r->input_buffers, "input_bytes_peak",
                      (json_int_t)r->input_bytes_peak, "device_bytes_peak",
                      (json_int_t)r->device_bytes_peak));
    qm_cli_json_put(o);
}

/* `--batch-size B [--prefetch K]`: into the job; 2 after a usage error, else 0. */
static int stream_flags(const qm_cli_args *args, qm_encode_job *job)
{
    const char *b = qm_cli_arg(args, "--batch-size"), *k = qm_cli_arg(args, "--prefetch");
    if (!b && k)
        return qm_cli_usage_error("encode", "--prefetch %s needs --batch-size B (it sets how many "
                                  "batches are read ahead)", k);
    if (!b)
        return 0;
    char *end = NULL;
    const unsigned long long v = strtoull(b, &end, 10);
    if (b[0] < '0' || b[0] > '9' || !end || *end || v == 0)
        return qm_cli_usage_error("encode", "--batch-size takes a whole number of samples >= 1 "
                                  "(got '%s')", b);
    if (qm_cli_arg(args, "--phantom"))
        return qm_cli_usage_error("encode", "--batch-size and --phantom exclude each other (a "
                                  "phantom run plans the whole input once)");
    job->batch_size = v;
    job->prefetch = 2;
    if (k) {
        const long p = strtol(k, &end, 10);
        if (k[0] < '0' || k[0] > '9' || !end || *end || p > 64)
            return qm_cli_usage_error("encode", "--prefetch takes a number of batches 0..64 (got "
                                      "'%s')", k);
        job->prefetch = (int)p;
    }
    return 0;
}

/* The table of a streamed run (after its input line). */
static void print_stream(const qm_encode_result *r, const qm_encode_job *job)
{
    char a[32], b[32], c[32], d[32], e[32];
    printf("stream:   %llu batch%s of up to %llu sample%s (prefetch %d), %u qubits, %s, %s "
           "backend\n", (unsigned long long)r->batches, r->batches == 1 ? "" : "es",
           (unsigned long long)r->batch_size, r->batch_size == 1 ? "" : "s", r->prefetch,
           r->qubits, qm_dtype_name(r->dtype), job->backend == QM_BACKEND_CUDA ? "cuda" : "sim");
    printf("rate:     %.1f samples/s (%llu samples in %s of batches)\n", r->samples_per_s,
           (unsigned long long)r->batch,
           qm_format_seconds(r->samples_per_s > 0 ? (double)r->batch / r->samples_per_s : 0, a,
                             sizeof a));
    printf("times:    read %s (reader thread), wait %s, materialize %s, check+output %s, total "
           "%s\n", qm_format_seconds(r->seconds_read, a, sizeof a),
           qm_format_seconds(r->seconds_wait, b, sizeof b),
           qm_format_seconds(r->seconds_materialize, c, sizeof c),
           qm_format_seconds(r->seconds_output, d, sizeof d),
           qm_format_seconds(r->seconds_total, e, sizeof e));
    printf("memory:   input held at most %s (a pool of %d buffers of %s), device peak %s\n",
           qm_format_bytes(r->input_bytes_peak, a, sizeof a), r->input_buffers,
           qm_format_bytes(r->batch_input_bytes, b, sizeof b),
           qm_format_bytes(r->device_bytes_peak, c, sizeof c));
}

/* --phantom: the request from the input's shape (a .npy header; a CSV file is parsed), the plan,
 * and every shard accounted on a phantom mesh; no values are encoded and nothing is written. */
static int encode_phantom(const qm_encode_job *job, bool json)
{
    qm_status st;
    qm_status_clear(&st);
    if (job->out || job->out_dir) {
        qm_fail(&st, QM_E_ARG, "encode --phantom: %s %s would need the amplitudes, which a phantom "
                "mesh does not hold; drop it (the plan and per-device bytes are printed)",
                job->out ? "--out" : "--out-dir", job->out ? job->out : job->out_dir);
        return qm_cli_error(&st);
    }
    if (job->backend == QM_BACKEND_CUDA) {
        qm_fail(&st, QM_E_ARG, "encode --phantom: --backend cuda allocates device memory; a phantom "
                "run uses the simulated mesh only");
        return qm_cli_error(&st);
    }
    /* the input as encode would read it (--dataset, --drop-column): the header only */
    qm_input_file f;
    if (qm_input_open(job->input, &job->csv, job->dataset, &f, &st) != QM_OK)
        return qm_cli_error(&st);
    const uint64_t rows = f.in.batch ? f.in.batch : 1, features = f.in.n;
    const qm_dtype dt = f.in.dtype;
    qm_input_close(&f);
    qm_request r = job->request;
    if (r.qubits == 0 && !job->qubits_given)
        r.qubits = qm_qubits_for_values(features);
    if (!job->dtype_given)
        r.dtype = dt == QM_DTYPE_FLOAT64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    r.batch = rows;
    r.features = features;
    return qm_cli_phantom("encode", job->scenario, &r, json);
}

static int run_encode(const qm_cli_args *args)
{
    qm_status st;
    qm_status_clear(&st);
    qm_encode_job job;
    qm_encode_job_init(&job);
    const bool json = args->json;
    const char *v;
    job.input = qm_cli_arg(args, "--input");
    job.scenario = qm_cli_arg(args, "--scenario");
    job.out = qm_cli_arg(args, "--out");
    job.out_dir = qm_cli_arg(args, "--out-dir");
    job.dataset = qm_cli_arg(args, "--dataset");
    job.force = qm_cli_arg(args, "--force") != NULL;
    job.dtype_given = qm_cli_arg(args, "--dtype") != NULL;
    job.qubits_given = qm_cli_arg(args, "--qubits") != NULL;
    if ((v = qm_cli_arg(args, "--backend"))) {
        if (strcmp(v, "sim") == 0)
            job.backend = QM_BACKEND_SIM;
        else if (strcmp(v, "cuda") == 0)
            job.backend = QM_BACKEND_CUDA;
        else
            return qm_cli_usage_error("encode", "unknown backend '%s'; use sim or cuda", v);
    }
    const int csv_usage = qm_cli_csv_options(args, "encode", &job.csv);
    if (csv_usage != 0)
        return csv_usage;
    if ((v = qm_cli_arg(args, "--read-threads"))) {
        char *end = NULL;
        errno = 0;
        const long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < 1 || n > QM_NPY_MAX_THREADS)
            return qm_cli_usage_error("encode", "--read-threads takes a thread count in [1, %d] "
                                      "(got '%s')", QM_NPY_MAX_THREADS, v);
        job.read_threads = (int)n;
    }
    if ((v = qm_cli_arg(args, "--chunk-bytes"))) {
        uint64_t u;
        if (qm_units_parse_size(v, &u, &st) != QM_OK) {
            qm_status_prefix(&st, "encode --chunk-bytes");
            return qm_cli_error(&st);
        }
        job.chunk_bytes = u;
    }
    if (qm_cli_request_parse(args, &job.request, &st) != QM_OK)
        return qm_cli_error(&st);
    if (stream_flags(args, &job) != 0)
        return 2;
    if (!job.input)
        return qm_cli_usage_error("encode", "%s is required", "--input FILE");
    if (qm_cli_arg(args, "--phantom"))
        return encode_phantom(&job, json);
    if (!job.scenario && job.backend != QM_BACKEND_CUDA)
        fprintf(stderr, "qmesh: no --scenario given: using the built-in simulated mesh\n");
    const char *fr = getenv("QM_FAULT_RANK");
    if (fr && *fr && qm_encode_fault_parse(fr, &job.fault, &st) != QM_OK) {
        qm_cli_error(&st);
        return 2;
    }
    job.progress = stderr;
    job.show_progress = isatty(2);
    install_signals();
    job.cancel = &g_cancel;
    /* under mpirun (Open MPI, or a PMI/PMIx launcher): one rank per process */
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (!ws)
        ws = getenv("PMI_SIZE");
    qm_comm *comm = NULL;
    if (ws && atoi(ws) > 1) {
        if (qm_comm_mpi_create(NULL, NULL, &comm, &st) != QM_OK)
            return qm_cli_error(&st);
        job.comm = comm;
    }
    const bool root = !comm || qm_comm_rank(comm) == 0;
    if (!root)
        qm_cli_json_silence(); /* rank 0 prints the one object */
    bool count_io = false;
    if (io_fault_from_env(comm ? qm_comm_rank(comm) : 0, &count_io) != 0 ||
        read_fault_from_env() != 0) {
        qm_comm_destroy(comm);
        return 2;
    }
    qm_encode_result r;
    qm_code rc = job.batch_size ? qm_encode_stream_run(&job, &r, &st)
                                : qm_encode_run(&job, &r, &st);
    if (count_io)
        fprintf(stderr, "fault: %ld I/O steps (rank %d)\n", qm_io_fault_steps(),
                comm ? qm_comm_rank(comm) : 0);
    if (root && r.n_stale_removed > 0)
        fprintf(stderr, "qmesh: removed %d temporar%s left by runs that no longer exist\n",
                r.n_stale_removed, r.n_stale_removed == 1 ? "y" : "ies");
    /* interrupted: 128 + the signal, as a shell reports it (the rank that saw the signal set it) */
    const int interrupted =
        rc == QM_E_INTERRUPTED ? 128 + (st.backend_code > 0 ? st.backend_code : SIGINT) : 0;
    int exit_code = 0;
    if (rc != QM_OK && !root) {
        /* every rank failed with the same message: rank 0 prints it */
        qm_encode_result_fini(&r);
        qm_comm_destroy(comm);
        return interrupted ? interrupted : 1;
    }
    if (rc == QM_OK && !root) {
        qm_encode_result_fini(&r);
        qm_comm_destroy(comm);
        return 0;
    }
    if (rc != QM_OK) {
        if (json) /* the plan when there is one (an infeasible plan, or bad data after planning) */
            put_plan_json(&r);
        exit_code = qm_cli_error(&st);
        qm_encode_result_fini(&r);
        qm_comm_destroy(comm);
        return interrupted ? interrupted : exit_code;
    }
    if (json) {
        put_json(&r, job.out, job.out_dir);
    } else {
        char a[32], b[32], c[32];
        printf("input:    %s: %llu sample%s x %llu features, %s\n", job.input,
               (unsigned long long)r.batch, r.batch == 1 ? "" : "s", (unsigned long long)r.features,
               qm_dtype_name(r.input_dtype));
        if (r.batches)
            print_stream(&r, &job);
        else
            qm_plan_print(r.pipeline.plan, r.pipeline.mesh, r.pipeline.topology, stdout);
        char d[32];
        if (!r.batches)
            printf("\ntimes:    read+plan %s, materialize %s, check+output %s (the check on the "
                   "devices %s)\n", qm_format_seconds(r.seconds_read_plan, a, sizeof a),
               qm_format_seconds(r.seconds_materialize, b, sizeof b),
               qm_format_seconds(r.seconds_output, c, sizeof c),
               qm_format_seconds(r.seconds_check, d, sizeof d));
        if (!r.batches && job.backend == QM_BACKEND_CUDA)
            printf("cuda:     start-up %s on its own thread, of which %s not hidden behind "
                   "read+plan\n", qm_format_seconds(r.seconds_backend_start, a, sizeof a),
                   qm_format_seconds(r.seconds_backend_wait, b, sizeof b));
        char p0[32], p1[32], p2[32], p3[32];
        printf("measured on this machine (%s backend): ingest %s, local_norm %s, norm_allreduce "
               "%s, encode %s (materialize's phases%s)\n",
               job.backend == QM_BACKEND_CUDA ? "cuda" : "sim",
               qm_format_seconds(r.phases.ingest, p0, sizeof p0),
               qm_format_seconds(r.phases.local_norm, p1, sizeof p1),
               qm_format_seconds(r.phases.norm_allreduce, p2, sizeof p2),
               qm_format_seconds(r.phases.encode, p3, sizeof p3),
               r.batches ? ", summed over the batches"
                         : "; the estimates above are for the scenario's hardware");
        printf("data path measured: read %s, staging %s, write %s\n",
               qm_format_seconds(r.read_s, p0, sizeof p0),
               qm_format_seconds(r.staging_s, p1, sizeof p1),
               r.write_s >= 0 ? qm_format_seconds(r.write_s, p2, sizeof p2) : "n/a (no output)");
        printf("norm:     max |sum |psi|^2 - 1| = %.3e over %llu state%s (worst: state %llu)\n",
               r.norm_max_error, (unsigned long long)r.batch, r.batch == 1 ? "" : "s",
               (unsigned long long)r.norm_worst_state);
        if (job.out)
            printf("output:   %s\n", job.out);
        else if (job.out_dir)
            printf("output:   %s/ (%d files)\n", job.out_dir, r.n_files);
    }
    if (comm)
        printf("ranks:    %d (MPI), each reading and encoding its own range\n", qm_comm_size(comm));
    qm_encode_result_fini(&r);
    qm_comm_destroy(comm);
    return exit_code;
}

static const qm_cli_flag encode_flags[] = {
    {"--input", "FILE", "the data (required): .npy (float32/float64 or integers, 1-D or 2-D), HDF5 "
                        "or CSV, plain or gzip"},
    {"--dataset", "NAME", "HDF5 input: the dataset to read (default: the file's only dataset)"},
    {"--qubits", "N", "qubits per state (default: the smallest N with 2^N >= features)"},
    {"--dtype", "complex64|complex128", "amplitude type (default: complex128 for float64 input, "
                                        "complex64 for float32)"},
    {"--policy", "P", "auto (default), single, equal, weighted, balanced or replicated"},
    {"--encoding", "E", "amplitude (default), angle, basis, phase, iqp or iqp-z"},
    {"--gather", "auto|host|none|DEVICE", "where a gathered state would go (planned; default auto)"},
    {"--ranks", "R", "processes the devices are split over (default: the scenario's)"},
    {"--scenario", "FILE", "the scenario to run on; default: the GPUs, else the built-in mesh"},
    {"--backend", "sim|cuda", "simulated devices, or this machine's CUDA GPUs"},
    {"--out", "FILE.npy", "write the whole state as one complex .npy"},
    {"--out-dir", "DIR", "write one .npy per shard and manifest.json into DIR"},
    {"--force", NULL, "with --out-dir: replace a non-empty directory that is not a qmesh output"},
    QM_CLI_CSV_FLAGS,
    {"--chunk-bytes", "SIZE", "host staging size per read or write step (e.g. 64MiB)"},
    {"--batch-size", "B", "stream the input in batches of B samples (read ahead while encoding); "
                          "the output is the one-shot encode's"},
    {"--prefetch", "K", "with --batch-size: batches read ahead, 0..64 (default 2)"},
    {"--read-threads", "N", ".npy input: threads reading each chunk (1..64; default "
                            "QM_READ_THREADS, else min(32, CPUs))"},
    {"--phantom", NULL, "plan and reserve every shard on a phantom mesh (no memory, no output): "
                        "bytes per device"},
    {"--json", NULL, "print one JSON object (docs/cli.md) instead of the table"},
    {NULL, NULL, NULL}};

const qm_cli_command qm_cli_cmd_encode = {
    .name = "encode",
    .summary = "encode .npy, HDF5 or CSV data (amplitude, angle, basis, phase, iqp, iqp-z) into "
               "a state sharded over the mesh's devices",
    .flags = encode_flags, .json_members = encode_json, .run = run_encode};
