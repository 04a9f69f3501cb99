/* tree_sum.h — per-state sums of squares as the fixed pairwise tree of kernels/qm_math.h, formed
 * from the sums of canonical aligned pieces (materialize.c for the norm of the input, state_norm.c
 * for the norm check of the written state).
 *
 * A shard's global slot range is cut into canonical pieces: the largest aligned power-of-two
 * ranges (never more than one state) from its start; consecutive pieces of one size make a run,
 * summed on the device in blocks of at most 2^QM_HAL_RED_LOG2_BLOCK slots. Every piece is a
 * subtree of its state's tree, so merging the pieces of every shard in global index order gives
 * each state's root bit for bit as one device would, for any layout (balanced included).
 * In: block sums per run (from the HAL), or whole-state sums. Out: one root per state.
 * Where the block sums are made on a device, the tree_combine op forms each piece's root there
 * (qm_tree_dev_*), so that one double per piece crosses to the host instead of one per block.
 * Must not: depend on the shard count, the device count or the rank count for any bit.
 */
#ifndef QM_TREE_SUM_H
#define QM_TREE_SUM_H

#include "qmesh.h"

#include <stdbool.h>
#include <stdint.h>

struct qm_comm;
struct qm_hal;
struct qm_hal_buf;
struct qm_hal_stream;

typedef struct qm_tree_piece {
    uint64_t off;   /* global slot index of the first element */
    unsigned log2n; /* 2^log2n slots, never more than one state */
    double sum;
} qm_tree_piece;

/* Pieces in global index order; zero-initialise, then qm_tree_pieces_fini. */
typedef struct qm_tree_pieces {
    unsigned qubits; /* 2^qubits slots per state */
    qm_tree_piece *v;
    int n, cap;
} qm_tree_pieces;

/* A run of consecutive canonical pieces of one size starting at pos: `run` pieces of 2^k slots,
 * summed in device blocks of 2^lb slots (2^(k - lb) blocks a piece). */
typedef struct qm_tree_run {
    uint64_t pos, run;
    unsigned k, lb;
} qm_tree_run;

/* The run of canonical pieces of [pos, hi) that starts at pos (hi > pos). Cannot fail. */
qm_tree_run qm_tree_run_next(unsigned qubits, uint64_t pos, uint64_t hi);
/* Device blocks of run r, and the slot after it. Cannot fail. */
uint64_t qm_tree_run_blocks(const qm_tree_run *r);
uint64_t qm_tree_run_end(const qm_tree_run *r);
/* Device blocks of all runs of [lo, hi) (0 when hi <= lo). Cannot fail. */
uint64_t qm_tree_range_blocks(unsigned qubits, uint64_t lo, uint64_t hi);
/* Canonical pieces of all runs of [lo, hi) (0 when hi <= lo). Cannot fail. */
uint64_t qm_tree_range_pieces(unsigned qubits, uint64_t lo, uint64_t hi);

/* Append run r's pieces, each the pairwise combination of its 2^(k - lb) block sums (destroys
 * block_sums). E-NOMEM. */
qm_code qm_tree_pieces_add_run(qm_tree_pieces *t, const qm_tree_run *r, double *block_sums,
                               qm_status *st);
/* Append run r's pieces with their roots already formed (roots[j]: piece j's 2^(k - lb) block
 * sums combined, as the tree_combine op does on the device). E-NOMEM. */
qm_code qm_tree_pieces_add_roots(qm_tree_pieces *t, const qm_tree_run *r, const double *roots,
                                 qm_status *st);
/* Append whole-state pieces for states first .. first + n - 1 with the given sums. E-NOMEM. */
qm_code qm_tree_pieces_add_states(qm_tree_pieces *t, uint64_t first, uint64_t n,
                                  const double *sums, qm_status *st);
/* Replace each rank's pieces by every rank's, in rank order (= global index order, ranks owning
 * increasing ranges): two all-gathers (the counts, then the pieces padded to the largest count).
 * Collective: every rank calls it alike. A NULL or one-rank communicator leaves t as it is. */
qm_code qm_tree_pieces_exchange(qm_tree_pieces *t, struct qm_comm *comm, qm_status *st);
/* Merge the pieces (in global order, together whole states) into state_sums[state]; t is left
 * empty. E-INTERNAL when they do not make whole states. */
qm_code qm_tree_pieces_merge(qm_tree_pieces *t, double *state_sums, qm_status *st);
/* --- a shard's block sums on its device, combined there --------------------------------------
 * Usage: a device buffer of qm_tree_dev_doubles(...) doubles whose first
 * qm_tree_range_blocks(q, lo, hi) hold the block sums of [lo, hi) (sumsq_dev, state_sumsq),
 * enqueued on stream s; qm_tree_dev_enqueue then enqueues, on s, their roots (one tree_combine
 * per run, into the doubles after the block sums) and the copy of qm_tree_dev_host(...) doubles
 * back to host; after s is drained, qm_tree_dev_add appends the pieces. `combine` is whether the
 * backend has the tree_combine op (qm_hal_supports_op): without it the block sums themselves are
 * copied and combined on the host (the same bits). */
uint64_t qm_tree_dev_doubles(unsigned qubits, uint64_t lo, uint64_t hi, bool combine);
uint64_t qm_tree_dev_host(unsigned qubits, uint64_t lo, uint64_t hi, bool combine);
/* E-ARG and the HAL's codes (the caller prefixes the shard). */
qm_code qm_tree_dev_enqueue(struct qm_hal *hal, unsigned qubits, uint64_t lo, uint64_t hi,
                            bool combine, struct qm_hal_buf *sums, double *host,
                            struct qm_hal_stream *s, qm_status *st);
/* Appends [lo, hi)'s pieces from host (destroys it). E-NOMEM. */
qm_code qm_tree_dev_add(qm_tree_pieces *t, uint64_t lo, uint64_t hi, bool combine, double *host,
                        qm_status *st);

/* Free the pieces. NULL is a no-op. */
void qm_tree_pieces_fini(qm_tree_pieces *t);

#endif
