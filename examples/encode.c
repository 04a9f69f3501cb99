/* encode.c — PLACEHOLDER until the public encode API lands (issue 14): it calls only what
 * include/qmesh.h has today, so that tests/test_install.sh can prove an installed qmesh links and
 * runs, through find_package(qmesh) and through pkg-config. Its output is examples/encode.expected.
 */
#include <qmesh.h>

#include <stdio.h>

int main(void) {
    char buf[32];
    printf("code: %s\n", qm_code_name(QM_E_CAPACITY));
    printf("bytes: %s\n", qm_format_bytes(UINT64_C(8) << 30, buf, sizeof buf));
    const qm_dtype dtypes[] = {QM_DTYPE_FLOAT32, QM_DTYPE_FLOAT64, QM_DTYPE_COMPLEX64,
                               QM_DTYPE_COMPLEX128};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        printf("dtype: %s %zu\n", qm_dtype_name(dtypes[i]), qm_dtype_size(dtypes[i]));
    return 0;
}
