/* iqp.c — the IQP encodings (iqp-z, iqp) over a mesh: the layout rule and the distributed
 * Walsh-Hadamard stages (docs/encodings.md, "IQP: the distributed transform").
 *
 * Role: an IQP state is WHT(v), v(x) = 2^-n exp(i phi(x)). featuremap.c writes v per shard (the
 * iqp_phase op) and runs the stages of the bits below the shard size in place (the wht op); this
 * file checks that the layout allows that and runs every higher stage b as an exchange: each shard
 * pairs with the shard holding its indices ^ 2^b, receives that shard's data into a scratch
 * buffer on its own device (a device-to-device copy in one process, host copies and the
 * communicator between ranks), and computes u + w (low end) or u - w (high end) in place: the
 * same additions in the same order as a one-device run, so the state is bit-identical to it. The
 * scratch is at most QM_IQP_SCRATCH_MAX_BYTES (feasibility.h), so a stage runs in pieces of that
 * size when a shard is larger.
 * In: the shards of this rank (with buffers), their streams, the communicator (NULL: one
 * process). Out: the transformed shards, or a failure with nothing left allocated here.
 * Must not: allocate device memory beyond one scratch piece per local shard, or leave it behind.
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

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static unsigned log2u(uint64_t x)
{
    unsigned b = 0;
    while (x >>= 1)
        ++b;
    return b;
}

/* One rank's part as the other ranks see it. */
typedef struct part_rec {
    uint64_t start, end, shard_amps;
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
    /* one state cut into parts: equal power-of-two shards, aligned */
    const uint64_t S = shards[0].end - shards[0].start;
    qm_code rc = QM_OK;
    for (int i = 0; i < n_shards && rc == QM_OK; ++i) {
        const uint64_t len = shards[i].end - shards[i].start;
        if (len != S || !is_pow2(len) || shards[i].start % len)
            rc = qm_fail(st, QM_E_SHARDS, "encode: %s needs equal power-of-two shards of the "
                         "state, but shard %d is [%llu, %llu) (%llu amplitudes, shard 0 has %llu); "
                         "plan with --policy equal or single", name, i,
                         (unsigned long long)shards[i].start, (unsigned long long)shards[i].end,
                         (unsigned long long)len, (unsigned long long)S);
    }
    if (R > 1) { /* every rank's part: the same shard size, equal aligned power-of-two ranges */
        part_rec mine = {shards[0].start, shards[n_shards - 1].end, rc == QM_OK ? S : 0};
        part_rec *all = malloc((size_t)R * sizeof *all);
        qm_status lst;
        qm_code grc = all ? qm_comm_allgather(comm, &mine, sizeof mine, all, &lst)
                          : qm_fail(&lst, QM_E_NOMEM, "encode: out of host memory for %d ranks", R);
        if (rc == QM_OK && grc != QM_OK) {
            rc = grc;
            *st = lst;
        }
        const uint64_t span = mine.end - mine.start;
        for (int r = 0; rc == QM_OK && r < R; ++r)
            if (all[r].shard_amps != S || all[r].end - all[r].start != span || !is_pow2(span) ||
                all[r].start != (uint64_t)r * span)
                rc = qm_fail(st, QM_E_SHARDS, "encode: %s needs every rank to hold an equal "
                             "power-of-two range of equal shards, but rank %d holds [%llu, %llu) "
                             "in shards of %llu amplitudes and rank %d [%llu, %llu) in shards of "
                             "%llu; plan with --policy equal", name, qm_comm_rank(comm),
                             (unsigned long long)mine.start, (unsigned long long)mine.end,
                             (unsigned long long)S, r, (unsigned long long)all[r].start,
                             (unsigned long long)all[r].end, (unsigned long long)all[r].shard_amps);
        free(all);
        rc = qm_comm_verdict(comm, rc, st);
    }
    if (rc == QM_OK)
        *local_bits = log2u(S);
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

/* Bytes [off, off + len) of shard i to the partner rank and the partner's same bytes into
 * scratch (from 0), in pieces of at most `chunk` bytes through host buffers a (ours) and b
 * (theirs). The low end sends first, the high end receives first, so a synchronous send cannot
 * deadlock; both ends walk the same ranges in the same order. */
static qm_code exchange_remote(qm_hal *hal, qm_comm *comm, int peer, bool high, qm_hal_buf *mine,
                               uint64_t off, uint64_t len, qm_hal_buf *scratch, void *a, void *b,
                               uint64_t chunk, int tag, qm_status *st)
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
            rc = qm_hal_copy_h2d(hal, scratch, k, b, n, NULL, st);
    }
    return rc;
}

