/* pipeline.c — the chain of stages (see pipeline.h): each call runs one stage on what the earlier
 * ones left in the pipeline and keeps its product there.
 *
 * In: a scenario, a request, a rank and world, a backend description, an input. Out: the pipeline's
 * members (topology, graph, mesh, plan, layout, backend) and states.
 * Must not: open a backend or allocate device memory for a plan that does not fit.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "pipeline.h"
#include "ingest.h"
#include "reuse.h"
#include "status_internal.h"

#include <stdlib.h>
#include <string.h>

void qm_pipeline_init(qm_pipeline *p)
{
    memset(p, 0, sizeof *p);
    qm_request_init(&p->request);
}

/* Drop the products from the plan on (the backend, the layout, the plan). */
static void drop_plan(qm_pipeline *p)
{
    qm_hal_destroy(p->hal);
    qm_layout_destroy(p->layout);
    qm_plan_destroy(p->plan);
    p->hal = NULL;
    p->layout = NULL;
    p->plan = NULL;
}

/* Drop the products from the mesh on (the topology and graph stay). */
static void drop_mesh(qm_pipeline *p)
{
    drop_plan(p);
    qm_mesh_destroy(p->mesh);
    p->mesh = NULL;
    p->mesh_ranks = 0;
}

void qm_pipeline_fini(qm_pipeline *p)
{
    if (!p)
        return;
    drop_mesh(p);
    qm_topo_graph_destroy(p->graph);
    if (p->owns_topology)
        qm_topology_destroy(p->topology);
    qm_pipeline_init(p);
}

static void set_topology(qm_pipeline *p, qm_topology *t, bool owned)
{
    qm_pipeline_fini(p);
    p->topology = t;
    p->owns_topology = owned;
}

qm_code qm_pipeline_load(qm_pipeline *p, const char *path, qm_diags *diags, qm_status *st)
{
    qm_topology *t = NULL;
    const qm_code rc = qm_scenario_load_path(path, &t, diags, st);
    set_topology(p, t, true);
    return rc;
}

qm_code qm_pipeline_load_text(qm_pipeline *p, const char *text, size_t len, const char *name,
                              qm_diags *diags, qm_status *st)
{
    qm_topology *t = NULL;
    const qm_code rc = qm_scenario_load_string(text, len, name, &t, diags, st);
    set_topology(p, t, true);
    return rc;
}

void qm_pipeline_use(qm_pipeline *p, const qm_topology *t)
{
    set_topology(p, (qm_topology *)t, false); /* never written: owns_topology is false */
}

qm_code qm_pipeline_graph(qm_pipeline *p, qm_status *st)
{
    if (!p->topology)
        return qm_fail(st, QM_E_ARG, "pipeline: no scenario loaded before the graph");
    return p->graph ? QM_OK : qm_topo_graph_create(p->topology, &p->graph, st);
}

qm_code qm_pipeline_mesh(qm_pipeline *p, int ranks, qm_status *st)
{
    qm_code rc = qm_pipeline_graph(p, st);
    if (rc != QM_OK)
        return rc;
    if (p->mesh && p->mesh_ranks == ranks)
        return QM_OK;
    drop_mesh(p);
    if ((rc = qm_mesh_create(p->topology, p->graph, ranks, &p->mesh, st)) == QM_OK)
        p->mesh_ranks = ranks;
    return rc;
}

qm_code qm_pipeline_plan(qm_pipeline *p, const qm_request *r, qm_status *st)
{
    if (!p->topology)
        return qm_fail(st, QM_E_ARG, "pipeline: no scenario loaded before the plan");
    drop_plan(p);
    qm_code rc = qm_request_validate(r, p->topology->n_ranks, st);
    if (rc == QM_OK)
        rc = qm_pipeline_mesh(p, r->ranks, st);
    if (rc == QM_OK) {
        p->request = *r;
        p->mesh->host_budget = p->host_budget;
        rc = qm_plan_create(p->mesh, r, &p->plan, st);
    }
    if (p->plan) {
        const qm_code drc = qm_cost_datapath(p->mesh, p->plan, &p->datapath, st);
        if (drc != QM_OK)
            rc = drc;
    }
    return rc;
}

