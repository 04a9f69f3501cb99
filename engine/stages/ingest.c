/* ingest.c — see ingest.h. The call path: qm_ingest_run sizes and opens one pipe per device and
 * the host ring, lists the chunks (dealt to the shards round-robin) and their ring pieces, then
 * per chunk copies its pieces into the device half, runs the chunk's kernel, and finally drains
 * every pipe.
 *
 * Device side, per pipe and staging half h (a chunk is one half: QM_STAGING_CHUNK_BYTES):
 *   copy stream:    wait(freed[h]) -> H2D of the chunk's pieces into half h -> record(copied[h])
 *   compute stream: wait(copied[h]) -> stash or amp_batch (+ D2H of the sums) -> record(freed[h])
 * Host side (input that is not page-locked already): a ring of QM_INGEST_SLOTS page-locked slots
 * of QM_INGEST_SLOT_BYTES; piece r of the chunk list goes to slot r % SLOTS, once the H2D copy of
 * the piece before it in that slot has finished (slot_done event, recorded on the copy stream
 * after the piece's copy). A reader that reads in the background (qm_amp_input.read_submit: the
 * .npy reader's thread pool) is kept SLOTS - 1 pieces ahead of the copies, so the threads read
 * without a join per piece while the DMA engines copy finished pieces: reading and copying
 * overlap, and ingest runs at the slower of the two rates. Measured on the H200 (16 cores,
 * session 8; again 62 and 51 GiB/s in bench/results/2026-12-04-session10-h200.md): 16 threads
 * read the page cache at 63 GiB/s, pinned H2D runs at 50 GiB/s; two 32 MiB halves filled by a
 * joined parallel read reached 22-37 GiB/s, a ring of 8 x 8 MiB with the threads kept ahead
 * 32-46 GiB/s. Readers without read_submit
 * (CSV, HDF5, in-memory pageable input) fill the slots synchronously, piece by piece, on the
 * calling thread as before. On backends without streams or events (the simulator) all of this
 * runs synchronously, in the same order.
 * Lifetime: a caller that passes kept pipes (qm_ingest_req.pipes: a context's, reuse.c) gets them
 * back open after the run: each device's streams, events and staging and the page-locked ring are
 * made at the first run that needs them and grown, never shrunk, when a later run needs larger
 * halves or a larger ring; they are closed at qm_ingest_pipes_destroy, or at once when a run
 * fails. Without kept pipes a run opens its own and closes them before it returns.
 * Known wart: pageable in-memory input is still copied into the slots by one thread (memcpy), so
 * it is bounded by one core's copy rate; page-locked input is copied by the DMA engines alone.
 */
#include "ingest.h"
#include "status_internal.h"
#include "tree_sum.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

qm_code qm_input_read(const qm_amp_input *in, uint64_t first, uint64_t count, void *dst,
                      qm_status *st)
{
    const size_t is = qm_dtype_size(in->dtype);
    if (in->read) {
        qm_code rc = in->read(in->read_ctx, first, count, dst, st);
        if (rc == QM_OK || in->read_placed)
            return rc;
        return qm_status_prefix(st, "encode: reading input [%llu, %llu)",
                                (unsigned long long)first, (unsigned long long)(first + count));
    }
    memcpy(dst, (const char *)in->data + first * is, (size_t)(count * is));
    return QM_OK;
}

typedef struct pipe {
    int dev;
    qm_hal_stream *copy, *comp;
    qm_hal_event *copied[2], *freed[2];
    bool copied_rec[2], freed_rec[2];
    qm_hal_event *slot_done[QM_INGEST_SLOTS]; /* the ring slot's last copy on this pipe */
    qm_hal_buf *staging;       /* two halves of half_bytes */
    uint64_t half_bytes;
    int half;                  /* the half the next chunk uses */
    uint64_t want;             /* this run: the half size its shards need (0: the pipe is idle) */
    bool opened;               /* streams and events created */
    bool slot_events;          /* slot_done created (the first run through the ring) */
} pipe;

/* The pipes of a context (or of one run, when the caller keeps none): one per device, and the
 * host ring they share, kept between runs and grown when a run needs more (see ingest.h). */
struct qm_ingest_pipes {
    pipe *p;
    int n, cap;
    char *ring;                /* page-locked, ring_bytes */
    uint64_t ring_bytes;
};

