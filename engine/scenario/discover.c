/* discover.c — a real machine as a qm_topology: the sysfs and /proc readers and the pure
 * facts -> topology step (discover.h; docs/discover.md).
 *
 * In: facts (filled by hal/cuda/cuda_discover.c, the readers below, or a test). Out: a topology
 * equal to what the loader would build from its dump (same node order: NUMA nodes, GPUs, switches;
 * class defaults as scenario_load.c's topology_new), so `qmesh topo dump` output replays exactly.
 * Must not: include CUDA or NVML headers, or read a clock or a file in qm_discover_build (the date
 * and host name are facts, so that the step is testable).
 * Choices stated here and in docs/discover.md:
 *   - A GPU's PCIe bandwidth uses the link's maximum (the smaller of the GPU's and its upstream
 *     port's max_link_*) when sysfs has it, else the current link: idle NVIDIA GPUs train their
 *     link down (to 2.5 GT/s), so the current speed alone would model an H200 at 4 GB/s. The
 *     description names every GPU whose link was read below that maximum.
 *   - The reserve of a GPU is what was not free when discovered (total - cudaMemGetInfo free):
 *     the CUDA context and other processes; so usable capacity matches what qmesh on CUDA sees.
 */
#define _XOPEN_SOURCE 700 /* realpath, gethostname, gmtime_r */
#include "discover.h"

#include "status_internal.h"
#include "units.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- small pure helpers --------------------------------------------------------------------- */

void qm_discover_facts_init(qm_discover_facts *f)
{
    if (!f)
        return;
    memset(f, 0, sizeof *f);
    for (int i = 0; i < QM_DISCOVER_MAX_GPUS; ++i)
        f->gpus[i].numa = -1;
    f->nvlink_state = QM_DISCOVER_NVLINK_NOT_READ;
}

double qm_discover_pcie_bw(double gts, int width)
{
    if (!(gts > 0) || width <= 0)
        return 0;
    double bits_per_s = gts * 1e9 * width;
    /* gen3 and later: 128b/130b encoding; gen1 and gen2: 8b/10b */
    return gts >= 8.0 ? bits_per_s * 128.0 / 130.0 / 8.0 : bits_per_s * 8.0 / 10.0 / 8.0;
}

double qm_discover_nvlink_bw_per_link(int cc_major, int cc_minor)
{
    if (cc_major == 6)
        return 20e9; /* P100, NVLink1 */
    if (cc_major == 8 && cc_minor >= 6)
        return 14.0625e9; /* GA10x NVLink bridge: RTX A6000 56.25 GB/s over 4 links */
    if (cc_major >= 10)
        return 50e9; /* Blackwell, NVLink5: 18 x 50 = 900 GB/s */
    return 25e9;     /* NVLink2 (V100), NVLink3 (A100), NVLink4 (H100/H200: 18 x 25 = 450 GB/s) */
}

static bool hex_field(const char **p, int max_digits, unsigned long *out)
{
    const char *s = *p;
    unsigned long v = 0;
    int n = 0;
    for (; n < max_digits; ++n) {
        char c = s[n];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        v = v * 16 + (unsigned long)d;
    }
    if (n == 0)
        return false;
    *p = s + n;
    *out = v;
    return true;
}

qm_code qm_discover_bus_id_normalize(const char *text, char out[QM_DISCOVER_BUS_ID_BYTES],
                                     qm_status *st)
{
    if (!text || !out)
        return qm_fail(st, QM_E_ARG, "discover: bus id text and out must not be NULL");
    const char *p = text;
    unsigned long dom, bus, dev, fn;
    if (!hex_field(&p, 8, &dom) || *p++ != ':' || !hex_field(&p, 2, &bus) || *p++ != ':' ||
        !hex_field(&p, 2, &dev) || *p++ != '.' || !hex_field(&p, 1, &fn) || *p != '\0' ||
        dev > 31 || fn > 7)
        return qm_fail(st, QM_E_INPUT, "discover: '%.40s' is not a PCI bus id "
                       "(expected DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 0000:17:00.0)", text);
    snprintf(out, QM_DISCOVER_BUS_ID_BYTES, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
    return QM_OK;
}

/* ---- file readers --------------------------------------------------------------------------- */

/* Read a small text file into buf (NUL-terminated, trailing white space removed). E-IO naming
 * the path when it cannot be opened or read. *missing (when not NULL) tells ENOENT apart. */
static qm_code read_small(const char *path, char *buf, size_t cap, bool *missing, qm_status *st)
{
    if (missing)
        *missing = false;
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int e = errno;
        if (missing)
            *missing = e == ENOENT;
        return qm_fail(st, QM_E_IO, "sysfs: cannot read %s: %s", path, strerror(e));
    }
    size_t n = fread(buf, 1, cap - 1, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad)
        return qm_fail(st, QM_E_IO, "sysfs: cannot read %s: read error", path);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t' ||
                     buf[n - 1] == '\r'))
        buf[--n] = '\0';
    return QM_OK;
}