qm_code qm_pipeline_layout(qm_pipeline *p, int rank, int world, qm_status *st)
{
    if (!p->plan)
        return qm_fail(st, QM_E_ARG, "pipeline: no plan before the layout");
    qm_hal_destroy(p->hal);
    qm_layout_destroy(p->layout);
    p->hal = NULL;
    p->layout = NULL;
    return rank < 0 ? qm_layout_create_all(p->plan, p->mesh, &p->layout, st)
                    : qm_layout_create(p->plan, p->mesh, rank, world, &p->layout, st);
}

qm_code qm_pipeline_open_backend(qm_pipeline *p, const qm_backend_desc *base, qm_status *st)
{
    if (!p->layout)
        return qm_fail(st, QM_E_ARG, "pipeline: no layout before the backend");
    qm_hal_destroy(p->hal);
    p->hal = NULL;
    return qm_mesh_open_backend(p->mesh, p->layout->world_size > 1 ? p->layout->rank : -1, base,
                                &p->hal, st);
}

int qm_pipeline_staging_bytes(const qm_request *req, uint64_t input_bytes, int ranks,
                              uint64_t bytes[2])
{
    int n = 0;
    const uint64_t R = ranks > 0 ? (uint64_t)ranks : 1, ring = qm_ingest_ring_bytes_max();
    if (req->encoding != QM_ENCODING_AMPLITUDE) /* the feature maps read their samples on the host */
        return 0;
    if (input_bytes / R >= ring) /* a file's values reach the devices through the ring */
        bytes[n++] = ring;
    if (req->qubits < 64) {
        /* one double per state: a fused state's sum, or a stashed state's root (its block sums
         * are combined on the device; a state cut by shards adds a few roots) */
        const uint64_t sums = 8 * (req->batch ? req->batch : 1) / R;
        /* a fused batch's sums are page-locked; a stashed state's roots only when many */
        if (req->qubits <= QM_HAL_RED_LOG2_BLOCK || sums > QM_BLOCK_SUMS_PAGEABLE_MAX ||
            qm_roots_page_locked())
            bytes[n++] = sums;
    }
    return n;
}

qm_code qm_pipeline_devices_backend(qm_backend_kind kind, qm_hal **out, qm_status *st)
{
    *out = NULL;
    if (kind == QM_BACKEND_CUDA || (kind == QM_BACKEND_AUTO && qm_backend_cuda_count() > 0))
        return qm_backend_open(&(qm_backend_desc){.kind = QM_BACKEND_CUDA}, out, st);
    qm_pipeline pl;
    qm_pipeline_init(&pl);
    qm_code rc = qm_pipeline_load(&pl, NULL, NULL, st);
    if (rc == QM_OK)
        rc = qm_pipeline_mesh(&pl, 0, st);
    if (rc == QM_OK)
        rc = qm_mesh_open_backend(pl.mesh, -1, &(qm_backend_desc){.phantom = true}, out, st);
    qm_pipeline_fini(&pl);
    return rc;
}

qm_code qm_pipeline_phantom_account(const qm_pipeline *p, uint64_t *reserved_bytes, qm_status *st)
{
    if (!p || !p->plan || !p->mesh || !reserved_bytes)
        return qm_fail(st, QM_E_ARG, "phantom: a plan and an output array are needed");
    if (!p->plan->feasible)
        return qm_fail(st, QM_E_ARG, "phantom: the plan is infeasible (%s); nothing to account",
                       qm_code_name(p->plan->error.code));
    const qm_plan *plan = p->plan;
    qm_hal *hal = NULL;
    qm_hal_buf **bufs = calloc((size_t)(plan->n_shards ? plan->n_shards : 1), sizeof *bufs);
    if (!bufs)
        return qm_fail(st, QM_E_NOMEM, "phantom: out of host memory for %d shards", plan->n_shards);
    qm_code rc = qm_mesh_open_backend(p->mesh, -1, &(qm_backend_desc){.phantom = true}, &hal, st);
    for (int i = 0; rc == QM_OK && i < plan->n_shards; ++i)
        rc = qm_hal_buf_alloc(hal, plan->shards[i].device, plan->shards[i].bytes, &bufs[i], st);
    for (int d = 0; rc == QM_OK && d < p->mesh->n_devices; ++d) {
        qm_hal_usage u;
        if ((rc = qm_hal_usage_query(hal, d, &u, st)) == QM_OK)
            reserved_bytes[d] = u.in_use_bytes;
    }
    for (int i = 0; hal && i < plan->n_shards; ++i)
        qm_hal_buf_free(hal, bufs[i]);
    qm_hal_destroy(hal);
    free(bufs);
    if (rc != QM_OK)
        qm_status_prefix(st, "phantom");
    return rc;
}

