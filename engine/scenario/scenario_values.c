/* scenario_values.c — typed values and ids of a scenario document.
 *
 * Role: reads one node as a string, an id, an integer, a real, a boolean, a size, a bandwidth, a
 * time (units.h) or one of a list of names, and keeps the one id namespace of a file (hosts, NUMA
 * nodes, devices, switches, NICs, fabrics, cases): registering ids and resolving references, with
 * a "did you mean" for both enums and ids.
 * In: document nodes, the key for the message path. Out: the value, or false / -1 with an error
 * in the loader context.
 * Must not: abort, exit, print, or change the topology (it only reads it to name ids).
 */
#include "scenario_internal.h"

#include "units.h"

#include <stdio.h>
#include <string.h>

/* ---- typed values ------------------------------------------------------------------------------- */

bool qm_scn_get_str(ld *L, ynode *n, const char *key, char *dst, size_t cap)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, "a string");
    if (s) {
        size_t len = strlen(s);
        if (len == 0)
            err(L, n, QM_E_TYPE, "must not be empty");
        else if (len >= cap)
            err(L, n, QM_E_RANGE, "'%.40s...' is too long (%zu bytes; at most %zu)", s, len,
                cap - 1);
        else {
            memcpy(dst, s, len + 1);
            ok = true;
        }
    }
    qm_scn_path_pop(L, old);
    return ok;
}

static bool id_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_.:/@+-", c) != NULL;
}

/* An id: 1..63 bytes of letters, digits and _ . : / @ + - */
bool qm_scn_get_id(ld *L, ynode *n, const char *key, char dst[QM_ID_BYTES])
{
    char tmp[QM_ID_BYTES];
    if (!qm_scn_get_str(L, n, key, tmp, sizeof tmp))
        return false;
    for (const char *c = tmp; *c; ++c) {
        if (!id_char_ok(*c)) {
            size_t old = qm_scn_path_key(L, key);
            err(L, n, QM_E_TYPE,
                "'%s' is not a valid id: '%c' is not allowed (use letters, digits and _ . : / @ "
                "+ -)",
                tmp, *c);
            qm_scn_path_pop(L, old);
            return false;
        }
    }
    memcpy(dst, tmp, sizeof tmp);
    return true;
}

bool qm_scn_get_uint(ld *L, ynode *n, const char *key, uint64_t min, uint64_t max,
                     uint64_t *out)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, "an integer");
    if (s) {
        qm_status st;
        qm_status_clear(&st);
        if (qm_units_parse_uint(s, min, max, out, &st) == QM_OK)
            ok = true;
        else
            err(L, n, st.code, "%s", st.msg);
    }
    qm_scn_path_pop(L, old);
    return ok;
}

bool qm_scn_get_real(ld *L, ynode *n, const char *key, double *out)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, "a number");
    if (s) {
        qm_status st;
        qm_status_clear(&st);
        if (qm_units_parse_real(s, out, &st) == QM_OK)
            ok = true;
        else
            err(L, n, st.code, "%s", st.msg);
    }
    qm_scn_path_pop(L, old);
    return ok;
}

bool qm_scn_get_bool(ld *L, ynode *n, const char *key, bool *out)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, "true or false");
    if (s) {
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            *out = s[0] == 't';
            ok = true;
        } else {
            err(L, n, QM_E_TYPE, "'%.40s' is not a boolean; use true or false", s);
        }
    }
    qm_scn_path_pop(L, old);
    return ok;
}

static bool get_dim(ld *L, ynode *n, const char *key, qm_unit_dim dim, unsigned flags,
                    uint64_t *size, double *real)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, dim == QM_UNIT_SIZE        ? "a size such as '80 GiB'"
                                 : dim == QM_UNIT_BANDWIDTH ? "a bandwidth such as '450 GB/s'"
                                                            : "a time such as '1 us'");
    if (s) {
        qm_status st;
        qm_status_clear(&st);
        qm_code rc = dim == QM_UNIT_SIZE        ? qm_units_parse_size_ex(s, flags, size, &st)
                     : dim == QM_UNIT_BANDWIDTH ? qm_units_parse_bandwidth_ex(s, flags, real, &st)
                                                : qm_units_parse_time_ex(s, flags, real, &st);
        if (rc == QM_OK)
            ok = true;
        else
            err(L, n, st.code, "%s", st.msg);
    }
    qm_scn_path_pop(L, old);
    return ok;
}

bool qm_scn_get_size(ld *L, ynode *n, const char *key, unsigned flags, uint64_t *out)
{
    return get_dim(L, n, key, QM_UNIT_SIZE, flags, out, NULL);
}

bool qm_scn_get_bw(ld *L, ynode *n, const char *key, double *out)
{
    return get_dim(L, n, key, QM_UNIT_BANDWIDTH, 0, NULL, out);
}

bool qm_scn_get_time(ld *L, ynode *n, const char *key, double *out)
{
    return get_dim(L, n, key, QM_UNIT_TIME, QM_UNITS_ALLOW_ZERO, NULL, out);
}

