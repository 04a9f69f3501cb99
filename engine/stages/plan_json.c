/* plan_json.c — a plan as the JSON object of `qmesh plan --json` (docs/cli.md), and as a table.
 *
 * In: a plan, its mesh and the scenario (its label for JSON; the topology for the table, titled as
 * every command titles it). Out: a jansson object (never assembled by hand) or text on a FILE.
 * The table never prints a line with a hole in it: a plan that stopped at its error says "not
 * planned" / "not computed" for the gather and the frontier; its error itself is printed once, by
 * the caller, on stderr; headrooms carry their sign next to the number; estimates are labelled as
 * the scenario's hardware (encode labels its measured times as this machine's). Byte counts are JSON integers, except counts of 2^63 and more (jansson's
 * integers are signed 64-bit), which are reals (qm_json_count); start/end are half-open global
 * amplitude indices; estimates are seconds (null when the scenario lacks the figures for a phase;
 * the data path's read, staging and write are null when the plan has no input file or output).
 * Sizes stay uint64_t throughout; the headroom (usable - planned, may be negative) is formed as a
 * sign and a magnitude, never by signed subtraction.
 * Must not: change the plan.
 */
#include "feasibility.h"
#include "plan_output.h"
#include "status_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

json_t *qm_json_count(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

json_t *qm_json_headroom(uint64_t usable, uint64_t planned)
{
    uint64_t m;
    if (!qm_headroom_split(usable, planned, &m))
        return qm_json_count(m);
    if (m - 1 <= (uint64_t)INT64_MAX) /* m >= 1: -m fits down to -2^63 */
        return json_integer(-(json_int_t)(m - 1) - 1);
    return json_real(-(double)m);
}

static json_t *jint(uint64_t v) { return qm_json_count(v); }

static json_t *estimates_json(const qm_plan *p)
{
    json_t *e = json_object();
    for (int k = 0; k < QM_PHASE_COUNT_; ++k)
        json_object_set_new(e, qm_phase_name((qm_phase)k),
                            p->has_estimates && p->estimate_set[k] ? json_real(p->estimates_s[k])
                                                                   : json_null());
    /* the data path (docs/planner.md "Data path"): null without an input file (read, staging)
     * or without an output (write) */
    for (int k = 0; k < QM_IO_PHASE_COUNT_; ++k)
        json_object_set_new(e, qm_io_phase_name((qm_io_phase)k),
                            p->io_set[k] ? json_real(p->io_s[k]) : json_null());
    return e;
}

/* The host-memory check per scenario host (docs/planner.md "Host memory"); null when not checked. */
static json_t *hosts_json(const qm_plan *p, const qm_mesh *mesh)
{
    if (!p->host_checked)
        return json_null();
    json_t *a = json_array();
    for (int h = 0; a && h < p->n_hosts; ++h) {
        const qm_plan_host *ph = &p->hosts[h];
        json_array_append_new(
            a, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "host", mesh->topo->hosts[h].id,
                         "memory_bytes", ph->memory_bytes ? jint(ph->memory_bytes) : json_null(),
                         "planned_bytes", jint(ph->planned_bytes), "device_bytes",
                         jint(ph->device_bytes), "staging_bytes", jint(ph->staging_bytes),
                         "output_bytes", jint(ph->output_bytes)));
    }
    return a ? a : json_null();
}