void qm_pipeline_close_backend(qm_pipeline *p)
{
    qm_hal_destroy(p->hal);
    p->hal = NULL;
}

qm_code qm_pipeline_materialize(const qm_pipeline *p, const qm_amp_input *in,
                                const qm_materialize_opts *opts, qm_state **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!p->hal || !p->layout)
        return qm_fail(st, QM_E_ARG, "pipeline: no backend before materialize");
    if (p->request.encoding != QM_ENCODING_AMPLITUDE)
        return qm_materialize_featuremap(p->hal, p->request.encoding, p->request.qubits,
                                         p->request.dtype, p->layout->specs, p->layout->n_local, in,
                                         opts, out, st);
    return qm_materialize_amplitude(p->hal, p->request.qubits, p->request.dtype, p->layout->specs,
                                    p->layout->n_local, in, opts, out, st);
}

/* ---- input files ------------------------------------------------------------------------------ */

static qm_code npy_read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    return qm_npy_read_range(ctx, first, count, dst, st);
}

static qm_code npy_submit_cb(void *ctx, uint64_t first, uint64_t count, void *dst, void **ticket,
                             qm_status *st)
{
    qm_npy_read_ticket *t = NULL;
    qm_code rc = qm_npy_read_submit(ctx, first, count, dst, &t, st);
    *ticket = t;
    return rc;
}

static qm_code npy_wait_cb(void *ctx, void *ticket, qm_status *st)
{
    return qm_npy_read_wait(ctx, ticket, st);
}

static qm_code npy_read_int_cb(void *ctx, uint64_t first, uint64_t count, uint64_t *dst,
                               qm_status *st)
{
    return qm_npy_read_int_range(ctx, first, count, dst, st);
}

static qm_code hdf5_read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    return qm_hdf5_read_range(ctx, first, count, dst, st);
}

/* The CSV flags on a .npy or HDF5 input (`kind`: ".npy file", "HDF5 dataset"): --drop-column by
 * 0-based index (*col; *drop false when none: such a file has no header row to look a name up
 * in); --header auto is what such a file is (no header), yes/no are refused: no flag may be
 * ignored silently. */
static qm_code array_csv_flags(const char *path, const char *kind, const qm_csv_options *csv,
                               bool *drop, uint64_t *col, qm_status *st)
{
    *drop = false;
    *col = 0;
    if (csv->header != QM_CSV_HEADER_AUTO)
        return qm_fail(st, QM_E_ARG, "%s: --header %s applies to CSV input only (a %s has no "
                       "header row)", path, csv->header == QM_CSV_HEADER_YES ? "yes" : "no", kind);
    if (csv->delimiter && csv->delimiter != ',')
        return qm_fail(st, QM_E_ARG, "%s: --delimiter applies to CSV input only (a %s has no "
                       "fields to separate)", path, kind);
    const char *d = csv->drop_column;
    if (!d)
        return QM_OK;
    bool digits = *d != '\0';
    for (const char *p = d; *p && digits; ++p) {
        if (*p < '0' || *p > '9' || *col > (UINT64_MAX - 9) / 10)
            digits = false;
        else
            *col = *col * 10 + (uint64_t)(*p - '0');
    }
    if (!digits)
        return qm_fail(st, QM_E_INPUT, "%s: --drop-column '%.40s' is not a 0-based column index, "
                       "and a %s has no header row to look a name up in; give the label "
                       "column's index", path, d, kind);
    *drop = true;
    return QM_OK;
}

