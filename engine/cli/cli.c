/* cli.c — the `qmesh` command: parses the subcommand and hands over to the stage's CLI file.
 *
 * In: argv. Out: tables on stdout, or one JSON object with --json; progress on stderr; errors as
 * one line `error[CODE]: message` on stderr and a nonzero exit (1 for a failed request, 2 for a
 * usage error). Must not: abort on any input.
 */
#include "cli_internal.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmesh <command> [options]\n"
            "\n"
            "commands:\n"
            "  encode --input FILE [--qubits N] [--dtype D] [--policy P] [--scenario FILE]\n"
            "       [--backend sim|cuda] [--out FILE.npy | --out-dir DIR [--force]] [--drop-column C] [--json]\n"
            "       [--phantom]              (plan and account every shard on a phantom mesh; no output)\n"
            "                                 amplitude-encode .npy or CSV (.gz) data into a sharded state\n"
            "  plan [--scenario FILE] --qubits N [--dtype complex64|complex128] [--policy P]\n"
            "       [--batch B --features F] [--gather auto|host|none|DEVICE] [--ranks R] [--json]\n"
            "       [--phantom]              (also reserve every shard on a phantom mesh: bytes per device)\n"
            "                                 plan a state: layout, fit, gather, frontier, estimates\n"
            "  scenario run|check FILE...     run every case of scenario files (check: misses only)\n"
            "  topo validate FILE...          strict check of scenario files\n"
            "  topo show [FILE] [--json|--dot] devices, path matrix, best-connected device, ranks\n"
            "       [--matrix|--summary]     above 16 devices a summary; the full matrix with --matrix\n"
            "  topo dump [FILE]               write the scenario back as qmesh/1 YAML\n"
            "  devices [--backend sim|cuda]   list the devices of the mesh qmesh would use\n"
            "  version                        print the version\n"
            "  help                           this text\n"
            "\n"
            "Without --scenario and without a GPU, qmesh uses its built-in simulated mesh and says so\n"
            "on stderr. See docs/cli.md.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("qmesh %d.%d.%d\n", QM_VERSION_MAJOR, QM_VERSION_MINOR, QM_VERSION_PATCH);
        return 0;
    }
    if (strcmp(cmd, "encode") == 0)
        return qm_cli_encode(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0)
        return qm_cli_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "scenario") == 0)
        return qm_cli_scenario(argc - 1, argv + 1);
    if (strcmp(cmd, "topo") == 0)
        return qm_cli_topo(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0)
        return qm_cli_devices(argc - 1, argv + 1);
    fprintf(stderr, "error[E-ARG]: qmesh: unknown command '%s'; run 'qmesh help'\n", cmd);
    return 2;
}
