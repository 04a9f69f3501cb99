#define _POSIX_C_SOURCE 200809L /* clock_gettime, strtok_r */
/* encode.c — `qmesh encode` as a library call (see encode.h): read → plan → check outputs →
 * materialize → write temporaries → norm check → vote → commit.
 *
 * Steps: sniff and open the input (npy: header only, values read per shard on demand; CSV: rows
 * counted, values parsed per shard on demand, each rank from its own first row); build the request (qubits and dtype defaults from the input); load the scenario, graph,
 * mesh; plan (an infeasible plan stops here, before any device memory); check every output path
 * (E-OUTPUT) after removing temporaries of dead runs; open the backend; stream the input into the
 * shards (materialize.c); read the state back in chunks into the temporaries (--out: a file rank 0
 * assembles; --out-dir: a sibling temporary directory all ranks write into; no output: nothing is
 * read back), through page-locked staging and the writer threads of io_pool.c; the norm check on
 * the devices (qm_state_norms: Σ|ψ|² per state where the shards live, merged across shards and
 * ranks; E-NUMERIC, bound in qm_encode_norm_check); one vote of all ranks; rank 0 renames
 * the file or swaps the directory in; a last verdict. The cancel flag and QM_FAULT_RANK's faults
 * are looked at in fault_point() at the named phases (docs/io.md "Run lifecycle").
 * Must not: leave a file under an output name on failure, commit before the norm check and the
 * vote, or allocate device memory for a plan that does not fit.
 * Known warts: the cancel flag is not looked at inside materialize (materialize.c runs to its
 * end: seconds for GiB-sized states, then the run stops at the next phase point); under MPI it is
 * looked at only at phase points (a peer may be waiting in a send); a non-root rank whose read-back fails in the middle of a gathered --out stops
 * sending, and rank 0 then waits in its receive (rank 0's own failures keep draining).
 */
#include "encode.h"
#include "comm.h"
#include "discover.h"
#include "ingest.h"
#include "layout.h"
#include "pipeline.h"
#include "materialize_internal.h"
#include "scenario_loader.h"
#include "state_internal.h"
#include "status_internal.h"

#include <jansson.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h> /* AT_SYMLINK_NOFOLLOW */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h> /* gethostname */

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
    qm_pipeline_fini(&r->pipeline);
    qm_free(r->batch_plan_json);
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

/* ---- cancel and deterministic faults --------------------------------------------------------- */

static const char *const phase_names[] = {"none", "plan", "materialize", "readback", "write",
                                          "check", "commit", "swap"};
static const char *const mode_names[] = {"none", "fail", "exit", "kill", "sigint", "sigterm",
                                         "nan", "skew"};

const char *qm_enc_phase_name(qm_enc_phase phase)
{
    return (unsigned)phase < sizeof phase_names / sizeof *phase_names ? phase_names[phase] : "?";
}

qm_code qm_encode_fault_parse(const char *spec, qm_encode_fault *out, qm_status *st)
{
    memset(out, 0, sizeof *out);
    char buf[64], *save = NULL;
    if (!spec || strlen(spec) >= sizeof buf)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: expected R:PHASE:MODE[:BATCH] (got '%.64s')",
                       spec ? spec : "");
    snprintf(buf, sizeof buf, "%s", spec);
    const char *r = strtok_r(buf, ":", &save), *ph = strtok_r(NULL, ":", &save),
               *mo = strtok_r(NULL, ":", &save), *ba = strtok_r(NULL, ":", &save);
    char *end = NULL, *bend = NULL;
    const long rank = r ? strtol(r, &end, 10) : -1;
    if (!r || !ph || !mo || strtok_r(NULL, ":", &save) || !end || *end || rank < 0 || rank > 1023)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: expected R:PHASE:MODE[:BATCH] with R a rank "
                       "0..1023 (got '%s')", spec);
    const unsigned long long batch = ba ? strtoull(ba, &bend, 10) : 0;
    if (ba && (!bend || *bend || ba[0] < '0' || ba[0] > '9'))
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: BATCH must be a batch number 0, 1, ... "
                       "(got '%s')", ba);
    int p = 0, m = 0;
    for (int i = 1; i < (int)(sizeof phase_names / sizeof *phase_names); ++i)
        if (strcmp(ph, phase_names[i]) == 0)
            p = i;
    for (int i = 1; i < (int)(sizeof mode_names / sizeof *mode_names); ++i)
        if (strcmp(mo, mode_names[i]) == 0)
            m = i;
    if (!p)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: unknown phase '%s' (accepted: plan, "
                       "materialize, write, check, commit, swap)", ph);
    if (!m)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: unknown mode '%s' (accepted: fail, exit, "
                       "kill, sigint, sigterm, nan, skew)", mo);
    if ((m == QM_ENC_FAULT_NAN || m == QM_ENC_FAULT_SKEW) && p != QM_ENC_PHASE_CHECK)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: mode %s takes the phase check (got %s)", mo,
                       ph);
    if (p == QM_ENC_PHASE_SWAP && m != QM_ENC_FAULT_EXIT && m != QM_ENC_FAULT_KILL)
        return qm_fail(st, QM_E_ARG, "QM_FAULT_RANK: the phase swap is after the commit and takes "
                       "exit or kill only (got %s)", mo);
    *out = (qm_encode_fault){.rank = (int)rank, .phase = (qm_enc_phase)p,
                             .mode = (qm_enc_fault_mode)m, .batch = batch};
    return QM_OK;
}

qm_code qm_encode_check_cancel(const qm_encode_job *job, qm_status *st)
{
    if (!job->cancel || !*job->cancel)
        return QM_OK;
    const int sig = (int)*job->cancel;
    const qm_code rc = qm_fail(st, QM_E_INTERRUPTED, "encode: interrupted by %s; nothing was "
                               "written", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM"
                                                                                    : "a signal");
    if (st)
        st->backend_code = sig;
    return rc;
}

qm_code qm_encode_fault_point(const qm_encode_job *job, int me, qm_enc_phase ph, uint64_t batch,
                              qm_code rc, qm_status *st)
{
    if (rc != QM_OK)
        return rc;
    const qm_encode_fault *f = &job->fault;
    if (f->phase == ph && f->rank == me && f->batch == batch) {
        switch (f->mode) {
        case QM_ENC_FAULT_FAIL:
            return qm_fail(st, QM_E_BACKEND, "fault: injected failure on rank %d at phase %s "
                           "(QM_FAULT_RANK)", me, qm_enc_phase_name(ph));
        case QM_ENC_FAULT_EXIT:
            fprintf(stderr, "fault: rank %d exits at phase %s (QM_FAULT_RANK)\n", me,
                    qm_enc_phase_name(ph));
            fflush(stderr);
            _exit(3);
        case QM_ENC_FAULT_KILL:
            fprintf(stderr, "fault: rank %d killed at phase %s (QM_FAULT_RANK)\n", me,
                    qm_enc_phase_name(ph));
            fflush(stderr);
            raise(SIGKILL);
            break;
        case QM_ENC_FAULT_SIGINT:
            raise(SIGINT);
            break;
        case QM_ENC_FAULT_SIGTERM:
            raise(SIGTERM);
            break;
        default:
            break;
        }
    }
    return qm_encode_check_cancel(job, st);
}

