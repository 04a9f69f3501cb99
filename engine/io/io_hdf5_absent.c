/* io_hdf5_absent.c — the HDF5 reader of a build without HDF5 (QM_WITH_HDF5=OFF).
 *
 * In: the calls of io.h's HDF5 section. Out: E-UNSUPPORTED naming the configure option.
 * Must not: touch the file beyond refusing it.
 */
#include "io.h"
#include "status_internal.h"

#include <stddef.h>

qm_code qm_hdf5_open(const char *path, const char *dataset, qm_hdf5_reader **out, qm_status *st)
{
    (void)dataset;
    if (out)
        *out = NULL;
    return qm_fail(st, QM_E_UNSUPPORTED, "%s: HDF5 input was not compiled in; rebuild with "
                   "-DQM_WITH_HDF5=ON (Debian: apt-get install libhdf5-dev), or convert the file "
                   "to .npy", path ? path : "input");
}

const qm_hdf5_info *qm_hdf5_reader_info(const qm_hdf5_reader *reader)
{
    (void)reader;
    return NULL;
}

qm_code qm_hdf5_read_range(qm_hdf5_reader *reader, uint64_t first_elem, uint64_t count, void *dst,
                           qm_status *st)
{
    (void)reader, (void)first_elem, (void)count, (void)dst;
    return qm_fail(st, QM_E_UNSUPPORTED, "hdf5: not compiled in (QM_WITH_HDF5=OFF)");
}

qm_code qm_hdf5_reader_set_block_bytes(qm_hdf5_reader *reader, uint64_t block_bytes, qm_status *st)
{
    (void)reader, (void)block_bytes;
    return qm_fail(st, QM_E_UNSUPPORTED, "hdf5: not compiled in (QM_WITH_HDF5=OFF)");
}

qm_code qm_hdf5_reader_drop_column(qm_hdf5_reader *reader, uint64_t column, qm_status *st)
{
    (void)reader, (void)column;
    return qm_fail(st, QM_E_UNSUPPORTED, "hdf5: not compiled in (QM_WITH_HDF5=OFF)");
}

void qm_hdf5_close(qm_hdf5_reader *reader)
{
    (void)reader;
}
