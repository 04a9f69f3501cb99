/* cli_whatif.c — `qmesh whatif`: how many qubits fit on variants of a cluster (more or fewer
 * hosts, devices per host, device memory, failed devices), as one table.
 *
 * In: parsed arguments (cli_args.c, the flag table below; docs/cli.md "qmesh whatif"). Out: a
 * table on stdout (default), the one JSON object of --json (members `scenario`, `request`,
 * `estimates_note`, `rows` after ok, command, error) or CSV (--csv: a header and one line per
 * row). Rows come from qm_whatif_run (engine/pipeline/whatif.c); this file parses the lists and
 * renders. Exit 0 when the rows were printed (a row may be infeasible or carry its own error), 1
 * when the scenario cannot be loaded or the request is one no variant can plan, 2 for usage
 * errors (E-ARG).
 * Must not: build topologies or plan by itself.
 */
#include "cli_internal.h"
#include "pipeline.h"
#include "plan_output.h"
#include "units.h"
#include "whatif.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ESTIMATES_NOTE "seconds per phase from the cost model for the scenario's hardware figures " \
                       "(estimates, not measurements)"

typedef struct whatif_args {
    int hosts[QM_WHATIF_MAX_ROWS], n_hosts;
    int dph[QM_WHATIF_MAX_ROWS], n_dph;
    uint64_t mem[QM_WHATIF_MAX_ROWS];
    int n_mem;
    qm_whatif_failed without[QM_WHATIF_MAX_ROWS];
    int without_first[QM_WHATIF_MAX_ROWS]; /* each set's first id in ids (ids grows while parsed) */
    int n_without;
    char (*ids)[QM_ID_BYTES]; /* every --without id, in order; the sets point into it */
    int n_ids;
} whatif_args;

/* The items of a comma list, each passed to item(); 2 on a usage error (printed). */
static int split_list(const char *opt, const char *text, int max,
                      int (*item)(whatif_args *, const char *, const char *), whatif_args *a)
{
    char buf[4096];
    if (strlen(text) >= sizeof buf)
        return qm_cli_usage_error("whatif", "%s: the list is longer than %zu bytes", opt,
                                  sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", text);
    int n = 0;
    for (char *s = buf;; ++n) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        if (!*s)
            return qm_cli_usage_error("whatif", "%s '%s': an empty item", opt, text);
        if (n >= max)
            return qm_cli_usage_error("whatif", "%s: more than %d items", opt, max);
        if (item(a, opt, s))
            return 2;
        if (!comma)
            break;
        s = comma + 1;
    }
    return 0;
}

static int count_item(const char *opt, const char *s, int lo, int hi, int *out)
{
    qm_status st;
    uint64_t u = 0;
    if (qm_units_parse_uint(s, 0, UINT64_MAX, &u, &st) != QM_OK)
        return qm_cli_usage_error("whatif", "%s '%s' is not a whole number", opt, s);
    if (u < (uint64_t)lo || u > (uint64_t)hi)
        return qm_cli_usage_error("whatif", "%s %s is out of range (%d..%d)", opt, s, lo, hi);
    *out = (int)u;
    return 0;
}

static int hosts_item(whatif_args *a, const char *opt, const char *s)
{
    return count_item(opt, s, 1, QM_VARIANT_MAX_HOSTS, &a->hosts[a->n_hosts++]);
}

static int dph_item(whatif_args *a, const char *opt, const char *s)
{
    return count_item(opt, s, 1, QM_VARIANT_MAX_DEVICES_PER_HOST, &a->dph[a->n_dph++]);
}

static int mem_item(whatif_args *a, const char *opt, const char *s)
{
    qm_status st;
    qm_status_clear(&st);
    if (qm_units_parse_size(s, &a->mem[a->n_mem++], &st) != QM_OK)
        return qm_cli_usage_error("whatif", "%s %s", opt, st.msg);
    return 0;
}

