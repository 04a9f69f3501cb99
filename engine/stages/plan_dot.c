/* plan_dot.c — a plan as a Graphviz picture (`qmesh plan --dot`).
 *
 * In: a plan and its mesh (with the topology graph). Out: DOT text on a FILE, drawn by the
 * topology's own writer (qm_topo_graph_dot_styled: hosts as clusters, every node and link of the
 * scenario) with the plan added: each mesh device labelled with its shard (index, bytes) or "no
 * shard" and filled when it holds one; the gather target outlined; the links on the gather paths
 * (every holder to the target, as the cost model charges them: qm_gather_path) bold, all other
 * links light; a graph label with the request, the policy used, feasibility and the gather.
 * Must not: change the plan, or write DOT syntax of its own beyond attributes and labels.
 */
#include "plan_output.h"
#include "status_internal.h"
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GATHER_LINK "color=\"#d62728\", penwidth=3"
#define OTHER_LINK "color=\"#bbbbbb\""
#define HOLDER_NODE "style=filled, fillcolor=\"#fff2cc\""
#define TARGET_NODE "style=filled, fillcolor=\"#fff2cc\", color=\"#d62728\", penwidth=3"

qm_code qm_plan_dot(const qm_plan *p, const qm_mesh *mesh, FILE *f, qm_status *st)
{
    qm_topo_graph *g = mesh->graph;
    const int n_nodes = qm_topo_graph_node_count(g), n_links = qm_topo_graph_link_count(g);
    char (*notes)[64] = calloc((size_t)n_nodes + 1, sizeof *notes);
    const char **note = calloc((size_t)n_nodes + 1, sizeof *note);
    const char **nattr = calloc((size_t)n_nodes + 1, sizeof *nattr);
    const char **lattr = calloc((size_t)n_links + 1, sizeof *lattr);
    qm_code rc = QM_OK;
    if (!notes || !note || !nattr || !lattr) {
        rc = qm_fail(st, QM_E_NOMEM, "plan dot: out of host memory (%d nodes, %d links)", n_nodes,
                     n_links);
        goto done;
    }
    for (int d = 0; d < mesh->n_devices; ++d) {
        const int node = mesh->devices[d].node;
        snprintf(notes[node], sizeof notes[node], "no shard");
        note[node] = notes[node];
    }
    for (int i = 0; i < p->n_shards; ++i) {
        const int d = p->shards[i].device, node = mesh->devices[d].node;
        char b[32]; /* a device holds at most one shard (plan.h) */
        snprintf(notes[node], sizeof notes[node], "shard %d: %s", i,
                 qm_format_bytes(p->shards[i].bytes, b, sizeof b));
        nattr[node] = HOLDER_NODE;
    }
    const bool gather = p->gather.requested && p->n_shards > 0;
    for (int l = 0; l < n_links; ++l)
        lattr[l] = OTHER_LINK;
    if (gather && p->gather.device >= 0)
        nattr[mesh->devices[p->gather.device].node] = TARGET_NODE;
    for (int d = 0; gather && d < mesh->n_devices && p->policy != QM_POLICY_REPLICATED; ++d) {
        if (d == p->gather.device || p->devices[d].shard_bytes == 0)
            continue;
        qm_topo_path path;
        if ((rc = qm_gather_path(mesh, p, d, &path, st)) != QM_OK)
            goto done;
        for (int k = 0; path.found && k < path.hops; ++k)
            lattr[path.links[k]] = GATHER_LINK;
    }
    char label[512];
    snprintf(label, sizeof label, "plan: %u qubits %s, policy %s, %d shard%s, %s; gather %s%s%s",
             p->request.qubits, qm_dtype_name(p->request.dtype), qm_policy_name(p->policy),
             p->n_shards, p->n_shards == 1 ? "" : "s", p->feasible ? "feasible" : "infeasible",
             gather ? "to " : "", gather ? p->gather.target : "none",
             gather ? (p->gather.feasible ? " (fits)" : " (does not fit)") : "");
    const qm_topo_dot_style style = {.graph_label = label, .node_note = note, .node_attrs = nattr,
                                     .link_attrs = lattr};
    rc = qm_topo_graph_dot_styled(g, &style, f, st);
done:
    free(notes);
    free(note);
    free(nattr);
    free(lattr);
    return rc;
}