/* Host pieces of a remote exchange: 64 MiB at most. */
#define QM_IQP_CHUNK_BYTES ((uint64_t)1 << 26)

/* The scratch of one shard of `bytes` (es-byte slots): the planner's (qm_iqp_scratch_bytes), or
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

qm_code qm_iqp_exchange(qm_hal *hal, qm_state *s, unsigned local_bits, struct qm_comm *comm,
                        qm_status *st)
{
    if (local_bits >= s->qubits || s->n_shards < 1)
        return QM_OK;
    const int n = s->n_shards, R = comm ? qm_comm_size(comm) : 1;
    const uint64_t S = (uint64_t)1 << local_bits, es = qm_dtype_size(s->dtype), bytes = S * es;
    const uint64_t span = (s->shards[n - 1].end - s->shards[0].start); /* this rank's range */
    uint64_t piece = 0; /* the scratch: each stage runs in pieces of this many bytes */
    qm_code rc = scratch_bytes_get(bytes, es, &piece, st);
    const uint64_t chunk = piece < QM_IQP_CHUNK_BYTES ? piece : QM_IQP_CHUNK_BYTES;
    qm_hal_buf **scratch = calloc((size_t)n, sizeof *scratch);
    qm_hal_stream **streams = calloc((size_t)n, sizeof *streams);
    void *ha = NULL, *hb = NULL;
    if (rc == QM_OK && (!scratch || !streams))
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d shards", n);
    for (int i = 0; rc == QM_OK && i < n; ++i)
        if ((rc = qm_hal_buf_alloc(hal, s->shards[i].device, piece, &scratch[i], st)) == QM_OK)
            rc = qm_hal_stream_create(hal, s->shards[i].device, &streams[i], st);
    if (rc == QM_OK && R > 1 && (rc = qm_hal_host_alloc(hal, chunk, &ha, st)) == QM_OK)
        rc = qm_hal_host_alloc(hal, chunk, &hb, st);
    /* stage b over pieces [off, off + len) of every shard: (1) every shard's scratch receives
     * its partner's piece, (2) once all have, each piece is combined in place. A piece is read by
     * its partner before either end writes it, and pieces further on are untouched, so the
     * additions are those of a whole-shard exchange, in the same order: the same bits. */
    for (unsigned b = local_bits; rc == QM_OK && b < s->qubits; ++b) {
        const uint64_t bit = (uint64_t)1 << b;
        for (uint64_t off = 0; rc == QM_OK && off < bytes; off += piece) {
            const uint64_t len = bytes - off < piece ? bytes - off : piece;
            for (int i = 0; rc == QM_OK && i < n; ++i) {
                const qm_state_shard *sh = &s->shards[i];
                const bool high = (sh->start & bit) != 0;
                const uint64_t pg = sh->start ^ bit;
                const int j = local_shard_of(s, pg);
                if (j >= 0) {
                    rc = qm_hal_copy_d2d(hal, scratch[i], 0, s->shards[j].buf, off, len,
                                         streams[i], st);
                } else if (R > 1 && bit >= span) {
                    const int peer = (int)(pg / span);
                    rc = exchange_remote(hal, comm, peer, high, sh->buf, off, len, scratch[i], ha,
                                         hb, chunk, (int)b, st);
                } else {
                    rc = qm_fail(st, QM_E_INTERNAL, "encode: iqp stage %u: no shard holds index "
                                 "%llu (the partner of shard %d)", b, (unsigned long long)pg, i);
                }
            }
            if (rc == QM_OK)
                rc = sync_all(hal, streams, n, st);
            for (int i = 0; rc == QM_OK && i < n; ++i) {
                const qm_hal_wht_args a = {.state = s->shards[i].buf, .state_dtype = s->dtype,
                                           .off = off / es, .n = len / es, .partner = scratch[i],
                                           .partner_off = 0,
                                           .high = (s->shards[i].start & bit) != 0};
                rc = qm_hal_wht(hal, &a, streams[i], st);
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
    qm_hal_host_free(hal, ha);
    qm_hal_host_free(hal, hb);
    return rc;
}
