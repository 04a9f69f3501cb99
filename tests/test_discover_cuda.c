/* test_discover_cuda.c — `qmesh topo dump` discovery on a real GPU host (label cuda; exit 77 =
 * skipped without a GPU).
 *
 * Correctness: the facts of every visible GPU (CUDA runtime, sysfs, /proc, NVML when present)
 * agree with what the CUDA backend reports (memory, HBM bandwidth, usable bytes within the
 * contexts' noise), every GPU's sysfs directory exists, the PCIe figure is one of the standard
 * line rates, and the discovered topology dumps to qmesh/1 text that loads back with no diagnostics
 * into an equal mesh; the copy and launch probe gives plausible figures that the GPUs' host links
 * and defaults.launch carry, the staging probe its two parts, the roots probe (through the CUDA
 * backend, as topo dump runs it) local_norm's round trip. The dump is printed for the record.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "cuda_backend.h"
#include "cuda_discover.h"
#include "discover.h"
#include "hal.h"
#include "materialize_internal.h"
#include "scenario_loader.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    if (qm_cuda_device_count() == 0) {
        printf("test_discover_cuda: no CUDA device: skipped\n");
        return 77;
    }
    qm_status st;
    qm_status_clear(&st);
    qm_discover_facts *f = malloc(sizeof *f);
    CHECK(f != NULL);
    if (!f)
        return qm_test_end("test_discover_cuda");
    qm_discover_facts_init(f);
    CHECK_OK(qm_discover_facts_from_host("/proc", f, &st));
    qm_code rc = qm_cuda_discover_facts(f, &st);
    CHECK(rc == QM_OK);
    if (rc != QM_OK)
        fprintf(stderr, "qm_cuda_discover_facts: %s\n", st.msg);
    CHECK(f->n_gpus == qm_cuda_device_count());
    rc = qm_discover_facts_from_sysfs("/sys", f, &st);
    CHECK(rc == QM_OK);
    if (rc != QM_OK)
        fprintf(stderr, "qm_discover_facts_from_sysfs: %s\n", st.msg);
    CHECK(f->nvlink_state == QM_DISCOVER_NVLINK_READ ||
          f->nvlink_state == QM_DISCOVER_NVLINK_NO_LIBRARY);
    printf("nvlink: state %d%s%s\n", (int)f->nvlink_state, f->nvlink_note[0] ? ", " : "",
           f->nvlink_note);

    qm_hal *hal = NULL;
    CHECK_OK(qm_hal_cuda_open(&hal, &st));
    for (int i = 0; i < f->n_gpus && hal; ++i) {
        const qm_discover_gpu *g = &f->gpus[i];
        qm_hal_device_info in;
        CHECK_OK(qm_hal_device_info_query(hal, i, &in, &st));
        printf("gpu %d: %s, %s, %llu B (free %llu B), HBM %.4g B/s, %d SMs, sm_%d%d, numa %d, "
               "PCIe now %g GT/s x%d, max %g GT/s x%d, NVSwitch links %d\n",
               i, g->name, g->bus_id, (unsigned long long)g->memory_bytes,
               (unsigned long long)g->free_bytes, g->hbm_bw_bytes_per_s, g->sm_count, g->cc_major,
               g->cc_minor, g->numa, g->link_cur_gts, g->link_cur_width, g->link_max_gts,
               g->link_max_width, g->nvswitch_links);
        CHECK(g->name[0] != '\0' && g->sm_count > 0 && g->cc_major >= 6);
        CHECK(g->hbm_bw_bytes_per_s == in.hbm_bw_bytes_per_s);
        CHECK(g->hbm_bw_bytes_per_s > 1e11);
        CHECK(g->free_bytes > 0 && g->free_bytes <= g->memory_bytes);
        /* free memory now (the backend's) and at discovery: both of this device's memory, but
         * not compared with each other: other processes on the GPU (ctest -j runs the CUDA tests
         * side by side) allocate and free between the two queries (an H100 run of session 26
         * saw them more than 1 GiB apart) */
        CHECK(in.usable_bytes > 0 && in.usable_bytes <= in.memory_bytes);
        /* the backend's total comes from cudaMemGetInfo, ours from totalGlobalMem */
        CHECK(g->memory_bytes >= in.memory_bytes && g->memory_bytes - in.memory_bytes < (1u << 30));
        double gts = g->link_max_gts > 0 ? g->link_max_gts : g->link_cur_gts;
        CHECK(gts == 2.5 || gts == 5.0 || gts == 8.0 || gts == 16.0 || gts == 32.0 || gts == 64.0);
        CHECK(g->link_cur_width >= 1 && g->link_cur_width <= 32);
        /* the copy and launch probe: rates between 1 GB/s and 2 TB/s (no host link is outside),
         * a round trip between 0 and 10 ms */
        printf("gpu %d probe: pinned H2D %.4g B/s, D2H %.4g B/s, launch round trip %.3g s\n", i,
               g->h2d_bw_bytes_per_s, g->d2h_bw_bytes_per_s, g->launch_s);
        CHECK(g->h2d_bw_bytes_per_s > 1e9 && g->h2d_bw_bytes_per_s < 2e12);
        CHECK(g->d2h_bw_bytes_per_s > 1e9 && g->d2h_bw_bytes_per_s < 2e12);
        CHECK(g->launch_s > 0 && g->launch_s < 1e-2);
    }
    CHECK((f->sources & QM_DISCOVER_SRC_PROBE) != 0);
    printf("page-locking: %.4g s + bytes / %.4g B/s\n", f->page_lock_s, f->page_lock_bw_bytes_per_s);
    CHECK(f->page_lock_s >= 0 && f->page_lock_s < 1.0);
    CHECK(f->page_lock_bw_bytes_per_s > 1e8);
    printf("staging outside the reads (state and sums allocated, pipe closed): %.4g s (the state's "
           "allocation %.4g s); pipe opened and first used: %.4g s beyond its copies\n",
           f->staging_setup_s, f->staging_alloc_s, f->staging_open_s);
    CHECK(f->staging_setup_s > 0 && f->staging_setup_s < 1.0);
    CHECK(f->staging_alloc_s >= 0 && f->staging_alloc_s <= f->staging_setup_s);
    CHECK(f->staging_open_s > 0 && f->staging_open_s < 1.0);
    /* a 4 GiB state's first allocation (when a quarter of the free memory holds it) and the rate
     * of its bytes beyond the first GiB: 0 (not measured) or between 1 GB/s and 1 PB/s (an H100: 4.6-7.7 TB/s) */
    printf("a 4 GiB state's first allocation: %.4g s; beyond its first GiB %.4g B/s\n",
           f->big_state_alloc_s, f->state_alloc_bw_bytes_per_s);
    CHECK(f->big_state_alloc_s >= 0 && f->big_state_alloc_s < 1.0);
    CHECK(f->state_alloc_bw_bytes_per_s == 0 ||
          (f->state_alloc_bw_bytes_per_s > 1e9 && f->state_alloc_bw_bytes_per_s < 1e15));
    /* local_norm's round trip as topo dump measures it (defaults.piece_roots): the tree_combine op
     * over a 2^28 state's 16384 block sums and its root's copy, between 1 us and 10 ms */
    if (hal) {
        CHECK_OK(qm_materialize_roots_probe(hal, 0, QM_DISCOVER_ROOTS_QUBITS, QM_DISCOVER_ROOTS_REPS,
                                            &f->piece_roots_s, NULL, &f->piece_roots_blocks, &st));
        printf("local_norm's roots: %.4g s for %llu block sums\n", f->piece_roots_s,
               (unsigned long long)f->piece_roots_blocks);
        CHECK(f->piece_roots_s > 1e-6 && f->piece_roots_s < 1e-2 && f->piece_roots_blocks == 16384);
    }
    qm_hal_destroy(hal);

    qm_topology *t = NULL, *back = NULL;
    CHECK_OK(qm_discover_build(f, &t, &st));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (t && mem) {
        CHECK_OK(qm_scenario_dump(t, mem, &st));
        fclose(mem);
        mem = NULL;
        printf("---\n%s---\n", text);
        qm_diags d;
        qm_diags_init(&d);
        CHECK_OK(qm_scenario_load_string(text, len, "discovered.yaml", &back, &d, &st));
        CHECK(d.n == 0);
        qm_diags_print(&d, stderr);
        qm_diags_fini(&d);
    }
    if (mem)
        fclose(mem);
    if (back && t) {
        CHECK_STR(back->name, t->name);
        CHECK(back->n_gpus == f->n_gpus && back->n_links == t->n_links && back->n_nodes == t->n_nodes);
        for (int i = 0; i < back->n_gpus; ++i) {
            const qm_node *a = &t->nodes[t->gpus[i]], *b = &back->nodes[back->gpus[i]];
            CHECK_STR(a->id, b->id);
            CHECK_EQ_U64(a->memory_bytes, b->memory_bytes);
            CHECK_EQ_U64(a->reserve_bytes, b->reserve_bytes);
            CHECK(a->hbm_bw_bytes_per_s == b->hbm_bw_bytes_per_s && a->numa == b->numa);
        }
        for (int i = 0; i < back->n_links; ++i)
            CHECK(back->links[i].bw_ab_bytes_per_s == t->links[i].bw_ab_bytes_per_s &&
                  back->links[i].bw_ba_bytes_per_s == t->links[i].bw_ba_bytes_per_s);
        /* the GPUs' host links carry the probe's rates (a: the NUMA node, b: the GPU) */
        for (int i = 0; i < t->n_links; ++i)
            for (int g = 0; g < f->n_gpus; ++g)
                if (t->links[i].b == t->gpus[g] && t->links[i].cls == QM_LINK_PCIE)
                    CHECK(t->links[i].bw_ab_bytes_per_s == f->gpus[g].h2d_bw_bytes_per_s &&
                          t->links[i].bw_ba_bytes_per_s == f->gpus[g].d2h_bw_bytes_per_s);
        CHECK(back->launch_s > 0 && back->launch_s < 1e-2);
        CHECK(back->page_lock_s == f->page_lock_s &&
              back->page_lock_bw_bytes_per_s == f->page_lock_bw_bytes_per_s);
    }
    free(text);
    qm_topology_destroy(back);
    qm_topology_destroy(t);
    free(f);
    return qm_test_end("test_discover_cuda");
}
