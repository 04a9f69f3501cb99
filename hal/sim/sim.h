/* sim.h — the CPU-simulated mesh backend.
 *
 * Role: devices built from a description (the scenario loader fills one from YAML; tests build them
 * in C). Two memory modes:
 *  - materialized: each device's memory is real host memory, capacity enforced by the wrappers;
 *    new buffers are not written (large ones are mapped lazily, so their pages are first touched
 *    by the kernel threads that write them), unless poisoning is asked for: then buffers are
 *    filled with 0xFF bytes (NaN for every float type) on allocation and on free, so that a test
 *    sees any slot an encode forgot to write;
 *  - phantom: capacity accounting only. Nothing is allocated, so a 2^45-amplitude what-if runs on a
 *    laptop; copies and kernels answer E-UNSUPPORTED (phantom memory holds no data).
 * Stricter than hardware: every copy is bounds-checked (by the wrappers), a peer copy between devices
 * with no declared path is an error, and bytes are counted per declared link.
 */
#ifndef QM_SIM_H
#define QM_SIM_H

#include "hal.h"

typedef enum qm_sim_memory {
    QM_SIM_MATERIALIZED = 0,
    QM_SIM_PHANTOM = 1,
} qm_sim_memory;

typedef struct qm_sim_device_desc {
    const char *id;              /* copied; at most QM_HAL_ID_BYTES-1 characters */
    const char *name;            /* copied; NULL = "sim" */
    uint64_t memory_bytes;
    uint64_t reserve_bytes;      /* must be < memory_bytes */
    double hbm_bw_bytes_per_s;
    double host_bw_bytes_per_s;
    int numa;
} qm_sim_device_desc;

/* A direct path between two devices (both directions): peer copies are allowed on it and counted. */
typedef struct qm_sim_peer_desc {
    int a, b;
} qm_sim_peer_desc;

/* Poisoning is a debugging aid: it costs one write pass per allocation and free (a 2^26-amplitude
 * state encoded at 0.31 of memcpy with it), and it makes the allocating thread touch every page
 * first. The default is off unless the environment says QM_SIM_POISON=1, read once by
 * qm_hal_sim_create; tests that rely on poison to catch untouched slots ask for it (ON). */
typedef enum qm_sim_poison {
    QM_SIM_POISON_ENV = 0, /* default: on when QM_SIM_POISON=1 in the environment, else off */
    QM_SIM_POISON_ON = 1,  /* 0xFF on alloc and free */
    QM_SIM_POISON_OFF = 2,
} qm_sim_poison;

typedef struct qm_sim_desc {
    int n_devices;
    const qm_sim_device_desc *devices;
    int n_peers;
    const qm_sim_peer_desc *peers;
    qm_sim_memory memory;
    qm_sim_poison poison;
} qm_sim_desc;

/* Build a simulated mesh. Errors: E-ARG for a NULL or empty description, a duplicate device id,
 * a reserve not below memory (E-RESERVE), a peer naming a device out of range, an unknown poison
 * mode, QM_SIM_POISON set to anything but 0 or 1 (when desc->poison is QM_SIM_POISON_ENV).
 * Borrowed: desc. */
qm_code qm_hal_sim_create(const qm_sim_desc *desc, qm_hal **out, qm_status *st);

/* Bytes moved from device a to device b over their declared peer link (0 when none). Cannot fail. */
uint64_t qm_hal_sim_link_bytes(const qm_hal *hal, int a, int b);

#endif