static qm_code open_npy(const char *path, const qm_csv_options *csv, qm_input_file *f,
                        qm_status *st)
{
    bool drop;
    uint64_t col;
    qm_code rc = qm_npy_open(path, &f->npy, st);
    if (rc == QM_OK && (rc = array_csv_flags(path, ".npy file", csv, &drop, &col, st)) == QM_OK &&
        drop)
        rc = qm_npy_reader_drop_column(f->npy, col, st);
    if (rc == QM_OK) {
        const qm_npy_info *info = qm_npy_reader_info(f->npy);
        f->in = (qm_amp_input){.dtype = info->dtype, .n = info->n_features,
                               .batch = info->n_samples, .read = npy_read_cb, .read_ctx = f->npy,
                               .read_submit = npy_submit_cb, .read_wait = npy_wait_cb,
                               .read_int = info->kind == 'f' ? NULL : npy_read_int_cb,
                               .read_int_ctx = f->npy,
                               .int_signed = info->kind == 'i'};
        f->ndim = info->ndim;
    }
    return rc;
}

static qm_code open_hdf5(const char *path, const qm_csv_options *csv, const char *dataset,
                         qm_input_file *f, qm_status *st)
{
    bool drop;
    uint64_t col;
    qm_code rc = qm_hdf5_open(path, dataset, &f->hdf5, st);
    if (rc == QM_OK && (rc = array_csv_flags(path, "HDF5 dataset", csv, &drop, &col, st)) == QM_OK &&
        drop)
        rc = qm_hdf5_reader_drop_column(f->hdf5, col, st);
    if (rc == QM_OK) {
        const qm_hdf5_info *info = qm_hdf5_reader_info(f->hdf5);
        f->in = (qm_amp_input){.dtype = info->dtype, .n = info->n_features,
                               .batch = info->n_samples, .read = hdf5_read_cb, .read_ctx = f->hdf5};
        f->ndim = info->ndim;
    }
    return rc;
}

/* ---- a CSV file read by ranges ----------------------------------------------------------------
 * A CSV file has no index: a row's place is known only by reading the text before it. Ranges of
 * elements (row-major, F per row) are read through a few readers of the file (cursors), each
 * going forward from where it stands: a read goes to the cursor that stands at its first row (or
 * holds that row, for a read that starts inside it), so a reader of several interleaved ranges
 * (ingest deals its chunks to the shards in turn) keeps one cursor per range instead of starting
 * the file over at every turn. A cursor is moved forward by qm_csv_skip_rows (line ends only, no
 * value parsed), so a rank whose rows start late in the file parses only its own rows. */
#define CSV_CURSORS 8

typedef struct csv_cursor {
    qm_csv_reader *r; /* NULL: not opened yet */
    double *row;      /* the last row read into it whole (F values), for reads inside a row */
    uint64_t row_at;  /* that row's index; UINT64_MAX: none */
    uint64_t used;    /* the read that used it last (0: none yet) */
} csv_cursor;

struct qm_csv_cursors {
    char *path, *drop;
    qm_csv_options opt;
    uint64_t F, rows, reads;
    csv_cursor c[CSV_CURSORS]; /* c[0]: the reader that counted the rows */
};

static void csv_cursors_close(qm_csv_cursors *cs)
{
    if (!cs)
        return;
    for (int i = 0; i < CSV_CURSORS; ++i) {
        qm_csv_close(cs->c[i].r);
        free(cs->c[i].row);
    }
    free(cs->path);
    free(cs->drop);
    free(cs);
}

/* The file is shorter than it was when its rows were counted. */
static qm_code csv_ends_early(const qm_csv_cursors *cs, const csv_cursor *c, qm_status *st)
{
    return qm_fail(st, QM_E_INPUT, "%s: the file ends after data row %llu, but %llu data rows "
                   "were counted when it was opened (has it changed?)", cs->path,
                   (unsigned long long)qm_csv_reader_info_get(c->r)->rows_read,
                   (unsigned long long)cs->rows);
}

