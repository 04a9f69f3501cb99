/* cuda_discover_absent.c — qm_cuda_discover_facts in a build configured with QM_WITH_CUDA=OFF. */
#include "cuda_discover.h"
#include "status_internal.h"

qm_code qm_cuda_discover_facts(qm_discover_facts *f, qm_status *st)
{
    (void)f;
    return qm_fail(st, QM_E_UNSUPPORTED, "cuda: this build has no CUDA backend, so no GPU can be "
                   "discovered; reconfigure with -DQM_WITH_CUDA=ON (needs the CUDA toolkit)");
}
