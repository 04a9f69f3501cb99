/* cli_internal.h — the commands of the qmesh command line, described by one table each, and the
 * helpers they share.
 *
 * Each command is a qm_cli_command: its name, operands, one-line summary, its flag table, the
 * members of its --json object, and the function that runs it. The parser (cli_args.c) reads
 * argv against the flag table, the help text is printed from the same table, and the one JSON
 * object of --json is assembled from the member list, so help, parsing and JSON cannot disagree.
 *
 * Adding a flag: one row in the command's flag table ({"--name", "VALUE", "meaning"}, VALUE NULL
 * for a switch), then read it in the command with qm_cli_arg(a, "--name"). Adding a command: a
 * qm_cli_command in its own file, declared below and listed in cli.c's table.
 * Each run function returns the process exit code (0 ok, 1 failed request, 2 usage).
 */
#ifndef QM_CLI_INTERNAL_H
#define QM_CLI_INTERNAL_H

#include "qmesh.h"

#include <stdio.h>

#include "scenario.h"
#include "status_internal.h"

#include <stdbool.h>

struct json_t;

typedef struct qm_cli_flag {
    const char *name;  /* "--qubits" */
    const char *value; /* the value's placeholder ("N"); NULL for a switch */
    const char *help;  /* its meaning, one line */
} qm_cli_flag;

#define QM_CLI_MAX_FLAGS 32

typedef struct qm_cli_args qm_cli_args;

typedef struct qm_cli_command {
    const char *name;     /* "plan", or "topo show" for a subcommand */
    const char *operands; /* "FILE...", "[FILE]", or NULL when the command takes none */
    int min_operands, max_operands; /* max -1: any number */
    const char *summary;  /* one line: what it does */
    const qm_cli_flag *flags;        /* ends with {NULL}; --help/-h is implied */
    const char *const *json_members; /* the --json object's members after ok, command, error
                                      * (NULL-terminated); NULL when the command has no --json */
    int (*run)(const qm_cli_args *a);
} qm_cli_command;

struct qm_cli_args {
    const qm_cli_command *cmd;
    const char *values[QM_CLI_MAX_FLAGS]; /* per table row: its value, "" for a switch, NULL unset
                                           * (a flag given twice is a usage error) */
    int given[QM_CLI_MAX_FLAGS];          /* per table row: how many times it was given */
    char **operands;                      /* the non-option arguments, in order */
    int n_operands;
    bool json;                            /* --json was given */
};

extern const qm_cli_command qm_cli_cmd_encode, qm_cli_cmd_plan, qm_cli_cmd_scenario_run,
    qm_cli_cmd_scenario_check, qm_cli_cmd_topo_validate, qm_cli_cmd_topo_show,
    qm_cli_cmd_topo_dump, qm_cli_cmd_whatif, qm_cli_cmd_devices;

/* The value of flag (a name of the command's table): the value given, "" for a switch that was
 * given, NULL when it was not given. */
const char *qm_cli_arg(const qm_cli_args *a, const char *flag);

/* Parse argv (the words after the command's name) against cmd's table into *a. Returns -1 to go
 * on, 0 after printing the help (--help or -h anywhere), 2 after a usage error (printed). An
 * argument that starts with '-' is an option, never an operand (after "--" everything is). */
int qm_cli_parse(const qm_cli_command *cmd, int argc, char **argv, qm_cli_args *a);
void qm_cli_args_fini(qm_cli_args *a);

/* The help of one command (usage, summary, every flag with its meaning) on f. */
void qm_cli_help_print(const qm_cli_command *cmd, FILE *f);

/* Print "error[E-ARG]: CMD: <message>; run 'qmesh CMD --help'" and return 2. */
int qm_cli_usage_error(const char *cmd, const char *fmt, ...) QM_PRINTF(2, 3);
/* Print `error[CODE]: message` (with a location when st has one) as one line on stderr; returns 1.
 * With --json, the first error printed is also the JSON object's error member. */
int qm_cli_error(const qm_status *st);
/* Same for an error the CLI itself detects (a code that is no qm_code, like E-MISS). */
int qm_cli_error_text(const char *code, const char *fmt, ...) QM_PRINTF(2, 3);

/* Only the JSON object's error (the line was printed by other means, like a scenario's
 * diagnostics); the first error recorded stays. */
void qm_cli_json_error(const char *code, const char *message);
/* Same for a scenario diagnostic, located as its line on stderr ("FILE:LINE:COL: message"). */
struct qm_diag;
void qm_cli_json_diag(const struct qm_diag *d);
/* --json: the command hands over members of its object (the reference is stolen; members not in
 * its json_members list are dropped). qm_cli_json_finish prints the one object, every member of
 * the list present (null when never handed over), with ok = (exit_code == 0) and the error. */
void qm_cli_json_put(struct json_t *members);
int qm_cli_json_finish(int exit_code);
/* Turn --json on before any command is known (an unknown command with --json: the object then
 * has command null and no members). */
void qm_cli_json_start(const qm_cli_command *cmd);
/* Nothing is printed for this process (MPI ranks other than 0). */
void qm_cli_json_silence(void);

/* Load --scenario FILE, or the built-in default (said on stderr) when path is NULL, into a pipeline
 * (initialized by the caller); every diagnostic of the file but the first is printed to stderr
 * (the caller prints the first with qm_cli_error). */
struct qm_pipeline;
qm_code qm_cli_load_scenario(const char *path, struct qm_pipeline *out, qm_status *st);
/* The request flags shared by plan and encode (--qubits, --dtype, --policy, --batch, --features,
 * --gather, --ranks, --encoding: those of a->cmd's table that were given) into *r. */
qm_code qm_cli_request_parse(const qm_cli_args *a, qm_request *r, qm_status *st);

/* The input-reading flags shared by plan and encode, for their flag tables, and their parser:
 * --drop-column, --header and --delimiter (those given) into *csv (initialized by the caller).
 * Returns 0, or after printing the usage error of `cmd` its exit status (2). */
#define QM_CLI_CSV_FLAGS                                                                          \
    {"--drop-column", "NAME|INDEX", "leave out one input column (CSV: a header name or an index; " \
                                    ".npy, HDF5: an index)"},                                     \
    {"--header", "auto|yes|no", "CSV only: whether the first row names the columns (default "    \
                                "auto)"},                                                         \
    {"--delimiter", "comma|tab|semicolon|space|C", "CSV only: the field delimiter (default "    \
                                                   "comma; space: runs of blanks; a field may " \
                                                   "be quoted, \"...\"; '#' lines are comments)"}
struct qm_csv_options;
int qm_cli_csv_options(const qm_cli_args *a, const char *cmd, struct qm_csv_options *csv);

/* `plan --phantom` / `encode --phantom` (cli_phantom.c): plan the request on the scenario, account
 * every shard on a phantom mesh, print the plan and the bytes reserved per device (--json: the plan
 * object with a "phantom" member); returns the exit status. */
int qm_cli_phantom(const char *cmd, const char *scenario, const qm_request *r, bool json);

#endif
