/* discover.h — describe the machine this process runs on as a qm_topology (`qmesh topo dump`).
 *
 * Role: the "discovered" side of the mesh stage (docs/architecture.md): a real host becomes the
 * same in-memory description a `qmesh/1` file loads into, so that qm_scenario_dump can write it
 * and any machine can replay it in the simulator (docs/discover.md).
 * How, in three steps:
 *   1. facts: a plain struct (qm_discover_facts) filled by the gatherers: the CUDA runtime and NVML
 *      (hal/cuda/cuda_discover.h: names, memory, HBM bandwidth, PCI bus ids, peer access, NVLink
 *      pairs), sysfs (qm_discover_facts_from_sysfs: NUMA node of each GPU, its PCIe link, the NUMA
 *      nodes of the host) and /proc (qm_discover_facts_from_host: host name, memory, the date);
 *      tests fill it by hand or point the readers at a fake tree.
 *   2. build: qm_discover_build, a pure function from facts to a topology (no I/O, no clock).
 *   3. dump: qm_scenario_dump (scenario_loader.h).
 * Must not: include CUDA or NVML headers (the CUDA part lives in hal/cuda), or guess silently:
 * every assumed figure (the socket link, the NVLink per-link rate) is named in `sources`.
 * Known warts: one host only; no PCIe switches (GPUs hang off their NUMA node directly, so peer
 * traffic over PCIe is modelled through the NUMA nodes); every pair of NUMA nodes gets a direct
 * `sys` link at one assumed figure.
 */
#ifndef QM_DISCOVER_H
#define QM_DISCOVER_H

#include "qmesh.h"
#include "scenario.h"

#include <stdbool.h>
#include <stdint.h>

#define QM_DISCOVER_MAX_GPUS 64
#define QM_DISCOVER_MAX_NUMA 64
#define QM_DISCOVER_BUS_ID_BYTES 24 /* "0000:17:00.0" and a NUL, with room for wider domains */
#define QM_DISCOVER_NOTE_BYTES 160

/* Assumed figures, written into every discovered scenario's sources: the socket link per
 * direction, NCCL's Emerald Rapids figure (src/graph/topo.h ERP_QPI_BW). */
#define QM_DISCOVER_SYS_BW_BYTES_PER_S 40e9
/* The host probe's batch (defaults.host_batch): states of so many qubits */
#define QM_DISCOVER_HOST_STATES 65536
#define QM_DISCOVER_HOST_QUBITS 10
/* The roots probe (defaults.piece_roots): the block sums of one state of so many qubits (the
 * state of the data path's checks), timed so many times */
#define QM_DISCOVER_ROOTS_QUBITS 28
#define QM_DISCOVER_ROOTS_REPS 9
/* The staging probe's big state (defaults.state_alloc): a 2^28 complex128 state's bytes, allocated
 * first when free memory holds 4 of them */
#define QM_DISCOVER_BIG_STATE_BYTES ((uint64_t)4 << 30)

/* What the facts say about NVLink. */
typedef enum qm_discover_nvlink_state {
    QM_DISCOVER_NVLINK_NOT_READ = 0, /* nobody looked (nvlink_note says why when set) */
    QM_DISCOVER_NVLINK_READ,         /* NVML answered: nvlinks and nvswitch_links are facts */
    QM_DISCOVER_NVLINK_NO_LIBRARY,   /* dlopen("libnvidia-ml.so.1") failed */
    QM_DISCOVER_NVLINK_FAILED,       /* the library loaded but a call failed (see nvlink_note) */
} qm_discover_nvlink_state;