qm_code qm_plan_to_json(const qm_plan *p, const qm_mesh *mesh, const char *scenario, json_t **out,
                        qm_status *st)
{
    json_t *o = json_object(), *req = json_object(), *shards = json_array(), *devs = json_array(),
           *gather = json_object(), *mq = json_object();
    if (!o || !req || !shards || !devs || !gather || !mq) {
        json_decref(o);
        json_decref(req);
        json_decref(shards);
        json_decref(devs);
        json_decref(gather);
        json_decref(mq);
        return qm_fail(st, QM_E_NOMEM, "plan json: out of host memory");
    }
    json_object_set_new(o, "scenario", json_string(scenario ? scenario : ""));
    json_object_set_new(req, "qubits", jint(p->request.qubits));
    json_object_set_new(req, "dtype", json_string(qm_dtype_name(p->request.dtype)));
    json_object_set_new(req, "policy", json_string(qm_policy_name(p->request.policy)));
    json_object_set_new(req, "batch", jint(p->request.batch));
    json_object_set_new(req, "features", jint(p->request.features));
    json_object_set_new(req, "encoding", json_string(qm_encoding_name(p->request.encoding)));
    json_object_set_new(req, "gather", json_string(p->request.gather));
    json_object_set_new(req, "ranks", jint((uint64_t)mesh->n_ranks));
    json_object_set_new(o, "request", req);
    /* the policy whose layout shards and devices show: the one chosen when feasible; null when
     * the plan stopped before any layout */
    json_object_set_new(o, "policy", p->feasible || p->n_shards > 0
                                         ? json_string(qm_policy_name(p->policy))
                                         : json_null());
    json_object_set_new(o, "feasible", json_boolean(p->feasible));
    if (p->feasible) {
        json_object_set_new(o, "error", json_null());
    } else {
        json_t *err = json_object();
        json_object_set_new(err, "code", json_string(qm_code_name(p->error.code)));
        json_object_set_new(err, "message", json_string(p->error.msg));
        json_object_set_new(o, "error", err);
    }
    json_object_set_new(o, "global_amplitudes", jint(p->global_amplitudes));
    json_object_set_new(o, "state_bytes", jint(p->state_bytes));
    json_object_set_new(o, "pages", p->pages ? jint(p->pages) : json_null());
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *s = &p->shards[i];
        json_t *j = json_object();
        json_object_set_new(j, "shard", jint((uint64_t)i));
        json_object_set_new(j, "rank", jint((uint64_t)s->rank));
        json_object_set_new(j, "device", json_string(mesh->devices[s->device].id));
        json_object_set_new(j, "start", jint(s->start));
        json_object_set_new(j, "end", jint(s->end));
        json_object_set_new(j, "bytes", jint(s->bytes));
        json_array_append_new(shards, j);
    }
    json_object_set_new(o, "shards", shards);
    for (int d = 0; d < p->n_devices; ++d) {
        const qm_plan_device *pd = &p->devices[d];
        json_t *j = json_object();
        json_object_set_new(j, "device", json_string(mesh->devices[d].id));
        json_object_set_new(j, "rank", jint((uint64_t)mesh->devices[d].rank));
        json_object_set_new(j, "usable_bytes", jint(pd->usable_bytes));
        json_object_set_new(j, "planned_bytes", jint(pd->planned_bytes));
        json_object_set_new(j, "shard_bytes", jint(pd->shard_bytes));
        json_object_set_new(j, "staging_bytes", jint(pd->staging_bytes));
        json_object_set_new(j, "scratch_bytes", jint(pd->scratch_bytes));
        json_object_set_new(j, "headroom_bytes",
                            qm_json_headroom(pd->usable_bytes, pd->planned_bytes));
        json_array_append_new(devs, j);
    }
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "hosts", hosts_json(p, mesh));
    json_object_set_new(gather, "feasible", json_boolean(p->gather.feasible));
    json_object_set_new(gather, "target", json_string(p->gather.target));
    json_object_set_new(gather, "reason", json_string(p->gather.reason));
    json_object_set_new(o, "gather", gather);
    json_object_set_new(mq, "complex64", p->max_qubits[0] ? jint(p->max_qubits[0]) : json_null());
    json_object_set_new(mq, "complex128", p->max_qubits[1] ? jint(p->max_qubits[1]) : json_null());
    json_object_set_new(o, "max_qubits", mq);
    json_object_set_new(o, "estimates_s", estimates_json(p));
    json_object_set_new(o, "estimates_note",
                        p->estimates_note[0] ? json_string(p->estimates_note) : json_null());
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
    json_object_set_new(o, "plan_hash", json_string(hash));
    *out = o;
    return QM_OK;
}