/* One failed set: ids joined by '+'. */
static int without_item(whatif_args *a, const char *opt, const char *s)
{
    qm_whatif_failed *f = &a->without[a->n_without];
    f->n = 0;
    a->without_first[a->n_without++] = a->n_ids;
    for (const char *p = s;;) {
        const char *plus = strchr(p, '+');
        size_t len = plus ? (size_t)(plus - p) : strlen(p);
        if (len == 0)
            return qm_cli_usage_error("whatif", "%s '%s': an empty device id", opt, s);
        if (len >= QM_ID_BYTES)
            return qm_cli_usage_error("whatif", "%s: the id '%.*s' is longer than %d bytes", opt,
                                      (int)len, p, QM_ID_BYTES - 1);
        char(*g)[QM_ID_BYTES] = realloc(a->ids, ((size_t)a->n_ids + 1) * sizeof *g);
        if (!g)
            return qm_cli_usage_error("whatif", "%s: out of host memory", opt);
        a->ids = g;
        snprintf(a->ids[a->n_ids++], QM_ID_BYTES, "%.*s", (int)len, p);
        f->n++;
        if (!plus)
            break;
        p = plus + 1;
    }
    return 0;
}

/* ---- labels and cells --------------------------------------------------------------------------- */

static void variant_label(const qm_whatif_row *r, char *buf, size_t cap)
{
    size_t u = 0;
    buf[0] = '\0';
    if (r->base) {
        snprintf(buf, cap, "scenario");
        return;
    }
    if (r->variant.hosts)
        u += (size_t)snprintf(buf + u, cap - u, "hosts=%d", r->variant.hosts);
    if (r->variant.devices_per_host && u < cap)
        u += (size_t)snprintf(buf + u, cap - u, "%sdevices/host=%d", u ? " " : "",
                              r->variant.devices_per_host);
    if (r->variant.device_memory_bytes && u < cap) {
        char m[48], *w = m;
        qm_units_format_size(r->variant.device_memory_bytes, m, sizeof m);
        for (char *c = m; *c; ++c) /* "40 GiB" -> "40GiB": one word per setting */
            if (*c != ' ')
                *w++ = *c;
        *w = '\0';
        u += (size_t)snprintf(buf + u, cap - u, "%smemory=%s", u ? " " : "", m);
    }
    for (int i = 0; i < r->variant.n_without && u < cap; ++i)
        u += (size_t)snprintf(buf + u, cap - u, "%s%s", i ? "+" : u ? " without=" : "without=",
                              r->variant.without[i]);
}

static const char *estimate_cell(const qm_whatif_row *r, int e, char *buf, size_t cap)
{
    if (!r->planned || !r->feasible || !r->estimate_set[e])
        return "-";
    return qm_format_seconds(r->estimates_s[e], buf, cap);
}

/* ---- table -------------------------------------------------------------------------------------- */

static void print_table(const char *title, const qm_whatif_spec *spec, const qm_whatif_row *rows,
                        int n)
{
    char lab[512], a[32], b[32];
    int w = 8;
    for (int i = 0; i < n; ++i) {
        variant_label(&rows[i], lab, sizeof lab);
        if ((int)strlen(lab) > w)
            w = (int)strlen(lab);
    }
    printf("scenario: %s\nwhatif:   ", title);
    if (spec->max)
        printf("the largest state per dtype");
    else
        printf("%u qubits", spec->request.qubits);
    printf(", batch %llu, policy %s\n", (unsigned long long)spec->request.batch,
           qm_policy_name(spec->request.policy));
    printf("%-*s %5s %7s %12s %-10s %3s %6s %-4s %-8s %6s", w, "variant", "hosts", "devices",
           "memory", "dtype", "max", "qubits", "fits", "policy", "shards");
    for (int e = 0; e < QM_PHASE_COUNT_; ++e)
        printf(" %14s", qm_phase_name((qm_phase)e));
    printf("\n");
    for (int i = 0; i < n; ++i) {
        const qm_whatif_row *r = &rows[i];
        variant_label(r, lab, sizeof lab);
        printf("%-*s", w, lab);
        if (r->built)
            printf(" %5d %7d %12s", r->hosts, r->devices,
                   qm_format_bytes(r->memory_bytes, a, sizeof a));
        else
            printf(" %5s %7s %12s", "-", "-", "-");
        printf(" %-10s", qm_dtype_name(r->dtype));
        char mq[16] = "-", qb[16] = "-";
        if (r->planned && r->max_qubits)
            snprintf(mq, sizeof mq, "%u", r->max_qubits);
        if (r->planned && r->qubits)
            snprintf(qb, sizeof qb, "%u", r->qubits);
        printf(" %3s %6s %-4s", mq, qb, r->planned && r->feasible ? "yes" : "no");
        if (r->planned && r->feasible) {
            printf(" %-8s %6d", qm_policy_name(r->policy), r->shards);
            for (int e = 0; e < QM_PHASE_COUNT_; ++e)
                printf(" %14s", estimate_cell(r, e, b, sizeof b));
        } else {
            printf(" error[%s]: %s", qm_code_name(r->error.code), r->error.msg);
        }
        printf("\n");
    }
    printf("memory: summed over the devices; estimates: " ESTIMATES_NOTE "\n");
}

