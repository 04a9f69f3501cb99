/* cli_topo.c — `qmesh topo validate|show|dump`.
 *
 * validate FILE...        strict load of each file (scenario_loader.c does the work)
 * show [FILE] [--json|--dot] [--matrix|--summary]
 *                         up to 16 devices: devices with usable capacity, the path matrix (class
 *                         and bandwidth of every pair), the best-connected device, ranks; more
 *                         (or --summary): a summary linear in the mesh (device and link counts,
 *                         each device's best peer in its rank as a histogram, rank 0's
 *                         best-connected device, ranks), the matrix only with --matrix (it is
 *                         quadratic: 8192 devices are 67 million pairs); JSON via jansson; DOT
 * dump [FILE] [--out F]  the scenario written back as qmesh/1 YAML; without FILE this machine
 *                         as discovered (discover.c) when a CUDA device is visible, else the
 *                         built-in default (stderr says which); --out writes F atomically;
 *                         the discovered machine's storage is measured first (discover_storage.c:
 *                         --storage-bytes, --no-measure-storage)
 * A scenario path the user names that cannot be read is an error, never a silent default.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "cli_internal.h"
#include "backend.h"
#include "pipeline.h"
#include "cuda_discover.h"
#include "discover.h"
#include "io.h"
#include "materialize_internal.h"
#include "mesh.h"
#include "plan_output.h"
#include "scenario_loader.h"
#include "status_internal.h"
#include "topology.h"
#include "units.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Meshes up to this many devices show the full path matrix by default. */
#define QM_TOPO_SHOW_MATRIX_MAX 16

/* One bar of the best-peer histogram: a (class, bandwidth) and how many devices have it. */
typedef struct peer_bin {
    bool peer;
    qm_link_class cls;
    double bw;
    int devices;
} peer_bin;

static int cmp_bin(const void *a, const void *b)
{
    const peer_bin *x = a, *y = b;
    if (x->peer != y->peer)
        return x->peer ? -1 : 1;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    if (x->bw != y->bw)
        return x->bw > y->bw ? -1 : 1;
    return 0;
}

/* The summary's numbers: links per class, each device's best peer in its rank binned by (class,
 * bandwidth), best first. Linear in the mesh when each rank hangs off one switch (one matrix per
 * other rank). */
typedef struct topo_summary {
    int links[QM_LINK_CLASS_COUNT_];
    int hosts;
    peer_bin *bins;
    int n_bins;
} topo_summary;

static qm_code summarize(const qm_pipeline *pl, topo_summary *sum, qm_status *st)
{
    const qm_mesh *mesh = pl->mesh;
    memset(sum, 0, sizeof *sum);
    for (int l = 0; l < qm_topo_graph_link_count(pl->graph); ++l)
        sum->links[qm_topo_graph_link(pl->graph, l)->cls]++;
    for (int i = 0; i < mesh->n_devices; ++i)
        if (i == 0 || mesh->devices[i].host != mesh->devices[i - 1].host)
            sum->hosts++; /* a rank's devices are on one host; ranks in order */
    int *nodes = malloc((size_t)mesh->n_devices * sizeof *nodes);
    qm_topo_pair *best = malloc((size_t)mesh->n_devices * sizeof *best);
    sum->bins = malloc((size_t)mesh->n_devices * sizeof *sum->bins);
    qm_code rc = nodes && best && sum->bins ? QM_OK
                                            : qm_fail(st, QM_E_NOMEM, "topo show: out of host memory "
                                                      "for %d devices", mesh->n_devices);
    for (int i = 0; rc == QM_OK && i < mesh->n_devices; ++i)
        nodes[i] = mesh->devices[i].node;
    for (int r = 0; rc == QM_OK && r < mesh->n_ranks; ++r) {
        const int f = mesh->rank_first[r];
        rc = qm_topo_graph_best_peers(pl->graph, nodes + f, mesh->rank_first[r + 1] - f, best + f, st);
    }
    for (int i = 0; rc == QM_OK && i < mesh->n_devices; ++i) {
        peer_bin b = {.peer = best[i].peer, .cls = best[i].peer ? best[i].cls : QM_LINK_NVLINK,
                      .bw = best[i].peer ? best[i].bw_bytes_per_s : 0, .devices = 1};
        int k = 0;
        while (k < sum->n_bins && cmp_bin(&sum->bins[k], &b) != 0)
            ++k; /* few distinct bins in practice: one or two per kind of host */
        if (k < sum->n_bins)
            sum->bins[k].devices++;
        else
            sum->bins[sum->n_bins++] = b;
    }
    if (rc == QM_OK)
        qsort(sum->bins, (size_t)sum->n_bins, sizeof *sum->bins, cmp_bin);
    free(nodes);
    free(best);
    return rc;
}

