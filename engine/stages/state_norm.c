/* state_norm.c — Σ|ψ|² of every state of a written state, computed where its shards live (the
 * norm check of `qmesh encode`, docs/io.md "The norm check").
 *
 * In: a state (its shards on their devices), the communicator of the run. Out: one float64 sum
 * per state, the same bits on every rank.
 * Per shard, the canonical aligned pieces of its range (tree_sum.h) are summed by the
 * state_sumsq op into a small device buffer on the shard's own stream, and each piece's block
 * sums (8 bytes per block of up to 2^14 amplitudes) are combined there into its root by the
 * tree_combine op (qm_tree_dev_*); every shard's sums are enqueued before any is copied back, so
 * the devices sum at once, then each shard's roots (one double per piece: per state, or per
 * canonical piece of a state cut by the shard) are copied to the host. The pieces are merged per state in global index
 * order, after an exchange of every rank's pieces when the ranks hold parts of the index space —
 * so each state's sum is its fixed pairwise tree (kernels/qm_math.h) for any layout, device
 * count or rank count, bit-identical between the simulator and CUDA.
 * A state made by a context with an encode cache (s->reuse, reuse.h) sums into the cache's
 * per-shard scratch, streams and page-locked block sums (the thread that encodes on the context
 * checks its states: `qmesh encode --batch-size` per batch), so a check allocates nothing after
 * the first; other states allocate and free them per call.
 * Must not: copy amplitudes to the host, or change them.
 */
#include "comm.h"
#include "materialize_internal.h"
#include "reuse.h"
#include "state_internal.h"
#include "status_internal.h"
#include "tree_sum.h"

#include <stdlib.h>

qm_code qm_state_norms(const qm_state *s, int n_norm, struct qm_comm *comm, bool distributed,
                       double *sums, qm_status *st)
{
    if (!s || !sums || n_norm < 1 || n_norm > s->n_shards)
        return qm_fail(st, QM_E_ARG, "norm check: a state, its sums and 1..%d shards are needed "
                       "(got %d)", s ? s->n_shards : 0, n_norm);
    qm_hal *hal = s->hal;
    const unsigned q = s->qubits;
    uint64_t *first = calloc((size_t)n_norm + 1, sizeof *first); /* shard i's sums: host[first[i]..] */
    qm_hal_buf **part = calloc((size_t)n_norm, sizeof *part);
    qm_hal_stream **str = calloc((size_t)n_norm, sizeof *str);
    double *host = NULL;
    qm_tree_pieces t = {.qubits = q};
    qm_code rc = first && part && str ? QM_OK
                                      : qm_fail(st, QM_E_NOMEM, "norm check: out of host memory "
                                                "for %d shards", n_norm);
    const bool combine = qm_hal_supports_op(hal, QM_HAL_OP_TREE_COMBINE);
    for (int i = 0; rc == QM_OK && i < n_norm; ++i)
        first[i + 1] = first[i] + qm_tree_dev_host(q, s->shards[i].start, s->shards[i].end, combine);
    qm_reuse *keep = s->reuse; /* the context's scratch, else this call's own */
    bool plain = true; /* a few roots go to plain memory, not a buffer page-locked per check */
    if (rc == QM_OK &&
        (rc = qm_reuse_sums_host(keep, hal, first[n_norm], &host, &plain, st)) != QM_OK)
        qm_status_prefix(st, "norm check");
    for (int i = 0; rc == QM_OK && i < n_norm; ++i) {
        const qm_state_shard *sh = &s->shards[i];
        const uint64_t nd = qm_tree_dev_doubles(q, sh->start, sh->end, combine);
        rc = keep ? qm_reuse_scratch(keep, QM_REUSE_DEV_BLOCK_SUMS, i, sh->device,
                                     nd * sizeof(double), &part[i], st)
                  : qm_hal_buf_alloc(hal, sh->device, nd * sizeof(double), &part[i], st);
        if (rc == QM_OK)
            rc = keep ? qm_reuse_stream(keep, i, sh->device, &str[i], st)
                      : qm_hal_stream_create(hal, sh->device, &str[i], st);
        for (uint64_t pos = sh->start, at = 0; rc == QM_OK && pos < sh->end;) {
            const qm_tree_run r = qm_tree_run_next(q, pos, sh->end);
            const qm_hal_state_sumsq_args a = {.state = sh->buf, .state_dtype = s->dtype,
                                               .off = pos - sh->start,
                                               .n = qm_tree_run_end(&r) - pos, .g0 = pos,
                                               .period = s->n_amps, .log2_block = r.lb};
            rc = qm_hal_state_sumsq(hal, &a, part[i], at, str[i], st);
            at += qm_tree_run_blocks(&r);
            pos = qm_tree_run_end(&r);
        }
        if (rc != QM_OK)
            qm_status_prefix(st, "norm check: shard %d", i);
    }
    for (int i = 0; rc == QM_OK && i < n_norm; ++i) /* every shard's sums are under way */
        if ((rc = qm_tree_dev_enqueue(hal, q, s->shards[i].start, s->shards[i].end, combine,
                                      part[i], host + first[i], str[i], st)) != QM_OK)
            qm_status_prefix(st, "norm check: shard %d", i);
    for (int i = 0; str && i < n_norm; ++i) { /* every stream drained, also after a failure */
        if (keep) { /* the cache's: synced, kept */
            qm_status tmp;
            const qm_code d = str[i] ? qm_hal_stream_sync(hal, str[i], rc == QM_OK ? st : &tmp)
                                     : QM_OK;
            rc = rc == QM_OK ? d : rc;
            continue;
        }
        qm_materialize_drain(hal, str[i], &rc, st);
        qm_hal_buf_free(hal, part[i]);
    }
    for (int i = 0; rc == QM_OK && i < n_norm; ++i)
        rc = qm_tree_dev_add(&t, s->shards[i].start, s->shards[i].end, combine, host + first[i], st);
    /* collective from here: every rank takes part, also after a failure of its own */
    rc = qm_comm_verdict(comm, rc, st);
    if (rc == QM_OK && distributed)
        rc = qm_tree_pieces_exchange(&t, comm, st);
    if (rc == QM_OK)
        rc = qm_tree_pieces_merge(&t, sums, st);
    qm_tree_pieces_fini(&t);
    qm_reuse_sums_free(keep, hal, host, plain);
    free(first);
    free(part);
    free(str);
    return rc;
}
