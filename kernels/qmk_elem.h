/* qmk_elem.h — the element types the kernels know, as plain parameters.
 *
 * Role: kernels take no engine or HAL type (nothing under kernels/ includes qmesh.h); a backend maps
 * its dtypes to these with a switch (hal/sim/sim.c, hal/cuda/cuda.c), so a dtype the kernels do not
 * know cannot pass unnoticed. The values start at 1 and differ from qm_dtype's on purpose: a plain
 * cast instead of the mapping gives wrong types at once (and -Wenum-conversion warns on it).
 * Must not: include anything of qmesh.
 */
#ifndef QMK_ELEM_H
#define QMK_ELEM_H

typedef enum qmk_elem {
    QMK_F32 = 1,  /* float input */
    QMK_F64 = 2,  /* double input */
    QMK_C64 = 3,  /* complex64 state slots: 8 bytes (two floats, or one stashed double) */
    QMK_C128 = 4, /* complex128 state slots: 16 bytes (two doubles) */
} qmk_elem;

#endif
