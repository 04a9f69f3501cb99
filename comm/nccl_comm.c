/* nccl_comm.c — NCCL communicators for the CUDA backend (nccl_comm.h); the only file that includes
 * nccl.h.
 *
 * In: a CUDA qm_hal (and, for a rank communicator, a qm_comm that bootstraps NCCL). Out: NCCL comms
 * with one non-blocking stream per device; an all-gather and a gather that block until done; NCCL
 * and CUDA errors translated into E-BACKEND with the operation, the device(s) and NCCL's string.
 * Must not: abort, print, or leak on any failure path; enter NCCL on one rank while another rank
 * already knows the call fails (argument and bounds checks end in qm_comm_verdict first).
 * Choices and warts:
 *   - The physical GPU of a HAL device is read from its id. hal/cuda/cuda.c names its devices
 *     "cuda:G" (one per GPU) or "cuda:G.K" (logical device K on GPU G), and its context is private
 *     to cuda.c, so no HAL member or backend accessor is needed. If cuda.c ever names its devices
 *     otherwise, nccl_gpu_of fails with E-INTERNAL rather than guessing.
 *   - NCCL_NVLS_ENABLE=0 is set before the first NCCL call, overriding any value the user set: the
 *     lent machines require NVLink SHARP (multicast) off.
 *   - Two ranks on one GPU are found before NCCL is asked, by all-gathering (host name, PCI bus id)
 *     over the qm_comm; every rank derives the same message from the same table. A host name longer
 *     than 63 bytes is compared on its first 63.
 *   - hal/cuda includes engine/comm.h (a public engine header, as hal.h includes qmesh.h) for that
 *     bootstrap and the verdicts.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, gethostname */

#include "nccl_comm.h"
#include "status_internal.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct qm_nccl {
    qm_hal *hal;               /* retained */
    qm_comm *comm;             /* retained; NULL for a local communicator */
    int size;                  /* devices (local) or ranks (rank) */
    int rank;                  /* this process's rank (rank); 0 (local) */
    int n_local;               /* NCCL comms held here: size (local) or 1 (rank) */
    uint64_t chunk_bytes;      /* largest ncclSend/ncclRecv piece */
    int *dev;                  /* per local entry: HAL device */
    int *gpu;                  /* per local entry: physical CUDA device */
    qm_hal_device_info *info;  /* per local entry: the id for messages */
    ncclComm_t *comms;
    cudaStream_t *streams;
};

/* What a rank tells the others before NCCL starts: where its GPU is. */
typedef struct nccl_where {
    char host[64];
    char bus[32]; /* cudaDeviceGetPCIBusId: "0000:1B:00.0" */
} nccl_where;

/* ---- messages -------------------------------------------------------------------------------- */

/* "over 2 GPUs (cuda:0..cuda:1)" (local) or "on rank 1 of 2 (cuda:1)" (rank). */
static const char *nccl_desc(const qm_nccl *c, char *buf, size_t n)
{
    if (c->comm)
        snprintf(buf, n, "on rank %d of %d (%s)", c->rank, c->size, c->info[0].id);
    else if (c->n_local == 1)
        snprintf(buf, n, "over 1 GPU (%s)", c->info[0].id);
    else
        snprintf(buf, n, "over %d GPUs (%s..%s)", c->n_local, c->info[0].id,
                 c->info[c->n_local - 1].id);
    return buf;
}

/* An NCCL failure of operation `fmt` on c: E-BACKEND with NCCL's string and, when NCCL has one, its
 * last error message ("nccl: ncclCommInitAll over 2 GPUs (cuda:0..cuda:1) failed: invalid usage
 * (run with NCCL_DEBUG=WARN for details); Duplicate GPU detected ..."). */
static qm_code nccl_fail(qm_status *st, ncclResult_t r, const qm_nccl *c, const char *fmt, ...)
    QM_PRINTF(4, 5);
static qm_code nccl_fail(qm_status *st, ncclResult_t r, const qm_nccl *c, const char *fmt, ...)
{
    char op[160], where[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op, sizeof op, fmt, ap);
    va_end(ap);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    const char *last = ncclGetLastError(NULL);
#else
    const char *last = NULL;
#endif
    (void)cudaGetLastError(); /* NCCL may leave CUDA's sticky error of a recoverable failure */
    return qm_fail_backend(st, QM_E_BACKEND, (int)r, "nccl: %s %s failed: %s%s%s", op,
                           nccl_desc(c, where, sizeof where), ncclGetErrorString(r),
                           last && *last ? "; " : "", last ? last : "");
}