/* The one-shot run is batch 0. */
static qm_code fault_point(const qm_encode_job *job, int me, qm_enc_phase ph, qm_code rc,
                           qm_status *st)
{
    return qm_encode_fault_point(job, me, ph, 0, rc, st);
}

/* ---- read-back, check and output ------------------------------------------------------------- */

/* The read-back for --out/--out-dir: QM_OUT_BUFS page-locked staging buffers of QM_OUT_CHUNK_AMPS
 * amplitudes (together the one read-back chunk the plan's host-memory check counts) and
 * QM_OUT_THREADS writer threads (io_pool.c; io.h's shape, which topo dump's write probe uses
 * too). The device copy of chunk k + 1 into a free buffer overlaps the pwrite of chunk k at its
 * offset by a writer thread. One caller fills the buffers, in index order, so the I/O steps are
 * numbered the same on every run. */
#define QM_OUT_BUFS QM_OUT_POOL_BUFS
#define QM_OUT_THREADS QM_OUT_POOL_THREADS
_Static_assert(QM_OUT_CHUNK_AMPS * QM_OUT_BUFS == QM_READBACK_AMPS,
               "io.h's output chunks and plan.h's read-back chunk disagree");

typedef struct rb_ctx {
    const qm_encode_job *job;
    bool cancel_ok;            /* check the cancel flag between chunks (no peer is waiting) */
    qm_hal *hal;               /* the staging's owner */
    void *block;               /* the buffers' one page-locked block (qm_hal_host_alloc) */
    void *bufs[QM_OUT_BUFS];   /* its QM_OUT_BUFS chunks */
    qm_out_pool *pool;
} rb_ctx;

/* The staging as one block of QM_OUT_BUFS chunks: one page-locking (cudaHostRegister) instead of
 * one per buffer. Each call costs the driver a fixed part beside its per-page work, and on one
 * process the start-up thread makes them while the ingest's first copies are enqueued (the traces
 * of session 26: the first copy 0.7-0.9 ms late with an output, 0.2-0.3 ms without). */
static qm_code staging_open(rb_ctx *rb, qm_hal *hal, qm_dtype dtype, qm_status *st)
{
    rb->hal = hal;
    const uint64_t chunk = QM_OUT_CHUNK_AMPS * qm_dtype_size(dtype);
    qm_code rc = qm_hal_host_alloc(hal, QM_OUT_BUFS * chunk, &rb->block, st);
    for (int i = 0; rc == QM_OK && i < QM_OUT_BUFS; ++i)
        rb->bufs[i] = (unsigned char *)rb->block + i * chunk;
    if (rc == QM_OK)
        rc = qm_out_pool_create(rb->bufs, QM_OUT_BUFS, QM_OUT_THREADS, &rb->pool, st);
    return rc;
}

/* Joins the writer threads (after their last write), then frees the staging. */
static void staging_close(rb_ctx *rb)
{
    if (!rb->hal)
        return;
    qm_out_pool_destroy(rb->pool);
    rb->pool = NULL;
    qm_hal_host_free(rb->hal, rb->block);
    rb->block = NULL;
    memset(rb->bufs, 0, sizeof rb->bufs);
}

/* One chunk of the state into dst (the senders of a gathered --out). */
static qm_code read_chunk(const qm_state *s, uint64_t pos, uint64_t n, void *dst, rb_ctx *rb,
                          qm_status *st)
{
    const qm_code rc = rb->cancel_ok ? qm_encode_check_cancel(rb->job, st) : QM_OK;
    return rc == QM_OK ? qm_state_read(s, pos, n, s->dtype, dst, st) : rc;
}

/* The host address of global amplitudes [pos, pos + n) when one shard holds them in host-visible
 * memory (the simulator's materialized devices), else NULL (a GPU: through the staging). */
static const void *host_visible(const qm_state *s, uint64_t pos, uint64_t n)
{
    for (int i = 0; i < s->n_shards; ++i) {
        const qm_state_shard *sh = &s->shards[i];
        if (pos >= sh->start && pos + n <= sh->end) {
            const char *h = qm_hal_buf_host_ptr(sh->buf);
            return h ? h + (pos - sh->start) * qm_dtype_size(s->dtype) : NULL;
        }
    }
    return NULL;
}

/* Global amplitudes [start, end) of s into writer w, amplitude pos going to element pos - w0:
 * chunk by chunk into a free staging buffer (or, for host-visible simulated memory, straight from
 * the shard), each handed to a writer thread. Stops at the first
 * failed write (the pool keeps it); the caller drains the pool before using or aborting w. */
static qm_code read_back_to(const qm_state *s, uint64_t start, uint64_t end, qm_npy_writer *w,
                            uint64_t w0, rb_ctx *rb, qm_status *st)
{
    for (uint64_t pos = start; pos < end;) {
        const uint64_t n = end - pos < QM_OUT_CHUNK_AMPS ? end - pos : QM_OUT_CHUNK_AMPS;
        if (qm_out_pool_failed(rb->pool))
            return qm_out_pool_drain(rb->pool, st);
        const void *direct = host_visible(s, pos, n);
        if (direct) { /* simulated device memory: written where it is, no copy */
            const qm_code rc = rb->cancel_ok ? qm_encode_check_cancel(rb->job, st) : QM_OK;
            if (rc != QM_OK)
                return rc;
            qm_out_pool_submit_ptr(rb->pool, direct, w, pos - w0, n);
            pos += n;
            continue;
        }
        int idx;
        void *buf = qm_out_pool_acquire(rb->pool, &idx);
        const qm_code rc = read_chunk(s, pos, n, buf, rb, st);
        if (rc != QM_OK) {
            qm_out_pool_release(rb->pool, idx);
            return rc;
        }
        qm_out_pool_submit(rb->pool, idx, w, pos - w0, n);
        pos += n;
    }
    return QM_OK;
}

/* Wait for every write handed to the pool; the first failure (of rc, else of the writes). */
static qm_code drain(rb_ctx *rb, qm_code rc, qm_status *st)
{
    qm_status tmp;
    const qm_code d = qm_out_pool_drain(rb->pool, rc == QM_OK ? st : &tmp);
    return rc == QM_OK ? d : rc;
}

/* ---- the same output path for the streamed run (encode_stream.c) ---------------------------- */

struct qm_encode_out {
    rb_ctx rb;
};

qm_code qm_encode_out_open(const qm_encode_job *job, qm_hal *hal, qm_dtype dtype,
                           qm_encode_out **out, qm_status *st)
{
    *out = NULL;
    qm_encode_out *o = calloc(1, sizeof *o);
    if (!o)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    o->rb = (rb_ctx){.job = job, .cancel_ok = true}; /* one process: nobody waits on a peer */
    const qm_code rc = staging_open(&o->rb, hal, dtype, st);
    if (rc != QM_OK) {
        qm_encode_out_close(o);
        return rc;
    }
    *out = o;
    return QM_OK;
}

