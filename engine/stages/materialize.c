/* materialize.c — the materialize stage: a checked layout and an input source in, a state out.
 *
 * Per request: validate the input and the layout; allocate each shard's state buffer and a staging
 * buffer (at most two chunks); stream each shard's own input values through the staging buffer and
 * stash them, as float64, in their amplitude slots (the state buffer doubles as the work area, so a
 * device needs the state plus staging, never a second copy); sum squares over the canonical aligned
 * pieces of each shard (never crossing a state); merge piece sums per state, in index order, into
 * the state's pairwise tree; for a state whose fast sum overflowed, underflowed or is not finite,
 * scan its values (report the first NaN/Inf, or a zero norm) and redo its sums with a power-of-two
 * scale (qm_rescale_factor); finally turn every stashed value into its amplitude in place,
 * (x * scale) * coeff with the scale kept apart from coeff = 1 / sqrt(scaled sum) (their quotient
 * is not representable for all-subnormal input), and zero the padding.
 * Must not: allocate before validation, leave any buffer behind on failure, read input outside a
 * shard's own range.
 * Devices work at the same time: the ingest deals chunks round-robin over every device's streams,
 * the block sums of every shard are enqueued before any is waited for (sum_shards), and so are the
 * amplitudes (phase D), each shard on its own stream. The simulated kernels run synchronously and
 * use every core themselves. Shards of whole states of at most 2^14 slots take the fused pass
 * (amp_batch: sums and amplitudes in one read of each sample), through staging (ingest) or, for
 * host input read in place, straight from the input (batch_in_place).
 * With a context's encode cache (opts->reuse, reuse.h) the state buffers come from its pool (the
 * state gives them back when destroyed) and the ingest pipes and page-locked sums are the cache's,
 * kept between calls; what the cache owns stays with it on failure (freed with the context).
 * Known wart: the slow path (retry_state) sums one state at a time.
 */
#include "materialize_internal.h"
#include "comm.h"
#include "ingest.h"
#include "plan.h"
#include "reuse.h"
#include "state_internal.h"
#include "status_internal.h"
#include "tree_sum.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct enc {
    qm_hal *hal;
    unsigned qubits;
    uint64_t N, B, F;          /* slots per state, states, values per state */
    qm_dtype sdt;              /* state dtype */
    const qm_amp_input *in;
    const qm_shard_spec *shards;
    int n_shards, n_norm;      /* n_norm: shards whose pieces make the trees (1 when replicated) */
    qm_state *state;
    qm_tree_pieces pieces;     /* canonical piece sums (tree_sum.h) */
    bool combine;              /* the backend makes the pieces' roots (tree_combine) */
    double *block_sums;
    uint64_t cap_blocks;
    double *sums;              /* per state */
    double *coeffs;            /* per state: 1 / sqrt(sum of (scale * x)^2) */
    double *scales;            /* per state: 1, or the slow path's power of two */
    qm_comm *comm;             /* NULL: one process */
    bool distributed;          /* pieces and scans are exchanged between ranks */
    qm_hal_buf **mapped;       /* per shard: its input read in place (NULL: stashed) */
    uint64_t *mapped_first;    /* per shard: the input element of mapped[i]'s element 0 */
    qm_ingest_shard *ing;      /* per shard: what the ingest step needs (fused: sums land here;
                                  ing[i].block_sums: the block sums taken in the ingest, which
                                  sum_shards then only copies back, and frees) */
    double *fused_sums;        /* page-locked: the sums of every fused shard's states */
    uint64_t *roots_first;     /* per norm shard (n_norm + 1): its roots (or block sums) are
                                  roots_host[roots_first[i] .. roots_first[i + 1]) */
    double *roots_host;        /* made before the ingest (which fills the taken shards' part) */
    bool roots_plain;          /* roots_host is plain memory (qm_reuse_sums_host) */
    unsigned char *slow;       /* per state: took the rescaled slow path */
    qm_hal_stream **amp_streams; /* per shard: its amplitudes' stream */
    struct qm_reuse *reuse;    /* the context's encode cache, or NULL */
    qm_materialize_host *host; /* where sums, coeffs, scales, slow and the pieces' memory are
                                  from: the caller's prepared arrays, or &own */
    qm_materialize_host own;   /* this encode's own, when the caller prepared none or too few */
} enc;

qm_code qm_materialize_host_prepare(qm_materialize_host *h, uint64_t states, qm_status *st)
{
    *h = (qm_materialize_host){0};
    if (states == 0 || states > (uint64_t)INT_MAX)
        return qm_fail(st, QM_E_ARG, "encode: host arrays for %llu states (1 to %d)",
                       (unsigned long long)states, INT_MAX);
    const size_t n = (size_t)states;
    h->sums = malloc(n * sizeof *h->sums);
    h->coeffs = malloc(n * sizeof *h->coeffs);
    h->scales = malloc(n * sizeof *h->scales);
    h->slow = malloc(n);
    h->pieces = malloc(n * sizeof(qm_tree_piece));
    if (!h->sums || !h->coeffs || !h->scales || !h->slow || !h->pieces) {
        qm_materialize_host_fini(h);
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu states' sums",
                       (unsigned long long)states);
    }
    /* the first touch, here and not in the phases */
    memset(h->sums, 0, n * sizeof *h->sums);
    memset(h->coeffs, 0, n * sizeof *h->coeffs);
    memset(h->scales, 0, n * sizeof *h->scales);
    memset(h->slow, 0, n);
    memset(h->pieces, 0, n * sizeof(qm_tree_piece));
    h->states = states;
    h->pieces_cap = (int)states;
    return QM_OK;
}

void qm_materialize_host_fini(qm_materialize_host *h)
{
    if (!h)
        return;
    free(h->sums);
    free(h->coeffs);
    free(h->scales);
    free(h->slow);
    free(h->pieces);
    *h = (qm_materialize_host){0};
}

/* The per-state arrays of e->B states: the caller's prepared ones when they are enough, else
 * e->own, prepared here; the pieces' memory is handed to e->pieces (host_give_back returns it).
 * qm_materialize_host_prepare's errors. */
static qm_code host_take(enc *e, qm_materialize_host *h, qm_status *st)
{
    if (h && h->states >= e->B && h->sums && h->pieces) {
        memset(h->slow, 0, (size_t)e->B); /* a mark of an earlier encode */
    } else {
        qm_code rc = qm_materialize_host_prepare(&e->own, e->B, st);
        if (rc != QM_OK)
            return rc;
        h = &e->own;
    }
    e->host = h;
    e->sums = h->sums;
    e->coeffs = h->coeffs;
    e->scales = h->scales;
    e->slow = h->slow;
    e->pieces.v = h->pieces;
    e->pieces.cap = h->pieces_cap;
    h->pieces = NULL; /* e->pieces may grow it (realloc) */
    return QM_OK;
}

