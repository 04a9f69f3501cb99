/* comm_mpi_absent.c — the MPI communicator in a build configured with QM_WITH_MPI=OFF.
 *
 * qm_comm_mpi_create reports E-UNSUPPORTED naming the configure option; everything else about
 * communicators (local, threads) works without MPI.
 */
#include "comm.h"
#include "status_internal.h"

qm_code qm_comm_mpi_create(int *argc, char ***argv, qm_comm **out, qm_status *st)
{
    (void)argc;
    (void)argv;
    if (out)
        *out = NULL;
    return qm_fail(st, QM_E_UNSUPPORTED, "mpi comm: this build has no MPI communicator; reconfigure "
                   "with -DQM_WITH_MPI=ON (needs an MPI library, e.g. Debian's libopenmpi-dev)");
}
