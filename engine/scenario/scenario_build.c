/* scenario_build.c — building the topology from a scenario document.
 *
 * Role: the schema walk, in a fixed order (schema, name, sources, defaults, device types, hosts,
 * fabrics, links, ranks, cases), that fills the qm_topology, resolving ids through one hash table
 * (one namespace per file); then the whole-file checks once everything parsed cleanly (the
 * default ranks here; connectivity in scenario_cases.c).
 * In: the document tree (scenario_doc.c). Out: the topology in L->t, errors in L.
 * Must not: abort, exit, print, or touch libyaml.
 */
#include "scenario_internal.h"

#include "units.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building the topology ---------------------------------------------------------------------- */

static int add_node(ld *L, qm_node_kind kind, int host, const ynode *at)
{
    qm_topology *t = L->t;
    if (!qm_topology_grow((void **)&t->nodes, &L->cap_nodes, t->n_nodes + 1, sizeof *t->nodes)) {
        qm_scn_nomem(L);
        return -1;
    }
    qm_node *nd = &t->nodes[t->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->host = host;
    nd->numa = -1;
    nd->type = -1;
    nd->attach = -1;
    nd->loc = (qm_loc){LINE(at), COL(at)};
    return t->n_nodes++;
}

static int add_link(ld *L)
{
    qm_topology *t = L->t;
    if (!qm_topology_grow((void **)&t->links, &L->cap_links, t->n_links + 1, sizeof *t->links)) {
        qm_scn_nomem(L);
        return -1;
    }
    memset(&t->links[t->n_links], 0, sizeof t->links[0]);
    t->links[t->n_links].latency_s = -1;
    t->links[t->n_links].fabric = -1;
    return t->n_links++;
}

static void load_schema(ld *L, ynode *root, bool *go_on)
{
    *go_on = false;
    ynode *v = NULL;
    for (uint32_t p = 0; p < root->len; ++p) {
        ynode *k = pair_key(L, root, p);
        if (k->type == Y_SCALAR && strcmp(k->text, "schema") == 0)
            v = pair_value(L, root, p);
    }
    if (!v) {
        err(L, root, QM_E_MISSING_FIELD,
            "the required key 'schema' is missing; a scenario starts with 'schema: qmesh/1'");
        return;
    }
    size_t old = qm_scn_path_key(L, "schema");
    const char *s = qm_scn_scalar(L, v, "'qmesh/1'");
    if (s && strcmp(s, "qmesh/1") != 0)
        err(L, v, QM_E_SCHEMA_VERSION, "'%.40s' is not supported; this qmesh reads 'qmesh/1'", s);
    else if (s)
        *go_on = true;
    qm_scn_path_pop(L, old);
}

static void load_sources(ld *L, ynode *n)
{
    size_t old = qm_scn_path_key(L, "sources");
    if (qm_scn_want_seq(L, n, "strings")) {
        int count = seq_count(n);
        L->t->sources = calloc((size_t)count + 1, sizeof *L->t->sources);
        if (!L->t->sources)
            qm_scn_nomem(L);
        for (int i = 0; i < count && !L->stop; ++i) {
            size_t o2 = qm_scn_path_index(L, i);
            ynode *it = seq_item(L, n, i);
            const char *s = qm_scn_scalar(L, it, "a string");
            if (s && !*s)
                err(L, it, QM_E_TYPE, "must not be empty");
            else if (s && !(L->t->sources[L->t->n_sources++] = qm_scn_dup_str(s)))
                qm_scn_nomem(L);
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

/* `storage: {read: BW, write: BW, cached_read: BW, remove: BW}` (defaults or a host): each
 * optional, a bandwidth, not zero. */
static void load_storage(ld *L, ynode *n, const char *what, double *read_bw, double *write_bw,
                         double *cached_bw, double *remove_bw)
{
    static const fld spec[] = {{"read", false}, {"write", false}, {"cached_read", false},
                               {"remove", false}};
    ynode *v[4];
    size_t old = qm_scn_path_key(L, "storage");
    if (qm_scn_fields(L, n, spec, 4, v, what)) {
        if (v[0])
            qm_scn_get_bw(L, v[0], "read", read_bw);
        if (v[1])
            qm_scn_get_bw(L, v[1], "write", write_bw);
        if (v[2])
            qm_scn_get_bw(L, v[2], "cached_read", cached_bw);
        if (v[3])
            qm_scn_get_bw(L, v[3], "remove", remove_bw);
    }
    qm_scn_path_pop(L, old);
}

static void load_defaults(ld *L, ynode *n)
{
    static const fld spec[] = {{"reserve", false},   {"efficiency", false}, {"latency", false},
                               {"host_link", false}, {"storage", false},    {"host_copy", false},
                               {"launch", false},    {"page_lock", false},
                               {"staging_setup", false}, {"host_batch", false},
                               {"staging_open", false},  {"piece_roots", false},
                               {"state_alloc", false}};
    ynode *v[13];
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "defaults");
    if (qm_scn_fields(L, n, spec, 13, v, "defaults")) {
        if (v[0])
            qm_scn_get_size(L, v[0], "reserve", QM_UNITS_ALLOW_ZERO, &t->default_reserve_bytes);
        if (v[3])
            qm_scn_get_bw(L, v[3], "host_link", &t->host_link_bw_bytes_per_s);
        if (v[4])
            load_storage(L, v[4], "defaults.storage", &t->storage_read_bw_bytes_per_s,
                         &t->storage_write_bw_bytes_per_s, &t->storage_cached_read_bw_bytes_per_s,
                         &t->storage_remove_bw_bytes_per_s);
        if (v[5])
            qm_scn_get_bw(L, v[5], "host_copy", &t->host_copy_bw_bytes_per_s);
        if (v[6])
            qm_scn_get_time(L, v[6], "launch", &t->launch_s);
        if (v[8])
            qm_scn_get_time(L, v[8], "staging_setup", &t->staging_setup_s);
        if (v[10])
            qm_scn_get_time(L, v[10], "staging_open", &t->staging_open_s);
        if (v[12])
            qm_scn_get_bw(L, v[12], "state_alloc", &t->state_alloc_bw_bytes_per_s);
        if (v[11])
            qm_scn_get_time(L, v[11], "piece_roots", &t->piece_roots_s);
        if (v[9]) { /* host_batch: {pieces: TIME, coefficients: TIME}, each optional */
            static const fld hb[] = {{"pieces", false}, {"coefficients", false}};
            ynode *e[2];
            size_t o2 = qm_scn_path_key(L, "host_batch");
            if (qm_scn_fields(L, v[9], hb, 2, e, "defaults.host_batch")) {
                if (e[0])
                    qm_scn_get_time(L, e[0], "pieces", &t->host_piece_s);
                if (e[1])
                    qm_scn_get_time(L, e[1], "coefficients", &t->host_coeff_s);
            }
            qm_scn_path_pop(L, o2);
        }
        if (v[7]) { /* page_lock: {buffer: TIME, rate: BW}, each optional */
            static const fld pl[] = {{"buffer", false}, {"rate", false}};
            ynode *e[2];
            size_t o2 = qm_scn_path_key(L, "page_lock");
            if (qm_scn_fields(L, v[7], pl, 2, e, "defaults.page_lock")) {
                if (e[0])
                    qm_scn_get_time(L, e[0], "buffer", &t->page_lock_s);
                if (e[1])
                    qm_scn_get_bw(L, e[1], "rate", &t->page_lock_bw_bytes_per_s);
            }
            qm_scn_path_pop(L, o2);
        }
        if (v[1]) {
            static const fld eff[] = {{"nvlink", false}, {"c2c", false}, {"pcie", false},
                                      {"sys", false},    {"net", false}, {"hbm", false}};
            ynode *e[6];
            size_t o2 = qm_scn_path_key(L, "efficiency");
            if (qm_scn_fields(L, v[1], eff, 6, e, "defaults.efficiency")) {
                for (int i = 0; i < 6; ++i) {
                    double x;
                    if (!e[i] || !qm_scn_get_real(L, e[i], eff[i].key, &x))
                        continue;
                    if (!(x > 0 && x <= 1)) {
                        size_t o3 = qm_scn_path_key(L, eff[i].key);
                        err(L, e[i], QM_E_RANGE, "efficiency %g is outside (0, 1]", x);
                        qm_scn_path_pop(L, o3);
                    } else if (i < QM_LINK_CLASS_COUNT_) {
                        t->efficiency[i] = x;
                    } else {
                        t->hbm_efficiency = x;
                    }
                }
            }
            qm_scn_path_pop(L, o2);
        }
        if (v[2]) {
            static const fld lat[] = {{"nvlink", false}, {"c2c", false}, {"pcie", false},
                                      {"sys", false},    {"net", false}};
            ynode *e[5];
            size_t o2 = qm_scn_path_key(L, "latency");
            if (qm_scn_fields(L, v[2], lat, 5, e, "defaults.latency"))
                for (int i = 0; i < 5; ++i)
                    if (e[i])
                        qm_scn_get_time(L, e[i], lat[i].key, &t->latency_s[i]);
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

static void load_device_types(ld *L, ynode *n)
{
    static const fld spec[] = {{"name", true},     {"memory", true}, {"hbm_bandwidth", true},
                               {"sm_count", false}, {"arch", false}};
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "device_types");
    if (qm_scn_want_seq(L, n, "device types")) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            size_t o2 = qm_scn_path_index(L, i);
            ynode *it = seq_item(L, n, i), *v[5];
            if (qm_scn_fields(L, it, spec, 5, v, "a device type")) {
                if (!qm_topology_grow((void **)&t->device_types, &L->cap_types,
                                      t->n_device_types + 1, sizeof *t->device_types)) {
                    qm_scn_nomem(L);
                    break;
                }
                int ti = t->n_device_types++;
                qm_device_type *dt = &t->device_types[ti];
                memset(dt, 0, sizeof *dt);
                dt->loc = (qm_loc){LINE(it), COL(it)};
                if (v[0] && qm_scn_get_id(L, v[0], "name", dt->name)) {
                    entry *e = qm_scn_map_find(&L->types, dt->name);
                    if (e) {
                        size_t o3 = qm_scn_path_key(L, "name");
                        err(L, v[0], QM_E_DUP_ID,
                            "device type '%s' is already declared at line %d, column %d",
                            dt->name, e->line, e->col);
                        qm_scn_path_pop(L, o3);
                    } else if (!(e = qm_scn_map_insert(&L->types, dt->name))) {
                        qm_scn_nomem(L);
                    } else {
                        e->kind = ID_TYPE;
                        e->index = ti;
                        e->line = LINE(v[0]);
                        e->col = COL(v[0]);
                    }
                }
                if (v[1])
                    qm_scn_get_size(L, v[1], "memory", 0, &dt->memory_bytes);
                if (v[2])
                    qm_scn_get_bw(L, v[2], "hbm_bandwidth", &dt->hbm_bw_bytes_per_s);
                uint64_t sm = 0;
                if (v[3] && qm_scn_get_uint(L, v[3], "sm_count", 1, 1000000, &sm))
                    dt->sm_count = (int)sm;
                if (v[4])
                    qm_scn_get_str(L, v[4], "arch", dt->arch, sizeof dt->arch);
            }
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

typedef struct host_ctx {
    int host;
    int numa_first, numa_count; /* NUMA node indices of this host */
} host_ctx;

/* `numa: <id>` of a device, switch or NIC: the node index of "<host>.numa<id>"; E-NUMA when the
 * host does not declare it. */
static void get_numa(ld *L, ynode *n, const host_ctx *h, int *out)
{
    uint64_t k;
    if (!qm_scn_get_uint(L, n, "numa", 0, 1000000, &k))
        return;
    const qm_topology *t = L->t;
    char want[QM_ID_BYTES + 24];
    snprintf(want, sizeof want, "%s.numa%llu", t->hosts[h->host].id, (unsigned long long)k);
    for (int i = h->numa_first; i < h->numa_first + h->numa_count; ++i) {
        if (strcmp(t->nodes[i].id, want) == 0) {
            *out = i;
            return;
        }
    }
    char list[160] = "";
    size_t used = 0, prefix = strlen(t->hosts[h->host].id) + 5;
    for (int i = h->numa_first; i < h->numa_first + h->numa_count && used < sizeof list; ++i)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                 strlen(t->nodes[i].id) > prefix ? t->nodes[i].id + prefix : "?");
    size_t old = qm_scn_path_key(L, "numa");
    if (h->numa_count)
        err(L, n, QM_E_NUMA, "NUMA node %llu is not declared on host '%s' (declared: %s)",
            (unsigned long long)k, t->hosts[h->host].id, list);
    else
        err(L, n, QM_E_NUMA,
            "NUMA node %llu is not declared on host '%s' (it declares none; add numa: [{id: %llu}])",
            (unsigned long long)k, t->hosts[h->host].id, (unsigned long long)k);
    qm_scn_path_pop(L, old);
}

static void load_device(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true},      {"type", false},    {"numa", false},
                               {"memory", false}, {"reserve", false}, {"hbm_bandwidth", false}};
    enum { F_ID, F_TYPE, F_NUMA, F_MEMORY, F_RESERVE, F_HBM };
    ynode *v[6];
    qm_topology *t = L->t;
    if (!qm_scn_fields(L, it, spec, 6, v, "a device"))
        return;
    int ni = add_node(L, QM_NODE_GPU, h->host, it);
    if (ni < 0)
        return;
    if (!qm_topology_grow((void **)&t->gpus, &L->cap_gpus, t->n_gpus + 1, sizeof *t->gpus)) {
        qm_scn_nomem(L);
        return;
    }
    t->gpus[t->n_gpus++] = ni;
    qm_node *nd = &t->nodes[ni];
    if (v[F_ID] && qm_scn_get_id(L, v[F_ID], "id", nd->id))
        qm_scn_register_id(L, v[F_ID], nd->id, ID_NODE, ni);
    bool have_mem = false, have_bw = false, bad = false;
    if (v[F_TYPE]) {
        char name[QM_ID_BYTES];
        if (qm_scn_get_id(L, v[F_TYPE], "type", name)) {
            entry *e = qm_scn_map_find(&L->types, name);
            if (e) {
                nd->type = e->index;
                nd->memory_bytes = t->device_types[e->index].memory_bytes;
                nd->hbm_bw_bytes_per_s = t->device_types[e->index].hbm_bw_bytes_per_s;
                have_mem = have_bw = true;
            } else {
                const char *hint = NULL;
                int best = 3;
                for (int i = 0; i < t->n_device_types; ++i)
                    if (qm_hint_closer(name, t->device_types[i].name, &best, hint))
                        hint = t->device_types[i].name;
                size_t old = qm_scn_path_key(L, "type");
                if (hint)
                    err(L, v[F_TYPE], QM_E_UNKNOWN_REF,
                        "unknown device type '%s'; did you mean '%s'?", name, hint);
                else
                    err(L, v[F_TYPE], QM_E_UNKNOWN_REF,
                        "unknown device type '%s' (declare it under device_types)", name);
                qm_scn_path_pop(L, old);
            }
        }
        bad = !have_mem;
    }
    if (v[F_MEMORY]) {
        have_mem = qm_scn_get_size(L, v[F_MEMORY], "memory", 0, &nd->memory_bytes);
        bad = bad || !have_mem;
    }
    if (v[F_HBM]) {
        have_bw = qm_scn_get_bw(L, v[F_HBM], "hbm_bandwidth", &nd->hbm_bw_bytes_per_s);
        bad = bad || !have_bw;
    }
    if (!v[F_TYPE] && (!v[F_MEMORY] || !v[F_HBM]))
        err(L, it, QM_E_MISSING_FIELD,
            "a device needs 'type' or both 'memory' and 'hbm_bandwidth' (missing '%s')",
            !v[F_MEMORY] ? "memory" : "hbm_bandwidth");
    nd->reserve_bytes = t->default_reserve_bytes;
    bool have_reserve = true;
    if (v[F_RESERVE])
        have_reserve = qm_scn_get_size(L, v[F_RESERVE], "reserve", QM_UNITS_ALLOW_ZERO,
                                       &nd->reserve_bytes);
    if (have_mem && have_reserve && !bad && nd->reserve_bytes >= nd->memory_bytes) {
        char r[32], m[32];
        qm_format_bytes(nd->reserve_bytes, r, sizeof r);
        qm_format_bytes(nd->memory_bytes, m, sizeof m);
        size_t old = qm_scn_path_key(L, v[F_RESERVE] ? "reserve" : NULL);
        err(L, v[F_RESERVE] ? v[F_RESERVE] : it, QM_E_RESERVE,
            "reserve %s (%llu B%s) is not below the device memory %s (%llu B); nothing would be "
            "usable",
            r, (unsigned long long)nd->reserve_bytes, v[F_RESERVE] ? "" : ", from defaults.reserve",
            m, (unsigned long long)nd->memory_bytes);
        qm_scn_path_pop(L, old);
    }
    if (v[F_NUMA])
        get_numa(L, v[F_NUMA], h, &t->nodes[ni].numa);
}

static void load_switch(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true}, {"kind", true}, {"numa", false}};
    static const char *const kinds[] = {"pcie_switch", "nvswitch"};
    ynode *v[3];
    if (!qm_scn_fields(L, it, spec, 3, v, "a switch"))
        return;
    int kind = 0;
    if (v[1])
        qm_scn_get_enum(L, v[1], "kind", kinds, 2, "switch kind", &kind);
    int ni = add_node(L, kind == 0 ? QM_NODE_PCIE_SWITCH : QM_NODE_NVSWITCH, h->host, it);
    if (ni < 0)
        return;
    if (v[0] && qm_scn_get_id(L, v[0], "id", L->t->nodes[ni].id))
        qm_scn_register_id(L, v[0], L->t->nodes[ni].id, ID_NODE, ni);
    if (v[2])
        get_numa(L, v[2], h, &L->t->nodes[ni].numa);
}

static void load_nic(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true}, {"speed", true}, {"numa", false}, {"attach", false}};
    ynode *v[4];
    if (!qm_scn_fields(L, it, spec, 4, v, "a NIC"))
        return;
    int ni = add_node(L, QM_NODE_NIC, h->host, it);
    if (ni < 0)
        return;
    if (v[0] && qm_scn_get_id(L, v[0], "id", L->t->nodes[ni].id))
        qm_scn_register_id(L, v[0], L->t->nodes[ni].id, ID_NODE, ni);
    if (v[1])
        qm_scn_get_bw(L, v[1], "speed", &L->t->nodes[ni].nic_bw_bytes_per_s);
    if (v[2])
        get_numa(L, v[2], h, &L->t->nodes[ni].numa);
    if (v[3]) {
        /* resolved once every host is known: the switch may be declared later */
        if (!qm_topology_grow((void **)&L->attach, &L->cap_attach, L->n_attach + 1, sizeof *L->attach)) {
            qm_scn_nomem(L);
            return;
        }
        L->attach[L->n_attach++] =
            (attach_ref){ni, (int)(v[3] - L->doc.nodes), L->host_pos, L->item_pos};
    }
}

