/* cli_internal.h — the subcommands of the qmesh command, one function per CLI file, and the
 * helpers they share. Each returns the process exit code (0 ok, 1 failed request, 2 usage). */
#ifndef QM_CLI_INTERNAL_H
#define QM_CLI_INTERNAL_H

#include "qmesh.h"

#include <stdio.h>

#include "scenario.h"
#include "status_internal.h"

#include <stdbool.h>

int qm_cli_devices(int argc, char **argv);
int qm_cli_plan(int argc, char **argv);
int qm_cli_encode(int argc, char **argv);
int qm_cli_scenario(int argc, char **argv);
int qm_cli_topo(int argc, char **argv);

/* Print "error[E-ARG]: CMD: <message>; run 'qmesh help'" and return 2. */
int qm_cli_usage_error(const char *cmd, const char *fmt, ...) QM_PRINTF(2, 3);
/* Load --scenario FILE, or the built-in default (said on stderr) when path is NULL, into a pipeline
 * (initialized by the caller); every diagnostic of the file is printed to stderr. */
struct qm_pipeline;
qm_code qm_cli_load_scenario(const char *path, struct qm_pipeline *out, qm_status *st);
/* Request options shared by plan and encode (see cli_plan.c). */
int qm_cli_request_option(const char *cmd, int argc, char **argv, int *i, qm_request *r,
                          qm_status *st, bool *failed);

/* `plan --phantom` / `encode --phantom` (cli_phantom.c): plan the request on the scenario, account
 * every shard on a phantom mesh, print the plan and the bytes reserved per device; returns the exit
 * status. */
int qm_cli_phantom(const char *cmd, const char *scenario, const qm_request *r, bool json);

/* Print `error[CODE]: message` (with a location when st has one) as one line on stderr; returns 1. */
int qm_cli_error(const qm_status *st);

#endif