static bool parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* "32.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s. */
static bool parse_gts(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !(v > 0) || v > 1e4)
        return false;
    while (*end == ' ')
        ++end;
    if (strncmp(end, "GT/s", 4) != 0)
        return false;
    *out = v;
    return true;
}

/* A required small file "<dir>/<name>": its text in buf, its path in path. */
static qm_code read_required(const char *dir, const char *name, char (*path)[PATH_MAX], char *buf,
                             size_t cap, qm_status *st)
{
    int k = snprintf(*path, sizeof *path, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= sizeof *path)
        return qm_fail(st, QM_E_IO, "sysfs: path '%.200s/%.40s' is too long", dir, name);
    return read_small(*path, buf, cap, NULL, st);
}

/* A required file: "<dir>/<name>" parsed as an integer in [min, max]. */
static qm_code read_int(const char *dir, const char *name, long min, long max, long *out,
                        qm_status *st)
{
    char path[PATH_MAX], buf[64];
    qm_code rc = read_required(dir, name, &path, buf, sizeof buf, st);
    if (rc != QM_OK)
        return rc;
    if (!parse_long(buf, min, max, out))
        return qm_fail(st, QM_E_INPUT, "sysfs: %s: '%.40s' is not an integer in [%ld, %ld]", path,
                       buf, min, max);
    return QM_OK;
}

/* A required link speed file. */
static qm_code read_gts(const char *dir, const char *name, double *out, qm_status *st)
{
    char path[PATH_MAX], buf[64];
    qm_code rc = read_required(dir, name, &path, buf, sizeof buf, st);
    if (rc != QM_OK)
        return rc;
    if (!parse_gts(buf, out))
        return qm_fail(st, QM_E_INPUT, "sysfs: %s: cannot read a link speed from '%.40s' "
                       "(expected e.g. '32.0 GT/s PCIe')", path, buf);
    return QM_OK;
}

/* Optional max_link_speed / max_link_width of a device or port directory: 0 when absent or not
 * a value (a root complex has neither; some ports say "Unknown"). */
static void read_max_link(const char *dir, double *gts, int *width)
{
    char path[PATH_MAX], buf[64];
    long w;
    *gts = 0;
    *width = 0;
    snprintf(path, sizeof path, "%s/max_link_speed", dir);
    if (read_small(path, buf, sizeof buf, NULL, NULL) == QM_OK && !parse_gts(buf, gts))
        *gts = 0;
    snprintf(path, sizeof path, "%s/max_link_width", dir);
    if (read_small(path, buf, sizeof buf, NULL, NULL) == QM_OK && parse_long(buf, 1, 64, &w))
        *width = (int)w;
}

static double min_known_d(double a, double b) { return a > 0 && b > 0 ? (a < b ? a : b) : a > 0 ? a : b; }
static int min_known_i(int a, int b) { return a > 0 && b > 0 ? (a < b ? a : b) : a > 0 ? a : b; }

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static qm_code read_numa_nodes(const char *root, qm_discover_facts *f, qm_status *st)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/devices/system/node", root);
    f->n_numa = 0;
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT)
            return QM_OK; /* a kernel without NUMA: node 0 only */
        return qm_fail(st, QM_E_IO, "sysfs: cannot list %s: %s", path, strerror(errno));
    }
    qm_code rc = QM_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long k;
        if (strncmp(e->d_name, "node", 4) != 0 || !e->d_name[4] ||
            strspn(e->d_name + 4, "0123456789") != strlen(e->d_name + 4) ||
            !parse_long(e->d_name + 4, 0, 1000000, &k))
            continue;
        if (f->n_numa == QM_DISCOVER_MAX_NUMA) {
            rc = qm_fail(st, QM_E_RANGE, "sysfs: %s lists more than %d NUMA nodes", path,
                         QM_DISCOVER_MAX_NUMA);
            break;
        }
        f->numa_ids[f->n_numa++] = (int)k;
    }
    closedir(d);
    if (rc == QM_OK) {
        qsort(f->numa_ids, (size_t)f->n_numa, sizeof f->numa_ids[0], cmp_int);
        f->sources |= QM_DISCOVER_SRC_SYSFS_NODE;
    }
    return rc;
}