static json_t *summary_json(const qm_mesh *mesh, const topo_summary *sum)
{
    json_t *o = json_object(), *links = json_object(), *bins = json_array();
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        json_object_set_new(links, qm_topo_class_name((qm_link_class)c), json_integer(sum->links[c]));
    for (int k = 0; k < sum->n_bins; ++k) {
        const peer_bin *b = &sum->bins[k];
        json_t *j = json_object();
        json_object_set_new(j, "peer", json_boolean(b->peer));
        json_object_set_new(j, "class", b->peer ? json_string(qm_topo_class_name(b->cls)) : json_null());
        json_object_set_new(j, "bw_bytes_per_s", b->peer ? json_real(b->bw) : json_null());
        json_object_set_new(j, "devices", json_integer(b->devices));
        json_array_append_new(bins, j);
    }
    json_object_set_new(o, "devices", json_integer(mesh->n_devices));
    json_object_set_new(o, "hosts", json_integer(sum->hosts));
    json_object_set_new(o, "ranks", json_integer(mesh->n_ranks));
    json_object_set_new(o, "links_per_class", links);
    json_object_set_new(o, "best_peer_in_rank", bins);
    return o;
}

static void summary_print(const qm_mesh *mesh, const topo_summary *sum)
{
    char a[32], b[32];
    uint64_t umin = UINT64_MAX, umax = 0;
    for (int i = 0; i < mesh->n_devices; ++i) {
        uint64_t u = mesh->devices[i].usable_bytes;
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
    }
    printf("devices: %d on %d hosts in %d ranks; usable %s to %s per device\n", mesh->n_devices,
           sum->hosts, mesh->n_ranks, qm_format_bytes(umin, a, sizeof a),
           qm_format_bytes(umax, b, sizeof b));
    printf("links:");
    for (int c = 0; c < QM_LINK_CLASS_COUNT_; ++c)
        printf(" %s %d", qm_topo_class_name((qm_link_class)c), sum->links[c]);
    printf("\nbest peer in its rank (devices):\n");
    for (int k = 0; k < sum->n_bins; ++k) {
        const peer_bin *p = &sum->bins[k];
        if (p->peer)
            printf("  %-7s %9.1f GB/s  %d\n", qm_topo_class_name(p->cls), p->bw / 1e9, p->devices);
        else
            printf("  %-7s %14s  %d\n", "none", "", p->devices);
    }
    printf("(summary of %d devices; the full path matrix with --matrix)\n", mesh->n_devices);
}