/* ---- JSON --------------------------------------------------------------------------------------- */

static json_t *error_json(const qm_status *st)
{
    if (st->code == QM_OK)
        return json_null();
    return json_pack("{s:s, s:s}", "code", qm_code_name(st->code), "message", st->msg);
}

static json_t *request_json(const qm_whatif_spec *spec, bool have_features)
{
    json_t *dt = json_array();
    for (int k = 0; k < spec->n_dtypes; ++k)
        json_array_append_new(dt, json_string(qm_dtype_name(spec->dtypes[k])));
    json_t *o = json_object();
    json_object_set_new(o, "qubits", spec->max ? json_null() : json_integer(spec->request.qubits));
    json_object_set_new(o, "max", json_boolean(spec->max));
    json_object_set_new(o, "dtypes", dt);
    json_object_set_new(o, "policy", json_string(qm_policy_name(spec->request.policy)));
    json_object_set_new(o, "batch", qm_json_count(spec->request.batch));
    json_object_set_new(o, "features",
                        have_features ? qm_json_count(spec->request.features) : json_null());
    json_object_set_new(o, "ranks", spec->request.ranks ? json_integer(spec->request.ranks)
                                                        : json_null());
    return o;
}

static json_t *row_json(const qm_whatif_row *r)
{
    char lab[512];
    variant_label(r, lab, sizeof lab);
    json_t *v = json_object(), *wo = json_array(), *o = json_object(), *est = json_object();
    for (int i = 0; i < r->variant.n_without; ++i)
        json_array_append_new(wo, json_string(r->variant.without[i]));
    json_object_set_new(v, "label", json_string(lab));
    json_object_set_new(v, "hosts", r->variant.hosts ? json_integer(r->variant.hosts) : json_null());
    json_object_set_new(v, "devices_per_host", r->variant.devices_per_host
                                                   ? json_integer(r->variant.devices_per_host)
                                                   : json_null());
    json_object_set_new(v, "device_memory_bytes", r->variant.device_memory_bytes
                                                      ? qm_json_count(r->variant.device_memory_bytes)
                                                      : json_null());
    json_object_set_new(v, "without", wo);
    json_object_set_new(o, "variant", v);
    json_object_set_new(o, "dtype", json_string(qm_dtype_name(r->dtype)));
    json_object_set_new(o, "hosts", r->built ? json_integer(r->hosts) : json_null());
    json_object_set_new(o, "devices", r->built ? json_integer(r->devices) : json_null());
    json_object_set_new(o, "memory_bytes", r->built ? qm_json_count(r->memory_bytes) : json_null());
    json_object_set_new(o, "usable_bytes", r->built ? qm_json_count(r->usable_bytes) : json_null());
    json_object_set_new(o, "max_qubits", r->planned && r->max_qubits ? json_integer(r->max_qubits)
                                                                      : json_null());
    json_object_set_new(o, "qubits", r->planned && r->qubits ? json_integer(r->qubits) : json_null());
    json_object_set_new(o, "feasible", json_boolean(r->planned && r->feasible));
    json_object_set_new(o, "policy", r->planned ? json_string(qm_policy_name(r->policy))
                                                : json_null());
    json_object_set_new(o, "shards", r->planned && r->feasible ? json_integer(r->shards)
                                                               : json_null());
    for (int e = 0; e < QM_PHASE_COUNT_; ++e)
        json_object_set_new(est, qm_phase_name((qm_phase)e),
                            r->planned && r->feasible && r->estimate_set[e]
                                ? json_real(r->estimates_s[e])
                                : json_null());
    json_object_set_new(o, "estimates_s", est);
    json_object_set_new(o, "error", error_json(&r->error));
    return o;
}

