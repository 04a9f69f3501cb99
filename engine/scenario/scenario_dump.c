/* scenario_dump.c — write a qm_topology as `qmesh/1` YAML (`qmesh topo dump`).
 *
 * Role: the inverse of scenario_load.c, so that a mesh (declared or discovered) can be saved and
 * replayed anywhere: load(dump(t)) equals t in every node, link, fabric, rank and case field.
 * In: a topology (loaded, or built in C). Out: YAML text on a FILE.
 * How: fabrics are written as fabrics (their expanded links are not repeated), explicit links as
 * links; hosts list their NUMA nodes, devices, switches and NICs in node order, which is the order
 * the loader builds them in; every dimensioned value goes through units.c's exact formatters;
 * a device repeats memory or HBM bandwidth only where they differ from its type, and its reserve
 * only where it differs from defaults.reserve; the ranks section is written only when the source
 * had one (the default is rebuilt identically). Strings that are not plain-safe are double-quoted.
 * Must not: include libyaml (the text is simple enough to write by hand, and libyaml stays in the
 * loader), or write anything that the loader would not read back.
 */
#include "scenario_loader.h"

#include "status_internal.h"
#include "units.h"

#include <math.h>
#include <string.h>

static bool plain_safe(const char *s)
{
    static const char *const words[] = {"true", "false", "null", "yes", "no", "on", "off", "y",
                                        "n", "~"};
    if (!s[0] || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return false;
    for (const char *c = s; *c; ++c) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  strchr("_./+-", *c);
        if (!ok)
            return false;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; ++i) {
        const char *a = s, *b = words[i];
        while (*a && *b && (*a | 0x20) == *b) {
            ++a;
            ++b;
        }
        if (!*a && !*b)
            return false;
    }
    return true;
}

