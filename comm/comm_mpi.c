/* comm_mpi.c — the MPI communicator: one rank per process (compiled only with -DQM_WITH_MPI=ON;
 * comm_mpi_absent.c stands in otherwise). This is the only file of qmesh that includes mpi.h.
 *
 * In: one piece at a time from the wrappers in comm.c (arguments checked, pieces <= 2^28 bytes, so
 * every count fits an int and each call moves at most 2^28 elements of MPI_BYTE).
 * Out: MPI calls on a duplicate of MPI_COMM_WORLD whose error handler is MPI_ERRORS_RETURN, so a
 * failure comes back as a code; it is translated to E-BACKEND naming the MPI call, this rank, MPI's
 * error string and its error class (also stored as the status's backend_code).
 * Lifetime: MPI_Init_thread (MPI_THREAD_FUNNELED requested; whatever level MPI provides is accepted,
 * since qmesh calls MPI from one thread) unless MPI is already initialised; MPI_Finalize when the
 * last MPI comm is destroyed and this module initialised MPI. Two file-scope counters track that,
 * because MPI's own state is per process; create and destroy from the thread that drives MPI.
 * When duplicating MPI_COMM_WORLD fails after MPI_Init_thread, MPI stays initialised (MPI_Finalize
 * is collective and could wait for ranks that went on); the caller should exit nonzero, and mpirun
 * ends the job.
 * A rank that dies: Open MPI's mpirun kills the whole job when a rank exits nonzero or is killed
 * before MPI_Finalize, so the surviving ranks do not hang in a collective (tests/test_comm_mpi.c).
 * Must not: abort (errors return codes), or call MPI outside these functions.
 */
#include "comm_impl.h"
#include "status_internal.h"

#include <mpi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct mpi_ctx {
    MPI_Comm comm;
    int rank, size;
} mpi_ctx;

static int mpi_live;           /* MPI comms alive in this process */
static int mpi_we_initialised; /* this module called MPI_Init_thread and has not finalised */

/* E-BACKEND: "<call> failed on rank R (<details>): <MPI error string> (MPI error class C)". */
static qm_code mpi_fail(qm_status *st, int err, int rank, const char *fmt, ...) QM_PRINTF(4, 5);
static qm_code mpi_fail(qm_status *st, int err, int rank, const char *fmt, ...)
{
    char head[QM_STATUS_MSG_BYTES];
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "unknown MPI error %d", err);
    if (MPI_Error_class(err, &cls) != MPI_SUCCESS)
        cls = err;
    if (rank >= 0)
        return qm_fail_backend(st, QM_E_BACKEND, cls, "mpi comm: %s failed on rank %d: %s (MPI "
                               "error class %d)", head, rank, text, cls);
    return qm_fail_backend(st, QM_E_BACKEND, cls, "mpi comm: %s failed: %s (MPI error class %d)",
                           head, text, cls);
}

static int mpi_rank_get(void *ctx) { return ((const mpi_ctx *)ctx)->rank; }
static int mpi_size_get(void *ctx) { return ((const mpi_ctx *)ctx)->size; }

static qm_code mpi_allgather(void *ctx, const void *mine, uint64_t piece_bytes, void *all,
                             uint64_t stride_bytes, qm_status *st)
{
    mpi_ctx *m = ctx;
    int count = (int)piece_bytes;
    int err;
    if (stride_bytes == piece_bytes) {
        err = MPI_Allgather(mine, count, MPI_BYTE, all, count, MPI_BYTE, m->comm);
        if (err != MPI_SUCCESS)
            return mpi_fail(st, err, m->rank, "MPI_Allgather (%d B per rank)", count);
        return QM_OK;
    }
    /* One piece of each rank's record: receive rank r's piece at all + r * stride through a
     * contiguous type resized to the record's extent. */
    MPI_Datatype piece = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
    err = MPI_Type_contiguous(count, MPI_BYTE, &piece);
    if (err == MPI_SUCCESS)
        err = MPI_Type_create_resized(piece, 0, (MPI_Aint)stride_bytes, &strided);
    if (err == MPI_SUCCESS)
        err = MPI_Type_commit(&strided);
    if (err != MPI_SUCCESS) {
        mpi_fail(st, err, m->rank, "MPI_Type_create_resized (%d B piece, %llu B stride)", count,
                 (unsigned long long)stride_bytes);
        goto cleanup;
    }
    err = MPI_Allgather(mine, count, MPI_BYTE, all, 1, strided, m->comm);
    if (err != MPI_SUCCESS)
        mpi_fail(st, err, m->rank, "MPI_Allgather (%d B per rank, %llu B stride)", count,
                 (unsigned long long)stride_bytes);

cleanup:
    if (strided != MPI_DATATYPE_NULL)
        MPI_Type_free(&strided);
    if (piece != MPI_DATATYPE_NULL)
        MPI_Type_free(&piece);
    return err == MPI_SUCCESS ? QM_OK : QM_E_BACKEND;
}