/* A CUDA failure of `op` on device `id`, with CUDA's sticky error cleared. */
static qm_code nccl_cuda_fail(qm_status *st, cudaError_t e, const char *op, const char *id)
{
    (void)cudaGetLastError();
    const qm_code code = e == cudaErrorMemoryAllocation ? QM_E_CAPACITY : QM_E_BACKEND;
    return qm_fail_backend(st, code, (int)e, "nccl: %s on %s failed: %s (%s)", op, id,
                           cudaGetErrorName(e), cudaGetErrorString(e));
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* NCCL_NVLS_ENABLE=0 before any NCCL call; the lock keeps threads that open rank communicators at
 * once from writing the environment together. */
static void nccl_nvls_off(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    const char *v = getenv("NCCL_NVLS_ENABLE");
    if (!v || strcmp(v, "0") != 0)
        (void)setenv("NCCL_NVLS_ENABLE", "0", 1);
    pthread_mutex_unlock(&lock);
}

/* The decimal digits at *s as an int (advancing *s); -1 when there are none or too many. */
static int nccl_parse_index(const char **s)
{
    long v = 0;
    const char *p = *s;
    while (*p >= '0' && *p <= '9' && v < 1000000)
        v = v * 10 + (*p++ - '0');
    if (p == *s || v >= 1000000)
        return -1;
    *s = p;
    return (int)v;
}

/* The physical CUDA device under HAL device dev, read from its id "cuda:G" or "cuda:G.K". */
static qm_code nccl_gpu_of(const qm_hal *hal, int dev, qm_hal_device_info *info, int *gpu,
                           qm_status *st)
{
    qm_code rc = qm_hal_device_info_query(hal, dev, info, st);
    if (rc != QM_OK)
        return rc;
    const char *p = info->id;
    int g = -1;
    if (strncmp(p, "cuda:", 5) == 0) {
        p += 5;
        g = nccl_parse_index(&p);
        if (g >= 0 && *p == '.') {
            ++p;
            if (nccl_parse_index(&p) < 0)
                g = -1;
        }
        if (*p != '\0')
            g = -1;
    }
    if (g < 0)
        return qm_fail(st, QM_E_INTERNAL,
                       "nccl: HAL device %d has id '%s', not cuda:G or cuda:G.K as hal/cuda/cuda.c "
                       "names its devices", dev, info->id);
    *gpu = g;
    return QM_OK;
}

/* The start of both opens: *out cleared, hal and out present, hal a CUDA HAL. */
static qm_code nccl_open_begin(const qm_hal *hal, qm_nccl **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!hal || !out)
        return qm_fail(st, QM_E_ARG, "nccl: hal and out must not be NULL");
    if (qm_hal_kind_get(hal) != QM_HAL_CUDA)
        return qm_fail(st, QM_E_UNSUPPORTED,
                       "nccl: the HAL is '%s', not 'cuda'; NCCL needs the CUDA backend "
                       "(qm_hal_cuda_open)", qm_hal_kind_name(qm_hal_kind_get(hal)));
    return QM_OK;
}

/* Destroy (a healthy communicator) or abort (a failed init, or one whose peers may never have
 * joined) each NCCL comm, then the streams and arrays. Handles a half-built c. A failed
 * ncclCommInitRank/All leaves either NULL or a comm in an error state, which abort releases. */
static void nccl_free(qm_nccl *c, bool abort_comms)
{
    if (!c)
        return;
    for (int i = 0; c->comms && i < c->n_local; ++i)
        if (c->comms[i])
            (void)(abort_comms ? ncclCommAbort(c->comms[i]) : ncclCommDestroy(c->comms[i]));
    for (int i = 0; c->streams && i < c->n_local; ++i)
        if (c->streams[i] && (cudaSetDevice(c->gpu[i]) != cudaSuccess ||
                              cudaStreamDestroy(c->streams[i]) != cudaSuccess))
            (void)cudaGetLastError();
    free(c->streams);
    free(c->comms);
    free(c->info);
    free(c->gpu);
    free(c->dev);
    free(c);
}

void qm_nccl_close(qm_nccl *c) { nccl_free(c, false); }

