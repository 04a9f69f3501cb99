/* iqp.c — the IQP encodings (iqp-z, iqp) over a mesh: the layout rule and the distributed
 * Walsh-Hadamard stages (docs/encodings.md, "IQP: the distributed transform").
 *
 * Role: an IQP state is WHT(v), v(x) = 2^-n exp(i phi(x)). featuremap.c writes v per shard (the
 * iqp_phase op) and runs the stages of the bits below the page size in place (the wht op); this
 * file checks that the layout allows that (pages: the largest power of two dividing every shard
 * boundary, at most 2^QM_IQP_MAX_PAGE_LOG2 of them) and runs every higher stage b as an exchange
 * between pages: each page pairs with the page holding its indices ^ 2^b (in its own shard, on
 * another device or on another rank), receives that page's data into scratch on its own device (a
 * device-to-device copy in one process, host copies and the communicator between ranks), and
 * computes u + w (low end) or u - w (high end) in place: the same additions in the same order as
 * a one-device run, so the state is bit-identical to it. The scratch of a page is at most
 * QM_IQP_SCRATCH_MAX_BYTES (feasibility.h), so a stage runs in pieces of that size when a page is
 * larger.
 * In: the shards of this rank (with buffers), their streams, the communicator (NULL: one
 * process). Out: the transformed shards, or a failure with nothing left allocated here.
 * Must not: allocate device memory beyond one scratch piece per local page, or leave it behind.
 */
#include "comm.h"
#include "feasibility.h"
#include "materialize_internal.h"
#include "state_internal.h"
#include "status_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool qm_encoding_is_iqp(qm_encoding e) { return e == QM_ENCODING_IQP; }

/* One rank's part as the other ranks see it: its range and the page bits its shards allow. */
typedef struct part_rec {
    uint64_t start, end, page_bits;
} part_rec;

qm_code qm_iqp_check_layout(qm_encoding enc, unsigned qubits, uint64_t batch,
                            const qm_shard_spec *shards, int n_shards, struct qm_comm *comm,
                            unsigned *local_bits, qm_status *st)
{
    const char *name = qm_encoding_name(enc);
    const uint64_t N = (uint64_t)1 << qubits;
    bool whole = true;
    for (int i = 0; i < n_shards; ++i)
        if (shards[i].start % N || shards[i].end % N)
            whole = false;
    const int R = comm ? qm_comm_size(comm) : 1;
    /* every rank must take the same branch: whole states (batches) need no exchange */
    if (batch > 1 || (whole && R == 1)) {
        qm_code brc = QM_OK;
        for (int i = 0; !whole && brc == QM_OK && i < n_shards; ++i)
            if (shards[i].start % N || shards[i].end % N)
                brc = qm_fail(st, QM_E_SHARDS, "encode: the %s states of a batch must lie whole on "
                              "one device, but shard %d is [%llu, %llu) (states of %llu "
                              "amplitudes); plan with --policy equal or weighted", name, i,
                              (unsigned long long)shards[i].start,
                              (unsigned long long)shards[i].end, (unsigned long long)N);
        if (R > 1) /* every rank learns any rank's refusal */
            brc = qm_comm_verdict(comm, brc, st);
        *local_bits = qubits;
        return brc;
    }
    /* one state cut into parts: pages of 2^L amplitudes, the largest power of two that divides
     * every shard boundary of every rank; at most 2^QM_IQP_MAX_PAGE_LOG2 of them */
    unsigned L = qubits;
    int worst = 0;
    for (int i = 0; i < n_shards; ++i) {
        const unsigned a = qm_iqp_align_bits(shards[i].start, qubits);
        const unsigned b = qm_iqp_align_bits(shards[i].end, qubits);
        if ((a < b ? a : b) < L) {
            L = a < b ? a : b;
            worst = i;
        }
    }
    qm_code rc = QM_OK;
    if (R > 1) { /* every rank's range and page bits: the ranges must follow each other */
        part_rec mine = {shards[0].start, shards[n_shards - 1].end, L};
        part_rec *all = malloc((size_t)R * sizeof *all);
        qm_status lst;
        qm_code grc = all ? qm_comm_allgather(comm, &mine, sizeof mine, all, &lst)
                          : qm_fail(&lst, QM_E_NOMEM, "encode: out of host memory for %d ranks", R);
        if (grc != QM_OK) {
            rc = grc;
            *st = lst;
        }
        const int me = qm_comm_rank(comm);
        for (int r = 0; rc == QM_OK && r < R; ++r) {
            const uint64_t want = r ? all[r - 1].end : 0;
            if (all[r].start != want || (r == R - 1 && all[r].end != N))
                rc = qm_fail(st, QM_E_SHARDS, "encode: %s needs the ranks' ranges to cover the "
                             "state in rank order, but rank %d holds [%llu, %llu) where [%llu, "
                             "...) was due; plan with --policy equal or weighted", name, r,
                             (unsigned long long)all[r].start, (unsigned long long)all[r].end,
                             (unsigned long long)want);
            else if (all[r].page_bits < L && r != me)
                L = (unsigned)all[r].page_bits, worst = -1 - r;
        }
        free(all);
    }
    if (rc == QM_OK && qubits - L > QM_IQP_MAX_PAGE_LOG2) {
        char where[96];
        if (worst >= 0)
            snprintf(where, sizeof where, "shard %d [%llu, %llu)", worst,
                     (unsigned long long)shards[worst].start,
                     (unsigned long long)shards[worst].end);
        else
            snprintf(where, sizeof where, "a shard of rank %d", -1 - worst);
        rc = qm_fail(st, QM_E_SHARDS, "encode: %s needs shards of whole aligned power-of-two "
                     "pages, at most %u of them, but %s makes pages of %llu amplitude%s (%llu "
                     "pages); plan with --policy equal, weighted or single", name,
                     1u << QM_IQP_MAX_PAGE_LOG2, where, (unsigned long long)((uint64_t)1 << L),
                     L ? "s" : "",
                     (unsigned long long)((uint64_t)1 << (qubits - L)));
    }
    if (R > 1)
        rc = qm_comm_verdict(comm, rc, st);
    if (rc == QM_OK)
        *local_bits = L;
    return rc;
}