/* A scalar: plain when safe, else double-quoted with escapes. */
static void put_str(FILE *f, const char *s)
{
    if (plain_safe(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; ++c) {
        if (*c == '"' || *c == '\\') {
            fprintf(f, "\\%c", *c);
        } else if (*c < 0x20 || *c == 0x7f) {
            fprintf(f, "\\x%02X", *c);
        } else if (c[0] == 0xC2 && c[1] == 0x85) { /* NEL would be a line break inside quotes */
            fputs("\\N", f);
            c += 1;
        } else if (c[0] == 0xE2 && c[1] == 0x80 && (c[2] == 0xA8 || c[2] == 0xA9)) { /* LS, PS */
            fputs(c[2] == 0xA8 ? "\\L" : "\\P", f);
            c += 2;
        } else if (c[0] == 0xEF && c[1] == 0xBB && c[2] == 0xBF) { /* BOM */
            fputs("\\uFEFF", f);
            c += 2;
        } else {
            fputc(*c, f);
        }
    }
    fputc('"', f);
}

static void put_size(FILE *f, uint64_t v)
{
    char buf[64];
    fputs(qm_units_format_size(v, buf, sizeof buf), f);
}

static void put_bw(FILE *f, double v)
{
    char buf[64];
    fputs(qm_units_format_bandwidth(v, buf, sizeof buf), f);
}

static void put_time(FILE *f, double v)
{
    char buf[64];
    fputs(qm_units_format_time(v, buf, sizeof buf), f);
}

static void put_real(FILE *f, double v)
{
    char buf[64];
    fputs(qm_units_format_real(v, buf, sizeof buf), f);
}

/* The number k of a NUMA node "<host>.numa<k>". */
static bool numa_number(const qm_topology *t, int node, const char **out)
{
    const qm_node *n = &t->nodes[node];
    if (n->kind != QM_NODE_NUMA || n->host < 0 || n->host >= t->n_hosts)
        return false;
    size_t hl = strlen(t->hosts[n->host].id);
    if (strncmp(n->id, t->hosts[n->host].id, hl) != 0 || strncmp(n->id + hl, ".numa", 5) != 0)
        return false;
    *out = n->id + hl + 5;
    return **out != '\0';
}

static qm_code check(const qm_topology *t, qm_status *st)
{
    for (int i = 0; i < t->n_nodes; ++i) {
        const qm_node *n = &t->nodes[i];
        const char *k;
        bool hosted = n->kind != QM_NODE_FABRIC_SWITCH;
        if (hosted && (n->host < 0 || n->host >= t->n_hosts))
            return qm_fail(st, QM_E_ARG, "dump: node '%s' has host %d (%d hosts)", n->id, n->host,
                           t->n_hosts);
        if (n->numa >= t->n_nodes || (n->numa >= 0 && !numa_number(t, n->numa, &k)))
            return qm_fail(st, QM_E_ARG, "dump: node '%s' has numa %d, not a NUMA node", n->id,
                           n->numa);
        if (n->type >= t->n_device_types || n->attach >= t->n_nodes)
            return qm_fail(st, QM_E_ARG, "dump: node '%s' has a bad type or attach index", n->id);
        if (n->kind == QM_NODE_NUMA && !numa_number(t, i, &k))
            return qm_fail(st, QM_E_ARG, "dump: NUMA node id '%s' is not '<host>.numa<id>'", n->id);
    }
    for (int i = 0; i < t->n_links; ++i) {
        const qm_link *l = &t->links[i];
        if (l->a < 0 || l->a >= t->n_nodes || l->b < 0 || l->b >= t->n_nodes ||
            (int)l->cls < 0 || l->cls >= QM_LINK_CLASS_COUNT_)
            return qm_fail(st, QM_E_ARG, "dump: link %d has a bad endpoint or class", i);
    }
    for (int i = 0; i < t->n_fabrics; ++i) {
        const qm_fabric *fb = &t->fabrics[i];
        if (fb->switch_node < 0 || fb->switch_node >= t->n_nodes || (int)fb->cls < 0 ||
            fb->cls >= QM_LINK_CLASS_COUNT_)
            return qm_fail(st, QM_E_ARG, "dump: fabric '%s' has a bad switch or class", fb->id);
        for (int m = 0; m < fb->n_members; ++m)
            if (fb->members[m] < 0 || fb->members[m] >= t->n_nodes)
                return qm_fail(st, QM_E_ARG, "dump: fabric '%s' has a bad member", fb->id);
    }
    for (int i = 0; i < t->n_ranks; ++i) {
        const qm_rank_desc *r = &t->ranks[i];
        if (r->host < 0 || r->host >= t->n_hosts)
            return qm_fail(st, QM_E_ARG, "dump: rank %d has a bad host", r->rank);
        for (int d = 0; d < r->n_devices; ++d)
            if (r->devices[d] < 0 || r->devices[d] >= t->n_nodes)
                return qm_fail(st, QM_E_ARG, "dump: rank %d has a bad device", r->rank);
    }
    return QM_OK;
}

static void put_numa(FILE *f, const qm_topology *t, int numa)
{
    const char *k;
    if (numa >= 0 && numa_number(t, numa, &k))
        fprintf(f, ", numa: %s", k);
}

static void dump_host(FILE *f, const qm_topology *t, int h)
{
    const qm_host *ho = &t->hosts[h];
    fputs("  - id: ", f);
    put_str(f, ho->id);
    fputc('\n', f);
    if (ho->memory_bytes) {
        fputs("    memory: ", f);
        put_size(f, ho->memory_bytes);
        fputc('\n', f);
    }
    if (ho->storage_read_bw_bytes_per_s > 0 || ho->storage_write_bw_bytes_per_s > 0 ||
        ho->storage_cached_read_bw_bytes_per_s > 0 || ho->storage_remove_bw_bytes_per_s > 0) {
        if (ho->storage_note[0])
            fprintf(f, "    # storage: %s\n", ho->storage_note);
        fputs("    storage: {", f);
        const char *sep = "";
        const struct {
            const char *key;
            double bw;
        } fields[] = {{"read", ho->storage_read_bw_bytes_per_s},
                      {"write", ho->storage_write_bw_bytes_per_s},
                      {"cached_read", ho->storage_cached_read_bw_bytes_per_s},
                      {"remove", ho->storage_remove_bw_bytes_per_s}};
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; ++k) {
            if (!(fields[k].bw > 0))
                continue;
            fprintf(f, "%s%s: ", sep, fields[k].key);
            put_bw(f, fields[k].bw);
            sep = ", ";
        }
        fputs("}\n", f);
    }
    static const struct {
        qm_node_kind kind;
        const char *key;
    } sections[] = {{QM_NODE_NUMA, "numa"},
                    {QM_NODE_GPU, "devices"},
                    {QM_NODE_PCIE_SWITCH, "switches"},
                    {QM_NODE_NIC, "nics"}};
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; ++s) {
        bool any = false;
        for (int i = 0; i < t->n_nodes; ++i) {
            const qm_node *n = &t->nodes[i];
            qm_node_kind k = n->kind == QM_NODE_NVSWITCH ? QM_NODE_PCIE_SWITCH : n->kind;
            if (n->host != h || k != sections[s].kind)
                continue;
            if (!any)
                fprintf(f, "    %s:\n", sections[s].key);
            any = true;
            const char *num;
            switch (n->kind) {
            case QM_NODE_NUMA:
                numa_number(t, i, &num);
                fprintf(f, "      - {id: %s}\n", num);
                break;
            case QM_NODE_GPU: {
                const qm_device_type *dt = n->type >= 0 ? &t->device_types[n->type] : NULL;
                fputs("      - {id: ", f);
                put_str(f, n->id);
                if (dt) {
                    fputs(", type: ", f);
                    put_str(f, dt->name);
                }
                put_numa(f, t, n->numa);
                if (!dt || dt->memory_bytes != n->memory_bytes) {
                    fputs(", memory: ", f);
                    put_size(f, n->memory_bytes);
                }
                if (n->reserve_bytes != t->default_reserve_bytes) {
                    fputs(", reserve: ", f);
                    put_size(f, n->reserve_bytes);
                }
                if (!dt || dt->hbm_bw_bytes_per_s != n->hbm_bw_bytes_per_s) {
                    fputs(", hbm_bandwidth: ", f);
                    put_bw(f, n->hbm_bw_bytes_per_s);
                }
                fputs("}\n", f);
                break;
            }
            case QM_NODE_PCIE_SWITCH:
            case QM_NODE_NVSWITCH:
                fputs("      - {id: ", f);
                put_str(f, n->id);
                fputs(n->kind == QM_NODE_NVSWITCH ? ", kind: nvswitch" : ", kind: pcie_switch", f);
                put_numa(f, t, n->numa);
                fputs("}\n", f);
                break;
            case QM_NODE_NIC:
                fputs("      - {id: ", f);
                put_str(f, n->id);
                fputs(", speed: ", f);
                put_bw(f, n->nic_bw_bytes_per_s);
                put_numa(f, t, n->numa);
                if (n->attach >= 0) {
                    fputs(", attach: ", f);
                    put_str(f, t->nodes[n->attach].id);
                }
                fputs("}\n", f);
                break;
            case QM_NODE_FABRIC_SWITCH:
                break;
            }
        }
    }
}

