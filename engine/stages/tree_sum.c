/* tree_sum.c — canonical pieces of shard ranges and their merge into per-state tree sums (see
 * tree_sum.h). Moved out of materialize.c so that the norm check of the written state
 * (state_norm.c) forms its sums exactly as materialize forms the input's.
 * Must not: call the HAL but to combine and copy back block sums its callers made (qm_tree_dev_*),
 * or combine pieces in any order but the global index order.
 */
#include "tree_sum.h"
#include "comm.h"
#include "hal.h"
#include "status_internal.h"

#include <stdlib.h>

/* Largest k such that pos is aligned to 2^k, 2^k fits in [pos, end) and k <= cap. */
static unsigned piece_log(uint64_t pos, uint64_t end, unsigned cap)
{
    unsigned k = pos == 0 ? 63 : (unsigned)__builtin_ctzll(pos);
    if (k > cap)
        k = cap;
    while (k > 0 && ((uint64_t)1 << k) > end - pos)
        --k;
    return k;
}

qm_tree_run qm_tree_run_next(unsigned qubits, uint64_t pos, uint64_t hi)
{
    qm_tree_run r = {.pos = pos, .run = 1, .k = piece_log(pos, hi, qubits)};
    const uint64_t len = (uint64_t)1 << r.k;
    while (pos + (r.run + 1) * len <= hi && piece_log(pos + r.run * len, hi, qubits) == r.k)
        ++r.run;
    r.lb = r.k < QM_HAL_RED_LOG2_BLOCK ? r.k : QM_HAL_RED_LOG2_BLOCK;
    return r;
}

uint64_t qm_tree_run_blocks(const qm_tree_run *r) { return r->run << (r->k - r->lb); }
uint64_t qm_tree_run_end(const qm_tree_run *r) { return r->pos + (r->run << r->k); }

uint64_t qm_tree_range_blocks(unsigned qubits, uint64_t lo, uint64_t hi)
{
    uint64_t nb = 0;
    for (uint64_t pos = lo; pos < hi;) {
        const qm_tree_run r = qm_tree_run_next(qubits, pos, hi);
        nb += qm_tree_run_blocks(&r);
        pos = qm_tree_run_end(&r);
    }
    return nb;
}

uint64_t qm_tree_range_pieces(unsigned qubits, uint64_t lo, uint64_t hi)
{
    uint64_t np = 0;
    for (uint64_t pos = lo; pos < hi;) {
        const qm_tree_run r = qm_tree_run_next(qubits, pos, hi);
        np += r.run;
        pos = qm_tree_run_end(&r);
    }
    return np;
}

/* Room for n more pieces. */
static qm_code grow(qm_tree_pieces *t, uint64_t n, qm_status *st)
{
    const uint64_t want = (uint64_t)t->n + n;
    if (want > (uint64_t)INT32_MAX / 2)
        return qm_fail(st, QM_E_NOMEM, "encode: %llu piece sums are too many",
                       (unsigned long long)want);
    if ((int)want <= t->cap)
        return QM_OK;
    const int cap = t->cap * 2 > (int)want ? t->cap * 2 : (int)want;
    qm_tree_piece *p = realloc(t->v, (size_t)cap * sizeof *p);
    if (!p)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d piece sums", cap);
    t->v = p;
    t->cap = cap;
    return QM_OK;
}

qm_code qm_tree_pieces_add_run(qm_tree_pieces *t, const qm_tree_run *r, double *block_sums,
                               qm_status *st)
{
    qm_code rc = grow(t, r->run, st);
    if (rc != QM_OK)
        return rc;
    const uint64_t per = (uint64_t)1 << (r->k - r->lb);
    for (uint64_t j = 0; j < r->run; ++j)
        t->v[t->n++] = (qm_tree_piece){.off = r->pos + (j << r->k), .log2n = r->k,
                                       .sum = qm_hal_tree_combine(block_sums + j * per, per)};
    return QM_OK;
}

qm_code qm_tree_pieces_add_roots(qm_tree_pieces *t, const qm_tree_run *r, const double *roots,
                                 qm_status *st)
{
    qm_code rc = grow(t, r->run, st);
    if (rc != QM_OK)
        return rc;
    for (uint64_t j = 0; j < r->run; ++j)
        t->v[t->n++] = (qm_tree_piece){.off = r->pos + (j << r->k), .log2n = r->k, .sum = roots[j]};
    return QM_OK;
}

qm_code qm_tree_pieces_add_states(qm_tree_pieces *t, uint64_t first, uint64_t n,
                                  const double *sums, qm_status *st)
{
    qm_code rc = grow(t, n, st);
    if (rc != QM_OK)
        return rc;
    for (uint64_t k = 0; k < n; ++k)
        t->v[t->n++] = (qm_tree_piece){.off = (first + k) << t->qubits, .log2n = t->qubits,
                                       .sum = sums[k]};
    return QM_OK;
}

uint64_t qm_tree_dev_doubles(unsigned qubits, uint64_t lo, uint64_t hi, bool combine)
{
    return qm_tree_range_blocks(qubits, lo, hi) + (combine ? qm_tree_range_pieces(qubits, lo, hi) : 0);
}

uint64_t qm_tree_dev_host(unsigned qubits, uint64_t lo, uint64_t hi, bool combine)
{
    return combine ? qm_tree_range_pieces(qubits, lo, hi) : qm_tree_range_blocks(qubits, lo, hi);
}