/* Which gatherers contributed (bits of qm_discover_facts.sources); each becomes a `sources` line. */
#define QM_DISCOVER_SRC_CUDA 1u       /* CUDA runtime */
#define QM_DISCOVER_SRC_SYSFS_PCI 2u  /* /sys/bus/pci/devices/<bus id>/... */
#define QM_DISCOVER_SRC_SYSFS_NODE 4u /* /sys/devices/system/node/node<k> */
#define QM_DISCOVER_SRC_MEMINFO 8u    /* /proc/meminfo MemTotal */
#define QM_DISCOVER_SRC_NVML 16u      /* libnvidia-ml through dlopen */
#define QM_DISCOVER_SRC_PROBE 32u     /* the copy and launch probe (cuda_discover.c) */
/* The probe's sizes: QM_DISCOVER_PROBE_REPS copies of QM_DISCOVER_PROBE_BYTES each way (after one
 * untimed copy each way), QM_DISCOVER_LAUNCH_REPS launch round trips (after 10 untimed) */
#define QM_DISCOVER_PROBE_BYTES ((size_t)64 << 20)
#define QM_DISCOVER_PROBE_REPS 8
#define QM_DISCOVER_LAUNCH_REPS 200

typedef struct qm_discover_gpu {
    /* CUDA runtime */
    char name[96];                 /* cudaDeviceProp.name, e.g. "NVIDIA H200" */
    uint64_t memory_bytes;         /* totalGlobalMem */
    uint64_t free_bytes;           /* cudaMemGetInfo free when discovered; 0 = unknown. The
                                      difference to memory_bytes becomes the device's reserve */
    double hbm_bw_bytes_per_s;     /* 2 x memory clock x bus width / 8 (as hal/cuda/cuda.c) */
    int sm_count;                  /* multiProcessorCount */
    int cc_major, cc_minor;        /* compute capability */
    char bus_id[QM_DISCOVER_BUS_ID_BYTES]; /* "0000:17:00.0": lower case, as sysfs names it */
    /* sysfs (qm_discover_facts_from_sysfs) */
    int numa;                      /* numa_node; -1 = no affinity (placed on node 0) */
    double link_cur_gts;           /* current_link_speed in GT/s (32.0 for "32.0 GT/s PCIe") */
    int link_cur_width;            /* current_link_width in lanes */
    double link_max_gts;           /* what the link trains to under load: the smaller of the GPU's */
    int link_max_width;            /*   and its upstream port's max_link_*; 0 = unknown */
    /* NVML */
    int nvswitch_links;            /* active NVLinks that end at an NVSwitch */
    /* the copy probe (cuda_discover.c, QM_DISCOVER_SRC_PROBE): 0 = not measured */
    double h2d_bw_bytes_per_s;     /* pinned host -> device, cudaMemcpyAsync */
    double d2h_bw_bytes_per_s;     /* device -> pinned host */
    double launch_s;               /* one 4-byte cudaMemsetAsync + cudaStreamSynchronize */
    double hbm_copy_bw_bytes_per_s; /* device -> device copies, read + write bytes / time */
} qm_discover_gpu;

/* A host's storage rates for the data path (`storage: {read, write}`), and how they were found. */
typedef struct qm_discover_storage {
    double read_bw_bytes_per_s, write_bw_bytes_per_s; /* 0: not known (the defaults apply) */
    double cached_read_bw_bytes_per_s;                /* the page cache, by the reader's threads */
    double remove_bw_bytes_per_s;                     /* removing the file: its bytes / time */
    char note[448];                                   /* written as a comment by topo dump */
} qm_discover_storage;