/* A communicator of n_local entries on HAL devices dev0, dev0 + 1, ...: arrays, devices and GPUs
 * filled in; no NCCL comm or stream yet. */
static qm_code nccl_new(qm_hal *hal, qm_comm *comm, int dev0, int n_local, qm_nccl **out,
                        qm_status *st)
{
    qm_nccl *c = calloc(1, sizeof *c);
    if (!c)
        return qm_fail(st, QM_E_NOMEM, "nccl: out of host memory");
    c->hal = hal;
    c->comm = comm;
    c->size = comm ? qm_comm_size(comm) : n_local;
    c->rank = comm ? qm_comm_rank(comm) : 0;
    c->n_local = n_local;
    c->chunk_bytes = QM_NCCL_CHUNK_MAX_BYTES;
    c->dev = calloc((size_t)n_local, sizeof *c->dev);
    c->gpu = calloc((size_t)n_local, sizeof *c->gpu);
    c->info = calloc((size_t)n_local, sizeof *c->info);
    c->comms = calloc((size_t)n_local, sizeof *c->comms);
    c->streams = calloc((size_t)n_local, sizeof *c->streams);
    qm_code rc = QM_OK;
    if (!c->dev || !c->gpu || !c->info || !c->comms || !c->streams)
        rc = qm_fail(st, QM_E_NOMEM, "nccl: out of host memory for %d devices", n_local);
    for (int i = 0; rc == QM_OK && i < n_local; ++i) {
        c->dev[i] = dev0 + i;
        rc = nccl_gpu_of(hal, c->dev[i], &c->info[i], &c->gpu[i], st);
    }
    if (rc != QM_OK) {
        nccl_free(c, false);
        return rc;
    }
    *out = c;
    return QM_OK;
}

/* One non-blocking stream per local entry, on its GPU. */
static qm_code nccl_streams_create(qm_nccl *c, qm_status *st)
{
    for (int i = 0; i < c->n_local; ++i) {
        cudaError_t e = cudaSetDevice(c->gpu[i]);
        if (e == cudaSuccess)
            e = cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            c->streams[i] = NULL;
            return nccl_cuda_fail(st, e, "cudaStreamCreate", c->info[i].id);
        }
    }
    return QM_OK;
}

qm_code qm_nccl_open_local(qm_hal *hal, qm_nccl **out, qm_status *st)
{
    qm_code rc = nccl_open_begin(hal, out, st);
    if (rc != QM_OK)
        return rc;
    qm_nccl *c = NULL;
    if ((rc = nccl_new(hal, NULL, 0, qm_hal_device_count(hal), &c, st)) != QM_OK)
        return rc;
    /* NCCL refuses two ranks on one GPU; say which devices share it before NCCL is asked */
    for (int i = 0; i < c->n_local; ++i)
        for (int j = i + 1; j < c->n_local; ++j)
            if (c->gpu[i] == c->gpu[j]) {
                rc = qm_fail(st, QM_E_UNSUPPORTED,
                             "nccl: devices %s and %s share GPU %d; NCCL needs one GPU per device "
                             "(open the CUDA HAL with one device per GPU: qm_hal_cuda_open)",
                             c->info[i].id, c->info[j].id, c->gpu[i]);
                goto fail;
            }
    nccl_nvls_off();
    ncclResult_t r = ncclCommInitAll(c->comms, c->n_local, c->gpu);
    if (r != ncclSuccess) { /* comms NCCL did make are aborted below */
        rc = nccl_fail(st, r, c, "ncclCommInitAll");
        goto fail;
    }
    if ((rc = nccl_streams_create(c, st)) != QM_OK)
        goto fail;
    *out = c;
    return QM_OK;
fail:
    nccl_free(c, true);
    return rc;
}

/* This rank's host and GPU, for the duplicate check. */
static qm_code nccl_where_get(const qm_nccl *c, nccl_where *w, qm_status *st)
{
    memset(w, 0, sizeof *w);
    if (gethostname(w->host, sizeof w->host - 1) != 0)
        return qm_fail(st, QM_E_BACKEND, "nccl: gethostname failed on rank %d", c->rank);
    cudaError_t e = cudaDeviceGetPCIBusId(w->bus, (int)sizeof w->bus - 1, c->gpu[0]);
    if (e != cudaSuccess)
        return nccl_cuda_fail(st, e, "cudaDeviceGetPCIBusId", c->info[0].id);
    return QM_OK;
}

