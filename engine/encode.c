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
#include "cuda_backend.h"
#include "materialize_internal.h"
#include "scenario_loader.h"
#include "state_internal.h"
#include "status_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QM_READBACK_AMPS ((uint64_t)1 << 20)

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

static qm_code npy_read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    return qm_npy_read_range(ctx, first, count, dst, st);
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

/* Every shard to <dir>/shard-<i>.npy, then manifest.json; all renamed only at the end. */
static qm_code write_out_dir(const qm_encode_job *job, qm_encode_result *r, const qm_state *s,
                             void *buf, double *sums, qm_status *st)
{
    qm_code rc = qm_out_dir_create(job->out_dir, st);
    if (rc != QM_OK)
        return rc;
    const int n = s->n_shards;
    qm_npy_writer **w = calloc((size_t)n, sizeof *w);
    char (*names)[1024] = calloc((size_t)n, sizeof *names);
    json_t *man = json_object(), *arr = json_array();
    char *text = NULL;
    int committed = 0;
    if (!w || !names || !man || !arr) {
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d output files", n);
        goto fail;
    }
    for (int i = 0; i < n && rc == QM_OK; ++i) {
        const qm_state_shard *sh = &s->shards[i];
        snprintf(names[i], sizeof names[i], "%s/shard-%04d.npy", job->out_dir, i);
        const uint64_t shape[1] = {sh->end - sh->start};
        rc = qm_npy_writer_open(names[i], s->dtype, 1, shape, &w[i], st);
        if (rc == QM_OK)
            rc = read_back(s, sh->start, sh->end, i == 0 || !r->plan ||
                           r->plan->policy != QM_POLICY_REPLICATED ? sums : NULL, buf, npy_sink,
                           w[i], st);
        json_t *j = json_object();
        qm_shard_info info;
        if (rc == QM_OK)
            rc = qm_state_shard_query(s, i, &info, st);
        if (rc == QM_OK) {
            char file[64];
            snprintf(file, sizeof file, "shard-%04d.npy", i);
            json_object_set_new(j, "shard", json_integer(i));
            json_object_set_new(j, "rank", json_integer(info.rank));
            json_object_set_new(j, "device", json_string(info.device_id));
            json_object_set_new(j, "start", json_integer((json_int_t)info.start));
            json_object_set_new(j, "end", json_integer((json_int_t)info.end));
            json_object_set_new(j, "dtype", json_string(qm_dtype_name(s->dtype)));
            json_object_set_new(j, "file", json_string(file));
        }
        json_array_append_new(arr, j);
    }
    if (rc != QM_OK)
        goto fail;
    json_object_set_new(man, "format", json_string("qmesh-shards/1"));
    json_object_set_new(man, "qubits", json_integer(s->qubits));
    json_object_set_new(man, "dtype", json_string(qm_dtype_name(s->dtype)));
    json_object_set_new(man, "batch", json_integer((json_int_t)s->batch));
    json_object_set_new(man, "features", json_integer((json_int_t)r->features));
    json_object_set_new(man, "amplitudes_per_state", json_integer((json_int_t)s->n_amps));
    json_object_set_new(man, "global_amplitudes", json_integer((json_int_t)(s->n_amps * s->batch)));
    json_object_set_new(man, "policy", json_string(qm_policy_name(r->plan->policy)));
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->plan->hash);
    json_object_set_new(man, "plan_hash", json_string(hash));
    json_object_set_new(man, "scenario", json_string(r->scenario_name));
    json_object_set_new(man, "shards", arr);
    arr = NULL;
    text = json_dumps(man, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for the manifest");
        goto fail;
    }
    for (int i = 0; i < n && rc == QM_OK; ++i) {
        rc = qm_npy_writer_commit(w[i], st);
        w[i] = NULL;
        committed = i + 1;
    }
    if (rc == QM_OK) {
        char mpath[1100];
        snprintf(mpath, sizeof mpath, "%s/manifest.json", job->out_dir);
        rc = qm_atomic_write_text(mpath, text, st);
    }
    if (rc == QM_OK) {
        r->n_files = n + 1;
        goto done;
    }
fail:
    for (int i = 0; w && i < n; ++i)
        qm_npy_writer_abort(w[i]);
    for (int i = 0; i < committed; ++i) /* all or nothing: undo renames already made */
        remove(names[i]);
done:
    free(text);
    json_decref(arr);
    json_decref(man);
    free(w);
    free(names);
    return rc;
}

