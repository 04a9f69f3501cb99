/* api.c — the public API of include/qmesh.h: scenarios, contexts (a request planned on a scenario
 * and the backend its states live on), encoding from host memory or a file.
 *
 * In: calls of a C or C++ program. Out: opaque objects over the engine's pipeline (pipeline.h):
 * a scenario owns a topology; a context owns a pipeline that borrows the scenario's topology and
 * holds a reference to the scenario; a state holds a reference to its context.
 * Reference counts are atomic, so states may be destroyed from any thread; every object is used by
 * one thread at a time. A context keeps its encode memory between encodes (reuse.h: ingest pipes,
 * page-locked scratch, the buffers of its destroyed states) and frees it when it goes. Must not: keep global mutable state (none here), or let a backend go while
 * a state lives on it.
 */
#include "api_internal.h"
#include "discover.h"
#include "encode.h"
#include "pipeline.h"
#include "plan_output.h"
#include "reuse.h"
#include "state_internal.h"
#include "status_internal.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct qm_scenario {
    atomic_int refs;
    qm_topology *topology;
};

struct qm_context {
    atomic_int refs;
    qm_scenario *scenario;     /* a reference */
    qm_pipeline pl;            /* borrows scenario->topology */
    qm_reuse *reuse;           /* encode memory kept between encodes (reuse.h): from the first
                                  encode to the last release; NULL before */
    bool prepared;             /* CUDA: host staging made ready at open, not yet taken by the
                                  first encode (qm_backend_host_prepare) */
    qm_read_pool *read_pool;   /* the .npy readers' threads of every encode_file: the process's
                                  shared pool (shared_pool_take), taken at open beside the
                                  backend's start; NULL before (or without) */
    unsigned read_pool_gen;    /* the process image read_pool belongs to (shared_pool_gen) */
    bool no_read_pool;         /* reads no file through encode_file (a stream's contexts) */
};

/* One pool of reader threads for every open context of the process (not one per context: a
 * program or the Python package's cache may hold many contexts, and reads of different contexts
 * share the cores anyway). Started by the first context open that wants it, with that open's
 * QM_READ_THREADS or core count (a reader that wants more grows it); stopped when the last context
 * holding it is released, so a process that closes every context keeps no idle thread.
 * fork: the child has none of the pool's threads, so its own contexts start a pool of their own,
 * and a context it inherited neither reads with the parent's pool nor gives it back (the
 * generation, moved on in the child by pthread_atfork, tells them apart; the lock is held across
 * the fork so the child never inherits it taken). */
static pthread_mutex_t shared_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t shared_pool_once = PTHREAD_ONCE_INIT;
static qm_read_pool *shared_pool;
static int shared_pool_refs;
static unsigned shared_pool_gen;

static void shared_pool_fork_prepare(void) { pthread_mutex_lock(&shared_pool_mu); }
static void shared_pool_fork_parent(void) { pthread_mutex_unlock(&shared_pool_mu); }
static void shared_pool_fork_child(void)
{
    shared_pool = NULL; /* its threads are the parent's: left alone */
    shared_pool_refs = 0;
    shared_pool_gen++;
    pthread_mutex_unlock(&shared_pool_mu);
}
static void shared_pool_init(void)
{
    (void)pthread_atfork(shared_pool_fork_prepare, shared_pool_fork_parent, shared_pool_fork_child);
}

/* The process's pool for ctx (NULL when none can start). */
static void shared_pool_take(qm_context *ctx, int threads)
{
    pthread_once(&shared_pool_once, shared_pool_init);
    pthread_mutex_lock(&shared_pool_mu);
    if (!shared_pool)
        shared_pool = qm_read_pool_create(threads);
    ctx->read_pool = shared_pool;
    ctx->read_pool_gen = shared_pool_gen;
    shared_pool_refs += shared_pool != NULL;
    pthread_mutex_unlock(&shared_pool_mu);
}

/* ctx's pool if it belongs to this process image, else NULL (inherited across a fork). */
static qm_read_pool *shared_pool_of(const qm_context *ctx)
{
    pthread_mutex_lock(&shared_pool_mu);
    qm_read_pool *p = ctx->read_pool_gen == shared_pool_gen ? ctx->read_pool : NULL;
    pthread_mutex_unlock(&shared_pool_mu);
    return p;
}