/* The first two ranks on one GPU of one host, from the gathered table (the same on every rank). */
static qm_code nccl_ranks_distinct(const nccl_where *all, int size, qm_status *st)
{
    for (int i = 0; i < size; ++i)
        for (int j = i + 1; j < size; ++j)
            if (strcmp(all[i].host, all[j].host) == 0 && strcmp(all[i].bus, all[j].bus) == 0)
                return qm_fail(st, QM_E_UNSUPPORTED,
                               "nccl: ranks %d and %d share GPU %s on host %s; NCCL needs one GPU "
                               "per rank (give each rank of a host its own device)",
                               i, j, all[i].bus, all[i].host);
    return QM_OK;
}

qm_code qm_nccl_open_rank(qm_hal *hal, int dev, qm_comm *comm, qm_nccl **out, qm_status *st)
{
    qm_code rc = nccl_open_begin(hal, out, st);
    if (rc != QM_OK)
        return rc;
    if (!comm)
        return qm_fail(st, QM_E_ARG, "nccl: comm must not be NULL");
    if (dev < 0 || dev >= qm_hal_device_count(hal))
        return qm_fail(st, QM_E_ARG, "nccl: device %d is not a device of the HAL (0..%d)", dev,
                       qm_hal_device_count(hal) - 1);
    const int size = qm_comm_size(comm), rank = qm_comm_rank(comm);
    qm_nccl *c = NULL;
    nccl_where mine, *all = NULL;
    ncclUniqueId id;
    memset(&mine, 0, sizeof mine);
    memset(&id, 0, sizeof id);

    /* local setup; every rank learns whether all ranks got this far */
    rc = nccl_new(hal, comm, dev, 1, &c, st);
    if (rc == QM_OK)
        rc = nccl_streams_create(c, st);
    if (rc == QM_OK)
        rc = nccl_where_get(c, &mine, st);
    if (rc == QM_OK && !(all = calloc((size_t)size, sizeof *all)))
        rc = qm_fail(st, QM_E_NOMEM, "nccl: out of host memory for %d ranks", size);
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto fail;
    /* two ranks on one GPU: every rank finds the same pair in the same table */
    if ((rc = qm_comm_allgather(comm, &mine, sizeof mine, all, st)) != QM_OK ||
        (rc = nccl_ranks_distinct(all, size, st)) != QM_OK)
        goto fail;
    nccl_nvls_off();
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            rc = nccl_fail(st, r, c, "ncclGetUniqueId");
    }
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK ||
        (rc = qm_comm_broadcast(comm, &id, sizeof id, 0, st)) != QM_OK)
        goto fail;
    cudaError_t e = cudaSetDevice(c->gpu[0]);
    if (e != cudaSuccess) {
        rc = nccl_cuda_fail(st, e, "cudaSetDevice", c->info[0].id);
    } else {
        ncclResult_t r = ncclCommInitRank(&c->comms[0], size, id, rank);
        if (r != ncclSuccess) /* a comm NCCL did make is aborted below */
            rc = nccl_fail(st, r, c, "ncclCommInitRank");
    }
    if ((rc = qm_comm_verdict(comm, rc, st)) != QM_OK)
        goto fail;
    free(all);
    *out = c;
    return QM_OK;
fail:
    nccl_free(c, true); /* abort: some peers may hold no comm to finish with */
    free(all);
    return rc;
}

int qm_nccl_size(const qm_nccl *c) { return c ? c->size : 0; }

qm_code qm_nccl_set_chunk_limit(qm_nccl *c, uint64_t bytes, qm_status *st)
{
    if (!c || bytes == 0 || bytes > QM_NCCL_CHUNK_MAX_BYTES)
        return qm_fail(st, QM_E_ARG, "nccl: chunk limit %llu B is outside 1..%llu B",
                       (unsigned long long)bytes, (unsigned long long)QM_NCCL_CHUNK_MAX_BYTES);
    c->chunk_bytes = bytes;
    return QM_OK;
}

/* ---- collectives ----------------------------------------------------------------------------- */

/* The comm rank of local entry i. */
static int nccl_rank_of(const qm_nccl *c, int i) { return c->comm ? c->rank : i; }

