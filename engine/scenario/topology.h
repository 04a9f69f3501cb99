/* topology.h — the topology stage: a typed graph over a loaded qm_topology, its paths, and the
 * device matrix / gather device / device order the planner needs.
 *
 * In: a qm_topology (scenario.h), from the loader or built in C. Out: paths between any two nodes
 * (class, per-direction bandwidth, latency, hops, the links crossed), device matrices over a set of
 * GPUs, the best-connected device, a device order by affinity, an E-DISCONNECTED check, and text /
 * JSON / Graphviz renderings. Must not: allocate device memory, know about ranks or plans, or report
 * anything as a position in some other ordering: devices go in and come out as GPU node indices
 * (indices into topology->nodes), which is what "device id" means at this level.
 *
 * The path rule (docs/topology.md "Topology graph and path rule"): a path's bandwidth is the minimum
 * over its links of bandwidth x efficiency[class] in the direction travelled; its class is the worst
 * link class on it (nvlink < c2c < pcie < sys < net); the chosen path has the best class, then the
 * highest bandwidth, then the fewest hops; equal paths are broken by the lowest predecessor node index,
 * so results are deterministic. A GPU is never an intermediate node (GPUs do not forward traffic).
 *
 * Cost: paths are computed per source node on demand (one label-setting search over the whole graph)
 * and the last source's tree is cached, so an 8192-GPU topology never needs all-pairs storage.
 * A qm_topo_graph is not thread-safe (queries update the cache).
 */
#ifndef QM_TOPOLOGY_H
#define QM_TOPOLOGY_H

#include "qmesh.h"
#include "scenario.h"

#include <stdbool.h>
#include <stdio.h>

struct json_t; /* jansson's json_t; include <jansson.h> to use the JSON result */

typedef struct qm_topo_graph qm_topo_graph;

/* Longest path a query can report; longer ones fail with E-UNSUPPORTED. */
#define QM_TOPO_PATH_MAX_HOPS 64

/* One path, src -> dst. Plain data, no ownership. */
typedef struct qm_topo_path {
    int src, dst;            /* node indices */
    bool found;              /* false: no path (cls, bw, latency, hops are then 0) */
    qm_link_class cls;       /* worst link class on the path; nvlink for src == dst */
    double bw_bytes_per_s;   /* min over links of bw x efficiency, direction src -> dst;
                              * INFINITY for src == dst */
    double latency_s;        /* sum of the links' latencies */
    int hops;                /* links on the path; 0 for src == dst */
    int links[QM_TOPO_PATH_MAX_HOPS];        /* graph link indices (qm_topo_graph_link), in order */
    bool a_to_b[QM_TOPO_PATH_MAX_HOPS];      /* whether links[k] is crossed from its a to its b */
    int nodes[QM_TOPO_PATH_MAX_HOPS + 1];    /* nodes[0] = src ... nodes[hops] = dst */
} qm_topo_path;

/* ---- the graph -------------------------------------------------------------------------------- */

/* Build the graph. Retained: `topo` must outlive the graph and not change while it exists.
 * Checks what the graph relies on: node kinds and indices in range, links between distinct existing
 * nodes with known classes, finite non-negative bandwidths (0 = that direction is unusable),
 * efficiencies (every class, and hbm) in (0, 1], finite latencies. E-ARG / E-RANGE otherwise.
 * A NIC with `attach` (or, without it, a `numa` node) and a speed gets an implicit pcie link to that
 * node at the NIC speed both ways, unless a link between the two already exists; implicit links are
 * numbered after the topology's links (qm_topo_graph_link_count). */
qm_code qm_topo_graph_create(const qm_topology *topo, qm_topo_graph **out, qm_status *st);
void qm_topo_graph_destroy(qm_topo_graph *g); /* NULL is a no-op */

/* Getters; cannot fail. Out-of-range indices give NULL / "" / 0. */
const qm_topology *qm_topo_graph_topology(const qm_topo_graph *g);
int qm_topo_graph_node_count(const qm_topo_graph *g);
const char *qm_topo_graph_node_id(const qm_topo_graph *g, int node);   /* "" when out of range */
int qm_topo_graph_link_count(const qm_topo_graph *g);                  /* topology + implicit */
const qm_link *qm_topo_graph_link(const qm_topo_graph *g, int link);   /* NULL when out of range */
/* Bandwidth x class efficiency of one direction of a link (bytes/s); 0 when out of range. */
double qm_topo_graph_link_bw(const qm_topo_graph *g, int link, bool a_to_b);
/* Latency of a link: its own, or the class default when the link has none (seconds). */
double qm_topo_graph_link_latency(const qm_topo_graph *g, int link);
const char *qm_topo_node_kind_name(qm_node_kind kind);  /* "gpu", "numa", ...; NULL when unknown */
const char *qm_topo_class_name(qm_link_class cls);      /* "nvlink", ...; NULL when unknown */

