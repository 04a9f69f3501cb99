/* cli_plan.c — `qmesh plan` and `qmesh scenario run|check` (their flag tables and run functions),
 * the scenario selection the other commands share (--scenario FILE, else the built-in default
 * mesh, said on stderr) and the request flags shared with encode.
 *
 * In: parsed arguments (cli_args.c). Out: the plan as a table, (--json) the plan object of
 * docs/cli.md or (--dot) a Graphviz picture (plan_dot.c) on stdout; exit 0 when feasible, 1 when
 * not (the JSON object or the picture is still printed), 2 for usage errors. `plan --max`: the
 * largest state (with --features, batch) per dtype and policy (qm_plan_max_query), as a table or
 * the plan object's `max` member; exit 0. With --input FILE (and --out / --out-dir) the request
 * comes from the file as encode makes it and the estimates include the data path (read, staging,
 * write; docs/planner.md "Data path").
 * scenario run|check: one report line per case (check: misses only), a summary, E-MISS when a
 * case missed. Must not: print an error line twice.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "cli_internal.h"
#include "discover.h"
#include "encode.h"
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

/* One request flag (opt, with its value v) into *r. */
static qm_code request_option(const char *cmd, int which, const char *opt, const char *v,
                              qm_request *r, qm_status *st)
{
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
    if (rc != QM_OK && strncmp(st->msg, cmd, strlen(cmd)) != 0)
        qm_status_prefix(st, "%s %s", cmd, opt);
    return rc;
}

qm_code qm_cli_request_parse(const qm_cli_args *a, qm_request *r, qm_status *st)
{
    static const char *const opts[] = {"--qubits", "--dtype", "--policy", "--batch", "--features",
                                       "--gather", "--ranks", "--encoding"};
    for (int k = 0; k < (int)(sizeof opts / sizeof *opts); ++k) {
        const char *v = qm_cli_arg(a, opts[k]);
        if (v && request_option(a->cmd->name, k, opts[k], v, r, st) != QM_OK)
            return st->code;
    }
    return QM_OK;
}

int qm_cli_csv_options(const qm_cli_args *a, const char *cmd, qm_csv_options *csv)
{
    const char *v;
    if ((v = qm_cli_arg(a, "--drop-column")))
        csv->drop_column = v;
    if ((v = qm_cli_arg(a, "--header"))) {
        if (strcmp(v, "auto") == 0)
            csv->header = QM_CSV_HEADER_AUTO;
        else if (strcmp(v, "yes") == 0)
            csv->header = QM_CSV_HEADER_YES;
        else if (strcmp(v, "no") == 0)
            csv->header = QM_CSV_HEADER_NO;
        else
            return qm_cli_usage_error(cmd, "--header takes auto, yes or no (got '%s')", v);
    }
    if ((v = qm_cli_arg(a, "--delimiter"))) {
        /* a name, one character, or the two characters \t as a shell passes them unquoted */
        static const struct { const char *name; char c; } names[] = {
            {"comma", ','}, {"tab", '\t'}, {"\\t", '\t'}, {"semicolon", ';'},
            {"space", ' '}, {"whitespace", ' '}};
        bool known = false;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && !known; ++k)
            if (strcmp(v, names[k].name) == 0) {
                csv->delimiter = names[k].c;
                known = true;
            }
        if (!known && strlen(v) == 1 && !strchr("\"#\r\n", v[0])) { /* ' ': blanks */
            csv->delimiter = v[0];
            known = true;
        }
        if (!known)
            return qm_cli_usage_error(cmd, "--delimiter takes comma, tab, semicolon, space "
                                      "(runs of blanks) or one character other than a quote or "
                                      "'#' (got '%s')", v);
    }
    return 0;
}