/* Sync every stream (the first error kept; the others are still waited for). */
static qm_code sync_all(qm_hal *hal, qm_hal_stream **streams, int n, qm_status *st)
{
    qm_code rc = QM_OK;
    for (int i = 0; i < n; ++i) {
        qm_status tmp;
        const qm_code r = qm_hal_stream_sync(hal, streams[i], rc == QM_OK ? st : &tmp);
        if (rc == QM_OK)
            rc = r;
    }
    return rc;
}

/* The local shard holding global index g, or -1. */
static int local_shard_of(const qm_state *s, uint64_t g)
{
    for (int i = 0; i < s->n_shards; ++i)
        if (g >= s->shards[i].start && g < s->shards[i].end)
            return i;
    return -1;
}

/* Bytes [off, off + len) of a shard's buffer to the partner rank and the partner's same bytes
 * into scratch from soff, in pieces of at most `chunk` bytes through host buffers a (ours) and b
 * (theirs). The low end sends first, the high end receives first, so a synchronous send cannot
 * deadlock; both ends walk the same ranges in the same order. */
static qm_code exchange_remote(qm_hal *hal, qm_comm *comm, int peer, bool high, qm_hal_buf *mine,
                               uint64_t off, uint64_t len, qm_hal_buf *scratch, uint64_t soff,
                               void *a, void *b, uint64_t chunk, int tag, qm_status *st)
{
    qm_code rc = QM_OK;
    for (uint64_t k = 0; rc == QM_OK && k < len; k += chunk) {
        const uint64_t n = len - k < chunk ? len - k : chunk;
        rc = qm_hal_copy_d2h(hal, a, mine, off + k, n, NULL, st);
        if (rc == QM_OK && !high) {
            if ((rc = qm_comm_send(comm, peer, a, n, tag, st)) == QM_OK)
                rc = qm_comm_recv(comm, peer, b, n, tag, st);
        } else if (rc == QM_OK) {
            if ((rc = qm_comm_recv(comm, peer, b, n, tag, st)) == QM_OK)
                rc = qm_comm_send(comm, peer, a, n, tag, st);
        }
        if (rc == QM_OK)
            rc = qm_hal_copy_h2d(hal, scratch, soff + k, b, n, NULL, st);
    }
    return rc;
}

