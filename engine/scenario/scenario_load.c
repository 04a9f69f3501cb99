/* scenario_load.c — the strict `qmesh/1` scenario loader (docs/SCENARIOS.md, docs/scenarios.md).
 *
 * Role: the only file that includes <yaml.h>. Turns scenario text into a qm_topology
 * (scenario.h) and reports every problem of a file as located diagnostics.
 * In: a path, a string, or the built-in default text. Out: a topology that owns all of its memory,
 * or NULL with the first error in the status and all of them (up to QM_DIAGS_PER_LOAD) in diags.
 * How:
 *   1. one pass over libyaml's events (yaml_parser_parse) builds a compact tree with a 1-based
 *      location on every node (build_doc), checking on the way: syntax errors (both libyaml
 *      marks), one document only, nesting depth, undefined and recursive aliases, and the number
 *      of nodes after alias expansion (QM_SCENARIO_MAX_NODES), so that an alias bomb is refused
 *      before anything is expanded;
 *   2. a schema walk in a fixed order (defaults, device types, hosts, fabrics, links, ranks,
 *      cases) that fills the topology, resolving ids through one hash table (one namespace per
 *      file: hosts, NUMA nodes, devices, switches, NICs, fabrics, cases);
 *   3. whole-file checks once everything parsed cleanly: default ranks, connectivity;
 *   4. the errors, sorted by location, go to diags and the first one to the status.
 * Why not yaml_parser_load (STYLE.md names libyaml's document API): it allocates a node, a tag
 * copy and child stacks per node, and on a 1024-host x 8-GPU scenario it alone took 0.3-0.6 s of
 * a fresh process (page faults), against the < 1 s target for the whole load; and it cannot stop
 * early, so a 64 MiB file of tiny nodes would cost gigabytes before any limit applied. The event
 * API gives the same marks, and the tree built here takes about a sixth of the memory.
 * Subjects of messages are YAML paths ("hosts[0].devices[1].memory"); locations are the value's.
 * Must not: abort, exit, print, or keep anything of libyaml beyond a call.
 * Class default latencies (NCCL's per-step model, HARDWARE.md "Collective latency"): nvlink and
 * c2c 0.6 us, pcie and sys 1.0 us, net 2.7 us; `defaults.latency` overrides them.
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdopen */
#include "io.h" /* qm_input_file_kind */
#include "scenario_loader.h"

#include "status_internal.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_DEPTH 256 /* YAML nesting; a scenario needs 6 */

/* ---- names and plain helpers of scenario.h ---------------------------------------------------- */

static const char *const class_names[QM_LINK_CLASS_COUNT_] = {"nvlink", "c2c", "pcie", "sys",
                                                              "net"};
static const char *const phase_names[QM_PHASE_COUNT_] = {"ingest", "local_norm", "norm_allreduce",
                                                         "encode", "gather"};

const char *qm_link_class_name(qm_link_class c)
{
    return (int)c >= 0 && c < QM_LINK_CLASS_COUNT_ ? class_names[c] : NULL;
}

const char *qm_phase_name(qm_phase p)
{
    return (int)p >= 0 && p < QM_PHASE_COUNT_ ? phase_names[p] : NULL;
}

void qm_request_init(qm_request *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->qubits = 0;
    r->dtype = QM_DTYPE_COMPLEX64;
    r->policy = QM_POLICY_AUTO;
    r->batch = 1;
    r->features = 0;
    r->encoding = QM_ENCODING_AMPLITUDE;
    snprintf(r->gather, sizeof r->gather, "auto");
    r->ranks = 0;
}

void qm_topology_destroy(qm_topology *t)
{
    if (!t)
        return;
    free(t->description);
    for (int i = 0; i < t->n_sources; ++i)
        free(t->sources[i]);
    free(t->sources);
    free(t->device_types);
    free(t->hosts);
    free(t->nodes);
    free(t->links);
    for (int i = 0; i < t->n_fabrics; ++i)
        free(t->fabrics[i].members);
    free(t->fabrics);
    for (int i = 0; i < t->n_ranks; ++i)
        free(t->ranks[i].devices);
    free(t->ranks);
    for (int i = 0; i < t->n_cases; ++i) {
        free(t->cases[i].expect.devices);
        free(t->cases[i].expect.ranks);
    }
    free(t->cases);
    free(t->gpus);
    free(t);
}

/* ---- diagnostics -------------------------------------------------------------------------------- */

void qm_diags_init(qm_diags *d)
{
    if (d)
        memset(d, 0, sizeof *d);
}

void qm_diags_fini(qm_diags *d)
{
    if (!d)
        return;
    free(d->items);
    memset(d, 0, sizeof *d);
}

void qm_diags_add(qm_diags *d, qm_code code, const char *file, int line, int col, const char *msg)
{
    if (!d)
        return;
    if (d->n == d->n_alloc) {
        int cap = d->n_alloc ? d->n_alloc * 2 : 8;
        qm_diag *items = realloc(d->items, (size_t)cap * sizeof *items);
        if (!items) {
            d->n_dropped++;
            return;
        }
        d->items = items;
        d->n_alloc = cap;
    }
    qm_diag *e = &d->items[d->n++];
    e->code = code;
    e->line = line;
    e->col = col;
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
}

static void diags_print_from(const qm_diags *d, int first, FILE *f)
{
    if (!d || !f)
        return;
    for (int i = first; i < d->n; ++i) {
        const qm_diag *e = &d->items[i];
        if (e->line > 0)
            fprintf(f, "%s:%d:%d: error[%s]: %s\n", e->file, e->line, e->col, qm_code_name(e->code),
                    e->msg);
        else
            fprintf(f, "%s: error[%s]: %s\n", e->file, qm_code_name(e->code), e->msg);
    }
    if (d->n_dropped)
        fprintf(f, "(%d more diagnostics could not be stored: out of memory)\n", d->n_dropped);
}

void qm_diags_print(const qm_diags *d, FILE *f) { diags_print_from(d, 0, f); }

void qm_diags_print_others(const qm_diags *d, FILE *f) { diags_print_from(d, 1, f); }

/* ---- a string hash map (ids, device type names, anchors) --------------------------------------- */

enum { ID_HOST = 1, ID_NODE, ID_FABRIC, ID_CASE, ID_TYPE, ID_ANCHOR };

typedef struct entry {
    char *key;        /* owned; NULL = free slot */
    uint32_t hash;
    int kind, index;
    int line, col;    /* where it was declared */
    long size;        /* anchors: nodes after expansion */
    bool open;        /* anchors: the anchored collection is not closed yet */
} entry;

typedef struct map {
    entry *e;
    size_t cap, n;
} map;

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; ++s)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void map_fini(map *m)
{
    for (size_t i = 0; i < m->cap; ++i)
        free(m->e[i].key);
    free(m->e);
    memset(m, 0, sizeof *m);
}

static entry *map_find(const map *m, const char *key)
{
    if (!m->cap)
        return NULL;
    uint32_t h = hash_str(key);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        entry *e = &m->e[i];
        if (!e->key)
            return NULL;
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    }
}

