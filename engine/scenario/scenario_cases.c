/* scenario_cases.c — the cases of a scenario, and the whole-file connectivity check.
 *
 * Role: `cases:` (a request and what the planner must answer for it: feasibility, error code,
 * shards, pages, devices, ranks, gather, max qubits, headroom, phase estimates), and
 * E-DISCONNECTED: every device must reach the first one over links, fabrics and NICs.
 * In: the document tree and the topology built so far. Out: t->cases, errors in L.
 * Must not: abort, exit, print, or touch libyaml.
 */
#include "scenario_internal.h"

#include "units.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cases -------------------------------------------------------------------------------------- */

static void load_request(ld *L, ynode *n, qm_request *r)
{
    static const fld spec[] = {{"qubits", true},   {"dtype", false},    {"policy", false},
                               {"batch", false},   {"features", false}, {"encoding", false},
                               {"gather", false},  {"ranks", false}};
    static const char *const dtypes[] = {"complex64", "complex128"};
    static const char *const policies[QM_POLICY_COUNT_] = {"auto",     "single",   "equal",
                                                           "weighted", "balanced", "replicated"};
    static const char *const encodings[QM_ENCODING_COUNT_] = {"amplitude", "angle", "basis",
                                                             "phase", "iqp", "iqp-z"};
    ynode *v[8];
    size_t old = qm_scn_path_key(L, "request");
    qm_request_init(r);
    if (qm_scn_fields(L, n, spec, 8, v, "a request")) {
        uint64_t u;
        int e;
        if (v[0] && qm_scn_get_uint(L, v[0], "qubits", 0, UINT_MAX, &u))
            r->qubits = (unsigned)u;
        if (v[1] && qm_scn_get_enum(L, v[1], "dtype", dtypes, 2, "dtype", &e))
            r->dtype = e ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
        if (v[2] && qm_scn_get_enum(L, v[2], "policy", policies, QM_POLICY_COUNT_, "policy", &e))
            r->policy = (qm_policy)e;
        if (v[3] && qm_scn_get_uint(L, v[3], "batch", 1, UINT64_MAX, &u))
            r->batch = u;
        if (v[4] && qm_scn_get_uint(L, v[4], "features", 1, UINT64_MAX, &u))
            r->features = u;
        if (v[5] &&
            qm_scn_get_enum(L, v[5], "encoding", encodings, QM_ENCODING_COUNT_, "encoding", &e))
            r->encoding = (qm_encoding)e;
        if (v[6]) {
            const char *s = v[6]->type == Y_SCALAR ? v[6]->text
                                                           : NULL;
            if (s && (!strcmp(s, "auto") || !strcmp(s, "host") || !strcmp(s, "none")))
                snprintf(r->gather, sizeof r->gather, "%s", s);
            else {
                int g = qm_scn_resolve(L, v[6], "gather", WANT_GPU);
                if (g >= 0)
                    snprintf(r->gather, sizeof r->gather, "%s", L->t->nodes[g].id);
            }
        }
        if (v[7] && qm_scn_get_uint(L, v[7], "ranks", 1, INT_MAX, &u)) {
            r->ranks = (int)u;
            if (L->t->n_ranks > 0 && r->ranks > L->t->n_ranks) {
                size_t o2 = qm_scn_path_key(L, "ranks");
                err(L, v[7], QM_E_RANK, "the case uses %d ranks but the scenario has %d", r->ranks,
                    L->t->n_ranks);
                qm_scn_path_pop(L, o2);
            }
        }
    }
    qm_scn_path_pop(L, old);
}