static void shared_pool_give(qm_context *ctx)
{
    qm_read_pool *stop = NULL;
    pthread_mutex_lock(&shared_pool_mu);
    if (ctx->read_pool && ctx->read_pool_gen == shared_pool_gen && --shared_pool_refs == 0) {
        stop = shared_pool;
        shared_pool = NULL;
    }
    ctx->read_pool = NULL;
    pthread_mutex_unlock(&shared_pool_mu);
    qm_read_pool_destroy(stop); /* joins its workers: outside the lock */
}

/* What the first encode's page-locked buffers did not take of the staging prepared at open. */
static void context_unprepare(qm_context *ctx)
{
    if (ctx->prepared)
        qm_backend_host_release();
    ctx->prepared = false;
}

/* ---- scenarios ---------------------------------------------------------------------------------- */

static qm_code scenario_wrap(qm_code rc, qm_topology *t, qm_scenario **out, qm_status *st)
{
    if (rc != QM_OK)
        return rc;
    qm_scenario *s = calloc(1, sizeof *s);
    if (!s) {
        qm_topology_destroy(t);
        return qm_fail(st, QM_E_NOMEM, "scenario: out of host memory");
    }
    atomic_init(&s->refs, 1);
    s->topology = t;
    *out = s;
    return QM_OK;
}

qm_code qm_scenario_open(const char *path, qm_scenario **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!out)
        return qm_fail(st, QM_E_ARG, "scenario: out must not be NULL");
    qm_topology *t = NULL;
    const qm_code rc = qm_scenario_load_path(path, &t, NULL, st);
    return scenario_wrap(rc, t, out, st);
}

qm_code qm_scenario_parse(const char *yaml, size_t len, const char *name, qm_scenario **out,
                          qm_status *st)
{
    if (out)
        *out = NULL;
    if (!yaml || !out)
        return qm_fail(st, QM_E_ARG, "scenario: text and out must not be NULL");
    qm_topology *t = NULL;
    const qm_code rc = qm_scenario_load_string(yaml, len, name ? name : "<text>", &t, NULL, st);
    return scenario_wrap(rc, t, out, st);
}

const char *qm_scenario_name(const qm_scenario *s)
{
    return qm_topology_label(s ? s->topology : NULL);
}

void qm_scenario_destroy(qm_scenario *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    qm_topology_destroy(s->topology);
    free(s);
}

/* ---- contexts ----------------------------------------------------------------------------------- */

static void context_retain(void *c) { atomic_fetch_add(&((qm_context *)c)->refs, 1); }

static void context_release(void *c)
{
    qm_context *ctx = c;
    if (atomic_fetch_sub(&ctx->refs, 1) != 1)
        return;
    qm_reuse_destroy(ctx->reuse); /* every state is gone (each held a reference): before the backend */
    context_unprepare(ctx);
    shared_pool_give(ctx); /* no encode_file of this context runs: its readers are closed */
    qm_pipeline_fini(&ctx->pl);
    qm_scenario_destroy(ctx->scenario);
    free(ctx);
}

void qm_context_destroy(qm_context *ctx)
{
    if (ctx)
        context_release(ctx);
}

qm_code qm_context_create(const qm_scenario *scenario, const qm_request *request,
                          qm_context **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!scenario || !request || !out)
        return qm_fail(st, QM_E_ARG, "context: scenario, request and out must not be NULL");
    qm_context *c = calloc(1, sizeof *c);
    if (!c)
        return qm_fail(st, QM_E_NOMEM, "context: out of host memory");
    atomic_init(&c->refs, 1);
    c->scenario = (qm_scenario *)scenario; /* only its reference count is written */
    atomic_fetch_add(&c->scenario->refs, 1);
    qm_pipeline_init(&c->pl);
    qm_pipeline_use(&c->pl, scenario->topology);
    const qm_code rc = qm_pipeline_plan(&c->pl, request, st);
    if (!c->pl.plan) { /* invalid: no plan; an infeasible plan is a context to look at */
        context_release(c);
        return rc;
    }
    qm_status_clear(st);
    *out = c;
    return QM_OK;
}

