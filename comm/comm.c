/* comm.c — the wrappers every communicator call goes through (comm.h).
 *
 * In: calls from the engine with buffers, 64-bit byte counts, roots, peers and tags.
 * Out: calls to an implementation's ops table (comm_impl.h) after checking arguments, with every
 * message cut into pieces of at most the chunk limit; per-object traffic counters; the helpers built
 * on the primitives: the rank-ordered float64 sum, agree (same 64-bit value everywhere) and
 * allgather_status (everyone learns the lowest failing rank's status).
 * Point-to-point messages carry an 8-byte header with the total byte count, so a receiver that
 * expects another size fails with both sizes named (and drains the sender's pieces so the sender
 * is not left waiting), whatever the chunking.
 * Must not: include mpi.h, depend on a backend's reduction order, or abort. Messages that every rank
 * must print identically (agree, allgather_status, mismatched collectives) are built only from data
 * every rank holds after the exchange.
 */
#include "comm_impl.h"
#include "status_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qm_comm {
    const qm_comm_ops *ops;
    void *ctx;
    int rank, size;
    uint64_t chunk_limit;
    qm_comm_usage usage;
};

/* Scratch bound of the rank-ordered sum (comm.h). */
#define QM_COMM_REDUCE_SCRATCH_BYTES ((uint64_t)1 << 20)
/* Ranks listed by name in an agree() failure before "..." */
#define QM_COMM_AGREE_LIST 8
/* allgather_status record: code, backend code, line, col (int32 little-endian), file, msg. */
#define QM_COMM_STATUS_RECORD (16 + QM_STATUS_FILE_BYTES + QM_STATUS_MSG_BYTES)

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; ++i)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_i32(unsigned char *p, int v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; ++i)
        p[i] = (unsigned char)(u >> (8 * i));
}

static int get_i32(const unsigned char *p)
{
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i)
        u |= (uint32_t)p[i] << (8 * i);
    return u <= (uint32_t)INT32_MAX ? (int)u : -(int)(~u) - 1;
}

/* ---- lifetime and queries -------------------------------------------------------------------- */

qm_code qm_comm_create(const qm_comm_ops *ops, void *ctx, qm_comm **out, qm_status *st)
{
    qm_code rc = QM_OK;
    qm_comm *c = NULL;
    if (out)
        *out = NULL;
    if (!ops || !out) {
        rc = qm_fail(st, QM_E_ARG, "comm: ops and out must not be NULL");
        goto fail_ctx;
    }
    if (ops->abi < 1 || ops->abi > QM_COMM_ABI || !ops->rank || !ops->size || !ops->allgather ||
        !ops->broadcast || !ops->barrier || !ops->send || !ops->recv || !ops->destroy) {
        rc = qm_fail(st, QM_E_INTERNAL, "comm: implementation '%s' ops table is incomplete (abi %d, "
                     "this build %d)", qm_comm_kind_name(ops->kind), ops->abi, QM_COMM_ABI);
        goto fail_ctx;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        rc = qm_fail(st, QM_E_NOMEM, "comm: out of host memory (%zu B)", sizeof *c);
        goto fail_ctx;
    }
    c->ops = ops;
    c->ctx = ctx;
    c->rank = ops->rank(ctx);
    c->size = ops->size(ctx);
    c->chunk_limit = QM_COMM_CHUNK_MAX_BYTES;
    if (c->size < 1 || c->rank < 0 || c->rank >= c->size) {
        rc = qm_fail(st, QM_E_INTERNAL, "comm: implementation '%s' reported rank %d of %d",
                     qm_comm_kind_name(ops->kind), c->rank, c->size);
        goto fail_comm;
    }
    *out = c;
    return QM_OK;

fail_comm:
    free(c);
fail_ctx:
    if (ops && ops->destroy)
        ops->destroy(ctx);
    return rc;
}

void qm_comm_destroy(qm_comm *c)
{
    if (!c)
        return;
    c->ops->destroy(c->ctx);
    free(c);
}

void *qm_comm_ctx(const qm_comm *c) { return c ? c->ctx : NULL; }
int qm_comm_rank(const qm_comm *c) { return c ? c->rank : -1; }
int qm_comm_size(const qm_comm *c) { return c ? c->size : 0; }
qm_comm_kind qm_comm_kind_get(const qm_comm *c) { return c ? c->ops->kind : (qm_comm_kind)0; }