static void load_estimates(ld *L, ynode *n, qm_case_expect *x)
{
    static const fld phases[QM_PHASE_COUNT_] = {{"ingest", false},
                                                {"local_norm", false},
                                                {"norm_allreduce", false},
                                                {"encode", false},
                                                {"gather", false}};
    static const fld spec[] = {{"value", true}, {"rel_tol", true}, {"kind", false}};
    static const char *const kinds[] = {"model", "reality"};
    ynode *pv[QM_PHASE_COUNT_];
    size_t old = qm_scn_path_key(L, "estimates");
    if (qm_scn_fields(L, n, phases, QM_PHASE_COUNT_, pv,
                      "estimates (phase -> {value, rel_tol, kind})")) {
        for (int p = 0; p < QM_PHASE_COUNT_; ++p) {
            ynode *v[3];
            if (!pv[p])
                continue;
            size_t o2 = qm_scn_path_key(L, qm_phase_name((qm_phase)p));
            qm_expect_estimate *e = &x->estimates[p];
            if (qm_scn_fields(L, pv[p], spec, 3, v, "an estimate")) {
                bool ok = v[0] && qm_scn_get_time(L, v[0], "value", &e->value_s);
                if (v[1] && qm_scn_get_real(L, v[1], "rel_tol", &e->rel_tol)) {
                    if (!(e->rel_tol > 0)) {
                        size_t o3 = qm_scn_path_key(L, "rel_tol");
                        err(L, v[1], QM_E_RANGE, "rel_tol %g must be positive", e->rel_tol);
                        qm_scn_path_pop(L, o3);
                        ok = false;
                    }
                } else {
                    ok = false;
                }
                int k = 0;
                if (v[2] && !qm_scn_get_enum(L, v[2], "kind", kinds, 2, "estimate kind", &k))
                    ok = false;
                e->kind = (qm_estimate_kind)k;
                e->set = ok;
            }
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

static void load_expect(ld *L, ynode *n, qm_case_expect *x)
{
    static const fld spec[] = {{"feasible", true},     {"error", false},   {"shards", false},
                               {"pages", false},       {"shard_bytes", false},
                               {"devices", false},     {"ranks", false},   {"gather", false},
                               {"max_qubits", false},  {"min_headroom", false},
                               {"estimates", false}};
    enum { F_FEASIBLE, F_ERROR, F_SHARDS, F_PAGES, F_SHARD_BYTES, F_DEVICES, F_RANKS, F_GATHER,
           F_MAXQ, F_HEADROOM, F_ESTIMATES };
    ynode *v[11];
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "expect");
    x->n_devices = -1;
    x->n_ranks = -1;
    if (!qm_scn_fields(L, n, spec, 11, v, "an expect")) {
        qm_scn_path_pop(L, old);
        return;
    }
    uint64_t u;
    if (v[F_FEASIBLE])
        qm_scn_get_bool(L, v[F_FEASIBLE], "feasible", &x->feasible);
    if (v[F_ERROR]) {
        static const char *names[QM_CODE_COUNT_];
        for (int c = 1; c < QM_CODE_COUNT_; ++c)
            names[c - 1] = qm_code_name((qm_code)c);
        int e;
        if (qm_scn_get_enum_list(L, v[F_ERROR], "error", names, QM_CODE_COUNT_ - 1, "error code",
                                 "planner codes: E-QUBITS, E-CAPACITY, E-NOT-POW2, E-SHARDS, "
                                 "E-NO-GATHER, E-POLICY, E-INPUT",
                                 &e)) {
            x->has_error = true;
            x->error = (qm_code)(e + 1);
        }
    }
    if (v[F_SHARDS] && qm_scn_get_uint(L, v[F_SHARDS], "shards", 1, INT_MAX, &u)) {
        x->has_shards = true;
        x->shards = (int)u;
    }
    if (v[F_PAGES] && qm_scn_get_uint(L, v[F_PAGES], "pages", 1, UINT64_MAX, &x->pages))
        x->has_pages = true;
    if (v[F_SHARD_BYTES] && qm_scn_get_size(L, v[F_SHARD_BYTES], "shard_bytes", 0, &x->shard_bytes))
        x->has_shard_bytes = true;
    if (v[F_DEVICES]) {
        size_t o2 = qm_scn_path_key(L, "devices");
        if (qm_scn_want_seq(L, v[F_DEVICES], "device ids")) {
            int count = seq_count(v[F_DEVICES]);
            x->devices = calloc((size_t)count + 1, sizeof *x->devices);
            if (!x->devices)
                qm_scn_nomem(L);
            x->n_devices = 0;
            for (int i = 0; i < count && x->devices && !L->stop; ++i) {
                size_t o3 = qm_scn_path_index(L, i);
                int g = qm_scn_resolve(L, seq_item(L, v[F_DEVICES], i), NULL, WANT_GPU);
                if (g >= 0)
                    memcpy(x->devices[x->n_devices++], t->nodes[g].id, QM_ID_BYTES);
                qm_scn_path_pop(L, o3);
            }
        }
        qm_scn_path_pop(L, o2);
    }
    if (v[F_RANKS]) {
        size_t o2 = qm_scn_path_key(L, "ranks");
        if (qm_scn_want_seq(L, v[F_RANKS], "rank numbers")) {
            int count = seq_count(v[F_RANKS]);
            x->ranks = calloc((size_t)count + 1, sizeof *x->ranks);
            if (!x->ranks)
                qm_scn_nomem(L);
            x->n_ranks = 0;
            for (int i = 0; i < count && x->ranks && !L->stop; ++i) {
                ynode *rv = seq_item(L, v[F_RANKS], i);
                size_t o3 = qm_scn_path_index(L, i);
                if (qm_scn_get_uint(L, rv, NULL, 0, INT_MAX, &u)) {
                    if (t->n_ranks > 0 && u >= (uint64_t)t->n_ranks)
                        err(L, rv, QM_E_RANK, "rank %llu does not exist (the scenario has %d)",
                            (unsigned long long)u, t->n_ranks);
                    else
                        x->ranks[x->n_ranks++] = (int)u;
                }
                qm_scn_path_pop(L, o3);
            }
        }
        qm_scn_path_pop(L, o2);
    }
    if (v[F_GATHER]) {
        static const fld gspec[] = {{"feasible", true}, {"target", false}};
        ynode *g[2];
        size_t o2 = qm_scn_path_key(L, "gather");
        if (qm_scn_fields(L, v[F_GATHER], gspec, 2, g, "an expected gather")) {
            bool ok = g[0] && qm_scn_get_bool(L, g[0], "feasible", &x->gather_feasible);
            if (g[1]) {
                const char *s = g[1]->type == Y_SCALAR
                                    ? g[1]->text
                                    : NULL;
                if (s && strcmp(s, "host") == 0) {
                    snprintf(x->gather_target, sizeof x->gather_target, "host");
                } else {
                    int d = qm_scn_resolve(L, g[1], "target", WANT_GPU);
                    if (d >= 0)
                        memcpy(x->gather_target, t->nodes[d].id, QM_ID_BYTES);
                    else
                        ok = false;
                }
            }
            x->has_gather = ok;
        }
        qm_scn_path_pop(L, o2);
    }
    if (v[F_MAXQ]) {
        static const fld mspec[] = {{"complex64", true}, {"complex128", true}};
        ynode *m[2];
        size_t o2 = qm_scn_path_key(L, "max_qubits");
        if (qm_scn_fields(L, v[F_MAXQ], mspec, 2, m, "max_qubits")) {
            uint64_t a = 0, b = 0;
            bool ok = m[0] && qm_scn_get_uint(L, m[0], "complex64", 0, 64, &a);
            ok = (m[1] && qm_scn_get_uint(L, m[1], "complex128", 0, 64, &b)) && ok;
            if (ok) {
                x->has_max_qubits = true;
                x->max_qubits_c64 = (unsigned)a;
                x->max_qubits_c128 = (unsigned)b;
            }
        }
        qm_scn_path_pop(L, o2);
    }
    if (v[F_HEADROOM] && qm_scn_get_size(L, v[F_HEADROOM], "min_headroom", QM_UNITS_ALLOW_ZERO,
                                         &x->min_headroom_bytes))
        x->has_min_headroom = true;
    if (v[F_ESTIMATES])
        load_estimates(L, v[F_ESTIMATES], x);
    qm_scn_path_pop(L, old);
}

void qm_scn_load_cases(ld *L, ynode *n)
{
    static const fld spec[] = {{"id", true}, {"request", true}, {"expect", true}};
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "cases");
    if (qm_scn_want_seq(L, n, "cases")) {
        int count = seq_count(n);
        t->cases = calloc((size_t)count + 1, sizeof *t->cases);
        if (!t->cases) {
            qm_scn_nomem(L);
            count = 0;
        }
        for (int i = 0; i < count && !L->stop; ++i) {
            ynode *it = seq_item(L, n, i), *v[3];
            size_t o2 = qm_scn_path_index(L, i);
            if (qm_scn_fields(L, it, spec, 3, v, "a case")) {
                int ci = t->n_cases++;
                qm_case *c = &t->cases[ci];
                c->loc = (qm_loc){LINE(it), COL(it)};
                qm_request_init(&c->request);
                c->expect.n_devices = c->expect.n_ranks = -1;
                if (v[0] && qm_scn_get_id(L, v[0], "id", c->id))
                    qm_scn_register_id(L, v[0], c->id, ID_CASE, ci);
                if (v[1])
                    load_request(L, v[1], &c->request);
                if (v[2])
                    load_expect(L, v[2], &c->expect);
            }
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

/* ---- whole-file checks -------------------------------------------------------------------------- */

static int uf_find(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static bool host_has_numa(const qm_topology *t, int host)
{
    for (int i = 0; i < t->n_nodes; ++i)
        if (t->nodes[i].kind == QM_NODE_NUMA && t->nodes[i].host == host)
            return true;
    return false;
}

qm_code qm_topology_joined(const qm_topology *t, bool *joined, qm_status *st)
{
    int *parent = malloc(((size_t)t->n_nodes + 1) * sizeof *parent);
    int *implicit = malloc(((size_t)t->n_nodes + 1) * sizeof *implicit);
    if (!parent || !implicit) {
        free(parent);
        free(implicit);
        return qm_fail(st, QM_E_NOMEM, "connectivity: out of host memory (%d nodes)", t->n_nodes);
    }
    for (int i = 0; i < t->n_nodes; ++i)
        parent[i] = i;
    for (int i = 0; i < t->n_links; ++i)
        parent[uf_find(parent, t->links[i].a)] = uf_find(parent, t->links[i].b);
    qm_topology_implicit_links(t, implicit); /* NICs' and devices' implicit links, as topology.c */
    for (int i = 0; i < t->n_nodes; ++i)
        if (implicit[i] >= 0)
            parent[uf_find(parent, i)] = uf_find(parent, implicit[i]);
    const int root = t->n_gpus ? uf_find(parent, t->gpus[0]) : -1;
    for (int g = 0; g < t->n_gpus; ++g)
        joined[g] = uf_find(parent, t->gpus[g]) == root;
    free(parent);
    free(implicit);
    return QM_OK;
}

/* E-DISCONNECTED: every GPU must reach the first one (qm_topology_joined); the hint says what to
 * add: NICs on a net fabric between hosts, numa: K (an implicit link) for a device without one. */
void qm_scn_check_connected(ld *L)
{
    qm_topology *t = L->t;
    if (t->n_gpus < 2)
        return;
    bool *joined = malloc((size_t)t->n_gpus * sizeof *joined);
    if (!joined || qm_topology_joined(t, joined, NULL) != QM_OK) {
        free(joined);
        qm_scn_nomem(L);
        return;
    }
    size_t old = qm_scn_path_key(L, "connectivity");
    for (int g = 1; g < t->n_gpus && !L->stop; ++g) {
        const qm_node *nd = &t->nodes[t->gpus[g]];
        if (joined[g])
            continue;
        const qm_node *first = &t->nodes[t->gpus[0]];
        /* a device with numa: K is joined to its NUMA node by the implicit link (when the
         * scenario has a host link), so only one without numa gets the numa hint */
        const char *hint =
            nd->host != first->host
                ? "; hosts meet through NICs on a net fabric: give each host a NIC with numa: K "
                  "(or attach:) and make the NICs members of a fabric of kind net"
            : nd->numa < 0 && !host_has_numa(t, nd->host)
                ? "; give its host a NUMA node (numa: [{id: 0}]) and the device numa: 0 (an "
                  "implicit pcie link to it), or add a link"
            : nd->numa < 0
                ? "; give the device numa: K (an implicit pcie link to that NUMA node) or add a link"
                : "; add a link";
        qm_scn_err_loc(L, nd->loc.line, nd->loc.col, QM_E_DISCONNECTED,
                       "device '%s' has no path to device '%s' (no chain of links, fabrics or "
                       "NIC attachments joins them)%s",
                       nd->id, first->id, hint);
    }
    qm_scn_path_pop(L, old);
    free(joined);
}