static void dump_expect(FILE *f, const qm_topology *t, const qm_case_expect *x)
{
    (void)t;
    fprintf(f, "    expect:\n      feasible: %s\n", x->feasible ? "true" : "false");
    if (x->has_error)
        fprintf(f, "      error: %s\n", qm_code_name(x->error));
    if (x->has_shards)
        fprintf(f, "      shards: %d\n", x->shards);
    if (x->has_pages)
        fprintf(f, "      pages: %llu\n", (unsigned long long)x->pages);
    if (x->has_shard_bytes) {
        fputs("      shard_bytes: ", f);
        put_size(f, x->shard_bytes);
        fputc('\n', f);
    }
    if (x->n_devices >= 0) {
        fputs("      devices: [", f);
        for (int i = 0; i < x->n_devices; ++i) {
            fputs(i ? ", " : "", f);
            put_str(f, x->devices[i]);
        }
        fputs("]\n", f);
    }
    if (x->n_ranks >= 0) {
        fputs("      ranks: [", f);
        for (int i = 0; i < x->n_ranks; ++i)
            fprintf(f, "%s%d", i ? ", " : "", x->ranks[i]);
        fputs("]\n", f);
    }
    if (x->has_gather) {
        fprintf(f, "      gather: {feasible: %s", x->gather_feasible ? "true" : "false");
        if (x->gather_target[0]) {
            fputs(", target: ", f);
            put_str(f, x->gather_target);
        }
        fputs("}\n", f);
    }
    if (x->has_max_qubits)
        fprintf(f, "      max_qubits: {complex64: %u, complex128: %u}\n", x->max_qubits_c64,
                x->max_qubits_c128);
    if (x->has_min_headroom) {
        fputs("      min_headroom: ", f);
        put_size(f, x->min_headroom_bytes);
        fputc('\n', f);
    }
    bool any = false;
    for (int p = 0; p < QM_PHASE_COUNT_; ++p) {
        const qm_expect_estimate *e = &x->estimates[p];
        if (!e->set)
            continue;
        if (!any)
            fputs("      estimates:\n", f);
        any = true;
        fprintf(f, "        %s: {value: ", qm_phase_name((qm_phase)p));
        put_time(f, e->value_s);
        fputs(", rel_tol: ", f);
        put_real(f, e->rel_tol);
        fprintf(f, ", kind: %s}\n", e->kind == QM_ESTIMATE_REALITY ? "reality" : "model");
    }
}

