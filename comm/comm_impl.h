/* comm_impl.h — what a communicator implementation fills in. The engine never includes this file.
 *
 * An implementation fills a qm_comm_ops table (C11 designated initializers, an explicit kind, the
 * ABI number it was written against) and calls qm_comm_create with its context. The wrappers in
 * comm.c have already checked NULL arguments, ranks, roots and tags, and cut every message into
 * pieces of at most the chunk limit (<= QM_COMM_CHUNK_MAX_BYTES = 2^28, so a piece always fits an
 * int count), so members only move one piece. Every member is blocking and reports failure through
 * st with a message naming its own details ("MPI_Allgather failed on rank 1 (...)"); the wrapper
 * prefixes the operation ("comm allgather: ..."). Members are called by one thread per comm object.
 *
 * The ABI number only grows; members are only ever appended.
 */
#ifndef QM_COMM_IMPL_H
#define QM_COMM_IMPL_H

#include "comm.h"

#define QM_COMM_ABI 1

typedef struct qm_comm_ops {
    qm_comm_kind kind;
    int abi; /* QM_COMM_ABI at the time the implementation was written */

    /* Required. Cannot fail. Called once by qm_comm_create; fixed for the comm's lifetime. */
    int (*rank)(void *ctx);
    int (*size)(void *ctx);

    /* Required collective. Every rank contributes piece_bytes (1..chunk limit) from mine; rank r's
     * piece is written at all + r * stride_bytes (stride_bytes >= piece_bytes; the pieces of one
     * call never overlap). A failure leaves `all` unspecified. */
    qm_code (*allgather)(void *ctx, const void *mine, uint64_t piece_bytes, void *all,
                         uint64_t stride_bytes, qm_status *st);
    /* Required collective. root's bytes (1..chunk limit) are copied to buf on every other rank.
     * A failure leaves buf unspecified on the receiving ranks. */
    qm_code (*broadcast)(void *ctx, void *buf, uint64_t bytes, int root, qm_status *st);
    /* Required collective. Returns when every rank has entered it. */
    qm_code (*barrier)(void *ctx, qm_status *st);
    /* Required point-to-point (never to or from this rank; 0 <= tag <= QM_COMM_TAG_MAX; bytes
     * 0..chunk limit, except the wrappers' 8-byte header, which is sent whole). Blocking; messages
     * between one pair with one tag arrive in order. recv fails when the matched message's size differs from `bytes`, naming
     * both; a failed recv leaves buf unspecified. */
    qm_code (*send)(void *ctx, int dst, const void *buf, uint64_t bytes, int tag, qm_status *st);
    qm_code (*recv)(void *ctx, int src, void *buf, uint64_t bytes, int tag, qm_status *st);

    /* Required. Frees ctx. Cannot fail (backend errors are ignored after resources are released). */
    void (*destroy)(void *ctx);
} qm_comm_ops;

/* Create the wrapper object around an implementation. On failure, ops->destroy(ctx) has been
 * called and *out is NULL. */
qm_code qm_comm_create(const qm_comm_ops *ops, void *ctx, qm_comm **out, qm_status *st);
/* The implementation context of a comm (for implementation-specific hooks). */
void *qm_comm_ctx(const qm_comm *c);

#endif
