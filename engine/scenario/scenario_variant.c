/* scenario_variant.c — a topology varied in memory (see scenario_variant.h for the rules).
 *
 * In: a loaded qm_topology and a qm_variant. Out: a new qm_topology, built by copying the source
 * and then applying two primitives: copy a set of nodes (with their links, fabric places and
 * ranks) and remove a set of nodes (with the same). Ids stay unique through a hash set of every
 * host, node and fabric id.
 * Must not: change the source, parse or print YAML. Known wart: a fabric whose switch sits in a
 * copied host but which also has members outside it is copied with the host's members only.
 */
#include "scenario_variant.h"
#include "scenario_internal.h" /* the string map of ids */
#include "status_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the ids in use: the loader's string map (scenario_internal.h) ---------------------------- */

static bool idset_has(const map *s, const char *id)
{
    return qm_scn_map_find(s, id) != NULL;
}

static bool idset_add(map *s, const char *id)
{
    return qm_scn_map_find(s, id) || qm_scn_map_insert(s, id);
}

/* ---- the topology being built ------------------------------------------------------------------ */

typedef struct vb {
    qm_topology *t;
    int cap_hosts, cap_nodes, cap_links, cap_fabrics, cap_ranks;
    map ids;
    qm_status *st;
} vb;

static qm_code nomem(vb *b)
{
    return qm_fail(b->st, QM_E_NOMEM, "whatif: out of host memory building a variant of '%s'",
                   b->t->name);
}

