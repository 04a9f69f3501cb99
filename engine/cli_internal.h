/* cli_internal.h — the subcommands of the qmesh command, one function per CLI file, and the
 * helpers they share. Each returns the process exit code (0 ok, 1 failed request, 2 usage). */
#ifndef QM_CLI_INTERNAL_H
#define QM_CLI_INTERNAL_H

#include "qmesh.h"

#include <stdio.h>

int qm_cli_devices(int argc, char **argv);

/* Print `error[CODE]: message` (with a location when st has one) as one line on stderr; returns 1. */
int qm_cli_error(const qm_status *st);

#endif