/* Cursor c at data row `row`: started over when it stands past it, then moved forward (the rows
 * between are skipped, not parsed). */
static qm_code csv_cursor_goto(const qm_csv_cursors *cs, csv_cursor *c, uint64_t row,
                               qm_status *st)
{
    const qm_csv_reader_info *info = qm_csv_reader_info_get(c->r);
    qm_code rc = info->rows_read > row ? qm_csv_rewind(c->r, st) : QM_OK;
    uint64_t got = 1;
    while (rc == QM_OK && info->rows_read < row && got > 0)
        rc = qm_csv_skip_rows(c->r, row - info->rows_read, &got, st);
    return rc == QM_OK && info->rows_read < row ? csv_ends_early(cs, c, st) : rc;
}

/* The cursor for a read of elements [first, end): one that stands at its first row or holds
 * that row (nothing to skip), else one not used yet or at the end of the file, else a new one,
 * else the nearest one behind the row, else the least recently used (started over). */
static qm_code csv_cursor_pick(qm_csv_cursors *cs, uint64_t first, uint64_t end, csv_cursor **out,
                               qm_status *st)
{
    const uint64_t r0 = first / cs->F;
    csv_cursor *spare = NULL, *behind = NULL, *lru = NULL, *empty = NULL;
    uint64_t gap = UINT64_MAX;
    for (int i = 0; i < CSV_CURSORS; ++i) {
        csv_cursor *c = &cs->c[i];
        if (!c->r) {
            empty = empty ? empty : c;
            continue;
        }
        const uint64_t at = qm_csv_reader_info_get(c->r)->rows_read;
        /* the row this cursor must stand at to go on: past r0 when it holds r0 already */
        const bool holds = c->row_at == r0;
        const uint64_t need = holds ? r0 + 1 : r0;
        if ((holds && end <= need * cs->F) || at == need) {
            *out = c;
            return QM_OK;
        }
        if (!spare && (c->used == 0 || at == cs->rows))
            spare = c;
        if (at < need && need - at < gap) {
            gap = need - at;
            behind = c;
        }
        if (!lru || c->used < lru->used)
            lru = c;
    }
    csv_cursor *c = spare ? spare : empty ? empty : behind ? behind : lru;
    if (c->r) {
        *out = c;
        return QM_OK;
    }
    qm_code rc = qm_csv_open(cs->path, &cs->opt, &c->r, st);
    if (rc == QM_OK && qm_csv_reader_info_get(c->r)->n_features != cs->F)
        rc = qm_fail(st, QM_E_INPUT, "%s: rows of %llu values now, of %llu when the file was "
                     "opened (has it changed?)", cs->path,
                     (unsigned long long)qm_csv_reader_info_get(c->r)->n_features,
                     (unsigned long long)cs->F);
    if (rc != QM_OK) {
        qm_csv_close(c->r);
        c->r = NULL;
    }
    *out = c;
    return rc;
}

/* Elements [first, first + count) of the file (row-major, F per row) into dst. Whole rows are
 * parsed straight into dst; a row that the range starts or ends inside is parsed into its
 * cursor's row buffer and copied from there (the next read that starts inside it finds it). */
static qm_code csv_read_cb(void *ctx, uint64_t first, uint64_t count, void *dst, qm_status *st)
{
    qm_csv_cursors *cs = ctx;
    const uint64_t F = cs->F, end = first + count;
    double *out = dst;
    if (count == 0)
        return QM_OK;
    csv_cursor *c = NULL;
    qm_code rc = csv_cursor_pick(cs, first, end, &c, st);
    if (rc == QM_OK)
        c->used = ++cs->reads;
    for (uint64_t pos = first; rc == QM_OK && pos < end;) {
        const uint64_t row = pos / F, off = pos % F;
        uint64_t n = end - pos < F - off ? end - pos : F - off, got = 0;
        if (c->row_at != row) {
            if ((rc = csv_cursor_goto(cs, c, row, st)) != QM_OK)
                break;
            if (off == 0 && n == F) { /* whole rows: parsed in place */
                const uint64_t k = (end - pos) / F;
                if ((rc = qm_csv_read_rows(c->r, k, out, &got, st)) == QM_OK && got < k)
                    rc = csv_ends_early(cs, c, st);
                out += k * F;
                pos += k * F;
                continue;
            }
            if (!c->row && !(c->row = malloc((size_t)F * sizeof *c->row))) {
                rc = qm_fail(st, QM_E_NOMEM, "%s: cannot allocate a row of %llu values",
                             cs->path, (unsigned long long)F);
                break;
            }
            c->row_at = UINT64_MAX;
            if ((rc = qm_csv_read_rows(c->r, 1, c->row, &got, st)) == QM_OK && got < 1)
                rc = csv_ends_early(cs, c, st);
            if (rc != QM_OK)
                break;
            c->row_at = row;
        }
        memcpy(out, c->row + off, (size_t)n * sizeof *out);
        out += n;
        pos += n;
    }
    return rc;
}