static qm_code mpi_broadcast(void *ctx, void *buf, uint64_t bytes, int root, qm_status *st)
{
    mpi_ctx *m = ctx;
    int err = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, m->comm);
    if (err != MPI_SUCCESS)
        return mpi_fail(st, err, m->rank, "MPI_Bcast (%d B from rank %d)", (int)bytes, root);
    return QM_OK;
}

static qm_code mpi_barrier(void *ctx, qm_status *st)
{
    mpi_ctx *m = ctx;
    int err = MPI_Barrier(m->comm);
    if (err != MPI_SUCCESS)
        return mpi_fail(st, err, m->rank, "MPI_Barrier");
    return QM_OK;
}

static qm_code mpi_send(void *ctx, int dst, const void *buf, uint64_t bytes, int tag, qm_status *st)
{
    mpi_ctx *m = ctx;
    int err = MPI_Send(buf, (int)bytes, MPI_BYTE, dst, tag, m->comm);
    if (err != MPI_SUCCESS)
        return mpi_fail(st, err, m->rank, "MPI_Send (%d B to rank %d, tag %d)", (int)bytes, dst,
                        tag);
    return QM_OK;
}

static qm_code mpi_recv(void *ctx, int src, void *buf, uint64_t bytes, int tag, qm_status *st)
{
    mpi_ctx *m = ctx;
    MPI_Status status;
    int got = -1;
    int err = MPI_Recv(buf, (int)bytes, MPI_BYTE, src, tag, m->comm, &status);
    if (err != MPI_SUCCESS)
        return mpi_fail(st, err, m->rank, "MPI_Recv (%d B from rank %d, tag %d)", (int)bytes, src,
                        tag);
    err = MPI_Get_count(&status, MPI_BYTE, &got);
    if (err != MPI_SUCCESS)
        return mpi_fail(st, err, m->rank, "MPI_Get_count (from rank %d, tag %d)", src, tag);
    if ((uint64_t)got != bytes)
        return qm_fail(st, QM_E_BACKEND, "mpi comm: MPI_Recv on rank %d from rank %d (tag %d): "
                       "expected %llu B, rank %d sent %d B", m->rank, src, tag,
                       (unsigned long long)bytes, src, got);
    return QM_OK;
}

static void mpi_destroy(void *ctx)
{
    mpi_ctx *m = ctx;
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m);
    if (--mpi_live == 0 && mpi_we_initialised) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized)
            MPI_Finalize();
        mpi_we_initialised = 0;
    }
}

static const qm_comm_ops mpi_ops = {
    .kind = QM_COMM_MPI,
    .abi = QM_COMM_ABI,
    .rank = mpi_rank_get,
    .size = mpi_size_get,
    .allgather = mpi_allgather,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .send = mpi_send,
    .recv = mpi_recv,
    .destroy = mpi_destroy,
};

qm_code qm_comm_mpi_create(int *argc, char ***argv, qm_comm **out, qm_status *st)
{
    qm_code rc = QM_OK;
    mpi_ctx *m = NULL;
    int initialized = 0, finalized = 0, err;
    if (out)
        *out = NULL;
    if (!out)
        return qm_fail(st, QM_E_ARG, "mpi comm: out must not be NULL");
    MPI_Finalized(&finalized);
    if (finalized)
        return qm_fail(st, QM_E_BACKEND, "mpi comm: MPI was already finalized in this process (by "
                       "the last qm_comm_destroy or by the application); MPI cannot be "
                       "initialised twice, so keep one MPI comm alive for the whole run");
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = MPI_THREAD_SINGLE;
        err = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (err != MPI_SUCCESS)
            return mpi_fail(st, err, -1, "MPI_Init_thread");
        mpi_we_initialised = 1;
        /* Ours now: let errors on the world communicator (MPI_Comm_dup) return too. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    m = calloc(1, sizeof *m);
    if (!m)
        return qm_fail(st, QM_E_NOMEM, "mpi comm: out of host memory (%zu B)", sizeof *m);
    m->comm = MPI_COMM_NULL;
    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    err = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    if (err != MPI_SUCCESS) {
        m->comm = MPI_COMM_NULL;
        rc = mpi_fail(st, err, world_rank, "MPI_Comm_dup(MPI_COMM_WORLD)");
        goto fail;
    }
    err = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_rank(m->comm, &m->rank);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_size(m->comm, &m->size);
    if (err != MPI_SUCCESS) {
        rc = mpi_fail(st, err, world_rank, "MPI_Comm_set_errhandler/rank/size");
        goto fail;
    }
    mpi_live++; /* mpi_destroy (also on a failed qm_comm_create) balances it */
    return qm_comm_create(&mpi_ops, m, out, st);

fail:
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m);
    return rc;
}