const char *qm_comm_kind_name(qm_comm_kind kind)
{
    switch (kind) {
    case QM_COMM_LOCAL: return "local";
    case QM_COMM_THREADS: return "threads";
    case QM_COMM_MPI: return "mpi";
    }
    return "?";
}

void qm_comm_usage_get(const qm_comm *c, qm_comm_usage *out)
{
    if (!out)
        return;
    if (!c) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = c->usage;
}

qm_code qm_comm_set_chunk_limit(qm_comm *c, uint64_t bytes, qm_status *st)
{
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm: comm must not be NULL");
    if (bytes < 1 || bytes > QM_COMM_CHUNK_MAX_BYTES)
        return qm_fail(st, QM_E_ARG, "comm: chunk limit must be 1..%llu bytes (got %llu)",
                       (unsigned long long)QM_COMM_CHUNK_MAX_BYTES, (unsigned long long)bytes);
    c->chunk_limit = bytes;
    return QM_OK;
}

uint64_t qm_comm_chunk_limit(const qm_comm *c) { return c ? c->chunk_limit : 0; }

/* ---- chunked primitives (no argument checks, no n_ops) --------------------------------------- */

static qm_code gather_pieces(qm_comm *c, const void *mine, uint64_t record_bytes, void *all,
                             qm_status *st)
{
    for (uint64_t off = 0; off < record_bytes;) {
        uint64_t piece = min_u64(c->chunk_limit, record_bytes - off);
        c->usage.n_pieces++;
        qm_code rc = c->ops->allgather(c->ctx, (const unsigned char *)mine + off, piece,
                                       (unsigned char *)all + off, record_bytes, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "comm allgather (record %llu B, piece at offset %llu)",
                                    (unsigned long long)record_bytes, (unsigned long long)off);
        off += piece;
    }
    c->usage.bytes_sent += record_bytes;
    c->usage.bytes_received += record_bytes * (uint64_t)c->size;
    return QM_OK;
}

static qm_code broadcast_pieces(qm_comm *c, void *buf, uint64_t bytes, int root, qm_status *st)
{
    for (uint64_t off = 0; off < bytes;) {
        uint64_t piece = min_u64(c->chunk_limit, bytes - off);
        c->usage.n_pieces++;
        qm_code rc = c->ops->broadcast(c->ctx, (unsigned char *)buf + off, piece, root, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "comm broadcast (%llu B from rank %d, piece at offset %llu)",
                                    (unsigned long long)bytes, root, (unsigned long long)off);
        off += piece;
    }
    if (c->rank == root)
        c->usage.bytes_sent += bytes;
    else
        c->usage.bytes_received += bytes;
    return QM_OK;
}

/* ---- collectives ----------------------------------------------------------------------------- */

qm_code qm_comm_allgather(qm_comm *c, const void *mine, size_t record_bytes, void *all,
                          qm_status *st)
{
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm allgather: comm must not be NULL");
    if (record_bytes == 0)
        return QM_OK;
    if (!mine || !all)
        return qm_fail(st, QM_E_ARG, "comm allgather: mine and all must not be NULL (record %zu B)",
                       record_bytes);
    if ((uint64_t)record_bytes > UINT64_MAX / (uint64_t)c->size ||
        (uint64_t)record_bytes * (uint64_t)c->size > (uint64_t)SIZE_MAX)
        return qm_fail(st, QM_E_ARG, "comm allgather: %d records of %zu B overflow 64-bit sizes",
                       c->size, record_bytes);
    uintptr_t m = (uintptr_t)mine, a = (uintptr_t)all;
    uintptr_t a_end = a + record_bytes * (size_t)c->size;
    if (m < a_end && a < m + record_bytes)
        return qm_fail(st, QM_E_ARG, "comm allgather: mine overlaps all (record %zu B, %d ranks); "
                       "copy the record out first", record_bytes, c->size);
    c->usage.n_ops++;
    return gather_pieces(c, mine, record_bytes, all, st);
}