static const qm_cli_flag plan_flags[] = {
    {"--scenario", "FILE", "the scenario (qmesh/1 YAML) to plan on; default: the built-in mesh"},
    {"--qubits", "N", "qubits of each state (required, unless --max): 2^N amplitudes"},
    {"--dtype", "complex64|complex128", "amplitude type (default complex64)"},
    {"--policy", "P", "auto (default), single, equal, weighted, balanced or replicated"},
    {"--batch", "B", "number of states (samples) planned together (default 1)"},
    {"--features", "F", "values per sample (default 2^N); with --max: a batch of such samples"},
    {"--gather", "auto|host|none|DEVICE", "where a gathered state would go (default auto)"},
    {"--ranks", "R", "processes (MPI ranks) the devices are split over (default: the scenario's)"},
    {"--encoding", "E", "amplitude (default), angle, basis, phase, iqp or iqp-z"},
    {"--input", "FILE", "the data encode would read (.npy, HDF5, CSV): its shape gives qubits, "
                        "batch, features and dtype as encode infers them, and the plan estimates "
                        "read and staging"},
    {"--dataset", "NAME", "HDF5 input: the dataset (default: the file's only dataset)"},
    QM_CLI_CSV_FLAGS,
    {"--out", "FILE.npy", "estimate the write of one gathered .npy (nothing is written)"},
    {"--out-dir", "DIR", "estimate the write of one .npy per shard (nothing is written)"},
    {"--max", NULL, "no plan: the largest state (or batch) that fits, per dtype and policy"},
    {"--phantom", NULL, "also reserve every shard on a phantom mesh (no memory): bytes per device"},
    {"--backend", "sim|cuda", "sim: also check host memory (the simulator keeps every shard there); "
                              "cuda (default): device memory only"},
    {"--json", NULL, "print one JSON object (docs/cli.md) instead of the table"},
    {"--dot", NULL, "print the plan as a Graphviz graph (shards, gather paths) instead"},
    {NULL, NULL, NULL}};
/* The members of DESIGN's plan object (kept at the top level for its readers), then plan_hash. */
#define QM_PLAN_JSON_MEMBERS                                                                      \
    "scenario", "request", "policy", "feasible", "global_amplitudes", "state_bytes", "pages",     \
        "shards", "devices", "hosts", "gather", "max_qubits", "estimates_s", "estimates_note",          \
        "plan_hash"
/* ... and the answer of --max (null for a plan; the plan's members are null under --max) */
static const char *const plan_json[] = {QM_PLAN_JSON_MEMBERS, "max", "phantom", NULL};

/* `qmesh plan --max` on a loaded scenario: the largest state (or, with --features, batch) that
 * fits, per dtype and policy, on its first r->ranks ranks. Returns the exit code. */
static int plan_max(const qm_cli_args *a, const qm_request *r, qm_pipeline *pl)
{
    qm_status st;
    qm_status_clear(&st);
    qm_request v = *r; /* ranks against the scenario, as a plan checks them */
    v.qubits = 1;
    v.features = 0;
    qm_plan_max m;
    if (qm_request_validate(&v, pl->topology->n_ranks, &st) != QM_OK ||
        qm_pipeline_mesh(pl, r->ranks, &st) != QM_OK)
        return qm_cli_error(&st);
    pl->mesh->host_budget = pl->host_budget;
    if (qm_plan_max_query(pl->mesh, r, &m, &st) != QM_OK)
        return qm_cli_error(&st);
    if (a->json) {
        json_t *o = NULL;
        if (qm_plan_max_to_json(&m, pl->mesh, &o, &st) != QM_OK)
            return qm_cli_error(&st);
        qm_cli_json_put(json_pack("{s:s, s:o}", "scenario", qm_topology_label(pl->topology),
                                  "max", o));
    } else {
        qm_plan_max_print(&m, pl->mesh, pl->topology, stdout);
    }
    return 0;
}

/* --input, --dataset, --out, --out-dir: the request encode would make from the file (qubits,
 * dtype, batch, features: qm_encode_input_open, the header only for .npy and HDF5; a CSV file
 * read with `csv`) into *r, and the data path the cost model estimates (staging on devices unless
 * --backend sim). */
