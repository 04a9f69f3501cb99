/* encode_stream.c — `qmesh encode --batch-size B`: the file-to-file job in batches (encode.h,
 * qm_encode_stream_run), for inputs larger than device or host memory.
 *
 * Steps: open the input as the one-shot run does (CSV options, HDF5 dataset, basis reshape, the
 * request's defaults), except that a CSV file is not loaded but counted and then read batch by
 * batch through its reader (qm_input_open_stream); open a qm_stream over it (stream.c: both batch shapes planned, the reader
 * thread started, `prefetch` batches read ahead); check the output path for the whole output
 * (E-OUTPUT before any work, stale temporaries removed first); then per batch k: take its state
 * from the stream, write it to the output's temporary through the one-shot run's output path
 * (encode.c qm_encode_out_*: page-locked staging, writer threads, each chunk at its offset), run
 * the one-shot run's norm check on the devices (state_norm.c: Σ|ψ|² per state where the shards
 * live; with no output nothing is read back at all; states named by their index in the whole
 * input), and destroy the state before the next batch (its buffers go back to the context's pool
 * for the next one); at the end commit the whole output at once.
 * Outputs: --out one .npy of shape (samples, 2^n) ((2^n,) for a 1-D input) written in order into
 * its temporary, byte for byte the one-shot file; --out-dir a temporary directory with one
 * batch-NNNNNN.npy (rows, 2^n) per batch and manifest.json (format "qmesh-batches/1": the batches'
 * sample ranges and files), swapped in as one step; no output: encode and check only.
 * Memory: the input buffers of the stream (prefetch + 1 batches; for CSV also the reader's
 * chunks), one batch's state, the output's staging (one read-back chunk, as the one-shot run). Faults (QM_FAULT_RANK=0:PHASE:MODE[:BATCH]):
 * materialize (before batch k is taken), readback, write (the batch is in the temporary), check
 * (nan, skew: the batch's first amplitude, on its device) at batch k; plan and commit once; the cancel flag at each of them and between read-back chunks.
 * Must not: leave anything under an output name on failure or interruption, or keep more than one
 * batch's state alive.
 * Known warts: one process only (under mpirun E-UNSUPPORTED); the first scenario diagnostic only
 * (the one-shot run prints every one); --chunk-bytes does not apply (materialize's default).
 */
#include "comm.h"
#include "api_internal.h"
#include "encode.h"
#include "stream.h"
#include "state_internal.h"
#include "status_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QM_TMPDIR_BYTES 4096

static uint64_t batch_rows(const qm_stream_info *si, uint64_t k)
{
    const uint64_t first = k * si->batch_size;
    return si->samples - first < si->batch_size ? si->samples - first : si->batch_size;
}

/* The output's bytes, for the check before any work: --out the one file; --out-dir every batch
 * file and the manifest (its largest file too). */
static qm_code check_output(const qm_encode_job *job, const qm_stream_info *si, qm_status *st)
{
    const uint64_t N = (uint64_t)1 << si->qubits;
    if (job->out) {
        const uint64_t shape[2] = {si->input_ndim == 2 ? si->samples : N, N};
        const uint64_t b = qm_npy_file_bytes(si->dtype, si->input_ndim, shape);
        return qm_out_check(job->out, false, b, b, false, st);
    }
    if (!job->out_dir)
        return QM_OK;
    const uint64_t full = si->samples / si->batch_size, tail = si->samples % si->batch_size;
    const uint64_t full_shape[2] = {si->batch_size, N}, tail_shape[2] = {tail, N};
    const uint64_t full_b = qm_npy_file_bytes(si->dtype, 2, full_shape),
                   tail_b = tail ? qm_npy_file_bytes(si->dtype, 2, tail_shape) : 0;
    const uint64_t manifest = 4096 + 256 * si->batches;
    const uint64_t total = manifest + full * full_b + tail_b;
    const uint64_t largest = full_b > manifest ? full_b : manifest;
    return qm_out_check(job->out_dir, true, total, largest, job->force, st);
}

