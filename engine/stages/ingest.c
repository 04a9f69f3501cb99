/* ingest.c — see ingest.h. The call path: qm_ingest_run sizes and opens one pipe per device,
 * deals chunks to the shards round-robin (enqueue_chunk), then drains every pipe.
 *
 * Ordering within a pipe, for staging half h:
 *   copy stream:    wait(freed[h]) -> H2D into half h -> record(copied[h])
 *   compute stream: wait(copied[h]) -> stash or amp_batch (+ D2H of the sums) -> record(freed[h])
 * and the host, before refilling its page-locked half h, waits for copied[h]. On backends
 * without streams or events (the simulator) all of this runs synchronously, in the same order.
 * The overlap: the host reads chunk k+1 into the other half while chunk k's H2D copy and kernel run;
 * it waits only for the copy of chunk k-1 (the same half), which was enqueued a whole read earlier.
 * Reader input (.npy) fills a half with the reader's threads (io_npy.c: a 32 MiB half is 8 pieces
 * of 4 MiB read at once), so the host side runs at the page cache's parallel read rate; two halves
 * are enough as long as one H2D copy of a half (32 MiB at tens of GB/s: under 1 ms) is shorter
 * than reading one (several ms at about 10 GB/s), which holds on PCIe 4/5 and NVLink-C2C hosts,
 * so more halves would only take more page-locked memory. The chunk stays QM_STAGING_CHUNK_BYTES
 * (32 MiB, what the planner charges per device): bench/bench_read.cpp reports the reader alone in
 * such chunks next to the read ceiling of the same run.
 * Lifetime: a caller that passes kept pipes (qm_ingest_req.pipes: a context's, engine/stages/reuse.c)
 * gets them back open after the run: streams, events, the device staging and the page-locked host
 * halves are created at the first run that needs them and grown, never shrunk, when a later run
 * needs larger halves; they are closed at qm_ingest_pipes_destroy, or at once when a run fails.
 * Without kept pipes a run opens its own and closes them before it returns.
 * Known wart: pageable in-memory input is still copied into the halves by one thread (memcpy), so
 * it is bounded by one core's copy rate; page-locked input is copied by the DMA engines alone.
 */
#include "ingest.h"
#include "status_internal.h"

#include <stdlib.h>
#include <string.h>

qm_code qm_input_read(const qm_amp_input *in, uint64_t first, uint64_t count, void *dst,
                      qm_status *st)
{
    const size_t is = qm_dtype_size(in->dtype);
    if (in->read) {
        qm_code rc = in->read(in->read_ctx, first, count, dst, st);
        return rc == QM_OK ? rc : qm_status_prefix(st, "encode: reading input [%llu, %llu)",
                                                   (unsigned long long)first,
                                                   (unsigned long long)(first + count));
    }
    memcpy(dst, (const char *)in->data + first * is, (size_t)(count * is));
    return QM_OK;
}

typedef struct pipe {
    int dev;
    qm_hal_stream *copy, *comp;
    qm_hal_event *copied[2], *freed[2];
    bool copied_rec[2], freed_rec[2];
    qm_hal_buf *staging;       /* two halves of half_bytes */
    char *host;                /* two page-locked halves; NULL when the input is copied in place */
    uint64_t half_bytes;
    int half;                  /* the half the next chunk uses */
    uint64_t want;             /* this run: the half size its shards need (0: the pipe is idle) */
    bool opened;               /* streams and events created */
} pipe;

/* The pipes of one context (or of one run, when the caller keeps none): one per device, kept
 * between runs and grown when a run needs larger halves (see ingest.h). */
struct qm_ingest_pipes {
    pipe *p;
    int n, cap;
};

typedef struct ingest {
    const qm_ingest_req *r;
    size_t is;                 /* input element bytes */
    uint64_t chunk_elems;      /* values per chunk (stash) */
    uint64_t chunk_states;     /* states per chunk (fused) */
    bool in_place;             /* the input is page-locked host memory: copy from where it lies */
    pipe *pipes;
    int n_pipes;
} ingest;