typedef struct chunk {
    int shard;
    uint64_t pos, count;       /* input elements [pos, pos + count) of the shard's range */
} chunk;

/* One piece of the host ring: input elements [pos, pos + count), at elem_off in its chunk. */
typedef struct piece {
    uint64_t pos, count, elem_off;
    void *ticket;              /* a submitted background read, until waited for */
    bool submitted;
} piece;

typedef struct ingest {
    const qm_ingest_req *r;
    size_t is;                 /* input element bytes */
    uint64_t chunk_elems;      /* values per chunk (stash) */
    uint64_t chunk_states;     /* states per chunk (fused) */
    bool in_place;             /* the input is page-locked host memory: copy from where it lies */
    bool bg;                   /* the reader reads in the background (read_submit, read_wait) */
    pipe *pipes;
    int n_pipes;
    /* the host ring (not in place) */
    char *ring;
    uint64_t slot_elems;
    int slot_pipe[QM_INGEST_SLOTS]; /* the pipe whose copy stream last copied from the slot, or -1 */
    piece *pieces;
    uint64_t n_pieces, next_submit;
    bool read_failed;          /* the input's read failed (its message needs no shard in front) */
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

/* Make pipe p ready for this run: streams and events once (the ring's slot events once the input
 * goes through the ring), then halves of at least p->want bytes (a kept pipe whose halves are too
 * small gives them back and takes larger ones: nothing is in flight between runs). */
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
    if (rc == QM_OK && !g->in_place && !p->slot_events) {
        for (int k = 0; k < QM_INGEST_SLOTS && rc == QM_OK; ++k)
            rc = qm_hal_event_create(hal, p->dev, &p->slot_done[k], st);
        p->slot_events = rc == QM_OK;
    }
    if (rc == QM_OK && p->want > p->half_bytes) {
        qm_hal_buf_free(hal, p->staging);
        p->staging = NULL;
        p->half_bytes = p->want;
    }
    if (rc == QM_OK && !p->staging)
        rc = qm_hal_buf_alloc(hal, p->dev, 2 * p->half_bytes, &p->staging, st);
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
    qm_hal_buf_free(hal, p->staging);
    for (int h = 0; h < 2; ++h) {
        qm_hal_event_destroy(hal, p->copied[h]);
        qm_hal_event_destroy(hal, p->freed[h]);
    }
    for (int k = 0; k < QM_INGEST_SLOTS; ++k)
        qm_hal_event_destroy(hal, p->slot_done[k]);
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

/* Close every pipe and free the ring (all idle: runs drain before they return); the array stays
 * for the next run. */
static void pipes_close(qm_hal *hal, qm_ingest_pipes *k)
{
    for (int i = 0; i < k->n; ++i)
        pipe_close(hal, &k->p[i]);
    k->n = 0;
    qm_trace("ingest: pipes closed");
    qm_hal_host_free(hal, k->ring);
    k->ring = NULL;
    k->ring_bytes = 0;
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

static char *slot_of(const ingest *g, uint64_t r)
{
    return g->ring + (r % QM_INGEST_SLOTS) * g->slot_elems * g->is;
}

/* Start reading ring pieces up to (not including) `upto`, each once its slot's last copy has
 * finished; a synchronous reader's pieces are only marked (read when they are waited for). */
static qm_code ring_submit(ingest *g, uint64_t upto, qm_status *st)
{
    const qm_amp_input *in = g->r->in;
    upto = upto < g->n_pieces ? upto : g->n_pieces;
    for (; g->next_submit < upto; ++g->next_submit) {
        const uint64_t r = g->next_submit;
        const int s = (int)(r % QM_INGEST_SLOTS);
        if (g->slot_pipe[s] >= 0) {
            qm_code rc = qm_hal_event_sync(g->r->hal, g->pipes[g->slot_pipe[s]].slot_done[s], st);
            if (rc != QM_OK)
                return rc;
            g->slot_pipe[s] = -1;
            const uint64_t done = r - QM_INGEST_SLOTS; /* the piece whose copy this waited for */
            if (done < 2 || done % 32 == 31 || qm_tracing_all())
                qm_trace("ingest: piece %llu copied", (unsigned long long)done);
        }
        piece *pc = &g->pieces[r];
        if (qm_tracing_all())
            qm_trace("ingest: piece %llu submitted (elements [%llu, +%llu))", (unsigned long long)r,
                     (unsigned long long)pc->pos, (unsigned long long)pc->count);
        if (g->bg) {
            qm_code rc = in->read_submit(in->read_ctx, pc->pos, pc->count, slot_of(g, r),
                                         &pc->ticket, st);
            if (rc != QM_OK)
                return qm_status_prefix(st, "encode: reading input [%llu, %llu)",
                                        (unsigned long long)pc->pos,
                                        (unsigned long long)(pc->pos + pc->count));
        }
        pc->submitted = true;
    }
    return QM_OK;
}

/* Piece r is in its slot: waits for its background read, or reads it now. */
static qm_code ring_fill(ingest *g, uint64_t r, qm_status *st)
{
    const qm_amp_input *in = g->r->in;
    piece *pc = &g->pieces[r];
    qm_code rc;
    if (g->bg) {
        void *t = pc->ticket;
        pc->ticket = NULL;
        pc->submitted = false;
        rc = in->read_wait(in->read_ctx, t, st);
        if (rc != QM_OK)
            qm_status_prefix(st, "encode: reading input [%llu, %llu)", (unsigned long long)pc->pos,
                             (unsigned long long)(pc->pos + pc->count));
        return rc;
    }
    pc->submitted = false;
    rc = qm_input_read(in, pc->pos, pc->count, slot_of(g, r), st);
    g->read_failed = rc != QM_OK;
    return rc;
}

/* Waits for every background read still in flight (after a failure: the ring is freed next). */
static void ring_abandon(ingest *g)
{
    const qm_amp_input *in = g->r->in;
    for (uint64_t r = 0; g->pieces && r < g->n_pieces; ++r)
        if (g->pieces[r].submitted && g->pieces[r].ticket) {
            qm_status tmp;
            (void)in->read_wait(in->read_ctx, g->pieces[r].ticket, &tmp);
            g->pieces[r].ticket = NULL;
            g->pieces[r].submitted = false;
        }
}

/* Enqueue chunk ck (input elements [pos, pos + c) of shard s; whole states when fused), whose
 * ring pieces (not in place) are [*next_piece, ...). */
static qm_code enqueue_chunk(ingest *g, const qm_ingest_shard *s, const chunk *ck,
                             uint64_t *next_piece, qm_status *st)
{
    const qm_ingest_req *r = g->r;
    qm_hal *hal = r->hal;
    pipe *p = pipe_of(g, s->device);
    const uint64_t pos = ck->pos, c = ck->count;
    const int h = p->half;
    p->half ^= 1;
    const uint64_t half_off = (uint64_t)h * p->half_bytes;
    qm_code rc = QM_OK;
    if (p->freed_rec[h] && (rc = qm_hal_stream_wait(hal, p->copy, p->freed[h], st)) != QM_OK)
        return rc;
    if (g->in_place) { /* in_place implies r->in->data != NULL: a reader has no data pointer */
        const void *src = (const char *)r->in->data + pos * g->is;
        if ((rc = qm_hal_copy_h2d(hal, p->staging, half_off, src, c * g->is, p->copy, st)) != QM_OK)
            return rc;
    } else {
        for (uint64_t done = 0; done < c; ++*next_piece) {
            const uint64_t k = *next_piece;
            const piece *pc = &g->pieces[k];
            if ((rc = ring_submit(g, k + 1, st)) != QM_OK || (rc = ring_fill(g, k, st)) != QM_OK)
                return rc;
            if (k == 0 || qm_tracing_all()) /* the first read's wait, apart from its copy's enqueue */
                qm_trace("ingest: piece %llu read", (unsigned long long)k);
            const int sl = (int)(k % QM_INGEST_SLOTS);
            if ((rc = qm_hal_copy_h2d(hal, p->staging, half_off + pc->elem_off * g->is,
                                      slot_of(g, k), pc->count * g->is, p->copy, st)) != QM_OK ||
                (rc = qm_hal_event_record(hal, p->slot_done[sl], p->copy, st)) != QM_OK)
                return rc;
            if (k == 0)
                qm_trace("ingest: piece 0 copy enqueued");
            g->slot_pipe[sl] = (int)(p - g->pipes);
            done += pc->count;
            /* keep the reader SLOTS - 1 pieces ahead (pieces up to k + SLOTS - 2 submitted): the
             * slot of piece k + SLOTS - 2 was last used by piece k - 2, whose copy this waits
             * for; piece k's copy is enqueued first, so the copy engine has two copies queued
             * while this thread waits, not one */
            if ((rc = ring_submit(g, k + QM_INGEST_SLOTS - 1, st)) != QM_OK)
                return rc;
        }
    }
    if (ck->pos == 0 && ck->shard == 0)
        qm_trace("ingest: chunk 0 copies enqueued");
    if ((rc = qm_hal_event_record(hal, p->copied[h], p->copy, st)) != QM_OK)
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
        if (s->block_sums) { /* element pos is global slot pos: whole blocks from the staging */
            const unsigned lb = QM_HAL_RED_LOG2_BLOCK;
            const qm_hal_sumsq_args b = {.state = s->state, .state_dtype = r->state_dtype,
                                         .off = pos - s->slot_start, .g0 = pos,
                                         .period = r->period, .period_valid = r->period_valid,
                                         .log2_block = lb, .n_blocks = c >> lb, .scale = 1.0,
                                         .input = p->staging, .in_dtype = r->in->dtype,
                                         .in_first = pos, .in_off = half_off / g->is};
            if ((rc = qm_hal_sumsq(hal, &b, s->block_sums, (pos - s->slot_start) >> lb, p->comp,
                                   st)) != QM_OK)
                return rc;
        }
    }
    if ((rc = qm_hal_event_record(hal, p->freed[h], p->comp, st)) != QM_OK)
        return rc;
    p->freed_rec[h] = true;
    return QM_OK;
}

/* The chunks of every shard, dealt round-robin so that every device has work in flight, or, for
 * an input read best in order (qm_amp_input.read_in_order: a CSV file, which has no index), shard
 * after shard in input order, so that the reads go forward through the file; and (not in place)
 * their ring pieces. */
static qm_code list_chunks(ingest *g, const qm_ingest_shard *shards, int n, chunk **out,
                           uint64_t *n_out, qm_status *st)
{
    const uint64_t F = g->r->period_valid;
    uint64_t total = 0, pieces = 0;
    for (int pass = 0; pass < 2; ++pass) {
        uint64_t k = 0, q = 0;
        uint64_t *cur = calloc((size_t)n, sizeof *cur), *end = calloc((size_t)n, sizeof *end);
        if (!cur || !end) {
            free(cur);
            free(end);
            return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
        }
        for (int i = 0; i < n; ++i)
            shard_input(g->r, &shards[i], &cur[i], &end[i]);
        const bool in_order = g->r->in->read_in_order;
        for (bool more = true; more;) {
            more = false;
            for (int j = 0; j < n; ++j) {
                int i = j;
                if (in_order) /* the unfinished shard whose input comes first */
                    for (int m = 0; m < n; ++m)
                        if (cur[m] < end[m] && (cur[i] >= end[i] || cur[m] < cur[i]))
                            i = m;
                if (cur[i] >= end[i])
                    continue;
                const uint64_t max = shards[i].fused ? g->chunk_states * F : g->chunk_elems;
                const uint64_t c = end[i] - cur[i] < max ? end[i] - cur[i] : max;
                if (pass == 1) {
                    (*out)[k] = (chunk){.shard = i, .pos = cur[i], .count = c};
                    for (uint64_t o = 0; !g->in_place && o < c; o += g->slot_elems, ++q)
                        g->pieces[q] = (piece){.pos = cur[i] + o, .elem_off = o,
                                               .count = c - o < g->slot_elems ? c - o
                                                                              : g->slot_elems};
                } else {
                    pieces += g->in_place ? 0 : (c + g->slot_elems - 1) / g->slot_elems;
                }
                ++k;
                cur[i] += c;
                more = true;
                if (in_order)
                    break;
            }
        }
        free(cur);
        free(end);
        if (pass == 0) {
            total = k;
            *out = calloc((size_t)(total ? total : 1), sizeof **out);
            g->pieces = pieces ? calloc((size_t)pieces, sizeof *g->pieces) : NULL;
            g->n_pieces = pieces;
            if (!*out || (pieces && !g->pieces))
                return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu chunks",
                               (unsigned long long)total);
        }
    }
    *n_out = total;
    return QM_OK;
}

