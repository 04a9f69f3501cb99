/* nvml_discover.c — NVLink facts from NVML, loaded at run time (cuda_discover.h).
 *
 * In: facts whose GPUs have PCI bus ids. Out: nvlinks[i][j] (active links from GPU i that end at
 * GPU j), nvswitch_links (active links that end at an NVSwitch), nvlink_state and nvlink_note.
 * How: dlopen the driver's libnvidia-ml, nvmlInit_v2, then for every GPU (by bus id) and every link
 * index: nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2 and, when the library has
 * it, nvmlDeviceGetNvLinkRemoteDeviceType. A remote end that is one of our GPUs makes a GPU pair;
 * an NVSwitch (or, without the type call, any remote that is not one of our GPUs) counts as a
 * switch link; a GPU this process cannot see is ignored.
 * Must not: include nvml.h (there is none on the build machines) or fail the caller: every problem
 * becomes nvlink_state and a note in the scenario. Compiled in every build: it needs no CUDA.
 * The NVML declarations below are the only ones in the project, written with plain C types from
 * the public NVML API reference (docs.nvidia.com/deploy/nvml-api): nvmlReturn_t is an enum
 * (0 = NVML_SUCCESS), nvmlDevice_t an opaque pointer, nvmlEnableState_t and
 * nvmlIntNvLinkDeviceType_t enums passed as unsigned int, nvmlPciInfo_t the struct below.
 */
#include "cuda_discover.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ---- NVML, as declared by its public API reference -------------------------------------------- */

struct nvml_device_st;                   /* nvmlDevice_t is struct nvmlDevice_st * */
typedef struct nvml_pci_info {           /* nvmlPciInfo_t */
    char bus_id_legacy[16];              /* busIdLegacy: "domain:bus:device.function" */
    unsigned int domain, bus, device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];                     /* busId: "00000000:1B:00.0" */
} nvml_pci_info;

#define NVML_OK 0                        /* NVML_SUCCESS */
#define NVML_FEATURE_ENABLED 1           /* nvmlEnableState_t */
#define NVML_NVLINK_DEVICE_TYPE_GPU 0x00 /* nvmlIntNvLinkDeviceType_t */
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02
/* NVML_NVLINK_MAX_LINKS is 18 today; indices past a device's links return an error, which is
 * skipped, so a few more are asked for future parts. */
#define NVML_LINKS_TRIED 32

typedef int nvml_init_fn(void);                                            /* nvmlInit_v2 */
typedef int nvml_shutdown_fn(void);                                        /* nvmlShutdown */
typedef const char *nvml_error_string_fn(int result);                      /* nvmlErrorString */
typedef int nvml_handle_by_bus_fn(const char *bus_id, struct nvml_device_st **device);
                                                         /* nvmlDeviceGetHandleByPciBusId_v2 */
typedef int nvml_link_state_fn(struct nvml_device_st *device, unsigned int link,
                               unsigned int *is_active);   /* nvmlDeviceGetNvLinkState */
typedef int nvml_remote_pci_fn(struct nvml_device_st *device, unsigned int link,
                               nvml_pci_info *pci);        /* nvmlDeviceGetNvLinkRemotePciInfo_v2 */
typedef int nvml_remote_type_fn(struct nvml_device_st *device, unsigned int link,
                                unsigned int *type);       /* nvmlDeviceGetNvLinkRemoteDeviceType */

typedef struct nvml_api {
    nvml_init_fn *init;
    nvml_shutdown_fn *shutdown;
    nvml_error_string_fn *error_string; /* optional */
    nvml_handle_by_bus_fn *handle_by_bus;
    nvml_link_state_fn *link_state;
    nvml_remote_pci_fn *remote_pci;
    nvml_remote_type_fn *remote_type;   /* optional (older drivers) */
} nvml_api;

/* ---- the walk ---------------------------------------------------------------------------------- */

static const char *nvml_err(const nvml_api *api, int r, char *buf, size_t cap)
{
    const char *s = api->error_string ? api->error_string(r) : NULL;
    snprintf(buf, cap, "%s, NVML error %d", s ? s : "no message", r);
    return buf;
}

static void fail(qm_discover_facts *f, const char *fmt_call, const char *detail)
{
    f->nvlink_state = QM_DISCOVER_NVLINK_FAILED;
    snprintf(f->nvlink_note, sizeof f->nvlink_note, "NVLink state not read: %.40s failed (%.40s)",
             fmt_call, detail);
    memset(f->nvlinks, 0, sizeof f->nvlinks);
    for (int i = 0; i < f->n_gpus; ++i)
        f->gpus[i].nvswitch_links = 0;
}

/* The index of our GPU with this normalized bus id, or -1. */
static int gpu_by_bus(const qm_discover_facts *f, const char *bus)
{
    for (int i = 0; i < f->n_gpus; ++i)
        if (strcmp(f->gpus[i].bus_id, bus) == 0)
            return i;
    return -1;
}

