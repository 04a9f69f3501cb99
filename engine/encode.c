#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* encode.c — `qmesh encode` as a library call (see encode.h): read → plan → materialize → check →
 * write.
 *
 * Steps: sniff and open the input (npy: header only, values read per shard on demand; CSV: read
 * whole); build the request (qubits and dtype defaults from the input); load the scenario, graph,
 * mesh; plan (an infeasible plan stops here, before any device memory); open the backend; stream
 * the input into the shards (materialize.c); read the state back in chunks to check Σ|ψ|² per state
 * and write the output through temporary files renamed only when everything succeeded.
 * Must not: leave a file under an output name on failure, or allocate device memory for a plan that
 * does not fit.
 */
#include "encode.h"
#include "comm.h"
#include "cuda_backend.h"
#include "layout.h"
#include "materialize_internal.h"
#include "scenario_loader.h"
#include "state_internal.h"
#include "status_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h> /* gethostname */

#define QM_READBACK_AMPS ((uint64_t)1 << 20)

/* This host's id: FNV-1a of its name ("?" when it has none). */
static uint64_t host_id(void)
{
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = '?';
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = name; *c; ++c)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void qm_encode_job_init(qm_encode_job *job)
{
    memset(job, 0, sizeof *job);
    qm_request_init(&job->request);
    qm_csv_options_init(&job->csv);
}

void qm_encode_result_fini(qm_encode_result *r)
{
    if (!r)
        return;
    qm_plan_destroy(r->plan);
    qm_mesh_destroy(r->mesh);
    qm_topo_graph_destroy(r->graph);
    qm_topology_destroy(r->topology);
    memset(r, 0, sizeof *r);
}

static void progress_line(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    fprintf(stderr, "\rencode: %3.0f%% (%s %llu of %llu shards)%s", 100.0 * (double)done / (double)total,
            done * 2 <= total ? "ingested" : "written",
            (unsigned long long)(done * 2 <= total ? done : done - total / 2),
            (unsigned long long)(total / 2), done == total ? "\n" : "");
    fflush(stderr);
}

static qm_code npy_read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    return qm_npy_read_range(ctx, first, count, dst, st);
}

/* The CSV flags on a .npy input: --drop-column by 0-based index (a .npy has no header row to look
 * a name up in); --header auto is what a .npy is (no header), yes/no are refused: no flag may be
 * ignored silently. */
static qm_code npy_apply_csv_flags(const char *path, qm_npy_reader *npy, const qm_csv_options *csv,
                                   qm_status *st)
{
    if (csv->header != QM_CSV_HEADER_AUTO)
        return qm_fail(st, QM_E_ARG, "%s: --header %s applies to CSV input only (a .npy file has no "
                       "header row)", path, csv->header == QM_CSV_HEADER_YES ? "yes" : "no");
    const char *d = csv->drop_column;
    if (!d)
        return QM_OK;
    uint64_t col = 0;
    bool digits = *d != '\0';
    for (const char *p = d; *p && digits; ++p) {
        if (*p < '0' || *p > '9' || col > (UINT64_MAX - 9) / 10)
            digits = false;
        else
            col = col * 10 + (uint64_t)(*p - '0');
    }
    if (!digits)
        return qm_fail(st, QM_E_INPUT, "%s: --drop-column '%.40s' is not a 0-based column index, "
                       "and a .npy file has no header row to look a name up in; give the label "
                       "column's index", path, d);
    return qm_npy_reader_drop_column(npy, col, st);
}

static unsigned qubits_for(uint64_t features)
{
    unsigned n = 1;
    while (((uint64_t)1 << n) < features && n < 63)
        ++n;
    return n;
}

/* Read the state back in chunks: per-state Σ|ψ|², and each chunk handed to `sink` (may be NULL). */
typedef qm_code (*chunk_sink)(void *ctx, const void *amps, uint64_t n, qm_status *st);

static qm_code read_back(const qm_state *s, uint64_t start, uint64_t end, double *state_sums,
                         void *buf, chunk_sink sink, void *sink_ctx, qm_status *st)
{
    const uint64_t N = s->n_amps;
    for (uint64_t pos = start; pos < end;) {
        const uint64_t n = end - pos < QM_READBACK_AMPS ? end - pos : QM_READBACK_AMPS;
        qm_code rc = qm_state_read(s, pos, n, s->dtype, buf, st);
        if (rc != QM_OK)
            return rc;
        if (state_sums) {
            for (uint64_t i = 0; i < n; ++i) {
                double re, im;
                if (s->dtype == QM_DTYPE_COMPLEX128) {
                    re = ((const double *)buf)[2 * i];
                    im = ((const double *)buf)[2 * i + 1];
                } else {
                    re = ((const float *)buf)[2 * i];
                    im = ((const float *)buf)[2 * i + 1];
                }
                state_sums[(pos + i) / N] += re * re + im * im;
            }
        }
        if (sink && (rc = sink(sink_ctx, buf, n, st)) != QM_OK)
            return rc;
        pos += n;
    }
    return QM_OK;
}