qm_code qm_discover_facts_from_sysfs(const char *sysfs_root, qm_discover_facts *f, qm_status *st)
{
    if (!sysfs_root || !f)
        return qm_fail(st, QM_E_ARG, "discover: sysfs root and facts must not be NULL");
    if (f->n_gpus < 0 || f->n_gpus > QM_DISCOVER_MAX_GPUS)
        return qm_fail(st, QM_E_ARG, "discover: %d GPUs (at most %d)", f->n_gpus,
                       QM_DISCOVER_MAX_GPUS);
    for (int i = 0; i < f->n_gpus; ++i) {
        qm_discover_gpu *g = &f->gpus[i];
        if (!g->bus_id[0])
            return qm_fail(st, QM_E_ARG, "discover: GPU %d (%s) has no PCI bus id", i, g->name);
        char dir[PATH_MAX];
        int k = snprintf(dir, sizeof dir, "%s/bus/pci/devices/%s", sysfs_root, g->bus_id);
        if (k < 0 || (size_t)k >= sizeof dir)
            return qm_fail(st, QM_E_IO, "sysfs: path '%.200s/bus/pci/devices/%.32s' is too long",
                           sysfs_root, g->bus_id);
        long numa = -1, width = 0;
        qm_code rc;
        if ((rc = read_int(dir, "numa_node", -1, 1000000, &numa, st)) != QM_OK ||
            (rc = read_gts(dir, "current_link_speed", &g->link_cur_gts, st)) != QM_OK ||
            (rc = read_int(dir, "current_link_width", 1, 64, &width, st)) != QM_OK)
            return rc;
        g->numa = (int)numa;
        g->link_cur_width = (int)width;
        double dev_gts, port_gts = 0;
        int dev_width, port_width = 0;
        read_max_link(dir, &dev_gts, &dev_width);
        /* the upstream port: the parent of the device's real directory (a bridge or switch port) */
        char real[PATH_MAX];
        if (realpath(dir, real)) {
            char *slash = strrchr(real, '/');
            if (slash && slash != real) {
                *slash = '\0';
                read_max_link(real, &port_gts, &port_width);
            }
        }
        g->link_max_gts = min_known_d(dev_gts, port_gts);
        g->link_max_width = min_known_i(dev_width, port_width);
        if (dev_gts <= 0) /* without the GPU's own maximum, the port's says nothing certain */
            g->link_max_gts = 0;
        if (dev_width <= 0)
            g->link_max_width = 0;
    }
    if (f->n_gpus > 0)
        f->sources |= QM_DISCOVER_SRC_SYSFS_PCI;
    return read_numa_nodes(sysfs_root, f, st);
}

/* The value of "<key>: N kB" in "<proc_root>/meminfo", in bytes. E-IO naming the file when it
 * cannot be read, E-INPUT when it has no such line. */
static qm_code meminfo_bytes(const char *proc_root, const char *key, uint64_t *out, qm_status *st)
{
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof path, "%s/meminfo", proc_root);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return qm_fail(st, QM_E_IO, "discover: cannot read %s: %s", path, strerror(errno));
    const size_t kl = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, fp)) {
        unsigned long long kb;
        char unit[8];
        if (strncmp(line, key, kl) == 0 && line[kl] == ':' &&
            sscanf(line + kl + 1, "%llu %7s", &kb, unit) == 2 && strcmp(unit, "kB") == 0 &&
            kb > 0 && kb <= UINT64_MAX / 1024) {
            *out = (uint64_t)kb * 1024;
            found = true;
        }
    }
    fclose(fp);
    if (!found)
        return qm_fail(st, QM_E_INPUT, "discover: %s has no '%s: N kB' line", path, key);
    return QM_OK;
}

qm_code qm_discover_mem_available(const char *proc_root, uint64_t *out, qm_status *st)
{
    if (!proc_root || !out)
        return qm_fail(st, QM_E_ARG, "discover: proc root and out must not be NULL");
    *out = 0;
    return meminfo_bytes(proc_root, "MemAvailable", out, st);
}

qm_code qm_host_mem_available_query(uint64_t *out, qm_status *st)
{
    const char *v = getenv("QM_MEMAVAILABLE");
    if (!out)
        return qm_fail(st, QM_E_ARG, "host memory: out must not be NULL");
    *out = 0;
    if (!v || !*v)
        return qm_discover_mem_available("/proc", out, st);
    if (qm_units_parse_size(v, out, st) != QM_OK || *out == 0)
        return qm_fail(st, QM_E_ARG, "host memory: QM_MEMAVAILABLE must be a size above 0 such as "
                       "'8 GiB' (got '%.40s')", v);
    return QM_OK;
}

qm_code qm_discover_facts_from_host(const char *proc_root, qm_discover_facts *f, qm_status *st)
{
    if (!proc_root || !f)
        return qm_fail(st, QM_E_ARG, "discover: proc root and facts must not be NULL");
    if (gethostname(f->hostname, sizeof f->hostname) != 0)
        f->hostname[0] = '\0';
    f->hostname[sizeof f->hostname - 1] = '\0';
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) ||
        strftime(f->date, sizeof f->date, "%Y-%m-%d %H:%M UTC", &tm) == 0)
        f->date[0] = '\0';
    qm_code rc = meminfo_bytes(proc_root, "MemTotal", &f->host_memory_bytes, st);
    if (rc != QM_OK)
        return rc;
    f->sources |= QM_DISCOVER_SRC_MEMINFO;
    return QM_OK;
}

/* ---- facts -> topology ---------------------------------------------------------------------- */

/* "NVIDIA H200" -> "nvidia-h200": letters and digits kept (lower case), runs of anything else
 * become one '-'. */
static void type_id(const char *name, char out[QM_ID_BYTES])
{
    size_t n = 0;
    for (const char *c = name; *c && n < 48; ++c) {
        char ch = *c;
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.';
        if (ok)
            out[n++] = ch;
        else if (n > 0 && out[n - 1] != '-')
            out[n++] = '-';
    }
    while (n > 0 && out[n - 1] == '-')
        --n;
    out[n] = '\0';
    if (n == 0)
        snprintf(out, QM_ID_BYTES, "gpu");
}