typedef struct qm_discover_facts {
    char hostname[64];             /* "" = unknown ("localhost" is used) */
    char date[40];                 /* "2026-12-02 14:03 UTC"; "" = unknown */
    uint64_t host_memory_bytes;    /* 0 = unknown (the host gets no memory:) */
    int n_numa;                    /* NUMA node numbers found; 0 = none read (node 0 is used) */
    int numa_ids[QM_DISCOVER_MAX_NUMA]; /* ascending */
    int n_gpus;
    qm_discover_gpu gpus[QM_DISCOVER_MAX_GPUS];
    unsigned char peer[QM_DISCOVER_MAX_GPUS][QM_DISCOVER_MAX_GPUS];    /* [i][j]: i can access j */
    unsigned char nvlinks[QM_DISCOVER_MAX_GPUS][QM_DISCOVER_MAX_GPUS]; /* active links i <-> j */
    qm_discover_nvlink_state nvlink_state;
    char nvlink_note[QM_DISCOVER_NOTE_BYTES]; /* why NVLink was not read; "" when it was */
    unsigned sources;              /* QM_DISCOVER_SRC_* bits */
    qm_discover_storage storage;   /* the host's storage (zeroed: not measured) */
    /* the page-locking probe (cuda_discover.c; 0: not measured): making a page-locked buffer of
     * B bytes as the CUDA backend does costs page_lock_s + B / page_lock_bw_bytes_per_s */
    double page_lock_s, page_lock_bw_bytes_per_s;
    /* the staging-pipe probe (cuda_discover.c; 0: not measured), split where an encode's reads
     * split it: staging_setup_s the part outside the reads' span (a 1 GiB state and its block
     * sums allocated, the staging pipe closed), staging_alloc_s the state allocation's part of
     * it (0 when free memory could not hold the state), staging_open_s the part inside it (the
     * pipe opened and its two halves first filled, beyond the copies' bytes);
     * staging_alloc_first_s the first of the three allocations (for the record: an encode's
     * state is its process's first allocation of that size) */
    double staging_setup_s, staging_alloc_s, staging_open_s, staging_alloc_first_s;
    /* a state's first allocation beyond QM_STATE_ALLOC_FIRST_BYTES (0: not measured): the
     * rate of the bytes between a QM_DISCOVER_BIG_STATE_BYTES first allocation and the 1 GiB
     * one, and that big allocation's seconds (for the record) */
    double state_alloc_bw_bytes_per_s, big_state_alloc_s;
    /* local_norm's round trip on the first GPU (qm_materialize_roots_probe; 0: not measured): a
     * tree_combine of the piece_roots_blocks block sums of a 2^QM_DISCOVER_ROOTS_QUBITS state,
     * its root copied to plain memory, the stream synchronized */
    double piece_roots_s;
    uint64_t piece_roots_blocks;
    /* the host's work per state of an amplitude batch (qm_materialize_host_probe; 0: not
     * measured): local_norm's piece sums, norm_allreduce's merge and coefficients */
    double host_piece_s, host_coeff_s;
} qm_discover_facts;

/* The write and read rates of the file system holding `dir` (discover_storage.c): `bytes` (at
 * least 8 MiB) written to a temporary file with fdatasync, then read back with pread (the page
 * cache, after the pages are dropped: storage), then read again in passes (the page cache:
 * cached_read), the file removed; the note says so. QM_STORAGE_RATES="READ,WRITE[,CACHED_READ]"
 * replaces the measurement (the test hook). E-IO naming the file and step, E-ARG for a
 * malformed QM_STORAGE_RATES or a size below 8 MiB, the unit parser's code (E-UNIT, E-RANGE) for a
 * bad rate in it, E-NOMEM. */
qm_code qm_discover_storage_measure(const char *dir, uint64_t bytes, qm_discover_storage *out,
                                    qm_status *st);

/* The fraction (0 to 1) of the file's pages in the page cache (mincore over a read-only mapping;
 * a sample of 64 windows of 1 GiB above 64 GiB); 0 when the file cannot be opened or mapped (the
 * reader reports it). QM_INPUT_RESIDENT=FRACTION replaces the measurement (the test hook): E-ARG
 * when it is not a number from 0 to 1. */
qm_code qm_discover_file_resident(const char *path, double *fraction, qm_status *st);

/* Empty facts: no GPUs, every GPU's numa -1, NVLink not read. Cannot fail. */
void qm_discover_facts_init(qm_discover_facts *f);

/* Host name (gethostname), the current date (UTC) and the host memory from
 * "<proc_root>/meminfo" (MemTotal, in kB). E-IO naming the file when it cannot be read, E-INPUT
 * when it has no MemTotal line. */
qm_code qm_discover_facts_from_host(const char *proc_root, qm_discover_facts *f, qm_status *st);

