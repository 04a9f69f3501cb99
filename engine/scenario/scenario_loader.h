/* scenario_loader.h — load, dump and validate `qmesh/1` scenario files (docs/scenario-format.md).
 *
 * Role: between scenario text (a file, a string, or the built-in default mesh) and the in-memory
 * qm_topology of scenario.h. The loader is strict (unknown keys, duplicate keys, `<<` merge keys
 * and unitless dimensioned values are errors) and collects every error of a file, up to
 * QM_DIAGS_PER_LOAD, as located diagnostics `FILE:LINE:COL: error[CODE]: message` (1-based).
 * In: text and a name for messages. Out: a topology that owns all its memory, or NULL.
 * This header includes no libyaml header: only scenario_doc.c does (scenario_internal.h lists
 * the loader's files).
 */
#ifndef QM_SCENARIO_LOADER_H
#define QM_SCENARIO_LOADER_H

#include "qmesh.h"
#include "scenario.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- diagnostics ------------------------------------------------------------------------------- */

#define QM_DIAGS_PER_LOAD 50            /* then one final "too many errors" entry */
#define QM_SCENARIO_MAX_BYTES (64u << 20) /* larger files are refused (E-IO) */
#define QM_SCENARIO_MAX_NODES 2000000   /* YAML nodes after alias expansion (E-RANGE beyond), or
                                        * half the file's bytes when that is more */

typedef struct qm_diag {
    qm_code code;
    int line, col;                   /* 1-based; 0 when the error has no location (E-IO) */
    char file[QM_STATUS_FILE_BYTES];
    char msg[QM_STATUS_MSG_BYTES];   /* "<subject>: <problem> (<numbers>)[; <hint>]" */
} qm_diag;

/* A growing list of diagnostics, owned by the caller (init/fini). Loaders append to it; a load
 * stores at most QM_DIAGS_PER_LOAD + 1 entries. */
typedef struct qm_diags {
    int n;
    int n_alloc;
    qm_diag *items;
    int n_dropped;                   /* entries that could not be stored (out of memory) */
} qm_diags;

void qm_diags_init(qm_diags *d);
void qm_diags_fini(qm_diags *d);     /* frees the entries; d may be NULL */
/* Append one entry; never fails (counts it in n_dropped when memory is short). */
void qm_diags_add(qm_diags *d, qm_code code, const char *file, int line, int col, const char *msg);
/* One line per entry: "FILE:LINE:COL: error[CODE]: message" ("FILE: error[CODE]: message" when
 * the entry has no location). */
void qm_diags_print(const qm_diags *d, FILE *f);
/* Every diagnostic but the first, which the caller reports as the failing call's status (so each
 * error appears once: the others, then the first as the run's error line). */
void qm_diags_print_others(const qm_diags *d, FILE *f);

/* ---- loading ------------------------------------------------------------------------------------ */

/* Load a scenario file. E-IO (naming the path and strerror) when it cannot be read, E-IO when it
 * is larger than QM_SCENARIO_MAX_BYTES; otherwise as qm_scenario_load_string. diags may be NULL
 * (then only st tells the first error). On failure *out is NULL and st holds the first error,
 * with its location. */
qm_code qm_scenario_load_file(const char *path, qm_topology **out, qm_diags *diags, qm_status *st);

/* Load scenario text of len bytes (need not be NUL-terminated; may contain NUL bytes, which are
 * errors). name_for_messages is the FILE of every diagnostic and the topology's `file`. */
qm_code qm_scenario_load_string(const char *text, size_t len, const char *name_for_messages,
                                qm_topology **out, qm_diags *diags, qm_status *st);

/* The built-in default mesh (engine/default_scenario.yaml, embedded at build time): one simulated
 * host with 4 H100 SXM 80GB-class GPUs on an NVSwitch fabric. Messages name it "<built-in>". */
const char *qm_default_scenario_text(void);
qm_code qm_scenario_load_default(qm_topology **out, qm_diags *diags, qm_status *st);
/* A scenario file, or the built-in default mesh when path is NULL. */
qm_code qm_scenario_load_path(const char *path, qm_topology **out, qm_diags *diags, qm_status *st);

/* ---- dumping ------------------------------------------------------------------------------------ */

/* Write t as `qmesh/1` YAML that loads back into an equal topology: fabrics stay fabrics, explicit
 * links stay links, every dimensioned value carries an exact unit (units.h), the ranks section is
 * written only when the file had one, device values equal to their type's are not repeated.
 * E-IO when writing fails; E-ARG for NULL arguments. */
qm_code qm_scenario_dump(const qm_topology *t, FILE *f, qm_status *st);

/* ---- CLI ---------------------------------------------------------------------------------------- */

/* `qmesh topo validate FILE...`: argv[0] is the subcommand name ("validate"), then options and
 * files. Prints every diagnostic to stderr as FILE:LINE:COL: error[CODE]: message and
 * "FILE: ok (N hosts, M devices, K links, C cases)" to stdout for each valid file. Returns the
 * exit status: 0 when every file is valid, 1 when one is not, 2 for a usage error. */
int qm_cli_topo_validate(int argc, char **argv);
/* Same, writing to out (the ok lines, help) and err (diagnostics, usage errors). */
int qm_cli_topo_validate_to(int argc, char **argv, FILE *out, FILE *err);
/* The check itself, on n file paths: the ok lines to out (none when out is NULL), diagnostics to
 * err, and for each file each(ctx, path, topology or NULL, its diagnostics) when each is not NULL
 * (the command line's --json). Returns 0 when every file is valid, else 1. */
int qm_topo_validate_files(int n, char **paths, FILE *out, FILE *err,
                           void (*each)(void *ctx, const char *path, const qm_topology *t,
                                        const qm_diags *d),
                           void *ctx);

#endif
