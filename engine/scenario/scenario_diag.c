/* scenario_diag.c — diagnostics: qm_diags_* of scenario_loader.h, the located errors of a load.
 *
 * Role: collects a load's errors (up to QM_DIAGS_PER_LOAD, then one "too many errors" entry),
 * sorts them by location and hands them to the caller's qm_diags and qm_status.
 * Subjects of messages are YAML paths ("hosts[0].devices[1].memory"), kept as segments in the
 * loader context and rendered only for an error; locations are the value's.
 * In: codes, locations, messages. Out: qm_diag entries, the first error in the status.
 * Must not: abort, exit, or print anywhere but the FILE a caller passes to qm_diags_print*.
 */
#include "scenario_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void qm_scn_add_diag(ld *L, qm_code code, int line, int col, const char *msg)
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
void qm_scn_finish_diags(ld *L)
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
void qm_scn_err_loc(ld *L, int line, int col, qm_code code, const char *fmt, ...)
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
    qm_scn_add_diag(L, code, line, col, msg);
}

void qm_scn_nomem(ld *L)
{
    qm_scn_add_diag(L, QM_E_NOMEM, 0, 0, "scenario: out of memory while loading");
    L->stop = true;
}

/* Path segments: push returns the depth to pop back to. Deeper than 32 is not recorded. */
size_t qm_scn_path_key(ld *L, const char *key)
{
    size_t old = L->n_segs;
    if (key && old < sizeof L->segs / sizeof L->segs[0]) {
        L->segs[old].key = key;
        L->n_segs = old + 1;
    }
    return old;
}

size_t qm_scn_path_index(ld *L, int i)
{
    size_t old = L->n_segs;
    if (old < sizeof L->segs / sizeof L->segs[0]) {
        L->segs[old].key = NULL;
        L->segs[old].index = i;
        L->n_segs = old + 1;
    }
    return old;
}

void qm_scn_path_pop(ld *L, size_t old)
{
    L->n_segs = old;
}