qm_code qm_context_plan_info(const qm_context *ctx, qm_plan_info *out, qm_status *st)
{
    if (!ctx || !out)
        return qm_fail(st, QM_E_ARG, "context: ctx and out must not be NULL");
    const qm_plan *p = ctx->pl.plan;
    memset(out, 0, sizeof *out);
    out->feasible = p->feasible;
    out->error = p->error;
    out->policy = p->policy;
    out->qubits = p->request.qubits;
    out->dtype = p->request.dtype;
    out->batch = p->request.batch;
    out->features = p->request.features;
    out->amplitudes = p->global_amplitudes;
    out->state_bytes = p->state_bytes;
    out->n_shards = p->n_shards;
    out->n_devices = p->n_devices;
    out->max_qubits[0] = p->max_qubits[0];
    out->max_qubits[1] = p->max_qubits[1];
    return QM_OK;
}

qm_code qm_context_plan_shard(const qm_context *ctx, int shard, qm_shard_info *out, qm_status *st)
{
    if (!ctx || !out)
        return qm_fail(st, QM_E_ARG, "context: ctx and out must not be NULL");
    qm_plan_shard s;
    const qm_code rc = qm_layout_shard(ctx->pl.plan, shard, &s, st);
    if (rc != QM_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->shard = shard;
    out->rank = s.rank;
    out->device = s.device;
    snprintf(out->device_id, sizeof out->device_id, "%s", ctx->pl.mesh->devices[s.device].id);
    out->start = s.start;
    out->end = s.end;
    return QM_OK;
}

qm_code qm_context_plan_json(const qm_context *ctx, char **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!ctx || !out)
        return qm_fail(st, QM_E_ARG, "context: ctx and out must not be NULL");
    json_t *o = NULL;
    qm_code rc = qm_plan_to_json(ctx->pl.plan, ctx->pl.mesh, qm_topology_label(ctx->pl.topology), &o, st);
    if (rc != QM_OK)
        return rc;
    *out = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return *out ? QM_OK : qm_fail(st, QM_E_NOMEM, "context: out of host memory for the JSON text");
}

qm_code qm_context_plan_data_path(qm_context *ctx, const char *input, const char *output,
                                  int out_dir, qm_backend_kind backend, qm_status *st)
{
    if (!ctx || !ctx->pl.plan)
        return qm_fail(st, QM_E_ARG, "context: ctx must not be NULL");
    qm_plan *p = ctx->pl.plan;
    qm_encode_job job;
    qm_encode_job_init(&job);
    job.input = input;
    job.out = output && !out_dir ? output : NULL;
    job.out_dir = output && out_dir ? output : NULL;
    job.backend = backend;
    job.request = p->request;
    job.qubits_given = job.dtype_given = true;
    qm_input_file file = {0};
    qm_amp_input in = {0};
    qm_request req = p->request;
    int ndim = 1;
    qm_code rc = QM_OK;
    if (input && (rc = qm_encode_input_open(&job, false, &file, &in, &ndim, &req, st)) == QM_OK) {
        const uint64_t rows = req.batch ? req.batch : 1, want = p->request.batch ? p->request.batch : 1;
        if (req.features != p->request.features || rows != want)
            rc = qm_fail(st, QM_E_INPUT, "context: %s holds %llu rows of %llu values but the plan "
                         "is for %llu of %llu", input, (unsigned long long)rows,
                         (unsigned long long)req.features, (unsigned long long)want,
                         (unsigned long long)p->request.features);
    }
    if (rc == QM_OK) {
        rc = qm_encode_datapath(&job, input ? &file : NULL, input ? &in : NULL, ndim, &p->request,
                                &ctx->pl.datapath, st);
        /* from the plan's own estimates again (ingest is replaced when there is an input) */
        if (rc == QM_OK && p->has_estimates && (rc = qm_cost_estimate(ctx->pl.mesh, p, st)) == QM_OK)
            rc = qm_cost_datapath(ctx->pl.mesh, p, &ctx->pl.datapath, st);
    }
    qm_input_close(&file);
    return rc;
}

void qm_free(void *p) { free(p); }

/* ---- devices ------------------------------------------------------------------------------------ */