qm_code qm_encode_out_write(qm_encode_out *o, const qm_state *s, uint64_t n, qm_npy_writer *w,
                            uint64_t at, qm_status *st)
{
    /* read_back_to writes amplitude pos at element pos - w0: w0 = -at (mod 2^64) puts amplitude 0
     * at element `at` (unsigned arithmetic wraps, exactly) */
    const qm_code rc = read_back_to(s, 0, n, w, (uint64_t)0 - at, &o->rb, st);
    return drain(&o->rb, rc, st);
}

void qm_encode_out_close(qm_encode_out *o)
{
    if (!o)
        return;
    staging_close(&o->rb);
    free(o);
}

/* QM_FAULT_RANK's nan and skew: this rank's first amplitude becomes NaN, or gets 0.001 added to its
 * real part, where it lives (on its device), so the check on the devices must catch it. */
qm_code qm_encode_corrupt_first(const qm_state *s, qm_enc_fault_mode mode, qm_status *st)
{
    const qm_state_shard *sh = &s->shards[0];
    union {
        double d[2];
        float f[2];
    } v;
    const uint64_t es = qm_dtype_size(s->dtype);
    qm_code rc = qm_hal_copy_d2h(s->hal, &v, sh->buf, 0, es, NULL, st);
    if (rc != QM_OK)
        return rc;
    const bool nan_ = mode == QM_ENC_FAULT_NAN;
    if (s->dtype == QM_DTYPE_COMPLEX128)
        v.d[0] = nan_ ? NAN : v.d[0] + 1e-3;
    else
        v.f[0] = nan_ ? NAN : v.f[0] + 1e-3f;
    return qm_hal_copy_h2d(s->hal, sh->buf, 0, &v, es, NULL, st);
}

/* The norm check, on every rank with the same sums: a non-finite Σ|ψ|² or |Σ|ψ|² − 1| above
 *   bound = 4·eps(out) + (N + 2n + 8)·eps(float64)
 * is E-NUMERIC (docs/io.md "The norm check"): 2·eps(out) covers rounding each amplitude to the
 * output dtype (each |ψ_i|² off by at most 2u relative, u = eps/2), the rest the float64 norm
 * (pairwise tree: about n rounding steps, the sqrt and the division) and this check's own
 * sequential float64 sum over N = 2^n terms, all with a factor of 2 to spare. States
 * [first, first + batch) (a streamed batch: first > 0); the result's max and worst state are kept
 * over every call of a run (reset when first is 0). */
qm_code qm_encode_norm_check(qm_encode_result *r, const double *sums, uint64_t first,
                             uint64_t batch, unsigned qubits, qm_dtype dtype, uint64_t n_amps,
                             qm_status *st)
{
    const double eps_out = dtype == QM_DTYPE_COMPLEX64 ? (double)FLT_EPSILON : DBL_EPSILON;
    const double bound = 4 * eps_out + ((double)n_amps + 2.0 * qubits + 8) * DBL_EPSILON;
    if (first == 0) {
        r->norm_max_error = 0;
        r->norm_worst_state = 0;
    }
    for (uint64_t k = 0; k < batch; ++k) {
        if (!isfinite(sums[k]))
            return qm_fail(st, QM_E_NUMERIC, "encode: norm check failed for state %llu: "
                           "sum |psi|^2 is %s (bound %.3e); nothing was written",
                           (unsigned long long)(first + k), isnan(sums[k]) ? "NaN" : "infinite",
                           bound);
        const double err = fabs(sums[k] - 1.0);
        if (err > r->norm_max_error || first + k == 0) {
            r->norm_max_error = err;
            r->norm_worst_state = first + k;
        }
    }
    if (r->norm_max_error > bound)
        return qm_fail(st, QM_E_NUMERIC, "encode: norm check failed for state %llu: "
                       "|sum |psi|^2 - 1| = %.3e exceeds the bound %.3e (%s, 2^%u amplitudes); "
                       "nothing was written", (unsigned long long)r->norm_worst_state,
                       r->norm_max_error, bound, qm_dtype_name(dtype), qubits);
    return QM_OK;
}

/* The output's shape: (2^n,) for a 1-D input, (B, 2^n) for a 2-D one (even when B is 1). */
static int out_shape(const qm_encode_result *r, uint64_t shape[2])
{
    if (r->input_ndim == 2) {
        shape[0] = r->pipeline.plan->request.batch;
        shape[1] = r->pipeline.plan->n_amps;
        return 2;
    }
    shape[0] = r->pipeline.plan->n_amps;
    shape[1] = 0;
    return 1;
}

/* manifest.json of a plan (written by rank 0): every shard's rank, device, range, dtype, file. */
static char *manifest_text(const qm_encode_result *r, const qm_plan *p, qm_status *st)
{
    json_t *man = json_object(), *arr = json_array(), *shape = json_array();
    char *text = NULL;
    if (!man || !arr || !shape)
        goto done;
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *sh = &p->shards[i];
        char file[64];
        snprintf(file, sizeof file, "shard-%04d.npy", i);
        json_t *j = json_object();
        json_object_set_new(j, "shard", json_integer(i));
        json_object_set_new(j, "rank", json_integer(sh->rank));
        json_object_set_new(j, "device", json_string(r->pipeline.mesh->devices[sh->device].id));
        json_object_set_new(j, "start", json_integer((json_int_t)sh->start));
        json_object_set_new(j, "end", json_integer((json_int_t)sh->end));
        json_object_set_new(j, "dtype", json_string(qm_dtype_name(p->request.dtype)));
        json_object_set_new(j, "file", json_string(file));
        json_array_append_new(arr, j);
    }
    uint64_t dims[2];
    const int nd = out_shape(r, dims);
    for (int i = 0; i < nd; ++i)
        json_array_append_new(shape, json_integer((json_int_t)dims[i]));
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
    json_object_set_new(man, "format", json_string("qmesh-shards/1"));
    json_object_set_new(man, "qubits", json_integer(p->request.qubits));
    json_object_set_new(man, "dtype", json_string(qm_dtype_name(p->request.dtype)));
    json_object_set_new(man, "batch", json_integer((json_int_t)p->request.batch));
    json_object_set_new(man, "features", json_integer((json_int_t)r->features));
    json_object_set_new(man, "amplitudes_per_state", json_integer((json_int_t)p->n_amps));
    json_object_set_new(man, "shape", shape);
    shape = NULL;
    json_object_set_new(man, "global_amplitudes", json_integer((json_int_t)p->global_amplitudes));
    json_object_set_new(man, "policy", json_string(qm_policy_name(p->policy)));
    json_object_set_new(man, "ranks", json_integer(r->pipeline.mesh->n_ranks));
    json_object_set_new(man, "plan_hash", json_string(hash));
    json_object_set_new(man, "scenario", json_string(qm_topology_label(r->pipeline.topology)));
    json_object_set_new(man, "shards", arr);
    arr = NULL;
    text = json_dumps(man, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
done:
    json_decref(shape);
    json_decref(arr);
    json_decref(man);
    if (!text)
        qm_fail(st, QM_E_NOMEM, "encode: out of host memory for the manifest");
    return text;
}

