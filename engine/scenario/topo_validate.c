/* topo_validate.c — `qmesh topo validate FILE...` (the command line parses its flags in
 * cli_topo.c and calls qm_topo_validate_files; qm_cli_topo_validate_to is the test entry).
 *
 * Role: the CLI face of the scenario loader: load each file, print every diagnostic, say which
 * files are valid. Wired into the qmesh main by engine/cli.c.
 * In: argv[0] = "validate", then options and files. Out: diagnostics on err as
 * FILE:LINE:COL: error[CODE]: message, "FILE: ok (N hosts, M devices, K links, C cases)" on out;
 * the exit status (0 all valid, 1 some invalid, 2 usage error).
 * Must not: exit (it returns the status), or stop at the first invalid file.
 */
#include "scenario_loader.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: qmesh topo validate FILE...\n"
          "Check qmesh/1 scenario files; print every error as FILE:LINE:COL: error[CODE]: message\n"
          "and 'FILE: ok (...)' for each valid file. Exit status: 0 all valid, 1 some invalid,\n"
          "2 usage error.\n",
          f);
}

int qm_cli_topo_validate_to(int argc, char **argv, FILE *out, FILE *err)
{
    int first = 1, n_files = 0;
    bool only_files = false;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
            ++n_files;
        } else if (strcmp(a, "--") == 0) {
            only_files = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(out);
            return 0;
        } else {
            fprintf(err, "qmesh topo validate: unknown option '%s'\n", a);
            usage(err);
            return 2;
        }
    }
    if (n_files == 0) {
        fputs("qmesh topo validate: no scenario file given\n", err);
        usage(err);
        return 2;
    }
    char **paths = malloc((size_t)argc * sizeof *paths);
    if (!paths) {
        fputs("error[E-NOMEM]: topo validate: out of host memory for the file list\n", err);
        return 1;
    }
    int n = 0;
    only_files = false;
    for (int i = first; i < argc; ++i) {
        if (!only_files && strcmp(argv[i], "--") == 0)
            only_files = true;
        else if (strcmp(argv[i], "-") == 0 && !only_files)
            paths[n++] = NULL; /* stdin: refused below, in its place */
        else
            paths[n++] = argv[i];
    }
    const int status = qm_topo_validate_files(n, paths, out, err, NULL, NULL);
    free(paths);
    return status;
}

int qm_topo_validate_files(int n, char **paths, FILE *out, FILE *err,
                           void (*each)(void *ctx, const char *path, const qm_topology *t,
                                        const qm_diags *d),
                           void *ctx)
{
    int status = 0;
    for (int i = 0; i < n; ++i) {
        const char *path = paths[i];
        qm_diags diags;
        qm_diags_init(&diags);
        qm_topology *t = NULL;
        qm_status st;
        qm_status_clear(&st);
        if (!path) {
            fputs("-: error[E-ARG]: reading a scenario from stdin is not supported; name a file\n",
                  err);
            qm_diags_add(&diags, QM_E_ARG, "-", 0, 0, "reading a scenario from stdin is not "
                         "supported; name a file");
            path = "-";
            status = 1;
        } else if (qm_scenario_load_file(path, &t, &diags, &st) == QM_OK) {
            if (out)
                fprintf(out, "%s: ok (%d hosts, %d devices, %d links, %d cases)\n", path,
                        t->n_hosts, t->n_gpus, t->n_links, t->n_cases);
        } else {
            qm_diags_print(&diags, err);
            status = 1;
        }
        if (each)
            each(ctx, path, t, &diags);
        qm_topology_destroy(t);
        qm_diags_fini(&diags);
    }
    if (out)
        fflush(out);
    fflush(err);
    return status;
}

int qm_cli_topo_validate(int argc, char **argv)
{
    return qm_cli_topo_validate_to(argc, argv, stdout, stderr);
}