/* The ring's slot bytes: QM_INGEST_SLOT_BYTES, or the environment's QM_INGEST_SLOT_BYTES (a
 * tuning and test knob, docs/io.md "Reading in parallel"): E-ARG outside [4096, 1 GiB]. */
static qm_code slot_bytes_get(uint64_t *out, qm_status *st)
{
    *out = QM_INGEST_SLOT_BYTES;
    const char *v = getenv("QM_INGEST_SLOT_BYTES");
    if (!v || !*v)
        return QM_OK;
    char *end = NULL;
    errno = 0;
    const unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || *v == '-' || n < 4096 || n > ((uint64_t)1 << 30))
        return qm_fail(st, QM_E_ARG, "encode: QM_INGEST_SLOT_BYTES is '%.20s'; give a byte count "
                       "in [4096, 1073741824]", v);
    *out = n;
    return QM_OK;
}

bool qm_ingest_sums_in_staging(uint64_t period, uint64_t period_valid, uint64_t start,
                               uint64_t end, uint64_t chunk_bytes, size_t elem_bytes)
{
    const uint64_t bs = (uint64_t)1 << QM_HAL_RED_LOG2_BLOCK;
    const uint64_t chunk_elems = elem_bytes ? chunk_bytes / elem_bytes : 0;
    return period == period_valid && period % bs == 0 && start % bs == 0 && end % bs == 0 &&
           end > start && chunk_elems > 0 && chunk_elems % bs == 0;
}

