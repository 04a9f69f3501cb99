/* cli_plan.c — `qmesh plan` and `qmesh scenario run|check`, and the scenario selection the other
 * commands share (--scenario FILE, else the built-in default mesh, said on stderr).
 *
 * In: argv. Out: the plan as a table or (--json) the JSON object of DESIGN.md section 7 on stdout;
 * exit 0 when feasible, 1 when not (the JSON object is still printed), 2 for usage errors.
 */
#include "cli_internal.h"
#include "pipeline.h"
#include "plan_output.h"
#include "scenario_loader.h"
#include "status_internal.h"
#include "units.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int qm_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "error[E-ARG]: %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; run 'qmesh help'\n");
    return 2;
}

qm_code qm_cli_load_scenario(const char *path, qm_pipeline *out, qm_status *st)
{
    qm_diags diags;
    qm_diags_init(&diags);
    if (!path)
        fprintf(stderr, "qmesh: no --scenario given: using the built-in simulated mesh\n");
    const qm_code rc = qm_pipeline_load(out, path, &diags, st);
    if (rc != QM_OK && diags.n > 1)
        qm_diags_print_others(&diags, stderr); /* the caller prints the first */
    qm_diags_fini(&diags);
    return rc;
}

static qm_code parse_enum(const char *what, const char *text, const char *(*name)(int), int count,
                          int *out, qm_code code, qm_status *st)
{
    for (int i = 0; i < count; ++i)
        if (name(i) && strcmp(name(i), text) == 0) {
            *out = i;
            return QM_OK;
        }
    char list[256] = "";
    for (int i = 0; i < count; ++i) {
        strncat(list, name(i), sizeof list - strlen(list) - 1);
        if (i + 1 < count)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return qm_fail(st, code, "%s: unknown %s '%.64s'; use one of %s", "plan", what, text, list);
}

static const char *policy_name_i(int i) { return qm_policy_name((qm_policy)i); }
static const char *encoding_name_i(int i) { return qm_encoding_name((qm_encoding)i); }

/* Parse the request options shared by plan and encode. Returns 0 when argv[*i] was consumed (with
 * its value), 1 when it is not a request option, 2 on a usage error (printed). */
int qm_cli_request_option(const char *cmd, int argc, char **argv, int *i, qm_request *r,
                          qm_status *st, bool *failed)
{
    const char *opt = argv[*i];
    static const char *const opts[] = {"--qubits", "--dtype", "--policy", "--batch", "--features",
                                       "--gather", "--ranks", "--encoding"};
    int which = -1;
    for (int k = 0; k < (int)(sizeof opts / sizeof *opts); ++k)
        if (strcmp(opt, opts[k]) == 0)
            which = k;
    if (which < 0)
        return 1;
    if (*i + 1 >= argc)
        return qm_cli_usage_error(cmd, "option %s needs a value", opt);
    const char *v = argv[++*i];
    uint64_t u = 0;
    int e = 0;
    qm_code rc = QM_OK;
    switch (which) {
    case 0:
        rc = qm_units_parse_uint(v, 0, UINT_MAX, &u, st); /* the validator decides the range */
        r->qubits = (unsigned)u;
        break;
    case 1:
        if (strcmp(v, "complex64") == 0)
            r->dtype = QM_DTYPE_COMPLEX64;
        else if (strcmp(v, "complex128") == 0)
            r->dtype = QM_DTYPE_COMPLEX128;
        else
            rc = qm_fail(st, QM_E_DTYPE, "%s: --dtype must be complex64 or complex128 (got '%.64s')",
                         cmd, v);
        break;
    case 2:
        rc = parse_enum("policy", v, policy_name_i, QM_POLICY_COUNT_, &e, QM_E_POLICY, st);
        r->policy = (qm_policy)e;
        break;
    case 3:
        rc = qm_units_parse_uint(v, 0, UINT64_MAX, &u, st);
        r->batch = u;
        break;
    case 4:
        rc = qm_units_parse_uint(v, 1, UINT64_MAX, &u, st);
        r->features = u;
        break;
    case 5:
        snprintf(r->gather, sizeof r->gather, "%s", v);
        break;
    case 6:
        rc = qm_units_parse_uint(v, 1, 1u << 20, &u, st);
        r->ranks = (int)u;
        break;
    case 7:
        rc = parse_enum("encoding", v, encoding_name_i, QM_ENCODING_COUNT_, &e, QM_E_ARG, st);
        r->encoding = (qm_encoding)e;
        break;
    }
    if (rc != QM_OK) {
        if (strncmp(st->msg, cmd, strlen(cmd)) != 0)
            qm_status_prefix(st, "%s %s", cmd, opt);
        *failed = true;
    }
    return 0;
}

int qm_cli_plan(int argc, char **argv)
{
    qm_status st;
    qm_status_clear(&st);
    qm_request r;
    qm_request_init(&r);
    const char *scenario = NULL;
    bool json = false, failed = false, have_qubits = false, phantom = false;
    for (int i = 1; i < argc && !failed; ++i) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--phantom") == 0) {
            phantom = true;
        } else if (strcmp(argv[i], "--scenario") == 0) {
            if (i + 1 >= argc)
                return qm_cli_usage_error("plan", "option %s needs a value", argv[i]);
            scenario = argv[++i];
        } else {
            if (strcmp(argv[i], "--qubits") == 0)
                have_qubits = true;
            int k = qm_cli_request_option("plan", argc, argv, &i, &r, &st, &failed);
            if (k == 1)
                return qm_cli_usage_error("plan", "unknown option '%s'", argv[i]);
            if (k == 2)
                return 2;
        }
    }
    if (failed)
        return qm_cli_error(&st);
    if (!have_qubits)
        return qm_cli_usage_error("plan", "%s is required", "--qubits N");
    if (phantom)
        return qm_cli_phantom("plan", scenario, &r, json);
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    int exit_code = 1;
    if (qm_cli_load_scenario(scenario, &pl, &st) != QM_OK)
        return qm_cli_error(&st);
    (void)qm_pipeline_plan(&pl, &r, &st);
    const qm_plan *p = pl.plan;
    const qm_mesh *mesh = pl.mesh;
    if (!p) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    const char *name = qm_topology_label(pl.topology);
    if (json) {
        json_t *o = NULL;
        if (qm_plan_to_json(p, mesh, name, &o, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            goto done;
        }
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s) {
            qm_fail(&st, QM_E_NOMEM, "plan: out of host memory for the JSON text");
            exit_code = qm_cli_error(&st);
            goto done;
        }
        printf("%s\n", s);
        free(s);
    } else {
        qm_plan_print(p, mesh, name, stdout);
    }
    if (!p->feasible) {
        qm_status e = p->error;
        exit_code = qm_cli_error(&e);
    } else {
        exit_code = 0;
    }