/* A byte count right-aligned in width w, with its sign ("-1.92 TiB", never "-   1.92 TiB"). */
static void print_signed_bytes(FILE *f, int w, bool neg, uint64_t mag)
{
    char a[32], b[40];
    snprintf(b, sizeof b, "%s%s", neg ? "-" : "", qm_format_bytes(mag, a, sizeof a));
    fprintf(f, "%*s", w, b);
}

/* The host-memory check (sim backend): one line per scenario host. */
static void print_hosts(const qm_plan *p, const qm_mesh *mesh, FILE *f)
{
    char a[32], b[32];
    if (!p->host_checked || p->n_shards == 0)
        return;
    fprintf(f, "\nhost memory (sim backend: every shard, host staging and the output assembly "
               "live in host RAM):\n");
    for (int h = 0; h < p->n_hosts; ++h) {
        const qm_plan_host *ph = &p->hosts[h];
        if (ph->memory_bytes)
            fprintf(f, "  %-12s %s planned of %s\n", mesh->topo->hosts[h].id,
                    qm_format_bytes(ph->planned_bytes, a, sizeof a),
                    qm_format_bytes(ph->memory_bytes, b, sizeof b));
        else
            fprintf(f, "  %-12s %s planned; not checked (the scenario gives the host no memory)\n",
                    mesh->topo->hosts[h].id, qm_format_bytes(ph->planned_bytes, a, sizeof a));
    }
    if (mesh->host_budget.available_bytes)
        fprintf(f, "  this machine %s planned of %s available (MemAvailable)\n",
                qm_format_bytes(p->local_planned_bytes, a, sizeof a),
                qm_format_bytes(mesh->host_budget.available_bytes, b, sizeof b));
}