#define QM_TMPDIR_BYTES 4096

/* --out-dir, up to the vote: rank 0 creates the sibling temporary directory and every rank learns
 * its name; each rank writes its shards there (shard-<global id>.npy: all opened first, then read
 * back through the staging and written by the pool's threads, then each synced and renamed inside
 * the directory), rank 0 also manifest.json. Nothing is visible under --out-dir yet: the caller
 * votes, then rank 0 swaps the directory in (qm_out_dir_swap) or removes it. */
static qm_code write_out_dir(const qm_encode_job *job, qm_encode_result *r, const qm_state *s,
                             const int *global_ids, rb_ctx *rb, char *tmpdir, qm_status *st)
{
    const int n = s->n_shards;
    const int me = job->comm ? qm_comm_rank(job->comm) : 0;
    const bool root = me == 0;
    char *text = NULL, name[QM_TMPDIR_BYTES + 64];
    qm_code rc = root ? qm_out_dir_stage(job->out_dir, tmpdir, QM_TMPDIR_BYTES, st) : QM_OK;
    if ((rc = qm_comm_verdict(job->comm, rc, st)) != QM_OK)
        return rc;
    if (job->comm && qm_comm_size(job->comm) > 1 &&
        (rc = qm_comm_broadcast(job->comm, tmpdir, QM_TMPDIR_BYTES, 0, st)) != QM_OK)
        return rc;
    qm_npy_writer **w = calloc((size_t)n, sizeof *w);
    if (!w)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shard writers", n);
    for (int i = 0; i < n && rc == QM_OK; ++i) {
        const uint64_t shape[1] = {s->shards[i].end - s->shards[i].start};
        snprintf(name, sizeof name, "%s/shard-%04d.npy", tmpdir, global_ids[i]);
        rc = qm_npy_writer_open(name, s->dtype, 1, shape, &w[i], st);
        if (rc == QM_OK)
            rc = qm_npy_writer_reserve(w[i], st);
    }
    rc = fault_point(job, me, QM_ENC_PHASE_READBACK, rc, st);
    for (int i = 0; i < n && rc == QM_OK; ++i)
        rc = read_back_to(s, s->shards[i].start, s->shards[i].end, w[i], s->shards[i].start, rb,
                          st);
    rc = drain(rb, rc, st); /* no thread writes to a writer from here on */
    rc = fault_point(job, me, QM_ENC_PHASE_WRITE, rc, st);
    for (int i = 0; i < n; ++i) {
        if (rc == QM_OK)
            rc = qm_npy_writer_commit(w[i], st); /* synced, renamed inside the temporary dir */
        else
            qm_npy_writer_abort(w[i]);
    }
    free(w);
    if (rc == QM_OK && root && !(text = manifest_text(r, r->pipeline.plan, st)))
        rc = st->code;
    if (rc == QM_OK && root) {
        snprintf(name, sizeof name, "%s/manifest.json", tmpdir);
        rc = qm_atomic_write_text(name, text, st);
    }
    if (rc == QM_OK)
        r->n_files = n + (root ? 1 : 0);
    free(text);
    return rc;
}

/* --out, up to the vote: rank 0 writes its own range, then receives every other rank's range in
 * rank order, chunk by chunk into the staging (no rank ever holds more than a chunk of another's
 * amplitudes), each chunk written at its offset by the pool's threads, into the temporary file,
 * and syncs it; *w_out (rank 0) is the writer the caller commits or aborts. */
static qm_code write_gathered(const qm_encode_job *job, qm_encode_result *r, const qm_state *s,
                              uint64_t lo, uint64_t hi, void *buf, rb_ctx *rb,
                              qm_npy_writer **w_out, qm_status *st)
{
    qm_comm *c = job->comm;
    const int R = c ? qm_comm_size(c) : 1, me = c ? qm_comm_rank(c) : 0;
    const uint64_t es = qm_dtype_size(s->dtype);
    const qm_plan *p = r->pipeline.plan;
    qm_npy_writer *w = NULL;
    qm_code rc = QM_OK;
    if (me == 0) {
        uint64_t shape[2];
        const int nd = out_shape(r, shape);
        rc = qm_npy_writer_open(job->out, s->dtype, nd, shape, &w, st);
        if (rc == QM_OK && (rc = qm_npy_writer_reserve(w, st)) != QM_OK) {
            qm_npy_writer_abort(w);
            w = NULL;
        }
    }
    if ((rc = qm_comm_verdict(c, rc, st)) != QM_OK)
        return rc;
    *w_out = w;
    /* every rank reads its own range; rank 0 writes, the others send */
    if (me == 0) {
        /* any failure here still receives every chunk the others send (they must not be left
         * waiting in a send); only a failed receive stops the loop */
        rc = fault_point(job, me, QM_ENC_PHASE_READBACK, rc, st);
        if (rc == QM_OK)
            rc = read_back_to(s, lo, hi, w, 0, rb, st);
        for (int src = 1; src < R; ++src) {
            uint64_t rlo = UINT64_MAX, rhi = 0;
            for (int i = 0; i < p->n_shards; ++i)
                if (p->shards[i].rank == src) {
                    rlo = p->shards[i].start < rlo ? p->shards[i].start : rlo;
                    rhi = p->shards[i].end > rhi ? p->shards[i].end : rhi;
                }
            for (uint64_t pos = rlo; pos < rhi; pos += QM_OUT_CHUNK_AMPS) {
                const uint64_t n = rhi - pos < QM_OUT_CHUNK_AMPS ? rhi - pos : QM_OUT_CHUNK_AMPS;
                int idx;
                void *b = qm_out_pool_acquire(rb->pool, &idx);
                const qm_code rrc = qm_comm_recv(c, src, b, n * es, 7, st);
                if (rrc != QM_OK || rc != QM_OK)
                    qm_out_pool_release(rb->pool, idx);
                else
                    qm_out_pool_submit(rb->pool, idx, w, pos, n);
                if (rrc != QM_OK) {
                    rc = rrc;
                    src = R;
                    break;
                }
            }
        }
        rc = drain(rb, rc, st);
    } else {
        /* every chunk is sent, also after a failure here (zeros then: rank 0 receives every chunk
         * it expects and the verdict after the write discards the output); only a failed send,
         * which means the communicator itself is broken, stops the loop */
        rc = fault_point(job, me, QM_ENC_PHASE_READBACK, rc, st);
        for (uint64_t pos = lo; pos < hi; pos += QM_OUT_CHUNK_AMPS) {
            const uint64_t n = hi - pos < QM_OUT_CHUNK_AMPS ? hi - pos : QM_OUT_CHUNK_AMPS;
            if (rc == QM_OK)
                rc = read_chunk(s, pos, n, buf, rb, st);
            if (rc != QM_OK)
                memset(buf, 0, (size_t)(n * es));
            qm_status send_st;
            const qm_code src = qm_comm_send(c, 0, buf, n * es, 7, rc == QM_OK ? st : &send_st);
            if (src != QM_OK) {
                rc = rc == QM_OK ? src : rc;
                break;
            }
        }
    }
    rc = fault_point(job, me, QM_ENC_PHASE_WRITE, rc, st);
    if (rc == QM_OK && me == 0)
        rc = qm_npy_writer_sync(w, st);
    if (rc == QM_OK && me == 0)
        r->n_files = 1;
    return rc;
}

