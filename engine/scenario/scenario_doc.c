/* scenario_doc.c — the scenario document: libyaml's events into a compact tree, and node access.
 *
 * Role: the only file that includes <yaml.h>. One pass over libyaml's events (yaml_parser_parse)
 * builds a compact tree with a 1-based location on every node (build_doc), checking on the way:
 * syntax errors (both libyaml marks), one document only, nesting depth, undefined and recursive
 * aliases, and the number of nodes after alias expansion (QM_SCENARIO_MAX_NODES, or half the
 * file's bytes when that is more), so that an alias
 * bomb is refused before anything is expanded. Also here: the string hash map (ids, device type
 * names, anchors) and the key check of a mapping (fields; its "did you mean" by core's
 * qm_hint_closer).
 * Why not yaml_parser_load (libyaml's document API, the obvious choice): it allocates a node, a tag
 * copy and child stacks per node, and on a 1024-host x 8-GPU scenario it alone took 0.3-0.6 s of
 * a fresh process (page faults), against the < 1 s target for the whole load; and it cannot stop
 * early, so a 64 MiB file of tiny nodes would cost gigabytes before any limit applied. The event
 * API gives the same marks, and the tree built here takes about a sixth of the memory.
 * In: the text in the loader context. Out: L->doc, or errors in L.
 * Must not: abort, exit, print, or keep anything of libyaml beyond a call.
 */
#include "scenario_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 256 /* YAML nesting; a scenario needs 6 */

/* ---- a string hash map (ids, device type names, anchors) --------------------------------------- */

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; ++s)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

void qm_scn_map_fini(map *m)
{
    for (size_t i = 0; i < m->cap; ++i)
        free(m->e[i].key);
    free(m->e);
    memset(m, 0, sizeof *m);
}

entry *qm_scn_map_find(const map *m, const char *key)
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
entry *qm_scn_map_insert(map *m, const char *key)
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

char *qm_scn_dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- YAML node access --------------------------------------------------------------------------- */

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

/* The node must be a list; E-TYPE otherwise. */
bool qm_scn_want_seq(ld *L, ynode *n, const char *of)
{
    if (n->type == Y_SEQ)
        return true;
    char buf[64];
    err(L, n, QM_E_TYPE, "expected a list of %s, got %s", of, what_is(n, buf, sizeof buf));
    return false;
}

/* A scalar's text; E-TYPE (and NULL) for a mapping, a list, or a text with a NUL character. */
const char *qm_scn_scalar(ld *L, ynode *n, const char *expected)
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

/* Check a mapping against its keys: E-TYPE when it is not a mapping, E-MERGE-KEY for `<<`,
 * E-UNKNOWN-KEY (with a "did you mean"), E-DUP-KEY, E-MISSING-FIELD. vals[i] is the value of
 * spec[i] (NULL when absent). Returns false when n is not a mapping. */
bool qm_scn_fields(ld *L, ynode *n, const fld *spec, int n_spec, ynode **vals,
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
                if (qm_hint_closer(key, spec[i].key, &best, hint))
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

/* ---- libyaml: syntax errors and the document ----------------------------------------------------- */

static void yaml_fail(ld *L, const yaml_parser_t *p)
{
    char msg[QM_STATUS_MSG_BYTES];
    if (p->error == YAML_MEMORY_ERROR) {
        qm_scn_nomem(L);
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
        qm_scn_add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
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
    qm_scn_add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
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
bool qm_scn_build_doc(ld *L)
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
    /* without aliases a node takes about two bytes of text or more, so this does not refuse a plain file
     * (a 32768-GPU scenario has about 2.1 million nodes) and keeps an expansion within a fixed
     * multiple of the file's size */
    const long max_nodes = (long)(L->len / 2) > QM_SCENARIO_MAX_NODES ? (long)(L->len / 2)
                                                                      : QM_SCENARIO_MAX_NODES;
    bool ok = false, done = false;
    char msg[QM_STATUS_MSG_BYTES];
    d->root = -1;
    if (!yaml_parser_initialize(&p)) {
        qm_scn_nomem(L);
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
                qm_scn_add_diag(L, QM_E_YAML_SYNTAX, line, col,
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
                qm_scn_add_diag(L, QM_E_RANGE, line, col, msg);
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
                entry *e = qm_scn_map_find(&anchors, anchor);
                if (!e)
                    e = qm_scn_map_insert(&anchors, anchor);
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
                entry *e = qm_scn_map_find(&anchors, top->anchor);
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
            entry *e = qm_scn_map_find(&anchors, name);
            if (!e || e->open) {
                snprintf(msg, sizeof msg,
                         e ? "YAML: alias '*%.64s' refers to a node that contains it (a recursive "
                             "structure)"
                           : "YAML: found undefined alias '*%.64s'",
                         name);
                qm_scn_add_diag(L, QM_E_YAML_SYNTAX, line, col, msg);
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
            stack[depth].anchor = anchor ? qm_scn_dup_str(anchor) : NULL;
            mem = !anchor || stack[depth].anchor;
            ++depth;
        }
        if (!mem) {
            qm_scn_nomem(L);
            bad = true;
        }
        if (!bad && count > max_nodes) {
            snprintf(msg, sizeof msg, "YAML: the document has more than %ld nodes, counting "
                     "every alias expansion (%ld at this point); documents this large are refused",
                     max_nodes, count);
            qm_scn_add_diag(L, QM_E_RANGE, line, col, msg);
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
    qm_scn_map_fini(&anchors);
    yaml_parser_delete(&p);
    return ok;
}