static qm_code npy_sink(void *ctx, const void *amps, uint64_t n, qm_status *st)
{
    return qm_npy_writer_write(ctx, amps, n, st);
}

/* manifest.json of a plan (written by rank 0): every shard's rank, device, range, dtype, file. */
static char *manifest_text(const qm_encode_result *r, const qm_plan *p, qm_status *st)
{
    json_t *man = json_object(), *arr = json_array();
    char *text = NULL;
    if (!man || !arr)
        goto done;
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *sh = &p->shards[i];
        char file[64];
        snprintf(file, sizeof file, "shard-%04d.npy", i);
        json_t *j = json_object();
        json_object_set_new(j, "shard", json_integer(i));
        json_object_set_new(j, "rank", json_integer(sh->rank));
        json_object_set_new(j, "device", json_string(r->mesh->devices[sh->device].id));
        json_object_set_new(j, "start", json_integer((json_int_t)sh->start));
        json_object_set_new(j, "end", json_integer((json_int_t)sh->end));
        json_object_set_new(j, "dtype", json_string(qm_dtype_name(p->request.dtype)));
        json_object_set_new(j, "file", json_string(file));
        json_array_append_new(arr, j);
    }
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
    json_object_set_new(man, "format", json_string("qmesh-shards/1"));
    json_object_set_new(man, "qubits", json_integer(p->request.qubits));
    json_object_set_new(man, "dtype", json_string(qm_dtype_name(p->request.dtype)));
    json_object_set_new(man, "batch", json_integer((json_int_t)p->request.batch));
    json_object_set_new(man, "features", json_integer((json_int_t)r->features));
    json_object_set_new(man, "amplitudes_per_state", json_integer((json_int_t)p->n_amps));
    json_object_set_new(man, "global_amplitudes", json_integer((json_int_t)p->global_amplitudes));
    json_object_set_new(man, "policy", json_string(qm_policy_name(p->policy)));
    json_object_set_new(man, "ranks", json_integer(r->mesh->n_ranks));
    json_object_set_new(man, "plan_hash", json_string(hash));
    json_object_set_new(man, "scenario", json_string(r->scenario_name));
    json_object_set_new(man, "shards", arr);
    arr = NULL;
    text = json_dumps(man, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
done:
    json_decref(arr);
    json_decref(man);
    if (!text)
        qm_fail(st, QM_E_NOMEM, "encode: out of host memory for the manifest");
    return text;
}

/* This rank's shards to <dir>/shard-<global id>.npy, then (rank 0) manifest.json; every file goes
 * through a temporary name and is renamed only when every rank has written all of its files. */
static qm_code write_out_dir(const qm_encode_job *job, qm_encode_result *r, const qm_state *s,
                             const int *global_ids, void *buf, double *sums, qm_status *st)
{
    const int n = s->n_shards;
    const bool root = !job->comm || qm_comm_rank(job->comm) == 0;
    qm_npy_writer **w = calloc((size_t)(n ? n : 1), sizeof *w);
    char (*names)[1024] = calloc((size_t)(n ? n : 1), sizeof *names);
    char *text = NULL;
    int committed = 0;
    qm_code rc = (!w || !names) ? qm_fail(st, QM_E_NOMEM, "encode: out of host memory") : QM_OK;
    if (rc == QM_OK)
        rc = qm_out_dir_create(job->out_dir, st);
    for (int i = 0; i < n && rc == QM_OK; ++i) {
        const qm_state_shard *sh = &s->shards[i];
        snprintf(names[i], sizeof names[i], "%s/shard-%04d.npy", job->out_dir, global_ids[i]);
        const uint64_t shape[1] = {sh->end - sh->start};
        rc = qm_npy_writer_open(names[i], s->dtype, 1, shape, &w[i], st);
        if (rc == QM_OK)
            rc = read_back(s, sh->start, sh->end,
                           r->plan->policy != QM_POLICY_REPLICATED || i == 0 ? sums : NULL, buf,
                           npy_sink, w[i], st);
    }
    if (rc == QM_OK && root && !(text = manifest_text(r, r->plan, st)))
        rc = st->code;
    /* all ranks have their files ready: commit */
    if ((rc = qm_comm_verdict(job->comm, rc, st)) == QM_OK) {
        for (int i = 0; i < n && rc == QM_OK; ++i) {
            rc = qm_npy_writer_commit(w[i], st);
            w[i] = NULL;
            committed = i + 1;
        }
        if (rc == QM_OK && root) {
            char mpath[1100];
            snprintf(mpath, sizeof mpath, "%s/manifest.json", job->out_dir);
            rc = qm_atomic_write_text(mpath, text, st);
        }
        rc = qm_comm_verdict(job->comm, rc, st);
    }
    if (rc == QM_OK) {
        r->n_files = n + (root ? 1 : 0);
    } else {
        for (int i = 0; w && i < n; ++i)
            qm_npy_writer_abort(w[i]);
        for (int i = 0; i < committed; ++i) /* all or nothing: undo renames already made */
            remove(names[i]);
    }
    free(text);
    free(w);
    free(names);
    return rc;
}

