#define _POSIX_C_SOURCE 200809L /* sigaction */
/* cli_encode.c — `qmesh encode`: the main job.
 *
 * qmesh encode --input FILE [--qubits N] [--dtype complex64|complex128] [--policy P]
 *              [--scenario FILE] [--backend sim|cuda] [--out FILE.npy | --out-dir DIR [--force]]
 *              [--drop-column NAME|INDEX] [--header auto|yes|no] [--json]
 * Prints the plan used, per-phase times and the norm check (a table, or one JSON object);
 * errors as one line `error[CODE]: ...` with exit 1 (2 for usage errors).
 *
 * Run lifecycle (docs/io.md): SIGINT and SIGTERM set a flag the job polls at safe points (the run
 * then cleans up on its normal path and exits 130 / 143 with one E-INTERRUPTED line); a second
 * signal ends the process at once (the next run removes its temporaries). SIGXFSZ is ignored, so
 * a file-size limit is a write error (E-OUTPUT) rather than a silent death. The test switches are
 * read here, once, and handed to the library through the job: QM_FAULT_RANK=R:PHASE:MODE
 * (qm_encode_fault_parse) and QM_FAULT_IO=K[:EIO|ENOSPC|EFBIG] or QM_FAULT_IO=count (prints
 * "fault: N I/O steps" on stderr at exit, per rank; QM_FAULT_IO_RANK=R limits K to one rank).
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

static int print_json(const qm_encode_result *r, const char *out, const char *out_dir)
{
    qm_status st;
    json_t *o = json_object(), *plan = NULL, *times = json_object(), *check = json_object();
    if (qm_plan_to_json(r->pipeline.plan, r->pipeline.mesh, qm_topology_label(r->pipeline.topology), &plan, &st) != QM_OK) {
        json_decref(o);
        json_decref(times);
        json_decref(check);
        return qm_cli_error(&st);
    }
    json_object_set_new(o, "input", json_pack("{s:s, s:I, s:I}", "dtype",
                                              qm_dtype_name(r->input_dtype), "samples",
                                              (json_int_t)r->batch, "features",
                                              (json_int_t)r->features));
    json_object_set_new(o, "plan", plan);
    json_object_set_new(times, "read_and_plan", json_real(r->seconds_read_plan));
    json_object_set_new(times, "materialize", json_real(r->seconds_materialize));
    json_object_set_new(times, "check_and_output", json_real(r->seconds_output));
    json_object_set_new(o, "seconds", times);
    /* materialize's phases as measured on this rank, keyed as the plan's estimates_s */
    json_object_set_new(o, "measured_s",
                        json_pack("{s:f, s:f, s:f, s:f}", "ingest", r->phases.ingest, "local_norm",
                                  r->phases.local_norm, "norm_allreduce",
                                  r->phases.norm_allreduce, "encode", r->phases.encode));
    json_object_set_new(check, "max_abs_error", json_real(r->norm_max_error));
    json_object_set_new(check, "worst_state", json_integer((json_int_t)r->norm_worst_state));
    json_object_set_new(o, "norm_check", check);
    json_object_set_new(o, "output", out ? json_string(out) : out_dir ? json_string(out_dir) : json_null());
    json_object_set_new(o, "files", json_integer(r->n_files));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return 1;
    printf("%s\n", s);
    free(s);
    return 0;
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
    uint64_t rows = 0, features = 0;
    int ndim = 0;
    qm_dtype dt = QM_DTYPE_FLOAT64;
    if (qm_input_file_shape(job->input, &rows, &features, &ndim, &dt, &st) != QM_OK)
        return qm_cli_error(&st);
    qm_request r = job->request;
    if (r.qubits == 0 && !job->qubits_given)
        r.qubits = qm_qubits_for_values(features);
    if (!job->dtype_given)
        r.dtype = dt == QM_DTYPE_FLOAT64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    r.batch = rows;
    r.features = features;
    return qm_cli_phantom("encode", job->scenario, &r, json);
}