/* Give the arrays back to their owner (the pieces' memory as e->pieces left it) and free e->own. */
static void host_give_back(enc *e)
{
    if (e->host) {
        e->host->pieces = e->pieces.v;
        e->host->pieces_cap = e->pieces.cap;
        e->pieces.v = NULL;
        e->pieces.n = e->pieces.cap = 0;
        e->host = NULL;
    }
    qm_materialize_host_fini(&e->own);
    e->sums = e->coeffs = e->scales = NULL;
    e->slow = NULL;
}

qm_code qm_materialize_check_input(unsigned qubits, qm_dtype out_dtype, const qm_amp_input *in,
                                   qm_status *st)
{
    if (!in)
        return qm_fail(st, QM_E_ARG, "encode: input must not be NULL");
    if (in->n == 0)
        return qm_fail(st, QM_E_INPUT, "encode: input cannot be empty (0 values)");
    if (out_dtype != QM_DTYPE_COMPLEX64 && out_dtype != QM_DTYPE_COMPLEX128)
        return qm_fail(st, QM_E_DTYPE, "encode: state dtype must be complex64 or complex128 "
                       "(got %s)", qm_dtype_name(out_dtype) ? qm_dtype_name(out_dtype) : "unknown");
    const uint64_t B = in->batch ? in->batch : 1;
    const unsigned cap = qm_request_max_qubits(out_dtype, B);
    if (qubits < 1 || qubits > cap)
        return qm_fail(st, QM_E_QUBITS, "encode: qubits must be at least 1 and at most %u for %llu "
                       "state%s of %s (got %u)", cap, (unsigned long long)B, B == 1 ? "" : "s",
                       qm_dtype_name(out_dtype), qubits);
    if (in->n > ((uint64_t)1 << qubits))
        return qm_fail(st, QM_E_INPUT, "encode: input length %llu exceeds state vector size "
                       "%llu (%u qubits); use at least %u qubits", (unsigned long long)in->n,
                       (unsigned long long)((uint64_t)1 << qubits), qubits,
                       qm_qubits_for_values(in->n));
    if (!in->data && !in->read)
        return qm_fail(st, QM_E_ARG, "encode: input needs data or a reader");
    if (in->device_data && (!in->data || !in->read))
        return qm_fail(st, QM_E_ARG, "encode: device input needs its pointer and a reader");
    if (in->dtype != QM_DTYPE_FLOAT32 && in->dtype != QM_DTYPE_FLOAT64)
        return qm_fail(st, QM_E_DTYPE, "encode: input dtype must be float32 or float64 (got %s)",
                       qm_dtype_name(in->dtype) ? qm_dtype_name(in->dtype) : "unknown");
    return QM_OK;
}

qm_code qm_materialize_check_layout(uint64_t total, const qm_shard_spec *shards, int n_shards,
                                    int n_dev, bool part, bool *replicated, qm_status *st)
{
    if (n_shards < 1 || !shards)
        return qm_fail(st, QM_E_ARG, "encode: a layout needs at least 1 shard (got %d)", n_shards);
    *replicated = n_shards > 1;
    for (int i = 0; i < n_shards; ++i)
        if (shards[i].start != 0 || shards[i].end != total)
            *replicated = false;
    /* one rank of several holds a contiguous part of the index space, not all of it */
    uint64_t pos = part && !*replicated ? shards[0].start : 0;
    for (int i = 0; i < n_shards; ++i) {
        const qm_shard_spec *s = &shards[i];
        if (s->device < 0 || s->device >= n_dev)
            return qm_fail(st, QM_E_ARG, "encode: shard %d names device %d, out of range (the mesh "
                           "has %d devices)", i, s->device, n_dev);
        if (s->start >= s->end || s->end > total)
            return qm_fail(st, QM_E_SHARDS, "encode: shard %d range [%llu, %llu) is empty or "
                           "outside [0, %llu)", i, (unsigned long long)s->start,
                           (unsigned long long)s->end, (unsigned long long)total);
        if (!*replicated) {
            if (s->start != pos)
                return qm_fail(st, QM_E_SHARDS, "encode: shard %d starts at %llu but the previous "
                               "shard ends at %llu", i, (unsigned long long)s->start,
                               (unsigned long long)pos);
            pos = s->end;
        }
    }
    if (!*replicated && !part && pos != total)
        return qm_fail(st, QM_E_SHARDS, "encode: shards cover [0, %llu) of [0, %llu)",
                       (unsigned long long)pos, (unsigned long long)total);
    return QM_OK;
}

static qm_code grow_blocks(enc *e, uint64_t n, qm_status *st)
{
    if (n <= e->cap_blocks)
        return QM_OK;
    double *b = realloc(e->block_sums, (size_t)n * sizeof *b);
    if (!b)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu block sums",
                       (unsigned long long)n);
    e->block_sums = b;
    e->cap_blocks = n;
    return QM_OK;
}

/* The block sums of run r of shard i (out_sums left for the caller). */
static qm_hal_sumsq_args run_args(const enc *e, int i, const qm_tree_run *r, double scale)
{
    const qm_shard_spec *s = &e->shards[i];
    return (qm_hal_sumsq_args){.state = e->state->shards[i].buf, .state_dtype = e->sdt,
                               .off = r->pos - s->start, .g0 = r->pos, .period = e->N,
                               .period_valid = e->F, .log2_block = r->lb,
                               .n_blocks = qm_tree_run_blocks(r), .scale = scale,
                               .input = e->mapped[i], .in_dtype = e->in->dtype,
                               .in_first = e->mapped_first[i]};
}

/* Sums of the canonical pieces of global slots [lo, hi) of shard i (pieces never cross a state),
 * appended to e->pieces; one blocking call per run (the slow path). */