static void *memdup(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

/* The source copied (no cases, no sources); ids registered. */
static qm_code copy_topology(const qm_topology *s, vb *b)
{
    qm_topology *t = calloc(1, sizeof *t);
    if (!t)
        return qm_fail(b->st, QM_E_NOMEM, "whatif: out of host memory");
    b->t = t;
    memcpy(t->file, s->file, sizeof t->file);
    memcpy(t->name, s->name, sizeof t->name);
    t->default_reserve_bytes = s->default_reserve_bytes;
    memcpy(t->efficiency, s->efficiency, sizeof t->efficiency);
    t->hbm_efficiency = s->hbm_efficiency;
    memcpy(t->latency_s, s->latency_s, sizeof t->latency_s);
    t->host_link_bw_bytes_per_s = s->host_link_bw_bytes_per_s; /* devices' implicit links */
    t->storage_read_bw_bytes_per_s = s->storage_read_bw_bytes_per_s;
    t->storage_write_bw_bytes_per_s = s->storage_write_bw_bytes_per_s;
    t->host_copy_bw_bytes_per_s = s->host_copy_bw_bytes_per_s;
    t->storage_cached_read_bw_bytes_per_s = s->storage_cached_read_bw_bytes_per_s;
    t->storage_remove_bw_bytes_per_s = s->storage_remove_bw_bytes_per_s;
    t->launch_s = s->launch_s;
    t->page_lock_s = s->page_lock_s;
    t->page_lock_bw_bytes_per_s = s->page_lock_bw_bytes_per_s;
    t->staging_setup_s = s->staging_setup_s;
    t->state_alloc_bw_bytes_per_s = s->state_alloc_bw_bytes_per_s;
    t->staging_open_s = s->staging_open_s;
    t->piece_roots_s = s->piece_roots_s;
    t->host_piece_s = s->host_piece_s;
    t->host_coeff_s = s->host_coeff_s;
    t->ranks_given = s->ranks_given;
    t->device_types = memdup(s->device_types, (size_t)s->n_device_types * sizeof *s->device_types);
    t->hosts = memdup(s->hosts, (size_t)s->n_hosts * sizeof *s->hosts);
    t->nodes = memdup(s->nodes, (size_t)s->n_nodes * sizeof *s->nodes);
    t->links = memdup(s->links, (size_t)s->n_links * sizeof *s->links);
    t->fabrics = calloc((size_t)s->n_fabrics + 1, sizeof *t->fabrics);
    t->ranks = calloc((size_t)s->n_ranks + 1, sizeof *t->ranks);
    if (!t->device_types || !t->hosts || !t->nodes || !t->links || !t->fabrics || !t->ranks)
        return nomem(b);
    t->n_device_types = s->n_device_types;
    t->n_hosts = b->cap_hosts = s->n_hosts;
    t->n_nodes = b->cap_nodes = s->n_nodes;
    t->n_links = b->cap_links = s->n_links;
    b->cap_fabrics = s->n_fabrics + 1;
    b->cap_ranks = s->n_ranks + 1;
    for (int f = 0; f < s->n_fabrics; ++f) {
        t->fabrics[f] = s->fabrics[f];
        t->fabrics[f].members = NULL;
        t->n_fabrics = f + 1;
        if (!(t->fabrics[f].members = memdup(s->fabrics[f].members,
                                             (size_t)s->fabrics[f].n_members * sizeof(int))))
            return nomem(b);
    }
    for (int r = 0; r < s->n_ranks; ++r) {
        t->ranks[r] = s->ranks[r];
        t->ranks[r].devices = NULL;
        t->n_ranks = r + 1;
        if (!(t->ranks[r].devices = memdup(s->ranks[r].devices,
                                           (size_t)s->ranks[r].n_devices * sizeof(int))))
            return nomem(b);
    }
    for (int h = 0; h < t->n_hosts; ++h)
        if (!idset_add(&b->ids, t->hosts[h].id))
            return nomem(b);
    for (int i = 0; i < t->n_nodes; ++i)
        if (!idset_add(&b->ids, t->nodes[i].id))
            return nomem(b);
    for (int f = 0; f < t->n_fabrics; ++f)
        if (!t->fabrics[f].implicit_switch && !idset_add(&b->ids, t->fabrics[f].id))
            return nomem(b); /* an implicit switch has the fabric's id: registered with the nodes */
    return QM_OK;
}

static int add_node(vb *b, const qm_node *like, const char *id, int host)
{
    qm_topology *t = b->t;
    if (!qm_topology_grow((void **)&t->nodes, &b->cap_nodes, t->n_nodes + 1, sizeof *t->nodes) ||
        !idset_add(&b->ids, id))
        return -1;
    qm_node *n = &t->nodes[t->n_nodes];
    *n = *like;
    snprintf(n->id, sizeof n->id, "%s", id);
    n->host = host;
    n->loc = (qm_loc){0, 0};
    return t->n_nodes++;
}

static bool add_link(vb *b, const qm_link *like, int a, int bnode, int fabric)
{
    qm_topology *t = b->t;
    if (!qm_topology_grow((void **)&t->links, &b->cap_links, t->n_links + 1, sizeof *t->links))
        return false;
    qm_link *l = &t->links[t->n_links++];
    *l = *like;
    l->a = a;
    l->b = bnode;
    l->fabric = fabric;
    l->loc = (qm_loc){0, 0};
    return true;
}

/* A member joins fabric f: the member list and its expansion link to the switch. */
static bool fabric_join(vb *b, int f, int node)
{
    qm_fabric *fb = &b->t->fabrics[f];
    int *m = realloc(fb->members, ((size_t)fb->n_members + 1) * sizeof *m);
    if (!m)
        return false;
    fb->members = m;
    m[fb->n_members++] = node;
    const qm_link like = {.cls = fb->cls, .bw_ab_bytes_per_s = fb->port_bw_bytes_per_s,
                          .bw_ba_bytes_per_s = fb->port_bw_bytes_per_s, .latency_s = fb->latency_s};
    return add_link(b, &like, node, fb->switch_node, f);
}

static bool add_rank(vb *b, int host, const int *devices, int n)
{
    qm_topology *t = b->t;
    if (!qm_topology_grow((void **)&t->ranks, &b->cap_ranks, t->n_ranks + 1, sizeof *t->ranks))
        return false;
    qm_rank_desc *r = &t->ranks[t->n_ranks];
    *r = (qm_rank_desc){.rank = t->n_ranks, .host = host, .n_devices = n};
    if (!(r->devices = memdup(devices, (size_t)n * sizeof *devices)))
        return false;
    t->n_ranks++;
    return true;
}

/* ---- ids ---------------------------------------------------------------------------------------- */

/* Copy a formatted id of n bytes to out when it fits an id. */
static bool id_fits(const char *buf, int n, char out[QM_ID_BYTES])
{
    if (n <= 0 || n >= QM_ID_BYTES)
        return false;
    memcpy(out, buf, (size_t)n + 1);
    return true;
}

/* `id` with its trailing number replaced by `num` (zero-padded to the same width); an id without
 * one gets "-num". False when the result does not fit an id. */
static bool id_numbered(const char *id, long num, char out[QM_ID_BYTES])
{
    size_t len = strlen(id), p = len;
    while (p > 0 && id[p - 1] >= '0' && id[p - 1] <= '9')
        --p;
    char buf[2 * QM_ID_BYTES + 32];
    int n = p < len ? snprintf(buf, sizeof buf, "%.*s%0*ld", (int)p, id, (int)(len - p), num)
                    : snprintf(buf, sizeof buf, "%s-%ld", id, num);
    return id_fits(buf, n, out);
}

/* The number id_numbered counts from: the trailing number, or 1 for an id without one. */
static long id_number(const char *id)
{
    size_t len = strlen(id), p = len;
    while (p > 0 && id[p - 1] >= '0' && id[p - 1] <= '9')
        --p;
    return p < len && len - p < 10 ? strtol(id + p, NULL, 10) : 1;
}

/* The id of a copy in host `host_to` of something with id `id` in host `host_from`. */
static bool id_moved(const char *id, const char *host_from, const char *host_to,
                     char out[QM_ID_BYTES])
{
    size_t hl = strlen(host_from);
    char buf[2 * QM_ID_BYTES + 2];
    int n = strncmp(id, host_from, hl) == 0 && id[hl] == '.'
                ? snprintf(buf, sizeof buf, "%s%s", host_to, id + hl)
                : snprintf(buf, sizeof buf, "%s.%s", host_to, id);
    return id_fits(buf, n, out);
}

/* ---- remove a set of nodes ---------------------------------------------------------------------- */

/* Remove the nodes marked in `gone` (n_nodes entries; fabric switches of emptied fabrics are
 * added to it), with their links, fabric places and rank places; fabrics whose switch goes, or
 * that lose every member, go too; ranks left without a device are dropped and renumbered. */
static qm_code remove_nodes(vb *b, bool *gone)
{
    qm_topology *t = b->t;
    int *nmap = malloc(((size_t)t->n_nodes + 1) * sizeof *nmap);
    int *fmap = malloc(((size_t)t->n_fabrics + 1) * sizeof *fmap);
    if (!nmap || !fmap) {
        free(nmap);
        free(fmap);
        return nomem(b);
    }
    for (int f = 0; f < t->n_fabrics; ++f) {
        const qm_fabric *fb = &t->fabrics[f];
        int left = 0;
        for (int i = 0; i < fb->n_members; ++i)
            left += !gone[fb->members[i]];
        fmap[f] = gone[fb->switch_node] || left == 0 ? -1 : 0;
        if (fmap[f] < 0 && fb->implicit_switch)
            gone[fb->switch_node] = true;
    }
    int k = 0;
    for (int i = 0; i < t->n_nodes; ++i)
        nmap[i] = gone[i] ? -1 : k++;
    for (int i = 0; i < t->n_nodes; ++i) {
        if (nmap[i] < 0)
            continue;
        qm_node n = t->nodes[i];
        n.numa = n.numa >= 0 ? nmap[n.numa] : -1;
        n.attach = n.attach >= 0 ? nmap[n.attach] : -1;
        t->nodes[nmap[i]] = n;
    }
    t->n_nodes = k;
    k = 0;
    for (int f = 0; f < t->n_fabrics; ++f) {
        qm_fabric fb = t->fabrics[f];
        if (fmap[f] < 0) {
            free(fb.members);
            continue;
        }
        int m = 0;
        for (int i = 0; i < fb.n_members; ++i)
            if (nmap[fb.members[i]] >= 0)
                fb.members[m++] = nmap[fb.members[i]];
        fb.n_members = m;
        fb.switch_node = nmap[fb.switch_node];
        fmap[f] = k;
        t->fabrics[k++] = fb;
    }
    t->n_fabrics = k;
    k = 0;
    for (int l = 0; l < t->n_links; ++l) {
        qm_link lk = t->links[l];
        if (nmap[lk.a] < 0 || nmap[lk.b] < 0 || (lk.fabric >= 0 && fmap[lk.fabric] < 0))
            continue;
        lk.a = nmap[lk.a];
        lk.b = nmap[lk.b];
        lk.fabric = lk.fabric >= 0 ? fmap[lk.fabric] : -1;
        t->links[k++] = lk;
    }
    t->n_links = k;
    k = 0;
    for (int r = 0; r < t->n_ranks; ++r) {
        qm_rank_desc rd = t->ranks[r];
        int m = 0;
        for (int i = 0; i < rd.n_devices; ++i)
            if (nmap[rd.devices[i]] >= 0)
                rd.devices[m++] = nmap[rd.devices[i]];
        rd.n_devices = m;
        if (m == 0) {
            free(rd.devices);
            continue;
        }
        rd.rank = k;
        t->ranks[k++] = rd;
    }
    t->n_ranks = k;
    free(nmap);
    free(fmap);
    return QM_OK;
}

/* ---- hosts -------------------------------------------------------------------------------------- */

/* Whether fabric f belongs to host h: its switch is a node of h, or it is an implicit switch of a
 * fabric (not a network) whose members are all on h. */
static bool host_fabric(const qm_topology *t, int f, int h)
{
    const qm_fabric *fb = &t->fabrics[f];
    if (fb->switch_node < 0)
        return false;
    if (!fb->implicit_switch)
        return t->nodes[fb->switch_node].host == h;
    if (fb->cls == QM_LINK_NET || fb->n_members == 0)
        return false;
    for (int i = 0; i < fb->n_members; ++i)
        if (t->nodes[fb->members[i]].host != h)
            return false;
    return true;
}

/* Copy host `src` as a new host: its nodes, links, fabrics, ranks (see the header). `num` is the
 * next number to try for its id; updated. */
static qm_code copy_host(vb *b, int src, long *num)
{
    qm_topology *t = b->t;
    const int n0 = t->n_nodes, f0 = t->n_fabrics, l0 = t->n_links, r0 = t->n_ranks;
    char hid[QM_ID_BYTES], nid[QM_ID_BYTES];
    char sid[QM_ID_BYTES]; /* t->hosts moves when it grows */
    memcpy(sid, t->hosts[src].id, sizeof sid);
    /* a host id whose every derived id is free */
    for (;; ++*num) {
        if (!id_numbered(sid, *num, hid))
            return qm_fail(b->st, QM_E_ARG, "whatif: --hosts: the id of a copy of host '%s' would "
                           "be longer than %d bytes", sid, QM_ID_BYTES - 1);
        bool free_id = !idset_has(&b->ids, hid);
        for (int i = 0; free_id && i < n0; ++i)
            if (t->nodes[i].host == src)
                free_id = id_moved(t->nodes[i].id, sid, hid, nid) && !idset_has(&b->ids, nid);
        for (int f = 0; free_id && f < f0; ++f)
            free_id = !host_fabric(t, f, src) ||
                      (id_moved(t->fabrics[f].id, sid, hid, nid) && !idset_has(&b->ids, nid));
        if (free_id)
            break;
        if (*num > 1000000)
            return qm_fail(b->st, QM_E_ARG, "whatif: --hosts: no free id for a copy of host '%s'",
                           sid);
    }
    ++*num;
    if (!qm_topology_grow((void **)&t->hosts, &b->cap_hosts, t->n_hosts + 1, sizeof *t->hosts) ||
        !idset_add(&b->ids, hid))
        return nomem(b);
    const int h = t->n_hosts++;
    t->hosts[h] = t->hosts[src];
    snprintf(t->hosts[h].id, sizeof t->hosts[h].id, "%s", hid);
    t->hosts[h].loc = (qm_loc){0, 0};
    int *copy_of = malloc((size_t)n0 * sizeof *copy_of); /* source node -> its copy, -1 outside */
    if (!copy_of)
        return nomem(b);
    qm_code rc = QM_OK;
    for (int i = 0; i < n0; ++i) {
        copy_of[i] = -1;
        if (t->nodes[i].host != src)
            continue;
        id_moved(t->nodes[i].id, sid, hid, nid);
        const qm_node like = t->nodes[i];
        if ((copy_of[i] = add_node(b, &like, nid, h)) < 0)
            goto oom;
    }
    for (int i = n0; i < t->n_nodes; ++i) {
        qm_node *n = &t->nodes[i];
        n->numa = n->numa >= 0 && copy_of[n->numa] >= 0 ? copy_of[n->numa] : n->numa;
        n->attach = n->attach >= 0 && copy_of[n->attach] >= 0 ? copy_of[n->attach] : n->attach;
    }
    for (int l = 0; l < l0; ++l) {
        const qm_link lk = t->links[l];
        if (lk.fabric >= 0 || (copy_of[lk.a] < 0 && copy_of[lk.b] < 0))
            continue;
        const int a = copy_of[lk.a] >= 0 ? copy_of[lk.a] : lk.a;
        const int z = copy_of[lk.b] >= 0 ? copy_of[lk.b] : lk.b;
        if (!add_link(b, &lk, a, z, -1))
            goto oom;
    }
    for (int f = 0; f < f0; ++f) {
        const int sw = t->fabrics[f].switch_node;
        if (host_fabric(t, f, src)) { /* the host's own fabric: a new one */
            char fid[QM_ID_BYTES];
            id_moved(t->fabrics[f].id, sid, hid, fid);
            int nsw = copy_of[sw];
            if (nsw < 0) { /* an implicit switch (its id is the fabric's) */
                const qm_node like = t->nodes[sw];
                if ((nsw = add_node(b, &like, fid, -1)) < 0)
                    goto oom;
            } else if (!idset_add(&b->ids, fid)) {
                goto oom;
            }
            if (!qm_topology_grow((void **)&t->fabrics, &b->cap_fabrics, t->n_fabrics + 1,
                                  sizeof *t->fabrics))
                goto oom;
            const int nf = t->n_fabrics++;
            qm_fabric *fb = &t->fabrics[nf];
            *fb = t->fabrics[f];
            fb->members = NULL;
            fb->n_members = 0;
            fb->switch_node = nsw;
            fb->loc = (qm_loc){0, 0};
            memcpy(fb->id, fid, sizeof fid);
            for (int i = 0; i < t->fabrics[f].n_members; ++i) {
                const int m = t->fabrics[f].members[i];
                if (copy_of[m] >= 0 && !fabric_join(b, nf, copy_of[m]))
                    goto oom;
            }
        } else {
            const int nm = t->fabrics[f].n_members;
            for (int i = 0; i < nm; ++i) {
                const int m = t->fabrics[f].members[i];
                if (copy_of[m] >= 0 && !fabric_join(b, f, copy_of[m]))
                    goto oom;
            }
        }
    }
    for (int r = 0; r < r0; ++r) {
        if (t->ranks[r].host != src)
            continue;
        int *d = malloc(((size_t)t->ranks[r].n_devices + 1) * sizeof *d);
        if (!d)
            goto oom;
        for (int i = 0; i < t->ranks[r].n_devices; ++i)
            d[i] = copy_of[t->ranks[r].devices[i]];
        const bool ok = add_rank(b, h, d, t->ranks[r].n_devices);
        free(d);
        if (!ok)
            goto oom;
    }
    free(copy_of);
    return rc;
oom:
    free(copy_of);
    return nomem(b);
}

static qm_code set_hosts(vb *b, int hosts)
{
    qm_topology *t = b->t;
    if (hosts < 1 || hosts > QM_VARIANT_MAX_HOSTS)
        return qm_fail(b->st, QM_E_ARG, "whatif: --hosts %d is out of range (1..%d)", hosts,
                       QM_VARIANT_MAX_HOSTS);
    if (hosts < t->n_hosts) {
        bool *gone = calloc((size_t)t->n_nodes + 1, sizeof *gone);
        if (!gone)
            return nomem(b);
        for (int i = 0; i < t->n_nodes; ++i)
            gone[i] = t->nodes[i].host >= hosts;
        qm_code rc = remove_nodes(b, gone);
        free(gone);
        t->n_hosts = hosts;
        return rc;
    }
    const int src = t->n_hosts - 1;
    long num = id_number(t->hosts[src].id) + 1;
    qm_code rc = QM_OK;
    while (rc == QM_OK && t->n_hosts < hosts)
        rc = copy_host(b, src, &num);
    return rc;
}

/* ---- devices per host --------------------------------------------------------------------------- */

/* A copy of device `g` on its host (see the header). */
static qm_code copy_device(vb *b, int g)
{
    qm_topology *t = b->t;
    char id[QM_ID_BYTES];
    long num = id_number(t->nodes[g].id) + 1;
    for (;; ++num) {
        if (!id_numbered(t->nodes[g].id, num, id))
            return qm_fail(b->st, QM_E_ARG, "whatif: --devices-per-host: the id of a copy of "
                           "device '%s' would be longer than %d bytes", t->nodes[g].id,
                           QM_ID_BYTES - 1);
        if (!idset_has(&b->ids, id))
            break;
    }
    const qm_node like = t->nodes[g];
    const int c = add_node(b, &like, id, like.host);
    if (c < 0)
        return nomem(b);
    const int nl = t->n_links;
    int twin_link = -1;
    for (int l = 0; l < nl; ++l) {
        const qm_link lk = t->links[l];
        if (lk.fabric >= 0 || (lk.a != g && lk.b != g))
            continue;
        const int other = lk.a == g ? lk.b : lk.a;
        if (twin_link < 0 && t->nodes[other].kind == QM_NODE_GPU)
            twin_link = l;
        if (!add_link(b, &lk, lk.a == g ? c : lk.a, lk.b == g ? c : lk.b, -1))
            return nomem(b);
    }
    if (twin_link >= 0) {
        const qm_link lk = t->links[twin_link];
        if (!add_link(b, &lk, g, c, -1))
            return nomem(b);
    }
    const int nf = t->n_fabrics;
    for (int f = 0; f < nf; ++f)
        for (int i = 0; i < t->fabrics[f].n_members; ++i)
            if (t->fabrics[f].members[i] == g) {
                if (!fabric_join(b, f, c))
                    return nomem(b);
                break;
            }
    for (int r = 0; r < t->n_ranks; ++r) {
        qm_rank_desc *rd = &t->ranks[r];
        for (int i = 0; i < rd->n_devices; ++i)
            if (rd->devices[i] == g) {
                int *d = realloc(rd->devices, ((size_t)rd->n_devices + 1) * sizeof *d);
                if (!d)
                    return nomem(b);
                rd->devices = d;
                d[rd->n_devices++] = c;
                return QM_OK;
            }
    }
    return QM_OK;
}

static qm_code set_devices_per_host(vb *b, int k)
{
    qm_topology *t = b->t;
    if (k < 1 || k > QM_VARIANT_MAX_DEVICES_PER_HOST)
        return qm_fail(b->st, QM_E_ARG, "whatif: --devices-per-host %d is out of range (1..%d)", k,
                       QM_VARIANT_MAX_DEVICES_PER_HOST);
    bool *gone = calloc((size_t)t->n_nodes + 1, sizeof *gone);
    if (!gone)
        return nomem(b);
    qm_code rc = QM_OK;
    const int hosts = t->n_hosts, nodes = t->n_nodes;
    for (int h = 0; h < hosts && rc == QM_OK; ++h) {
        int have = 0, last = -1;
        for (int i = 0; i < nodes; ++i)
            if (t->nodes[i].host == h && t->nodes[i].kind == QM_NODE_GPU) {
                gone[i] = ++have > k;
                last = i;
            }
        if (last < 0)
            rc = qm_fail(b->st, QM_E_ARG, "whatif: --devices-per-host %d: host '%s' has no device "
                         "to copy (0 devices)", k, t->hosts[h].id);
        for (int n = have; rc == QM_OK && n < k; ++n)
            rc = copy_device(b, last);
    }
    if (rc == QM_OK) {
        bool *g2 = realloc(gone, (size_t)t->n_nodes * sizeof *g2);
        if (!g2) {
            free(gone);
            return nomem(b);
        }
        gone = g2;
        for (int i = nodes; i < t->n_nodes; ++i)
            gone[i] = false;
        rc = remove_nodes(b, gone);
    }
    free(gone);
    return rc;
}

/* ---- failed devices ----------------------------------------------------------------------------- */

static qm_code remove_devices(vb *b, const qm_topology *gpus_of, const char (*ids)[QM_ID_BYTES],
                              int n)
{
    qm_topology *t = b->t;
    bool *gone = calloc((size_t)t->n_nodes + 1, sizeof *gone);
    if (!gone)
        return nomem(b);
    qm_code rc = QM_OK;
    for (int k = 0; k < n && rc == QM_OK; ++k) {
        int found = -1;
        for (int i = 0; i < t->n_nodes && found < 0; ++i)
            if (strcmp(t->nodes[i].id, ids[k]) == 0)
                found = i;
        if (found >= 0 && t->nodes[found].kind != QM_NODE_GPU) {
            rc = qm_fail(b->st, QM_E_ARG, "whatif: --without '%s': not a device but a %s; name "
                         "GPU devices", ids[k], t->nodes[found].kind == QM_NODE_NUMA ? "NUMA node"
                         : "switch or NIC");
        } else if (found < 0) {
            const char *hint = qm_topology_closest_gpu(gpus_of, ids[k]);
            rc = qm_fail(b->st, QM_E_ARG, "whatif: --without '%s': no such device (%d device%s "
                         "in %d host%s)%s%s%s", ids[k], gpus_of->n_gpus,
                         gpus_of->n_gpus == 1 ? "" : "s", t->n_hosts, t->n_hosts == 1 ? "" : "s",
                         hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
        } else {
            gone[found] = true;
        }
    }
    if (rc == QM_OK)
        rc = remove_nodes(b, gone);
    free(gone);
    return rc;
}

/* ---- the variant -------------------------------------------------------------------------------- */

/* The device list in node order (what the loader's file order becomes). */
static qm_code rebuild_gpus(vb *b)
{
    qm_topology *t = b->t;
    free(t->gpus);
    t->n_gpus = 0;
    if (!(t->gpus = malloc(((size_t)t->n_nodes + 1) * sizeof *t->gpus)))
        return nomem(b);
    for (int h = 0; h < t->n_hosts; ++h)
        for (int i = 0; i < t->n_nodes; ++i)
            if (t->nodes[i].kind == QM_NODE_GPU && t->nodes[i].host == h)
                t->gpus[t->n_gpus++] = i;
    return QM_OK;
}

/* The loader's rule holds for a variant too: every device reaches the first one. */
static qm_code check_joined(vb *b)
{
    const qm_topology *t = b->t;
    bool *joined = malloc(((size_t)t->n_gpus + 1) * sizeof *joined);
    if (!joined)
        return nomem(b);
    qm_code rc = qm_topology_joined(t, joined, b->st);
    for (int g = 1; rc == QM_OK && g < t->n_gpus; ++g)
        if (!joined[g])
            rc = qm_fail(b->st, QM_E_DISCONNECTED, "whatif: device '%s' of this variant has no "
                         "path to device '%s' (%d hosts; no chain of links, fabrics or NIC "
                         "attachments joins them)%s", t->nodes[t->gpus[g]].id,
                         t->nodes[t->gpus[0]].id, t->n_hosts,
                         t->nodes[t->gpus[g]].host != t->nodes[t->gpus[0]].host
                             ? "; the scenario has no network between these hosts"
                             : "");
    free(joined);
    return rc;
}

qm_code qm_topology_variant(const qm_topology *src, const qm_variant *v, qm_topology **out,
                            qm_status *st)
{
    if (out)
        *out = NULL;
    if (!src || !v || !out)
        return qm_fail(st, QM_E_ARG, "whatif: topology, variant and out must not be NULL");
    vb b = {.st = st};
    qm_code rc = copy_topology(src, &b);
    if (rc == QM_OK && v->hosts)
        rc = set_hosts(&b, v->hosts);
    if (rc == QM_OK && v->devices_per_host)
        rc = set_devices_per_host(&b, v->devices_per_host);
    if (rc == QM_OK && v->device_memory_bytes)
        for (int i = 0; i < b.t->n_nodes; ++i)
            if (b.t->nodes[i].kind == QM_NODE_GPU)
                b.t->nodes[i].memory_bytes = v->device_memory_bytes;
    if (rc == QM_OK)
        rc = rebuild_gpus(&b);
    if (rc == QM_OK && v->n_without > 0) {
        rc = remove_devices(&b, b.t, v->without, v->n_without);
        if (rc == QM_OK)
            rc = rebuild_gpus(&b);
    }
    if (rc == QM_OK && b.t->n_gpus == 0)
        rc = qm_fail(st, QM_E_ARG, "whatif: --without: no device is left (%d removed)",
                     v->n_without);
    if (rc == QM_OK)
        rc = check_joined(&b);
    qm_scn_map_fini(&b.ids);
    if (rc != QM_OK) {
        qm_topology_destroy(b.t);
        return rc;
    }
    *out = b.t;
    return QM_OK;
}
