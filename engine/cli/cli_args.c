/* cli_args.c — the machinery behind every command's table: parsing argv against the flag table,
 * the help text printed from the same table, "did you mean" for mistyped flags, the one-line error
 * helpers, and the one JSON object of --json.
 *
 * In: a qm_cli_command (cli_internal.h) and argv. Out: qm_cli_args (flag values by table row,
 * operands), help on stdout, errors as one line on stderr, and with --json exactly one object on
 * stdout: {"ok", "command", "error", <the command's members>} whatever the outcome.
 * Must not: treat an argument that starts with '-' as a file, take an option as another option's
 * value, print an error twice, or print more than one JSON object.
 * The JSON state is process-wide (one command runs per process).
 */
#include "cli_internal.h"
#include "scenario_loader.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static struct {
    bool on, silent;
    const qm_cli_command *cmd;
    json_t *body;
    bool have_error;
    char code[32];
    char message[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 64];
} g_json;

static void record_error(const char *code, const char *message)
{
    if (!g_json.on || g_json.have_error)
        return;
    g_json.have_error = true;
    snprintf(g_json.code, sizeof g_json.code, "%s", code);
    snprintf(g_json.message, sizeof g_json.message, "%s", message);
}

int qm_cli_error(const qm_status *st)
{
    char buf[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 64];
    fprintf(stderr, "%s\n", qm_status_format(st, buf, sizeof buf));
    if (st->file[0])
        snprintf(buf, sizeof buf, "%s:%d:%d: %s", st->file, st->line, st->col, st->msg);
    else
        snprintf(buf, sizeof buf, "%s", st->msg);
    record_error(qm_code_name(st->code), buf);
    return 1;
}

void qm_cli_json_error(const char *code, const char *message) { record_error(code, message); }

void qm_cli_json_diag(const qm_diag *d)
{
    char m[QM_STATUS_MSG_BYTES + QM_STATUS_FILE_BYTES + 32];
    if (d->line > 0)
        snprintf(m, sizeof m, "%s:%d:%d: %s", d->file, d->line, d->col, d->msg);
    else
        snprintf(m, sizeof m, "%s: %s", d->file, d->msg);
    record_error(qm_code_name(d->code), m);
}

int qm_cli_error_text(const char *code, const char *fmt, ...)
{
    char buf[QM_STATUS_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "error[%s]: %s\n", code, buf);
    record_error(code, buf);
    return 1;
}

int qm_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[QM_STATUS_MSG_BYTES], line[QM_STATUS_MSG_BYTES + 160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const size_t n = strlen(msg); /* after a question ("did you mean ...?") no semicolon */
    snprintf(line, sizeof line, "%s: %s%s run 'qmesh %s --help'", cmd, msg,
             n && msg[n - 1] == '?' ? "" : ";", cmd);
    fprintf(stderr, "error[E-ARG]: %s\n", line);
    record_error("E-ARG", line);
    return 2;
}

/* ---- --json ------------------------------------------------------------------------------------ */

void qm_cli_json_put(json_t *members)
{
    if (!members)
        return;
    if (!g_json.body)
        g_json.body = json_object();
    if (g_json.body)
        json_object_update(g_json.body, members);
    json_decref(members);
}

void qm_cli_json_silence(void) { g_json.silent = true; }

void qm_cli_json_start(const qm_cli_command *cmd)
{
    g_json.on = true;
    g_json.cmd = cmd;
}

int qm_cli_json_finish(int exit_code)
{
    if (!g_json.on || g_json.silent) {
        json_decref(g_json.body);
        g_json.body = NULL;
        return exit_code;
    }
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(exit_code == 0 && !g_json.have_error));
    json_object_set_new(o, "command", g_json.cmd ? json_string(g_json.cmd->name) : json_null());
    json_object_set_new(o, "error", g_json.have_error ? json_pack("{s:s, s:s}", "code", g_json.code,
                                                                  "message", g_json.message)
                                                      : json_null());
    for (int i = 0; g_json.cmd && g_json.cmd->json_members && g_json.cmd->json_members[i]; ++i) {
        const char *k = g_json.cmd->json_members[i];
        json_t *v = g_json.body ? json_object_get(g_json.body, k) : NULL;
        json_object_set(o, k, v ? v : json_null());
    }
    json_decref(g_json.body);
    g_json.body = NULL;
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) {
        fprintf(stderr, "error[E-NOMEM]: json: out of host memory for the JSON text\n");
        return exit_code ? exit_code : 1;
    }
    printf("%s\n", s);
    free(s);
    return exit_code;
}

/* ---- parsing ----------------------------------------------------------------------------------- */

static int flag_index(const qm_cli_command *cmd, const char *name, size_t len)
{
    for (int k = 0; cmd->flags && cmd->flags[k].name; ++k)
        if (strlen(cmd->flags[k].name) == len && strncmp(cmd->flags[k].name, name, len) == 0)
            return k;
    return -1;
}

const char *qm_cli_arg(const qm_cli_args *a, const char *flag)
{
    const int k = flag_index(a->cmd, flag, strlen(flag));
    return k >= 0 ? a->values[k] : NULL;
}

static bool is_help(const char *s) { return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0; }