/* Host pieces of a remote exchange: 64 MiB at most. */
#define QM_IQP_CHUNK_BYTES ((uint64_t)1 << 26)

/* The scratch of one page of `bytes` (es-byte slots): the planner's (qm_iqp_scratch_bytes), or
 * the environment's QM_IQP_SCRATCH_BYTES when that is smaller (a test knob: many pieces on a
 * small state), rounded down to whole slots. E-ARG when it is not a byte count of at least one
 * slot. */
static qm_code scratch_bytes_get(uint64_t bytes, uint64_t es, uint64_t *out, qm_status *st)
{
    *out = qm_iqp_scratch_bytes(bytes);
    const char *v = getenv("QM_IQP_SCRATCH_BYTES");
    if (!v || !*v)
        return QM_OK;
    char *end = NULL;
    errno = 0;
    const unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || *v == '-' || n < es)
        return qm_fail(st, QM_E_ARG, "encode: QM_IQP_SCRATCH_BYTES is '%.20s'; give a byte count "
                       "of at least one amplitude (%llu)", v, (unsigned long long)es);
    if (n < *out)
        *out = n - n % es;
    return QM_OK;
}

/* One of this rank's pages in a stage: where its partner page lies. */
typedef struct page_pair {
    uint64_t key;     /* the pair's lower page: every rank takes its pairs in this order */
    int shard;        /* the local shard holding the page */
    uint64_t page;    /* the page's index in that shard */
    int partner;      /* the local shard holding the partner page, or -1: rank `peer` has it */
    uint64_t poff;    /* the partner page's first amplitude in its shard */
    int peer;
    bool high;        /* the page holds the upper end of the pair (u - w) */
} page_pair;

static int pair_cmp(const void *a, const void *b)
{
    const uint64_t x = ((const page_pair *)a)->key, y = ((const page_pair *)b)->key;
    return x < y ? -1 : x > y;
}

/* The rank whose range [starts[r], starts[r + 1]) holds amplitude g. */
static int rank_of(const uint64_t *starts, int R, uint64_t g)
{
    int r = 0;
    while (r + 1 < R && starts[r + 1] <= g)
        ++r;
    return r;
}

/* Stage m (pages apart) of this rank's pages, in the order of their pairs' lower pages;
 * E-INTERNAL when a partner is neither here nor, with ranks, elsewhere. */
static qm_code stage_pairs(const qm_state *s, uint64_t P, uint64_t m, const uint64_t *starts, int R,
                           page_pair *pp, qm_status *st)
{
    uint64_t q = 0;
    for (int i = 0; i < s->n_shards; ++i)
        for (uint64_t g = s->shards[i].start / P; g < s->shards[i].end / P; ++g) {
            const uint64_t pa = (g ^ m) * P;
            const int j = local_shard_of(s, pa);
            if (j < 0 && R == 1)
                return qm_fail(st, QM_E_INTERNAL, "encode: iqp: no shard holds index %llu (the "
                               "partner of shard %d)", (unsigned long long)pa, i);
            pp[q++] = (page_pair){.key = g < (g ^ m) ? g : g ^ m, .shard = i,
                                  .page = g - s->shards[i].start / P, .partner = j,
                                  .poff = j >= 0 ? pa - s->shards[j].start : 0,
                                  .peer = j >= 0 ? -1 : rank_of(starts, R, pa),
                                  .high = (g & m) != 0};
        }
    qsort(pp, (size_t)q, sizeof *pp, pair_cmp);
    return QM_OK;
}