qm_code qm_comm_allreduce_sum_f64(qm_comm *c, double *values, uint64_t count, qm_status *st)
{
    qm_code rc = QM_OK;
    double *scratch = NULL;
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm allreduce: comm must not be NULL");
    if (count == 0)
        return QM_OK;
    if (!values)
        return qm_fail(st, QM_E_ARG, "comm allreduce: values must not be NULL (count %llu)",
                       (unsigned long long)count);
    if (count > UINT64_MAX / sizeof(double))
        return qm_fail(st, QM_E_ARG, "comm allreduce: %llu values overflow 64-bit sizes",
                       (unsigned long long)count);
    c->usage.n_ops++;
    /* The block depends only on count and size, so every rank makes the same calls. */
    uint64_t size = (uint64_t)c->size;
    uint64_t block = QM_COMM_REDUCE_SCRATCH_BYTES / sizeof(double) / size;
    if (block < 1)
        block = 1;
    block = min_u64(block, count);
    scratch = malloc((size_t)(block * size) * sizeof(double));
    if (!scratch) {
        rc = qm_fail(st, QM_E_NOMEM, "comm allreduce: out of host memory for %llu B of scratch",
                     (unsigned long long)(block * size * sizeof(double)));
        goto cleanup;
    }
    for (uint64_t i = 0; i < count; i += block) {
        uint64_t b = min_u64(block, count - i);
        rc = gather_pieces(c, values + i, b * sizeof(double), scratch, st);
        if (rc != QM_OK) {
            qm_status_prefix(st, "comm allreduce (%llu values, block at %llu)",
                             (unsigned long long)count, (unsigned long long)i);
            goto cleanup;
        }
        /* rank r's block is scratch[r * b .. r * b + b); sum in rank order, starting from rank 0
         * (not from 0.0, which would turn -0.0 into +0.0). */
        for (uint64_t j = 0; j < b; ++j) {
            double s = scratch[j];
            for (uint64_t r = 1; r < size; ++r)
                s += scratch[r * b + j];
            values[i + j] = s;
        }
    }

cleanup:
    free(scratch);
    return rc;
}

qm_code qm_comm_broadcast(qm_comm *c, void *buf, uint64_t bytes, int root, qm_status *st)
{
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm broadcast: comm must not be NULL");
    if (root < 0 || root >= c->size)
        return qm_fail(st, QM_E_ARG, "comm broadcast: root %d is not a rank (world size %d)", root,
                       c->size);
    if (bytes == 0)
        return QM_OK;
    if (!buf)
        return qm_fail(st, QM_E_ARG, "comm broadcast: buf must not be NULL (%llu B)",
                       (unsigned long long)bytes);
    c->usage.n_ops++;
    return broadcast_pieces(c, buf, bytes, root, st);
}

qm_code qm_comm_barrier(qm_comm *c, qm_status *st)
{
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm barrier: comm must not be NULL");
    c->usage.n_ops++;
    c->usage.n_pieces++;
    qm_code rc = c->ops->barrier(c->ctx, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "comm barrier");
    return QM_OK;
}

qm_code qm_comm_agree(qm_comm *c, uint64_t value, const char *what, qm_status *st)
{
    qm_code rc = QM_OK;
    unsigned char *all = NULL;
    unsigned char mine[8];
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm agree: comm must not be NULL");
    if (!what)
        what = "value";
    c->usage.n_ops++;
    size_t size = (size_t)c->size;
    all = malloc(size * 8);
    if (!all) {
        rc = qm_fail(st, QM_E_NOMEM, "comm agree: out of host memory (%zu B)", size * 8);
        goto cleanup;
    }
    put_u64(mine, value);
    rc = gather_pieces(c, mine, 8, all, st);
    if (rc != QM_OK) {
        qm_status_prefix(st, "comm agree on the %.64s", what);
        goto cleanup;
    }
    uint64_t v0 = get_u64(all);
    int n_diff = 0;
    for (size_t r = 1; r < size; ++r)
        n_diff += get_u64(all + 8 * r) != v0;
    if (n_diff == 0)
        goto cleanup;

    /* Built only from the gathered values: identical on every rank. */
    char list[QM_STATUS_MSG_BYTES];
    size_t len = 0;
    int listed = 0;
    len += (size_t)snprintf(list, sizeof list, "rank 0 has %016llx", (unsigned long long)v0);
    for (size_t r = 1; r < size && listed < QM_COMM_AGREE_LIST && len < sizeof list; ++r) {
        uint64_t v = get_u64(all + 8 * r);
        if (v == v0)
            continue;
        len += (size_t)snprintf(list + len, sizeof list - len, ", rank %zu has %016llx", r,
                                (unsigned long long)v);
        ++listed;
    }
    if (listed < n_diff && len < sizeof list)
        snprintf(list + len, sizeof list - len, ", ...");
    rc = qm_fail(st, QM_E_RANK, "comm: ranks disagree on the %.64s: %s (%d of %d ranks differ from "
                 "rank 0); every rank must be given the same inputs", what, list, n_diff, c->size);

cleanup:
    free(all);
    return rc;
}