void qm_plan_print(const qm_plan *p, const qm_mesh *mesh, const qm_topology *t, FILE *f)
{
    char a[32], b[32], c[32], title[QM_STATUS_FILE_BYTES + 96];
    const char *name = t ? t->name : "";
    fprintf(f, "scenario: %s\n", qm_topology_title(t, title, sizeof title));
    fprintf(f, "request:  %u qubits, %s, policy %s (%s%s), batch %llu, features %llu, %d ranks\n",
            p->request.qubits, qm_dtype_name(p->request.dtype), qm_policy_name(p->request.policy),
            p->feasible ? "used: " : p->n_shards ? "layout shown: " : "no layout",
            p->feasible || p->n_shards ? qm_policy_name(p->policy) : "",
            (unsigned long long)p->request.batch,
            (unsigned long long)p->request.features, mesh->n_ranks);
    if (p->pages == 1)
        fprintf(f, "state:    %llu amplitudes, %s, one page (the whole state in one block)\n",
                (unsigned long long)p->global_amplitudes, qm_format_bytes(p->state_bytes, a, sizeof a));
    else if (p->pages)
        fprintf(f, "state:    %llu amplitudes, %s, cut into %llu pages (equal blocks of %llu "
                   "amplitudes; each device holds a run of whole pages)\n",
                (unsigned long long)p->global_amplitudes, qm_format_bytes(p->state_bytes, a, sizeof a),
                (unsigned long long)p->pages,
                (unsigned long long)(p->global_amplitudes / p->pages));
    else
        fprintf(f, "state:    %llu amplitudes, %s, not cut into pages (%s)\n",
                (unsigned long long)p->global_amplitudes, qm_format_bytes(p->state_bytes, a, sizeof a),
                p->feasible ? "ranges not aligned to pages" : "the plan stopped at its error");
    if (p->feasible)
        fprintf(f, "feasible: yes\n");
    else
        fprintf(f, "feasible: no (%s; the error line says why)\n", qm_code_name(p->error.code));
    fprintf(f, "\n%-6s %-5s %-14s %22s %22s %12s\n", "shard", "rank", "device", "start", "end",
            "bytes");
    for (int i = 0; i < p->n_shards; ++i) {
        const qm_plan_shard *s = &p->shards[i];
        fprintf(f, "%-6d %-5d %-14s %22llu %22llu %12s\n", i, s->rank, mesh->devices[s->device].id,
                (unsigned long long)s->start, (unsigned long long)s->end,
                qm_format_bytes(s->bytes, a, sizeof a));
    }
    fprintf(f, "\n%-14s %12s %12s %12s %12s\n", "device", "usable", "shard", "staging", "headroom");
    for (int i = 0; i < p->n_devices; ++i) {
        const qm_plan_device *pd = &p->devices[i];
        uint64_t head;
        const bool neg = qm_headroom_split(pd->usable_bytes, pd->planned_bytes, &head);
        fprintf(f, "%-14s %12s %12s %12s ", mesh->devices[i].id,
                qm_format_bytes(pd->usable_bytes, a, sizeof a),
                qm_format_bytes(pd->shard_bytes, b, sizeof b),
                qm_format_bytes(pd->staging_bytes, c, sizeof c));
        print_signed_bytes(f, 12, neg, head);
        fputc('\n', f);
    }
    /* iqp cut over devices: the scratch per device (the same on each, or from least to most
     * when its pages differ) */
    uint64_t smin = UINT64_MAX, smax = 0;
    for (int i = 0; i < p->n_devices; ++i)
        if (p->devices[i].scratch_bytes) {
            smin = p->devices[i].scratch_bytes < smin ? p->devices[i].scratch_bytes : smin;
            smax = p->devices[i].scratch_bytes > smax ? p->devices[i].scratch_bytes : smax;
        }
    if (smax) {
        if (smin == smax)
            fprintf(f, "\nscratch:  %s on each device holding a shard",
                    qm_format_bytes(smax, a, sizeof a));
        else
            fprintf(f, "\nscratch:  %s to %s on each device holding a shard (one piece per page "
                    "it holds)", qm_format_bytes(smin, a, sizeof a),
                    qm_format_bytes(smax, b, sizeof b));
        /* the exchanges: stages between pages, in pieces of the scratch (iqp.c) */
        const uint64_t page = ((uint64_t)1 << qm_plan_iqp_local_bits(p)) *
                              qm_dtype_size(p->request.dtype);
        const unsigned x = qm_plan_iqp_exchanges(p);
        fprintf(f, ", for the %s transform's exchanges (counted in headroom)",
                qm_encoding_name(p->request.encoding));
        if (x)
            fprintf(f, ": %u stage%s between pages of %s, each in pieces of %s\n", x,
                    x == 1 ? "" : "s", qm_format_bytes(page, a, sizeof a),
                    qm_format_bytes(qm_iqp_scratch_bytes(page), b, sizeof b));
        else
            fputc('\n', f);
    }
    print_hosts(p, mesh, f);
    if (p->gather.target[0])
        fprintf(f, "\ngather:   %s to %s (%s)\n", p->gather.feasible ? "feasible" : "infeasible",
                p->gather.target, p->gather.reason);
    else
        fprintf(f, "\ngather:   not planned (the plan stopped at its error)\n");
    if (p->max_qubits[0] || p->max_qubits[1]) {
        fprintf(f, "frontier: largest state that fits under policy %s:",
                qm_policy_name(p->request.policy));
        for (int k = 0; k < 2; ++k) {
            if (p->max_qubits[k])
                fprintf(f, " %s %u qubits%s", k ? "complex128" : "complex64", p->max_qubits[k],
                        k ? "" : ",");
            else
                fprintf(f, " %s none%s", k ? "complex128" : "complex64", k ? "" : ",");
        }
        fputc('\n', f);
    } else {
        fprintf(f, "frontier: not computed (the plan stopped at its error)\n");
    }
    fprintf(f, "estimates for %s's hardware (modelled from the scenario, not measured):", name);
    for (int k = 0; k < QM_PHASE_COUNT_; ++k) {
        if (p->has_estimates && p->estimate_set[k])
            fprintf(f, " %s %s%s", qm_phase_name((qm_phase)k),
                    qm_format_seconds(p->estimates_s[k], a, sizeof a), k + 1 < QM_PHASE_COUNT_ ? "," : "");
        else
            fprintf(f, " %s n/a%s", qm_phase_name((qm_phase)k), k + 1 < QM_PHASE_COUNT_ ? "," : "");
    }
    fprintf(f, "\n");
    if (p->datapath.input || p->datapath.output != QM_DP_OUTPUT_NONE) {
        if (p->datapath.input)
            fprintf(f, "data path (input file %.0f%% in the page cache; %s):",
                    100.0 * p->datapath.input_resident,
                    p->datapath.sim ? "staged after the read" : "staging overlaps the read");
        else
            fprintf(f, "data path (no input file):");
        for (int k = 0; k < QM_IO_PHASE_COUNT_; ++k) {
            if (!p->datapath.input && k != QM_IO_WRITE)
                continue;
            if (p->io_set[k])
                fprintf(f, " %s %s", qm_io_phase_name((qm_io_phase)k),
                        qm_format_seconds(p->io_s[k], a, sizeof a));
            else
                fprintf(f, " %s n/a", qm_io_phase_name((qm_io_phase)k));
            fputc(k + 1 < QM_IO_PHASE_COUNT_ ? ',' : ' ', f);
        }
        fprintf(f, "%s\n", p->datapath.output == QM_DP_OUTPUT_NONE
                                ? "(no output file)"
                                : p->datapath.output == QM_DP_OUTPUT_FILE ? "(write: --out)"
                                                                          : "(write: --out-dir)");
    }
    if (p->estimates_note[0])
        fprintf(f, "          (%s)\n", p->estimates_note);
}