int qm_cli_encode(int argc, char **argv)
{
    qm_status st;
    qm_status_clear(&st);
    qm_encode_job job;
    qm_encode_job_init(&job);
    bool json = false, failed = false, phantom = false;
    for (int i = 1; i < argc && !failed; ++i) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--phantom") == 0) {
            phantom = true;
        } else if (strcmp(a, "--force") == 0) {
            job.force = true;
        } else if (strcmp(a, "--input") == 0 || strcmp(a, "--scenario") == 0 ||
                   strcmp(a, "--out") == 0 || strcmp(a, "--out-dir") == 0 ||
                   strcmp(a, "--drop-column") == 0 || strcmp(a, "--backend") == 0 ||
                   strcmp(a, "--header") == 0 || strcmp(a, "--chunk-bytes") == 0) {
            if (!has_value)
                return qm_cli_usage_error("encode", "option %s needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--input") == 0)
                job.input = v;
            else if (strcmp(a, "--scenario") == 0)
                job.scenario = v;
            else if (strcmp(a, "--out") == 0)
                job.out = v;
            else if (strcmp(a, "--out-dir") == 0)
                job.out_dir = v;
            else if (strcmp(a, "--drop-column") == 0)
                job.csv.drop_column = v;
            else if (strcmp(a, "--backend") == 0) {
                if (strcmp(v, "sim") == 0)
                    job.backend = QM_BACKEND_SIM;
                else if (strcmp(v, "cuda") == 0)
                    job.backend = QM_BACKEND_CUDA;
                else
                    return qm_cli_usage_error("encode", "unknown backend '%s'; use sim or cuda", v);
            } else if (strcmp(a, "--header") == 0) {
                if (strcmp(v, "auto") == 0)
                    job.csv.header = QM_CSV_HEADER_AUTO;
                else if (strcmp(v, "yes") == 0)
                    job.csv.header = QM_CSV_HEADER_YES;
                else if (strcmp(v, "no") == 0)
                    job.csv.header = QM_CSV_HEADER_NO;
                else
                    return qm_cli_usage_error("encode", "--header takes auto, yes or no (got '%s')", v);
            } else {
                uint64_t u;
                if (qm_units_parse_size(v, &u, &st) != QM_OK) {
                    qm_status_prefix(&st, "encode --chunk-bytes");
                    return qm_cli_error(&st);
                }
                job.chunk_bytes = u;
            }
        } else {
            if (strcmp(a, "--dtype") == 0)
                job.dtype_given = true;
            if (strcmp(a, "--qubits") == 0)
                job.qubits_given = true;
            int k = qm_cli_request_option("encode", argc, argv, &i, &job.request, &st, &failed);
            if (k == 1)
                return qm_cli_usage_error("encode", "unknown option '%s'", a);
            if (k == 2)
                return 2;
        }
    }
    if (failed)
        return qm_cli_error(&st);
    if (!job.input)
        return qm_cli_usage_error("encode", "%s is required", "--input FILE");
    if (phantom)
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
    bool count_io = false;
    if (io_fault_from_env(comm ? qm_comm_rank(comm) : 0, &count_io) != 0) {
        qm_comm_destroy(comm);
        return 2;
    }
    qm_encode_result r;
    qm_code rc = qm_encode_run(&job, &r, &st);
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
        if (r.pipeline.plan && !r.pipeline.plan->feasible && json) {
            json_t *o = NULL;
            qm_status jst;
            if (qm_plan_to_json(r.pipeline.plan, r.pipeline.mesh, qm_topology_label(r.pipeline.topology), &o, &jst) == QM_OK) {
                char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (s)
                    printf("%s\n", s);
                free(s);
                json_decref(o);
            }
        }
        exit_code = qm_cli_error(&st);
        qm_encode_result_fini(&r);
        qm_comm_destroy(comm);
        return interrupted ? interrupted : exit_code;
    }
    if (json) {
        exit_code = print_json(&r, job.out, job.out_dir);
    } else {
        char a[32], b[32], c[32];
        printf("input:    %s: %llu sample%s x %llu features, %s\n", job.input,
               (unsigned long long)r.batch, r.batch == 1 ? "" : "s", (unsigned long long)r.features,
               qm_dtype_name(r.input_dtype));
        qm_plan_print(r.pipeline.plan, r.pipeline.mesh, qm_topology_label(r.pipeline.topology), stdout);
        printf("\ntimes:    read+plan %s, materialize %s, check+output %s\n",
               qm_format_seconds(r.seconds_read_plan, a, sizeof a),
               qm_format_seconds(r.seconds_materialize, b, sizeof b),
               qm_format_seconds(r.seconds_output, c, sizeof c));
        char p0[32], p1[32], p2[32], p3[32];
        printf("measured: ingest %s, local_norm %s, norm_allreduce %s, encode %s (materialize's "
               "phases; compare the estimates)\n",
               qm_format_seconds(r.phases.ingest, p0, sizeof p0),
               qm_format_seconds(r.phases.local_norm, p1, sizeof p1),
               qm_format_seconds(r.phases.norm_allreduce, p2, sizeof p2),
               qm_format_seconds(r.phases.encode, p3, sizeof p3));
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