/* buf is local entry i's, lives on its device, and holds [off, off + bytes). */
static qm_code nccl_check_buf(const qm_nccl *c, int i, const qm_hal_buf *buf, uint64_t off,
                              uint64_t bytes, const char *op, const char *which, qm_status *st)
{
    if (!buf)
        return qm_fail(st, QM_E_ARG, "%s: the %s buffer of %s must not be NULL", op, which,
                       c->info[i].id);
    if (qm_hal_buf_device(buf) != c->dev[i])
        return qm_fail(st, QM_E_ARG, "%s: the %s buffer of %s lives on HAL device %d, not %d", op,
                       which, c->info[i].id, qm_hal_buf_device(buf), c->dev[i]);
    const uint64_t have = qm_hal_buf_bytes(buf);
    if (off > have || bytes > have - off)
        return qm_fail(st, QM_E_BOUNDS,
                       "%s on %s: %s range [%llu, +%llu) is outside the %llu-byte buffer", op,
                       c->info[i].id, which, (unsigned long long)off, (unsigned long long)bytes,
                       (unsigned long long)have);
    return QM_OK;
}

/* Wait for every local stream, even after a failure (no scratch may be freed under a running
 * kernel). Keeps an earlier failure in rc and st. */
static qm_code nccl_sync(const qm_nccl *c, qm_code rc, qm_status *st)
{
    for (int i = 0; i < c->n_local; ++i) {
        cudaError_t e = cudaSetDevice(c->gpu[i]);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(c->streams[i]);
        if (e != cudaSuccess && rc == QM_OK)
            rc = nccl_cuda_fail(st, e, "cudaStreamSynchronize", c->info[i].id);
        else if (e != cudaSuccess)
            (void)cudaGetLastError();
    }
    return rc;
}

qm_code qm_nccl_allgather_f64_sync(qm_nccl *c, const qm_hal_buf *const *bufs, uint64_t count,
                                   double *out, qm_status *st)
{
    if (!c || !bufs || !out)
        return qm_fail(st, QM_E_ARG,
                       "nccl allgather: communicator, buffers and out must not be NULL");
    qm_hal_buf **scratch = calloc((size_t)c->n_local, sizeof *scratch);
    qm_code rc = scratch ? QM_OK : qm_fail(st, QM_E_NOMEM, "nccl allgather: out of host memory");
    if (rc == QM_OK && count > UINT64_MAX / sizeof(double) / (uint64_t)c->size)
        rc = qm_fail(st, QM_E_ARG, "nccl allgather: %d x %llu values overflow a 64-bit byte count",
                     c->size, (unsigned long long)count);
    const uint64_t bytes = count * sizeof(double); /* one device's part */
    for (int i = 0; rc == QM_OK && i < c->n_local; ++i)
        rc = nccl_check_buf(c, i, bufs[i], 0, bytes, "nccl allgather", "input", st);
    /* NCCL needs the whole gathered array on every device */
    for (int i = 0; rc == QM_OK && count > 0 && i < c->n_local; ++i)
        rc = qm_hal_buf_alloc(c->hal, c->dev[i], bytes * (uint64_t)c->size, &scratch[i], st);
    if ((rc = qm_comm_verdict(c->comm, rc, st)) != QM_OK || count == 0)
        goto done;

    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) { /* one call per device, as one operation */
        for (int i = 0; r == ncclSuccess && i < c->n_local; ++i)
            r = ncclAllGather(qm_hal_buf_raw(bufs[i]), qm_hal_buf_raw(scratch[i]), (size_t)count,
                              ncclDouble, c->comms[i], c->streams[i]);
        ncclResult_t r_end = ncclGroupEnd(); /* a started group is always ended */
        r = r != ncclSuccess ? r : r_end;
    }
    if (r != ncclSuccess)
        rc = nccl_fail(st, r, c, "ncclAllGather of %llu values", (unsigned long long)count);
    rc = nccl_sync(c, rc, st);
    if (rc == QM_OK)
        rc = qm_hal_copy_d2h(c->hal, out, scratch[0], 0, bytes * (uint64_t)c->size, NULL, st);
    rc = qm_comm_verdict(c->comm, rc, st);
done:
    for (int i = 0; scratch && i < c->n_local; ++i)
        qm_hal_buf_free(c->hal, scratch[i]);
    free(scratch);
    return rc;
}