/* Node index of a scenario id. E-UNKNOWN-REF naming the id when there is none. */
qm_code qm_topo_graph_find(const qm_topo_graph *g, const char *id, int *out_node, qm_status *st);

/* The best path src -> dst by the rule above. No path is not an error: out->found is false.
 * E-ARG for a node out of range; E-UNSUPPORTED when the path has more than QM_TOPO_PATH_MAX_HOPS
 * links or the search exceeds its step bound (pathological graphs only). */
qm_code qm_topo_graph_path(qm_topo_graph *g, int src, int dst, qm_topo_path *out, qm_status *st);

/* Host <-> device path of a GPU: from its NUMA node to it (to_device) or back. A GPU without a NUMA
 * node uses the best of its host's NUMA nodes (by the path rule, then the lowest node index).
 * out->found is false when there is none. E-ARG when `gpu` is not a GPU node. */
qm_code qm_topo_graph_ingest_path(qm_topo_graph *g, int gpu, bool to_device, qm_topo_path *out,
                                  qm_status *st);

/* ---- device matrix over a set of GPUs ----------------------------------------------------------- */

/* One ordered pair of a device matrix. */
typedef struct qm_topo_pair {
    bool self;               /* the diagonal */
    bool peer;               /* a path exists (peer access); true on the diagonal */
    qm_link_class cls;       /* diagonal: nvlink (a device is its own best link) */
    double bw_bytes_per_s;   /* row -> column; diagonal: HBM bandwidth x hbm efficiency, or
                              * INFINITY when the device has no HBM figure; 0 without a path */
    double latency_s;
    int hops;
} qm_topo_pair;

/* What `nvidia-smi topo -m` shows, with bandwidths. Read-only after creation. */
typedef struct qm_topo_matrix {
    int n;                       /* devices */
    int *nodes;                  /* their GPU node indices, in the order given */
    char (*ids)[QM_ID_BYTES];    /* their scenario ids */
    qm_topo_pair *pairs;         /* n x n, row-major: pairs[i * n + j] is nodes[i] -> nodes[j] */
} qm_topo_matrix;

/* Paths between every ordered pair of `devices` (GPU node indices, each once). n_devices queries
 * of one source each. E-ARG for an empty set, a node that is not a GPU, or a repeated device. */
qm_code qm_topo_matrix_create(qm_topo_graph *g, const int *devices, int n_devices,
                              qm_topo_matrix **out, qm_status *st);
void qm_topo_matrix_destroy(qm_topo_matrix *m); /* NULL is a no-op */
/* The pair from node `from` to node `to` (node indices, not positions); NULL when either is not in
 * the matrix. Cannot fail. */
const qm_topo_pair *qm_topo_matrix_get(const qm_topo_matrix *m, int from, int to);

/* The best-connected device (the gather device). Each device is scored against every other device
 * of the set by the pair's worse direction (class = the worse of the two classes, bandwidth = the
 * lower of the two, no path if either direction has none); the best device has, in this order:
 * the fewest others it has no path with; the best worst class over the others it reaches; the
 * highest sum of bandwidths to them (summed largest first, so equal sets give equal sums); the
 * earliest position in the given order. *out_node is a node index. */
qm_code qm_topo_matrix_best_connected(const qm_topo_matrix *m, int *out_node, qm_status *st);

/* A device order by affinity, written as node indices to out_nodes[0 .. m->n - 1]. It starts at
 * the best-connected device, then repeatedly appends the unplaced device best connected to the last
 * placed one (pair compared by class, then bandwidth, then hops, as above; ties by given order).
 * When no unplaced device has a path to the last placed one, the one placed before it is tried,
 * and so on; when none has a path to any placed device, the first unplaced one in given order. */
qm_code qm_topo_matrix_affinity_order(const qm_topo_matrix *m, int *out_nodes, qm_status *st);

/* QM_OK when every device has a path to every other (both directions); else E-DISCONNECTED naming
 * the first pair (in given order) by id. */
qm_code qm_topo_matrix_check_connected(const qm_topo_matrix *m, qm_status *st);