static char *manifest_text(const qm_encode_job *job, const qm_encode_result *r,
                           const qm_stream_info *si, qm_status *st)
{
    const uint64_t N = (uint64_t)1 << si->qubits;
    json_t *man = json_object(), *arr = json_array();
    char *text = NULL;
    if (!man || !arr)
        goto done;
    for (uint64_t k = 0; k < si->batches; ++k) {
        char file[64];
        snprintf(file, sizeof file, "batch-%06llu.npy", (unsigned long long)k);
        const uint64_t a = k * si->batch_size, rows = batch_rows(si, k);
        json_array_append_new(arr, json_pack("{s:I, s:I, s:I, s:s}", "batch", (json_int_t)k,
                                             "start", (json_int_t)a, "end", (json_int_t)(a + rows),
                                             "file", file));
    }
    json_object_set_new(man, "format", json_string("qmesh-batches/1"));
    json_object_set_new(man, "qubits", json_integer(si->qubits));
    json_object_set_new(man, "dtype", json_string(qm_dtype_name(si->dtype)));
    json_object_set_new(man, "encoding", json_string(qm_encoding_name(job->request.encoding)));
    json_object_set_new(man, "samples", json_integer((json_int_t)si->samples));
    json_object_set_new(man, "features", json_integer((json_int_t)r->features));
    json_object_set_new(man, "amplitudes_per_state", json_integer((json_int_t)N));
    json_object_set_new(man, "batch_size", json_integer((json_int_t)si->batch_size));
    json_object_set_new(man, "shape", json_pack("[I, I]", (json_int_t)si->samples, (json_int_t)N));
    json_object_set_new(man, "batches", arr);
    arr = NULL;
    text = json_dumps(man, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
done:
    json_decref(arr);
    json_decref(man);
    if (!text)
        qm_fail(st, QM_E_NOMEM, "encode: out of host memory for the manifest");
    return text;
}

/* The shards whose sums make the norms: 1 when every shard holds the whole state (replicated). */
static int norm_shards(const qm_state *s)
{
    const uint64_t total = s->n_amps * s->batch;
    bool replicated = s->n_shards > 1;
    for (int i = 0; i < s->n_shards && replicated; ++i)
        replicated = s->shards[i].start == 0 && s->shards[i].end == total;
    return replicated ? 1 : s->n_shards;
}

/* One batch: take its state, write it to the output (the one-shot run's staging and writer
 * threads), check its norms on the devices, drop the state (its buffers go back to the context). */
static qm_code one_batch(const qm_encode_job *job, qm_encode_result *r, qm_stream *s,
                         const qm_stream_info *si, uint64_t k, qm_npy_writer *gathered,
                         const char *tmpdir, double *sums, qm_encode_out *out, double *t_output,
                         qm_status *st)
{
    const uint64_t N = (uint64_t)1 << si->qubits, rows = batch_rows(si, k);
    qm_state *state = NULL;
    qm_npy_writer *w = gathered;
    qm_code rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_MATERIALIZE, k, QM_OK, st);
    if (rc == QM_OK)
        rc = qm_stream_next(s, &state, st);
    if (rc == QM_OK && !state)
        rc = qm_fail(st, QM_E_INTERNAL, "encode: the stream ended at batch %llu of %llu",
                     (unsigned long long)k, (unsigned long long)si->batches);
    const double t0 = qm_clock_now_s();
    /* QM_FAULT_RANK's nan / skew at this batch's check: its first amplitude, on its device (so
     * the output, if any, carries it too, as the check must catch) */
    if (rc == QM_OK && job->fault.rank == 0 && job->fault.phase == QM_ENC_PHASE_CHECK &&
        job->fault.batch == k &&
        (job->fault.mode == QM_ENC_FAULT_NAN || job->fault.mode == QM_ENC_FAULT_SKEW))
        rc = qm_encode_corrupt_first(state, job->fault.mode, st);
    char name[QM_TMPDIR_BYTES + 64];
    if (rc == QM_OK && tmpdir) {
        snprintf(name, sizeof name, "%s/batch-%06llu.npy", tmpdir, (unsigned long long)k);
        const uint64_t shape[2] = {rows, N};
        rc = qm_npy_writer_open(name, si->dtype, 2, shape, &w, st);
        if (rc == QM_OK)
            rc = qm_npy_writer_reserve(w, st);
    }
    rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_READBACK, k, rc, st);
    if (rc == QM_OK && w) /* --out: at the batch's first sample; --out-dir: its own file */
        rc = qm_encode_out_write(out, state, rows * N, w, tmpdir ? 0 : k * si->batch_size * N, st);
    rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_WRITE, k, rc, st);
    if (rc == QM_OK && tmpdir)
        rc = qm_npy_writer_commit(w, st); /* synced, renamed inside the temporary directory */
    else if (tmpdir)
        qm_npy_writer_abort(w);
    rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_CHECK, k, rc, st);
    /* the one-shot run's check: Σ|ψ|² per state on the devices, nothing read back for it */
    if (rc == QM_OK)
        rc = qm_state_norms(state, norm_shards(state), NULL, false, sums, st);
    if (rc == QM_OK)
        rc = qm_encode_norm_check(r, sums, k * si->batch_size, rows, si->qubits, si->dtype, N, st);
    qm_state_destroy(state);
    *t_output += qm_clock_now_s() - t0;
    return rc;
}