qm_code qm_encode_run(const qm_encode_job *job, qm_encode_result *r, qm_status *st)
{
    qm_code rc;
    qm_input_format fmt;
    qm_npy_reader *npy = NULL;
    qm_csv_data csv = {0};
    qm_hal *hal = NULL;
    qm_state *state = NULL;
    qm_shard_spec *specs = NULL;
    double *sums = NULL;
    void *buf = NULL;
    qm_diags diags;
    qm_diags_init(&diags);
    memset(r, 0, sizeof *r);
    double t0 = now_s();

    if (!job || !job->input)
        return qm_fail(st, QM_E_ARG, "encode: an input file is required (--input FILE)");
    if (job->out && job->out_dir)
        return qm_fail(st, QM_E_ARG, "encode: --out and --out-dir exclude each other");
    if (job->request.encoding != QM_ENCODING_AMPLITUDE)
        return qm_fail(st, QM_E_UNSUPPORTED, "encode: the %s encoding is planned but not available "
                       "in this version; use --encoding amplitude",
                       qm_encoding_name(job->request.encoding));
    /* input */
    if ((rc = qm_input_format_query(job->input, &fmt, st)) != QM_OK)
        goto done;
    qm_amp_input in = {0};
    if (fmt == QM_INPUT_NPY) {
        if ((rc = qm_npy_open(job->input, &npy, st)) != QM_OK)
            goto done;
        const qm_npy_info *info = qm_npy_reader_info(npy);
        in = (qm_amp_input){.dtype = info->dtype, .n = info->n_features, .batch = info->n_samples,
                            .read = npy_read_cb, .read_ctx = npy};
    } else {
        if ((rc = qm_csv_load(job->input, &job->csv, &csv, st)) != QM_OK)
            goto done;
        in = (qm_amp_input){.dtype = QM_DTYPE_FLOAT64, .data = csv.values, .n = csv.n_features,
                            .batch = csv.n_samples};
    }
    r->batch = in.batch;
    r->features = in.n;
    r->input_dtype = in.dtype;
    /* request */
    qm_request req = job->request;
    if (req.qubits == 0 && !job->qubits_given)
        req.qubits = qubits_for(in.n);
    if (!job->dtype_given)
        req.dtype = in.dtype == QM_DTYPE_FLOAT64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    req.batch = in.batch;
    req.features = in.n;
    /* scenario, mesh, plan */
    if (job->scenario)
        rc = qm_scenario_load_file(job->scenario, &r->topology, &diags, st);
    else
        rc = qm_scenario_load_default(&r->topology, &diags, st);
    if (rc != QM_OK)
        goto done;
    snprintf(r->scenario_name, sizeof r->scenario_name, "%s",
             r->topology->file[0] ? r->topology->file : r->topology->name);
    if ((rc = qm_request_validate(&req, r->topology->n_ranks, st)) != QM_OK ||
        (rc = qm_topo_graph_create(r->topology, &r->graph, st)) != QM_OK ||
        (rc = qm_mesh_create(r->topology, r->graph, req.ranks, &r->mesh, st)) != QM_OK)
        goto done;
    rc = qm_plan_create(r->mesh, &req, &r->plan, st);
    if (rc != QM_OK)
        goto done; /* infeasible: nothing allocated */
    r->seconds_read_plan = now_s() - t0;
    /* backend */
    if (job->backend == QM_BACKEND_CUDA) {
        if ((rc = qm_hal_cuda_open(&hal, st)) != QM_OK)
            goto done;
        if (qm_hal_device_count(hal) < r->mesh->n_devices) {
            rc = qm_fail(st, QM_E_ARG, "encode: the plan uses %d devices but %d CUDA devices are "
                         "visible; use a scenario with at most that many devices",
                         r->mesh->n_devices, qm_hal_device_count(hal));
            goto done;
        }
    } else if ((rc = qm_mesh_open_sim(r->mesh, QM_SIM_MATERIALIZED, &hal, st)) != QM_OK) {
        goto done;
    }
    specs = malloc((size_t)r->plan->n_shards * sizeof *specs);
    sums = calloc((size_t)in.batch, sizeof *sums);
    buf = malloc((size_t)(QM_READBACK_AMPS * qm_dtype_size(req.dtype)));
    if (!specs || !sums || !buf) {
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
        goto done;
    }
    for (int i = 0; i < r->plan->n_shards; ++i) {
        const qm_plan_shard *p = &r->plan->shards[i];
        specs[i] = (qm_shard_spec){.rank = p->rank, .device = p->device, .start = p->start,
                                   .end = p->end};
    }
    double t1 = now_s();
    qm_materialize_opts mo = {.chunk_bytes = job->chunk_bytes};
    if ((rc = qm_materialize_amplitude(hal, req.qubits, req.dtype, specs, r->plan->n_shards, &in,
                                       &mo, &state, st)) != QM_OK)
        goto done;
    r->seconds_materialize = now_s() - t1;
    /* check and output */
    double t2 = now_s();
    if (job->out) {
        const uint64_t shape[2] = {in.batch, state->n_amps};
        qm_npy_writer *w = NULL;
        if ((rc = qm_npy_writer_open(job->out, req.dtype, in.batch > 1 ? 2 : 1,
                                     in.batch > 1 ? shape : shape + 1, &w, st)) != QM_OK)
            goto done;
        /* the file is assembled on the host one chunk at a time (no device gather needed) */
        rc = read_back(state, 0, state->n_amps * state->batch, sums, buf, npy_sink, w, st);
        if (rc == QM_OK)
            rc = qm_npy_writer_commit(w, st);
        else
            qm_npy_writer_abort(w);
        if (rc != QM_OK)
            goto done;
        r->n_files = 1;
    } else if (job->out_dir) {
        if ((rc = write_out_dir(job, r, state, buf, sums, st)) != QM_OK)
            goto done;
    } else {
        if ((rc = read_back(state, 0, state->n_amps * state->batch, sums, buf, NULL, NULL, st)) != QM_OK)
            goto done;
    }
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
        qm_diags_print(&diags, job->progress);
    qm_diags_fini(&diags);
    qm_state_destroy(state);
    qm_hal_destroy(hal);
    qm_npy_close(npy);
    qm_csv_data_fini(&csv);
    free(specs);
    free(sums);
    free(buf);
    return rc;
}