/* The matrix as a text table (ids as headers; "X" on the diagonal, "-" for no path, otherwise
 * "<class> <GB/s>") followed by a legend line. E-IO when writing fails. */
qm_code qm_topo_matrix_print(const qm_topo_matrix *m, FILE *f, qm_status *st);

/* The matrix as a new JSON object (caller owns the reference):
 * {"devices": [{"id", "node"}...], "matrix": [[{"self", "peer", "class", "bw_bytes_per_s",
 *  "latency_s", "hops"}...]...]}, rows = from, columns = to; class/bw/latency/hops are null without
 * a path, bw is null on a diagonal without an HBM figure. E-NOMEM when jansson cannot allocate. */
qm_code qm_topo_matrix_json(const qm_topo_matrix *m, struct json_t **out, qm_status *st);

/* Whether every ordered pair of `devices` has one and the same best path, found without a search
 * (O(devices + their edges)): the first device's strictly best outgoing edge leads to a non-GPU
 * node H (an NVSwitch, a PCIe switch); every device has exactly one edge to H and one from H with
 * the same figures (class, bandwidth, latency) as the first device's, and each of its other edges,
 * in and out, is strictly worse by (class, bandwidth) than the pair i -> H -> j. Then that 2-hop
 * path is the only best path of every pair, so every score and comparison of the matrix ties.
 * *out_hub (may be NULL) is H; *out_pair (may be NULL) the pair (peer, class, bandwidth = the lower
 * of the two directions' edges, latency = their sum, 2 hops). False (outputs untouched) otherwise,
 * also for fewer than 2 devices, a non-GPU node or a repeated device: the matrix path then answers
 * (and reports errors). */
bool qm_topo_graph_uniform_hub(qm_topo_graph *g, const int *devices, int n_devices, int *out_hub,
                               qm_topo_pair *out_pair);

/* Conveniences over a device set: build the matrix, ask it, free it. best_connected,
 * affinity_order and check_connected answer without the matrix when qm_topo_graph_uniform_hub
 * holds (the first device; the given order; connected), with the results the matrix would give. */
qm_code qm_topo_graph_best_connected(qm_topo_graph *g, const int *devices, int n_devices,
                                     int *out_node, qm_status *st);
qm_code qm_topo_graph_affinity_order(qm_topo_graph *g, const int *devices, int n_devices,
                                     int *out_nodes, qm_status *st);
qm_code qm_topo_graph_check_connected(qm_topo_graph *g, const int *devices, int n_devices,
                                      qm_status *st);
/* Per device of the set, its best peer in the set: out[i] is the best pair devices[i] -> another
 * device (found first, then class, bandwidth, hops; out[i].peer false when it reaches none, also
 * for a set of one). Without the matrix when qm_topo_graph_uniform_hub holds; else one matrix. */
qm_code qm_topo_graph_best_peers(qm_topo_graph *g, const int *devices, int n_devices,
                                 qm_topo_pair *out, qm_status *st);
qm_code qm_topo_graph_matrix_json(qm_topo_graph *g, const int *devices, int n_devices,
                                  struct json_t **out, qm_status *st);

/* The whole topology as a Graphviz graph: one cluster per host, node shapes by kind (gpu box,
 * numa ellipse, pcie_switch diamond, nvswitch hexagon, nic parallelogram, fabric_switch octagon),
 * links labelled "<class> <bandwidth>" (declared figures, "a->b / b->a" when asymmetric; implicit
 * NIC links dashed). E-IO when writing fails. */
qm_code qm_topo_graph_dot(const qm_topo_graph *g, FILE *f, qm_status *st);

/* What a caller adds to that picture (`qmesh plan --dot`): a graph label, per node (indexed like
 * topology->nodes) a third label line and extra attributes, per graph link (indexed like
 * qm_topo_graph_link) extra attributes. Each array may be NULL; an entry NULL or "" adds nothing.
 * Attributes are DOT text written as given ("color=red, penwidth=3"). */
typedef struct qm_topo_dot_style {
    const char *graph_label;
    const char *const *node_note;
    const char *const *node_attrs;
    const char *const *link_attrs;
} qm_topo_dot_style;

/* qm_topo_graph_dot with a style (NULL: exactly qm_topo_graph_dot's picture). */
qm_code qm_topo_graph_dot_styled(const qm_topo_graph *g, const qm_topo_dot_style *style, FILE *f,
                                 qm_status *st);

#endif