/* Run fn over every entry of the list under `key` of a host. */
static void host_list(ld *L, ynode *n, const char *key, const char *of, const host_ctx *h,
                      void (*fn)(ld *, ynode *, const host_ctx *))
{
    size_t old = qm_scn_path_key(L, key);
    if (qm_scn_want_seq(L, n, of)) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            size_t o2 = qm_scn_path_index(L, i);
            L->item_pos = i;
            fn(L, seq_item(L, n, i), h);
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

static void load_host(ld *L, ynode *it)
{
    static const fld spec[] = {{"id", true},        {"memory", false}, {"numa", false},
                               {"devices", false},  {"switches", false}, {"nics", false},
                               {"storage", false}};
    enum { F_ID, F_MEMORY, F_NUMA, F_DEVICES, F_SWITCHES, F_NICS, F_STORAGE };
    ynode *v[7];
    qm_topology *t = L->t;
    if (!qm_scn_fields(L, it, spec, 7, v, "a host"))
        return;
    if (!qm_topology_grow((void **)&t->hosts, &L->cap_hosts, t->n_hosts + 1, sizeof *t->hosts)) {
        qm_scn_nomem(L);
        return;
    }
    host_ctx h = {.host = t->n_hosts++, .numa_first = t->n_nodes};
    qm_host *ho = &t->hosts[h.host];
    memset(ho, 0, sizeof *ho);
    ho->loc = (qm_loc){LINE(it), COL(it)};
    if (v[F_ID] && qm_scn_get_id(L, v[F_ID], "id", ho->id))
        qm_scn_register_id(L, v[F_ID], ho->id, ID_HOST, h.host);
    if (v[F_MEMORY])
        qm_scn_get_size(L, v[F_MEMORY], "memory", 0, &t->hosts[h.host].memory_bytes);
    if (v[F_STORAGE])
        load_storage(L, v[F_STORAGE], "a host's storage", &t->hosts[h.host].storage_read_bw_bytes_per_s,
                     &t->hosts[h.host].storage_write_bw_bytes_per_s,
                     &t->hosts[h.host].storage_cached_read_bw_bytes_per_s,
                     &t->hosts[h.host].storage_remove_bw_bytes_per_s);
    if (v[F_NUMA]) {
        size_t old = qm_scn_path_key(L, "numa");
        if (qm_scn_want_seq(L, v[F_NUMA], "NUMA nodes like {id: 0}")) {
            for (int i = 0; i < seq_count(v[F_NUMA]) && !L->stop; ++i) {
                static const fld nspec[] = {{"id", true}};
                ynode *ne = seq_item(L, v[F_NUMA], i), *nv[1];
                size_t o2 = qm_scn_path_index(L, i);
                uint64_t k;
                if (qm_scn_fields(L, ne, nspec, 1, nv, "a NUMA node") && nv[0] &&
                    qm_scn_get_uint(L, nv[0], "id", 0, 1000000, &k)) {
                    int ni = add_node(L, QM_NODE_NUMA, h.host, ne);
                    if (ni >= 0) {
                        char id[QM_ID_BYTES + 32];
                        snprintf(id, sizeof id, "%s.numa%llu", t->hosts[h.host].id,
                                 (unsigned long long)k);
                        h.numa_count++;
                        if (strlen(id) >= QM_ID_BYTES) {
                            err(L, ne, QM_E_RANGE, "NUMA node id '%.40s...' is too long (%zu bytes; "
                                "at most %d)", id, strlen(id), QM_ID_BYTES - 1);
                        } else {
                            memcpy(t->nodes[ni].id, id, strlen(id) + 1);
                            if (t->hosts[h.host].id[0])
                                qm_scn_register_id(L, nv[0], t->nodes[ni].id, ID_NODE, ni);
                        }
                    }
                }
                qm_scn_path_pop(L, o2);
            }
        }
        qm_scn_path_pop(L, old);
    }
    if (v[F_DEVICES])
        host_list(L, v[F_DEVICES], "devices", "devices", &h, load_device);
    if (v[F_SWITCHES])
        host_list(L, v[F_SWITCHES], "switches", "switches", &h, load_switch);
    if (v[F_NICS])
        host_list(L, v[F_NICS], "nics", "NICs", &h, load_nic);
}

static void resolve_attach(ld *L)
{
    qm_topology *t = L->t;
    for (int i = 0; i < L->n_attach && !L->stop; ++i) {
        int nic = L->attach[i].node;
        ynode *v = node_at(L, L->attach[i].value);
        qm_scn_path_key(L, "hosts");
        qm_scn_path_index(L, L->attach[i].host_pos);
        qm_scn_path_key(L, "nics");
        qm_scn_path_index(L, L->attach[i].nic_pos);
        int target = qm_scn_resolve(L, v, "attach", WANT_NODE);
        if (target >= 0) {
            const qm_node *a = &t->nodes[target];
            if (target == nic)
                err(L, v, QM_E_SELF_LINK, "a NIC cannot attach to itself");
            else if (a->host != t->nodes[nic].host)
                err(L, v, QM_E_CROSS_HOST_LINK,
                    "'%s' is on %s%s%s, not on the NIC's host '%s'; a NIC attaches within its host",
                    a->id, a->host >= 0 ? "host '" : "no host (a fabric between hosts)",
                    a->host >= 0 ? t->hosts[a->host].id : "", a->host >= 0 ? "'" : "",
                    t->hosts[t->nodes[nic].host].id);
            else
                t->nodes[nic].attach = target;
        }
        qm_scn_path_pop(L, 0);
    }
}

static const char *host_name(const qm_topology *t, int host)
{
    return host >= 0 ? t->hosts[host].id : "(between hosts)";
}

/* Fabrics, first step: ids and implicit switch nodes, so that links and other fabrics may name
 * them whatever the order. */
static void declare_fabrics(ld *L, ynode *n)
{
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "fabrics");
    if (qm_scn_want_seq(L, n, "fabrics")) {
        int count = seq_count(n);
        t->fabrics = calloc((size_t)count + 1, sizeof *t->fabrics);
        L->fabric_yaml = calloc((size_t)count + 1, sizeof *L->fabric_yaml);
        L->fabric_pos = calloc((size_t)count + 1, sizeof *L->fabric_pos);
        if (!t->fabrics || !L->fabric_yaml || !L->fabric_pos) {
            qm_scn_nomem(L);
            count = 0;
        }
        for (int i = 0; i < count && !L->stop; ++i) {
            static const fld spec[] = {{"id", true},      {"kind", true},
                                       {"switch", false}, {"members", true},
                                       {"port_bandwidth", true}, {"latency", false}};
            ynode *it = seq_item(L, n, i), *v[6];
            size_t o2 = qm_scn_path_index(L, i);
            if (qm_scn_fields(L, it, spec, 6, v, "a fabric")) {
                int fi = t->n_fabrics++;
                qm_fabric *f = &t->fabrics[fi];
                L->fabric_yaml[fi] = (int)(it - L->doc.nodes);
                L->fabric_pos[fi] = i;
                f->loc = (qm_loc){LINE(it), COL(it)};
                f->switch_node = -1;
                f->latency_s = -1;
                if (v[0] && qm_scn_get_id(L, v[0], "id", f->id))
                    qm_scn_register_id(L, v[0], f->id, ID_FABRIC, fi);
                if (!v[2]) {
                    int sw = add_node(L, QM_NODE_FABRIC_SWITCH, -1, it);
                    if (sw >= 0) {
                        memcpy(t->nodes[sw].id, f->id, sizeof f->id);
                        f->switch_node = sw;
                        f->implicit_switch = true;
                    }
                }
            }
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

/* Fabrics, second step: kind, switch, members, bandwidth, latency; cross-host checks. */
static void load_fabric(ld *L, int fi)
{
    static const fld spec[] = {{"id", true},      {"kind", true},
                               {"switch", false}, {"members", true},
                               {"port_bandwidth", true}, {"latency", false}};
    qm_topology *t = L->t;
    ynode *it = node_at(L, L->fabric_yaml[fi]), *v[6];
    size_t old = qm_scn_path_key(L, "fabrics");
    qm_scn_path_index(L, L->fabric_pos[fi]);
    /* keys were checked by declare_fabrics: collect the values quietly */
    for (int i = 0; i < 6; ++i)
        v[i] = NULL;
    for (uint32_t p = 0; p < it->len; ++p) {
        ynode *k = pair_key(L, it, p);
        if (k->type != Y_SCALAR)
            continue;
        for (int i = 0; i < 6; ++i)
            if (!v[i] && strcmp(k->text, spec[i].key) == 0)
                v[i] = pair_value(L, it, p);
    }
    int cls = QM_LINK_NET;
    bool cls_ok = v[1] && qm_scn_get_enum(L, v[1], "kind", qm_scn_class_names,
                                          QM_LINK_CLASS_COUNT_, "link kind", &cls);
    qm_fabric *f = &t->fabrics[fi];
    f->cls = (qm_link_class)cls;
    if (v[2]) {
        int sw = qm_scn_resolve(L, v[2], "switch", WANT_SWITCH);
        f = &t->fabrics[fi];
        f->switch_node = sw;
    }
    if (v[4])
        qm_scn_get_bw(L, v[4], "port_bandwidth", &f->port_bw_bytes_per_s);
    if (v[5])
        qm_scn_get_time(L, v[5], "latency", &f->latency_s);
    int host = -2; /* the members' host; -2: none yet; -1: more than one */
    if (v[3]) {
        size_t o2 = qm_scn_path_key(L, "members");
        if (qm_scn_want_seq(L, v[3], "member ids")) {
            int count = seq_count(v[3]);
            f->members = calloc((size_t)count + 1, sizeof *f->members);
            if (!f->members)
                qm_scn_nomem(L);
            if (count == 0)
                err(L, v[3], QM_E_RANGE, "a fabric needs at least one member (got an empty list)");
            for (int i = 0; i < count && f->members && !L->stop; ++i) {
                ynode *mv = seq_item(L, v[3], i);
                size_t o3 = qm_scn_path_index(L, i);
                int m = qm_scn_resolve(L, mv, NULL, WANT_NODE);
                if (m >= 0) {
                    bool dup = false;
                    for (int j = 0; j < f->n_members && !dup && f->n_members <= 4096; ++j)
                        dup = f->members[j] == m;
                    if (m == f->switch_node)
                        err(L, mv, QM_E_SELF_LINK,
                            "'%s' is the fabric's own switch; a member cannot link to itself",
                            t->nodes[m].id);
                    else if (dup)
                        err(L, mv, QM_E_DUP_ID, "member '%s' is listed twice", t->nodes[m].id);
                    else
                        f->members[f->n_members++] = m;
                    int mh = t->nodes[m].host;
                    host = host == -2 ? mh : (host == mh ? host : -1);
                }
                qm_scn_path_pop(L, o3);
            }
        }
        qm_scn_path_pop(L, o2);
    }
    if (f->implicit_switch && f->switch_node >= 0 && host >= 0)
        t->nodes[f->switch_node].host = host;
    /* pcie, nvlink, c2c and sys stay inside one host; errors point at the fabric entry. A
     * declared switch that did not resolve was reported already: no host to compare with. */
    int sh = f->switch_node >= 0 ? t->nodes[f->switch_node].host : -1;
    bool check_hosts = cls_ok && f->cls != QM_LINK_NET && (f->implicit_switch || f->switch_node >= 0);
    for (int i = 0; check_hosts && i < f->n_members; ++i) {
        int mh = t->nodes[f->members[i]].host;
        if (f->implicit_switch ? host >= 0 : (mh == sh && mh >= 0))
            continue;
        int other = sh; /* declared switch: its host; implicit: the first member elsewhere */
        if (f->implicit_switch)
            for (int j = 0; j < f->n_members && (other = t->nodes[f->members[j]].host) == mh; ++j)
                ;
        err(L, it, QM_E_CROSS_HOST_LINK,
            "%s fabric '%s' joins '%s' on host '%s' to %s on host '%s'; pcie, nvlink, c2c and "
            "sys links stay within one host (use kind: net)",
            qm_scn_class_names[f->cls], f->id, t->nodes[f->members[i]].id, host_name(t, mh),
            f->implicit_switch ? "members" : "its switch", host_name(t, other));
        break;
    }
    qm_scn_path_pop(L, old);
}

static void load_links(ld *L, ynode *n)
{
    static const fld spec[] = {{"a", true},         {"b", true},        {"kind", true},
                               {"bandwidth", true}, {"latency", false}};
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "links");
    if (qm_scn_want_seq(L, n, "links")) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            ynode *it = seq_item(L, n, i), *v[5];
            size_t o2 = qm_scn_path_index(L, i);
            if (qm_scn_fields(L, it, spec, 5, v, "a link")) {
                int li = add_link(L);
                if (li < 0)
                    break;
                qm_link *lk = &t->links[li];
                lk->loc = (qm_loc){LINE(it), COL(it)};
                int a = v[0] ? qm_scn_resolve(L, v[0], "a", WANT_NODE) : -1;
                int b = v[1] ? qm_scn_resolve(L, v[1], "b", WANT_NODE) : -1;
                int cls = QM_LINK_NET;
                bool cls_ok = v[2] && qm_scn_get_enum(L, v[2], "kind", qm_scn_class_names,
                                                      QM_LINK_CLASS_COUNT_, "link kind", &cls);
                lk->a = a;
                lk->b = b;
                lk->cls = (qm_link_class)cls;
                if (v[3] && v[3]->type == Y_MAP) {
                    static const fld bspec[] = {{"a_to_b", true}, {"b_to_a", true}};
                    ynode *bv[2];
                    size_t o3 = qm_scn_path_key(L, "bandwidth");
                    if (qm_scn_fields(L, v[3], bspec, 2, bv, "a bandwidth per direction")) {
                        if (bv[0])
                            qm_scn_get_bw(L, bv[0], "a_to_b", &lk->bw_ab_bytes_per_s);
                        if (bv[1])
                            qm_scn_get_bw(L, bv[1], "b_to_a", &lk->bw_ba_bytes_per_s);
                    }
                    qm_scn_path_pop(L, o3);
                } else if (v[3] && qm_scn_get_bw(L, v[3], "bandwidth", &lk->bw_ab_bytes_per_s)) {
                    lk->bw_ba_bytes_per_s = lk->bw_ab_bytes_per_s;
                }
                if (v[4])
                    qm_scn_get_time(L, v[4], "latency", &lk->latency_s);
                if (a >= 0 && a == b) {
                    size_t o3 = qm_scn_path_key(L, "b");
                    err(L, v[1], QM_E_SELF_LINK, "a link from '%s' to itself", t->nodes[a].id);
                    qm_scn_path_pop(L, o3);
                } else if (a >= 0 && b >= 0 && cls_ok && cls != QM_LINK_NET &&
                           (t->nodes[a].host != t->nodes[b].host || t->nodes[a].host < 0)) {
                    err(L, it, QM_E_CROSS_HOST_LINK,
                        "%s link between '%s' on host '%s' and '%s' on host '%s'; pcie, nvlink, "
                        "c2c and sys links stay within one host (use kind: net)",
                        qm_scn_class_names[cls], t->nodes[a].id, host_name(t, t->nodes[a].host),
                        t->nodes[b].id, host_name(t, t->nodes[b].host));
                }
            }
            qm_scn_path_pop(L, o2);
        }
    }
    qm_scn_path_pop(L, old);
}