/* The gathered .npy: rank 0 writes its own range, then receives every other rank's range in rank
 * order, chunk by chunk (no rank ever holds more than a chunk of another's amplitudes). */
static qm_code write_gathered(const qm_encode_job *job, qm_encode_result *r, const qm_state *s,
                              uint64_t lo, uint64_t hi, void *buf, double *sums, qm_status *st)
{
    qm_comm *c = job->comm;
    const int R = c ? qm_comm_size(c) : 1, me = c ? qm_comm_rank(c) : 0;
    const uint64_t es = qm_dtype_size(s->dtype);
    const qm_plan *p = r->plan;
    qm_npy_writer *w = NULL;
    qm_code rc = QM_OK;
    if (me == 0) {
        const uint64_t shape[2] = {p->request.batch, p->n_amps};
        rc = qm_npy_writer_open(job->out, s->dtype, p->request.batch > 1 ? 2 : 1,
                                p->request.batch > 1 ? shape : shape + 1, &w, st);
    }
    if ((rc = qm_comm_verdict(c, rc, st)) != QM_OK)
        return rc;
    /* every rank reads its own range (and adds to the norm check); rank 0 writes, the others send */
    if (me == 0) {
        rc = read_back(s, lo, hi, sums, buf, npy_sink, w, st);
        for (int src = 1; src < R && rc == QM_OK; ++src) {
            uint64_t rlo = UINT64_MAX, rhi = 0;
            for (int i = 0; i < p->n_shards; ++i)
                if (p->shards[i].rank == src) {
                    rlo = p->shards[i].start < rlo ? p->shards[i].start : rlo;
                    rhi = p->shards[i].end > rhi ? p->shards[i].end : rhi;
                }
            for (uint64_t pos = rlo; rc == QM_OK && pos < rhi; pos += QM_READBACK_AMPS) {
                const uint64_t n = rhi - pos < QM_READBACK_AMPS ? rhi - pos : QM_READBACK_AMPS;
                rc = qm_comm_recv(c, src, buf, n * es, 7, st);
                if (rc == QM_OK)
                    rc = qm_npy_writer_write(w, buf, n, st);
            }
        }
    } else {
        for (uint64_t pos = lo; rc == QM_OK && pos < hi; pos += QM_READBACK_AMPS) {
            const uint64_t n = hi - pos < QM_READBACK_AMPS ? hi - pos : QM_READBACK_AMPS;
            rc = read_back(s, pos, pos + n, sums, buf, NULL, NULL, st);
            if (rc == QM_OK)
                rc = qm_comm_send(c, 0, buf, n * es, 7, st);
        }
    }
    if (me == 0) {
        if (rc == QM_OK)
            rc = qm_npy_writer_commit(w, st);
        else
            qm_npy_writer_abort(w);
    }
    rc = qm_comm_verdict(c, rc, st);
    if (rc == QM_OK && me == 0)
        r->n_files = 1;
    return rc;
}