/* The shard's input elements [*lo, *hi) (empty for a shard with no slots to ingest). */
static void shard_input(const qm_ingest_req *r, const qm_ingest_shard *s, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    if (s->slot_end > s->slot_start)
        qm_hal_input_range(s->slot_start, s->slot_end, r->period, r->period_valid, lo, hi);
}

static uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

/* Bytes of one staging half that a chunk of the shard needs (its input, and for a fused shard
 * the sums of its states behind it, 8-byte aligned). */
static uint64_t half_need(const ingest *g, const qm_ingest_shard *s)
{
    uint64_t lo, hi;
    shard_input(g->r, s, &lo, &hi);
    if (!s->fused) {
        const uint64_t n = hi - lo < g->chunk_elems ? hi - lo : g->chunk_elems;
        return round_up(n * g->is, 16);
    }
    const uint64_t states = (s->slot_end - s->slot_start) / g->r->period;
    const uint64_t k = states < g->chunk_states ? states : g->chunk_states;
    return round_up(round_up(k * g->r->period_valid * g->is, 8) + 8 * k, 16);
}

static pipe *pipe_of(ingest *g, int dev)
{
    for (int i = 0; i < g->n_pipes; ++i)
        if (g->pipes[i].dev == dev)
            return &g->pipes[i];
    return NULL;
}

/* Make pipe p ready for this run: streams and events once, then halves of at least p->want bytes
 * (a kept pipe whose halves are too small gives them back and takes larger ones; the page-locked
 * host halves only when the input is not copied in place). */
static qm_code pipe_open(ingest *g, pipe *p, qm_status *st)
{
    qm_hal *hal = g->r->hal;
    qm_code rc = QM_OK;
    if (!p->opened) {
        rc = qm_hal_stream_create(hal, p->dev, &p->copy, st);
        if (rc == QM_OK)
            rc = qm_hal_stream_create(hal, p->dev, &p->comp, st);
        for (int h = 0; h < 2 && rc == QM_OK; ++h)
            if ((rc = qm_hal_event_create(hal, p->dev, &p->copied[h], st)) == QM_OK)
                rc = qm_hal_event_create(hal, p->dev, &p->freed[h], st);
        p->opened = rc == QM_OK;
    }
    if (rc == QM_OK && p->want > p->half_bytes) { /* grown: nothing is in flight between runs */
        qm_hal_host_free(hal, p->host);
        qm_hal_buf_free(hal, p->staging);
        p->host = NULL;
        p->staging = NULL;
        p->half_bytes = p->want;
    }
    if (rc == QM_OK && !p->staging)
        rc = qm_hal_buf_alloc(hal, p->dev, 2 * p->half_bytes, &p->staging, st);
    if (rc == QM_OK && !g->in_place && !p->host)
        rc = qm_hal_host_alloc(hal, 2 * p->half_bytes, (void **)&p->host, st);
    return rc;
}

/* Wait for everything enqueued on the pipe; keeps the first error in st. */
static qm_code pipe_drain(qm_hal *hal, pipe *p, qm_code rc, qm_status *st)
{
    qm_status tmp;
    qm_status *s = rc == QM_OK ? st : &tmp;
    qm_code a = p->comp ? qm_hal_stream_sync(hal, p->comp, s) : QM_OK;
    if (a != QM_OK)
        s = &tmp;
    qm_code b = p->copy ? qm_hal_stream_sync(hal, p->copy, s) : QM_OK;
    return rc != QM_OK ? rc : (a != QM_OK ? a : b);
}

static void pipe_close(qm_hal *hal, pipe *p)
{
    qm_hal_host_free(hal, p->host);
    qm_hal_buf_free(hal, p->staging);
    for (int h = 0; h < 2; ++h) {
        qm_hal_event_destroy(hal, p->copied[h]);
        qm_hal_event_destroy(hal, p->freed[h]);
    }
    qm_hal_stream_destroy(hal, p->copy);
    qm_hal_stream_destroy(hal, p->comp);
}

qm_ingest_pipes *qm_ingest_pipes_create(int n_dev)
{
    qm_ingest_pipes *k = calloc(1, sizeof *k);
    if (k && !(k->p = calloc((size_t)(n_dev > 0 ? n_dev : 1), sizeof *k->p))) {
        free(k);
        return NULL;
    }
    if (k)
        k->cap = n_dev > 0 ? n_dev : 1;
    return k;
}