/* --json: the command's members (the error is the object's own, cli_args.c). */
static void put_json(const char *label, const qm_whatif_spec *spec, bool have_features,
                     const qm_whatif_row *rows, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; ++i)
        json_array_append_new(arr, row_json(&rows[i]));
    qm_cli_json_put(json_pack("{s:s, s:o, s:s, s:o}", "scenario", label, "request",
                              request_json(spec, have_features), "estimates_note", ESTIMATES_NOTE,
                              "rows", arr));
}

/* ---- CSV ---------------------------------------------------------------------------------------- */

static void csv_field(const char *s, bool last)
{
    if (strpbrk(s, ",\"\n")) {
        putchar('"');
        for (; *s; ++s) {
            if (*s == '"')
                putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else {
        fputs(s, stdout);
    }
    putchar(last ? '\n' : ',');
}

static void print_csv(const qm_whatif_row *rows, int n)
{
    static const char *const head[] = {"variant", "hosts", "devices", "memory_bytes",
                                       "usable_bytes", "dtype", "max_qubits", "qubits", "feasible",
                                       "policy", "shards"};
    for (size_t i = 0; i < sizeof head / sizeof *head; ++i)
        csv_field(head[i], false);
    for (int e = 0; e < QM_PHASE_COUNT_; ++e) {
        char h[40];
        snprintf(h, sizeof h, "%s_s", qm_phase_name((qm_phase)e));
        csv_field(h, false);
    }
    csv_field("error_code", false);
    csv_field("error_message", true);
    for (int i = 0; i < n; ++i) {
        const qm_whatif_row *r = &rows[i];
        char c[512];
        const bool ok = r->planned && r->feasible;
        variant_label(r, c, sizeof c);
        csv_field(c, false);
#define CELL(cond, ...) (cond ? (snprintf(c, sizeof c, __VA_ARGS__), c) : "")
        csv_field(CELL(r->built, "%d", r->hosts), false);
        csv_field(CELL(r->built, "%d", r->devices), false);
        csv_field(CELL(r->built, "%llu", (unsigned long long)r->memory_bytes), false);
        csv_field(CELL(r->built, "%llu", (unsigned long long)r->usable_bytes), false);
        csv_field(qm_dtype_name(r->dtype), false);
        csv_field(CELL(r->planned && r->max_qubits, "%u", r->max_qubits), false);
        csv_field(CELL(r->planned && r->qubits, "%u", r->qubits), false);
        csv_field(ok ? "yes" : "no", false);
        csv_field(r->planned ? qm_policy_name(r->policy) : "", false);
        csv_field(CELL(ok, "%d", r->shards), false);
        for (int e = 0; e < QM_PHASE_COUNT_; ++e)
            csv_field(CELL(ok && r->estimate_set[e], "%.9g", r->estimates_s[e]), false);
        csv_field(r->error.code != QM_OK ? qm_code_name(r->error.code) : "", false);
        csv_field(r->error.code != QM_OK ? r->error.msg : "", true);
#undef CELL
    }
}

/* ---- the command -------------------------------------------------------------------------------- */

static const qm_cli_flag whatif_flags[] = {
    {"--scenario", "FILE", "the scenario (qmesh/1 YAML) to vary; default: the built-in mesh"},
    {"--hosts", "N,...", "variants of N hosts (1..4096): the first N, or copies of the last host"},
    {"--devices-per-host", "K,...", "variants of K devices per host (1..1024): the first K, or "
                                    "copies of the last"},
    {"--device-memory", "SIZE,...", "variants with every device's memory SIZE (e.g. 40GiB); "
                                    "reserves stay"},
    {"--without", "DEV[+DEV],...", "variants with failed devices; '+' joins devices that fail "
                                   "together"},
    {"--qubits", "N", "plan N qubits on every variant and say whether it fits"},
    {"--max", NULL, "plan every variant's largest state per dtype (the default)"},
    {"--dtype", "complex64|complex128", "one dtype (default: both, one row each)"},
    {"--policy", "P", "auto (default), single, equal, weighted, balanced or replicated"},
    {"--batch", "B", "number of states (samples) planned together (default 1)"},
    {"--features", "F", "values per sample (default 2^N)"},
    {"--gather", "auto|host|none|DEVICE", "where a gathered state would go (default auto)"},
    {"--ranks", "R", "processes (MPI ranks) the devices are split over (default: the scenario's)"},
    {"--encoding", "E", "amplitude (default), angle, basis, phase, iqp or iqp-z"},
    {"--json", NULL, "print one JSON object (docs/cli.md) instead of the table"},
    {"--csv", NULL, "print CSV instead of the table: a header and one line per row"},
    {NULL, NULL, NULL}};
static const char *const whatif_json[] = {"scenario", "request", "estimates_note", "rows", NULL};

/* The lists and the request of a into *w and *spec; 2 on a usage error (printed), 1 on a bad
 * request value (printed, as `plan` does). */
static int parse(const qm_cli_args *a, whatif_args *w, qm_whatif_spec *spec)
{
    static const char *const lists[] = {"--hosts", "--devices-per-host", "--device-memory",
                                        "--without"};
    int (*const items[])(whatif_args *, const char *, const char *) = {hosts_item, dph_item,
                                                                        mem_item, without_item};
    const bool csv = qm_cli_arg(a, "--csv") != NULL;
    if (a->json && csv)
        return qm_cli_usage_error("whatif", "%s", "--json and --csv exclude each other");
    if (qm_cli_arg(a, "--max") && qm_cli_arg(a, "--qubits"))
        return qm_cli_usage_error("whatif", "%s", "--qubits N and --max exclude each other");
    for (int k = 0; k < 4; ++k) {
        const char *v = qm_cli_arg(a, lists[k]);
        if (!v)
            continue;
        if (split_list(lists[k], v, QM_WHATIF_MAX_ROWS, items[k], w))
            return 2;
    }
    qm_status st;
    qm_status_clear(&st);
    if (qm_cli_request_parse(a, &spec->request, &st) != QM_OK)
        return qm_cli_error(&st);
    for (int i = 0; i < w->n_without; ++i) /* ids is complete: point into it */
        w->without[i].ids = w->ids + w->without_first[i];
    spec->max = !qm_cli_arg(a, "--qubits");
    spec->hosts = w->hosts;
    spec->n_hosts = w->n_hosts;
    spec->devices_per_host = w->dph;
    spec->n_devices_per_host = w->n_dph;
    spec->device_memory_bytes = w->mem;
    spec->n_device_memory = w->n_mem;
    spec->without = w->without;
    spec->n_without = w->n_without;
    if (qm_cli_arg(a, "--dtype")) {
        spec->n_dtypes = 1;
        spec->dtypes[0] = spec->request.dtype;
    } else {
        spec->n_dtypes = 2;
        spec->dtypes[0] = QM_DTYPE_COMPLEX64;
        spec->dtypes[1] = QM_DTYPE_COMPLEX128;
    }
    return 0;
}

static int run_whatif(const qm_cli_args *a)
{
    whatif_args *w = calloc(1, sizeof *w);
    if (!w)
        return qm_cli_error_text("E-NOMEM", "whatif: out of host memory (%zu bytes)", sizeof *w);
    qm_whatif_spec spec = {0};
    qm_request_init(&spec.request);
    int rc = parse(a, w, &spec);
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    qm_whatif_row *rows = NULL;
    int n = 0;
    qm_status st;
    qm_status_clear(&st);
    if (rc)
        goto done;
    const char *scenario = qm_cli_arg(a, "--scenario");
    if (qm_cli_load_scenario(scenario, &pl, &st) != QM_OK)
        rc = 1;
    else if (qm_whatif_run(pl.topology, &spec, &rows, &n, &st) != QM_OK)
        rc = st.code == QM_E_ARG ? 2 : 1; /* a variation no variant can make is a usage error */
    if (a->json)
        put_json(pl.topology ? qm_topology_label(pl.topology) : scenario ? scenario : "<built-in>",
                 &spec, qm_cli_arg(a, "--features") != NULL, rows, n);
    if (rc) {
        qm_cli_error(&st);
        goto done;
    }
    char title[QM_STATUS_FILE_BYTES + 96];
    if (qm_cli_arg(a, "--csv"))
        print_csv(rows, n);
    else if (!a->json)
        print_table(qm_topology_title(pl.topology, title, sizeof title), &spec, rows, n);
done:
    free(rows);
    free(w->ids);
    free(w);
    qm_pipeline_fini(&pl);
    return rc;
}

const qm_cli_command qm_cli_cmd_whatif = {
    .name = "whatif",
    .summary = "the largest state (or whether N qubits fit) on variants of a cluster: hosts, "
               "devices per host, device memory, failed devices",
    .flags = whatif_flags, .json_members = whatif_json, .run = run_whatif};