static void status_pack(const qm_status *s, unsigned char *rec)
{
    memset(rec, 0, QM_COMM_STATUS_RECORD);
    put_i32(rec, (int)s->code);
    put_i32(rec + 4, s->backend_code);
    put_i32(rec + 8, s->line);
    put_i32(rec + 12, s->col);
    memcpy(rec + 16, s->file, QM_STATUS_FILE_BYTES);
    memcpy(rec + 16 + QM_STATUS_FILE_BYTES, s->msg, QM_STATUS_MSG_BYTES);
}

static void status_unpack(const unsigned char *rec, qm_status *s)
{
    int code = get_i32(rec);
    s->code = code > 0 && code < QM_CODE_COUNT_ ? (qm_code)code : QM_E_INTERNAL;
    s->backend_code = get_i32(rec + 4);
    s->line = get_i32(rec + 8);
    s->col = get_i32(rec + 12);
    memcpy(s->file, rec + 16, QM_STATUS_FILE_BYTES);
    s->file[QM_STATUS_FILE_BYTES - 1] = '\0';
    memcpy(s->msg, rec + 16 + QM_STATUS_FILE_BYTES, QM_STATUS_MSG_BYTES);
    s->msg[QM_STATUS_MSG_BYTES - 1] = '\0';
}

/* Whether msg already names a rank ("rank 3: ..."): a verdict on a verdict's message (every
 * rank failing with it) is not prefixed twice. */
static bool has_rank_prefix(const char *msg)
{
    if (strncmp(msg, "rank ", 5) != 0)
        return false;
    const char *p = msg + 5;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        ++p;
    return p[0] == ':' && p[1] == ' ';
}

qm_code qm_comm_allgather_status(qm_comm *c, const qm_status *mine, qm_status *first_failure,
                                 qm_status *st)
{
    qm_code rc = QM_OK;
    unsigned char *codes = NULL;
    unsigned char code_rec[4];
    unsigned char rec[QM_COMM_STATUS_RECORD];
    qm_status local, verdict;
    int root = -1; /* the lowest failing rank */
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm allgather_status: comm must not be NULL");
    /* mine may alias st or first_failure: copy it before writing either. */
    if (mine)
        local = *mine;
    else
        qm_status_clear(&local);
    qm_status_clear(&verdict);
    c->usage.n_ops++;
    size_t size = (size_t)c->size;
    codes = malloc(size * 4);
    if (!codes) {
        rc = qm_fail(&verdict, QM_E_NOMEM, "comm allgather_status: out of host memory (%zu B)",
                     size * 4);
        goto cleanup;
    }
    put_i32(code_rec, (int)local.code);
    rc = gather_pieces(c, code_rec, 4, codes, &verdict);
    if (rc != QM_OK) {
        qm_status_prefix(&verdict, "comm allgather_status");
        goto cleanup;
    }
    for (size_t r = 0; r < size && root < 0; ++r)
        if (get_i32(codes + 4 * r) != (int)QM_OK)
            root = (int)r;
    if (root < 0)
        goto cleanup; /* every rank is fine: verdict stays QM_OK */
    if (root == c->rank)
        status_pack(&local, rec);
    rc = broadcast_pieces(c, rec, sizeof rec, root, &verdict);
    if (rc != QM_OK) {
        qm_status_prefix(&verdict, "comm allgather_status");
        root = -1;
        goto cleanup;
    }
    status_unpack(rec, &verdict);
    rc = verdict.code;

cleanup:
    free(codes);
    if (first_failure)
        *first_failure = verdict;
    if (rc != QM_OK && st) {
        *st = verdict;
        if (root >= 0 && size > 1 && !has_rank_prefix(st->msg))
            qm_status_prefix(st, "rank %d", root);
    }
    return rc;
}

/* ---- point-to-point -------------------------------------------------------------------------- */

static qm_code check_peer(const qm_comm *c, const char *op, const char *dir, int peer,
                          const void *buf, uint64_t bytes, int tag, qm_status *st)
{
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return qm_fail(st, QM_E_ARG, "comm %s: rank %d is not another rank (this is rank %d of %d)",
                       op, peer, c->rank, c->size);
    if (tag < 0 || tag > QM_COMM_TAG_MAX)
        return qm_fail(st, QM_E_ARG, "comm %s %s rank %d: tag %d is outside 0..%d", op, dir, peer,
                       tag, QM_COMM_TAG_MAX);
    if (!buf && bytes > 0)
        return qm_fail(st, QM_E_ARG, "comm %s %s rank %d: buf must not be NULL (%llu B)", op, dir,
                       peer, (unsigned long long)bytes);
    return QM_OK;
}