static qm_code sum_range(enc *e, int i, uint64_t lo, uint64_t hi, double scale, qm_status *st)
{
    for (uint64_t pos = lo; pos < hi;) {
        const qm_tree_run r = qm_tree_run_next(e->qubits, pos, hi);
        qm_code rc = grow_blocks(e, qm_tree_run_blocks(&r), st);
        if (rc != QM_OK)
            return rc;
        qm_hal_sumsq_args a = run_args(e, i, &r, scale);
        a.out_sums = e->block_sums;
        if ((rc = qm_hal_sumsq_sync(e->hal, &a, st)) != QM_OK)
            return qm_status_prefix(st, "encode: shard %d", i);
        if ((rc = qm_tree_pieces_add_run(&e->pieces, &r, e->block_sums, st)) != QM_OK)
            return rc;
        pos = qm_tree_run_end(&r);
    }
    return QM_OK;
}

/* Wait for stream s (keeping the first error in *rc and st), then destroy it. */
void qm_materialize_drain(qm_hal *hal, qm_hal_stream *s, qm_code *rc, qm_status *st)
{
    if (!s)
        return;
    qm_status tmp;
    const qm_code d = qm_hal_stream_sync(hal, s, *rc == QM_OK ? st : &tmp);
    if (*rc == QM_OK)
        *rc = d;
    qm_hal_stream_destroy(hal, s);
}

/* Shard i's stream for a phase: the encode cache's (kept, idle between phases), else a new one. */
static qm_code shard_stream(const enc *e, int i, qm_hal_stream **out, qm_status *st)
{
    return e->reuse ? qm_reuse_stream(e->reuse, i, e->shards[i].device, out, st)
                    : qm_hal_stream_create(e->hal, e->shards[i].device, out, st);
}

/* Device scratch of shard i for a phase: the encode cache's slot, else a new buffer. */
static qm_code shard_scratch(const enc *e, qm_reuse_dev_slot slot, int i, uint64_t bytes,
                             qm_hal_buf **out, qm_status *st)
{
    return e->reuse ? qm_reuse_scratch(e->reuse, slot, i, e->shards[i].device, bytes, out, st)
                    : qm_hal_buf_alloc(e->hal, e->shards[i].device, bytes, out, st);
}

/* Wait for stream s (the first error kept in *rc and st); destroy it unless the cache keeps it. */
static void drain_one(const enc *e, qm_hal_stream *s, qm_code *rc, qm_status *st)
{
    if (!e->reuse) {
        qm_materialize_drain(e->hal, s, rc, st);
        return;
    }
    qm_status tmp;
    const qm_code d = s ? qm_hal_stream_sync(e->hal, s, *rc == QM_OK ? st : &tmp) : QM_OK;
    if (*rc == QM_OK)
        *rc = d;
}

/* Per shard i < n: drain stream str[i], then free buffer bufs[i] (either array may be NULL, as may
 * any entry; with the encode cache both are its own and stay); the first error stays in *rc and
 * st. */
static void drain_all(const enc *e, qm_hal_stream **str, qm_hal_buf **bufs, int n, qm_code *rc,
                      qm_status *st)
{
    for (int i = 0; str && i < n; ++i)
        drain_one(e, str[i], rc, st);
    for (int i = 0; bufs && !e->reuse && i < n; ++i)
        qm_hal_buf_free(e->hal, bufs[i]);
}

/* A fused shard's per-state sums (each state whole on it: its one canonical piece). In one
 * process (nothing exchanged between ranks) they are the states' sums as they are, which the
 * merge would give (qm_tree_pieces_merge leaves a whole-state piece's sum unchanged): copied
 * straight into e->sums, so a batch's local_norm and merge make and read no piece record per
 * state; across ranks they are pieces, exchanged and merged with the others. */
static qm_code fused_sums_add(enc *e, uint64_t first, uint64_t n, const double *sums,
                              qm_status *st)
{
    if (e->distributed)
        return qm_tree_pieces_add_states(&e->pieces, first, n, sums, st);
    memcpy(e->sums + first, sums, (size_t)n * sizeof *sums);
    return QM_OK;
}

/* The host memory of every norm shard's piece roots (block sums without tree_combine), made
 * before the ingest: a shard whose block sums the staging gives has its roots copied there by the
 * ingest itself (qm_ingest_shard.roots), the others by sum_shards. */
static qm_code roots_prepare(enc *e, qm_status *st)
{
    const int n = e->n_norm;
    uint64_t *first = calloc((size_t)n + 1, sizeof *first);
    if (!first)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    e->roots_first = first;
    for (int i = 0; i < n; ++i) /* fused shards have their sums already */
        first[i + 1] = first[i] + (e->ing[i].fused ? 0
                                                   : qm_tree_dev_host(e->qubits, e->shards[i].start,
                                                                      e->shards[i].end,
                                                                      e->combine));
    qm_code rc =
        qm_reuse_sums_host(e->reuse, e->hal, first[n], &e->roots_host, &e->roots_plain, st);
    if (rc != QM_OK) {
        qm_status_prefix(st, "encode");
        return rc;
    }
    for (int i = 0; i < n; ++i)
        if (e->ing[i].block_sums)
            e->ing[i].roots = e->roots_host + first[i];
    return QM_OK;
}

/* The piece sums of the shards that make the trees, appended to e->pieces in shard order (a fused
 * shard brings its states' sums: fused_sums_add; a shard whose block sums the ingest took has its
 * roots in roots_host already, copied back by the ingest). Every other shard's block sums are
 * enqueued first, each shard on its own stream into its own device buffer and copied back behind
 * its kernels, so the devices sum at the same time; then every stream is drained (also after a
 * failure) and the pieces are formed on the host in index order, exactly as one blocking call per
 * run would. */