static int topo_show(const qm_cli_args *args)
{
    qm_status st;
    qm_status_clear(&st);
    const char *file = args->n_operands ? args->operands[0] : NULL;
    const bool json = args->json, dot = qm_cli_arg(args, "--dot") != NULL;
    const bool want_matrix = qm_cli_arg(args, "--matrix") != NULL;
    const bool want_summary = qm_cli_arg(args, "--summary") != NULL;
    if (json && dot)
        return qm_cli_usage_error("topo show", "%s", "--json and --dot exclude each other");
    if (want_matrix && want_summary)
        return qm_cli_usage_error("topo show", "%s", "--matrix and --summary exclude each other");
    if (dot && (want_matrix || want_summary))
        return qm_cli_usage_error("topo show", "%s", "--dot draws the graph; --matrix and --summary "
                                  "go with the table or --json");
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    int *nodes = NULL, rc_exit = 1;
    if (qm_cli_load_scenario(file, &pl, &st) != QM_OK)
        return qm_cli_error(&st);
    if (qm_pipeline_mesh(&pl, 0, &st) != QM_OK) {
        rc_exit = qm_cli_error(&st);
        goto done;
    }
    const qm_topology *t = pl.topology;
    qm_topo_graph *g = pl.graph;
    const qm_mesh *mesh = pl.mesh;
    if (dot) {
        rc_exit = qm_topo_graph_dot(g, stdout, &st) == QM_OK ? 0 : qm_cli_error(&st);
        goto done;
    }
    nodes = malloc((size_t)mesh->n_devices * sizeof *nodes);
    if (!nodes) {
        qm_fail(&st, QM_E_NOMEM, "topo show: out of host memory");
        rc_exit = qm_cli_error(&st);
        goto done;
    }
    for (int i = 0; i < mesh->n_devices; ++i)
        nodes[i] = mesh->devices[i].node;
    const bool full = want_matrix || (!want_summary && mesh->n_devices <= QM_TOPO_SHOW_MATRIX_MAX);
    topo_summary sum = {0};
    int best = -1;
    if (full) {
        if (qm_topo_graph_best_connected(g, nodes, mesh->n_devices, &best, &st) != QM_OK) {
            rc_exit = qm_cli_error(&st);
            goto done;
        }
    } else if (summarize(&pl, &sum, &st) != QM_OK) {
        free(sum.bins);
        rc_exit = qm_cli_error(&st);
        goto done;
    } else {
        best = mesh->devices[0].node; /* rank 0's best-connected device leads its affinity order */
    }
    if (json) {
        json_t *o = json_object(), *devs = json_array(), *ranks = json_array(), *m = NULL;
        if (full && qm_topo_graph_matrix_json(g, nodes, mesh->n_devices, &m, &st) != QM_OK) {
            json_decref(o);
            json_decref(devs);
            json_decref(ranks);
            rc_exit = qm_cli_error(&st);
            goto done;
        }
        for (int i = 0; i < mesh->n_devices; ++i) {
            const qm_mesh_device *d = &mesh->devices[i];
            json_t *j = json_object();
            json_object_set_new(j, "id", json_string(d->id));
            json_object_set_new(j, "rank", json_integer(d->rank));
            json_object_set_new(j, "host", json_string(t->hosts[d->host].id));
            json_object_set_new(j, "memory_bytes", qm_json_count(d->memory_bytes));
            json_object_set_new(j, "usable_bytes", qm_json_count(d->usable_bytes));
            json_object_set_new(j, "hbm_bandwidth_bytes_per_s", json_real(d->hbm_bw_bytes_per_s));
            json_array_append_new(devs, j);
        }
        for (int r = 0; r < mesh->n_ranks; ++r) {
            json_t *j = json_object(), *ids = json_array();
            for (int i = mesh->rank_first[r]; i < mesh->rank_first[r + 1]; ++i)
                json_array_append_new(ids, json_string(mesh->devices[i].id));
            json_object_set_new(j, "rank", json_integer(r));
            json_object_set_new(j, "devices", ids);
            json_array_append_new(ranks, j);
        }
        json_object_set_new(o, "scenario", json_string(qm_topology_label(t)));
        json_object_set_new(o, "name", json_string(t->name));
        json_object_set_new(o, "devices", devs);
        json_object_set_new(o, "ranks", ranks);
        if (full) {
            json_object_set_new(o, "best_connected", json_string(t->nodes[best].id));
            json_object_set_new(o, "paths", m);
        } else {
            json_object_set_new(o, "best_connected_rank0", json_string(t->nodes[best].id));
            json_object_set_new(o, "summary", summary_json(mesh, &sum));
            free(sum.bins);
        }
        qm_cli_json_put(o);
        rc_exit = 0;
        goto done;
    }
    char a[32], b[32], c[32], title[QM_STATUS_FILE_BYTES + 96];
    printf("scenario: %s, %d devices\n", qm_topology_title(t, title, sizeof title),
           mesh->n_devices);
    if (!full) {
        summary_print(mesh, &sum);
        free(sum.bins);
        printf("\nbest-connected device of rank 0 (the gather device): %s\n", t->nodes[best].id);
    } else {
        printf("%-14s %-5s %-10s %12s %12s %12s\n", "device", "rank", "host", "memory", "usable",
               "hbm");
    }
    for (int i = 0; full && i < mesh->n_devices; ++i) {
        const qm_mesh_device *d = &mesh->devices[i];
        printf("%-14s %-5d %-10s %12s %12s %12s\n", d->id, d->rank, t->hosts[d->host].id,
               qm_format_bytes(d->memory_bytes, a, sizeof a),
               qm_format_bytes(d->usable_bytes, b, sizeof b),
               qm_format_rate(d->hbm_bw_bytes_per_s, c, sizeof c));
    }
    if (full) {
        printf("\n");
        qm_topo_matrix *m = NULL;
        if (qm_topo_matrix_create(g, nodes, mesh->n_devices, &m, &st) != QM_OK ||
            qm_topo_matrix_print(m, stdout, &st) != QM_OK) {
            qm_topo_matrix_destroy(m);
            rc_exit = qm_cli_error(&st);
            goto done;
        }
        qm_topo_matrix_destroy(m);
        printf("\nbest-connected device: %s\n", t->nodes[best].id);
    }
    for (int r = 0; r < mesh->n_ranks && r < 16; ++r) {
        printf("rank %d:", r);
        const int f = mesh->rank_first[r], nr = mesh->rank_first[r + 1] - f;
        for (int i = 0; i < nr && (full || i < QM_TOPO_SHOW_MATRIX_MAX); ++i)
            printf(" %s", mesh->devices[f + i].id);
        if (!full && nr > QM_TOPO_SHOW_MATRIX_MAX)
            printf(" ... (%d devices)", nr);
        printf("\n");
    }
    if (mesh->n_ranks > 16)
        printf("... %d ranks in all\n", mesh->n_ranks);
    rc_exit = 0;
done:
    free(nodes);
    qm_pipeline_fini(&pl);
    return rc_exit;
}