/* One of names[0..count); E-ENUM with a "did you mean" and the list otherwise. */
bool qm_scn_get_enum_list(ld *L, ynode *n, const char *key, const char *const *names,
                          int count, const char *what, const char *shown, int *out)
{
    size_t old = qm_scn_path_key(L, key);
    bool ok = false;
    const char *s = qm_scn_scalar(L, n, what);
    if (s) {
        for (int i = 0; i < count && !ok; ++i) {
            if (strcmp(s, names[i]) == 0) {
                *out = i;
                ok = true;
            }
        }
        if (!ok) {
            char list[256] = "";
            size_t used = 0;
            int best = 3;
            const char *hint = NULL;
            for (int i = 0; i < count; ++i) {
                if (used < sizeof list)
                    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                             i ? ", " : "", names[i]);
                if (qm_hint_closer(s, names[i], &best, hint))
                    hint = names[i];
            }
            if (shown)
                snprintf(list, sizeof list, "%s", shown);
            if (hint)
                err(L, n, QM_E_ENUM, "'%.40s' is not a valid %s; did you mean '%s'? (%s%s)", s,
                    what, hint, shown ? "" : "one of ", list);
            else
                err(L, n, QM_E_ENUM, "'%.40s' is not a valid %s (%s%s)", s, what,
                    shown ? "" : "one of ", list);
        }
    }
    qm_scn_path_pop(L, old);
    return ok;
}

bool qm_scn_get_enum(ld *L, ynode *n, const char *key, const char *const *names, int count,
                     const char *what, int *out)
{
    return qm_scn_get_enum_list(L, n, key, names, count, what, NULL, out);
}

/* ---- ids ---------------------------------------------------------------------------------------- */

static const char *node_kind_name(qm_node_kind k)
{
    switch (k) {
    case QM_NODE_GPU: return "a device";
    case QM_NODE_NUMA: return "a NUMA node";
    case QM_NODE_PCIE_SWITCH: return "a PCIe switch";
    case QM_NODE_NVSWITCH: return "an NVSwitch";
    case QM_NODE_NIC: return "a NIC";
    case QM_NODE_FABRIC_SWITCH: return "a fabric";
    }
    return "a node";
}

static const char *entry_kind_name(const ld *L, const entry *e)
{
    switch (e->kind) {
    case ID_HOST: return "a host";
    case ID_NODE: return node_kind_name(L->t->nodes[e->index].kind);
    case ID_FABRIC: return "a fabric";
    case ID_CASE: return "a case";
    }
    return "an id";
}

/* Register id in the one namespace of the file; E-DUP-ID when it is taken. */
bool qm_scn_register_id(ld *L, ynode *at, const char *id, int kind, int index)
{
    entry *e = qm_scn_map_find(&L->ids, id);
    if (e) {
        err(L, at, QM_E_DUP_ID, "id '%s' is already used by %s at line %d, column %d", id,
            entry_kind_name(L, e), e->line, e->col);
        return false;
    }
    e = qm_scn_map_insert(&L->ids, id);
    if (!e) {
        qm_scn_nomem(L);
        return false;
    }
    e->kind = kind;
    e->index = index;
    e->line = LINE(at);
    e->col = COL(at);
    return true;
}

static const char *want_name(enum want w)
{
    switch (w) {
    case WANT_NODE: return "a node (NUMA node, device, switch, NIC or fabric)";
    case WANT_GPU: return "a device";
    case WANT_SWITCH: return "a switch (pcie_switch or nvswitch)";
    case WANT_HOST: return "a host";
    }
    return "an id";
}

/* The node index (or host index) that e names for `want`, or -1. */
static int entry_target(const ld *L, const entry *e, enum want w)
{
    const qm_topology *t = L->t;
    if (w == WANT_HOST)
        return e->kind == ID_HOST ? e->index : -1;
    int node = -1;
    if (e->kind == ID_NODE)
        node = e->index;
    else if (e->kind == ID_FABRIC && t->fabrics[e->index].implicit_switch)
        node = t->fabrics[e->index].switch_node;
    if (node < 0)
        return -1;
    qm_node_kind k = t->nodes[node].kind;
    if (w == WANT_GPU && k != QM_NODE_GPU)
        return -1;
    if (w == WANT_SWITCH && k != QM_NODE_PCIE_SWITCH && k != QM_NODE_NVSWITCH)
        return -1;
    return node;
}

/* Resolve a reference: E-UNKNOWN-REF (with a "did you mean") when the id is not declared or
 * names something of another kind. Returns the index, or -1. */
int qm_scn_resolve(ld *L, ynode *n, const char *key, enum want w)
{
    char id[QM_ID_BYTES];
    if (!qm_scn_get_id(L, n, key, id))
        return -1;
    size_t old = qm_scn_path_key(L, key);
    int r = -1;
    entry *e = qm_scn_map_find(&L->ids, id);
    if (e) {
        r = entry_target(L, e, w);
        if (r < 0) {
            /* a fabric with a declared switch (already resolved) can be named by that switch */
            const qm_fabric *f = e->kind == ID_FABRIC ? &L->t->fabrics[e->index] : NULL;
            if (f && w != WANT_HOST && !f->implicit_switch && f->switch_node >= 0 &&
                f->switch_node < L->t->n_nodes)
                err(L, n, QM_E_UNKNOWN_REF,
                    "'%s' is a fabric with the switch '%s', not %s; name the switch instead", id,
                    L->t->nodes[f->switch_node].id, want_name(w));
            else
                err(L, n, QM_E_UNKNOWN_REF, "'%s' is %s, not %s", id, entry_kind_name(L, e),
                    want_name(w));
        }
    } else {
        const char *hint = NULL;
        int best = 3;
        if (L->n_ref_hints++ < 16) {
            for (size_t i = 0; i < L->ids.cap; ++i) {
                const entry *c = &L->ids.e[i];
                if (c->key && entry_target(L, c, w) >= 0 && qm_hint_closer(id, c->key, &best, hint))
                    hint = c->key;
            }
        }
        if (hint)
            err(L, n, QM_E_UNKNOWN_REF, "unknown id '%s'; did you mean '%s'?", id, hint);
        else
            err(L, n, QM_E_UNKNOWN_REF, "unknown id '%s' (expected %s declared in this file)", id,
                want_name(w));
    }
    qm_scn_path_pop(L, old);
    return r;
}