/* A CSV file through cursors: the first opened and its rows counted (the values not parsed). */
static qm_code open_csv_reader(const char *path, const qm_csv_options *csv, bool stream,
                               qm_input_file *f, qm_status *st)
{
    qm_csv_cursors *cs = calloc(1, sizeof *cs);
    if (!cs || !(cs->path = strdup(path)) ||
        (csv->drop_column && !(cs->drop = strdup(csv->drop_column)))) {
        csv_cursors_close(cs);
        return qm_fail(st, QM_E_NOMEM, "%s: cannot allocate a CSV reader", path);
    }
    f->csv_cursors = cs;
    cs->opt = *csv;
    cs->opt.drop_column = cs->drop;
    for (int i = 0; i < CSV_CURSORS; ++i)
        cs->c[i].row_at = UINT64_MAX;
    qm_code rc = qm_csv_open(path, &cs->opt, &cs->c[0].r, st);
    if (rc == QM_OK && (rc = qm_csv_count_rows(cs->c[0].r, &cs->rows, st)) == QM_OK) {
        cs->F = qm_csv_reader_info_get(cs->c[0].r)->n_features;
        f->in = (qm_amp_input){.dtype = QM_DTYPE_FLOAT64, .n = cs->F, .batch = cs->rows,
                               .read = csv_read_cb, .read_ctx = cs, .read_placed = !stream,
                               .read_in_order = true};
    }
    return rc;
}

static qm_code input_open(const char *path, const qm_csv_options *csv, const char *dataset,
                          bool stream, qm_input_file *f, qm_status *st)
{
    memset(f, 0, sizeof *f);
    qm_csv_options dflt;
    if (!csv) {
        qm_csv_options_init(&dflt);
        csv = &dflt;
    }
    qm_code rc = qm_input_format_query(path, &f->format, st);
    if (rc == QM_OK && dataset && f->format != QM_INPUT_HDF5)
        rc = qm_fail(st, QM_E_ARG, "%s: --dataset %.200s applies to HDF5 input only (this file is "
                     "%s)", path, dataset, f->format == QM_INPUT_NPY ? "a .npy file" : "CSV text");
    if (rc == QM_OK && f->format == QM_INPUT_NPY) {
        rc = open_npy(path, csv, f, st);
    } else if (rc == QM_OK && f->format == QM_INPUT_HDF5) {
        rc = open_hdf5(path, csv, dataset, f, st);
    } else if (rc == QM_OK) {
        rc = open_csv_reader(path, csv, stream, f, st);
        f->ndim = 2; /* a CSV file is a table: rows are samples */
    }
    return rc;
}

qm_code qm_input_open(const char *path, const qm_csv_options *csv, const char *dataset,
                      qm_input_file *f, qm_status *st)
{
    return input_open(path, csv, dataset, false, f, st);
}

qm_code qm_input_open_stream(const char *path, const qm_csv_options *csv, const char *dataset,
                             qm_input_file *f, qm_status *st)
{
    return input_open(path, csv, dataset, true, f, st);
}

void qm_input_close(qm_input_file *f)
{
    if (!f)
        return;
    qm_npy_close(f->npy);
    qm_hdf5_close(f->hdf5);
    csv_cursors_close(f->csv_cursors);
    memset(f, 0, sizeof *f);
}