void qm_cli_args_fini(qm_cli_args *a)
{
    free(a->operands);
    a->operands = NULL;
    a->n_operands = 0;
}

static int unknown_option(const qm_cli_command *cmd, const char *opt, size_t len)
{
    if (!cmd->json_members && len == 6 && strncmp(opt, "--json", 6) == 0)
        return qm_cli_usage_error(cmd->name, "%s", "--json is not offered: this command writes "
                                                   "YAML");
    char typed[64];
    snprintf(typed, sizeof typed, "%.*s", (int)(len < 63 ? len : 63), opt);
    const char *hint = NULL;
    int best = 3;
    for (int k = 0; cmd->flags && cmd->flags[k].name; ++k)
        if (qm_hint_closer(typed, cmd->flags[k].name, &best, hint))
            hint = cmd->flags[k].name;
    if (qm_hint_closer(typed, "--help", &best, hint))
        hint = "--help";
    if (hint)
        return qm_cli_usage_error(cmd->name, "unknown option '%s'; did you mean '%s'?", typed, hint);
    return qm_cli_usage_error(cmd->name, "unknown option '%s'", typed);
}

int qm_cli_parse(const qm_cli_command *cmd, int argc, char **argv, qm_cli_args *a)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    g_json.cmd = cmd;
    int n_flags = 0;
    while (cmd->flags && cmd->flags[n_flags].name)
        ++n_flags;
    if (n_flags > QM_CLI_MAX_FLAGS)
        return qm_cli_usage_error(cmd->name, "internal: %d flags in the table, at most %d",
                                  n_flags, QM_CLI_MAX_FLAGS);
    /* --help wins wherever it is; --json is known first, so a usage error is reported in JSON too */
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (is_help(argv[i])) {
            g_json.on = false;
            qm_cli_help_print(cmd, stdout);
            return 0;
        }
        if (cmd->json_members && strcmp(argv[i], "--json") == 0)
            g_json.on = a->json = true;
    }
    a->operands = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *a->operands);
    if (!a->operands) {
        qm_status st;
        qm_fail(&st, QM_E_NOMEM, "%s: out of host memory for %d arguments", cmd->name, argc);
        return qm_cli_error(&st);
    }
    bool only_operands = false;
    for (int i = 0; i < argc; ++i) {
        const char *s = argv[i];
        if (only_operands || s[0] != '-') {
            if (cmd->max_operands >= 0 && a->n_operands >= cmd->max_operands) {
                if (cmd->max_operands == 0)
                    return qm_cli_usage_error(cmd->name, "unexpected argument '%s' (it takes no "
                                              "operands)", s);
                return qm_cli_usage_error(cmd->name, "one file at a time (extra '%s')", s);
            }
            a->operands[a->n_operands++] = argv[i];
            continue;
        }
        if (strcmp(s, "--") == 0) {
            only_operands = true;
            continue;
        }
        const char *eq = strncmp(s, "--", 2) == 0 ? strchr(s, '=') : NULL;
        const size_t len = eq ? (size_t)(eq - s) : strlen(s);
        const int k = flag_index(cmd, s, len);
        if (k < 0)
            return unknown_option(cmd, s, len);
        const qm_cli_flag *f = &cmd->flags[k];
        /* a flag given twice is a mistake to report, not a value to overwrite silently */
        if (a->given[k]++ > 0)
            return qm_cli_usage_error(cmd->name, "%s is given twice; give it once", f->name);
        if (!f->value) {
            if (eq)
                return qm_cli_usage_error(cmd->name, "option %s takes no value (got '%s')",
                                          f->name, eq + 1);
            a->values[k] = "";
            continue;
        }
        if (eq) {
            a->values[k] = eq + 1;
            continue;
        }
        if (i + 1 >= argc)
            return qm_cli_usage_error(cmd->name, "option %s needs a value (%s)", f->name, f->value);
        if (strncmp(argv[i + 1], "--", 2) == 0)
            return qm_cli_usage_error(cmd->name, "option %s needs a value (%s), not the option "
                                      "'%s'", f->name, f->value, argv[i + 1]);
        a->values[k] = argv[++i];
    }
    if (a->n_operands < cmd->min_operands)
        return qm_cli_usage_error(cmd->name, "%s is required", cmd->operands ? cmd->operands
                                                                             : "an operand");
    return -1;
}

/* ---- help -------------------------------------------------------------------------------------- */

void qm_cli_help_print(const qm_cli_command *cmd, FILE *f)
{
    fprintf(f, "usage: qmesh %s%s%s%s\n", cmd->name, cmd->flags && cmd->flags[0].name ? " [options]"
                                                                                    : "",
            cmd->operands ? " " : "", cmd->operands ? cmd->operands : "");
    fprintf(f, "  %s\n\noptions:\n", cmd->summary);
    for (int k = 0; cmd->flags && cmd->flags[k].name; ++k) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", cmd->flags[k].name, cmd->flags[k].value ? " " : "",
                 cmd->flags[k].value ? cmd->flags[k].value : "");
        if (strlen(left) > 26)
            fprintf(f, "  %s\n  %-26s %s\n", left, "", cmd->flags[k].help);
        else
            fprintf(f, "  %-26s %s\n", left, cmd->flags[k].help);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "print this help and exit");
}
