/* backend.h — the backend factory: the one place that opens a HAL backend.
 *
 * In: a backend-neutral description of the devices to open (ids, names, memory, reserve, HBM and
 * host bandwidths, NUMA nodes, peer pairs), the memory mode of the simulator, for CUDA the number of
 * logical devices and the first GPU, and optionally a fault configuration (a shim over the opened
 * backend that fails the k-th counted call). Out: a qm_hal the caller owns (qm_hal_destroy).
 * Must not: be bypassed — the engine opens backends only through this file; it never includes the
 * simulator's, the CUDA backend's or the fault shim's headers.
 */
#ifndef QM_BACKEND_H
#define QM_BACKEND_H

#include "hal.h"

#include <stdbool.h>

/* One device for the simulator (CUDA devices describe themselves). Strings are copied. */
typedef struct qm_backend_device {
    const char *id;                /* at most QM_HAL_ID_BYTES-1 characters */
    const char *name;              /* NULL: "sim" */
    uint64_t memory_bytes;
    uint64_t reserve_bytes;        /* must be below memory_bytes */
    double hbm_bw_bytes_per_s;
    double host_bw_bytes_per_s;
    int numa;
} qm_backend_device;

/* A direct path between devices a and b (both directions): peer copies are allowed on it. */
typedef struct qm_backend_peer {
    int a, b;
} qm_backend_peer;

/* Which calls the fault shim counts (the same bits as the shim's own mask). */
enum {
    QM_BACKEND_FAULT_ALLOC = 1u << 0,
    QM_BACKEND_FAULT_COPY = 1u << 1,       /* h2d, d2h, d2d and peer copies */
    QM_BACKEND_FAULT_LAUNCH = 1u << 2,     /* kernels */
};

/* A fault shim over the backend: the fail_at-th counted call of the kinds in `points` fails with
 * `code`, once (fail_at 0: count only). */
typedef struct qm_backend_fault {
    unsigned points;
    uint64_t fail_at;
    qm_code code;
} qm_backend_fault;

typedef struct qm_backend_desc {
    qm_backend_kind kind;              /* AUTO and SIM: the simulator */
    /* simulator */
    int n_devices;
    const qm_backend_device *devices;  /* borrowed */
    int n_peers;
    const qm_backend_peer *peers;      /* borrowed */
    bool phantom;                      /* capacity accounting only: no memory, no data */
    bool poison;                       /* debug: 0xFF in new and freed memory (tests that must see
                                          untouched slots); false: as QM_SIM_POISON=0|1 says (off) */
    /* CUDA: logical device i is GPU (cuda_first_gpu + i) mod the GPU count */
    int cuda_devices;                  /* 0: one per visible GPU */
    int cuda_first_gpu;
    const qm_backend_fault *fault;     /* NULL: no shim */
} qm_backend_desc;

/* Open the described backend. Errors: E-ARG for a NULL description or out, an unknown kind, a bad
 * device list (the simulator's checks: duplicate ids, E-RESERVE, peers out of range);
 * E-UNSUPPORTED for CUDA without a GPU or in a build without CUDA; whatever the backend reports.
 * *out is NULL on failure. */
qm_code qm_backend_open(const qm_backend_desc *desc, qm_hal **out, qm_status *st);

/* Number of CUDA devices visible (0 without a driver, a GPU, or CUDA support). Cannot fail. */
int qm_backend_cuda_count(void);

/* A backend's one-time start-up run on a thread of its own, so that it overlaps the caller's work
 * (reading an input header, planning, checking outputs) instead of the first call paying for it:
 * for CUDA the runtime and, for gpu >= 0, that GPU's primary context (the CUDA context creation,
 * hundreds of milliseconds), after which the same thread loads the data path's kernels
 * (qm_hal_cuda_preload) while the caller opens the backend and page-locks its staging; nothing for
 * the simulator. Its failure is not reported here: the backend's open reports the real error.
 * Start: E-NOMEM (no thread could be made; *out NULL and nothing started, the caller just opens
 * the backend later). Join: waits until the start-up is done (not the kernels' loading); *start_s
 * is how long the start-up took on its thread, *wait_s how long the join blocked (the part not
 * hidden); NULL is a no-op that gives zeros; either pointer may be NULL. End: waits for the thread
 * to finish and frees it; always call it once, joined or not, also on every failure path (nothing
 * else frees it); NULL is a no-op. */
typedef struct qm_backend_warmup qm_backend_warmup;
qm_code qm_backend_warmup_start(qm_backend_kind kind, int gpu, qm_backend_warmup **out,
                                qm_status *st);
void qm_backend_warmup_join(qm_backend_warmup *warmup, double *start_s, double *wait_s);
void qm_backend_warmup_end(qm_backend_warmup *warmup);

/* While the start-up runs, the caller's thread can make ready the host memory of the page-locked
 * buffers it will ask the backend for (bytes[0..n)): for CUDA, memory on huge pages touched now
 * (qm_hal_cuda_host_prepare), so that making each buffer page-locked later only registers it;
 * nothing for the simulator. Release frees what no allocation took (call it after the buffers
 * are made, and on every path after a prepare). Neither can fail. */
void qm_backend_host_prepare(qm_backend_kind kind, const uint64_t *bytes, int n);
void qm_backend_host_release(void);

#endif
