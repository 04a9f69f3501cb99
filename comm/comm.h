/* comm.h — the communicator between ranks, as the engine sees it (docs/comm.md).
 *
 * Role: one small interface over every way ranks talk to each other: rank and world size, an
 * all-gather of fixed-size records, a deterministic float64 sum, broadcast, point-to-point bytes (to
 * gather shards to rank 0), a barrier, and two helpers built on them that make distributed failures
 * safe: qm_comm_agree (every rank holds the same 64-bit value, e.g. a plan hash) and
 * qm_comm_allgather_status (every rank learns the lowest-numbered failing rank's status).
 * Implementations (comm_impl.h is what they fill in; the engine never includes it):
 *   - local:   one process, world size 1 (comm_local.c);
 *   - threads: n ranks as n threads of one process, for unit tests without mpirun (comm_local.c);
 *   - MPI:     one rank per process (comm_mpi.c; a clear E-UNSUPPORTED when built without MPI).
 * This header includes no mpi.h.
 *
 * Rules every caller follows (docs/comm.md):
 *   - Collectives (allgather, allreduce, broadcast, barrier, agree, allgather_status) are entered by
 *     every rank, in the same order, with the same sizes and root. A rank that found bad data still
 *     enters them (docs/comm.md, "Failure semantics"): it contributes its failure through
 *     allgather_status or a NaN, and every rank then fails with the same message.
 *   - Argument errors (a NULL buffer, a root or peer out of range, a bad tag) are reported at once,
 *     without entering the collective. They are programming errors: when they happen on some ranks
 *     only, the other ranks wait (the threads comm times out; mpirun must be killed).
 *   - Byte counts are 64-bit. Every message is cut into pieces of at most the chunk limit (default
 *     QM_COMM_CHUNK_MAX_BYTES = 2^28 bytes, so each MPI call moves at most 2^28 elements of
 *     MPI_BYTE); the chunk limit must be the same on every rank.
 *   - Results never depend on the reduction order of a backend: sums are formed in rank order.
 * Thread-safety: one comm object is used by one thread at a time (each rank of a threads comm by its
 * own thread).
 * Failure contracts: a failed collective leaves the output buffer unspecified; the MPI and threads
 * comms may be unusable after a backend failure (the threads comm then fails every later call).
 */
#ifndef QM_COMM_H
#define QM_COMM_H

#include "qmesh.h"

#include <stddef.h>
#include <stdint.h>

typedef struct qm_comm qm_comm;

typedef enum qm_comm_kind {
    QM_COMM_LOCAL = 1,   /* one process, world size 1 */
    QM_COMM_THREADS = 2, /* n ranks as threads of one process (tests) */
    QM_COMM_MPI = 3,     /* one rank per MPI process */
} qm_comm_kind;

/* The largest piece one backend call moves: 2^28 bytes (MPI counts are int). */
#define QM_COMM_CHUNK_MAX_BYTES ((uint64_t)1 << 28)
/* Tags of point-to-point messages: 0..QM_COMM_TAG_MAX (the least MPI_TAG_UB the standard allows). */
#define QM_COMM_TAG_MAX 32767

/* --- creation (one function per implementation) ---------------------------------------------- */
/* World size 1: every collective copies the caller's data to the output; send/recv have no peer. */
qm_code qm_comm_local_create(qm_comm **out, qm_status *st);
/* n (1..1024) ranks sharing one process: out[r] is rank r's comm (out must hold n pointers; all are
 * NULL on failure). Give each to its own thread; collectives block until every rank enters them.
 * A rank that waits longer than the group's timeout (default 30 s, qm_comm_threads_set_timeout)
 * fails with E-BACKEND naming the ranks that never arrived, and every later call on every rank of
 * the group fails. Send is synchronous (it returns once the matching recv has copied the bytes),
 * the strictest behaviour MPI allows, so a test passes here only if it cannot deadlock under MPI.
 * Destroy every out[r]; the shared state is freed with the last one. */
qm_code qm_comm_threads_create(int n, qm_comm **out, qm_status *st);
/* One rank per process over a duplicate of MPI_COMM_WORLD. Calls MPI_Init_thread (requesting
 * MPI_THREAD_FUNNELED) unless MPI is already initialised, in which case argc/argv may be NULL;
 * the last MPI comm destroyed calls MPI_Finalize only if this module initialised MPI. MPI cannot be
 * initialised twice in one process: creating an MPI comm after that MPI_Finalize is E-BACKEND.
 * Errors return codes (MPI_ERRORS_RETURN on the duplicate) and are translated to E-BACKEND with the
 * MPI call, this rank and MPI's error string. A build without MPI returns E-UNSUPPORTED naming
 * -DQM_WITH_MPI=ON. Create and destroy from the thread that drives MPI. */
qm_code qm_comm_mpi_create(int *argc, char ***argv, qm_comm **out, qm_status *st);

/* NULL is a no-op. Cannot fail. Not a collective, but destroying the last MPI comm may call
 * MPI_Finalize, which is one: a rank that fails alone (outside any collective) should exit nonzero
 * without destroying its MPI comm, and mpirun then ends the job (docs/comm.md). */
void qm_comm_destroy(qm_comm *c);