qm_code qm_tree_dev_enqueue(qm_hal *hal, unsigned qubits, uint64_t lo, uint64_t hi, bool combine,
                            qm_hal_buf *sums, double *host, qm_hal_stream *s, qm_status *st)
{
    const uint64_t nb = qm_tree_range_blocks(qubits, lo, hi);
    if (nb == 0)
        return QM_OK;
    if (!combine)
        return qm_hal_copy_d2h(hal, host, sums, 0, nb * sizeof(double), s, st);
    uint64_t at = 0, np = 0;
    for (uint64_t pos = lo; pos < hi;) {
        const qm_tree_run r = qm_tree_run_next(qubits, pos, hi);
        const qm_hal_tree_combine_args a = {.in_off = at, .n_groups = r.run,
                                            .log2_group = r.k - r.lb};
        qm_code rc = qm_hal_tree_combine_dev(hal, &a, sums, sums, nb + np, s, st);
        if (rc != QM_OK)
            return rc;
        at += qm_tree_run_blocks(&r);
        np += r.run;
        pos = qm_tree_run_end(&r);
    }
    qm_trace("tree: combines into %llu piece roots enqueued, their copy next",
             (unsigned long long)np);
    return qm_hal_copy_d2h(hal, host, sums, nb * sizeof(double), np * sizeof(double), s, st);
}

qm_code qm_tree_dev_add(qm_tree_pieces *t, uint64_t lo, uint64_t hi, bool combine, double *host,
                        qm_status *st)
{
    qm_code rc = QM_OK;
    for (uint64_t pos = lo, at = 0; rc == QM_OK && pos < hi;) {
        const qm_tree_run r = qm_tree_run_next(t->qubits, pos, hi);
        rc = combine ? qm_tree_pieces_add_roots(t, &r, host + at, st)
                     : qm_tree_pieces_add_run(t, &r, host + at, st);
        at += combine ? r.run : qm_tree_run_blocks(&r);
        pos = qm_tree_run_end(&r);
    }
    return rc;
}

typedef struct piece_rec {
    uint64_t off, log2n;
    double sum;
} piece_rec;

qm_code qm_tree_pieces_exchange(qm_tree_pieces *t, qm_comm *comm, qm_status *st)
{
    if (!comm || qm_comm_size(comm) <= 1)
        return QM_OK;
    const int R = qm_comm_size(comm);
    qm_code rc;
    uint64_t mine = (uint64_t)t->n, *counts = calloc((size_t)R, sizeof *counts), max = 0;
    piece_rec *recs = NULL, *all = NULL;
    if (!counts)
        return qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %d ranks' piece counts", R);
    if ((rc = qm_comm_allgather(comm, &mine, sizeof mine, counts, st)) != QM_OK)
        goto done;
    uint64_t total = 0;
    for (int r = 0; r < R; ++r) {
        max = counts[r] > max ? counts[r] : max;
        total += counts[r];
    }
    recs = calloc((size_t)(max ? max : 1), sizeof *recs);
    all = calloc((size_t)(max ? max : 1) * (size_t)R, sizeof *all);
    if (!recs || !all || total > INT32_MAX) {
        rc = qm_fail(st, QM_E_NOMEM, "encode: out of host memory for %llu piece sums",
                     (unsigned long long)total);
        goto done;
    }
    for (int k = 0; k < t->n; ++k)
        recs[k] = (piece_rec){.off = t->v[k].off, .log2n = t->v[k].log2n, .sum = t->v[k].sum};
    if (max > 0 && (rc = qm_comm_allgather(comm, recs, (size_t)max * sizeof *recs, all, st)) != QM_OK)
        goto done;
    t->n = 0;
    if ((rc = grow(t, total, st)) != QM_OK)
        goto done;
    for (int r = 0; r < R; ++r)
        for (uint64_t k = 0; k < counts[r]; ++k) {
            const piece_rec *q = &all[(size_t)r * max + k];
            t->v[t->n++] = (qm_tree_piece){.off = q->off, .log2n = (unsigned)q->log2n, .sum = q->sum};
        }
    rc = QM_OK;
done:
    free(counts);
    free(recs);
    free(all);
    return rc;
}

qm_code qm_tree_pieces_merge(qm_tree_pieces *t, double *state_sums, qm_status *st)
{
    qm_tree_piece *p = t->v;
    int top = 0;
    for (int i = 0; i < t->n; ++i) {
        p[top++] = p[i];
        while (top >= 2) {
            qm_tree_piece *l = &p[top - 2], *r = &p[top - 1];
            const uint64_t len = (uint64_t)1 << l->log2n;
            if (l->log2n != r->log2n || l->log2n >= t->qubits || r->off != l->off + len ||
                (l->off & (2 * len - 1)) != 0)
                break;
            l->sum = l->sum + r->sum;
            l->log2n++;
            --top;
        }
        if (top == 1 && p[0].log2n == t->qubits) { /* a whole state */
            state_sums[p[0].off >> t->qubits] = p[0].sum;
            top = 0;
        }
    }
    t->n = 0;
    QM_CHECK(st, top == 0);
    return QM_OK;
}

void qm_tree_pieces_fini(qm_tree_pieces *t)
{
    if (!t)
        return;
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}