static qm_code sum_shards(enc *e, const qm_materialize_opts *opts, qm_status *st)
{
    qm_hal *hal = e->hal;
    const int n = e->n_norm;
    const uint64_t *first = e->roots_first; /* shard i's roots: host[first[i]..] */
    double *host = e->roots_host;
    qm_hal_buf **part = calloc((size_t)n, sizeof *part);
    qm_hal_stream **str = calloc((size_t)n, sizeof *str);
    qm_code rc = part && str ? QM_OK
                             : qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards",
                                       n);
    const bool combine = e->combine;
    const bool plain = e->roots_plain;
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        const qm_shard_spec *s = &e->shards[i];
        const uint64_t nb = first[i + 1] - first[i];
        if (nb == 0)
            continue;
        /* the ingest took them from the staging and copied their roots back: nothing is left
         * but adding them (their device buffer is freed below with the others) */
        if (e->ing[i].block_sums) {
            part[i] = e->ing[i].block_sums;
            e->ing[i].block_sums = NULL;
            continue;
        }
        rc = shard_scratch(e, QM_REUSE_DEV_BLOCK_SUMS, i,
                           qm_tree_dev_doubles(e->qubits, s->start, s->end, combine) *
                               sizeof(double),
                           &part[i], st);
        if (rc == QM_OK)
            rc = shard_stream(e, i, &str[i], st);
        for (uint64_t pos = s->start, at = 0; rc == QM_OK && pos < s->end;) {
            const qm_tree_run r = qm_tree_run_next(e->qubits, pos, s->end);
            const qm_hal_sumsq_args a = run_args(e, i, &r, 1.0);
            rc = qm_hal_sumsq(hal, &a, part[i], at, str[i], st);
            at += qm_tree_run_blocks(&r);
            pos = qm_tree_run_end(&r);
        }
        if (rc != QM_OK)
            qm_status_prefix(st, "encode: shard %d", i);
    }
    qm_trace("local_norm: %llu %s in %s memory, sums enqueued", (unsigned long long)first[n],
             combine ? "piece roots" : "block sums", plain ? "plain" : "page-locked");
    /* each piece's root made where its block sums are, and the roots copied back: every shard's
     * kernels are enqueued before the first copy, so the devices sum at once */
    for (int i = 0; rc == QM_OK && i < n; ++i)
        if (str[i] && first[i + 1] > first[i] &&
            (rc = qm_tree_dev_enqueue(hal, e->qubits, e->shards[i].start, e->shards[i].end, combine,
                                      part[i], host + first[i], str[i], st)) != QM_OK)
            qm_status_prefix(st, "encode: shard %d", i);
    qm_trace("local_norm: copies enqueued");
    drain_all(e, str, part, n, &rc, st);
    qm_trace("local_norm: drained");
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        const qm_shard_spec *s = &e->shards[i];
        if (e->ing[i].fused) {
            rc = fused_sums_add(e, s->start / e->N, (s->end - s->start) / e->N, e->ing[i].sums,
                                st);
        } else {
            rc = qm_tree_dev_add(&e->pieces, s->start, s->end, combine, host + first[i], st);
        }
        if (rc == QM_OK && opts && opts->progress)
            opts->progress(opts->progress_ctx, (uint64_t)i + 1, 2 * (uint64_t)e->n_shards);
    }
    qm_trace("local_norm: pieces added");
    free(part);
    free(str);
    return rc;
}

/* The fused shards whose input is host memory read in place (the simulator): amp_batch straight
 * from the input, so each sample is read once and its amplitudes written in the same pass (the
 * same sums and amplitudes, bit for bit, as sum_shards and phase D compute from the same input:
 * the same tree per state, the same coefficient). One call per shard, each on its own stream,
 * into a device buffer of sums copied back to the shard's page-locked sums; then every stream is
 * drained, also after a failure. */
static qm_code batch_in_place(enc *e, qm_status *st)
{
    qm_hal *hal = e->hal;
    const int n = e->n_shards;
    qm_hal_buf **sums = calloc((size_t)n, sizeof *sums);
    qm_hal_stream **str = calloc((size_t)n, sizeof *str);
    qm_code rc = sums && str ? QM_OK
                             : qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        if (!e->ing[i].fused || !e->mapped[i])
            continue;
        const qm_shard_spec *s = &e->shards[i];
        const uint64_t k = (s->end - s->start) / e->N, first = s->start / e->N;
        rc = shard_scratch(e, QM_REUSE_DEV_BATCH_SUMS, i, k * sizeof(double), &sums[i], st);
        if (rc == QM_OK)
            rc = shard_stream(e, i, &str[i], st);
        if (rc == QM_OK) {
            const qm_hal_amp_batch_args a = {.state = e->state->shards[i].buf, .state_dtype = e->sdt,
                                             .off = 0, .period = e->N, .period_valid = e->F,
                                             .n_states = k, .input = e->mapped[i],
                                             .in_dtype = e->in->dtype,
                                             .in_off = first * e->F - e->mapped_first[i],
                                             .sums = sums[i], .sums_off = 0};
            rc = qm_hal_amp_batch(hal, &a, str[i], st);
        }
        if (rc == QM_OK)
            rc = qm_hal_copy_d2h(hal, e->ing[i].sums, sums[i], 0, k * sizeof(double), str[i], st);
        if (rc != QM_OK)
            qm_status_prefix(st, "encode: shard %d", i);
    }
    drain_all(e, str, sums, n, &rc, st);
    free(sums);
    free(str);
    return rc;
}

/* Amplitudes of slots [off, off + n) of shard i (relative to the shard), in place. */
static qm_code write_amps(enc *e, int i, uint64_t off, uint64_t n, qm_hal_stream *stream,
                          qm_status *st)
{
    const qm_shard_spec *s = &e->shards[i];
    const uint64_t g0 = s->start + off, first = g0 / e->N;
    qm_hal_amp_scale_args a = {.state = e->state->shards[i].buf, .state_dtype = e->sdt,
                               .off = off, .n = n, .g0 = g0, .period = e->N,
                               .period_valid = e->F, .first_state = first,
                               .n_coeffs = (g0 + n - 1) / e->N - first + 1,
                               .coeffs = e->coeffs + first, .scales = e->scales + first,
                               .input = e->mapped[i],
                               .in_dtype = e->in->dtype, .in_first = e->mapped_first[i]};
    qm_code rc = qm_hal_amp_scale(e->hal, &a, stream, st);
    return rc == QM_OK ? rc : qm_status_prefix(st, "encode: shard %d", i);
}

/* Every rank's piece sums, when the ranks hold parts of the index space (collective). */
static qm_code exchange(enc *e, qm_status *st)
{
    return e->distributed ? qm_tree_pieces_exchange(&e->pieces, e->comm, st) : QM_OK;
}

/* The slow-path scan of input values in host memory: the largest magnitude and the first NaN/Inf
 * among n values at `vals` (of the input's dtype). */
static void host_scan(const enc *e, const void *vals, uint64_t n, qm_hal_scan_result *r)
{
    r->max_abs = 0.0;
    r->first_nonfinite = UINT64_MAX;
    for (uint64_t i = 0; i < n; ++i) {
        const double v = e->in->dtype == QM_DTYPE_FLOAT64 ? ((const double *)vals)[i]
                                                          : (double)((const float *)vals)[i];
        if (!isfinite(v)) {
            r->first_nonfinite = i;
            return;
        }
        if (fabs(v) > r->max_abs)
            r->max_abs = fabs(v);
    }
}