qm_code qm_encode_run(const qm_encode_job *job, qm_encode_result *r, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_input_format fmt;
    qm_npy_reader *npy = NULL;
    qm_csv_data csv = {0};
    qm_hal *hal = NULL;
    qm_state *state = NULL;
    qm_shard_spec *specs = NULL;
    int *global_ids = NULL;
    double *sums = NULL;
    void *buf = NULL;
    qm_diags diags;
    qm_diags_init(&diags);
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    qm_comm *comm = job ? job->comm : NULL;
    const int R = comm ? qm_comm_size(comm) : 1, me = comm ? qm_comm_rank(comm) : 0;

    if (!job || !job->input)
        rc = qm_fail(st, QM_E_ARG, "encode: an input file is required (--input FILE)");
    else if (job->out && job->out_dir)
        rc = qm_fail(st, QM_E_ARG, "encode: --out and --out-dir exclude each other");
    else if (job->request.encoding != QM_ENCODING_AMPLITUDE)
        rc = qm_fail(st, QM_E_UNSUPPORTED, "encode: the %s encoding is planned but not available "
                     "in this version; use --encoding amplitude",
                     qm_encoding_name(job->request.encoding));
    /* input: the header (npy) or the whole file (CSV); every rank opens the file itself */
    qm_amp_input in = {0};
    if (rc == QM_OK)
        rc = qm_input_format_query(job->input, &fmt, st);
    if (rc == QM_OK && fmt == QM_INPUT_NPY) {
        if ((rc = qm_npy_open(job->input, &npy, st)) == QM_OK)
            rc = npy_apply_csv_flags(job->input, npy, &job->csv, st);
        if (rc == QM_OK) {
            const qm_npy_info *info = qm_npy_reader_info(npy);
            in = (qm_amp_input){.dtype = info->dtype, .n = info->n_features,
                                .batch = info->n_samples, .read = npy_read_cb, .read_ctx = npy};
        }
    } else if (rc == QM_OK) {
        if ((rc = qm_csv_load(job->input, &job->csv, &csv, st)) == QM_OK)
            in = (qm_amp_input){.dtype = QM_DTYPE_FLOAT64, .data = csv.values,
                                .n = csv.n_features, .batch = csv.n_samples};
    }
    r->batch = in.batch;
    r->features = in.n;
    r->input_dtype = in.dtype;
    /* request */
    qm_request req = job ? job->request : (qm_request){0};
    if (rc == QM_OK) {
        if (req.qubits == 0 && !job->qubits_given)
            req.qubits = qubits_for(in.n);
        if (!job->dtype_given)
            req.dtype = in.dtype == QM_DTYPE_FLOAT64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
        req.batch = in.batch;
        req.features = in.n;
        if (R > 1 && req.ranks == 0)
            req.ranks = R;
        else if (R > 1 && req.ranks != R)
            rc = qm_fail(st, QM_E_RANK, "encode: --ranks %d but mpirun started %d ranks", req.ranks, R);
    }
    /* scenario, mesh, plan */
    if (rc == QM_OK)
        rc = job->scenario ? qm_scenario_load_file(job->scenario, &r->topology, &diags, st)
                           : qm_scenario_load_default(&r->topology, &diags, st);
    if (rc == QM_OK) {
        snprintf(r->scenario_name, sizeof r->scenario_name, "%s",
                 r->topology->file[0] ? r->topology->file : r->topology->name);
        if ((rc = qm_request_validate(&req, r->topology->n_ranks, st)) == QM_OK &&
            (rc = qm_topo_graph_create(r->topology, &r->graph, st)) == QM_OK &&
            (rc = qm_mesh_create(r->topology, r->graph, req.ranks, &r->mesh, st)) == QM_OK)
            rc = qm_plan_create(r->mesh, &req, &r->plan, st); /* infeasible: nothing allocated */
    }
    if (rc == QM_OK && R > 1 && r->mesh->n_ranks != R)
        rc = qm_fail(st, QM_E_RANK, "encode: the plan uses %d ranks but mpirun started %d",
                     r->mesh->n_ranks, R);
    /* every rank has the same plan, or every rank stops with the same message */
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    if (R > 1) {
        uint64_t h = r->plan->hash ^ (r->batch * 0x9E3779B97F4A7C15ull) ^ (r->features << 17) ^
                     (uint64_t)in.dtype;
        if ((rc = qm_comm_agree(comm, h, "plan hash", st)) != QM_OK)
            goto done;
    }
    r->seconds_read_plan = now_s() - t0;
    /* backend: this rank's devices (one process simulates every rank of the scenario) */
    const int dev0 = R > 1 ? r->mesh->rank_first[me] : 0;
    if (job->backend == QM_BACKEND_CUDA) {
        const int need = R > 1 ? r->mesh->rank_first[me + 1] - dev0 : r->mesh->n_devices;
        /* ranks on one host take that host's GPUs in turn: every rank learns every rank's host */
        int first_gpu = 0;
        if (R > 1) {
            uint64_t *hosts = calloc((size_t)R, sizeof *hosts);
            const uint64_t mine = host_id();
            rc = qm_comm_verdict(comm, hosts ? QM_OK : qm_fail(st, QM_E_NOMEM, "encode: out of "
                                                               "host memory for %d host ids", R), st);
            if (rc == QM_OK)
                rc = qm_comm_allgather(comm, &mine, sizeof mine, hosts, st);
            if (rc == QM_OK)
                first_gpu = qm_layout_host_first_device(hosts, r->mesh->rank_first, R, me);
            free(hosts);
        }
        if (rc == QM_OK && (rc = qm_hal_cuda_open_logical_at(first_gpu, need, &hal, st)) == QM_OK &&
            qm_hal_device_count(hal) < need)
            rc = qm_fail(st, QM_E_ARG, "encode: the plan gives this process %d devices but %d CUDA "
                         "devices are visible; use a scenario with at most that many", need,
                         qm_hal_device_count(hal));
    } else {
        rc = R > 1 ? qm_mesh_open_sim_rank(r->mesh, me, QM_SIM_MATERIALIZED, &hal, st)
                   : qm_mesh_open_sim(r->mesh, QM_SIM_MATERIALIZED, &hal, st);
    }
    specs = malloc((size_t)r->plan->n_shards * sizeof *specs);
    global_ids = malloc((size_t)r->plan->n_shards * sizeof *global_ids);
    sums = calloc((size_t)(in.batch ? in.batch : 1), sizeof *sums);
    buf = malloc((size_t)(QM_READBACK_AMPS * qm_dtype_size(req.dtype)));
    if (rc == QM_OK && (!specs || !global_ids || !sums || !buf))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    int n_local = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; rc == QM_OK && i < r->plan->n_shards; ++i) {
        const qm_plan_shard *p = &r->plan->shards[i];
        if (R > 1 && p->rank != me)
            continue;
        global_ids[n_local] = i;
        specs[n_local++] = (qm_shard_spec){.rank = p->rank, .device = p->device - dev0,
                                           .start = p->start, .end = p->end};
        lo = p->start < lo ? p->start : lo;
        hi = p->end > hi ? p->end : hi;
    }
    if (rc == QM_OK && n_local == 0)
        rc = qm_fail(st, QM_E_RANK, "encode: rank %d has no shard in the plan", me);
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    double t1 = now_s();
    qm_materialize_opts mo = {.chunk_bytes = job->chunk_bytes, .comm = comm, .times = &r->phases};
    /* a progress line for work of more than a few seconds (about 1 GiB of input and state) */
    if (job->show_progress && me == 0 &&
        r->plan->state_bytes + r->batch * r->features * qm_dtype_size(in.dtype) > ((uint64_t)1 << 30))
        mo.progress = progress_line;
    if ((rc = qm_materialize_amplitude(hal, req.qubits, req.dtype, specs, n_local, &in, &mo, &state,
                                       st)) != QM_OK)
        goto done; /* the same verdict on every rank */
    r->seconds_materialize = now_s() - t1;
    /* check and output */
    double t2 = now_s();
    const bool replicated = r->plan->policy == QM_POLICY_REPLICATED;
    if (job->out)
        rc = write_gathered(job, r, state, lo, replicated ? state->n_amps * state->batch : hi, buf,
                            sums, st);
    else if (job->out_dir)
        rc = write_out_dir(job, r, state, global_ids, buf, sums, st);
    else
        rc = qm_comm_verdict(comm, read_back(state, lo, replicated ? state->n_amps * state->batch : hi,
                                      sums, buf, NULL, NULL, st), st);
    if (rc != QM_OK)
        goto done;
    if (R > 1 && !replicated && (rc = qm_comm_allreduce_sum_f64(comm, sums, in.batch, st)) != QM_OK)
        goto done;
    r->seconds_output = now_s() - t2;
    r->norm_max_error = 0;
    for (uint64_t k = 0; k < in.batch; ++k) {
        double err = fabs(sums[k] - 1.0);
        if (err > r->norm_max_error || k == 0) {
            r->norm_max_error = err;
            r->norm_worst_state = k;
        }
    }
    rc = QM_OK;
done:
    if (rc != QM_OK && diags.n > 1 && job && job->progress)
        qm_diags_print_others(&diags, job->progress); /* the caller prints the first */
    qm_diags_fini(&diags);
    qm_state_destroy(state);
    qm_hal_destroy(hal);
    qm_npy_close(npy);
    qm_csv_data_fini(&csv);
    free(specs);
    free(global_ids);
    free(sums);
    free(buf);
    return rc;
}