qm_code qm_devices_list(qm_backend_kind backend, qm_device_info **out, int *count,
                        qm_backend_kind *listed, qm_status *st)
{
    if (out)
        *out = NULL;
    if (count)
        *count = 0;
    if (!out || !count)
        return qm_fail(st, QM_E_ARG, "devices: out and count must not be NULL");
    if (backend != QM_BACKEND_AUTO && backend != QM_BACKEND_SIM && backend != QM_BACKEND_CUDA)
        return qm_fail(st, QM_E_ARG, "devices: unknown backend %d (use QM_BACKEND_AUTO, "
                       "QM_BACKEND_SIM or QM_BACKEND_CUDA)", (int)backend);
    qm_hal *hal = NULL;
    qm_code rc = qm_pipeline_devices_backend(backend, &hal, st);
    if (rc != QM_OK)
        return rc;
    const int n = qm_hal_device_count(hal);
    qm_device_info *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    if (!d) {
        qm_hal_destroy(hal);
        return qm_fail(st, QM_E_NOMEM, "devices: out of host memory");
    }
    for (int i = 0; i < n && rc == QM_OK; ++i) {
        qm_hal_device_info in;
        if ((rc = qm_hal_device_info_query(hal, i, &in, st)) != QM_OK)
            break;
        d[i].index = i;
        snprintf(d[i].id, sizeof d[i].id, "%s", in.id);
        snprintf(d[i].name, sizeof d[i].name, "%s", in.name);
        d[i].memory_bytes = in.memory_bytes;
        d[i].usable_bytes = in.usable_bytes;
        d[i].hbm_bw_bytes_per_s = in.hbm_bw_bytes_per_s;
        d[i].cuda_device = in.memory == QM_HAL_MEMORY_CUDA ? in.cuda_ordinal : -1;
    }
    const bool cuda = qm_hal_kind_get(hal) == QM_HAL_CUDA;
    qm_hal_destroy(hal);
    if (rc != QM_OK) {
        free(d);
        return rc;
    }
    if (listed)
        *listed = cuda ? QM_BACKEND_CUDA : QM_BACKEND_SIM;
    *out = d;
    *count = n;
    return QM_OK;
}

qm_code qm_context_open(qm_context *ctx, qm_backend_kind backend, qm_status *st)
{
    if (!ctx)
        return qm_fail(st, QM_E_ARG, "context: ctx must not be NULL");
    if (backend != QM_BACKEND_AUTO && backend != QM_BACKEND_SIM && backend != QM_BACKEND_CUDA)
        return qm_fail(st, QM_E_ARG, "context: unknown backend %d (use QM_BACKEND_SIM or "
                       "QM_BACKEND_CUDA)", (int)backend);
    if (ctx->pl.hal)
        return qm_fail(st, QM_E_ARG, "context: the backend is already open");
    qm_code rc = QM_OK;
    if (backend != QM_BACKEND_CUDA) {
        /* the simulator keeps every shard in host memory: plan again with host memory counted
         * (docs/planner.md "Host memory"); a plan that no longer fits is refused below */
        ctx->pl.host_budget = (qm_host_budget){.sim = true};
        if ((rc = qm_host_mem_available_query(&ctx->pl.host_budget.available_bytes, st)) != QM_OK)
            return rc;
        const qm_request r = ctx->pl.request;
        qm_status pst;
        rc = qm_pipeline_plan(&ctx->pl, &r, &pst);
        if (!ctx->pl.plan) { /* else the layout refuses an infeasible plan with its message */
            if (st)
                *st = pst;
            return rc;
        }
    }
    /* CUDA: the runtime and the first GPU's context start on a thread of their own (hundreds of
     * ms) while this one makes ready the host memory of the first encode's page-locked buffers, as
     * `qmesh encode` does (its ring: 11-15 ms of page faults for 64 MiB, 1.4-2.2 ms to register
     * once touched, on the H200 host); the first encode takes it, and gives back what it left */
    qm_backend_warmup *warmup = NULL;
    if (backend == QM_BACKEND_CUDA && qm_backend_warmup_start(QM_BACKEND_CUDA, 0, &warmup, NULL) == QM_OK) {
        const qm_request *r = &ctx->pl.request;
        uint64_t bytes[2];
        /* the input's size as float64, the larger dtype: the ring is made only when a file fills it */
        const int n = qm_pipeline_staging_bytes(r, r->batch * r->features * sizeof(double), 1, bytes);
        qm_backend_host_prepare(QM_BACKEND_CUDA, bytes, n);
        ctx->prepared = n > 0;
    }
    /* the file readers' threads, while the backend starts (a bad QM_READ_THREADS is reported by
     * the encode that reads a file, as without a pool) */
    int threads = 0;
    qm_status tst;
    if (!ctx->read_pool && !ctx->no_read_pool &&
        qm_npy_default_threads("QM_READ_THREADS", &threads, &tst) == QM_OK && threads > 1)
        shared_pool_take(ctx, threads);
    rc = qm_pipeline_layout(&ctx->pl, -1, 1, st); /* this process holds every device */
    qm_backend_warmup_join(warmup, NULL, NULL);
    if (rc == QM_OK) /* beside the start-up thread's kernel loads */
        rc = qm_pipeline_open_backend(&ctx->pl, &(qm_backend_desc){.kind = backend}, st);
    qm_backend_warmup_end(warmup);
    if (rc != QM_OK)
        context_unprepare(ctx);
    return rc;
}