static bool map_grow(map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    entry *e = calloc(cap, sizeof *e);
    if (!e)
        return false;
    for (size_t i = 0; i < m->cap; ++i) {
        if (!m->e[i].key)
            continue;
        size_t j = m->e[i].hash & (cap - 1);
        while (e[j].key)
            j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = cap;
    return true;
}

/* Insert key (not present yet). NULL when out of memory. */
static entry *map_insert(map *m, const char *key)
{
    if ((m->n + 1) * 10 > m->cap * 7 && !map_grow(m))
        return NULL;
    size_t len = strlen(key);
    char *k = malloc(len + 1);
    if (!k)
        return NULL;
    memcpy(k, key, len + 1);
    uint32_t h = hash_str(key);
    size_t i = h & (m->cap - 1);
    while (m->e[i].key)
        i = (i + 1) & (m->cap - 1);
    m->e[i] = (entry){.key = k, .hash = h};
    m->n++;
    return &m->e[i];
}

/* Levenshtein distance, or 3 when it is more than 2 (all "did you mean" needs). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || la > lb + 2 || lb > la + 2)
        return 3;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; ++j)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; ++i) {
        cur[0] = (int)i;
        int rowmin = cur[0];
        for (size_t j = 1; j <= lb; ++j) {
            int best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
            if (best < rowmin)
                rowmin = best;
        }
        if (rowmin > 2)
            return 3;
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb] > 2 ? 3 : prev[lb];
}

/* Whether cand is a better "did you mean" for typed than hint (at distance *best): within
 * distance 2, not a rewrite of a whole short word, closer, or as close and first in byte order
 * (so that the hint does not depend on hash order). */
static bool closer(const char *typed, const char *cand, int *best, const char *hint)
{
    int d = edit_distance(typed, cand);
    if (d > 2 || d > *best || (size_t)d >= strlen(typed) || (size_t)d >= strlen(cand))
        return false;
    if (d == *best && (!hint || strcmp(cand, hint) >= 0))
        return false;
    *best = d;
    return true;
}

/* ---- the loader context ------------------------------------------------------------------------ */

/* ---- the document: a compact tree with a location on every node ---------------------------------
 * Built from libyaml's event stream in one pass (build_doc). Aliases point at the anchored node
 * (the tree is a DAG, like libyaml's document), so a node may have several parents. */

typedef enum ytype { Y_SCALAR = 0, Y_SEQ, Y_MAP } ytype;

typedef struct ynode {
    uint8_t type;     /* ytype */
    bool plain;       /* scalars: written without quotes (a plain `<<` is a merge key) */
    int line, col;    /* 1-based */
    uint32_t len;     /* scalar: bytes; list: items; mapping: pairs */
    uint32_t off;     /* list and mapping: first child in kids (mappings: key, value, ...) */
    const char *text; /* scalars: NUL-terminated text (it may also hold NUL bytes: see len) */
} ynode;

typedef struct ydoc {
    ynode *nodes;
    uint32_t n_nodes;
    size_t cap_nodes;
    uint32_t *kids;
    size_t n_kids, cap_kids;
    char *str;        /* scalar texts, each followed by a NUL */
    size_t n_str, cap_str;
    int root;         /* -1: the stream holds no document */
} ydoc;

typedef struct attach_ref {
    int node;                /* the NIC */
    int value;               /* the attach value (a document node) */
    int host_pos, nic_pos;   /* positions in hosts and in the host's nics, for messages */
} attach_ref;

typedef struct ld {
    const char *file;
    const unsigned char *text;
    size_t len;
    ydoc doc;
    qm_topology *t;
    qm_diags *diags;
    qm_status *st;
    int n_err;
    qm_diag *errs;               /* this load's errors (QM_DIAGS_PER_LOAD + 1), sorted at the end */
    qm_diag first;               /* the first error, kept even when errs cannot be allocated */
    bool stop;
    int host_pos, item_pos;      /* positions of the host and list entry being loaded */
    int n_ref_hints;             /* "did you mean" searches over all ids are limited per load */
    /* the subject of messages: a YAML path, kept as segments and rendered only for an error */
    struct {
        const char *key; /* static or document text; NULL for a list index */
        int index;
    } segs[32];
    size_t n_segs;
    map ids, types;
    int cap_types, cap_hosts, cap_nodes, cap_links, cap_fabrics, cap_gpus;
    attach_ref *attach;
    int n_attach, cap_attach;
    int *fabric_yaml;            /* per fabric: its YAML mapping */
    int *fabric_pos;             /* per fabric: its position in the fabrics list */
} ld;

static void add_diag(ld *L, qm_code code, int line, int col, const char *msg)
{
    if (L->stop)
        return;
    qm_diag d = {.code = code, .line = line, .col = col};
    snprintf(d.file, sizeof d.file, "%s", L->file);
    snprintf(d.msg, sizeof d.msg, "%s", msg);
    if (L->n_err == QM_DIAGS_PER_LOAD) {
        snprintf(d.msg, sizeof d.msg, "too many errors: stopping after %d (fix the ones above first)",
                 QM_DIAGS_PER_LOAD);
        L->stop = true;
    }
    if (L->n_err == 0)
        L->first = d;
    if (!L->errs)
        L->errs = malloc((QM_DIAGS_PER_LOAD + 1) * sizeof *L->errs);
    if (L->errs)
        L->errs[L->n_err] = d;
    L->n_err++;
}

/* Hand the errors over: sorted by location (the "too many errors" entry stays last), the first
 * one into st, all of them into diags. */
static void finish_diags(ld *L)
{
    if (L->n_err == 0)
        return;
    if (L->errs) {
        int n = L->stop ? L->n_err - 1 : L->n_err;
        for (int i = 1; i < n; ++i) { /* insertion sort: stable, and n <= 50 */
            qm_diag d = L->errs[i];
            int j = i;
            for (; j > 0 && (L->errs[j - 1].line > d.line ||
                             (L->errs[j - 1].line == d.line && L->errs[j - 1].col > d.col));
                 --j)
                L->errs[j] = L->errs[j - 1];
            L->errs[j] = d;
        }
        L->first = L->errs[0];
        for (int i = 0; i < L->n_err; ++i)
            qm_diags_add(L->diags, L->errs[i].code, L->errs[i].file, L->errs[i].line,
                         L->errs[i].col, L->errs[i].msg);
    } else {
        qm_diags_add(L->diags, L->first.code, L->first.file, L->first.line, L->first.col,
                     L->first.msg);
    }
    if (L->st) {
        qm_fail(L->st, L->first.code, "%s", L->first.msg);
        if (L->first.line > 0)
            qm_status_locate(L->st, L->file, L->first.line, L->first.col);
    }
}

/* An error at (line, col) with the current path as subject. */
static void err_loc(ld *L, int line, int col, qm_code code, const char *fmt, ...) QM_PRINTF(5, 6);
static void err_loc(ld *L, int line, int col, qm_code code, const char *fmt, ...)
{
    if (L->stop)
        return;
    char msg[QM_STATUS_MSG_BYTES];
    size_t used = 0;
    if (!L->n_segs)
        used = (size_t)snprintf(msg, 256, "scenario");
    for (size_t i = 0; i < L->n_segs && used < 256; ++i) {
        if (L->segs[i].key)
            used += (size_t)snprintf(msg + used, 256 - used, "%s%.64s", i ? "." : "",
                                     L->segs[i].key);
        else
            used += (size_t)snprintf(msg + used, 256 - used, "[%d]", L->segs[i].index);
    }
    if (used > 255)
        used = 255;
    msg[used++] = ':';
    msg[used++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + used, sizeof msg - used, fmt, ap);
    va_end(ap);
    add_diag(L, code, line, col, msg);
}

#define LINE(n) ((n)->line)
#define COL(n) ((n)->col)
#define err(L, n, code, ...) err_loc((L), LINE(n), COL(n), (code), __VA_ARGS__)

static void nomem(ld *L)
{
    add_diag(L, QM_E_NOMEM, 0, 0, "scenario: out of memory while loading");
    L->stop = true;
}

/* Path segments: push returns the depth to pop back to. Deeper than 32 is not recorded. */
static size_t path_key(ld *L, const char *key)
{
    size_t old = L->n_segs;
    if (key && old < sizeof L->segs / sizeof L->segs[0]) {
        L->segs[old].key = key;
        L->n_segs = old + 1;
    }
    return old;
}

static size_t path_index(ld *L, int i)
{
    size_t old = L->n_segs;
    if (old < sizeof L->segs / sizeof L->segs[0]) {
        L->segs[old].key = NULL;
        L->segs[old].index = i;
        L->n_segs = old + 1;
    }
    return old;
}

static void path_pop(ld *L, size_t old)
{
    L->n_segs = old;
}

static bool grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- YAML node access --------------------------------------------------------------------------- */

static ynode *node_at(ld *L, int index)
{
    return &L->doc.nodes[index];
}

static const char *what_is(const ynode *n, char *buf, size_t cap)
{
    if (!n)
        return "nothing";
    if (n->type == Y_MAP)
        return "a mapping";
    if (n->type == Y_SEQ)
        return "a list";
    if (n->len == 0)
        return "an empty value";
    snprintf(buf, cap, "'%.40s'", n->text);
    return buf;
}

static int seq_count(const ynode *n)
{
    return (int)n->len;
}

static ynode *seq_item(ld *L, const ynode *n, int i)
{
    return node_at(L, (int)L->doc.kids[n->off + (uint32_t)i]);
}

/* The key and the value of the i-th pair of a mapping. */
static ynode *pair_key(ld *L, const ynode *n, uint32_t i)
{
    return node_at(L, (int)L->doc.kids[n->off + 2 * i]);
}

static ynode *pair_value(ld *L, const ynode *n, uint32_t i)
{
    return node_at(L, (int)L->doc.kids[n->off + 2 * i + 1]);
}

/* The node must be a list; E-TYPE otherwise. */
static bool want_seq(ld *L, ynode *n, const char *of)
{
    if (n->type == Y_SEQ)
        return true;
    char buf[64];
    err(L, n, QM_E_TYPE, "expected a list of %s, got %s", of, what_is(n, buf, sizeof buf));
    return false;
}

/* A scalar's text; E-TYPE (and NULL) for a mapping, a list, or a text with a NUL character. */
static const char *scalar(ld *L, ynode *n, const char *expected)
{
    if (n->type != Y_SCALAR) {
        err(L, n, QM_E_TYPE, "expected %s, got %s", expected, what_is(n, NULL, 0));
        return NULL;
    }
    const char *s = n->text;
    if (strlen(s) != n->len) {
        err(L, n, QM_E_TYPE, "expected %s, got a text with a NUL character", expected);
        return NULL;
    }
    return s;
}

typedef struct fld {
    const char *key;
    bool required;
} fld;

#define MAX_FIELDS 16

/* Check a mapping against its keys: E-TYPE when it is not a mapping, E-MERGE-KEY for `<<`,
 * E-UNKNOWN-KEY (with a "did you mean"), E-DUP-KEY, E-MISSING-FIELD. vals[i] is the value of
 * spec[i] (NULL when absent). Returns false when n is not a mapping. */
static bool fields(ld *L, ynode *n, const fld *spec, int n_spec, ynode **vals,
                   const char *what)
{
    ynode *keys[MAX_FIELDS];
    for (int i = 0; i < n_spec; ++i)
        vals[i] = keys[i] = NULL;
    if (n->type != Y_MAP) {
        char buf[64];
        err(L, n, QM_E_TYPE, "expected %s (a mapping), got %s", what, what_is(n, buf, sizeof buf));
        return false;
    }
    for (uint32_t p = 0; p < n->len; ++p) {
        ynode *k = pair_key(L, n, p), *v = pair_value(L, n, p);
        if (L->stop)
            break;
        if (k->type != Y_SCALAR) {
            err(L, k, QM_E_TYPE, "a key must be a plain name, got %s", what_is(k, NULL, 0));
            continue;
        }
        const char *key = k->text;
        if (strcmp(key, "<<") == 0 && k->plain) {
            err(L, k, QM_E_MERGE_KEY,
                "merge keys ('<<') are not allowed in qmesh/1; write the keys out in full");
            continue;
        }
        int idx = -1;
        for (int i = 0; i < n_spec; ++i)
            if (strcmp(spec[i].key, key) == 0)
                idx = i;
        if (idx < 0) {
            int best = 3;
            const char *hint = NULL;
            for (int i = 0; i < n_spec; ++i)
                if (closer(key, spec[i].key, &best, hint))
                    hint = spec[i].key;
            if (hint) {
                err(L, k, QM_E_UNKNOWN_KEY, "unknown key '%.64s' in %s; did you mean '%s'?", key,
                    what, hint);
            } else {
                char list[256] = "";
                size_t used = 0;
                for (int i = 0; i < n_spec && used < sizeof list; ++i)
                    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                             i ? ", " : "", spec[i].key);
                err(L, k, QM_E_UNKNOWN_KEY, "unknown key '%.64s' in %s; allowed keys: %s", key,
                    what, list);
            }
            continue;
        }
        if (vals[idx]) {
            err(L, k, QM_E_DUP_KEY, "duplicate key '%s' in %s (first at line %d, column %d)", key,
                what, LINE(keys[idx]), COL(keys[idx]));
            continue;
        }
        vals[idx] = v;
        keys[idx] = k;
    }
    for (int i = 0; i < n_spec; ++i)
        if (spec[i].required && !vals[i])
            err(L, n, QM_E_MISSING_FIELD, "%s is missing the required key '%s'", what, spec[i].key);
    return true;
}