/* The bytes each output needs, for the checks before any work. */
static qm_code check_outputs(const qm_encode_job *job, qm_encode_result *r, qm_status *st)
{
    const qm_plan *p = r->pipeline.plan;
    const qm_dtype dt = p->request.dtype;
    if (job->out) {
        uint64_t shape[2];
        const int nd = out_shape(r, shape);
        const uint64_t bytes = qm_npy_file_bytes(dt, nd, shape);
        return qm_out_check(job->out, false, bytes, bytes, false, st);
    }
    if (job->out_dir) {
        uint64_t total = 4096 + 512 * (uint64_t)p->n_shards, largest = total; /* the manifest */
        for (int i = 0; i < p->n_shards; ++i) {
            const uint64_t shape[1] = {p->shards[i].end - p->shards[i].start};
            const uint64_t b = qm_npy_file_bytes(dt, 1, shape);
            total += b;
            largest = b > largest ? b : largest;
        }
        return qm_out_check(job->out_dir, true, total, largest, job->force, st);
    }
    return QM_OK;
}

/* basis takes one index per sample: a 1-D input of B values is B samples (as a (B, 1) input,
 * and the output is (B, 2^n)); a 2-D input must have one column. */
qm_code qm_encode_basis_shape(qm_amp_input *in, int *ndim, qm_status *st)
{
    if (*ndim == 1) {
        in->batch = in->n;
        in->n = 1;
        *ndim = 2;
        return QM_OK;
    }
    if (in->n != 1)
        return qm_fail(st, QM_E_INPUT, "encode: the basis encoding takes one index per sample "
                       "(shape (B,) or (B, 1)), got %llu columns", (unsigned long long)in->n);
    return QM_OK;
}

/* Without --qubits, basis takes the fewest qubits that hold the largest index (at least 1). The
 * values are checked again, with their sample named, when the state is built. */
/* The same for an integer input, exactly (read_int): an index above 2^53 is not rounded. */
static qm_code basis_qubits_int(const qm_amp_input *in, unsigned *qubits, qm_status *st)
{
    const uint64_t B = in->batch ? in->batch : 1, chunk = 1u << 16;
    uint64_t *v = malloc(chunk * sizeof *v), top = 0;
    if (!v)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    qm_code rc = QM_OK;
    for (uint64_t at = 0; rc == QM_OK && at < B; at += chunk) {
        const uint64_t n = B - at < chunk ? B - at : chunk;
        if ((rc = in->read_int(in->read_int_ctx, at, n, v, st)) != QM_OK)
            break;
        for (uint64_t i = 0; rc == QM_OK && i < n; ++i) {
            if (in->int_signed && (int64_t)v[i] < 0)
                rc = qm_fail(st, QM_E_INPUT, "encode: sample %llu: basis index %lld is not a "
                             "non-negative integer", (unsigned long long)(at + i),
                             (long long)(int64_t)v[i]);
            else if (v[i] > top)
                top = v[i];
        }
    }
    free(v);
    unsigned q = 1;
    while (rc == QM_OK && q < 64 && top >> q)
        ++q;
    *qubits = q;
    return rc;
}

static qm_code basis_qubits(const qm_amp_input *in, unsigned *qubits, qm_status *st)
{
    if (in->read_int)
        return basis_qubits_int(in, qubits, st);
    const uint64_t B = in->batch ? in->batch : 1, chunk = 1u << 16;
    double *v = malloc(chunk * sizeof *v);
    if (!v)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    double top = 0;
    qm_code rc = QM_OK;
    for (uint64_t at = 0; rc == QM_OK && at < B; at += chunk) {
        const uint64_t n = B - at < chunk ? B - at : chunk;
        float *f = (float *)(void *)v;
        rc = qm_input_read(in, at, n, in->dtype == QM_DTYPE_FLOAT64 ? (void *)v : (void *)f, st);
        for (uint64_t i = n; rc == QM_OK && i-- > 0;) {
            const double x = in->dtype == QM_DTYPE_FLOAT64 ? v[i] : (double)f[i];
            if (!(x >= 0 && x == floor(x) && x < 0x1p62))
                rc = qm_fail(st, QM_E_INPUT, "encode: sample %llu: basis index %.17g is not a "
                             "non-negative integer", (unsigned long long)(at + i), x);
            else if (x > top)
                top = x;
        }
    }
    free(v);
    unsigned q = 1;
    while (rc == QM_OK && ldexp(1.0, (int)q) <= top)
        ++q;
    *qubits = q;
    return rc;
}

/* The error for a feature count that no qubit count takes (qm_encoding_qubits gave 0): one value
 * per qubit beyond 63 qubits (E-QUBITS), or an iqp count between two triangular counts (E-INPUT),
 * with what would fit (qm_encoding_fit_phrase). */
static qm_code no_state_for(qm_encoding enc, uint64_t f, qm_status *st)
{
    if (enc != QM_ENCODING_IQP)
        return qm_fail(st, QM_E_QUBITS, "encode: the %s encoding takes one value per qubit: %llu "
                       "values per sample would make %llu qubits; at most 63",
                       qm_encoding_name(enc), (unsigned long long)f, (unsigned long long)f);
    char fit[96];
    qm_encoding_fit_phrase(enc, f, fit, sizeof fit);
    return qm_fail(st, QM_E_INPUT, "encode: %llu values per sample make no iqp state (%s)",
                   (unsigned long long)f, fit);
}

qm_code qm_encode_request_complete(qm_request *req, bool qubits_given, const qm_amp_input *in,
                                   qm_status *st)
{
    const qm_encoding enc = req->encoding;
    qm_code rc = QM_OK;
    if (req->qubits == 0 && !qubits_given && enc == QM_ENCODING_AMPLITUDE)
        req->qubits = qm_qubits_for_values(in->n);
    else if (req->qubits == 0 && !qubits_given && enc == QM_ENCODING_BASIS)
        rc = basis_qubits(in, &req->qubits, st);
    else if (req->qubits == 0 && !qubits_given &&
             (req->qubits = qm_encoding_qubits(enc, in->n)) == 0)
        rc = no_state_for(enc, in->n, st);
    req->batch = in->batch;
    req->features = in->n;
    return rc;
}

/* The host-memory check of the plan (docs/planner.md "Host memory"): on the simulator every shard
 * lives in host memory, checked against the scenario's hosts and, in one process (which holds
 * every device), against this machine's MemAvailable, read here once. Under mpirun each rank
 * holds only its own devices: the scenario's hosts are checked, not this machine. */