done:
    qm_pipeline_fini(&pl);
    return exit_code;
}

/* `qmesh scenario run FILE...` (every case, one line each) and `scenario check FILE...` (only the
 * misses and a summary). */
int qm_cli_scenario(int argc, char **argv)
{
    if (argc < 2)
        return qm_cli_usage_error("scenario", "%s", "usage: qmesh scenario run|check FILE...");
    const bool quiet = strcmp(argv[1], "check") == 0;
    if (!quiet && strcmp(argv[1], "run") != 0)
        return qm_cli_usage_error("scenario", "unknown subcommand '%s'; use run or check", argv[1]);
    if (argc < 3)
        return qm_cli_usage_error("scenario", "%s", "no scenario file given");
    int total = 0, missed = 0, bad_files = 0;
    for (int i = 2; i < argc; ++i) {
        qm_status st;
        qm_status_clear(&st);
        qm_topology *t = NULL;
        qm_diags diags;
        qm_diags_init(&diags);
        if (qm_scenario_load_file(argv[i], &t, &diags, &st) != QM_OK) {
            if (diags.n)
                qm_diags_print(&diags, stderr);
            else
                qm_cli_error(&st);
            qm_diags_fini(&diags);
            bad_files++;
            continue;
        }
        qm_diags_fini(&diags);
        int n = 0, m = 0;
        FILE *sink = stdout;
        if (qm_scenario_run_cases(t, sink, !quiet, &n, &m, &st) != QM_OK) {
            qm_cli_error(&st);
            bad_files++;
        }
        total += n;
        missed += m;
        qm_topology_destroy(t);
    }
    printf("scenario: %d cases, %d passed, %d missed%s\n", total, total - missed, missed,
           bad_files ? " (some files failed to load)" : "");
    return (missed || bad_files) ? 1 : 0;
}