static qm_code plan_datapath(const qm_cli_args *a, const char *backend, const qm_csv_options *csv,
                             qm_request *r, qm_datapath *dp, qm_status *st)
{
    qm_encode_job job;
    qm_encode_job_init(&job);
    job.input = qm_cli_arg(a, "--input");
    job.dataset = qm_cli_arg(a, "--dataset");
    job.csv = *csv;
    job.out = qm_cli_arg(a, "--out");
    job.out_dir = qm_cli_arg(a, "--out-dir");
    job.request = *r;
    job.qubits_given = qm_cli_arg(a, "--qubits") != NULL;
    job.dtype_given = qm_cli_arg(a, "--dtype") != NULL;
    job.backend = backend && strcmp(backend, "sim") == 0 ? QM_BACKEND_SIM : QM_BACKEND_CUDA;
    if (!job.input) {
        return qm_encode_datapath(&job, NULL, NULL, 1, r, dp, st);
    }
    qm_input_file file;
    qm_amp_input in;
    int ndim = 1;
    qm_code rc = qm_encode_input_open(&job, false, &file, &in, &ndim, r, st);
    if (rc == QM_OK)
        rc = qm_encode_datapath(&job, &file, &in, ndim, r, dp, st);
    else if (strncmp(st->msg, "encode: ", 8) == 0) { /* the shared inference names encode */
        memmove(st->msg + 6, st->msg + 8, strlen(st->msg + 8) + 1);
        memcpy(st->msg, "plan: ", 6);
    }
    qm_input_close(&file);
    return rc;
}