static qm_code encode(qm_context *ctx, const qm_amp_input *in_given,
                      const qm_materialize_opts *opts, qm_state **out, qm_status *st)
{
    const qm_plan *p = ctx->pl.plan;
    qm_amp_input one_col = *in_given;
    const qm_amp_input *in = in_given;
    /* basis takes one index per sample: one row of B indices (a 1-D input) is B samples */
    if (p->request.encoding == QM_ENCODING_BASIS && in->n > 1 && (in->batch ? in->batch : 1) == 1) {
        one_col.batch = in->n;
        one_col.n = 1;
        in = &one_col;
    }
    const uint64_t rows = in->batch ? in->batch : 1;
    if (rows != p->request.batch || in->n != p->request.features)
        return qm_fail(st, QM_E_INPUT, "encode: the input has %llu rows of %llu values but the "
                       "context was planned for %llu rows of %llu", (unsigned long long)rows,
                       (unsigned long long)in->n, (unsigned long long)p->request.batch,
                       (unsigned long long)p->request.features);
    /* the context's encode cache, made at its first encode (reuse.h) */
    if (!ctx->reuse) {
        const qm_code rc = qm_reuse_create(ctx->pl.hal, &ctx->reuse, st);
        if (rc != QM_OK)
            return rc;
    }
    qm_materialize_opts o = opts ? *opts : (qm_materialize_opts){0};
    o.reuse = ctx->reuse;
    qm_code rc = qm_pipeline_materialize(&ctx->pl, in, &o, out, st);
    context_unprepare(ctx); /* its buffers are made (kept by the cache): the rest goes */
    if (rc == QM_OK) { /* the state keeps the context (and its backend) alive */
        context_retain(ctx);
        (*out)->owner_retain = context_retain;
        (*out)->owner_release = context_release;
        (*out)->owner = ctx;
    }
    return rc;
}

static qm_code encode_check(const qm_context *ctx, const void *in, qm_state **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!ctx || !in || !out)
        return qm_fail(st, QM_E_ARG, "encode: ctx, input and out must not be NULL");
    if (!ctx->pl.hal)
        return qm_fail(st, QM_E_ARG, "encode: the context has no backend (call qm_context_open "
                       "first)");
    return QM_OK;
}

qm_code qm_context_encode(qm_context *ctx, const qm_host_data *in, qm_state **out, qm_status *st)
{
    qm_code rc = encode_check(ctx, in, out, st);
    if (rc != QM_OK)
        return rc;
    if (!in->data)
        return qm_fail(st, QM_E_ARG, "encode: input data must not be NULL");
    const qm_amp_input a = {.dtype = in->dtype, .data = in->data, .n = in->features,
                            .batch = in->rows};
    return encode(ctx, &a, NULL, out, st);
}

/* Device input: the reader copies values out of the buffer that wraps it on the device that
 * holds it (for shards on other devices and for the slow path's scans). */
typedef struct device_reader {
    qm_hal *hal;
    qm_hal_buf *buf;
    size_t elem_bytes;
} device_reader;

static qm_code device_read(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    const device_reader *r = ctx;
    return qm_hal_copy_d2h(r->hal, dst, r->buf, first * r->elem_bytes, count * r->elem_bytes, NULL,
                           st);
}