/* What one rank found in its part of a state on the slow path. */
typedef struct scan_rec {
    uint64_t first_bad; /* feature index within the state of the first NaN/Inf; UINT64_MAX: none */
    double bad_value;
    double max_abs;
} scan_rec;

/* Slow path for one state (entered by every rank alike, since every rank holds the same sums):
 * name the first bad value, or report a zero norm, or rescale and sum again. */
static qm_code retry_state(enc *e, uint64_t sidx, qm_status *st)
{
    const uint64_t lo = sidx * e->N, hi_data = lo + e->F;
    scan_rec mine = {.first_bad = UINT64_MAX, .bad_value = 0.0, .max_abs = 0.0};
    qm_code rc = QM_OK;
    for (int i = 0; i < e->n_norm && rc == QM_OK; ++i) {
        const qm_shard_spec *s = &e->shards[i];
        const uint64_t a = s->start > lo ? s->start : lo, b = s->end < hi_data ? s->end : hi_data;
        if (a >= b)
            continue;
        qm_hal_scan_result r;
        const uint64_t first = sidx * e->F + (a - lo);
        const size_t is = qm_dtype_size(e->in->dtype);
        if (e->mapped[i] && !e->in->device_data) {
            host_scan(e, (const char *)e->in->data + first * is, b - a, &r); /* host memory */
        } else if (e->mapped[i]) { /* device input read in place: its values through the reader */
            void *vals = malloc((size_t)((b - a) * is));
            if (!vals) {
                rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu values",
                             (unsigned long long)(b - a));
                break;
            }
            if ((rc = qm_input_read(e->in, first, b - a, vals, st)) == QM_OK)
                host_scan(e, vals, b - a, &r);
            free(vals);
            if (rc != QM_OK)
                break;
        } else if ((rc = qm_hal_scan_sync(e->hal, e->state->shards[i].buf, e->sdt, a - s->start, b - a,
                                        &r, st)) != QM_OK) {
            qm_status_prefix(st, "encode: shard %d", i);
            break;
        }
        if (r.first_nonfinite != UINT64_MAX && mine.first_bad == UINT64_MAX) {
            mine.first_bad = a + r.first_nonfinite - lo;
            union {
                double d;
                float f;
            } raw; /* the value itself, from the input (one element) */
            if ((rc = qm_input_read(e->in, sidx * e->F + mine.first_bad, 1, &raw, st)) == QM_OK)
                mine.bad_value = e->in->dtype == QM_DTYPE_FLOAT64 ? raw.d : (double)raw.f;
        }
        if (r.max_abs > mine.max_abs)
            mine.max_abs = r.max_abs;
    }
    if ((rc = qm_comm_verdict(e->comm, rc, st)) != QM_OK)
        return rc;
    scan_rec all = mine;
    if (e->distributed) {
        const int R = qm_comm_size(e->comm);
        scan_rec *recs = calloc((size_t)R, sizeof *recs);
        if (!recs)
            return qm_fail(st, QM_E_NOMEM, "encode: out of host memory");
        rc = qm_comm_allgather(e->comm, &mine, sizeof mine, recs, st);
        for (int r = 0; rc == QM_OK && r < R; ++r) { /* ranks own increasing ranges */
            if (recs[r].first_bad < all.first_bad) {
                all.first_bad = recs[r].first_bad;
                all.bad_value = recs[r].bad_value;
            }
            if (recs[r].max_abs > all.max_abs)
                all.max_abs = recs[r].max_abs;
        }
        free(recs);
        if (rc != QM_OK)
            return rc;
    }
    if (all.first_bad != UINT64_MAX) {
        const double v = all.bad_value;
        const char *what = isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
        if (e->B == 1 && !e->in->part_of_stream)
            return qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: input[%llu] is %s",
                           (unsigned long long)all.first_bad, what);
        return qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: sample %llu, feature "
                       "%llu is %s", (unsigned long long)(e->in->first_sample + sidx),
                       (unsigned long long)all.first_bad,
                       what);
    }
    if (all.max_abs == 0.0) {
        if (e->B == 1 && !e->in->part_of_stream)
            return qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: all %llu input values "
                           "are zero", (unsigned long long)e->F);
        return qm_fail(st, QM_E_INPUT, "encode: zero or non-finite norm: sample %llu has all %llu "
                       "values zero", (unsigned long long)(e->in->first_sample + sidx),
                       (unsigned long long)e->F);
    }
    const double scale = qm_hal_rescale_factor(all.max_abs);
    for (int i = 0; i < e->n_norm && rc == QM_OK; ++i) {
        const qm_shard_spec *s = &e->shards[i];
        const uint64_t a = s->start > lo ? s->start : lo, b = s->end < lo + e->N ? s->end : lo + e->N;
        if (a < b)
            rc = sum_range(e, i, a, b, scale, st);
    }
    if ((rc = qm_comm_verdict(e->comm, rc, st)) != QM_OK || (rc = exchange(e, st)) != QM_OK ||
        (rc = qm_tree_pieces_merge(&e->pieces, e->sums, st)) != QM_OK)
        return rc;
    const double sum = e->sums[sidx];
    if (!(isfinite(sum) && sum > 0.0))
        return qm_fail(st, QM_E_INTERNAL, "encode: rescaled sum of squares of state %llu is %g "
                       "(scale %a)", (unsigned long long)sidx, sum, scale);
    e->scales[sidx] = scale;
    e->coeffs[sidx] = 1.0 / sqrt(sum);
    return QM_OK;
}

/* Phase C: every state's coefficient from its merged sum, 1 / sqrt(sum); a state whose sum is
 * not fast (qm_hal_sum_is_fast) takes the slow path (retry_state), counted in *n_slow. */
static qm_code coefficients(enc *e, uint64_t *n_slow, qm_status *st)
{
    for (uint64_t k = 0; k < e->B; ++k) {
        const double sum = e->sums[k];
        e->scales[k] = 1.0;
        if (qm_hal_sum_is_fast(sum)) {
            e->coeffs[k] = 1.0 / sqrt(sum);
            continue;
        }
        e->slow[k] = 1;
        ++*n_slow;
        qm_code rc = retry_state(e, k, st);
        if (rc != QM_OK)
            return rc;
    }
    return QM_OK;
}

#define QM_HOST_PROBE_EVICT_BYTES (256 << 20) /* above the last-level cache of a server */