uint64_t qm_ingest_ring_bytes_max(void)
{
    uint64_t slot;
    qm_status ignored;
    return QM_INGEST_SLOTS * (slot_bytes_get(&slot, &ignored) == QM_OK ? slot : QM_INGEST_SLOT_BYTES);
}

qm_code qm_ingest_run(const qm_ingest_req *r, const qm_ingest_shard *shards, int n, qm_status *st)
{
    ingest g = {.r = r, .is = qm_dtype_size(r->in->dtype)};
    uint64_t slot_bytes;
    qm_code rc = slot_bytes_get(&slot_bytes, st);
    if (rc != QM_OK)
        return rc;
    const uint64_t F = r->period_valid;
    g.chunk_elems = r->chunk_bytes / g.is ? r->chunk_bytes / g.is : 1;
    g.chunk_states = r->chunk_bytes / (F * g.is + 8);
    if (g.chunk_states == 0)
        g.chunk_states = 1;
    g.in_place = r->in->data && qm_hal_host_is_pinned(r->hal, r->in->data);
    g.bg = r->in->read && r->in->read_submit && r->in->read_wait;
    /* ring slots: QM_INGEST_SLOT_BYTES, but no more than a chunk's input */
    g.slot_elems = slot_bytes / g.is;
    const uint64_t chunk_in = g.chunk_elems > g.chunk_states * F ? g.chunk_elems : g.chunk_states * F;
    g.slot_elems = g.slot_elems < chunk_in ? g.slot_elems : chunk_in;
    g.slot_elems = g.slot_elems ? g.slot_elems : 1;
    for (int k = 0; k < QM_INGEST_SLOTS; ++k)
        g.slot_pipe[k] = -1;
    chunk *chunks = NULL;
    uint64_t n_chunks = 0, next_piece = 0;
    /* the caller's kept pipes and ring (a context's), else this run's own, closed at its end */
    qm_ingest_pipes own = {.p = r->pipes ? NULL : calloc((size_t)n, sizeof(pipe)), .cap = n};
    qm_ingest_pipes *keep = r->pipes ? r->pipes : &own;
    if (!keep->p)
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    for (int k = 0; k < keep->n; ++k)
        keep->p[k].want = 0;
    /* one pipe per device, its halves sized for the largest chunk of its shards */
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        uint64_t lo, hi;
        shard_input(r, &shards[i], &lo, &hi);
        if (hi <= lo)
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
    if (rc == QM_OK)
        rc = list_chunks(&g, shards, n, &chunks, &n_chunks, st);
    if (rc == QM_OK && !g.in_place && g.n_pieces) { /* the ring, kept and grown like the halves */
        const uint64_t slots = g.n_pieces < QM_INGEST_SLOTS ? g.n_pieces : QM_INGEST_SLOTS;
        const uint64_t bytes = slots * g.slot_elems * g.is;
        if (bytes > keep->ring_bytes) {
            qm_hal_host_free(r->hal, keep->ring);
            keep->ring = NULL;
            keep->ring_bytes = 0;
            rc = qm_hal_host_alloc(r->hal, bytes, (void **)&keep->ring, st);
            if (rc != QM_OK)
                qm_status_prefix(st, "encode: page-locked staging ring");
            else
                keep->ring_bytes = bytes;
        }
        g.ring = keep->ring;
    }
    qm_trace("ingest: ring of %llu bytes ready (%llu chunks, %llu ring pieces)",
             (unsigned long long)keep->ring_bytes, (unsigned long long)n_chunks,
             (unsigned long long)g.n_pieces);
    /* the first pieces' reads start before the pipes are opened: opening them (streams, events,
     * device memory) is CUDA calls that the driver serializes with the start-up thread's kernel
     * loads, 0.2-1.2 ms on an H100 that the reads now fill */
    if (rc == QM_OK && g.bg && g.ring)
        rc = ring_submit(&g, QM_INGEST_SLOTS - 1, st);
    for (int k = 0; rc == QM_OK && k < g.n_pipes; ++k)
        if (g.pipes[k].want > 0 && (rc = pipe_open(&g, &g.pipes[k], st)) != QM_OK)
            qm_status_prefix(st, "encode: staging on device %d", g.pipes[k].dev);
    qm_trace("ingest: %d pipes open", g.n_pipes);
    for (uint64_t k = 0; rc == QM_OK && k < n_chunks; ++k) {
        const int i = chunks[k].shard;
        if ((rc = enqueue_chunk(&g, &shards[i], &chunks[k], &next_piece, st)) != QM_OK &&
            !g.read_failed && strncmp(st->msg, "encode", 6) != 0)
            qm_status_prefix(st, "encode: shard %d", i);
        if (k < 2 || k % 8 == 7 || k + 1 == n_chunks || qm_tracing_all())
            qm_trace("ingest: chunk %llu enqueued", (unsigned long long)k);
    }
    ring_abandon(&g); /* reads still in flight after a failure write into the ring: wait first */
    /* traced: when each of the last ring pieces' copies finished (the drain waits for them) */
    for (uint64_t q = g.n_pieces > QM_INGEST_SLOTS ? g.n_pieces - QM_INGEST_SLOTS : 0;
         rc == QM_OK && qm_tracing() && q < g.n_pieces; ++q) {
        const int sl = (int)(q % QM_INGEST_SLOTS);
        if (g.slot_pipe[sl] >= 0 && (rc = qm_hal_event_sync(r->hal, g.pipes[g.slot_pipe[sl]].slot_done[sl], st)) == QM_OK)
            qm_trace("ingest: piece %llu copied", (unsigned long long)q);
    }
    /* each shard's piece roots made behind its last chunk and copied back on the same stream, so
     * that local_norm, after the drain, has no launch, stream or round trip of its own: the
     * combine's launch and the copy's enqueue fall in the devices' last copies and kernels, and
     * only the copy itself (its synchronization, a few microseconds) follows them */
    const bool combine = qm_hal_supports_op(r->hal, QM_HAL_OP_TREE_COMBINE);
    const unsigned qubits = (unsigned)__builtin_ctzll(r->period); /* roots: period = 2^qubits */
    for (int i = 0; rc == QM_OK && i < n; ++i) {
        const qm_ingest_shard *s = &shards[i];
        if (!s->block_sums || !s->roots || s->slot_end <= s->slot_start)
            continue;
        const pipe *p = pipe_of(&g, s->device); /* opened: the shard had chunks */
        rc = p ? qm_tree_dev_enqueue(r->hal, qubits, s->slot_start, s->slot_end, combine,
                                     s->block_sums, s->roots, p->comp, st)
               : qm_fail(st, QM_E_INTERNAL, "internal: shard %d on device %d has no pipe", i,
                         s->device);
        if (rc != QM_OK)
            qm_status_prefix(st, "encode: shard %d", i);
    }
    for (int k = 0; k < g.n_pipes; ++k) {
        rc = pipe_drain(r->hal, &g.pipes[k], rc, st);
        qm_trace("ingest: pipe %d drained", k);
    }
    qm_trace("ingest: drained");
    /* every pipe is idle now; kept ones stay open for the next run unless this one failed (a
     * backend error may have left a stream unusable: the next run opens new pipes) */
    if (keep == &own || rc != QM_OK)
        pipes_close(r->hal, keep);
    qm_trace("ingest: closed");
    free(own.p);
    free(g.pieces);
    free(chunks);
    return rc;
}