static void expand_fabrics(ld *L)
{
    qm_topology *t = L->t;
    for (int fi = 0; fi < t->n_fabrics && !L->stop; ++fi) {
        const qm_fabric *f = &t->fabrics[fi];
        if (f->switch_node < 0)
            continue;
        for (int i = 0; i < f->n_members; ++i) {
            int li = add_link(L);
            if (li < 0)
                return;
            f = &t->fabrics[fi];
            qm_link *lk = &t->links[li];
            lk->a = f->members[i];
            lk->b = f->switch_node;
            lk->cls = f->cls;
            lk->bw_ab_bytes_per_s = lk->bw_ba_bytes_per_s = f->port_bw_bytes_per_s;
            lk->latency_s = f->latency_s;
            lk->fabric = fi;
            lk->loc = f->loc;
        }
    }
}

static int cmp_rank(const void *a, const void *b)
{
    const qm_rank_desc *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static void load_ranks(ld *L, ynode *n)
{
    static const fld spec[] = {{"rank", true}, {"host", true}, {"devices", true}};
    qm_topology *t = L->t;
    size_t old = qm_scn_path_key(L, "ranks");
    t->ranks_given = true;
    if (!qm_scn_want_seq(L, n, "ranks")) {
        qm_scn_path_pop(L, old);
        return;
    }
    int count = seq_count(n);
    int *owner = malloc(((size_t)t->n_nodes + 1) * sizeof *owner); /* node -> list position */
    int *seen = malloc(((size_t)count + 1) * sizeof *seen);        /* rank -> list position */
    t->ranks = calloc((size_t)count + 1, sizeof *t->ranks);
    if (!owner || !seen || !t->ranks) {
        qm_scn_nomem(L);
        goto done;
    }
    for (int i = 0; i < t->n_nodes; ++i)
        owner[i] = -1;
    for (int i = 0; i < count; ++i)
        seen[i] = -1;
    if (count == 0)
        err(L, n, QM_E_RANK, "the ranks list is empty; omit it for one rank per host");
    for (int i = 0; i < count && !L->stop; ++i) {
        ynode *it = seq_item(L, n, i), *v[3];
        size_t o2 = qm_scn_path_index(L, i);
        if (qm_scn_fields(L, it, spec, 3, v, "a rank")) {
            qm_rank_desc *r = &t->ranks[t->n_ranks++];
            r->loc = (qm_loc){LINE(it), COL(it)};
            r->rank = -1;
            r->host = -1;
            uint64_t num;
            if (v[0] && qm_scn_get_uint(L, v[0], "rank", 0, INT_MAX, &num)) {
                size_t o3 = qm_scn_path_key(L, "rank");
                if (num >= (uint64_t)count)
                    err(L, v[0], QM_E_RANK,
                        "rank %llu is out of range: with %d ranks, they are numbered 0..%d",
                        (unsigned long long)num, count, count - 1);
                else if (seen[num] >= 0)
                    err(L, v[0], QM_E_RANK, "rank %llu is listed twice (first at line %d)",
                        (unsigned long long)num, t->ranks[seen[num]].loc.line);
                else
                    seen[num] = t->n_ranks - 1;
                qm_scn_path_pop(L, o3);
                r->rank = (int)num;
            }
            if (v[1])
                r->host = qm_scn_resolve(L, v[1], "host", WANT_HOST);
            if (v[2]) {
                size_t o3 = qm_scn_path_key(L, "devices");
                if (qm_scn_want_seq(L, v[2], "device ids")) {
                    int nd = seq_count(v[2]);
                    r->devices = calloc((size_t)nd + 1, sizeof *r->devices);
                    if (!r->devices)
                        qm_scn_nomem(L);
                    if (nd == 0)
                        err(L, v[2], QM_E_RANK, "rank %d has no devices", r->rank);
                    for (int j = 0; j < nd && r->devices && !L->stop; ++j) {
                        ynode *dv = seq_item(L, v[2], j);
                        size_t o4 = qm_scn_path_index(L, j);
                        int g = qm_scn_resolve(L, dv, NULL, WANT_GPU);
                        if (g >= 0) {
                            const qm_node *gn = &t->nodes[g];
                            if (owner[g] >= 0)
                                err(L, dv, QM_E_RANK,
                                    "device '%s' is already on rank %d (line %d); a device "
                                    "belongs to one rank only",
                                    gn->id, t->ranks[owner[g]].rank, t->ranks[owner[g]].loc.line);
                            else if (r->host >= 0 && gn->host != r->host)
                                err(L, dv, QM_E_RANK,
                                    "device '%s' is on host '%s', not on the rank's host '%s'",
                                    gn->id, host_name(t, gn->host), t->hosts[r->host].id);
                            else {
                                owner[g] = t->n_ranks - 1;
                                r->devices[r->n_devices++] = g;
                            }
                        }
                        qm_scn_path_pop(L, o4);
                    }
                }
                qm_scn_path_pop(L, o3);
            }
        }
        qm_scn_path_pop(L, o2);
    }
    if (!L->stop && L->n_err == 0) {
        for (int k = 0; k < count; ++k) {
            if (seen[k] < 0) {
                err(L, n, QM_E_RANK, "rank %d is missing: ranks are numbered 0..%d with none "
                    "missing", k, count - 1);
                break;
            }
        }
    }
    if (L->n_err == 0)
        qsort(t->ranks, (size_t)t->n_ranks, sizeof *t->ranks, cmp_rank);
done:
    free(owner);
    free(seen);
    qm_scn_path_pop(L, old);
}

static void default_ranks(ld *L)
{
    qm_topology *t = L->t;
    t->ranks = calloc((size_t)t->n_hosts + 1, sizeof *t->ranks);
    if (!t->ranks) {
        qm_scn_nomem(L);
        return;
    }
    for (int h = 0; h < t->n_hosts; ++h) {
        int n = 0;
        for (int g = 0; g < t->n_gpus; ++g)
            n += t->nodes[t->gpus[g]].host == h;
        if (n == 0)
            continue;
        qm_rank_desc *r = &t->ranks[t->n_ranks];
        r->rank = t->n_ranks;
        r->host = h;
        r->loc = t->hosts[h].loc;
        r->devices = malloc((size_t)n * sizeof *r->devices);
        if (!r->devices) {
            qm_scn_nomem(L);
            return;
        }
        t->n_ranks++;
        for (int g = 0; g < t->n_gpus; ++g)
            if (t->nodes[t->gpus[g]].host == h)
                r->devices[r->n_devices++] = t->gpus[g];
    }
}

void qm_scn_load_root(ld *L, ynode *root)
{
    static const fld spec[] = {{"schema", false},  {"name", true},         {"description", false},
                               {"sources", false}, {"defaults", false},    {"device_types", false},
                               {"hosts", true},    {"fabrics", false},     {"links", false},
                               {"ranks", false},   {"cases", false}};
    enum { F_SCHEMA, F_NAME, F_DESC, F_SOURCES, F_DEFAULTS, F_TYPES, F_HOSTS, F_FABRICS, F_LINKS,
           F_RANKS, F_CASES };
    ynode *v[11];
    qm_topology *t = L->t;
    if (root->type != Y_MAP) {
        err(L, root, QM_E_TYPE, "the top level must be a mapping starting with 'schema: qmesh/1', "
            "got %s", root->type == Y_SEQ ? "a list" : "a scalar");
        return;
    }
    bool go_on;
    load_schema(L, root, &go_on);
    if (!go_on)
        return;
    if (!qm_scn_fields(L, root, spec, 11, v, "the top level"))
        return;
    if (v[F_NAME]) {
        const char *s = qm_scn_scalar(L, v[F_NAME], "a name");
        size_t old = qm_scn_path_key(L, "name");
        if (s && (!*s || strlen(s) >= sizeof t->name))
            err(L, v[F_NAME], *s ? QM_E_RANGE : QM_E_TYPE, "%s", *s ? "is too long (at most 63 bytes)"
                                                                     : "must not be empty");
        else if (s)
            snprintf(t->name, sizeof t->name, "%s", s);
        qm_scn_path_pop(L, old);
    }
    if (v[F_DESC]) {
        size_t old = qm_scn_path_key(L, "description");
        const char *s = qm_scn_scalar(L, v[F_DESC], "a string");
        if (s && !(t->description = qm_scn_dup_str(s)))
            qm_scn_nomem(L);
        qm_scn_path_pop(L, old);
    }
    if (v[F_SOURCES])
        load_sources(L, v[F_SOURCES]);
    if (v[F_DEFAULTS])
        load_defaults(L, v[F_DEFAULTS]);
    if (v[F_TYPES])
        load_device_types(L, v[F_TYPES]);
    if (v[F_HOSTS]) {
        size_t old = qm_scn_path_key(L, "hosts");
        if (qm_scn_want_seq(L, v[F_HOSTS], "hosts")) {
            for (int i = 0; i < seq_count(v[F_HOSTS]) && !L->stop; ++i) {
                size_t o2 = qm_scn_path_index(L, i);
                L->host_pos = i;
                load_host(L, seq_item(L, v[F_HOSTS], i));
                qm_scn_path_pop(L, o2);
            }
        }
        qm_scn_path_pop(L, old);
    }
    if (v[F_FABRICS])
        declare_fabrics(L, v[F_FABRICS]);
    for (int f = 0; f < t->n_fabrics && !L->stop; ++f)
        load_fabric(L, f);
    /* after the fabrics: an implicit switch learns its host from the fabric's members, and a NIC
     * may attach to the switch of a fabric inside its host */
    resolve_attach(L);
    if (v[F_LINKS])
        load_links(L, v[F_LINKS]);
    expand_fabrics(L);
    if (v[F_RANKS])
        load_ranks(L, v[F_RANKS]);
    else if (L->n_err == 0)
        default_ranks(L);
    if (v[F_CASES])
        qm_scn_load_cases(L, v[F_CASES]);
    if (L->n_err == 0 && t->n_gpus == 0 && v[F_HOSTS]) {
        size_t old = qm_scn_path_key(L, "hosts");
        err(L, v[F_HOSTS], QM_E_MISSING_FIELD, "no host declares a device; add hosts[].devices");
        qm_scn_path_pop(L, old);
    }
    if (L->n_err == 0)
        qm_scn_check_connected(L);
}