/* The host memory available now: MemAvailable of "<proc_root>/meminfo" ("/proc", or a fake tree
 * in tests), in bytes. E-IO / E-INPUT as above. */
qm_code qm_discover_mem_available(const char *proc_root, uint64_t *out, qm_status *st);

/* This machine's available memory for the host-memory check (docs/planner.md "Host memory"): the
 * environment's QM_MEMAVAILABLE (a size, "8 GiB": the test hook that makes the check
 * deterministic) when set and not empty, else /proc's MemAvailable. E-ARG for a bad
 * QM_MEMAVAILABLE; E-IO / E-INPUT when /proc/meminfo cannot be read. The caller reads it once per
 * run. */
qm_code qm_host_mem_available_query(uint64_t *out, qm_status *st);

/* The PCI and NUMA facts under sysfs_root ("/sys", or a fake tree in tests):
 *   for every GPU of f (bus ids already set): bus/pci/devices/<bus id>/numa_node,
 *   current_link_speed ("32.0 GT/s PCIe"), current_link_width ("16"), and, when present,
 *   max_link_speed / max_link_width of the GPU and of its upstream port (the parent directory of
 *   the device's real path);
 *   the NUMA nodes: the node<k> entries of devices/system/node (none: node 0 only).
 * E-IO naming the path for a missing or unreadable required file, E-INPUT naming the path and the
 * text for one that does not parse, E-RANGE for more than QM_DISCOVER_MAX_NUMA nodes. */
qm_code qm_discover_facts_from_sysfs(const char *sysfs_root, qm_discover_facts *f, qm_status *st);

/* The topology of the facts: one host "n0" (memory, NUMA nodes "n0.numa<k>"), GPUs "n0.g<i>" of
 * device types named after the GPU model, a pcie link from each GPU to its NUMA node, an nvlink
 * link between GPUs with peer access and active NVLinks (links x qm_discover_nvlink_bw_per_link),
 * an nvlink link from each GPU with NVSwitch links to one logical switch "n0.nvs", sys links
 * between every two NUMA nodes (QM_DISCOVER_SYS_BW_BYTES_PER_S), one rank owning every GPU,
 * class defaults as the loader's, name "discovered-<hostname>", a one-line description with the
 * date and the NVLink note, and sources naming what was read and what was assumed.
 * Pure: no I/O. E-ARG for NULL arguments, no GPU, more than QM_DISCOVER_MAX_GPUS, a GPU without
 * memory, HBM bandwidth, a PCIe link, or with free > memory (naming the GPU); E-NOMEM. *out is
 * NULL on failure; free the result with qm_topology_destroy. */
qm_code qm_discover_build(const qm_discover_facts *f, qm_topology **out, qm_status *st);

/* Per-direction PCIe bandwidth of a link: GT/s x lanes x 128/130 / 8 bytes/s for 8 GT/s and up
 * (gen3+), x 8/10 below (gen1/2). 32 GT/s x 16 = 63.015 GB/s. 0 for non-positive input. */
double qm_discover_pcie_bw(double gts, int width);

/* NVLink per-link, per-direction bandwidth of a GPU generation (compute capability): 20 GB/s
 * (6.x, NVLink1), 14.0625 GB/s (8.6/8.7/8.9, the GA10x bridge), 50 GB/s (10.x and up, NVLink5),
 * else 25 GB/s (NVLink2-4). */
double qm_discover_nvlink_bw_per_link(int cc_major, int cc_minor);

/* Parse a PCI bus id "DOMAIN:BUS:DEVICE.FUNCTION" (hex, any case; CUDA writes "0000:1B:00.0",
 * NVML "00000000:1B:00.0") and write sysfs's form "0000:1b:00.0" into out. E-INPUT naming the text
 * when it does not parse. */
qm_code qm_discover_bus_id_normalize(const char *text, char out[QM_DISCOVER_BUS_ID_BYTES],
                                     qm_status *st);

#endif