qm_code qm_comm_send(qm_comm *c, int dst, const void *buf, uint64_t bytes, int tag, qm_status *st)
{
    unsigned char head[8];
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm send: comm must not be NULL");
    qm_code rc = check_peer(c, "send", "to", dst, buf, bytes, tag, st);
    if (rc != QM_OK)
        return rc;
    c->usage.n_ops++;
    put_u64(head, bytes);
    c->usage.n_pieces++;
    rc = c->ops->send(c->ctx, dst, head, sizeof head, tag, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "comm send to rank %d (tag %d, %llu B, header)", dst, tag,
                                (unsigned long long)bytes);
    for (uint64_t off = 0; off < bytes;) {
        uint64_t piece = min_u64(c->chunk_limit, bytes - off);
        c->usage.n_pieces++;
        rc = c->ops->send(c->ctx, dst, (const unsigned char *)buf + off, piece, tag, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "comm send to rank %d (tag %d, %llu B, piece at offset %llu)",
                                    dst, tag, (unsigned long long)bytes, (unsigned long long)off);
        off += piece;
    }
    c->usage.bytes_sent += bytes;
    return QM_OK;
}

/* Receive and discard the pieces of a message whose size differs from what the caller expected, so
 * that its sender is not left blocked. Best effort: gives up quietly when scratch is unavailable. */
static void drain_pieces(qm_comm *c, int src, uint64_t bytes, int tag)
{
    uint64_t cap = min_u64(c->chunk_limit, bytes);
    unsigned char *scratch = cap ? malloc((size_t)cap) : NULL;
    if (!scratch)
        return;
    for (uint64_t off = 0; off < bytes;) {
        uint64_t piece = min_u64(cap, bytes - off);
        qm_status ignored;
        qm_status_clear(&ignored);
        c->usage.n_pieces++;
        if (c->ops->recv(c->ctx, src, scratch, piece, tag, &ignored) != QM_OK)
            break;
        off += piece;
    }
    free(scratch);
}

qm_code qm_comm_recv(qm_comm *c, int src, void *buf, uint64_t bytes, int tag, qm_status *st)
{
    unsigned char head[8];
    if (!c)
        return qm_fail(st, QM_E_ARG, "comm recv: comm must not be NULL");
    qm_code rc = check_peer(c, "recv", "from", src, buf, bytes, tag, st);
    if (rc != QM_OK)
        return rc;
    c->usage.n_ops++;
    c->usage.n_pieces++;
    rc = c->ops->recv(c->ctx, src, head, sizeof head, tag, st);
    if (rc != QM_OK)
        return qm_status_prefix(st, "comm recv from rank %d (tag %d, %llu B, header)", src, tag,
                                (unsigned long long)bytes);
    uint64_t sent = get_u64(head);
    if (sent != bytes) {
        drain_pieces(c, src, sent, tag);
        return qm_fail(st, QM_E_RANK, "comm recv from rank %d (tag %d): rank %d sent %llu B but "
                       "this rank expected %llu B; sender and receiver must agree on the size",
                       src, tag, src, (unsigned long long)sent, (unsigned long long)bytes);
    }
    for (uint64_t off = 0; off < bytes;) {
        uint64_t piece = min_u64(c->chunk_limit, bytes - off);
        c->usage.n_pieces++;
        rc = c->ops->recv(c->ctx, src, (unsigned char *)buf + off, piece, tag, st);
        if (rc != QM_OK)
            return qm_status_prefix(st, "comm recv from rank %d (tag %d, %llu B, piece at offset "
                                    "%llu)", src, tag, (unsigned long long)bytes,
                                    (unsigned long long)off);
        off += piece;
    }
    c->usage.bytes_received += bytes;
    return QM_OK;
}

qm_code qm_comm_verdict(qm_comm *c, qm_code rc, qm_status *st)
{
    if (!c || qm_comm_size(c) == 1)
        return rc;
    qm_status mine, xst;
    if (rc == QM_OK || !st)
        qm_status_clear(&mine);
    if (rc != QM_OK) {
        if (st)
            mine = *st;
        else
            qm_fail(&mine, rc, "comm: rank %d failed (no message)", qm_comm_rank(c));
    }
    qm_status_clear(&xst);
    qm_code r = qm_comm_allgather_status(c, &mine, NULL, &xst);
    if (r != QM_OK && st)
        *st = xst;
    return r;
}
