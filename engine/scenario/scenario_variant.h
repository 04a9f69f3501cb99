/* scenario_variant.h — a loaded topology varied in memory: more or fewer hosts, devices per host,
 * device memory, failed devices (what `qmesh whatif` plans).
 *
 * In: a qm_topology (scenario.h) and a qm_variant. Out: a new qm_topology the caller destroys;
 * the source is not changed. The variant has no cases (a what-if plans its own requests).
 * Rules, applied in this order (docs/cli.md "qmesh whatif"):
 *   hosts N             fewer: the first N hosts are kept, the others dropped with their nodes,
 *                       links, fabric memberships and ranks. More: the scenario's last host is
 *                       copied: every node of it (devices, NUMA nodes, switches, NICs), the links
 *                       among them, its links to nodes outside it (the outside end kept), its
 *                       ranks, fabrics whose switch is inside the host (copied as new fabrics) and
 *                       memberships of fabrics whose switch is outside (a shared network: the copy
 *                       joins it). Ids: the host id with its trailing number counted up ("n3" →
 *                       "n4", "n5", ...; "gpu-box" → "gpu-box-2"), node and fabric ids with the
 *                       host prefix replaced ("n3.g0" → "n4.g0") or the new host id prepended.
 *   devices_per_host K  every host keeps its first K devices (file order); a host with fewer gets
 *                       copies of its last device (same type, memory, NUMA node, the same links to
 *                       the same other nodes, the same fabrics, the same rank, and a link to that
 *                       device like its first device-to-device link when it has one), ids counted
 *                       up ("n0.g3" → "n0.g4"). A host without a device cannot grow: E-ARG.
 *   device_memory       every device's memory set to this size (the reserve stays).
 *   without             devices removed with their links, fabric memberships and rank places; a
 *                       rank left without devices is dropped and the ranks renumbered. An id that
 *                       is not a device of the variant: E-ARG with a "did you mean".
 * Must not: parse or print YAML, or change the source topology.
 */
#ifndef QM_SCENARIO_VARIANT_H
#define QM_SCENARIO_VARIANT_H

#include "scenario.h"

/* Limits of a variant (E-ARG beyond them). */
#define QM_VARIANT_MAX_HOSTS 4096
#define QM_VARIANT_MAX_DEVICES_PER_HOST 1024

typedef struct qm_variant {
    int hosts;                      /* 0: as in the scenario */
    int devices_per_host;           /* 0: as in the scenario */
    uint64_t device_memory_bytes;   /* 0: as in the scenario */
    int n_without;
    const char (*without)[QM_ID_BYTES]; /* device ids removed (n_without of them) */
} qm_variant;

/* Build the variant of `t`. E-ARG for a variation that cannot be made (a host count or device
 * count out of range, a host without a device to copy, an unknown or non-device id in `without`,
 * a copied id longer than 63 bytes, no device left); E-DISCONNECTED when a device of the variant
 * has no path to the first one (the loader's rule: a scenario without a network between its
 * hosts cannot grow by hosts); E-NOMEM. *out is NULL on failure. */
qm_code qm_topology_variant(const qm_topology *t, const qm_variant *v, qm_topology **out,
                            qm_status *st);

#endif