/* --- queries (cannot fail) -------------------------------------------------------------------- */
int qm_comm_rank(const qm_comm *c);           /* 0..size-1; -1 for NULL */
int qm_comm_size(const qm_comm *c);           /* >= 1; 0 for NULL */
qm_comm_kind qm_comm_kind_get(const qm_comm *c);
const char *qm_comm_kind_name(qm_comm_kind kind); /* "local", "threads", "mpi"; "?" otherwise */

/* Traffic through this comm object (this rank only), kept by the wrappers. */
typedef struct qm_comm_usage {
    uint64_t n_ops;         /* wrapper calls (collectives and point-to-point) */
    uint64_t n_pieces;      /* backend calls after chunking */
    uint64_t bytes_sent;    /* payload bytes this rank contributed or sent */
    uint64_t bytes_received;/* payload bytes this rank received (its own record included) */
} qm_comm_usage;
void qm_comm_usage_get(const qm_comm *c, qm_comm_usage *out); /* zeros for NULL */

/* --- test hooks ------------------------------------------------------------------------------- */
/* Lower the chunk limit (1..QM_COMM_CHUNK_MAX_BYTES bytes) so tests exercise the chunking loops
 * with small messages. Set the same value on every rank. E-ARG outside that range. */
qm_code qm_comm_set_chunk_limit(qm_comm *c, uint64_t bytes, qm_status *st);
uint64_t qm_comm_chunk_limit(const qm_comm *c); /* 0 for NULL */
/* Threads comm only: the wait limit shared by the whole group (> 0 and <= 3600 s). E-ARG for
 * another kind or a value out of range. */
qm_code qm_comm_threads_set_timeout(qm_comm *c, double seconds, qm_status *st);

/* --- collectives ------------------------------------------------------------------------------ */
/* Every rank contributes record_bytes from `mine`; `all` (size * record_bytes) receives the records
 * in rank order (rank r at all + r * record_bytes). record_bytes == 0 returns at once on every rank
 * (no backend call, no synchronisation). `mine` must not overlap `all`. */
qm_code qm_comm_allgather(qm_comm *c, const void *mine, size_t record_bytes, void *all,
                          qm_status *st);
/* values[i] becomes the sum over ranks of values[i], in place, identical on every rank. The sum is
 * formed in rank order ((v_0 + v_1) + v_2) + ... after an all-gather, never by the backend's
 * reduction, so it depends only on the values and the world size. (The engine's norms do not use
 * this: they all-gather partial sums and combine them in global index order; docs/comm.md,
 * "Determinism".)
 * Scratch of at most 1 MiB (or size * 8 bytes when larger) is allocated. */
qm_code qm_comm_allreduce_sum_f64(qm_comm *c, double *values, uint64_t count, qm_status *st);
/* root's `bytes` bytes of buf are copied into buf on every rank. */
qm_code qm_comm_broadcast(qm_comm *c, void *buf, uint64_t bytes, int root, qm_status *st);
/* Returns when every rank has entered it. */
qm_code qm_comm_barrier(qm_comm *c, qm_status *st);

/* Every rank holds `value` (e.g. a plan hash); `what` names it in the message ("plan hash"). When
 * they differ, every rank fails with the same E-RANK message naming rank 0's value and up to eight
 * ranks whose value differs from it:
 *   "comm: ranks disagree on the plan hash: rank 0 has 000000000000001a, rank 2 has ...
 *    (1 of 3 ranks differ from rank 0); every rank must be given the same inputs" */
qm_code qm_comm_agree(qm_comm *c, uint64_t value, const char *what, qm_status *st);

/* Every rank contributes its status `mine` (QM_OK or a failure; NULL counts as QM_OK); all ranks
 * learn the status of the lowest-numbered failing rank. first_failure (may be NULL) receives it
 * verbatim (cleared to QM_OK when no rank failed). Returns QM_OK when no rank failed; otherwise that
 * rank's code, with st set to its status, the message prefixed "rank R: " when size > 1 (unless
 * it already starts with "rank N: ", a verdict's own message), so every rank returns the same
 * code and message. A failure of the exchange itself is E-BACKEND (also
 * copied to first_failure). Costs one all-gather of 4 bytes per rank, plus one broadcast of a
 * fixed-size record when some rank failed. */
qm_code qm_comm_allgather_status(qm_comm *c, const qm_status *mine, qm_status *first_failure,
                                 qm_status *st);

/* --- point-to-point (for gathering shards to rank 0) ----------------------------------------- */
/* Blocking. Message order between one pair of ranks is preserved per tag (MPI's non-overtaking
 * rule); a message is matched by (source, tag) and must have exactly the receiver's byte count
 * (E-BACKEND naming both counts otherwise). dst/src must be another rank (not this one);
 * 0 <= tag <= QM_COMM_TAG_MAX. Do not rely on send buffering: under MPI a send may wait for its
 * receive (the threads comm always does). */
/* A phase's verdict on every rank: each rank passes its own result (rc, and st when rc failed);
 * all ranks return the lowest failing rank's code and message (see qm_comm_allgather_status), or
 * QM_OK. c NULL or a world of one: rc is returned unchanged. Collective. */
qm_code qm_comm_verdict(qm_comm *c, qm_code rc, qm_status *st);

qm_code qm_comm_send(qm_comm *c, int dst, const void *buf, uint64_t bytes, int tag, qm_status *st);
qm_code qm_comm_recv(qm_comm *c, int src, void *buf, uint64_t bytes, int tag, qm_status *st);

#endif
