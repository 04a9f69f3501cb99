/* scenario_load.c — the strict `qmesh/1` scenario loader (docs/scenario-format.md, docs/scenarios.md).
 *
 * Role: the entry points of scenario_loader.h. Turns scenario text into a qm_topology
 * (scenario.h) and reports every problem of a file as located diagnostics.
 * In: a path, a string, or the built-in default text. Out: a topology that owns all of its memory,
 * or NULL with the first error in the status and all of them (up to QM_DIAGS_PER_LOAD) in diags.
 * How (scenario_internal.h lists the files):
 *   1. one pass over libyaml's events builds a compact tree with a location on every node,
 *      refusing bad YAML and alias bombs on the way (scenario_doc.c);
 *   2. a schema walk in a fixed order fills the topology (scenario_build.c, with typed values and
 *      ids from scenario_values.c and cases from scenario_cases.c);
 *   3. whole-file checks once everything parsed cleanly: default ranks, connectivity;
 *   4. the errors, sorted by location, go to diags and the first one to the status
 *      (scenario_diag.c).
 * Must not: abort, exit, print, or keep anything of libyaml beyond a call.
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdopen */
#include "io.h" /* qm_input_file_kind */
#include "scenario_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        qm_scn_add_diag(&L, QM_E_IO, 0, 0, msg);
        goto done;
    }
    if (!(L.t = topology_new(L.file))) {
        qm_scn_nomem(&L);
        goto done;
    }
    if (!qm_scn_build_doc(&L))
        goto done;
    if (L.doc.root < 0)
        qm_scn_add_diag(&L, QM_E_MISSING_FIELD, 1, 1,
                        "scenario: the file is empty; a scenario starts with 'schema: qmesh/1'");
    else
        qm_scn_load_root(&L, &L.doc.nodes[L.doc.root]);
done:
    free(L.doc.nodes);
    free(L.doc.kids);
    free(L.doc.str);
    qm_scn_map_fini(&L.ids);
    qm_scn_map_fini(&L.types);
    free(L.attach);
    free(L.fabric_yaml);
    free(L.fabric_pos);
    qm_scn_finish_diags(&L);
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

qm_code qm_scenario_load_path(const char *path, qm_topology **out, qm_diags *diags, qm_status *st)
{
    return path ? qm_scenario_load_file(path, out, diags, st)
                : qm_scenario_load_default(out, diags, st);
}