qm_code qm_materialize_host_probe(unsigned qubits, uint64_t states, double *pieces_s,
                                  double *coeffs_s, qm_status *st)
{
    double tp[3], tc[3];
    if (states == 0 || qubits < 1 || qubits > 62)
        return qm_fail(st, QM_E_ARG, "host probe: needs at least 1 state of 1 to 62 qubits (got "
                       "%llu of %u)", (unsigned long long)states, qubits);
    double *given = malloc((size_t)states * sizeof *given);
    if (!given)
        return qm_fail(st, QM_E_NOMEM, "host probe: out of host memory for %llu states",
                       (unsigned long long)states);
    /* the caches as an encode leaves them after its ingest: another QM_HOST_PROBE_EVICT_BYTES
     * written since the sums came back */
    char *evict = malloc(QM_HOST_PROBE_EVICT_BYTES);
    if (!evict) {
        free(given);
        return qm_fail(st, QM_E_NOMEM, "host probe: out of host memory for %d MiB",
                       QM_HOST_PROBE_EVICT_BYTES >> 20);
    }
    qm_code rc = QM_OK;
    for (int r = 0; r < 3 && rc == QM_OK; ++r) {
        for (uint64_t k = 0; k < states; ++k) /* the device's sums: every one fast */
            given[k] = 1.0 + (double)(k & 1023) * 0x1p-20;
        enc e = {.qubits = qubits, .N = (uint64_t)1 << qubits, .B = states};
        e.pieces.qubits = e.qubits;
        /* prepared as `qmesh encode` prepares them while the CUDA context starts */
        uint64_t n_slow = 0;
        rc = host_take(&e, NULL, st);
        if (rc == QM_OK)
            memset(evict, r + 1, QM_HOST_PROBE_EVICT_BYTES);
        const double t0 = qm_clock_now_s();
        if (rc == QM_OK) /* local_norm of a fused shard in one process (sum_shards) */
            rc = fused_sums_add(&e, 0, states, given, st);
        const double t1 = qm_clock_now_s();
        if (rc == QM_OK) /* norm_allreduce of one rank: the merge, then phase C */
            rc = qm_tree_pieces_merge(&e.pieces, e.sums, st);
        if (rc == QM_OK)
            rc = coefficients(&e, &n_slow, st);
        const double t2 = qm_clock_now_s();
        if (rc == QM_OK && n_slow)
            rc = qm_fail(st, QM_E_INTERNAL, "host probe: %llu of %llu sums not fast",
                         (unsigned long long)n_slow, (unsigned long long)states);
        tp[r] = (t1 - t0) / (double)states;
        tc[r] = (t2 - t1) / (double)states;
        host_give_back(&e);
    }
    free(given);
    free(evict);
    if (rc != QM_OK)
        return rc;
    *pieces_s = qm_median(tp, 3);
    *coeffs_s = qm_median(tc, 3);
    return QM_OK;
}

qm_code qm_materialize_roots_probe(qm_hal *hal, int dev, unsigned qubits, int reps, double *first_s,
                                   double *steady_s, uint64_t *blocks, qm_status *st)
{
    if (!hal || !first_s || dev < 0 || dev >= qm_hal_device_count(hal) || reps < 1 ||
        reps > QM_ROOTS_PROBE_REPS_MAX || qubits < QM_HAL_RED_LOG2_BLOCK || qubits > 40)
        return qm_fail(st, QM_E_ARG, "roots probe: needs a backend, one of its devices, 1 to %d "
                       "runs and a state of %d to 40 qubits (got device %d, %d runs, %u qubits)",
                       QM_ROOTS_PROBE_REPS_MAX, QM_HAL_RED_LOG2_BLOCK, dev, reps, qubits);
    if (!qm_hal_supports_op(hal, QM_HAL_OP_TREE_COMBINE))
        return qm_fail(st, QM_E_UNSUPPORTED, "roots probe: the backend does not combine block "
                       "sums on its devices (no tree_combine op)");
    const uint64_t hi = (uint64_t)1 << qubits, nb = qm_tree_range_blocks(qubits, 0, hi);
    const uint64_t nd = qm_tree_dev_doubles(qubits, 0, hi, true), np = qm_tree_dev_host(qubits, 0, hi, true);
    double *given = NULL, t[QM_ROOTS_PROBE_REPS_MAX + 1];
    /* page-locked, as the ingest's staging: the fill takes no pageable copy (the encode's first
     * pageable copy is local_norm's, which the first run below pays as it does) */
    qm_code rc = qm_hal_host_alloc(hal, nb * sizeof(double), (void **)&given, st);
    for (uint64_t k = 0; rc == QM_OK && k < nb; ++k) /* the block sums a state's ingest made */
        given[k] = 1.0;
    /* the op's kernel loaded first, without a copy back, as an encode's start-up thread loads it */
    qm_hal_buf *sums = NULL;
    qm_hal_stream *s = NULL;
    if (rc == QM_OK && (rc = qm_hal_buf_alloc(hal, dev, nd * sizeof(double), &sums, st)) == QM_OK &&
        (rc = qm_hal_copy_h2d(hal, sums, 0, given, nb * sizeof(double), NULL, st)) == QM_OK &&
        (rc = qm_hal_stream_create(hal, dev, &s, st)) == QM_OK)
        rc = qm_hal_tree_combine_dev(hal,
                                     &(qm_hal_tree_combine_args){.n_groups = 1,
                                                                 .log2_group = (unsigned)qubits -
                                                                               QM_HAL_RED_LOG2_BLOCK},
                                     sums, sums, nb, s, st);
    qm_materialize_drain(hal, s, &rc, st);
    qm_hal_buf_free(hal, sums);
    /* run 0: the first round trip of the process (a one-shot encode's); then `reps` more */
    for (int r = 0; r <= reps && rc == QM_OK; ++r) {
        qm_tree_pieces pieces = {.qubits = qubits};
        double *host = NULL;
        bool plain = true;
        sums = NULL;
        s = NULL;
        /* made before the ingest, as materialize.c makes it ("sums allocated"): not timed */
        if ((rc = qm_hal_buf_alloc(hal, dev, nd * sizeof(double), &sums, st)) == QM_OK)
            rc = qm_hal_copy_h2d(hal, sums, 0, given, nb * sizeof(double), NULL, st);
        const double t0 = qm_clock_now_s();
        /* local_norm of one shard whose block sums the ingest took (sum_shards, one process) */
        if (rc == QM_OK)
            rc = qm_reuse_sums_host(NULL, hal, np, &host, &plain, st);
        if (rc == QM_OK)
            rc = qm_hal_stream_create(hal, dev, &s, st);
        if (rc == QM_OK)
            rc = qm_tree_dev_enqueue(hal, qubits, 0, hi, true, sums, host, s, st);
        qm_materialize_drain(hal, s, &rc, st);
        qm_hal_buf_free(hal, sums);
        if (rc == QM_OK)
            rc = qm_tree_dev_add(&pieces, 0, hi, true, host, st);
        qm_reuse_sums_free(NULL, hal, host, plain);
        t[r] = qm_clock_now_s() - t0;
        if (rc == QM_OK && (pieces.n != (int)np || pieces.v[0].sum != (double)nb))
            rc = qm_fail(st, QM_E_INTERNAL, "roots probe: %d roots, the first %g (expected %llu "
                         "of %llu)", pieces.n, pieces.n ? pieces.v[0].sum : 0.0,
                         (unsigned long long)np, (unsigned long long)nb);
        qm_tree_pieces_fini(&pieces);
    }
    qm_hal_host_free(hal, given);
    if (rc != QM_OK)
        return qm_status_prefix(st, "roots probe");
    *first_s = t[0];
    if (steady_s)
        *steady_s = qm_median(t + 1, (size_t)reps);
    if (blocks)
        *blocks = nb;
    return QM_OK;
}