/* ---- typed values ------------------------------------------------------------------------------- */

static bool get_str(ld *L, ynode *n, const char *key, char *dst, size_t cap)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, "a string");
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
    path_pop(L, old);
    return ok;
}

static bool id_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_.:/@+-", c) != NULL;
}

/* An id: 1..63 bytes of letters, digits and _ . : / @ + - */
static bool get_id(ld *L, ynode *n, const char *key, char dst[QM_ID_BYTES])
{
    char tmp[QM_ID_BYTES];
    if (!get_str(L, n, key, tmp, sizeof tmp))
        return false;
    for (const char *c = tmp; *c; ++c) {
        if (!id_char_ok(*c)) {
            size_t old = path_key(L, key);
            err(L, n, QM_E_TYPE,
                "'%s' is not a valid id: '%c' is not allowed (use letters, digits and _ . : / @ "
                "+ -)",
                tmp, *c);
            path_pop(L, old);
            return false;
        }
    }
    memcpy(dst, tmp, sizeof tmp);
    return true;
}

static bool get_uint(ld *L, ynode *n, const char *key, uint64_t min, uint64_t max,
                     uint64_t *out)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, "an integer");
    if (s) {
        qm_status st;
        qm_status_clear(&st);
        if (qm_units_parse_uint(s, min, max, out, &st) == QM_OK)
            ok = true;
        else
            err(L, n, st.code, "%s", st.msg);
    }
    path_pop(L, old);
    return ok;
}

static bool get_real(ld *L, ynode *n, const char *key, double *out)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, "a number");
    if (s) {
        qm_status st;
        qm_status_clear(&st);
        if (qm_units_parse_real(s, out, &st) == QM_OK)
            ok = true;
        else
            err(L, n, st.code, "%s", st.msg);
    }
    path_pop(L, old);
    return ok;
}

static bool get_bool(ld *L, ynode *n, const char *key, bool *out)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, "true or false");
    if (s) {
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
            *out = s[0] == 't';
            ok = true;
        } else {
            err(L, n, QM_E_TYPE, "'%.40s' is not a boolean; use true or false", s);
        }
    }
    path_pop(L, old);
    return ok;
}

static bool get_dim(ld *L, ynode *n, const char *key, qm_unit_dim dim, unsigned flags,
                    uint64_t *size, double *real)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, dim == QM_UNIT_SIZE        ? "a size such as '80 GiB'"
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
    path_pop(L, old);
    return ok;
}

static bool get_size(ld *L, ynode *n, const char *key, unsigned flags, uint64_t *out)
{
    return get_dim(L, n, key, QM_UNIT_SIZE, flags, out, NULL);
}

static bool get_bw(ld *L, ynode *n, const char *key, double *out)
{
    return get_dim(L, n, key, QM_UNIT_BANDWIDTH, 0, NULL, out);
}

static bool get_time(ld *L, ynode *n, const char *key, double *out)
{
    return get_dim(L, n, key, QM_UNIT_TIME, QM_UNITS_ALLOW_ZERO, NULL, out);
}

/* One of names[0..count); E-ENUM with a "did you mean" and the list otherwise. */
static bool get_enum_list(ld *L, ynode *n, const char *key, const char *const *names,
                          int count, const char *what, const char *shown, int *out)
{
    size_t old = path_key(L, key);
    bool ok = false;
    const char *s = scalar(L, n, what);
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
                if (closer(s, names[i], &best, hint))
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
    path_pop(L, old);
    return ok;
}

static bool get_enum(ld *L, ynode *n, const char *key, const char *const *names, int count,
                     const char *what, int *out)
{
    return get_enum_list(L, n, key, names, count, what, NULL, out);
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
static bool register_id(ld *L, ynode *at, const char *id, int kind, int index)
{
    entry *e = map_find(&L->ids, id);
    if (e) {
        err(L, at, QM_E_DUP_ID, "id '%s' is already used by %s at line %d, column %d", id,
            entry_kind_name(L, e), e->line, e->col);
        return false;
    }
    e = map_insert(&L->ids, id);
    if (!e) {
        nomem(L);
        return false;
    }
    e->kind = kind;
    e->index = index;
    e->line = LINE(at);
    e->col = COL(at);
    return true;
}

enum want { WANT_NODE, WANT_GPU, WANT_SWITCH, WANT_HOST };

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
static int resolve(ld *L, ynode *n, const char *key, enum want w)
{
    char id[QM_ID_BYTES];
    if (!get_id(L, n, key, id))
        return -1;
    size_t old = path_key(L, key);
    int r = -1;
    entry *e = map_find(&L->ids, id);
    if (e) {
        r = entry_target(L, e, w);
        if (r < 0) {
            if (e->kind == ID_FABRIC && w != WANT_HOST)
                err(L, n, QM_E_UNKNOWN_REF,
                    "'%s' is a fabric with the switch '%s', not %s; name the switch instead", id,
                    L->t->nodes[L->t->fabrics[e->index].switch_node].id, want_name(w));
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
                if (c->key && entry_target(L, c, w) >= 0 && closer(id, c->key, &best, hint))
                    hint = c->key;
            }
        }
        if (hint)
            err(L, n, QM_E_UNKNOWN_REF, "unknown id '%s'; did you mean '%s'?", id, hint);
        else
            err(L, n, QM_E_UNKNOWN_REF, "unknown id '%s' (expected %s declared in this file)", id,
                want_name(w));
    }
    path_pop(L, old);
    return r;
}

/* ---- building the topology ---------------------------------------------------------------------- */