qm_code qm_encode_stream_run(const qm_encode_job *job, qm_encode_result *r, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_input_file file = {0};
    qm_scenario *sc = NULL;
    qm_stream *s = NULL;
    qm_npy_writer *gathered = NULL;
    char tmpdir[QM_TMPDIR_BYTES] = "";
    double *sums = NULL;
    qm_encode_out *out = NULL;
    char *text = NULL;
    memset(r, 0, sizeof *r);
    const double t_start = qm_clock_now_s();
    if (!job || !job->input)
        return qm_fail(st, QM_E_ARG, "encode: an input file is required (--input FILE)");
    if (job->out && job->out_dir)
        return qm_fail(st, QM_E_ARG, "encode: --out and --out-dir exclude each other");
    if (job->comm && qm_comm_size(job->comm) > 1)
        return qm_fail(st, QM_E_UNSUPPORTED, "encode: --batch-size runs in one process (mpirun "
                       "started %d ranks); run it without mpirun", qm_comm_size(job->comm));
    if (job->batch_size == 0)
        return qm_fail(st, QM_E_ARG, "encode: --batch-size must be at least 1 (got 0)");
    /* the input and the request, as the one-shot run makes them */
    int ndim = 0;
    qm_request req = job->request;
    qm_amp_input in = {0};
    rc = qm_encode_input_open(job, true, &file, &in, &ndim, &req, st);
    file.in = in; /* the stream reads the input as encoded (basis: one index per sample) */
    r->batch = in.batch ? in.batch : 1;
    r->features = in.n;
    r->input_dtype = in.dtype;
    r->input_ndim = ndim;
    if (rc == QM_OK)
        rc = qm_scenario_open(job->scenario, &sc, st);
    qm_stream_options so;
    qm_stream_options_init(&so);
    so.batch_size = job->batch_size;
    so.prefetch = job->prefetch;
    so.backend = job->backend;
    if (rc == QM_OK)
        rc = qm_stream_open_input(sc, &req, &file, ndim, &so, &s, st); /* takes the file */
    qm_stream_info si = {0};
    if (rc == QM_OK)
        rc = qm_stream_info_query(s, &si, st);
    if (rc == QM_OK)
        rc = qm_context_plan_json(qm_stream_context_get(s), &r->batch_plan_json, st);
    r->qubits = si.qubits;
    r->dtype = si.dtype;
    r->batches = si.batches;
    r->batch_size = si.batch_size;
    r->prefetch = job->prefetch;
    /* the output, before any work */
    rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_PLAN, 0, rc, st);
    if (rc == QM_OK && (job->out || job->out_dir))
        (void)qm_out_stale_sweep(job->out ? job->out : job->out_dir, &r->n_stale_removed, NULL);
    if (rc == QM_OK)
        rc = check_output(job, &si, st);
    r->seconds_read_plan = qm_clock_now_s() - t_start;
    const uint64_t N = (uint64_t)1 << si.qubits;
    if (rc == QM_OK && job->out) {
        const uint64_t shape[2] = {ndim == 2 ? si.samples : N, N};
        rc = qm_npy_writer_open(job->out, si.dtype, ndim, shape, &gathered, st);
        if (rc == QM_OK) /* the whole file's blocks: a full device fails before any batch */
            rc = qm_npy_writer_reserve(gathered, st);
    } else if (rc == QM_OK && job->out_dir) {
        rc = qm_out_dir_stage(job->out_dir, tmpdir, sizeof tmpdir, st);
    }
    if (rc == QM_OK && (job->out || job->out_dir))
        rc = qm_encode_out_open(job, qm_context_hal(qm_stream_context_get(s)), si.dtype, &out, st);
    sums = calloc((size_t)(si.batch_size ? si.batch_size : 1), sizeof *sums);
    if (rc == QM_OK && !sums)
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
    /* the batches */
    const double t_loop = qm_clock_now_s();
    double t_output = 0;
    for (uint64_t k = 0; rc == QM_OK && k < si.batches; ++k)
        rc = one_batch(job, r, s, &si, k, gathered, tmpdir[0] ? tmpdir : NULL, sums, out,
                       &t_output, st);
    qm_encode_out_close(out); /* every write has returned: the writer threads are joined */
    out = NULL;
    const double t_batches = qm_clock_now_s() - t_loop;
    /* the commit: the whole output at once */
    if (rc == QM_OK && job->out_dir && !(text = manifest_text(job, r, &si, st)))
        rc = st ? st->code : QM_E_NOMEM;
    if (rc == QM_OK && job->out_dir) {
        char name[QM_TMPDIR_BYTES + 64];
        snprintf(name, sizeof name, "%s/manifest.json", tmpdir);
        rc = qm_atomic_write_text(name, text, st);
    }
    if (rc == QM_OK && gathered)
        rc = qm_npy_writer_sync(gathered, st);
    rc = qm_encode_fault_point(job, 0, QM_ENC_PHASE_COMMIT, 0, rc, st);
    if (rc == QM_OK && gathered) {
        rc = qm_npy_writer_commit(gathered, st);
        gathered = NULL;
    } else if (rc == QM_OK && job->out_dir) {
        bool replaced = false;
        rc = qm_out_dir_swap(job->out_dir, tmpdir, &replaced, st);
        if (rc == QM_OK) {
            if (!replaced)
                tmpdir[0] = '\0'; /* it is the output directory now */
            (void)qm_encode_fault_point(job, 0, QM_ENC_PHASE_SWAP, 0, QM_OK, NULL);
            qm_out_dir_remove(tmpdir); /* the previous content */
            tmpdir[0] = '\0';
        }
    }
    if (rc == QM_OK) {
        r->n_files = job->out ? 1 : job->out_dir ? (int)si.batches + 1 : 0;
        qm_stream_info_query(s, &si, NULL);
        const qm_materialize_times ph = qm_stream_phases_get(s);
        r->phases = ph;
        r->seconds_materialize = si.seconds_encode;
        r->seconds_output = t_output;
        r->seconds_read = si.seconds_read;
        r->seconds_wait = si.seconds_wait;
        r->seconds_total = qm_clock_now_s() - t_start;
        r->samples_per_s = t_batches > 0 ? (double)si.samples / t_batches : 0;
        r->input_buffers = si.input_buffers;
        r->batch_input_bytes = si.batch_input_bytes;
        r->input_bytes_peak = si.input_bytes_peak;
        r->device_bytes_peak = si.device_bytes_peak;
        r->read_s = si.seconds_read;      /* the reader thread: file -> host buffers */
        r->staging_s = ph.ingest;         /* host buffers -> devices */
        r->write_s = job->out || job->out_dir ? t_output : -1;
    }
    qm_npy_writer_abort(gathered);
    if (tmpdir[0])
        qm_out_dir_remove(tmpdir);
    qm_encode_out_close(out);
    free(text);
    free(sums);
    qm_stream_close(s);
    qm_input_close(&file);
    qm_scenario_destroy(sc);
    return rc;
}