static int remote_gpu(const qm_discover_facts *f, const nvml_pci_info *pci)
{
    char bus[QM_DISCOVER_BUS_ID_BYTES], text[40];
    if (qm_discover_bus_id_normalize(pci->bus_id, bus, NULL) == QM_OK ||
        qm_discover_bus_id_normalize(pci->bus_id_legacy, bus, NULL) == QM_OK)
        return gpu_by_bus(f, bus);
    snprintf(text, sizeof text, "%x:%x:%x.0", pci->domain, pci->bus, pci->device);
    return qm_discover_bus_id_normalize(text, bus, NULL) == QM_OK ? gpu_by_bus(f, bus) : -1;
}

static void walk(const nvml_api *api, qm_discover_facts *f)
{
    char detail[96], call[96];
    memset(f->nvlinks, 0, sizeof f->nvlinks);
    for (int i = 0; i < f->n_gpus; ++i) {
        struct nvml_device_st *dev = NULL;
        int r = api->handle_by_bus(f->gpus[i].bus_id, &dev);
        if (r != NVML_OK) {
            snprintf(call, sizeof call, "nvmlDeviceGetHandleByPciBusId_v2(%s)", f->gpus[i].bus_id);
            fail(f, call, nvml_err(api, r, detail, sizeof detail));
            return;
        }
        f->gpus[i].nvswitch_links = 0;
        for (unsigned link = 0; link < NVML_LINKS_TRIED; ++link) {
            unsigned int active = 0, type = 0;
            nvml_pci_info pci;
            memset(&pci, 0, sizeof pci);
            /* a GPU without NVLink, or a link index past its last, answers with an error */
            if (api->link_state(dev, link, &active) != NVML_OK || active != NVML_FEATURE_ENABLED)
                continue;
            if (api->remote_pci(dev, link, &pci) != NVML_OK)
                continue;
            int j = remote_gpu(f, &pci);
            bool typed = api->remote_type && api->remote_type(dev, link, &type) == NVML_OK;
            if (j >= 0 && j != i) {
                if (f->nvlinks[i][j] < 255)
                    f->nvlinks[i][j]++;
            } else if (j < 0 && (!typed || type == NVML_NVLINK_DEVICE_TYPE_SWITCH)) {
                f->gpus[i].nvswitch_links++;
            } /* else: a GPU this process cannot see, or a CPU (IBM NPU): not modelled */
        }
    }
    f->nvlink_state = QM_DISCOVER_NVLINK_READ;
    f->nvlink_note[0] = '\0';
    f->sources |= QM_DISCOVER_SRC_NVML;
}

void qm_nvml_discover_links(const char *lib_name, qm_discover_facts *f)
{
    if (!f)
        return;
    void *lib = lib_name ? dlopen(lib_name, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        f->nvlink_state = QM_DISCOVER_NVLINK_NO_LIBRARY;
        snprintf(f->nvlink_note, sizeof f->nvlink_note,
                 "NVLink state not read: libnvidia-ml not available");
        return;
    }
    nvml_api api;
    /* ISO C has no conversion from void * to a function pointer; POSIX guarantees it for dlsym */
    api.init = (nvml_init_fn *)dlsym(lib, "nvmlInit_v2");
    api.shutdown = (nvml_shutdown_fn *)dlsym(lib, "nvmlShutdown");
    api.error_string = (nvml_error_string_fn *)dlsym(lib, "nvmlErrorString");
    api.handle_by_bus = (nvml_handle_by_bus_fn *)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    api.link_state = (nvml_link_state_fn *)dlsym(lib, "nvmlDeviceGetNvLinkState");
    api.remote_pci = (nvml_remote_pci_fn *)dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    api.remote_type = (nvml_remote_type_fn *)dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
    const char *missing = !api.init            ? "nvmlInit_v2"
                          : !api.shutdown      ? "nvmlShutdown"
                          : !api.handle_by_bus ? "nvmlDeviceGetHandleByPciBusId_v2"
                          : !api.link_state    ? "nvmlDeviceGetNvLinkState"
                          : !api.remote_pci    ? "nvmlDeviceGetNvLinkRemotePciInfo_v2"
                                               : NULL;
    if (missing) {
        f->nvlink_state = QM_DISCOVER_NVLINK_FAILED;
        snprintf(f->nvlink_note, sizeof f->nvlink_note,
                 "NVLink state not read: %s lacks %s", lib_name, missing);
        dlclose(lib);
        return;
    }
    char detail[96];
    int r = api.init();
    if (r != NVML_OK) {
        fail(f, "nvmlInit_v2", nvml_err(&api, r, detail, sizeof detail));
    } else {
        walk(&api, f);
        (void)api.shutdown();
    }
    dlclose(lib);
}
