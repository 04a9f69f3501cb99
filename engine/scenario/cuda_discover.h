/* cuda_discover.h — the facts of this machine's GPUs for engine/discover.h (`qmesh topo dump`).
 *
 * qm_cuda_discover_facts reads the CUDA runtime (compiled only with QM_WITH_CUDA; cuda_discover.c)
 * and then NVML through dlopen (nvml_discover.c). qm_nvml_discover_links is compiled in every build:
 * it needs no NVML header and no CUDA, only the driver's libnvidia-ml at run time.
 * Neither prints, aborts, or leaves a CUDA device current other than the one it found.
 */
#ifndef QM_CUDA_DISCOVER_H
#define QM_CUDA_DISCOVER_H

#include "discover.h"

/* Fill f's GPUs (name, memory, free memory, HBM bandwidth, SM count, compute capability,
 * normalized PCI bus id), the peer access matrix (cudaDeviceCanAccessPeer), each GPU's copy and
 * launch probe (pinned H2D and D2H rates, the launch round trip, a small page-locked allocation;
 * QM_DISCOVER_SRC_PROBE; about 64 MiB pinned and 64 MiB per GPU, well under a second per GPU)
 * and, through qm_nvml_discover_links("libnvidia-ml.so.1", f), the NVLink facts. The GPU list of f is
 * replaced; other facts are kept. E-UNSUPPORTED "no CUDA device" without a GPU or driver,
 * E-UNSUPPORTED naming -DQM_WITH_CUDA=ON in a build without CUDA, E-RANGE for more than
 * QM_DISCOVER_MAX_GPUS devices, E-BACKEND naming the call, the device and the CUDA error. */
qm_code qm_cuda_discover_facts(qm_discover_facts *f, qm_status *st);

/* Mark NVLink facts of f's GPUs (bus ids already set) from NVML, loaded with dlopen(lib_name):
 * nvlinks[i][j] counts the active links from GPU i whose remote end is GPU j; nvswitch_links the
 * active links that end at an NVSwitch. Cannot fail: sets f->nvlink_state to READ (and the
 * QM_DISCOVER_SRC_NVML source bit), or to NO_LIBRARY with nvlink_note "NVLink state not read:
 * libnvidia-ml not available", or to FAILED with a note naming the NVML call and its error. */
void qm_nvml_discover_links(const char *lib_name, qm_discover_facts *f);

#endif