static qm_code host_budget(const qm_encode_job *job, int ranks, qm_host_budget *out, qm_status *st)
{
    *out = (qm_host_budget){.sim = job->backend != QM_BACKEND_CUDA};
    if (!out->sim || ranks > 1)
        return QM_OK;
    if (job->host_available_bytes) {
        out->available_bytes = job->host_available_bytes;
        return QM_OK;
    }
    return qm_host_mem_available_query(&out->available_bytes, st);
}

qm_code qm_encode_input_open(const qm_encode_job *job, bool stream, qm_input_file *file,
                             qm_amp_input *in, int *ndim, qm_request *req, qm_status *st)
{
    qm_code rc = stream ? qm_input_open_stream(job->input, &job->csv, job->dataset, file, st)
                        : qm_input_open(job->input, &job->csv, job->dataset, file, st);
    if (rc == QM_OK && file->npy && job->read_threads > 0)
        rc = qm_npy_reader_set_threads(file->npy, job->read_threads, st);
    if (rc != QM_OK)
        return rc;
    *in = file->in;
    *ndim = file->ndim;
    if (job->request.encoding == QM_ENCODING_BASIS &&
        (rc = qm_encode_basis_shape(in, ndim, st)) != QM_OK)
        return rc;
    *req = job->request;
    rc = qm_encode_request_complete(req, job->qubits_given, in, st);
    if (!job->dtype_given)
        req->dtype = in->dtype == QM_DTYPE_FLOAT64 ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
    return rc;
}

/* The bytes an output at `path` replaces, which its commit removes: a regular file's size, or
 * the regular files directly in a directory (an --out-dir's shard files and manifest); 0 when
 * there is nothing there (or it cannot be read: the output's own checks report that). */
static uint64_t replaced_bytes(const char *path)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0)
        return 0;
    if (S_ISREG(sb.st_mode))
        return (uint64_t)sb.st_size;
    uint64_t sum = 0;
    DIR *d = S_ISDIR(sb.st_mode) ? opendir(path) : NULL;
    for (const struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
            sum += (uint64_t)sb.st_size;
    if (d)
        closedir(d);
    return sum;
}

qm_code qm_encode_datapath(const qm_encode_job *job, const qm_input_file *file,
                           const qm_amp_input *in, int ndim, const qm_request *req, qm_datapath *dp,
                           qm_status *st)
{
    memset(dp, 0, sizeof *dp);
    dp->sim = job->backend != QM_BACKEND_CUDA;
    if (file && in) {
        dp->input = true;
        dp->input_elem_bytes = qm_dtype_size(in->dtype);
        dp->input_background = in->read_submit != NULL && in->read_wait != NULL;
        struct stat sb;
        if (file->format != QM_INPUT_NPY && file->format != QM_INPUT_HDF5 &&
            stat(job->input, &sb) == 0)
            dp->input_file_bytes = (uint64_t)sb.st_size;
        if (job->input) {
            const qm_code rc = qm_discover_file_resident(job->input, &dp->input_resident, st);
            if (rc != QM_OK)
                return rc;
        }
    }
    if (job->out) {
        /* the output keeps the input's rank; without an input, a batch is 2-D */
        const int nd = file ? ndim : req->batch > 1 ? 2 : 1;
        const uint64_t n_amps = req->qubits < 64 ? (uint64_t)1 << req->qubits : 0;
        const uint64_t shape[2] = {nd == 2 ? (req->batch ? req->batch : 1) : n_amps, n_amps};
        dp->output = QM_DP_OUTPUT_FILE;
        dp->output_bytes = qm_npy_file_bytes(req->dtype, nd, shape);
        dp->output_replaced_bytes = replaced_bytes(job->out);
    } else if (job->out_dir) {
        dp->output = QM_DP_OUTPUT_DIR;
        dp->output_replaced_bytes = replaced_bytes(job->out_dir);
    }
    return QM_OK;
}

/* The input's reader, timed: the seconds spent reading the file into host memory (the data
 * path's `read`, measured). Synchronous reads count their own time; background reads (ingest's
 * ring) count from the first submit to the return of the last wait, the span in which the
 * reader was working (ingest waits for each piece as soon as its copy can start). */
typedef struct timed_reader {
    qm_code (*read)(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st);
    void *ctx;
    qm_code (*read_int)(void *ctx, uint64_t first, uint64_t count, uint64_t *dst, qm_status *st);
    void *int_ctx;
    qm_code (*submit)(void *ctx, uint64_t first, uint64_t count, void *dst, void **ticket,
                      qm_status *st);
    qm_code (*wait)(void *ctx, void *ticket, qm_status *st);
    double seconds;
    double bg_first, bg_last; /* background reads: first submit, last wait's return (0: none) */
} timed_reader;

static qm_code timed_submit(void *ctx, uint64_t first, uint64_t count, void *dst, void **ticket,
                            qm_status *st)
{
    timed_reader *t = ctx;
    if (t->bg_first == 0)
        t->bg_first = qm_clock_now_s();
    return t->submit(t->ctx, first, count, dst, ticket, st);
}

static qm_code timed_wait(void *ctx, void *ticket, qm_status *st)
{
    timed_reader *t = ctx;
    const qm_code rc = t->wait(t->ctx, ticket, st);
    t->bg_last = qm_clock_now_s();
    return rc;
}

/* The measured read: synchronous reads plus the span of the background ones. */
static double timed_seconds(const timed_reader *t)
{
    return t->seconds + (t->bg_first > 0 && t->bg_last > t->bg_first ? t->bg_last - t->bg_first : 0);
}

static qm_code timed_read(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    timed_reader *t = ctx;
    const double t0 = qm_clock_now_s();
    const qm_code rc = t->read(t->ctx, first, count, dst, st);
    t->seconds += qm_clock_now_s() - t0;
    return rc;
}

static qm_code timed_read_int(void *ctx, uint64_t first, uint64_t count, uint64_t *dst,
                              qm_status *st)
{
    timed_reader *t = ctx;
    const double t0 = qm_clock_now_s();
    const qm_code rc = t->read_int(t->int_ctx, first, count, dst, st);
    t->seconds += qm_clock_now_s() - t0;
    return rc;
}

/* While the CUDA context is made (hundreds of ms, the thread would only wait), the host memory of
 * the page-locked buffers this rank will make next is made ready (qm_backend_host_prepare): the
 * ingest's ring and the norm's sums (qm_pipeline_staging_bytes), and the output's staging with
 * --out (rank 0) or --out-dir. On the H200 host this takes 64 MiB of page-locking from 11-15 ms to
 * 1.4-2.2 ms. */