/* bytes bytes at p between local entry i and comm rank peer, in pieces of at most chunk_bytes. */
static ncclResult_t nccl_pieces(const qm_nccl *c, int i, char *p, uint64_t bytes, int peer,
                                bool send)
{
    ncclResult_t r = ncclSuccess;
    for (uint64_t k = 0; r == ncclSuccess && k < bytes; k += c->chunk_bytes) {
        const size_t n = (size_t)(bytes - k < c->chunk_bytes ? bytes - k : c->chunk_bytes);
        r = send ? ncclSend(p + k, n, ncclChar, peer, c->comms[i], c->streams[i])
                 : ncclRecv(p + k, n, ncclChar, peer, c->comms[i], c->streams[i]);
    }
    return r;
}

/* The sends and receives of a gather in one NCCL group: every part but the root's travels to the
 * root, whose part p lands at dst + (bytes[0] + ... + bytes[p-1]). */
static ncclResult_t nccl_gather_group(const qm_nccl *c, char *dst, const qm_hal_buf *const *srcs,
                                      const uint64_t *bytes, int root)
{
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return r;
    for (int i = 0; r == ncclSuccess && i < c->n_local; ++i) {
        const int me = nccl_rank_of(c, i);
        if (me != root) {
            r = nccl_pieces(c, i, qm_hal_buf_raw(srcs[i]), bytes[me], root, true);
            continue;
        }
        uint64_t off = 0;
        for (int p = 0; r == ncclSuccess && p < c->size; off += bytes[p], ++p)
            if (p != root)
                r = nccl_pieces(c, i, dst + off, bytes[p], p, false);
    }
    ncclResult_t r_end = ncclGroupEnd();
    return r != ncclSuccess ? r : r_end;
}

qm_code qm_nccl_gather_sync(qm_nccl *c, qm_hal_buf *dst, uint64_t dst_off,
                            const qm_hal_buf *const *srcs, const uint64_t *bytes, int root,
                            qm_status *st)
{
    if (!c || !srcs || !bytes)
        return qm_fail(st, QM_E_ARG,
                       "nccl gather: communicator, sources and sizes must not be NULL");
    if (root < 0 || root >= c->size)
        return qm_fail(st, QM_E_ARG, "nccl gather: root %d is outside the communicator (0..%d)",
                       root, c->size - 1);
    qm_code rc = QM_OK;
    uint64_t total = 0, root_off = 0; /* all parts; the parts before the root's */
    for (int p = 0; p < c->size; ++p) {
        if (bytes[p] > UINT64_MAX - total) {
            rc = qm_fail(st, QM_E_ARG, "nccl gather: the parts' sizes overflow 64 bits at part %d",
                         p);
            break;
        }
        root_off += p < root ? bytes[p] : 0;
        total += bytes[p];
    }
    for (int i = 0; rc == QM_OK && i < c->n_local; ++i)
        rc = nccl_check_buf(c, i, srcs[i], 0, bytes[nccl_rank_of(c, i)], "nccl gather", "source",
                            st);
    const int root_i = c->comm ? (root == c->rank ? 0 : -1) : root; /* local entry, or -1 */
    if (rc == QM_OK && root_i >= 0)
        rc = nccl_check_buf(c, root_i, dst, dst_off, total, "nccl gather", "destination", st);
    if ((rc = qm_comm_verdict(c->comm, rc, st)) != QM_OK || total == 0)
        return rc;

    char *d = root_i >= 0 ? (char *)qm_hal_buf_raw(dst) + dst_off : NULL;
    ncclResult_t r = nccl_gather_group(c, d, srcs, bytes, root);
    if (r != ncclSuccess)
        rc = nccl_fail(st, r, c, "ncclSend/ncclRecv of %llu bytes to rank %d",
                       (unsigned long long)total, root);
    if (rc == QM_OK && root_i >= 0 && bytes[root] > 0) { /* the root's own part: a local copy */
        cudaError_t e = cudaSetDevice(c->gpu[root_i]);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(d + root_off, qm_hal_buf_raw(srcs[root_i]), (size_t)bytes[root],
                                cudaMemcpyDeviceToDevice, c->streams[root_i]);
        if (e != cudaSuccess)
            rc = nccl_cuda_fail(st, e, "cudaMemcpyAsync (gather, own part)", c->info[root_i].id);
    }
    rc = nccl_sync(c, rc, st);
    return qm_comm_verdict(c->comm, rc, st);
}