/* Close every pipe (each is idle: runs drain before they return) and forget them. */
static void pipes_close(qm_hal *hal, qm_ingest_pipes *k)
{
    for (int i = 0; i < k->n; ++i)
        pipe_close(hal, &k->p[i]);
    k->n = 0; /* the array stays for the next run */
}

void qm_ingest_pipes_destroy(qm_hal *hal, qm_ingest_pipes *k)
{
    if (!k)
        return;
    pipes_close(hal, k);
    free(k->p);
    free(k);
}

void qm_ingest_pipes_usage(const qm_ingest_pipes *k, int *n_pipes, uint64_t *half_bytes_max)
{
    int n = 0;
    uint64_t m = 0;
    for (int i = 0; k && i < k->n; ++i) {
        n += k->p[i].opened;
        m = k->p[i].half_bytes > m ? k->p[i].half_bytes : m;
    }
    if (n_pipes)
        *n_pipes = n;
    if (half_bytes_max)
        *half_bytes_max = m;
}

/* The kept pipe of dev, appended (idle, nothing allocated) when there is none; NULL when the set
 * is full (a set holds one pipe per device, a run's own one per shard: never). */
static pipe *pipes_get(qm_ingest_pipes *k, int dev)
{
    for (int i = 0; i < k->n; ++i)
        if (k->p[i].dev == dev)
            return &k->p[i];
    if (k->n == k->cap)
        return NULL;
    k->p[k->n] = (pipe){.dev = dev};
    return &k->p[k->n++];
}

/* Enqueue input elements [pos, pos + c) of shard s (whole states when fused). */
static qm_code enqueue_chunk(ingest *g, const qm_ingest_shard *s, uint64_t pos, uint64_t c,
                             qm_status *st)
{
    const qm_ingest_req *r = g->r;
    qm_hal *hal = r->hal;
    pipe *p = pipe_of(g, s->device);
    const int h = p->half;
    p->half ^= 1;
    const uint64_t half_off = (uint64_t)h * p->half_bytes;
    /* in_place implies r->in->data != NULL: a reader input has no data pointer to offset */
    const void *src = g->in_place ? (const char *)r->in->data + pos * g->is : NULL;
    qm_code rc = QM_OK;
    if (!g->in_place) { /* refill page-locked half h once its previous copy has finished */
        if (p->copied_rec[h] && (rc = qm_hal_event_sync(hal, p->copied[h], st)) != QM_OK)
            return rc;
        if ((rc = qm_input_read(r->in, pos, c, p->host + half_off, st)) != QM_OK)
            return rc;
        src = p->host + half_off;
    }
    if (p->freed_rec[h] && (rc = qm_hal_stream_wait(hal, p->copy, p->freed[h], st)) != QM_OK)
        return rc;
    if ((rc = qm_hal_copy_h2d(hal, p->staging, half_off, src, c * g->is, p->copy, st)) != QM_OK ||
        (rc = qm_hal_event_record(hal, p->copied[h], p->copy, st)) != QM_OK)
        return rc;
    p->copied_rec[h] = true;
    if ((rc = qm_hal_stream_wait(hal, p->comp, p->copied[h], st)) != QM_OK)
        return rc;
    if (s->fused) {
        const uint64_t first = pos / r->period_valid, k = c / r->period_valid;
        const uint64_t shard_state0 = s->slot_start / r->period;
        const uint64_t sums_at = half_off + round_up(c * g->is, 8);
        qm_hal_amp_batch_args a = {.state = s->state, .state_dtype = r->state_dtype,
                                   .off = first * r->period - s->slot_start, .period = r->period,
                                   .period_valid = r->period_valid, .n_states = k,
                                   .input = p->staging, .in_dtype = r->in->dtype,
                                   .in_off = half_off / g->is, .sums = p->staging,
                                   .sums_off = sums_at / 8};
        if ((rc = qm_hal_amp_batch(hal, &a, p->comp, st)) != QM_OK ||
            (rc = qm_hal_copy_d2h(hal, s->sums + (first - shard_state0), p->staging, sums_at, 8 * k,
                                  p->comp, st)) != QM_OK)
            return rc;
    } else {
        qm_hal_stash_args a = {.out = s->state, .out_dtype = r->state_dtype,
                               .slot_g0 = s->slot_start, .period = r->period,
                               .period_valid = r->period_valid, .in = p->staging,
                               .in_dtype = r->in->dtype, .in_off = half_off / g->is,
                               .in_first = pos, .n = c};
        if ((rc = qm_hal_stash(hal, &a, p->comp, st)) != QM_OK)
            return rc;
    }
    if ((rc = qm_hal_event_record(hal, p->freed[h], p->comp, st)) != QM_OK)
        return rc;
    p->freed_rec[h] = true;
    return QM_OK;
}

