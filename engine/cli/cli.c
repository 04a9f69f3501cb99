/* cli.c — the `qmesh` command: finds the command in the table below, parses its flags against the
 * command's own table (cli_args.c), runs it, and prints the one JSON object of --json.
 *
 * In: argv. Out: tables on stdout, or one JSON object with --json; progress on stderr; errors as
 * one line `error[CODE]: message` on stderr and a nonzero exit (1 for a failed request, 2 for a
 * usage error). `qmesh help` prints every command with every flag; `qmesh help CMD` and
 * `qmesh CMD --help` print one. Must not: abort on any input.
 * A new command: its qm_cli_command in its own file, declared in cli_internal.h, one row below.
 */
#include "cli_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int run_version(const qm_cli_args *a);
static int run_help(const qm_cli_args *a);

static const qm_cli_flag version_flags[] = {
    {"--json", NULL, "print one JSON object: {ok, command, error, version}"},
    {NULL, NULL, NULL}};
static const char *const version_json[] = {"version", NULL};
static const qm_cli_command cmd_version = {
    .name = "version", .summary = "print qmesh's version (also: qmesh --version)",
    .flags = version_flags, .json_members = version_json, .run = run_version};

static const qm_cli_flag help_flags[] = {{NULL, NULL, NULL}};
static const qm_cli_command cmd_help = {
    .name = "help", .operands = "[COMMAND [SUBCOMMAND]]", .max_operands = 2,
    .summary = "print every command with every flag, or the help of one command",
    .flags = help_flags, .run = run_help};

/* Every command, in the order `qmesh help` lists them. */
static const qm_cli_command *const commands[] = {
    &qm_cli_cmd_encode,        &qm_cli_cmd_plan,          &qm_cli_cmd_scenario_run,
    &qm_cli_cmd_scenario_check, &qm_cli_cmd_topo_validate, &qm_cli_cmd_topo_show,
    &qm_cli_cmd_topo_dump,     &qm_cli_cmd_whatif,        &qm_cli_cmd_devices,
    &cmd_version,              &cmd_help};
#define N_COMMANDS ((int)(sizeof commands / sizeof *commands))

/* The first word of a command's name ("topo" of "topo show"), its length. */
static size_t word_len(const char *name)
{
    const char *sp = strchr(name, ' ');
    return sp ? (size_t)(sp - name) : strlen(name);
}

static bool is_group(const char *w)
{
    for (int i = 0; i < N_COMMANDS; ++i)
        if (strchr(commands[i]->name, ' ') && word_len(commands[i]->name) == strlen(w) &&
            strncmp(commands[i]->name, w, strlen(w)) == 0)
            return true;
    return false;
}