qm_code qm_materialize_amplitude(qm_hal *hal, unsigned qubits, qm_dtype out_dtype,
                                 const qm_shard_spec *shards, int n_shards, const qm_amp_input *in,
                                 const qm_materialize_opts *opts, qm_state **out, qm_status *ust)
{
    qm_code rc;
    enc e = {0};
    bool replicated = false;
    qm_status lst, *st = &lst; /* always a status to exchange between ranks */
    qm_status_clear(st);

    if (out)
        *out = NULL;
    if (!hal || !out) {
        rc = qm_fail(st, QM_E_ARG, "encode: hal and out must not be NULL");
        goto early;
    }
    if ((rc = qm_materialize_check_input(qubits, out_dtype, in, st)) != QM_OK)
        goto early;
    e.hal = hal;
    e.qubits = qubits;
    e.pieces.qubits = qubits;
    e.combine = qm_hal_supports_op(hal, QM_HAL_OP_TREE_COMBINE);
    e.N = (uint64_t)1 << qubits;
    e.B = in->batch ? in->batch : 1;
    e.F = in->n;
    e.sdt = out_dtype;
    e.in = in;
    e.shards = shards;
    e.n_shards = n_shards;
    e.comm = opts ? opts->comm : NULL;
    e.reuse = opts ? opts->reuse : NULL;
    const bool part = e.comm && qm_comm_size(e.comm) > 1;
    if ((rc = qm_materialize_check_layout(e.B * e.N, shards, n_shards, qm_hal_device_count(hal), part,
                              &replicated, st)) != QM_OK)
        goto early;
    e.n_norm = replicated ? 1 : n_shards;
    e.distributed = part && !replicated;

    /* host bookkeeping first: a failure here touches no device */
    const size_t is = qm_dtype_size(in->dtype);
    const uint64_t chunk_bytes = opts && opts->chunk_bytes ? opts->chunk_bytes : QM_STAGING_CHUNK_BYTES;
    rc = host_take(&e, opts ? opts->host : NULL, st);
    e.mapped = calloc((size_t)n_shards, sizeof *e.mapped);
    e.mapped_first = calloc((size_t)n_shards, sizeof *e.mapped_first);
    e.ing = calloc((size_t)n_shards, sizeof *e.ing);
    if (rc == QM_OK && (!e.mapped || !e.mapped_first || !e.ing))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu states",
                     (unsigned long long)e.B);
    if (rc == QM_OK && (rc = qm_state_create_empty(hal, qubits, out_dtype, n_shards, &e.state, st)) == QM_OK) {
        e.state->batch = e.B;
        e.state->reuse = e.reuse; /* its buffers come from the pool and go back there */
    }

    double t[5] = {qm_clock_now_s()}; /* phase boundaries */
    qm_trace("encode: ingest starts (%d shards, %llu states)", n_shards, (unsigned long long)e.B);
    /* phase A (local): allocate every shard; input already in memory the device can read is read
     * in place, the rest is ingested through staging (whole small states fused: one pass) */
    uint64_t fused_states = 0;
    for (int i = 0; rc == QM_OK && i < n_shards; ++i) {
        const qm_shard_spec *s = &shards[i];
        qm_state_shard *sh = &e.state->shards[i];
        sh->rank = s->rank;
        sh->device = s->device;
        sh->start = s->start;
        sh->end = s->end;
        if ((rc = qm_reuse_state_buf(e.reuse, hal, s->device,
                                     (s->end - s->start) * qm_dtype_size(out_dtype), &sh->buf,
                                     st)) != QM_OK) {
            qm_status_prefix(st, "encode: shard %d", i);
            break;
        }
        uint64_t e_lo, e_hi;
        qm_hal_input_range(s->start, s->end, e.N, e.F, &e_lo, &e_hi);
        if (e_hi > e_lo && in->data) {
            const void *at = (const char *)in->data + e_lo * is;
            rc = in->device_data
                     ? qm_hal_buf_wrap_device(hal, s->device, at, (e_hi - e_lo) * is, &e.mapped[i], st)
                     : qm_hal_buf_wrap_host(hal, s->device, at, (e_hi - e_lo) * is, &e.mapped[i], st);
            if (rc == QM_OK) {
                e.mapped_first[i] = e_lo;
            } else if (rc == QM_E_UNSUPPORTED) {
                rc = QM_OK;
                qm_status_clear(st);
            } else {
                qm_status_prefix(st, "encode: shard %d", i);
                break;
            }
        }
        e.ing[i] = (qm_ingest_shard){.state = sh->buf, .device = s->device, .slot_start = s->start,
                                     .slot_end = e.mapped[i] || e_hi <= e_lo ? s->start : s->end};
        /* whole small states: one fused pass (amp_batch), through staging or, for host input read
         * in place, straight from the input (batch_in_place) */
        e.ing[i].fused = e_hi > e_lo && !(e.mapped[i] && in->device_data) &&
                         qubits <= QM_HAL_RED_LOG2_BLOCK && s->start % e.N == 0 &&
                         s->end % e.N == 0 && qm_hal_supports_op(hal, QM_HAL_OP_AMP_BATCH);
        if (e.ing[i].fused)
            fused_states += (s->end - s->start) / e.N;
    }
    qm_trace("encode: shards allocated");
    if (rc == QM_OK && fused_states > 0 &&
        (rc = e.reuse ? qm_reuse_host(e.reuse, QM_REUSE_HOST_FUSED_SUMS, fused_states * sizeof(double),
                                      (void **)&e.fused_sums, st)
                      : qm_hal_host_alloc(hal, fused_states * sizeof(double), (void **)&e.fused_sums,
                                          st)) == QM_OK)
        for (int i = 0, at = 0; i < n_shards; ++i)
            if (e.ing[i].fused) {
                e.ing[i].sums = e.fused_sums + at;
                at += (int)((shards[i].end - shards[i].start) / e.N);
            }
    /* a large state's block sums from the staging, chunk by chunk as it is stashed: the norm then
     * reads no stash (the same sums: the same canonical tree over the same values) */
    for (int i = 0; rc == QM_OK && i < e.n_norm; ++i)
        if (!e.ing[i].fused && e.ing[i].slot_end > e.ing[i].slot_start &&
            qm_ingest_sums_in_staging(e.N, e.F, shards[i].start, shards[i].end, chunk_bytes, is) &&
            qm_hal_supports_op(hal, QM_HAL_OP_AMP_SUMSQ_DEV) &&
            (rc = shard_scratch(&e, QM_REUSE_DEV_BLOCK_SUMS, i,
                                qm_tree_dev_doubles(e.qubits, shards[i].start, shards[i].end,
                                                    e.combine) *
                                    sizeof(double),
                                &e.ing[i].block_sums, st)) != QM_OK)
            qm_status_prefix(st, "encode: shard %d", i);
    if (rc == QM_OK)
        rc = roots_prepare(&e, st);
    qm_trace("encode: sums allocated");
    if (rc == QM_OK) {
        /* device input that a shard could not read in place comes through the reader only */
        qm_amp_input through = *in;
        if (in->device_data)
            through.data = NULL;
        qm_ingest_req r = {.hal = hal, .period = e.N, .period_valid = e.F, .state_dtype = out_dtype,
                           .in = &through, .chunk_bytes = chunk_bytes,
                           .pipes = qm_reuse_pipes(e.reuse)};
        rc = qm_ingest_run(&r, e.ing, n_shards, st);
    }
    if (rc == QM_OK)
        rc = batch_in_place(&e, st);
    t[1] = qm_clock_now_s();
    qm_trace("encode: ingest done");
    /* the sums of the canonical pieces of each shard (fused shards: one whole state each) */
    if (rc == QM_OK)
        rc = sum_shards(&e, opts, st);
    t[2] = qm_clock_now_s();
    qm_trace("encode: local_norm done");
    /* phase B (collective): every rank's piece sums, merged per state in index order */
    if ((rc = qm_comm_verdict(e.comm, rc, st)) != QM_OK || (rc = exchange(&e, st)) != QM_OK ||
        (rc = qm_tree_pieces_merge(&e.pieces, e.sums, st)) != QM_OK)
        goto done;
    /* phase C: coefficients; the slow path is collective and every rank takes it alike */
    uint64_t n_slow = 0;
    if ((rc = coefficients(&e, &n_slow, st)) != QM_OK)
        goto done;
    t[3] = qm_clock_now_s();
    qm_trace("encode: norm_allreduce done (%llu slow states)", (unsigned long long)n_slow);
    /* phase D (local): amplitudes (fused shards already hold them, except for slow states), each
     * shard on its own stream so that the devices write at the same time; then drain them all. A
     * fused shard has nothing to do unless some state took the slow path (rare): then no stream
     * and no pass over its states, which for a batch of 65536 states was most of this phase */
    if (!(e.amp_streams = calloc((size_t)n_shards, sizeof *e.amp_streams)))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d streams", n_shards);
    for (int i = 0; i < n_shards && rc == QM_OK; ++i) {
        const qm_shard_spec *s = &shards[i];
        if (e.ing[i].fused && n_slow == 0)
            continue;
        if ((rc = shard_stream(&e, i, &e.amp_streams[i], st)) != QM_OK)
            break;
        if (e.ing[i].fused) {
            for (uint64_t k = s->start / e.N; k < s->end / e.N && rc == QM_OK; ++k)
                if (e.slow[k])
                    rc = write_amps(&e, i, k * e.N - s->start, e.N, e.amp_streams[i], st);
        } else {
            rc = write_amps(&e, i, 0, s->end - s->start, e.amp_streams[i], st);
        }
    }
    for (int i = 0; e.amp_streams && i < n_shards; ++i) {
        drain_one(&e, e.amp_streams[i], &rc, st); /* NULL (a fused shard): nothing to wait for */
        if (rc == QM_OK && opts && opts->progress) /* every shard was reached */
            opts->progress(opts->progress_ctx, (uint64_t)n_shards + i + 1, 2 * (uint64_t)n_shards);
    }
    t[4] = qm_clock_now_s();
    qm_trace("encode: amplitudes done");
    rc = qm_comm_verdict(e.comm, rc, st); /* every rank returns the same verdict */
    if (rc == QM_OK)
        e.state->norm = e.B == 1 ? sqrt(e.sums[0]) / e.scales[0] : 0.0; /* inf past DBL_MAX */
    if (rc == QM_OK && opts && opts->times)
        *opts->times = (qm_materialize_times){.ingest = t[1] - t[0], .local_norm = t[2] - t[1],
                                              .norm_allreduce = t[3] - t[2],
                                              .encode = t[4] - t[3]};

done:
    for (int i = 0; e.mapped && i < n_shards; ++i)
        qm_hal_buf_free(hal, e.mapped[i]);
    for (int i = 0; e.ing && !e.reuse && i < n_shards; ++i) /* not handed to sum_shards (a failure) */
        qm_hal_buf_free(hal, e.ing[i].block_sums);
    free(e.mapped);
    free(e.mapped_first);
    free(e.ing);
    free(e.amp_streams);
    qm_reuse_sums_free(e.reuse, hal, e.roots_host, e.roots_plain);
    free(e.roots_first);
    if (!e.reuse)
        qm_hal_host_free(hal, e.fused_sums);
    free(e.block_sums);
    host_give_back(&e);
    if (rc != QM_OK) {
        qm_state_destroy(e.state);
        e.state = NULL;
    }
    if (out)
        *out = e.state;
    if (ust)
        *ust = lst;
    return rc;
early:
    /* argument and input errors: the same on every rank (they depend on the request alone) */
    if (ust)
        *ust = lst;
    return rc;
}