static void dump_case(FILE *f, const qm_topology *t, const qm_case *c)
{
    const qm_request *r = &c->request;
    fputs("  - id: ", f);
    put_str(f, c->id);
    fprintf(f, "\n    request: {qubits: %u, dtype: %s, policy: %s, batch: %llu", r->qubits,
            r->dtype == QM_DTYPE_COMPLEX128 ? "complex128" : "complex64",
            qm_policy_name(r->policy) ? qm_policy_name(r->policy) : "auto",
            (unsigned long long)r->batch);
    if (r->features)
        fprintf(f, ", features: %llu", (unsigned long long)r->features);
    fprintf(f, ", encoding: %s, gather: ",
            qm_encoding_name(r->encoding) ? qm_encoding_name(r->encoding) : "amplitude");
    put_str(f, r->gather[0] ? r->gather : "auto");
    if (r->ranks)
        fprintf(f, ", ranks: %d", r->ranks);
    fputs("}\n", f);
    dump_expect(f, t, &c->expect);
}

qm_code qm_scenario_dump(const qm_topology *t, FILE *f, qm_status *st)
{
    if (!t || !f)
        return qm_fail(st, QM_E_ARG, "dump: topology and file must not be NULL");
    qm_code rc = check(t, st);
    if (rc != QM_OK)
        return rc;
    fputs("# qmesh/1 scenario written by qmesh (topo dump)\nschema: qmesh/1\nname: ", f);
    put_str(f, t->name[0] ? t->name : "unnamed");
    fputc('\n', f);
    if (t->description) {
        fputs("description: ", f);
        put_str(f, t->description);
        fputc('\n', f);
    }
    if (t->n_sources) {
        fputs("sources:\n", f);
        for (int i = 0; i < t->n_sources; ++i) {
            fputs("  - ", f);
            put_str(f, t->sources[i]);
            fputc('\n', f);
        }
    }
    fputs("defaults:\n  reserve: ", f);
    put_size(f, t->default_reserve_bytes);
    fputs("\n  efficiency: {", f);
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
        fprintf(f, "%s: ", qm_link_class_name((qm_link_class)c));
        put_real(f, t->efficiency[c]);
        fputs(", ", f);
    }
    fputs("hbm: ", f);
    put_real(f, t->hbm_efficiency);
    fputs("}\n  latency: {", f);
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c) {
        fprintf(f, "%s%s: ", c ? ", " : "", qm_link_class_name((qm_link_class)c));
        put_time(f, t->latency_s[c]);
    }
    fputs("}\n  host_link: ", f);
    put_bw(f, t->host_link_bw_bytes_per_s);
    fputs("\n  storage: {read: ", f);
    put_bw(f, t->storage_read_bw_bytes_per_s);
    fputs(", write: ", f);
    put_bw(f, t->storage_write_bw_bytes_per_s);
    fputs(", cached_read: ", f);
    put_bw(f, t->storage_cached_read_bw_bytes_per_s);
    fputs(", remove: ", f);
    put_bw(f, t->storage_remove_bw_bytes_per_s);
    fputs("}\n  host_copy: ", f);
    put_bw(f, t->host_copy_bw_bytes_per_s);
    fputs("\n  launch: ", f);
    put_time(f, t->launch_s);
    fputs("\n  page_lock: {buffer: ", f);
    put_time(f, t->page_lock_s);
    fputs(", rate: ", f);
    put_bw(f, t->page_lock_bw_bytes_per_s);
    fputs("}\n  staging_setup: ", f);
    put_time(f, t->staging_setup_s);
    fputs("\n  state_alloc: ", f);
    put_bw(f, t->state_alloc_bw_bytes_per_s);
    fputs("\n  staging_open: ", f);
    put_time(f, t->staging_open_s);
    fputs("\n  piece_roots: ", f);
    put_time(f, t->piece_roots_s);
    fputs("\n  host_batch: {pieces: ", f);
    put_time(f, t->host_piece_s);
    fputs(", coefficients: ", f);
    put_time(f, t->host_coeff_s);
    fputs("}\n", f);
    if (t->n_device_types) {
        fputs("device_types:\n", f);
        for (int i = 0; i < t->n_device_types; ++i) {
            const qm_device_type *dt = &t->device_types[i];
            fputs("  - {name: ", f);
            put_str(f, dt->name);
            fputs(", memory: ", f);
            put_size(f, dt->memory_bytes);
            fputs(", hbm_bandwidth: ", f);
            put_bw(f, dt->hbm_bw_bytes_per_s);
            if (dt->sm_count)
                fprintf(f, ", sm_count: %d", dt->sm_count);
            if (dt->arch[0]) {
                fputs(", arch: ", f);
                put_str(f, dt->arch);
            }
            fputs("}\n", f);
        }
    }
    fputs("hosts:\n", f);
    for (int h = 0; h < t->n_hosts; ++h)
        dump_host(f, t, h);
    if (t->n_fabrics) {
        fputs("fabrics:\n", f);
        for (int i = 0; i < t->n_fabrics; ++i) {
            const qm_fabric *fb = &t->fabrics[i];
            fputs("  - {id: ", f);
            put_str(f, fb->id);
            fprintf(f, ", kind: %s", qm_link_class_name(fb->cls));
            if (!fb->implicit_switch) {
                fputs(", switch: ", f);
                put_str(f, t->nodes[fb->switch_node].id);
            }
            fputs(", members: [", f);
            for (int m = 0; m < fb->n_members; ++m) {
                fputs(m ? ", " : "", f);
                put_str(f, t->nodes[fb->members[m]].id);
            }
            fputs("], port_bandwidth: ", f);
            put_bw(f, fb->port_bw_bytes_per_s);
            if (fb->latency_s >= 0) {
                fputs(", latency: ", f);
                put_time(f, fb->latency_s);
            }
            fputs("}\n", f);
        }
    }
    bool any = false;
    for (int i = 0; i < t->n_links; ++i) {
        const qm_link *l = &t->links[i];
        if (l->fabric >= 0)
            continue;
        if (!any)
            fputs("links:\n", f);
        any = true;
        fputs("  - {a: ", f);
        put_str(f, t->nodes[l->a].id);
        fputs(", b: ", f);
        put_str(f, t->nodes[l->b].id);
        fprintf(f, ", kind: %s, bandwidth: ", qm_link_class_name(l->cls));
        if (l->bw_ab_bytes_per_s == l->bw_ba_bytes_per_s) {
            put_bw(f, l->bw_ab_bytes_per_s);
        } else {
            fputs("{a_to_b: ", f);
            put_bw(f, l->bw_ab_bytes_per_s);
            fputs(", b_to_a: ", f);
            put_bw(f, l->bw_ba_bytes_per_s);
            fputc('}', f);
        }
        if (l->latency_s >= 0) {
            fputs(", latency: ", f);
            put_time(f, l->latency_s);
        }
        fputs("}\n", f);
    }
    if (t->ranks_given && t->n_ranks) {
        fputs("ranks:\n", f);
        for (int i = 0; i < t->n_ranks; ++i) {
            const qm_rank_desc *r = &t->ranks[i];
            fprintf(f, "  - {rank: %d, host: ", r->rank);
            put_str(f, t->hosts[r->host].id);
            fputs(", devices: [", f);
            for (int d = 0; d < r->n_devices; ++d) {
                fputs(d ? ", " : "", f);
                put_str(f, t->nodes[r->devices[d]].id);
            }
            fputs("]}\n", f);
        }
    }
    if (t->n_cases) {
        fputs("cases:\n", f);
        for (int i = 0; i < t->n_cases; ++i)
            dump_case(f, t, &t->cases[i]);
    }
    if (fflush(f) != 0 || ferror(f))
        return qm_fail(st, QM_E_IO, "dump: writing the scenario failed");
    return QM_OK;
}