qm_code qm_ingest_run(const qm_ingest_req *r, const qm_ingest_shard *shards, int n, qm_status *st)
{
    ingest g = {.r = r, .is = qm_dtype_size(r->in->dtype)};
    const uint64_t F = r->period_valid;
    g.chunk_elems = r->chunk_bytes / g.is ? r->chunk_bytes / g.is : 1;
    g.chunk_states = r->chunk_bytes / (F * g.is + 8);
    if (g.chunk_states == 0)
        g.chunk_states = 1;
    g.in_place = r->in->data && qm_hal_host_is_pinned(r->hal, r->in->data);
    uint64_t *cursor = calloc((size_t)n, sizeof *cursor), *end = calloc((size_t)n, sizeof *end);
    /* the caller's kept pipes (a context's), else this run's own, closed at its end */
    qm_ingest_pipes own = {.p = r->pipes ? NULL : calloc((size_t)n, sizeof(pipe)), .cap = n};
    qm_ingest_pipes *keep = r->pipes ? r->pipes : &own;
    qm_code rc = QM_OK;
    if (!cursor || !end || !keep->p)
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    for (int k = 0; k < keep->n; ++k)
        keep->p[k].want = 0;
    /* one pipe per device, its halves sized for the largest chunk of its shards */
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        shard_input(r, &shards[i], &cursor[i], &end[i]);
        if (end[i] <= cursor[i])
            continue;
        pipe *p = pipes_get(keep, shards[i].device);
        if (!p) {
            rc = qm_fail(st, QM_E_ARG, "encode: shard %d is on device %d, beyond the %d pipes kept",
                         i, shards[i].device, keep->cap);
            break;
        }
        const uint64_t need = half_need(&g, &shards[i]);
        p->want = need > p->want ? need : p->want;
    }
    g.pipes = keep->p;
    g.n_pipes = keep->n;
    for (int k = 0; rc == QM_OK && k < g.n_pipes; ++k)
        if (g.pipes[k].want > 0 && (rc = pipe_open(&g, &g.pipes[k], st)) != QM_OK)
            qm_status_prefix(st, "encode: staging on device %d", g.pipes[k].dev);
    /* chunks dealt round-robin, so every device has work in flight */
    for (bool more = rc == QM_OK; more && rc == QM_OK;) {
        more = false;
        for (int i = 0; i < n && rc == QM_OK; ++i) {
            if (cursor[i] >= end[i])
                continue;
            const uint64_t max = shards[i].fused ? g.chunk_states * F : g.chunk_elems;
            const uint64_t c = end[i] - cursor[i] < max ? end[i] - cursor[i] : max;
            if ((rc = enqueue_chunk(&g, &shards[i], cursor[i], c, st)) != QM_OK &&
                strncmp(st->msg, "encode", 6) != 0)
                qm_status_prefix(st, "encode: shard %d", i);
            cursor[i] += c;
            more = true;
        }
    }
    for (int k = 0; k < g.n_pipes; ++k)
        rc = pipe_drain(r->hal, &g.pipes[k], rc, st);
    /* every pipe is idle now; kept ones stay open for the next run unless this one failed (a
     * backend error may have left a stream unusable: the next run opens new pipes) */
    if (keep == &own || rc != QM_OK)
        pipes_close(r->hal, keep);
    free(own.p);
    free(cursor);
    free(end);
    return rc;
}
