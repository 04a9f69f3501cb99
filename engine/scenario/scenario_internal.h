/* scenario_internal.h — what the files of the `qmesh/1` loader share (not installed).
 *
 * Role: the loader's context (ld), the compact document tree (ydoc, ynode), the string map of ids,
 * device type names and anchors, and the functions one loader file calls in another:
 *   scenario_diag.c    diagnostics: the located errors of a load and the YAML path of messages
 *   scenario_doc.c     the string map, "did you mean" (by core's qm_hint_closer), the document
 *                      tree from libyaml's events, node access and the key check of a mapping
 *   scenario_values.c  typed values (strings, ids, numbers, units, enums) and the id namespace
 *   scenario_build.c   the schema walk that builds the topology
 *   scenario_cases.c   cases and the whole-file checks
 *   scenario_load.c    the entry points of scenario_loader.h
 * Names with external linkage carry the prefix qm_scn_. scenario_variant.c (qmesh whatif's
 * variants) uses the string map too, and qm_topology_closest_gpu (scenario_names.c) for its
 * "did you mean".
 * Must not: be included outside engine/scenario/, or include <yaml.h> (only scenario_doc.c does).
 */
#ifndef QM_SCENARIO_INTERNAL_H
#define QM_SCENARIO_INTERNAL_H

#include "scenario_loader.h"

#include "status_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

void qm_scn_map_fini(map *m);
entry *qm_scn_map_find(const map *m, const char *key);
/* Insert key (not present yet). NULL when out of memory. */
entry *qm_scn_map_insert(map *m, const char *key);
char *qm_scn_dup_str(const char *s);

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

/* ---- diagnostics (scenario_diag.c) ------------------------------------------------------------- */

void qm_scn_add_diag(ld *L, qm_code code, int line, int col, const char *msg);
/* Hand the errors over: sorted by location, the first one into L->st, all of them into L->diags. */
void qm_scn_finish_diags(ld *L);
/* An error at (line, col) with the current path as subject. */
void qm_scn_err_loc(ld *L, int line, int col, qm_code code, const char *fmt, ...) QM_PRINTF(5, 6);

#define LINE(n) ((n)->line)
#define COL(n) ((n)->col)
#define err(L, n, code, ...) qm_scn_err_loc((L), LINE(n), COL(n), (code), __VA_ARGS__)

void qm_scn_nomem(ld *L);
/* Path segments: push returns the depth to pop back to. Deeper than 32 is not recorded. */
size_t qm_scn_path_key(ld *L, const char *key);
size_t qm_scn_path_index(ld *L, int i);
void qm_scn_path_pop(ld *L, size_t old);

/* ---- the document and YAML node access (scenario_doc.c) ---------------------------------------- */

/* Parse the events once into L->doc; false (with the errors in L) when the text is refused. */
bool qm_scn_build_doc(ld *L);

static inline ynode *node_at(ld *L, int index)
{
    return &L->doc.nodes[index];
}

static inline int seq_count(const ynode *n)
{
    return (int)n->len;
}

static inline ynode *seq_item(ld *L, const ynode *n, int i)
{
    return node_at(L, (int)L->doc.kids[n->off + (uint32_t)i]);
}

/* The key and the value of the i-th pair of a mapping. */
static inline ynode *pair_key(ld *L, const ynode *n, uint32_t i)
{
    return node_at(L, (int)L->doc.kids[n->off + 2 * i]);
}

static inline ynode *pair_value(ld *L, const ynode *n, uint32_t i)
{
    return node_at(L, (int)L->doc.kids[n->off + 2 * i + 1]);
}

/* The node must be a list; E-TYPE otherwise. */
bool qm_scn_want_seq(ld *L, ynode *n, const char *of);
/* A scalar's text; E-TYPE (and NULL) for a mapping, a list, or a text with a NUL character. */
const char *qm_scn_scalar(ld *L, ynode *n, const char *expected);

typedef struct fld {
    const char *key;
    bool required;
} fld;

#define MAX_FIELDS 16

/* Check a mapping against its keys (at most MAX_FIELDS): E-TYPE when it is not a mapping,
 * E-MERGE-KEY for `<<`, E-UNKNOWN-KEY (with a "did you mean"), E-DUP-KEY, E-MISSING-FIELD.
 * vals[i] is the value of spec[i] (NULL when absent). Returns false when n is not a mapping. */
bool qm_scn_fields(ld *L, ynode *n, const fld *spec, int n_spec, ynode **vals, const char *what);

/* ---- typed values and ids (scenario_values.c) -------------------------------------------------- */

bool qm_scn_get_str(ld *L, ynode *n, const char *key, char *dst, size_t cap);
/* An id: 1..63 bytes of letters, digits and _ . : / @ + - */
bool qm_scn_get_id(ld *L, ynode *n, const char *key, char dst[QM_ID_BYTES]);
bool qm_scn_get_uint(ld *L, ynode *n, const char *key, uint64_t min, uint64_t max,
                     uint64_t *out);
bool qm_scn_get_real(ld *L, ynode *n, const char *key, double *out);
bool qm_scn_get_bool(ld *L, ynode *n, const char *key, bool *out);
bool qm_scn_get_size(ld *L, ynode *n, const char *key, unsigned flags, uint64_t *out);
bool qm_scn_get_bw(ld *L, ynode *n, const char *key, double *out);
bool qm_scn_get_time(ld *L, ynode *n, const char *key, double *out);
/* One of names[0..count); E-ENUM with a "did you mean" and the list (or `shown`) otherwise. */
bool qm_scn_get_enum_list(ld *L, ynode *n, const char *key, const char *const *names, int count,
                          const char *what, const char *shown, int *out);
bool qm_scn_get_enum(ld *L, ynode *n, const char *key, const char *const *names, int count,
                     const char *what, int *out);

/* Register id in the one namespace of the file; E-DUP-ID when it is taken. */
bool qm_scn_register_id(ld *L, ynode *at, const char *id, int kind, int index);

enum want { WANT_NODE, WANT_GPU, WANT_SWITCH, WANT_HOST };

/* Resolve a reference: E-UNKNOWN-REF (with a "did you mean") when the id is not declared or
 * names something of another kind. Returns the index, or -1. */
int qm_scn_resolve(ld *L, ynode *n, const char *key, enum want w);

/* ---- names, the schema walk, cases and whole-file checks ---------------------------------------- */

extern const char *const qm_scn_class_names[QM_LINK_CLASS_COUNT_]; /* scenario_names.c */
/* The whole document, in a fixed order (scenario_build.c). */
void qm_scn_load_root(ld *L, ynode *root);
void qm_scn_load_cases(ld *L, ynode *n);  /* scenario_cases.c */
void qm_scn_check_connected(ld *L);       /* scenario_cases.c: E-DISCONNECTED */

#endif