static int add_node(ld *L, qm_node_kind kind, int host, const ynode *at)
{
    qm_topology *t = L->t;
    if (!grow((void **)&t->nodes, &L->cap_nodes, t->n_nodes + 1, sizeof *t->nodes)) {
        nomem(L);
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
    if (!grow((void **)&t->links, &L->cap_links, t->n_links + 1, sizeof *t->links)) {
        nomem(L);
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
    size_t old = path_key(L, "schema");
    const char *s = scalar(L, v, "'qmesh/1'");
    if (s && strcmp(s, "qmesh/1") != 0)
        err(L, v, QM_E_SCHEMA_VERSION, "'%.40s' is not supported; this qmesh reads 'qmesh/1'", s);
    else if (s)
        *go_on = true;
    path_pop(L, old);
}

static void load_sources(ld *L, ynode *n)
{
    size_t old = path_key(L, "sources");
    if (want_seq(L, n, "strings")) {
        int count = seq_count(n);
        L->t->sources = calloc((size_t)count + 1, sizeof *L->t->sources);
        if (!L->t->sources)
            nomem(L);
        for (int i = 0; i < count && !L->stop; ++i) {
            size_t o2 = path_index(L, i);
            ynode *it = seq_item(L, n, i);
            const char *s = scalar(L, it, "a string");
            if (s && !*s)
                err(L, it, QM_E_TYPE, "must not be empty");
            else if (s && !(L->t->sources[L->t->n_sources++] = dup_str(s)))
                nomem(L);
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
}

static void load_defaults(ld *L, ynode *n)
{
    static const fld spec[] = {{"reserve", false}, {"efficiency", false}, {"latency", false}};
    ynode *v[3];
    qm_topology *t = L->t;
    size_t old = path_key(L, "defaults");
    if (fields(L, n, spec, 3, v, "defaults")) {
        if (v[0])
            get_size(L, v[0], "reserve", QM_UNITS_ALLOW_ZERO, &t->default_reserve_bytes);
        if (v[1]) {
            static const fld eff[] = {{"nvlink", false}, {"c2c", false}, {"pcie", false},
                                      {"sys", false},    {"net", false}, {"hbm", false}};
            ynode *e[6];
            size_t o2 = path_key(L, "efficiency");
            if (fields(L, v[1], eff, 6, e, "defaults.efficiency")) {
                for (int i = 0; i < 6; ++i) {
                    double x;
                    if (!e[i] || !get_real(L, e[i], eff[i].key, &x))
                        continue;
                    if (!(x > 0 && x <= 1)) {
                        size_t o3 = path_key(L, eff[i].key);
                        err(L, e[i], QM_E_RANGE, "efficiency %g is outside (0, 1]", x);
                        path_pop(L, o3);
                    } else if (i < QM_LINK_CLASS_COUNT_) {
                        t->efficiency[i] = x;
                    } else {
                        t->hbm_efficiency = x;
                    }
                }
            }
            path_pop(L, o2);
        }
        if (v[2]) {
            static const fld lat[] = {{"nvlink", false}, {"c2c", false}, {"pcie", false},
                                      {"sys", false},    {"net", false}};
            ynode *e[5];
            size_t o2 = path_key(L, "latency");
            if (fields(L, v[2], lat, 5, e, "defaults.latency"))
                for (int i = 0; i < 5; ++i)
                    if (e[i])
                        get_time(L, e[i], lat[i].key, &t->latency_s[i]);
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
}

static void load_device_types(ld *L, ynode *n)
{
    static const fld spec[] = {{"name", true},     {"memory", true}, {"hbm_bandwidth", true},
                               {"sm_count", false}, {"arch", false}};
    qm_topology *t = L->t;
    size_t old = path_key(L, "device_types");
    if (want_seq(L, n, "device types")) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            size_t o2 = path_index(L, i);
            ynode *it = seq_item(L, n, i), *v[5];
            if (fields(L, it, spec, 5, v, "a device type")) {
                if (!grow((void **)&t->device_types, &L->cap_types, t->n_device_types + 1,
                          sizeof *t->device_types)) {
                    nomem(L);
                    break;
                }
                int ti = t->n_device_types++;
                qm_device_type *dt = &t->device_types[ti];
                memset(dt, 0, sizeof *dt);
                dt->loc = (qm_loc){LINE(it), COL(it)};
                if (v[0] && get_id(L, v[0], "name", dt->name)) {
                    entry *e = map_find(&L->types, dt->name);
                    if (e) {
                        size_t o3 = path_key(L, "name");
                        err(L, v[0], QM_E_DUP_ID,
                            "device type '%s' is already declared at line %d, column %d",
                            dt->name, e->line, e->col);
                        path_pop(L, o3);
                    } else if (!(e = map_insert(&L->types, dt->name))) {
                        nomem(L);
                    } else {
                        e->kind = ID_TYPE;
                        e->index = ti;
                        e->line = LINE(v[0]);
                        e->col = COL(v[0]);
                    }
                }
                if (v[1])
                    get_size(L, v[1], "memory", 0, &dt->memory_bytes);
                if (v[2])
                    get_bw(L, v[2], "hbm_bandwidth", &dt->hbm_bw_bytes_per_s);
                uint64_t sm = 0;
                if (v[3] && get_uint(L, v[3], "sm_count", 1, 1000000, &sm))
                    dt->sm_count = (int)sm;
                if (v[4])
                    get_str(L, v[4], "arch", dt->arch, sizeof dt->arch);
            }
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
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
    if (!get_uint(L, n, "numa", 0, 1000000, &k))
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
    size_t old = path_key(L, "numa");
    if (h->numa_count)
        err(L, n, QM_E_NUMA, "NUMA node %llu is not declared on host '%s' (declared: %s)",
            (unsigned long long)k, t->hosts[h->host].id, list);
    else
        err(L, n, QM_E_NUMA,
            "NUMA node %llu is not declared on host '%s' (it declares none; add numa: [{id: %llu}])",
            (unsigned long long)k, t->hosts[h->host].id, (unsigned long long)k);
    path_pop(L, old);
}

static void load_device(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true},      {"type", false},    {"numa", false},
                               {"memory", false}, {"reserve", false}, {"hbm_bandwidth", false}};
    enum { F_ID, F_TYPE, F_NUMA, F_MEMORY, F_RESERVE, F_HBM };
    ynode *v[6];
    qm_topology *t = L->t;
    if (!fields(L, it, spec, 6, v, "a device"))
        return;
    int ni = add_node(L, QM_NODE_GPU, h->host, it);
    if (ni < 0)
        return;
    if (!grow((void **)&t->gpus, &L->cap_gpus, t->n_gpus + 1, sizeof *t->gpus)) {
        nomem(L);
        return;
    }
    t->gpus[t->n_gpus++] = ni;
    qm_node *nd = &t->nodes[ni];
    if (v[F_ID] && get_id(L, v[F_ID], "id", nd->id))
        register_id(L, v[F_ID], nd->id, ID_NODE, ni);
    bool have_mem = false, have_bw = false, bad = false;
    if (v[F_TYPE]) {
        char name[QM_ID_BYTES];
        if (get_id(L, v[F_TYPE], "type", name)) {
            entry *e = map_find(&L->types, name);
            if (e) {
                nd->type = e->index;
                nd->memory_bytes = t->device_types[e->index].memory_bytes;
                nd->hbm_bw_bytes_per_s = t->device_types[e->index].hbm_bw_bytes_per_s;
                have_mem = have_bw = true;
            } else {
                const char *hint = NULL;
                int best = 3;
                for (int i = 0; i < t->n_device_types; ++i)
                    if (closer(name, t->device_types[i].name, &best, hint))
                        hint = t->device_types[i].name;
                size_t old = path_key(L, "type");
                if (hint)
                    err(L, v[F_TYPE], QM_E_UNKNOWN_REF,
                        "unknown device type '%s'; did you mean '%s'?", name, hint);
                else
                    err(L, v[F_TYPE], QM_E_UNKNOWN_REF,
                        "unknown device type '%s' (declare it under device_types)", name);
                path_pop(L, old);
            }
        }
        bad = !have_mem;
    }
    if (v[F_MEMORY]) {
        have_mem = get_size(L, v[F_MEMORY], "memory", 0, &nd->memory_bytes);
        bad = bad || !have_mem;
    }
    if (v[F_HBM]) {
        have_bw = get_bw(L, v[F_HBM], "hbm_bandwidth", &nd->hbm_bw_bytes_per_s);
        bad = bad || !have_bw;
    }
    if (!v[F_TYPE] && (!v[F_MEMORY] || !v[F_HBM]))
        err(L, it, QM_E_MISSING_FIELD,
            "a device needs 'type' or both 'memory' and 'hbm_bandwidth' (missing '%s')",
            !v[F_MEMORY] ? "memory" : "hbm_bandwidth");
    nd->reserve_bytes = t->default_reserve_bytes;
    bool have_reserve = true;
    if (v[F_RESERVE])
        have_reserve = get_size(L, v[F_RESERVE], "reserve", QM_UNITS_ALLOW_ZERO,
                                &nd->reserve_bytes);
    if (have_mem && have_reserve && !bad && nd->reserve_bytes >= nd->memory_bytes) {
        char r[32], m[32];
        qm_format_bytes(nd->reserve_bytes, r, sizeof r);
        qm_format_bytes(nd->memory_bytes, m, sizeof m);
        size_t old = path_key(L, v[F_RESERVE] ? "reserve" : NULL);
        err(L, v[F_RESERVE] ? v[F_RESERVE] : it, QM_E_RESERVE,
            "reserve %s (%llu B%s) is not below the device memory %s (%llu B); nothing would be "
            "usable",
            r, (unsigned long long)nd->reserve_bytes, v[F_RESERVE] ? "" : ", from defaults.reserve",
            m, (unsigned long long)nd->memory_bytes);
        path_pop(L, old);
    }
    if (v[F_NUMA])
        get_numa(L, v[F_NUMA], h, &t->nodes[ni].numa);
}

static void load_switch(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true}, {"kind", true}, {"numa", false}};
    static const char *const kinds[] = {"pcie_switch", "nvswitch"};
    ynode *v[3];
    if (!fields(L, it, spec, 3, v, "a switch"))
        return;
    int kind = 0;
    if (v[1])
        get_enum(L, v[1], "kind", kinds, 2, "switch kind", &kind);
    int ni = add_node(L, kind == 0 ? QM_NODE_PCIE_SWITCH : QM_NODE_NVSWITCH, h->host, it);
    if (ni < 0)
        return;
    if (v[0] && get_id(L, v[0], "id", L->t->nodes[ni].id))
        register_id(L, v[0], L->t->nodes[ni].id, ID_NODE, ni);
    if (v[2])
        get_numa(L, v[2], h, &L->t->nodes[ni].numa);
}

static void load_nic(ld *L, ynode *it, const host_ctx *h)
{
    static const fld spec[] = {{"id", true}, {"speed", true}, {"numa", false}, {"attach", false}};
    ynode *v[4];
    if (!fields(L, it, spec, 4, v, "a NIC"))
        return;
    int ni = add_node(L, QM_NODE_NIC, h->host, it);
    if (ni < 0)
        return;
    if (v[0] && get_id(L, v[0], "id", L->t->nodes[ni].id))
        register_id(L, v[0], L->t->nodes[ni].id, ID_NODE, ni);
    if (v[1])
        get_bw(L, v[1], "speed", &L->t->nodes[ni].nic_bw_bytes_per_s);
    if (v[2])
        get_numa(L, v[2], h, &L->t->nodes[ni].numa);
    if (v[3]) {
        /* resolved once every host is known: the switch may be declared later */
        if (!grow((void **)&L->attach, &L->cap_attach, L->n_attach + 1, sizeof *L->attach)) {
            nomem(L);
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
    size_t old = path_key(L, key);
    if (want_seq(L, n, of)) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            size_t o2 = path_index(L, i);
            L->item_pos = i;
            fn(L, seq_item(L, n, i), h);
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
}

static void load_host(ld *L, ynode *it)
{
    static const fld spec[] = {{"id", true},      {"memory", false},   {"numa", false},
                               {"devices", false}, {"switches", false}, {"nics", false}};
    enum { F_ID, F_MEMORY, F_NUMA, F_DEVICES, F_SWITCHES, F_NICS };
    ynode *v[6];
    qm_topology *t = L->t;
    if (!fields(L, it, spec, 6, v, "a host"))
        return;
    if (!grow((void **)&t->hosts, &L->cap_hosts, t->n_hosts + 1, sizeof *t->hosts)) {
        nomem(L);
        return;
    }
    host_ctx h = {.host = t->n_hosts++, .numa_first = t->n_nodes};
    qm_host *ho = &t->hosts[h.host];
    memset(ho, 0, sizeof *ho);
    ho->loc = (qm_loc){LINE(it), COL(it)};
    if (v[F_ID] && get_id(L, v[F_ID], "id", ho->id))
        register_id(L, v[F_ID], ho->id, ID_HOST, h.host);
    if (v[F_MEMORY])
        get_size(L, v[F_MEMORY], "memory", 0, &t->hosts[h.host].memory_bytes);
    if (v[F_NUMA]) {
        size_t old = path_key(L, "numa");
        if (want_seq(L, v[F_NUMA], "NUMA nodes like {id: 0}")) {
            for (int i = 0; i < seq_count(v[F_NUMA]) && !L->stop; ++i) {
                static const fld nspec[] = {{"id", true}};
                ynode *ne = seq_item(L, v[F_NUMA], i), *nv[1];
                size_t o2 = path_index(L, i);
                uint64_t k;
                if (fields(L, ne, nspec, 1, nv, "a NUMA node") && nv[0] &&
                    get_uint(L, nv[0], "id", 0, 1000000, &k)) {
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
                                register_id(L, nv[0], t->nodes[ni].id, ID_NODE, ni);
                        }
                    }
                }
                path_pop(L, o2);
            }
        }
        path_pop(L, old);
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
        path_key(L, "hosts");
        path_index(L, L->attach[i].host_pos);
        path_key(L, "nics");
        path_index(L, L->attach[i].nic_pos);
        int target = resolve(L, v, "attach", WANT_NODE);
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
        path_pop(L, 0);
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
    size_t old = path_key(L, "fabrics");
    if (want_seq(L, n, "fabrics")) {
        int count = seq_count(n);
        t->fabrics = calloc((size_t)count + 1, sizeof *t->fabrics);
        L->fabric_yaml = calloc((size_t)count + 1, sizeof *L->fabric_yaml);
        L->fabric_pos = calloc((size_t)count + 1, sizeof *L->fabric_pos);
        if (!t->fabrics || !L->fabric_yaml || !L->fabric_pos) {
            nomem(L);
            count = 0;
        }
        for (int i = 0; i < count && !L->stop; ++i) {
            static const fld spec[] = {{"id", true},      {"kind", true},
                                       {"switch", false}, {"members", true},
                                       {"port_bandwidth", true}, {"latency", false}};
            ynode *it = seq_item(L, n, i), *v[6];
            size_t o2 = path_index(L, i);
            if (fields(L, it, spec, 6, v, "a fabric")) {
                int fi = t->n_fabrics++;
                qm_fabric *f = &t->fabrics[fi];
                L->fabric_yaml[fi] = (int)(it - L->doc.nodes);
                L->fabric_pos[fi] = i;
                f->loc = (qm_loc){LINE(it), COL(it)};
                f->switch_node = -1;
                f->latency_s = -1;
                if (v[0] && get_id(L, v[0], "id", f->id))
                    register_id(L, v[0], f->id, ID_FABRIC, fi);
                if (!v[2]) {
                    int sw = add_node(L, QM_NODE_FABRIC_SWITCH, -1, it);
                    if (sw >= 0) {
                        memcpy(t->nodes[sw].id, f->id, sizeof f->id);
                        f->switch_node = sw;
                        f->implicit_switch = true;
                    }
                }
            }
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
}

/* Fabrics, second step: kind, switch, members, bandwidth, latency; cross-host checks. */
static void load_fabric(ld *L, int fi)
{
    static const fld spec[] = {{"id", true},      {"kind", true},
                               {"switch", false}, {"members", true},
                               {"port_bandwidth", true}, {"latency", false}};
    qm_topology *t = L->t;
    ynode *it = node_at(L, L->fabric_yaml[fi]), *v[6];
    size_t old = path_key(L, "fabrics");
    path_index(L, L->fabric_pos[fi]);
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
    bool cls_ok = v[1] && get_enum(L, v[1], "kind", class_names, QM_LINK_CLASS_COUNT_,
                                   "link kind", &cls);
    qm_fabric *f = &t->fabrics[fi];
    f->cls = (qm_link_class)cls;
    if (v[2]) {
        int sw = resolve(L, v[2], "switch", WANT_SWITCH);
        f = &t->fabrics[fi];
        f->switch_node = sw;
    }
    if (v[4])
        get_bw(L, v[4], "port_bandwidth", &f->port_bw_bytes_per_s);
    if (v[5])
        get_time(L, v[5], "latency", &f->latency_s);
    int host = -2; /* the members' host; -2: none yet; -1: more than one */
    if (v[3]) {
        size_t o2 = path_key(L, "members");
        if (want_seq(L, v[3], "member ids")) {
            int count = seq_count(v[3]);
            f->members = calloc((size_t)count + 1, sizeof *f->members);
            if (!f->members)
                nomem(L);
            if (count == 0)
                err(L, v[3], QM_E_RANGE, "a fabric needs at least one member (got an empty list)");
            for (int i = 0; i < count && f->members && !L->stop; ++i) {
                ynode *mv = seq_item(L, v[3], i);
                size_t o3 = path_index(L, i);
                int m = resolve(L, mv, NULL, WANT_NODE);
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
                path_pop(L, o3);
            }
        }
        path_pop(L, o2);
    }
    if (f->implicit_switch && f->switch_node >= 0 && host >= 0)
        t->nodes[f->switch_node].host = host;
    /* pcie, nvlink, c2c and sys stay inside one host; errors point at the fabric entry */
    int sh = f->switch_node >= 0 ? t->nodes[f->switch_node].host : -1;
    for (int i = 0; cls_ok && f->cls != QM_LINK_NET && i < f->n_members; ++i) {
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
            class_names[f->cls], f->id, t->nodes[f->members[i]].id, host_name(t, mh),
            f->implicit_switch ? "members" : "its switch", host_name(t, other));
        break;
    }
    path_pop(L, old);
}

static void load_links(ld *L, ynode *n)
{
    static const fld spec[] = {{"a", true},         {"b", true},        {"kind", true},
                               {"bandwidth", true}, {"latency", false}};
    qm_topology *t = L->t;
    size_t old = path_key(L, "links");
    if (want_seq(L, n, "links")) {
        for (int i = 0; i < seq_count(n) && !L->stop; ++i) {
            ynode *it = seq_item(L, n, i), *v[5];
            size_t o2 = path_index(L, i);
            if (fields(L, it, spec, 5, v, "a link")) {
                int li = add_link(L);
                if (li < 0)
                    break;
                qm_link *lk = &t->links[li];
                lk->loc = (qm_loc){LINE(it), COL(it)};
                int a = v[0] ? resolve(L, v[0], "a", WANT_NODE) : -1;
                int b = v[1] ? resolve(L, v[1], "b", WANT_NODE) : -1;
                int cls = QM_LINK_NET;
                bool cls_ok = v[2] && get_enum(L, v[2], "kind", class_names,
                                               QM_LINK_CLASS_COUNT_, "link kind", &cls);
                lk->a = a;
                lk->b = b;
                lk->cls = (qm_link_class)cls;
                if (v[3] && v[3]->type == Y_MAP) {
                    static const fld bspec[] = {{"a_to_b", true}, {"b_to_a", true}};
                    ynode *bv[2];
                    size_t o3 = path_key(L, "bandwidth");
                    if (fields(L, v[3], bspec, 2, bv, "a bandwidth per direction")) {
                        if (bv[0])
                            get_bw(L, bv[0], "a_to_b", &lk->bw_ab_bytes_per_s);
                        if (bv[1])
                            get_bw(L, bv[1], "b_to_a", &lk->bw_ba_bytes_per_s);
                    }
                    path_pop(L, o3);
                } else if (v[3] && get_bw(L, v[3], "bandwidth", &lk->bw_ab_bytes_per_s)) {
                    lk->bw_ba_bytes_per_s = lk->bw_ab_bytes_per_s;
                }
                if (v[4])
                    get_time(L, v[4], "latency", &lk->latency_s);
                if (a >= 0 && a == b) {
                    size_t o3 = path_key(L, "b");
                    err(L, v[1], QM_E_SELF_LINK, "a link from '%s' to itself", t->nodes[a].id);
                    path_pop(L, o3);
                } else if (a >= 0 && b >= 0 && cls_ok && cls != QM_LINK_NET &&
                           (t->nodes[a].host != t->nodes[b].host || t->nodes[a].host < 0)) {
                    err(L, it, QM_E_CROSS_HOST_LINK,
                        "%s link between '%s' on host '%s' and '%s' on host '%s'; pcie, nvlink, "
                        "c2c and sys links stay within one host (use kind: net)",
                        class_names[cls], t->nodes[a].id, host_name(t, t->nodes[a].host),
                        t->nodes[b].id, host_name(t, t->nodes[b].host));
                }
            }
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
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
    size_t old = path_key(L, "ranks");
    t->ranks_given = true;
    if (!want_seq(L, n, "ranks")) {
        path_pop(L, old);
        return;
    }
    int count = seq_count(n);
    int *owner = malloc(((size_t)t->n_nodes + 1) * sizeof *owner); /* node -> list position */
    int *seen = malloc(((size_t)count + 1) * sizeof *seen);        /* rank -> list position */
    t->ranks = calloc((size_t)count + 1, sizeof *t->ranks);
    if (!owner || !seen || !t->ranks) {
        nomem(L);
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
        size_t o2 = path_index(L, i);
        if (fields(L, it, spec, 3, v, "a rank")) {
            qm_rank_desc *r = &t->ranks[t->n_ranks++];
            r->loc = (qm_loc){LINE(it), COL(it)};
            r->rank = -1;
            r->host = -1;
            uint64_t num;
            if (v[0] && get_uint(L, v[0], "rank", 0, INT_MAX, &num)) {
                size_t o3 = path_key(L, "rank");
                if (num >= (uint64_t)count)
                    err(L, v[0], QM_E_RANK,
                        "rank %llu is out of range: with %d ranks, they are numbered 0..%d",
                        (unsigned long long)num, count, count - 1);
                else if (seen[num] >= 0)
                    err(L, v[0], QM_E_RANK, "rank %llu is listed twice (first at line %d)",
                        (unsigned long long)num, t->ranks[seen[num]].loc.line);
                else
                    seen[num] = t->n_ranks - 1;
                path_pop(L, o3);
                r->rank = (int)num;
            }
            if (v[1])
                r->host = resolve(L, v[1], "host", WANT_HOST);
            if (v[2]) {
                size_t o3 = path_key(L, "devices");
                if (want_seq(L, v[2], "device ids")) {
                    int nd = seq_count(v[2]);
                    r->devices = calloc((size_t)nd + 1, sizeof *r->devices);
                    if (!r->devices)
                        nomem(L);
                    if (nd == 0)
                        err(L, v[2], QM_E_RANK, "rank %d has no devices", r->rank);
                    for (int j = 0; j < nd && r->devices && !L->stop; ++j) {
                        ynode *dv = seq_item(L, v[2], j);
                        size_t o4 = path_index(L, j);
                        int g = resolve(L, dv, NULL, WANT_GPU);
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
                        path_pop(L, o4);
                    }
                }
                path_pop(L, o3);
            }
        }
        path_pop(L, o2);
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
    path_pop(L, old);
}

static void default_ranks(ld *L)
{
    qm_topology *t = L->t;
    t->ranks = calloc((size_t)t->n_hosts + 1, sizeof *t->ranks);
    if (!t->ranks) {
        nomem(L);
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
            nomem(L);
            return;
        }
        t->n_ranks++;
        for (int g = 0; g < t->n_gpus; ++g)
            if (t->nodes[t->gpus[g]].host == h)
                r->devices[r->n_devices++] = t->gpus[g];
    }
}

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
                                                             "phase", "iqp"};
    ynode *v[8];
    size_t old = path_key(L, "request");
    qm_request_init(r);
    if (fields(L, n, spec, 8, v, "a request")) {
        uint64_t u;
        int e;
        if (v[0] && get_uint(L, v[0], "qubits", 0, UINT_MAX, &u))
            r->qubits = (unsigned)u;
        if (v[1] && get_enum(L, v[1], "dtype", dtypes, 2, "dtype", &e))
            r->dtype = e ? QM_DTYPE_COMPLEX128 : QM_DTYPE_COMPLEX64;
        if (v[2] && get_enum(L, v[2], "policy", policies, QM_POLICY_COUNT_, "policy", &e))
            r->policy = (qm_policy)e;
        if (v[3] && get_uint(L, v[3], "batch", 1, UINT64_MAX, &u))
            r->batch = u;
        if (v[4] && get_uint(L, v[4], "features", 1, UINT64_MAX, &u))
            r->features = u;
        if (v[5] && get_enum(L, v[5], "encoding", encodings, QM_ENCODING_COUNT_, "encoding", &e))
            r->encoding = (qm_encoding)e;
        if (v[6]) {
            const char *s = v[6]->type == Y_SCALAR ? v[6]->text
                                                           : NULL;
            if (s && (!strcmp(s, "auto") || !strcmp(s, "host") || !strcmp(s, "none")))
                snprintf(r->gather, sizeof r->gather, "%s", s);
            else {
                int g = resolve(L, v[6], "gather", WANT_GPU);
                if (g >= 0)
                    snprintf(r->gather, sizeof r->gather, "%s", L->t->nodes[g].id);
            }
        }
        if (v[7] && get_uint(L, v[7], "ranks", 1, INT_MAX, &u)) {
            r->ranks = (int)u;
            if (L->t->n_ranks > 0 && r->ranks > L->t->n_ranks) {
                size_t o2 = path_key(L, "ranks");
                err(L, v[7], QM_E_RANK, "the case uses %d ranks but the scenario has %d", r->ranks,
                    L->t->n_ranks);
                path_pop(L, o2);
            }
        }
    }
    path_pop(L, old);
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
    size_t old = path_key(L, "estimates");
    if (fields(L, n, phases, QM_PHASE_COUNT_, pv, "estimates (phase -> {value, rel_tol, kind})")) {
        for (int p = 0; p < QM_PHASE_COUNT_; ++p) {
            ynode *v[3];
            if (!pv[p])
                continue;
            size_t o2 = path_key(L, phase_names[p]);
            qm_expect_estimate *e = &x->estimates[p];
            if (fields(L, pv[p], spec, 3, v, "an estimate")) {
                bool ok = v[0] && get_time(L, v[0], "value", &e->value_s);
                if (v[1] && get_real(L, v[1], "rel_tol", &e->rel_tol)) {
                    if (!(e->rel_tol > 0)) {
                        size_t o3 = path_key(L, "rel_tol");
                        err(L, v[1], QM_E_RANGE, "rel_tol %g must be positive", e->rel_tol);
                        path_pop(L, o3);
                        ok = false;
                    }
                } else {
                    ok = false;
                }
                int k = 0;
                if (v[2] && !get_enum(L, v[2], "kind", kinds, 2, "estimate kind", &k))
                    ok = false;
                e->kind = (qm_estimate_kind)k;
                e->set = ok;
            }
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
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
    size_t old = path_key(L, "expect");
    x->n_devices = -1;
    x->n_ranks = -1;
    if (!fields(L, n, spec, 11, v, "an expect")) {
        path_pop(L, old);
        return;
    }
    uint64_t u;
    if (v[F_FEASIBLE])
        get_bool(L, v[F_FEASIBLE], "feasible", &x->feasible);
    if (v[F_ERROR]) {
        static const char *names[QM_CODE_COUNT_];
        for (int c = 1; c < QM_CODE_COUNT_; ++c)
            names[c - 1] = qm_code_name((qm_code)c);
        int e;
        if (get_enum_list(L, v[F_ERROR], "error", names, QM_CODE_COUNT_ - 1, "error code",
                          "planner codes: E-QUBITS, E-CAPACITY, E-NOT-POW2, E-SHARDS, "
                          "E-NO-GATHER, E-POLICY, E-INPUT",
                          &e)) {
            x->has_error = true;
            x->error = (qm_code)(e + 1);
        }
    }
    if (v[F_SHARDS] && get_uint(L, v[F_SHARDS], "shards", 1, INT_MAX, &u)) {
        x->has_shards = true;
        x->shards = (int)u;
    }
    if (v[F_PAGES] && get_uint(L, v[F_PAGES], "pages", 1, UINT64_MAX, &x->pages))
        x->has_pages = true;
    if (v[F_SHARD_BYTES] && get_size(L, v[F_SHARD_BYTES], "shard_bytes", 0, &x->shard_bytes))
        x->has_shard_bytes = true;
    if (v[F_DEVICES]) {
        size_t o2 = path_key(L, "devices");
        if (want_seq(L, v[F_DEVICES], "device ids")) {
            int count = seq_count(v[F_DEVICES]);
            x->devices = calloc((size_t)count + 1, sizeof *x->devices);
            if (!x->devices)
                nomem(L);
            x->n_devices = 0;
            for (int i = 0; i < count && x->devices && !L->stop; ++i) {
                size_t o3 = path_index(L, i);
                int g = resolve(L, seq_item(L, v[F_DEVICES], i), NULL, WANT_GPU);
                if (g >= 0)
                    memcpy(x->devices[x->n_devices++], t->nodes[g].id, QM_ID_BYTES);
                path_pop(L, o3);
            }
        }
        path_pop(L, o2);
    }
    if (v[F_RANKS]) {
        size_t o2 = path_key(L, "ranks");
        if (want_seq(L, v[F_RANKS], "rank numbers")) {
            int count = seq_count(v[F_RANKS]);
            x->ranks = calloc((size_t)count + 1, sizeof *x->ranks);
            if (!x->ranks)
                nomem(L);
            x->n_ranks = 0;
            for (int i = 0; i < count && x->ranks && !L->stop; ++i) {
                ynode *rv = seq_item(L, v[F_RANKS], i);
                size_t o3 = path_index(L, i);
                if (get_uint(L, rv, NULL, 0, INT_MAX, &u)) {
                    if (t->n_ranks > 0 && u >= (uint64_t)t->n_ranks)
                        err(L, rv, QM_E_RANK, "rank %llu does not exist (the scenario has %d)",
                            (unsigned long long)u, t->n_ranks);
                    else
                        x->ranks[x->n_ranks++] = (int)u;
                }
                path_pop(L, o3);
            }
        }
        path_pop(L, o2);
    }
    if (v[F_GATHER]) {
        static const fld gspec[] = {{"feasible", true}, {"target", false}};
        ynode *g[2];
        size_t o2 = path_key(L, "gather");
        if (fields(L, v[F_GATHER], gspec, 2, g, "an expected gather")) {
            bool ok = g[0] && get_bool(L, g[0], "feasible", &x->gather_feasible);
            if (g[1]) {
                const char *s = g[1]->type == Y_SCALAR
                                    ? g[1]->text
                                    : NULL;
                if (s && strcmp(s, "host") == 0) {
                    snprintf(x->gather_target, sizeof x->gather_target, "host");
                } else {
                    int d = resolve(L, g[1], "target", WANT_GPU);
                    if (d >= 0)
                        memcpy(x->gather_target, t->nodes[d].id, QM_ID_BYTES);
                    else
                        ok = false;
                }
            }
            x->has_gather = ok;
        }
        path_pop(L, o2);
    }
    if (v[F_MAXQ]) {
        static const fld mspec[] = {{"complex64", true}, {"complex128", true}};
        ynode *m[2];
        size_t o2 = path_key(L, "max_qubits");
        if (fields(L, v[F_MAXQ], mspec, 2, m, "max_qubits")) {
            uint64_t a = 0, b = 0;
            bool ok = m[0] && get_uint(L, m[0], "complex64", 0, 64, &a);
            ok = (m[1] && get_uint(L, m[1], "complex128", 0, 64, &b)) && ok;
            if (ok) {
                x->has_max_qubits = true;
                x->max_qubits_c64 = (unsigned)a;
                x->max_qubits_c128 = (unsigned)b;
            }
        }
        path_pop(L, o2);
    }
    if (v[F_HEADROOM] && get_size(L, v[F_HEADROOM], "min_headroom", QM_UNITS_ALLOW_ZERO,
                                  &x->min_headroom_bytes))
        x->has_min_headroom = true;
    if (v[F_ESTIMATES])
        load_estimates(L, v[F_ESTIMATES], x);
    path_pop(L, old);
}

static void load_cases(ld *L, ynode *n)
{
    static const fld spec[] = {{"id", true}, {"request", true}, {"expect", true}};
    qm_topology *t = L->t;
    size_t old = path_key(L, "cases");
    if (want_seq(L, n, "cases")) {
        int count = seq_count(n);
        t->cases = calloc((size_t)count + 1, sizeof *t->cases);
        if (!t->cases) {
            nomem(L);
            count = 0;
        }
        for (int i = 0; i < count && !L->stop; ++i) {
            ynode *it = seq_item(L, n, i), *v[3];
            size_t o2 = path_index(L, i);
            if (fields(L, it, spec, 3, v, "a case")) {
                int ci = t->n_cases++;
                qm_case *c = &t->cases[ci];
                c->loc = (qm_loc){LINE(it), COL(it)};
                qm_request_init(&c->request);
                c->expect.n_devices = c->expect.n_ranks = -1;
                if (v[0] && get_id(L, v[0], "id", c->id))
                    register_id(L, v[0], c->id, ID_CASE, ci);
                if (v[1])
                    load_request(L, v[1], &c->request);
                if (v[2])
                    load_expect(L, v[2], &c->expect);
            }
            path_pop(L, o2);
        }
    }
    path_pop(L, old);
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

/* E-DISCONNECTED: every GPU must reach the first one over links, fabrics and the implicit link of
 * each NIC (to its `attach` node, else to its NUMA node: as topology.c builds the graph). */
static void check_connected(ld *L)
{
    qm_topology *t = L->t;
    if (t->n_gpus < 2)
        return;
    int *parent = malloc((size_t)t->n_nodes * sizeof *parent);
    if (!parent) {
        nomem(L);
        return;
    }
    for (int i = 0; i < t->n_nodes; ++i)
        parent[i] = i;
    for (int i = 0; i < t->n_links; ++i)
        parent[uf_find(parent, t->links[i].a)] = uf_find(parent, t->links[i].b);
    for (int i = 0; i < t->n_nodes; ++i) { /* the implicit NIC link of topology.c */
        const qm_node *n = &t->nodes[i];
        int to = n->kind != QM_NODE_NIC ? -1 : n->attach >= 0 ? n->attach : n->numa;
        if (to >= 0)
            parent[uf_find(parent, i)] = uf_find(parent, to);
    }
    int root = uf_find(parent, t->gpus[0]);
    size_t old = path_key(L, "connectivity");
    for (int g = 1; g < t->n_gpus && !L->stop; ++g) {
        const qm_node *nd = &t->nodes[t->gpus[g]];
        if (uf_find(parent, t->gpus[g]) != root)
            err_loc(L, nd->loc.line, nd->loc.col, QM_E_DISCONNECTED,
                    "device '%s' has no path to device '%s' (no chain of links, fabrics or NIC "
                    "attachments joins them); add a link",
                    nd->id, t->nodes[t->gpus[0]].id);
    }
    path_pop(L, old);
    free(parent);
}

static void load_root(ld *L, ynode *root)
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
    if (!fields(L, root, spec, 11, v, "the top level"))
        return;
    if (v[F_NAME]) {
        const char *s = scalar(L, v[F_NAME], "a name");
        size_t old = path_key(L, "name");
        if (s && (!*s || strlen(s) >= sizeof t->name))
            err(L, v[F_NAME], *s ? QM_E_RANGE : QM_E_TYPE, "%s", *s ? "is too long (at most 63 bytes)"
                                                                     : "must not be empty");
        else if (s)
            snprintf(t->name, sizeof t->name, "%s", s);
        path_pop(L, old);
    }
    if (v[F_DESC]) {
        size_t old = path_key(L, "description");
        const char *s = scalar(L, v[F_DESC], "a string");
        if (s && !(t->description = dup_str(s)))
            nomem(L);
        path_pop(L, old);
    }
    if (v[F_SOURCES])
        load_sources(L, v[F_SOURCES]);
    if (v[F_DEFAULTS])
        load_defaults(L, v[F_DEFAULTS]);
    if (v[F_TYPES])
        load_device_types(L, v[F_TYPES]);
    if (v[F_HOSTS]) {
        size_t old = path_key(L, "hosts");
        if (want_seq(L, v[F_HOSTS], "hosts")) {
            for (int i = 0; i < seq_count(v[F_HOSTS]) && !L->stop; ++i) {
                size_t o2 = path_index(L, i);
                L->host_pos = i;
                load_host(L, seq_item(L, v[F_HOSTS], i));
                path_pop(L, o2);
            }
        }
        path_pop(L, old);
    }
    if (v[F_FABRICS])
        declare_fabrics(L, v[F_FABRICS]);
    resolve_attach(L);
    for (int f = 0; f < t->n_fabrics && !L->stop; ++f)
        load_fabric(L, f);
    if (v[F_LINKS])
        load_links(L, v[F_LINKS]);
    expand_fabrics(L);
    if (v[F_RANKS])
        load_ranks(L, v[F_RANKS]);
    else if (L->n_err == 0)
        default_ranks(L);
    if (v[F_CASES])
        load_cases(L, v[F_CASES]);
    if (L->n_err == 0 && t->n_gpus == 0 && v[F_HOSTS]) {
        size_t old = path_key(L, "hosts");
        err(L, v[F_HOSTS], QM_E_MISSING_FIELD, "no host declares a device; add hosts[].devices");
        path_pop(L, old);
    }
    if (L->n_err == 0)
        check_connected(L);
}

/* ---- libyaml: syntax errors and the document ----------------------------------------------------- */

static void yaml_fail(ld *L, const yaml_parser_t *p)
{
    char msg[QM_STATUS_MSG_BYTES];
    if (p->error == YAML_MEMORY_ERROR) {
        nomem(L);
        return;
    }
    if (p->error == YAML_READER_ERROR) {
        /* no mark: count lines and characters up to the offset */
        int line = 1, col = 1;
        for (size_t i = 0; i < p->problem_offset && i < L->len; ++i) {
            if (L->text[i] == '\n') {
                ++line;
                col = 1;
            } else if ((L->text[i] & 0xC0) != 0x80) {
                ++col;
            }
        }
        if (p->problem_value >= 0)
            snprintf(msg, sizeof msg, "YAML: %s (byte 0x%02X at offset %zu); the file must be "
                     "UTF-8 text", p->problem ? p->problem : "cannot read the input",
                     (unsigned)p->problem_value, p->problem_offset);
        else
            snprintf(msg, sizeof msg, "YAML: %s (offset %zu)",
                     p->problem ? p->problem : "cannot read the input", p->problem_offset);
        add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
        return;
    }
    int line = (int)p->problem_mark.line + 1, col = (int)p->problem_mark.column + 1;
    if (p->context)
        snprintf(msg, sizeof msg, "YAML: %s at line %d, column %d; %s at line %d, column %d",
                 p->problem ? p->problem : "syntax error", line, col, p->context,
                 (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    else
        snprintf(msg, sizeof msg, "YAML: %s at line %d, column %d",
                 p->problem ? p->problem : "syntax error", line, col);
    add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
}

typedef struct open_coll {
    uint32_t node;     /* the collection's node */
    size_t kids_start; /* where its children start on the pending-children stack */
    long start;        /* nodes (after alias expansion) before it */
    char *anchor;      /* owned; NULL when none */
} open_coll;

static bool grow_size(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* Parse the events once into L->doc: syntax errors (both libyaml marks), one document only,
 * nesting depth, undefined and recursive aliases, and the number of nodes after alias expansion
 * (an alias bomb is refused before anything is expanded: the tree shares aliased nodes). */
static bool build_doc(ld *L)
{
    ydoc *d = &L->doc;
    yaml_parser_t p;
    yaml_event_t ev;
    map anchors = {0};
    open_coll stack[MAX_DEPTH];
    uint32_t *pending = NULL; /* children of the open collections, innermost last */
    size_t n_pending = 0, cap_pending = 0;
    int depth = 0, docs = 0;
    long count = 0;
    bool ok = false, done = false;
    char msg[QM_STATUS_MSG_BYTES];
    d->root = -1;
    if (!yaml_parser_initialize(&p)) {
        nomem(L);
        return false;
    }
    yaml_parser_set_input_string(&p, L->text, L->len);
    while (!done) {
        if (!yaml_parser_parse(&p, &ev)) {
            yaml_fail(L, &p);
            goto out;
        }
        int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
        const char *anchor = NULL;
        long attach = -1; /* the node to add to the enclosing collection (or as the root) */
        bool bad = false, mem = true;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                add_diag(L, QM_E_YAML_SYNTAX, line, col,
                         "YAML: a second document starts here; a scenario file holds one "
                         "document");
                bad = true;
            }
            break;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            bool is_scalar = ev.type == YAML_SCALAR_EVENT;
            if (!is_scalar && depth == MAX_DEPTH) {
                snprintf(msg, sizeof msg, "YAML: nesting deeper than %d levels", MAX_DEPTH);
                add_diag(L, QM_E_RANGE, line, col, msg);
                bad = true;
                break;
            }
            mem = grow_size((void **)&d->nodes, &d->cap_nodes, (size_t)d->n_nodes + 1,
                            sizeof *d->nodes);
            if (!mem)
                break;
            uint32_t idx = d->n_nodes++;
            ynode *nd = &d->nodes[idx];
            memset(nd, 0, sizeof *nd);
            nd->line = line;
            nd->col = col;
            ++count;
            attach = idx;
            if (is_scalar) {
                nd->type = Y_SCALAR;
                nd->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                nd->len = (uint32_t)ev.data.scalar.length;
                nd->off = (uint32_t)d->n_str;
                mem = grow_size((void **)&d->str, &d->cap_str, d->n_str + nd->len + 1, 1);
                if (!mem)
                    break;
                memcpy(d->str + d->n_str, ev.data.scalar.value, nd->len);
                d->str[d->n_str + nd->len] = '\0';
                d->n_str += nd->len + 1;
                anchor = (const char *)ev.data.scalar.anchor;
            } else {
                nd->type = ev.type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP;
                anchor = (const char *)(ev.type == YAML_SEQUENCE_START_EVENT
                                            ? ev.data.sequence_start.anchor
                                            : ev.data.mapping_start.anchor);
            }
            if (anchor) { /* a redefined anchor names the latest node (YAML 1.2) */
                entry *e = map_find(&anchors, anchor);
                if (!e)
                    e = map_insert(&anchors, anchor);
                if (!(mem = e != NULL))
                    break;
                e->index = (int)idx;
                e->size = 1;
                e->open = !is_scalar;
            }
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            open_coll *top = &stack[--depth];
            ynode *nd = &d->nodes[top->node];
            size_t n = n_pending - top->kids_start;
            mem = grow_size((void **)&d->kids, &d->cap_kids, d->n_kids + n, sizeof *d->kids);
            if (!mem)
                break;
            if (n)
                memcpy(d->kids + d->n_kids, pending + top->kids_start, n * sizeof *pending);
            nd->off = (uint32_t)d->n_kids;
            nd->len = (uint32_t)(nd->type == Y_MAP ? n / 2 : n);
            d->n_kids += n;
            n_pending = top->kids_start;
            if (top->anchor) {
                entry *e = map_find(&anchors, top->anchor);
                if (e && e->index == (int)top->node) {
                    e->size = count - top->start;
                    e->open = false;
                }
                free(top->anchor);
                top->anchor = NULL;
            }
            break;
        }
        case YAML_ALIAS_EVENT: {
            const char *name = (const char *)ev.data.alias.anchor;
            entry *e = map_find(&anchors, name);
            if (!e || e->open) {
                snprintf(msg, sizeof msg,
                         e ? "YAML: alias '*%.64s' refers to a node that contains it (a recursive "
                             "structure)"
                           : "YAML: found undefined alias '*%.64s'",
                         name);
                add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
                bad = true;
                break;
            }
            count += e->size;
            attach = e->index;
            break;
        }
        default:
            break;
        }
        if (mem && !bad && attach >= 0) {
            if (depth == 0) {
                if (d->root < 0)
                    d->root = (int)attach;
            } else if ((mem = grow_size((void **)&pending, &cap_pending, n_pending + 1,
                                        sizeof *pending))) {
                pending[n_pending++] = (uint32_t)attach;
            }
        }
        if (mem && !bad && attach >= 0 && ev.type != YAML_SCALAR_EVENT &&
            ev.type != YAML_ALIAS_EVENT) { /* a collection opens */
            stack[depth].node = (uint32_t)attach;
            stack[depth].kids_start = n_pending;
            stack[depth].start = count - 1;
            stack[depth].anchor = anchor ? dup_str(anchor) : NULL;
            mem = !anchor || stack[depth].anchor;
            ++depth;
        }
        if (!mem) {
            nomem(L);
            bad = true;
        }
        if (!bad && count > QM_SCENARIO_MAX_NODES) {
            snprintf(msg, sizeof msg, "YAML: the document has more than %d nodes, counting "
                     "every alias expansion (%ld at this point); documents this large are refused",
                     QM_SCENARIO_MAX_NODES, count);
            add_diag(L, QM_E_RANGE, line, col, msg);
            bad = true;
        }
        yaml_event_delete(&ev);
        if (bad)
            goto out;
    }
    for (uint32_t i = 0; i < d->n_nodes; ++i)
        if (d->nodes[i].type == Y_SCALAR)
            d->nodes[i].text = d->str + d->nodes[i].off;
    ok = true;
out:
    for (int i = 0; i < depth; ++i)
        free(stack[i].anchor);
    free(pending);
    map_fini(&anchors);
    yaml_parser_delete(&p);
    return ok;
}

/* ---- entry points ------------------------------------------------------------------------------- */

static qm_topology *topology_new(const char *name)
{
    qm_topology *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->file, sizeof t->file, "%s", name);
    qm_topology_defaults_init(t);
    return t;
}

void qm_topology_defaults_init(qm_topology *t)
{
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        t->efficiency[c] = 1.0;
    t->hbm_efficiency = 1.0;
    t->default_reserve_bytes = 0;
    t->latency_s[QM_LINK_NVLINK] = 0.6e-6;
    t->latency_s[QM_LINK_C2C] = 0.6e-6;
    t->latency_s[QM_LINK_PCIE] = 1.0e-6;
    t->latency_s[QM_LINK_SYS] = 1.0e-6;
    t->latency_s[QM_LINK_NET] = 2.7e-6;
}

qm_code qm_scenario_load_string(const char *text, size_t len, const char *name_for_messages,
                                qm_topology **out, qm_diags *diags, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!out || (!text && len))
        return qm_fail(st, QM_E_ARG, "scenario: text and out must not be NULL");
    ld L;
    memset(&L, 0, sizeof L);
    L.file = name_for_messages ? name_for_messages : "<string>";
    L.text = (const unsigned char *)(text ? text : "");
    L.len = len;
    L.diags = diags;
    L.st = st;
    if (len > QM_SCENARIO_MAX_BYTES) {
        char msg[200];
        snprintf(msg, sizeof msg, "scenario: the text is too large (%zu bytes; the limit is %u "
                 "bytes = 64 MiB)", len, QM_SCENARIO_MAX_BYTES);
        add_diag(&L, QM_E_IO, 0, 0, msg);
        goto done;
    }
    if (!(L.t = topology_new(L.file))) {
        nomem(&L);
        goto done;
    }
    if (!build_doc(&L))
        goto done;
    if (L.doc.root < 0)
        add_diag(&L, QM_E_MISSING_FIELD, 1, 1,
                 "scenario: the file is empty; a scenario starts with 'schema: qmesh/1'");
    else
        load_root(&L, &L.doc.nodes[L.doc.root]);
done:
    free(L.doc.nodes);
    free(L.doc.kids);
    free(L.doc.str);
    map_fini(&L.ids);
    map_fini(&L.types);
    free(L.attach);
    free(L.fabric_yaml);
    free(L.fabric_pos);
    finish_diags(&L);
    free(L.errs);
    if (L.n_err > 0) {
        qm_topology_destroy(L.t);
        return L.first.code;
    }
    *out = L.t;
    return QM_OK;
}

qm_code qm_scenario_load_file(const char *path, qm_topology **out, qm_diags *diags, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return qm_fail(st, QM_E_ARG, "scenario: path and out must not be NULL");
    qm_code rc = QM_OK;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char msg[QM_STATUS_MSG_BYTES];
    FILE *f = NULL;
    /* O_NONBLOCK, then fstat: a FIFO or a device named as scenario fails at once, never waits */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(msg, sizeof msg, "scenario: cannot open '%s': %s", path, strerror(errno));
        goto fail_msg;
    }
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        const int e = errno;
        if (S_ISREG(sb.st_mode) || !sb.st_mode)
            snprintf(msg, sizeof msg, "scenario: cannot stat '%s': %s", path, strerror(e));
        else
            snprintf(msg, sizeof msg, "scenario: '%s' is not a regular file (it is %s)", path,
                     qm_input_file_kind((unsigned)sb.st_mode));
        close(fd);
        goto fail_msg;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        snprintf(msg, sizeof msg, "scenario: cannot open '%s': %s", path, strerror(errno));
        close(fd);
        goto fail_msg;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > (size_t)QM_SCENARIO_MAX_BYTES + 1)
                ncap = (size_t)QM_SCENARIO_MAX_BYTES + 1;
            if (ncap == cap) {
                snprintf(msg, sizeof msg, "scenario: '%s' is too large (more than %u bytes; the "
                         "limit is 64 MiB)", path, QM_SCENARIO_MAX_BYTES);
                goto fail_msg;
            }
            char *nb = realloc(buf, ncap);
            if (!nb) {
                snprintf(msg, sizeof msg, "scenario: out of memory reading '%s' (%zu bytes)", path,
                         ncap);
                rc = QM_E_NOMEM;
                goto fail_msg;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                snprintf(msg, sizeof msg, "scenario: cannot read '%s': %s", path, strerror(errno));
                goto fail_msg;
            }
            break;
        }
    }
    fclose(f);
    f = NULL;
    rc = qm_scenario_load_string(buf, len, path, out, diags, st);
    free(buf);
    return rc;
fail_msg:
    if (rc == QM_OK)
        rc = QM_E_IO;
    if (f)
        fclose(f);
    free(buf);
    qm_diags_add(diags, rc, path, 0, 0, msg);
    return qm_fail(st, rc, "%s", msg);
}

qm_code qm_scenario_load_default(qm_topology **out, qm_diags *diags, qm_status *st)
{
    const char *text = qm_default_scenario_text();
    return qm_scenario_load_string(text, strlen(text), "<built-in>", out, diags, st);
}