qm_code qm_plan_max_to_json(const qm_plan_max *m, const qm_mesh *mesh, struct json_t **out,
                            qm_status *st)
{
    static const char *const dts[2] = {"complex64", "complex128"};
    json_t *o = json_object();
    if (!o)
        return qm_fail(st, QM_E_NOMEM, "plan: out of host memory for the JSON object");
    json_object_set_new(o, "ranks", json_integer(mesh->n_ranks));
    json_object_set_new(o, "devices", json_integer(mesh->n_devices));
    json_object_set_new(o, "unit", json_string(m->batch ? "samples" : "qubits"));
    json_object_set_new(o, "features", m->batch ? jint(m->features) : json_null());
    json_object_set_new(o, "qubits", m->batch ? jint(m->qubits) : json_null());
    for (int k = 0; k < 2; ++k) {
        json_t *d = json_object();
        for (int pol = 0; pol < QM_POLICY_COUNT_; ++pol)
            json_object_set_new(d, qm_policy_name((qm_policy)pol),
                                m->value[k][pol] ? jint(m->value[k][pol]) : json_null());
        json_object_set_new(d, "auto_policy", m->auto_pick[k] == QM_POLICY_AUTO
                                                  ? json_null()
                                                  : json_string(qm_policy_name(m->auto_pick[k])));
        json_object_set_new(o, dts[k], d);
    }
    *out = o;
    return QM_OK;
}

void qm_plan_max_print(const qm_plan_max *m, const qm_mesh *mesh, const qm_topology *t, FILE *f)
{
    char title[QM_STATUS_FILE_BYTES + 96];
    fprintf(f, "scenario: %s, %d ranks, %d devices\n", qm_topology_title(t, title, sizeof title),
            mesh->n_ranks, mesh->n_devices);
    if (m->batch)
        fprintf(f, "largest batch that fits, in samples of %llu features (%u qubits each):\n",
                (unsigned long long)m->features, m->qubits);
    else
        fprintf(f, "largest state that fits, in qubits:\n");
    fprintf(f, "%-12s %22s %22s\n", "policy", "complex64", "complex128");
    for (int pol = 0; pol < QM_POLICY_COUNT_; ++pol) {
        char cell[2][48];
        for (int k = 0; k < 2; ++k) {
            const uint64_t v = m->value[k][pol];
            if (!v)
                snprintf(cell[k], sizeof cell[k], "-");
            else if (pol == QM_POLICY_AUTO)
                snprintf(cell[k], sizeof cell[k], "%llu (%s)", (unsigned long long)v,
                         qm_policy_name(m->auto_pick[k]));
            else
                snprintf(cell[k], sizeof cell[k], "%llu", (unsigned long long)v);
        }
        fprintf(f, "%-12s %22s %22s\n", qm_policy_name((qm_policy)pol), cell[0], cell[1]);
    }
}