/* The link speed and width a GPU's PCIe link is modelled at (see the header comment). */
static void model_link(const qm_discover_gpu *g, double *gts, int *width)
{
    *gts = g->link_max_gts > 0 ? g->link_max_gts : g->link_cur_gts;
    *width = g->link_max_width > 0 ? g->link_max_width : g->link_cur_width;
}

/* Append text to a growing string; false when out of memory. */
static bool cat(char **s, size_t *len, size_t *cap, const char *fmt, ...) QM_PRINTF(4, 5);
static bool cat(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    if (*len + (size_t)n + 1 > *cap) {
        size_t nc = (*len + (size_t)n + 1) * 2;
        char *p = realloc(*s, nc);
        if (!p)
            return false;
        *s = p;
        *cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(*s + *len, *cap - *len, fmt, ap);
    va_end(ap);
    *len += (size_t)n;
    return true;
}

static bool add_source(qm_topology *t, const char *text)
{
    char **p = realloc(t->sources, ((size_t)t->n_sources + 1) * sizeof *p);
    if (!p)
        return false;
    t->sources = p;
    size_t n = strlen(text) + 1;
    if (!(p[t->n_sources] = malloc(n)))
        return false;
    memcpy(p[t->n_sources++], text, n);
    return true;
}

static int add_link(qm_topology *t, int a, int b, qm_link_class cls, double bw)
{
    qm_link *l = &t->links[t->n_links];
    memset(l, 0, sizeof *l);
    l->a = a;
    l->b = b;
    l->cls = cls;
    l->bw_ab_bytes_per_s = l->bw_ba_bytes_per_s = bw;
    l->latency_s = -1;
    l->fabric = -1;
    return t->n_links++;
}

static qm_code check_facts(const qm_discover_facts *f, qm_status *st)
{
    if (f->n_gpus < 1 || f->n_gpus > QM_DISCOVER_MAX_GPUS)
        return qm_fail(st, QM_E_ARG, "discover: the facts have %d GPUs (need 1 to %d)", f->n_gpus,
                       QM_DISCOVER_MAX_GPUS);
    if (f->n_numa < 0 || f->n_numa > QM_DISCOVER_MAX_NUMA)
        return qm_fail(st, QM_E_ARG, "discover: the facts have %d NUMA nodes (at most %d)",
                       f->n_numa, QM_DISCOVER_MAX_NUMA);
    for (int k = 0; k < f->n_numa; ++k)
        if (f->numa_ids[k] < 0 || (k > 0 && f->numa_ids[k] <= f->numa_ids[k - 1]))
            return qm_fail(st, QM_E_ARG, "discover: NUMA node numbers must be ascending and "
                           "non-negative (entry %d is %d)", k, f->numa_ids[k]);
    for (int i = 0; i < f->n_gpus; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        double gts;
        int width;
        model_link(g, &gts, &width);
        if (g->memory_bytes == 0 || !(g->hbm_bw_bytes_per_s > 0))
            return qm_fail(st, QM_E_ARG, "discover: GPU %d (%s, %s) has no memory size or HBM "
                           "bandwidth (%llu B, %g B/s)", i, g->name, g->bus_id,
                           (unsigned long long)g->memory_bytes, g->hbm_bw_bytes_per_s);
        if (g->free_bytes > g->memory_bytes)
            return qm_fail(st, QM_E_ARG, "discover: GPU %d (%s) has more free memory than memory "
                           "(%llu > %llu B)", i, g->name, (unsigned long long)g->free_bytes,
                           (unsigned long long)g->memory_bytes);
        if (!(gts > 0) || width <= 0)
            return qm_fail(st, QM_E_ARG, "discover: GPU %d (%s, %s) has no PCIe link speed and "
                           "width (%g GT/s x%d); read them with qm_discover_facts_from_sysfs", i,
                           g->name, g->bus_id, gts, width);
        if (g->numa < -1 || g->numa > 1000000)
            return qm_fail(st, QM_E_ARG, "discover: GPU %d (%s) has NUMA node %d", i, g->name,
                           g->numa);
    }
    return QM_OK;
}

qm_code qm_discover_build(const qm_discover_facts *f, qm_topology **out, qm_status *st)
{
    if (out)
        *out = NULL;
    if (!f || !out)
        return qm_fail(st, QM_E_ARG, "discover: facts and out must not be NULL");
    qm_code rc = check_facts(f, st);
    if (rc != QM_OK)
        return rc;
    const int ng = f->n_gpus;
    char *desc = NULL;
    size_t dlen = 0, dcap = 0;
    int numa[QM_DISCOVER_MAX_NUMA + QM_DISCOVER_MAX_GPUS], n_numa = 0;
    qm_topology *t = calloc(1, sizeof *t);
    if (!t)
        goto nomem;

    /* NUMA nodes: those sysfs lists, plus any a GPU names, ascending; node 0 when none */
    for (int k = 0; k < f->n_numa; ++k)
        numa[n_numa++] = f->numa_ids[k];
    for (int i = 0; i < ng; ++i) {
        int k = f->gpus[i].numa < 0 ? 0 : f->gpus[i].numa;
        bool have = false;
        for (int j = 0; j < n_numa; ++j)
            have = have || numa[j] == k;
        if (!have)
            numa[n_numa++] = k;
    }
    qsort(numa, (size_t)n_numa, sizeof numa[0], cmp_int);

    qm_topology_defaults_init(t); /* exactly the loader's defaults */
    snprintf(t->name, sizeof t->name, "discovered-%.52s", f->hostname[0] ? f->hostname : "localhost");

    /* device types: one per (name, SM count, compute capability), named after the model */
    int type_of[QM_DISCOVER_MAX_GPUS];
    if (!(t->device_types = calloc((size_t)ng, sizeof *t->device_types)))
        goto nomem;
    for (int i = 0; i < ng; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        type_of[i] = -1;
        for (int j = 0; j < i && type_of[i] < 0; ++j) {
            const qm_discover_gpu *h = &f->gpus[j];
            if (strcmp(g->name, h->name) == 0 && g->sm_count == h->sm_count &&
                g->cc_major == h->cc_major && g->cc_minor == h->cc_minor)
                type_of[i] = type_of[j];
        }
        if (type_of[i] >= 0)
            continue;
        qm_device_type *dt = &t->device_types[t->n_device_types];
        type_id(g->name, dt->name);
        for (int suffix = 2;; ++suffix) { /* same model name, other SM count or capability */
            bool clash = false;
            for (int j = 0; j < t->n_device_types; ++j)
                clash = clash || strcmp(t->device_types[j].name, dt->name) == 0;
            if (!clash)
                break;
            char base[QM_ID_BYTES];
            type_id(g->name, base);
            snprintf(dt->name, sizeof dt->name, "%.48s-%d", base, suffix);
        }
        dt->memory_bytes = g->memory_bytes;
        dt->hbm_bw_bytes_per_s = g->hbm_bw_bytes_per_s;
        dt->sm_count = g->sm_count > 0 ? g->sm_count : 0;
        if (g->cc_major > 0)
            snprintf(dt->arch, sizeof dt->arch, "sm_%d%d", g->cc_major, g->cc_minor);
        type_of[i] = t->n_device_types++;
    }

    /* the host, its nodes in the loader's order: NUMA nodes, GPUs, switches */
    bool nvswitch = false;
    for (int i = 0; i < ng; ++i)
        nvswitch = nvswitch || f->gpus[i].nvswitch_links > 0;
    int n_nodes = n_numa + ng + (nvswitch ? 1 : 0);
    int max_links = ng + ng * (ng - 1) / 2 + ng + n_numa * (n_numa - 1) / 2;
    if (!(t->hosts = calloc(1, sizeof *t->hosts)) ||
        !(t->nodes = calloc((size_t)n_nodes, sizeof *t->nodes)) ||
        !(t->links = calloc((size_t)max_links + 1, sizeof *t->links)) ||
        !(t->gpus = calloc((size_t)ng, sizeof *t->gpus)) ||
        !(t->ranks = calloc(1, sizeof *t->ranks)) ||
        !(t->ranks[0].devices = calloc((size_t)ng, sizeof *t->ranks[0].devices)))
        goto nomem;
    t->n_ranks = 1; /* from here on qm_topology_destroy frees the rank's device list */
    t->n_hosts = 1;
    snprintf(t->hosts[0].id, sizeof t->hosts[0].id, "n0");
    t->hosts[0].memory_bytes = f->host_memory_bytes;
    t->hosts[0].storage_read_bw_bytes_per_s = f->storage.read_bw_bytes_per_s;
    t->hosts[0].storage_write_bw_bytes_per_s = f->storage.write_bw_bytes_per_s;
    t->hosts[0].storage_cached_read_bw_bytes_per_s = f->storage.cached_read_bw_bytes_per_s;
    t->hosts[0].storage_remove_bw_bytes_per_s = f->storage.remove_bw_bytes_per_s;
    snprintf(t->hosts[0].storage_note, sizeof t->hosts[0].storage_note, "%s", f->storage.note);
    for (int k = 0; k < n_numa; ++k) {
        qm_node *n = &t->nodes[t->n_nodes++];
        snprintf(n->id, sizeof n->id, "n0.numa%d", numa[k]);
        n->kind = QM_NODE_NUMA;
        n->numa = n->type = n->attach = -1;
    }
    for (int i = 0; i < ng; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        int gn = t->n_nodes++;
        qm_node *n = &t->nodes[gn];
        snprintf(n->id, sizeof n->id, "n0.g%d", i);
        n->kind = QM_NODE_GPU;
        n->attach = -1;
        n->type = type_of[i];
        n->memory_bytes = g->memory_bytes;
        n->reserve_bytes = g->free_bytes > 0 ? g->memory_bytes - g->free_bytes : 0;
        n->hbm_bw_bytes_per_s = g->hbm_bw_bytes_per_s;
        int k = g->numa < 0 ? 0 : g->numa;
        for (int j = 0; j < n_numa; ++j)
            if (numa[j] == k)
                n->numa = j;
        t->gpus[t->n_gpus++] = gn;
        t->ranks[0].devices[t->ranks[0].n_devices++] = gn;
    }
    int nvs = -1;
    if (nvswitch) {
        nvs = t->n_nodes++;
        qm_node *n = &t->nodes[nvs];
        snprintf(n->id, sizeof n->id, "n0.nvs");
        n->kind = QM_NODE_NVSWITCH;
        n->numa = n->type = n->attach = -1;
    }
    t->ranks_given = true;

    /* links: GPU - NUMA node (pcie), GPU - GPU (nvlink), GPU - NVSwitch (nvlink), NUMA - NUMA */
    double nvl_rates[QM_DISCOVER_MAX_GPUS];
    int n_rates = 0, n_nvl_pairs = 0, n_trained_down = 0;
    for (int i = 0; i < ng; ++i) {
        double gts;
        int width;
        model_link(&f->gpus[i], &gts, &width);
        const int l = add_link(t, t->nodes[n_numa + i].numa, n_numa + i, QM_LINK_PCIE,
                               qm_discover_pcie_bw(gts, width));
        /* measured pinned copies replace the line rate: a is the NUMA node, b the GPU */
        if (f->gpus[i].h2d_bw_bytes_per_s > 0)
            t->links[l].bw_ab_bytes_per_s = f->gpus[i].h2d_bw_bytes_per_s;
        if (f->gpus[i].d2h_bw_bytes_per_s > 0)
            t->links[l].bw_ba_bytes_per_s = f->gpus[i].d2h_bw_bytes_per_s;
    }
    /* defaults.launch: the slowest GPU's measured round trip (the phases wait for every GPU) */
    double slowest = 0;
    for (int i = 0; i < ng; ++i)
        if (f->gpus[i].launch_s > slowest)
            slowest = f->gpus[i].launch_s;
    if (slowest > 0)
        t->launch_s = slowest;
    /* defaults.efficiency.hbm: the lowest of the GPUs' measured device copy rate over the rate
     * computed from the memory clock and bus width (a pass that reads and writes reaches that
     * share of the computed figure; every phase waits for the slowest GPU) */
    double eff = 0;
    for (int i = 0; i < ng; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        if (g->hbm_copy_bw_bytes_per_s > 0 && g->hbm_bw_bytes_per_s > 0) {
            double e = g->hbm_copy_bw_bytes_per_s / g->hbm_bw_bytes_per_s;
            e = e > 1 ? 1 : e;
            eff = eff == 0 || e < eff ? e : eff;
        }
    }
    if (eff > 0)
        t->hbm_efficiency = eff;
    if (f->page_lock_bw_bytes_per_s > 0) { /* defaults.page_lock: the host's, measured */
        t->page_lock_s = f->page_lock_s;
        t->page_lock_bw_bytes_per_s = f->page_lock_bw_bytes_per_s;
    }
    if (f->staging_setup_s > 0) /* defaults.staging_setup: device 0's, measured */
        t->staging_setup_s = f->staging_setup_s;
    if (f->state_alloc_bw_bytes_per_s > 0) /* defaults.state_alloc: device 0's, measured */
        t->state_alloc_bw_bytes_per_s = f->state_alloc_bw_bytes_per_s;
    if (f->staging_open_s > 0) /* defaults.staging_open: device 0's, measured */
        t->staging_open_s = f->staging_open_s;
    if (f->piece_roots_s > 0) /* defaults.piece_roots: device 0's, measured */
        t->piece_roots_s = f->piece_roots_s;
    if (f->host_piece_s > 0 && f->host_coeff_s > 0) { /* defaults.host_batch: measured */
        t->host_piece_s = f->host_piece_s;
        t->host_coeff_s = f->host_coeff_s;
    }
    for (int i = 0; i < ng; ++i) {
        for (int j = i + 1; j < ng; ++j) {
            int n = f->nvlinks[i][j] > f->nvlinks[j][i] ? f->nvlinks[i][j] : f->nvlinks[j][i];
            if (n == 0 || !(f->peer[i][j] || f->peer[j][i]))
                continue;
            double a = qm_discover_nvlink_bw_per_link(f->gpus[i].cc_major, f->gpus[i].cc_minor);
            double b = qm_discover_nvlink_bw_per_link(f->gpus[j].cc_major, f->gpus[j].cc_minor);
            double per = a < b ? a : b;
            add_link(t, n_numa + i, n_numa + j, QM_LINK_NVLINK, n * per);
            ++n_nvl_pairs;
            bool seen = false;
            for (int r = 0; r < n_rates; ++r)
                seen = seen || nvl_rates[r] == per;
            if (!seen && n_rates < QM_DISCOVER_MAX_GPUS)
                nvl_rates[n_rates++] = per;
        }
    }
    for (int i = 0; i < ng && nvs >= 0; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        if (g->nvswitch_links <= 0)
            continue;
        double per = qm_discover_nvlink_bw_per_link(g->cc_major, g->cc_minor);
        add_link(t, n_numa + i, nvs, QM_LINK_NVLINK, g->nvswitch_links * per);
        bool seen = false;
        for (int r = 0; r < n_rates; ++r)
            seen = seen || nvl_rates[r] == per;
        if (!seen && n_rates < QM_DISCOVER_MAX_GPUS)
            nvl_rates[n_rates++] = per;
    }
    for (int a = 0; a < n_numa; ++a)
        for (int b = a + 1; b < n_numa; ++b)
            add_link(t, a, b, QM_LINK_SYS, QM_DISCOVER_SYS_BW_BYTES_PER_S);

    /* description: one line */
    if (!cat(&desc, &dlen, &dcap, "qmesh topo dump of %s%s%s: ",
             f->hostname[0] ? f->hostname : "this host", f->date[0] ? " at " : "", f->date))
        goto nomem;
    for (int ti = 0; ti < t->n_device_types; ++ti) {
        int count = 0, first = -1;
        for (int i = 0; i < ng; ++i)
            if (type_of[i] == ti) {
                count++;
                first = first < 0 ? i : first;
            }
        if (!cat(&desc, &dlen, &dcap, "%s%d x %s", ti ? ", " : "", count, f->gpus[first].name))
            goto nomem;
    }
    if (!cat(&desc, &dlen, &dcap, ", %d NUMA node%s", n_numa, n_numa == 1 ? "" : "s"))
        goto nomem;
    if (f->nvlink_state == QM_DISCOVER_NVLINK_READ) {
        int on_switch = 0;
        for (int i = 0; i < ng; ++i)
            on_switch += f->gpus[i].nvswitch_links > 0;
        if (!cat(&desc, &dlen, &dcap, "; NVLink read with NVML: %d GPU pair%s, %d GPU%s on "
                 "NVSwitch", n_nvl_pairs, n_nvl_pairs == 1 ? "" : "s", on_switch,
                 on_switch == 1 ? "" : "s"))
            goto nomem;
    } else if (!cat(&desc, &dlen, &dcap, "; %s",
                    f->nvlink_note[0] ? f->nvlink_note : "NVLink state not read")) {
        goto nomem;
    }
    for (int i = 0; i < ng; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        double gts;
        int width;
        model_link(g, &gts, &width);
        if (g->link_cur_gts > 0 && (g->link_cur_gts < gts || g->link_cur_width < width)) {
            if (!cat(&desc, &dlen, &dcap, "%s n0.g%d at %g GT/s x%d (modelled at %g GT/s x%d)",
                     n_trained_down ? "," : "; PCIe links trained down when read (idle):", i,
                     g->link_cur_gts, g->link_cur_width, gts, width))
                goto nomem;
            ++n_trained_down;
        }
    }
    t->description = desc;
    desc = NULL;

    /* sources: what was read, then what was assumed */
    char line[512];
    if ((f->sources & QM_DISCOVER_SRC_CUDA) &&
        !add_source(t, "CUDA runtime: cudaGetDeviceProperties (name, totalGlobalMem, "
                       "multiProcessorCount, major.minor, memoryBusWidth), cudaDeviceGetAttribute"
                       "(cudaDevAttrMemoryClockRate), cudaMemGetInfo, cudaDeviceGetPCIBusId, "
                       "cudaDeviceCanAccessPeer"))
        goto nomem;
    if (f->sources & QM_DISCOVER_SRC_PROBE) {
        snprintf(line, sizeof line, "measured: each GPU's host link = pinned cudaMemcpyAsync, %d "
                 "copies of %zu MiB each way (after one untimed), per direction; defaults.launch = "
                 "the slowest GPU's mean of %d round trips of a 4-byte cudaMemsetAsync and "
                 "cudaStreamSynchronize; defaults.page_lock = the line through the median times "
                 "of making 2 MiB and 64 MiB page-locked (huge pages touched first, as encode prepares them while CUDA starts; cudaHostRegister)",
                 QM_DISCOVER_PROBE_REPS, QM_DISCOVER_PROBE_BYTES >> 20, QM_DISCOVER_LAUNCH_REPS);
        if (!add_source(t, line))
            goto nomem;
    }
    if (f->staging_setup_s > 0 &&
        !add_source(t, "measured: defaults.staging_setup = on the first GPU, an encode's device "
                       "setup outside its reads: a 1 GiB state allocated (the first of 3, as an "
                       "encode's state is its process's first), then its block sums allocated "
                       "and (after the pipe's use) its staging closed (the device synchronized, "
                       "12 events and 2 streams destroyed: the median of 3)"))
        goto nomem;
    if (f->state_alloc_bw_bytes_per_s > 0) {
        snprintf(line, sizeof line, "measured: defaults.state_alloc = on the first GPU, the "
                 "bytes between a %llu GiB state's first allocation (made before the staging "
                 "probe and kept through it) and the 1 GiB one's, over the time between them",
                 (unsigned long long)(QM_DISCOVER_BIG_STATE_BYTES >> 30));
        if (!add_source(t, line))
            goto nomem;
    }
    if (f->staging_open_s > 0 &&
        !add_source(t, "measured: defaults.staging_open = the median of 3 times, on the first "
                       "GPU, of opening an encode's staging (2 streams, 12 events, 2 x 32 MiB on "
                       "the device) after its state's allocation and copying 2 chunks of 32 MiB "
                       "into it from page-locked memory, synchronized, less the copies at the "
                       "measured host link"))
        goto nomem;
    if (f->piece_roots_s > 0) {
        snprintf(line, sizeof line, "measured: defaults.piece_roots = on the first GPU, "
                 "local_norm's roots as a one-shot encode makes them, its kernel loaded before: "
                 "the tree_combine op over a 2^%d state's %llu block sums, the root copied to "
                 "plain host memory (the process's first such copy), the stream synchronized and "
                 "destroyed, the sums' buffer given back", QM_DISCOVER_ROOTS_QUBITS,
                 (unsigned long long)f->piece_roots_blocks);
        if (!add_source(t, line))
            goto nomem;
    }
    if (f->host_piece_s > 0 && f->host_coeff_s > 0) {
        snprintf(line, sizeof line, "measured: defaults.host_batch = the median of 3 runs of an "
                 "encode's host work for %d states of %d qubits, per state: pieces = local_norm's "
                 "piece sums, coefficients = norm_allreduce's merge and 1 / sqrt (the encode's own "
                 "functions, on freshly allocated arrays)", QM_DISCOVER_HOST_STATES,
                 QM_DISCOVER_HOST_QUBITS);
        if (!add_source(t, line))
            goto nomem;
    }
    if (eff > 0 && !add_source(t, "measured: defaults.efficiency.hbm = the lowest over GPUs of "
                                  "the device copy rate (cudaMemcpyAsync device to device, 8 "
                                  "copies of 512 MiB after one untimed, bytes read + written / "
                                  "time) over the HBM bandwidth computed from the clock"))
        goto nomem;
    if ((f->sources & QM_DISCOVER_SRC_SYSFS_PCI) &&
        !add_source(t, "/sys/bus/pci/devices/<bus id>/numa_node, current_link_speed, "
                       "current_link_width, max_link_speed, max_link_width (GPU and upstream port)"))
        goto nomem;
    if ((f->sources & QM_DISCOVER_SRC_SYSFS_NODE) &&
        !add_source(t, "/sys/devices/system/node/node<k>"))
        goto nomem;
    if (f->n_numa == 0 && !add_source(t, "no NUMA node list read: the GPUs' nodes (or node 0) "
                                         "are the host's only NUMA nodes"))
        goto nomem;
    if ((f->sources & QM_DISCOVER_SRC_MEMINFO) && !add_source(t, "/proc/meminfo MemTotal"))
        goto nomem;
    if (f->nvlink_state == QM_DISCOVER_NVLINK_READ) {
        if (!add_source(t, (f->sources & QM_DISCOVER_SRC_NVML)
                               ? "NVML (libnvidia-ml.so.1 through dlopen): nvmlDeviceGetNvLinkState,"
                                 " nvmlDeviceGetNvLinkRemotePciInfo_v2"
                               : "NVLink pairs as given in the facts"))
            goto nomem;
    } else if (!add_source(t, f->nvlink_note[0] ? f->nvlink_note : "NVLink state not read")) {
        goto nomem;
    }
    if (!add_source(t, "computed: GPU HBM bandwidth = 2 x memory clock x bus width / 8; PCIe "
                       "bandwidth per direction = GT/s x lanes x 128/130 / 8 (gen3+; 8b/10b for "
                       "gen1/2), the line rate"))
        goto nomem;
    bool any_reserve = false;
    for (int i = 0; i < ng; ++i)
        any_reserve = any_reserve || f->gpus[i].free_bytes > 0;
    if (any_reserve && !add_source(t, "reserve of each GPU: memory not free when discovered "
                                      "(totalGlobalMem - cudaMemGetInfo free)"))
        goto nomem;
    if (n_numa > 1) {
        snprintf(line, sizeof line, "assumed: sys links between NUMA nodes at %g GB/s per "
                 "direction (NCCL src/graph/topo.h ERP_QPI_BW: the Emerald Rapids socket link)",
                 QM_DISCOVER_SYS_BW_BYTES_PER_S / 1e9);
        if (!add_source(t, line))
            goto nomem;
    }
    for (int r = 0; r < n_rates; ++r) {
        snprintf(line, sizeof line, "assumed: NVLink %g GB/s per link per direction for this "
                 "GPU generation (line rate; NVLink4: 18 x 25 GB/s = 450 GB/s, NVIDIA's 900 GB/s "
                 "both ways)",
                 nvl_rates[r] / 1e9);
        if (!add_source(t, line))
            goto nomem;
    }
    *out = t;
    return QM_OK;
nomem:
    free(desc);
    qm_topology_destroy(t);
    return qm_fail(st, QM_E_NOMEM, "discover: out of host memory building the topology of %d GPUs",
                   f->n_gpus);
}