qm_code qm_iqp_exchange(qm_hal *hal, qm_state *s, unsigned local_bits, struct qm_comm *comm,
                        qm_status *st)
{
    if (local_bits >= s->qubits || s->n_shards < 1)
        return QM_OK;
    const int n = s->n_shards, R = comm ? qm_comm_size(comm) : 1;
    const uint64_t P = (uint64_t)1 << local_bits, es = qm_dtype_size(s->dtype), pb = P * es;
    uint64_t piece = 0; /* scratch per page: each stage runs in pieces of this many bytes */
    qm_code rc = scratch_bytes_get(pb, es, &piece, st);
    const uint64_t chunk = piece < QM_IQP_CHUNK_BYTES ? piece : QM_IQP_CHUNK_BYTES;
    uint64_t pages = 0; /* this rank's */
    for (int i = 0; i < n; ++i)
        pages += (s->shards[i].end - s->shards[i].start) / P;
    qm_hal_buf **scratch = calloc((size_t)n, sizeof *scratch);
    qm_hal_stream **streams = calloc((size_t)n, sizeof *streams);
    page_pair *pp = malloc((size_t)pages * sizeof *pp);
    uint64_t *starts = R > 1 ? malloc((size_t)R * sizeof *starts) : NULL;
    void *ha = NULL, *hb = NULL;
    if (rc == QM_OK && (!scratch || !streams || !pp || (R > 1 && !starts)))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    for (int i = 0; rc == QM_OK && i < n; ++i) { /* a piece of scratch per page */
        if ((rc = qm_hal_buf_alloc(hal, s->shards[i].device,
                                   (s->shards[i].end - s->shards[i].start) / P * piece,
                                   &scratch[i], st)) != QM_OK)
            qm_status_prefix(st, "encode: iqp exchange scratch of shard %d", i);
        else
            rc = qm_hal_stream_create(hal, s->shards[i].device, &streams[i], st);
    }
    if (rc == QM_OK && R > 1 && (rc = qm_hal_host_alloc(hal, chunk, &ha, st)) == QM_OK)
        rc = qm_hal_host_alloc(hal, chunk, &hb, st);
    if (R > 1) { /* every rank ready (or every rank stops here), then where each range starts */
        rc = qm_comm_verdict(comm, rc, st);
        if (rc == QM_OK)
            rc = qm_comm_allgather(comm, &s->shards[0].start, sizeof *starts, starts, st);
    }
    /* stage b pairs page g with page g ^ m: every page's scratch receives a piece [off, off +
     * len) of its partner page, then (all copies done) every page combines that piece in place.
     * A piece is read by its partner before either end writes it and the pieces further on are
     * untouched, so the additions are those of one device, in the same order: the same bits.
     * The pairs go in the order of their lower pages on every rank, so that no two ranks wait
     * for each other. */
    for (unsigned b = local_bits; rc == QM_OK && b < s->qubits; ++b) {
        rc = stage_pairs(s, P, (uint64_t)1 << (b - local_bits), starts, R, pp, st);
        for (uint64_t off = 0; rc == QM_OK && off < pb; off += piece) {
            const uint64_t len = pb - off < piece ? pb - off : piece;
            for (uint64_t q = 0; rc == QM_OK && q < pages; ++q) {
                const page_pair *x = &pp[q];
                rc = x->partner >= 0
                         ? qm_hal_copy_d2d(hal, scratch[x->shard], x->page * piece,
                                           s->shards[x->partner].buf, x->poff * es + off, len,
                                           streams[x->shard], st)
                         : exchange_remote(hal, comm, x->peer, x->high, s->shards[x->shard].buf,
                                           x->page * pb + off, len, scratch[x->shard],
                                           x->page * piece, ha, hb, chunk, (int)b, st);
            }
            if (rc == QM_OK)
                rc = sync_all(hal, streams, n, st);
            for (uint64_t q = 0; rc == QM_OK && q < pages; ++q) {
                const page_pair *x = &pp[q];
                const qm_hal_wht_args a = {.state = s->shards[x->shard].buf,
                                           .state_dtype = s->dtype,
                                           .off = (x->page * pb + off) / es, .n = len / es,
                                           .partner = scratch[x->shard],
                                           .partner_off = x->page * piece / es, .high = x->high};
                rc = qm_hal_wht(hal, &a, streams[x->shard], st);
            }
            if (rc == QM_OK)
                rc = sync_all(hal, streams, n, st);
        }
    }
    for (int i = 0; streams && i < n; ++i)
        qm_materialize_drain(hal, streams[i], &rc, st);
    for (int i = 0; scratch && i < n; ++i)
        qm_hal_buf_free(hal, scratch[i]);
    free(scratch);
    free(streams);
    free(pp);
    free(starts);
    qm_hal_host_free(hal, ha);
    qm_hal_host_free(hal, hb);
    return rc;
}