qm_code qm_context_encode_device(qm_context *ctx, const qm_device_data *in, qm_state **out,
                                 qm_status *st)
{
    qm_code rc = encode_check(ctx, in, out, st);
    if (rc != QM_OK)
        return rc;
    if (!in->data)
        return qm_fail(st, QM_E_ARG, "encode: input data must not be NULL");
    const size_t is = qm_dtype_size(in->dtype);
    if (in->dtype != QM_DTYPE_FLOAT32 && in->dtype != QM_DTYPE_FLOAT64)
        return qm_fail(st, QM_E_DTYPE, "encode: input dtype must be float32 or float64 (got %s)",
                       qm_dtype_name(in->dtype) ? qm_dtype_name(in->dtype) : "unknown");
    const uint64_t rows = in->rows ? in->rows : 1;
    if (in->features == 0 || rows > UINT64_MAX / in->features / is)
        return qm_fail(st, QM_E_INPUT, "encode: %llu rows of %llu values are not a device buffer "
                       "size", (unsigned long long)rows, (unsigned long long)in->features);
    /* the device whose memory holds the input (the first that can read it in place) */
    device_reader r = {.hal = ctx->pl.hal, .elem_bytes = is};
    const uint64_t bytes = rows * in->features * is;
    qm_status why;
    qm_status_clear(&why);
    const int n = qm_hal_device_count(r.hal);
    for (int d = 0; d < n && !r.buf; ++d) {
        qm_status tried;
        if (qm_hal_buf_wrap_device(r.hal, d, in->data, bytes, &r.buf, &tried) != QM_OK && d == 0)
            why = tried;
    }
    if (!r.buf)
        return qm_fail(st, QM_E_UNSUPPORTED, "encode: the input at %p (%llu B) is not memory of "
                       "any of this context's %d devices (%s)", in->data,
                       (unsigned long long)bytes, n, why.msg);
    const qm_amp_input a = {.dtype = in->dtype, .data = in->data, .n = in->features,
                            .batch = in->rows, .read = device_read, .read_ctx = &r,
                            .device_data = true};
    rc = encode(ctx, &a, NULL, out, st);
    qm_hal_buf_free(r.hal, r.buf);
    return rc;
}

qm_code qm_context_encode_file(qm_context *ctx, const char *path, qm_state **out, qm_status *st)
{
    qm_code rc = encode_check(ctx, path, out, st);
    if (rc != QM_OK)
        return rc;
    qm_input_file f;
    if ((rc = qm_input_open(path, NULL, NULL, &f, st)) == QM_OK) {
        qm_npy_reader_use_pool(f.npy, shared_pool_of(ctx)); /* a .npy file: the process's threads */
        rc = encode(ctx, &f.in, NULL, out, st);
    }
    qm_input_close(&f);
    return rc;
}

qm_code qm_input_file_shape(const char *path, uint64_t *rows, uint64_t *features, int *ndim,
                            qm_dtype *dtype, qm_status *st)
{
    if (!path)
        return qm_fail(st, QM_E_ARG, "input: path must not be NULL");
    qm_input_file f; /* a CSV file's rows counted, its values not held */
    const qm_code rc = qm_input_open_stream(path, NULL, NULL, &f, st);
    if (rc == QM_OK) {
        if (rows)
            *rows = f.in.batch ? f.in.batch : 1;
        if (features)
            *features = f.in.n;
        if (ndim)
            *ndim = f.ndim;
        if (dtype)
            *dtype = f.in.dtype;
    }
    qm_input_close(&f);
    return rc;
}

/* ---- for the engine's own front ends (api_internal.h) ------------------------------------------ */

qm_code qm_context_encode_input(qm_context *ctx, const qm_amp_input *in,
                                const qm_materialize_opts *opts, qm_state **out, qm_status *st)
{
    const qm_code rc = encode_check(ctx, in, out, st);
    return rc != QM_OK ? rc : encode(ctx, in, opts, out, st);
}

qm_hal *qm_context_hal(const qm_context *ctx) { return ctx ? ctx->pl.hal : NULL; }

void qm_context_no_read_pool(qm_context *ctx)
{
    if (ctx)
        ctx->no_read_pool = true;
}

qm_reuse_stats qm_context_reuse_stats(const qm_context *ctx)
{
    return qm_reuse_stats_get(ctx ? ctx->reuse : NULL);
}

uint64_t qm_context_device_peak_bytes(const qm_context *ctx)
{
    const qm_hal *hal = ctx ? ctx->pl.hal : NULL;
    uint64_t sum = 0;
    for (int d = 0; hal && d < qm_hal_device_count(hal); ++d) {
        qm_hal_usage u;
        if (qm_hal_usage_query(hal, d, &u, NULL) == QM_OK)
            sum += u.peak_bytes;
    }
    return sum;
}