static int run_plan(const qm_cli_args *a)
{
    qm_status st;
    qm_status_clear(&st);
    qm_request r;
    qm_request_init(&r);
    if (qm_cli_arg(a, "--max")) {
        if (qm_cli_arg(a, "--qubits"))
            return qm_cli_usage_error("plan", "%s", "--max and --qubits cannot be combined: --max "
                                      "finds the largest qubit count (or, with --features, batch) "
                                      "that fits");
        for (int k = 0; plan_flags[k].name; ++k) {
            static const char *const with_max[] = {"--scenario", "--ranks", "--features", "--max",
                                                   "--backend", "--json"};
            bool ok = false;
            for (size_t j = 0; j < sizeof with_max / sizeof *with_max; ++j)
                ok = ok || strcmp(plan_flags[k].name, with_max[j]) == 0;
            if (!ok && a->values[k])
                return qm_cli_usage_error("plan", "--max reports every dtype and policy and takes "
                                          "only --scenario, --ranks, --features, --backend and "
                                          "--json (got "
                                          "%s)", plan_flags[k].name);
        }
    } else if (!qm_cli_arg(a, "--qubits") && !qm_cli_arg(a, "--input")) {
        return qm_cli_usage_error("plan", "%s is required (or --input FILE to take it from the "
                                  "data, or --max for the largest that fits)", "--qubits N");
    }
    if (qm_cli_request_parse(a, &r, &st) != QM_OK)
        return qm_cli_error(&st);
    if (qm_cli_arg(a, "--out") && qm_cli_arg(a, "--out-dir"))
        return qm_cli_usage_error("plan", "%s", "--out and --out-dir exclude each other");
    if (qm_cli_arg(a, "--input") && (qm_cli_arg(a, "--batch") || qm_cli_arg(a, "--features")))
        return qm_cli_usage_error("plan", "--input FILE gives the batch and features; drop %s",
                                  qm_cli_arg(a, "--batch") ? "--batch" : "--features");
    if (qm_cli_arg(a, "--dataset") && !qm_cli_arg(a, "--input"))
        return qm_cli_usage_error("plan", "%s", "--dataset names a dataset of --input FILE; give "
                                  "the file");
    static const char *const csv_flags[] = {"--drop-column", "--header", "--delimiter"};
    for (size_t k = 0; k < sizeof csv_flags / sizeof *csv_flags; ++k)
        if (qm_cli_arg(a, csv_flags[k]) && !qm_cli_arg(a, "--input"))
            return qm_cli_usage_error("plan", "%s says how to read --input FILE; give the file",
                                      csv_flags[k]);
    qm_csv_options csv;
    qm_csv_options_init(&csv);
    const int csv_usage = qm_cli_csv_options(a, "plan", &csv);
    if (csv_usage != 0)
        return csv_usage;
    if (qm_cli_arg(a, "--phantom") &&
        (qm_cli_arg(a, "--input") || qm_cli_arg(a, "--out") || qm_cli_arg(a, "--out-dir")))
        return qm_cli_usage_error("plan", "%s", "--phantom accounts device memory only and takes "
                                  "no --input, --out or --out-dir");
    if (a->json && qm_cli_arg(a, "--dot"))
        return qm_cli_usage_error("plan", "%s", "--json and --dot exclude each other");
    const char *backend = qm_cli_arg(a, "--backend");
    if (backend && strcmp(backend, "sim") != 0 && strcmp(backend, "cuda") != 0)
        return qm_cli_usage_error("plan", "unknown backend '%s'; use sim or cuda", backend);
    if (backend && qm_cli_arg(a, "--phantom"))
        return qm_cli_usage_error("plan", "%s", "--phantom accounts shards without memory and "
                                  "takes no --backend");
    if (qm_cli_arg(a, "--phantom"))
        return qm_cli_phantom("plan", qm_cli_arg(a, "--scenario"), &r, a->json);
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    int exit_code = 1;
    if (qm_cli_load_scenario(qm_cli_arg(a, "--scenario"), &pl, &st) != QM_OK) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    /* --backend sim: the simulator on this machine holds every shard in host memory */
    if (backend && strcmp(backend, "sim") == 0) {
        pl.host_budget.sim = true;
        if (qm_host_mem_available_query(&pl.host_budget.available_bytes, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            goto done;
        }
    }
    if (qm_cli_arg(a, "--max")) {
        exit_code = plan_max(a, &r, &pl);
        goto done;
    }
    if (plan_datapath(a, backend, &csv, &r, &pl.datapath, &st) != QM_OK) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    (void)qm_pipeline_plan(&pl, &r, &st);
    const qm_plan *p = pl.plan;
    if (!p) {
        exit_code = qm_cli_error(&st);
        goto done;
    }
    if (a->json) {
        json_t *o = NULL;
        if (qm_plan_to_json(p, pl.mesh, qm_topology_label(pl.topology), &o, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            goto done;
        }
        qm_cli_json_put(o);
    } else if (qm_cli_arg(a, "--dot")) {
        if (qm_plan_dot(p, pl.mesh, stdout, &st) != QM_OK) {
            exit_code = qm_cli_error(&st);
            goto done;
        }
    } else {
        qm_plan_print(p, pl.mesh, pl.topology, stdout);
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

const qm_cli_command qm_cli_cmd_plan = {
    .name = "plan",
    .summary = "plan a state without allocating it: layout, fit per device, gather, the largest "
               "state that fits, time estimates",
    .flags = plan_flags, .json_members = plan_json, .run = run_plan};

/* `qmesh scenario run FILE...` (every case, one line each) and `scenario check FILE...` (only the
 * misses); both end with "scenario: N cases, P passed, M missed". --json: per file its cases,
 * misses and the report lines. */
static int run_scenario(const qm_cli_args *a)
{
    const bool quiet = strcmp(a->cmd->name, "scenario check") == 0;
    int total = 0, missed = 0, bad_files = 0;
    json_t *files = a->json ? json_array() : NULL;
    for (int i = 0; i < a->n_operands; ++i) {
        const char *path = a->operands[i];
        qm_status st;
        qm_status_clear(&st);
        qm_topology *t = NULL;
        qm_diags diags;
        qm_diags_init(&diags);
        json_t *jf = a->json ? json_pack("{s:s}", "file", path) : NULL;
        json_t *jerr = json_null();
        int n = 0, m = 0;
        char *text = NULL;
        size_t len = 0;
        if (qm_scenario_load_file(path, &t, &diags, &st) != QM_OK) {
            const qm_diag *d = diags.n ? &diags.items[0] : NULL;
            if (d) { /* every diagnostic once, each its own error line */
                qm_diags_print(&diags, stderr);
                qm_cli_json_diag(d);
            } else {
                qm_cli_error(&st);
            }
            if (jf)
                jerr = d ? json_pack("{s:s, s:s}", "code", qm_code_name(d->code), "message", d->msg)
                         : json_pack("{s:s, s:s}", "code", qm_code_name(st.code), "message", st.msg);
            bad_files++;
        } else {
            FILE *sink = a->json ? open_memstream(&text, &len) : stdout;
            if (!sink) {
                qm_fail(&st, QM_E_NOMEM, "scenario: out of host memory for the report of %s", path);
            } else if (qm_scenario_run_cases(t, sink, !quiet, &n, &m, &st) == QM_OK) {
                qm_status_clear(&st);
            }
            if (sink && sink != stdout)
                fclose(sink);
            if (st.code != QM_OK) {
                qm_cli_error(&st);
                if (jf)
                    jerr = json_pack("{s:s, s:s}", "code", qm_code_name(st.code), "message", st.msg);
                bad_files++;
            }
        }
        qm_diags_fini(&diags);
        qm_topology_destroy(t);
        total += n;
        missed += m;
        if (jf) {
            json_t *lines = json_array();
            for (char *line = text, *nl; line && *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl)
                    nl = line + strlen(line) - 1;
                json_array_append_new(lines, json_stringn(line, (size_t)(nl - line) + (*nl != '\n')));
            }
            json_object_set_new(jf, "ok", json_boolean(json_is_null(jerr) && m == 0));
            json_object_set_new(jf, "error", jerr);
            json_object_set_new(jf, "cases", json_integer(n));
            json_object_set_new(jf, "passed", json_integer(n - m));
            json_object_set_new(jf, "missed", json_integer(m));
            json_object_set_new(jf, "report", lines);
            json_array_append_new(files, jf);
        } else {
            json_decref(jerr);
        }
        free(text);
    }
    if (a->json)
        qm_cli_json_put(json_pack("{s:o, s:i, s:i, s:i}", "files", files, "cases", total, "passed",
                                  total - missed, "missed", missed));
    else
        printf("scenario: %d cases, %d passed, %d missed%s\n", total, total - missed, missed,
               bad_files ? " (some files failed to load)" : "");
    if (missed)
        return qm_cli_error_text("E-MISS", "scenario: %d of %d cases missed their expectations%s",
                                 missed, total, bad_files ? "; some files failed to load" : "");
    return bad_files ? 1 : 0; /* each file's errors are printed above */
}

static const qm_cli_flag scenario_flags[] = {
    {"--json", NULL, "print one JSON object (docs/cli.md): per file its cases, misses and report"},
    {NULL, NULL, NULL}};
static const char *const scenario_json[] = {"files", "cases", "passed", "missed", NULL};

const qm_cli_command qm_cli_cmd_scenario_run = {
    .name = "scenario run", .operands = "FILE...", .min_operands = 1, .max_operands = -1,
    .summary = "plan every case of scenario files and check its expectations; one line per case",
    .flags = scenario_flags, .json_members = scenario_json, .run = run_scenario};
const qm_cli_command qm_cli_cmd_scenario_check = {
    .name = "scenario check", .operands = "FILE...", .min_operands = 1, .max_operands = -1,
    .summary = "as scenario run, but print only the misses and the summary",
    .flags = scenario_flags, .json_members = scenario_json, .run = run_scenario};