/* The folder the storage measurement writes in: the output's, else TMPDIR, else /tmp. */
static const char *storage_dir(const char *out, char *buf, size_t cap)
{
    if (out) {
        const char *slash = strrchr(out, '/');
        if (!slash)
            return ".";
        snprintf(buf, cap, "%.*s", (int)(slash - out) > 0 ? (int)(slash - out) : 1, out);
        return buf;
    }
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

/* This machine: facts from /proc, the CUDA runtime (and NVML), sysfs, the storage measurement
 * (storage_bytes 0: skipped); then the topology. */
static qm_code discover_machine(const char *out_path, uint64_t storage_bytes, qm_topology **out,
                                qm_status *st)
{
    qm_discover_facts *f = malloc(sizeof *f);
    if (!f)
        return qm_fail(st, QM_E_NOMEM, "topo dump: out of host memory for the discovery facts");
    qm_discover_facts_init(f);
    qm_code rc = qm_discover_facts_from_host("/proc", f, st);
    if (rc == QM_OK)
        rc = qm_cuda_discover_facts(f, st);
    if (rc == QM_OK)
        rc = qm_discover_facts_from_sysfs("/sys", f, st);
    char dirbuf[4096];
    if (rc == QM_OK && storage_bytes &&
        qm_discover_storage_measure(storage_dir(out_path, dirbuf, sizeof dirbuf), storage_bytes,
                                    &f->storage, st) != QM_OK) {
        free(f);
        return qm_status_prefix(st, "topo dump: measuring storage (--no-measure-storage skips it)");
    }
    if (rc == QM_OK && storage_bytes) {
        char r[32], w[32], c[48] = "";
        if (f->storage.cached_read_bw_bytes_per_s > 0) {
            char b[32];
            snprintf(c, sizeof c, ", cached_read %s",
                     qm_units_format_bandwidth(f->storage.cached_read_bw_bytes_per_s, b, sizeof b));
        }
        fprintf(stderr, "qmesh: storage read %s, write %s%s (%s)\n",
                qm_units_format_bandwidth(f->storage.read_bw_bytes_per_s, r, sizeof r),
                qm_units_format_bandwidth(f->storage.write_bw_bytes_per_s, w, sizeof w), c,
                f->storage.note);
    }
    for (int i = 0; rc == QM_OK && (f->sources & QM_DISCOVER_SRC_PROBE) && i < f->n_gpus; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        char h[32], d[32], m[64] = "";
        if (g->hbm_copy_bw_bytes_per_s > 0) {
            char c[32];
            snprintf(m, sizeof m, ", device copy %s",
                     qm_units_format_bandwidth(g->hbm_copy_bw_bytes_per_s, c, sizeof c));
        }
        fprintf(stderr, "qmesh: n0.g%d: pinned host->device %s, device->host %s, launch round trip "
                "%.2f us%s\n", i, qm_units_format_bandwidth(g->h2d_bw_bytes_per_s, h, sizeof h),
                qm_units_format_bandwidth(g->d2h_bw_bytes_per_s, d, sizeof d), g->launch_s * 1e6, m);
    }
    if (rc == QM_OK && f->page_lock_bw_bytes_per_s > 0) {
        char b[32];
        fprintf(stderr, "qmesh: page-locking a host buffer: %.3f ms + bytes / %s\n",
                f->page_lock_s * 1e3, qm_units_format_bandwidth(f->page_lock_bw_bytes_per_s, b, sizeof b));
    }
    if (rc == QM_OK && f->staging_setup_s > 0)
        fprintf(stderr, "qmesh: an encode's device setup on a GPU outside its reads (its state and "
                "block sums allocated, its staging closed): %.3f ms (the 1 GiB state's allocation "
                "%.3f ms, the first of 3 %.3f ms); its staging opened and first used, inside its "
                "reads: %.3f ms beyond the copies\n", f->staging_setup_s * 1e3,
                f->staging_alloc_s * 1e3, f->staging_alloc_first_s * 1e3, f->staging_open_s * 1e3);
    if (rc == QM_OK && f->state_alloc_bw_bytes_per_s > 0) {
        char b[32];
        fprintf(stderr, "qmesh: a %llu GiB state's first allocation on a GPU: %.3f ms, its bytes "
                "beyond the first GiB at %s\n",
                (unsigned long long)(QM_DISCOVER_BIG_STATE_BYTES >> 30), f->big_state_alloc_s * 1e3,
                qm_units_format_bandwidth(f->state_alloc_bw_bytes_per_s, b, sizeof b));
    }
    /* defaults.piece_roots: local_norm's round trip, through the CUDA backend and the encode's
     * own functions (qm_materialize_roots_probe) */
    if (rc == QM_OK && (f->sources & QM_DISCOVER_SRC_PROBE) && f->n_gpus > 0) {
        qm_hal *hal = NULL;
        const qm_backend_desc bd = {.kind = QM_BACKEND_CUDA, .cuda_devices = 1};
        rc = qm_backend_open(&bd, &hal, st);
        double steady = 0;
        if (rc == QM_OK)
            rc = qm_materialize_roots_probe(hal, 0, QM_DISCOVER_ROOTS_QUBITS, QM_DISCOVER_ROOTS_REPS,
                                            &f->piece_roots_s, &steady, &f->piece_roots_blocks, st);
        qm_hal_destroy(hal);
        if (rc == QM_OK)
            fprintf(stderr, "qmesh: local_norm's roots on a GPU (a tree_combine of %llu block sums, "
                    "the root copied to plain memory, synchronized): %.1f us the first time, %.1f "
                    "us after\n", (unsigned long long)f->piece_roots_blocks,
                    f->piece_roots_s * 1e6, steady * 1e6);
    }
    /* defaults.host_batch, with the encode's own functions */
    if (rc == QM_OK && (rc = qm_materialize_host_probe(QM_DISCOVER_HOST_QUBITS, QM_DISCOVER_HOST_STATES,
                                                       &f->host_piece_s, &f->host_coeff_s, st)) == QM_OK)
        fprintf(stderr, "qmesh: the host's work per state of a batch: %.1f ns of piece sums, %.1f ns "
                "of merge and coefficient\n", f->host_piece_s * 1e9, f->host_coeff_s * 1e9);
    if (rc == QM_OK)
        rc = qm_discover_build(f, out, st);
    if (rc == QM_OK)
        fprintf(stderr, "qmesh: dumping this machine as discovered: '%s', %d GPU%s%s%s\n",
                (*out)->name, f->n_gpus, f->n_gpus == 1 ? "" : "s",
                f->nvlink_state == QM_DISCOVER_NVLINK_READ ? "" : "; ",
                f->nvlink_state == QM_DISCOVER_NVLINK_READ ? "" : f->nvlink_note);
    else
        qm_status_prefix(st, "topo dump: discovering this machine");
    free(f);
    return rc;
}

/* Write t as qmesh/1 YAML to stdout, or atomically to path (through a memory stream). */
static qm_code dump_to(const qm_topology *t, const char *path, qm_status *st)
{
    if (!path)
        return qm_scenario_dump(t, stdout, st);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return qm_fail(st, QM_E_NOMEM, "topo dump: cannot open a memory stream for %s", path);
    qm_code rc = qm_scenario_dump(t, mem, st);
    if (fclose(mem) != 0 && rc == QM_OK)
        rc = qm_fail(st, QM_E_NOMEM, "topo dump: out of host memory writing %s", path);
    if (rc == QM_OK)
        rc = qm_atomic_write_text(path, text, st);
    if (rc == QM_OK)
        fprintf(stderr, "qmesh: wrote %s (%zu bytes)\n", path, len);
    free(text);
    return rc;
}

static int topo_dump(const qm_cli_args *a)
{
    qm_status st;
    qm_status_clear(&st);
    const char *file = a->n_operands ? a->operands[0] : NULL, *out = qm_cli_arg(a, "--out");
    const char *sb = qm_cli_arg(a, "--storage-bytes");
    const bool no_measure = qm_cli_arg(a, "--no-measure-storage") != NULL;
    uint64_t storage_bytes = (uint64_t)256 << 20;
    if (file && (sb || no_measure))
        return qm_cli_usage_error("topo dump", "%s measures this machine's storage; a FILE is "
                                  "dumped as written", sb ? "--storage-bytes" : "--no-measure-storage");
    if (sb && no_measure)
        return qm_cli_usage_error("topo dump", "%s", "--storage-bytes and --no-measure-storage "
                                  "exclude each other");
    if (sb && qm_units_parse_size(sb, &storage_bytes, &st) != QM_OK) {
        qm_status_prefix(&st, "topo dump --storage-bytes");
        return qm_cli_error(&st);
    }
    if (no_measure)
        storage_bytes = 0;
    qm_topology *t = NULL;
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    qm_code rc;
    if (file) {
        rc = qm_cli_load_scenario(file, &pl, &st);
        t = pl.topology;
        pl.owns_topology = false; /* freed below with the others */
    } else if (qm_backend_cuda_count() > 0) {
        rc = discover_machine(out, storage_bytes, &t, &st);
    } else {
        qm_diags diags;
        qm_diags_init(&diags);
        rc = qm_scenario_load_default(&t, &diags, &st);
        qm_diags_fini(&diags);
        if (rc == QM_OK)
            fprintf(stderr, "qmesh: no CUDA device: dumping the built-in simulated mesh '%s'%s\n",
                    t->name, storage_bytes ? "" : " (no storage is measured for it)");
    }
    if (rc == QM_OK)
        rc = dump_to(t, out, &st);
    qm_topology_destroy(t);
    return rc == QM_OK ? 0 : qm_cli_error(&st);
}

/* validate: one entry per file for --json */
typedef struct validate_json {
    json_t *files;
} validate_json;

static void validate_each(void *ctx, const char *path, const qm_topology *t, const qm_diags *d)
{
    validate_json *v = ctx;
    json_t *errs = json_array();
    for (int i = 0; d && i < d->n; ++i) {
        const qm_diag *g = &d->items[i];
        json_array_append_new(errs, json_pack("{s:s, s:i, s:i, s:s}", "code", qm_code_name(g->code),
                                              "line", g->line, "column", g->col, "message", g->msg));
    }
    if (d && d->n)
        qm_cli_json_diag(&d->items[0]);
    json_t *f = json_pack("{s:s, s:b, s:o}", "file", path, "ok", t != NULL, "errors", errs);
    json_object_set_new(f, "hosts", t ? json_integer(t->n_hosts) : json_null());
    json_object_set_new(f, "devices", t ? json_integer(t->n_gpus) : json_null());
    json_object_set_new(f, "links", t ? json_integer(t->n_links) : json_null());
    json_object_set_new(f, "cases", t ? json_integer(t->n_cases) : json_null());
    json_array_append_new(v->files, f);
}

static int topo_validate(const qm_cli_args *a)
{
    validate_json v = {.files = a->json ? json_array() : NULL};
    const int rc = qm_topo_validate_files(a->n_operands, a->operands, a->json ? NULL : stdout,
                                          stderr, a->json ? validate_each : NULL, &v);
    if (a->json)
        qm_cli_json_put(json_pack("{s:o}", "files", v.files));
    return rc;
}

static const qm_cli_flag validate_flags[] = {
    {"--json", NULL, "print one JSON object (docs/cli.md): per file ok, counts and every error"},
    {NULL, NULL, NULL}};
static const char *const validate_json_members[] = {"files", NULL};
const qm_cli_command qm_cli_cmd_topo_validate = {
    .name = "topo validate", .operands = "FILE...", .min_operands = 1, .max_operands = -1,
    .summary = "strict check of scenario files: every error located as FILE:LINE:COL",
    .flags = validate_flags, .json_members = validate_json_members, .run = topo_validate};

static const qm_cli_flag show_flags[] = {
    {"--json", NULL, "print one JSON object (docs/cli.md) instead of the tables"},
    {"--dot", NULL, "print the topology as a Graphviz graph instead"},
    {"--matrix", NULL, "the full path matrix at any size (default: up to 16 devices; it is quadratic)"},
    {"--summary", NULL, "the summary (counts, best peers, rank 0's best device) at any size "
                        "(default: above 16 devices)"},
    {NULL, NULL, NULL}};
static const char *const show_json[] = {"scenario", "name", "devices", "ranks", "best_connected",
                                        "paths", "best_connected_rank0", "summary", NULL};
const qm_cli_command qm_cli_cmd_topo_show = {
    .name = "topo show", .operands = "[FILE]", .max_operands = 1,
    .summary = "devices with usable memory, the path matrix, the best-connected device, ranks "
               "(default: the built-in mesh)",
    .flags = show_flags, .json_members = show_json, .run = topo_show};

static const qm_cli_flag dump_flags[] = {
    {"--out", "FILE", "write the YAML to FILE (atomically) instead of stdout"},
    {"--no-measure-storage", NULL, "this machine: skip the storage measurement (the scenario "
                                   "then takes the storage defaults)"},
    {"--storage-bytes", "SIZE", "this machine: bytes written, synced, read back and removed to "
                                "measure storage, in the output's folder or TMPDIR (default "
                                "256MiB)"},
    {NULL, NULL, NULL}};
const qm_cli_command qm_cli_cmd_topo_dump = {
    .name = "topo dump", .operands = "[FILE]", .max_operands = 1,
    .summary = "write a scenario back as qmesh/1 YAML (no FILE: this machine if it has GPUs, else "
               "the built-in mesh); YAML only, no --json",
    .flags = dump_flags, .run = topo_dump};