static void prepare_staging(const qm_encode_job *job, const qm_amp_input *in, const qm_request *req,
                            int R, int me)
{
    uint64_t bytes[3];
    const uint64_t input = (in->batch ? in->batch : 1) * in->n * qm_dtype_size(in->dtype);
    int n = qm_pipeline_staging_bytes(req, input, R, bytes);
    if ((job->out && me == 0) || job->out_dir) /* staging_open's one block */
        bytes[n++] = QM_OUT_BUFS * QM_OUT_CHUNK_AMPS * qm_dtype_size(req->dtype);
    qm_backend_host_prepare(job->backend, bytes, n);
}

qm_code qm_encode_run(const qm_encode_job *job, qm_encode_result *r, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_input_file file = {0};
    qm_state *state = NULL;
    double *sums = NULL;
    void *buf = NULL;
    qm_npy_writer *gathered = NULL; /* --out, rank 0 */
    qm_materialize_host host = {0}; /* the per-state arrays, made while CUDA starts */
    char tmpdir[QM_TMPDIR_BYTES] = ""; /* --out-dir: the new content until the swap */
    qm_diags diags;
    qm_diags_init(&diags);
    memset(r, 0, sizeof *r);
    double t0 = qm_clock_now_s();
    qm_comm *comm = job ? job->comm : NULL;
    const int R = comm ? qm_comm_size(comm) : 1, me = comm ? qm_comm_rank(comm) : 0;
    /* --backend cuda: the CUDA start-up on a thread of its own, overlapping the input header, the
     * plan and the output checks; joined before the backend is opened, then loading the data
     * path's kernels beside the open and the staging's page-locking; ended on every path.
     * One process uses GPU 0 first; a rank of several learns its GPU later, so only the runtime. */
    qm_backend_warmup *warmup = NULL;
    if (job && job->backend == QM_BACKEND_CUDA)
        (void)qm_backend_warmup_start(QM_BACKEND_CUDA, R > 1 ? -1 : 0, &warmup, NULL);


    if (!job || !job->input)
        rc = qm_fail(st, QM_E_ARG, "encode: an input file is required (--input FILE)");
    else if (job->out && job->out_dir)
        rc = qm_fail(st, QM_E_ARG, "encode: --out and --out-dir exclude each other");
    else if (job->request.encoding != QM_ENCODING_AMPLITUDE &&
             !qm_encoding_is_product(job->request.encoding) &&
             !qm_encoding_is_iqp(job->request.encoding))
        rc = qm_fail(st, QM_E_UNSUPPORTED, "encode: the %s encoding cannot be encoded by this "
                     "version", qm_encoding_name(job->request.encoding));
    /* input: the header (npy) or the rows counted (CSV); every rank opens the file itself */
    qm_amp_input in = {0};
    qm_request req = job ? job->request : (qm_request){0};
    const double t_open = qm_clock_now_s();
    if (rc == QM_OK)
        rc = qm_encode_input_open(job, false, &file, &in, &r->input_ndim, &req, st);
    r->read_open_s = qm_clock_now_s() - t_open;
    r->batch = in.batch;
    r->features = in.n;
    r->input_dtype = in.dtype;
    /* request: ranks */
    if (rc == QM_OK) {
        if (R > 1 && req.ranks == 0)
            req.ranks = R;
        else if (R > 1 && req.ranks != R)
            rc = qm_fail(st, QM_E_RANK, "encode: --ranks %d but mpirun started %d ranks", req.ranks, R);
    }
    /* scenario, mesh, plan (with the data path: this input file, these outputs) */
    if (rc == QM_OK && (rc = qm_pipeline_load(&r->pipeline, job->scenario, &diags, st)) == QM_OK)
        rc = host_budget(job, R, &r->pipeline.host_budget, st);
    if (rc == QM_OK)
        rc = qm_encode_datapath(job, &file, &in, r->input_ndim, &req, &r->pipeline.datapath, st);
    /* the .npy reader's threads start now, while the CUDA context starts, and a file found whole
     * in the page cache is read without read-ahead advice (qm_npy_reader_prepare) */
    if (rc == QM_OK && file.npy)
        qm_npy_reader_prepare(file.npy, r->pipeline.datapath.input_resident >= 1.0);
    if (rc == QM_OK)
        rc = qm_pipeline_plan(&r->pipeline, &req, st); /* infeasible: nothing allocated */
    if (rc == QM_OK && R > 1 && r->pipeline.mesh->n_ranks != R)
        rc = qm_fail(st, QM_E_RANK, "encode: the plan uses %d ranks but mpirun started %d",
                     r->pipeline.mesh->n_ranks, R);
    /* every rank has the same plan, or every rank stops with the same message */
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    if (R > 1) {
        uint64_t h = r->pipeline.plan->hash ^ (r->batch * 0x9E3779B97F4A7C15ull) ^ (r->features << 17) ^
                     (uint64_t)in.dtype;
        if ((rc = qm_comm_agree(comm, h, "plan hash", st)) != QM_OK)
            goto done;
    }
    /* the output paths, before any work: every rank checks (they name the same paths); rank 0
     * first removes what dead runs left there */
    rc = fault_point(job, me, QM_ENC_PHASE_PLAN, QM_OK, st);
    if (rc == QM_OK && me == 0 && (job->out || job->out_dir))
        (void)qm_out_stale_sweep(job->out ? job->out : job->out_dir, &r->n_stale_removed, NULL);
    if (rc == QM_OK)
        rc = check_outputs(job, r, st);
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    r->seconds_read_plan = qm_clock_now_s() - t0;
    /* backend: this rank's devices (one process simulates every rank of the scenario) */
    int first_gpu = 0;
    if (job->backend == QM_BACKEND_CUDA && R > 1) {
        /* ranks on one host take that host's GPUs in turn: every rank learns every rank's host */
        uint64_t *hosts = calloc((size_t)R, sizeof *hosts);
        const uint64_t mine = host_id();
        rc = qm_comm_verdict(comm, hosts ? QM_OK : qm_fail(st, QM_E_NOMEM, "encode: out of "
                                                           "host memory for %d host ids", R), st);
        if (rc == QM_OK)
            rc = qm_comm_allgather(comm, &mine, sizeof mine, hosts, st);
        if (rc == QM_OK)
            first_gpu = qm_layout_host_first_device(hosts, r->pipeline.mesh->rank_first, R, me);
        free(hosts);
    }
    /* this rank's shards on this rank's devices (one process simulates every rank) */
    if (rc == QM_OK)
        rc = qm_pipeline_layout(&r->pipeline, R > 1 ? me : -1, R, st);
    if (rc == QM_OK && warmup) {
        prepare_staging(job, &in, &req, R, me);
        /* an amplitude encode's per-state arrays, first touched now rather than in local_norm
         * and norm_allreduce (not having them is no failure: the encode makes its own) */
        qm_status ignored;
        if (req.encoding == QM_ENCODING_AMPLITUDE)
            (void)qm_materialize_host_prepare(&host, in.batch ? in.batch : 1, &ignored);
    }
    qm_trace("encode: planned and laid out%s; waiting for the backend's start",
             warmup ? ", staging and host arrays prepared" : "");
    qm_backend_warmup_join(warmup, &r->seconds_backend_start, &r->seconds_backend_wait);
    qm_trace("encode: backend started (%.3f ms, %.3f ms of it waited for)",
             r->seconds_backend_start * 1e3, r->seconds_backend_wait * 1e3);
    if (rc == QM_OK) {
        const qm_backend_desc bd = {.kind = job->backend, .cuda_first_gpu = first_gpu};
        rc = qm_pipeline_open_backend(&r->pipeline, &bd, st);
    }
    qm_trace("encode: backend open");
    sums = calloc((size_t)(in.batch ? in.batch : 1), sizeof *sums);
    buf = malloc((size_t)(QM_READBACK_AMPS * qm_dtype_size(req.dtype)));
    if (rc == QM_OK && (!sums || !buf))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    const qm_layout *lay = r->pipeline.layout;
    const int n_local = lay ? lay->n_local : 0;
    const uint64_t lo = lay ? lay->start : 0, hi = lay ? lay->end : 0;
    if (rc == QM_OK && n_local == 0)
        rc = qm_fail(st, QM_E_RANK, "encode: rank %d has no shard in the plan", me);
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    double t1 = qm_clock_now_s();
    qm_materialize_opts mo = {.chunk_bytes = job->chunk_bytes, .comm = comm, .times = &r->phases,
                              .host = host.states ? &host : NULL};
    /* a progress line for work of more than a few seconds (about 1 GiB of input and state) */
    if (job->show_progress && me == 0 &&
        r->pipeline.plan->state_bytes + r->batch * r->features * qm_dtype_size(in.dtype) > ((uint64_t)1 << 30))
        mo.progress = progress_line;
    if ((rc = qm_comm_verdict(comm, fault_point(job, me, QM_ENC_PHASE_MATERIALIZE, QM_OK, st),
                              st)) != QM_OK)
        goto done;
    timed_reader tr = {.read = in.read, .ctx = in.read_ctx, .read_int = in.read_int,
                       .int_ctx = in.read_int_ctx, .submit = in.read_submit, .wait = in.read_wait};
    if (in.read) { /* the reader's seconds are the measured read (file -> host memory) */
        in.read = timed_read;
        in.read_ctx = &tr;
        if (in.read_submit) {
            in.read_submit = timed_submit;
            in.read_wait = timed_wait;
        }
    }
    if (in.read_int) { /* basis indices of an integer input, read exactly */
        in.read_int = timed_read_int;
        in.read_int_ctx = &tr;
    }
    rc = qm_pipeline_materialize(&r->pipeline, &in, &mo, &state, st);
    in.read = tr.read;
    in.read_ctx = tr.ctx;
    in.read_submit = tr.submit;
    in.read_wait = tr.wait;
    in.read_int = tr.read_int;
    in.read_int_ctx = tr.int_ctx;
    if (rc != QM_OK)
        goto done; /* the same verdict on every rank */
    r->seconds_materialize = qm_clock_now_s() - t1;
    const double read_s = timed_seconds(&tr);
    r->read_s = r->read_open_s + read_s;
    r->staging_s = r->phases.ingest > read_s ? r->phases.ingest - read_s : 0;
    /* output up to the vote: temporaries written and synced, nothing under a requested name */
    double t2 = qm_clock_now_s();
    const bool replicated = r->pipeline.plan->policy == QM_POLICY_REPLICATED;
    const uint64_t hi_read = replicated ? state->n_amps * state->batch : hi;
    rb_ctx rb = {.job = job, .cancel_ok = R == 1};
    if ((job->out && me == 0) || job->out_dir)
        rc = staging_open(&rb, state->hal, state->dtype, st);
    if (rc != QM_OK) { /* pairs with the first verdict of write_gathered / write_out_dir */
        rc = qm_comm_verdict(comm, rc, st);
    } else if (job->out) {
        rc = write_gathered(job, r, state, lo, hi_read, buf, &rb, &gathered, st);
    } else if (job->out_dir) {
        rc = write_out_dir(job, r, state, lay->local_shards, &rb, tmpdir, st);
    } else { /* nothing is read back: the phase points still fire */
        rc = fault_point(job, me, QM_ENC_PHASE_READBACK, QM_OK, st);
        rc = fault_point(job, me, QM_ENC_PHASE_WRITE, rc, st);
    }
    staging_close(&rb); /* every write has returned: the writer threads are joined */
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    /* the norm check decides before anything is committed: Σ|ψ|² on the devices where the shards
     * live, merged in index order across shards and ranks (the same sums, the same verdict on
     * every rank) */
    const double t3 = qm_clock_now_s();
    rc = fault_point(job, me, QM_ENC_PHASE_CHECK, QM_OK, st);
    if (rc == QM_OK && job->fault.rank == me && job->fault.phase == QM_ENC_PHASE_CHECK &&
        (job->fault.mode == QM_ENC_FAULT_NAN || job->fault.mode == QM_ENC_FAULT_SKEW))
        rc = qm_encode_corrupt_first(state, job->fault.mode, st);
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    rc = qm_state_norms(state, replicated ? 1 : n_local, comm, R > 1 && !replicated, sums, st);
    if (rc == QM_OK)
        rc = qm_encode_norm_check(r, sums, 0, in.batch, req.qubits, req.dtype,
                                  r->pipeline.plan->n_amps, st);
    r->seconds_check = qm_clock_now_s() - t3;
    rc = fault_point(job, me, QM_ENC_PHASE_COMMIT, rc, st);
    /* the vote: from here on the commit is rank 0's alone */
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    if (me == 0 && gathered) {
        rc = qm_npy_writer_commit(gathered, st);
        gathered = NULL;
    } else if (me == 0 && job->out_dir) {
        bool replaced = false;
        rc = qm_out_dir_swap(job->out_dir, tmpdir, &replaced, st);
        if (rc == QM_OK) {
            if (!replaced)
                tmpdir[0] = '\0'; /* it is the output directory now */
            (void)fault_point(job, me, QM_ENC_PHASE_SWAP, QM_OK, NULL);
            qm_out_dir_remove(tmpdir); /* the previous content */
            tmpdir[0] = '\0';
        }
    }
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto done;
    r->seconds_output = qm_clock_now_s() - t2;
    r->write_s = job->out || job->out_dir ? r->seconds_output - r->seconds_check : -1;
    rc = QM_OK;
done:
    qm_backend_warmup_end(warmup); /* its kernel loads, or a run that stopped before the backend */
    qm_backend_host_release(); /* prepared staging that no buffer took */
    qm_materialize_host_fini(&host);
    qm_npy_writer_abort(gathered);
    if (me == 0 && tmpdir[0])
        qm_out_dir_remove(tmpdir); /* a failed run: every rank has passed its last verdict */
    if (rc != QM_OK && diags.n > 1 && job && job->progress)
        qm_diags_print_others(&diags, job->progress); /* the caller prints the first */
    qm_diags_fini(&diags);
    qm_state_destroy(state);
    qm_pipeline_close_backend(&r->pipeline); /* the state is gone: device memory given back */
    qm_input_close(&file);
    free(sums);
    free(buf);
    return rc;
}