static void overview(FILE *f)
{
    fprintf(f, "usage: qmesh <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; ++i)
        fprintf(f, "  %-16s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\nWithout --scenario and without a GPU, qmesh uses its built-in simulated mesh and "
               "says so on\nstderr. 'qmesh CMD --help' (or 'qmesh help CMD') shows one command; "
               "docs/cli.md has more.\n");
}

static void group_help(const char *group, FILE *f)
{
    fprintf(f, "usage: qmesh %s <subcommand> ...\n\nsubcommands:\n", group);
    for (int i = 0; i < N_COMMANDS; ++i)
        if (word_len(commands[i]->name) == strlen(group) &&
            strncmp(commands[i]->name, group, strlen(group)) == 0 && commands[i]->name[strlen(group)])
            fprintf(f, "  %-16s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n'qmesh %s <subcommand> --help' shows its flags.\n", group);
}

/* The command named by words[0] (and words[1] for a group); *used = the words it took. On no
 * match, prints the usage error (with a "did you mean") and returns NULL with *used = -2; when a
 * group's subcommand is missing or is --help, *used = -1 (the caller decides). */
static const qm_cli_command *find(int n, char **words, int *used, bool json)
{
    const char *w = words[0];
    for (int i = 0; i < N_COMMANDS; ++i)
        if (strcmp(commands[i]->name, w) == 0) {
            *used = 1;
            return commands[i];
        }
    const char *hint = NULL;
    int best = 3;
    if (is_group(w)) {
        if (n < 2 || words[1][0] == '-') {
            *used = -1;
            return NULL;
        }
        char full[128];
        snprintf(full, sizeof full, "%s %s", w, words[1]);
        for (int i = 0; i < N_COMMANDS; ++i) {
            if (strcmp(commands[i]->name, full) == 0) {
                *used = 2;
                return commands[i];
            }
            if (strncmp(commands[i]->name, full, strlen(w) + 1) == 0 &&
                qm_hint_closer(words[1], commands[i]->name + strlen(w) + 1, &best, hint))
                hint = commands[i]->name + strlen(w) + 1;
        }
        *used = -2;
        if (json)
            qm_cli_json_start(NULL);
        if (hint)
            qm_cli_usage_error(w, "unknown subcommand '%s'; did you mean '%s'?", words[1], hint);
        else
            qm_cli_usage_error(w, "unknown subcommand '%s'", words[1]);
        return NULL;
    }
    char first[32];
    for (int i = 0; i < N_COMMANDS; ++i) {
        snprintf(first, sizeof first, "%.*s", (int)word_len(commands[i]->name), commands[i]->name);
        if (qm_hint_closer(w, first, &best, hint))
            hint = commands[i]->name;
    }
    *used = -2;
    char h[32] = "";
    if (hint)
        snprintf(h, sizeof h, "%.*s", (int)word_len(hint), hint);
    if (json)
        qm_cli_json_start(NULL);
    if (hint)
        qm_cli_error_text("E-ARG", "qmesh: unknown command '%s'; did you mean '%s'? run 'qmesh "
                                   "help'", w, h);
    else
        qm_cli_error_text("E-ARG", "qmesh: unknown command '%s'; run 'qmesh help'", w);
    return NULL;
}

static int run_version(const qm_cli_args *a)
{
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", QM_VERSION_MAJOR, QM_VERSION_MINOR, QM_VERSION_PATCH);
    if (a->json)
        qm_cli_json_put(json_pack("{s:s}", "version", v));
    else
        printf("qmesh %s\n", v);
    return 0;
}

static int run_help(const qm_cli_args *a)
{
    if (a->n_operands == 0) {
        overview(stdout);
        for (int i = 0; i < N_COMMANDS; ++i) {
            printf("\n");
            qm_cli_help_print(commands[i], stdout);
        }
        return 0;
    }
    int used = 0;
    const qm_cli_command *c = find(a->n_operands, a->operands, &used, false);
    if (used == -1) {
        group_help(a->operands[0], stdout);
        return 0;
    }
    if (!c)
        return 2;
    if (used < a->n_operands)
        return qm_cli_usage_error("help", "'%s' has no subcommand '%s'", c->name,
                                  a->operands[used]);
    qm_cli_help_print(c, stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "error[E-ARG]: qmesh: a command is needed; run 'qmesh help'\n");
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return run_help(&(qm_cli_args){.cmd = &cmd_help});
    if (strcmp(argv[1], "--version") == 0)
        argv[1] = "version";
    bool json = false;
    for (int i = 1; i < argc; ++i)
        json = json || strcmp(argv[i], "--json") == 0;
    int used = 0;
    const qm_cli_command *c = find(argc - 1, argv + 1, &used, json);
    if (used == -1) { /* a group without its subcommand, or with an option first */
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            group_help(argv[1], stdout);
            return 0;
        }
        if (json)
            qm_cli_json_start(NULL);
        if (argc > 2)
            return qm_cli_json_finish(qm_cli_usage_error(
                argv[1], "the subcommand comes first (got the option '%s')", argv[2]));
        return qm_cli_json_finish(qm_cli_usage_error(argv[1], "%s", "a subcommand is needed"));
    }
    if (!c) /* the error is printed; with --json the object has command null */
        return qm_cli_json_finish(2);
    qm_cli_args a;
    int rc = qm_cli_parse(c, argc - 1 - used, argv + 1 + used, &a);
    if (rc < 0)
        rc = c->run(&a);
    else if (rc == 0) { /* --help */
        qm_cli_args_fini(&a);
        return 0;
    }
    qm_cli_args_fini(&a);
    return qm_cli_json_finish(rc);
}
