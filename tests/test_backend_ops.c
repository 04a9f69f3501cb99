/* test_backend_ops.c — every HAL op on every backend against a reference, byte for byte (in the
 * spirit of ggml's test-backend-ops, but bit-exact).
 *
 * Role: one static table of cases (op, state and input dtype, qubits / values per state, batch,
 * offsets, the values: random, zeros, subnormals, near DBL_MAX / FLT_MAX, NaN / Inf, padding),
 * each run through every backend present — the simulator, the fault shim over the simulator with
 * nothing armed, and (with --cuda) the CUDA backend — and compared with the reference: the CPU
 * kernels (kernels/cpu_kernels.h) called directly on host memory. Outputs are poisoned (0xFF)
 * first, so a slot an op must not touch is checked too. One line per failing case names the case,
 * the op, the backend and the first differing element. Sums compare bit for bit, except that two
 * NaN sums are equal (NaN payloads are not part of the contract; test_cuda_batch.c says why).
 * In: argv[1] == "--cuda": also the CUDA backend, exit 77 when there is no GPU.
 * iqp_phase alone may differ on CUDA (its cos/sin are CUDA's): its cases carry cuda_ulp = 2. CUDA
 * rounds 0 to 2 evaluate qm_math.h's order 1 (cos and sin of phi) and are held to that order,
 * computed here with libm, within 2 ulp per component; round 3 evaluates the CPU's order 3 (a
 * product of unit numbers) and is held to the CPU kernel within 128 * 2^-53 of the amplitude's
 * magnitude per component (complex64: two float ulps of it; the worst complex128 difference is
 * printed). The CPU kernel's tables must equal
 * qm_iqp_phase3 slot by slot, bit for bit; the simulator and the fault shim are compared bit for
 * bit.
 * The iqp op (phase + stages) is compared on CUDA with CUDA's own iqp_phase followed by the CPU's
 * stages, bit for bit (a 2-ulp phase difference grows through the stages, so the CPU's phases
 * cannot be its reference there). QM_CUDA_KERNELS=legacy (round 0), round1 or round2 in the
 * environment runs every op of the CUDA backend on that generation, QM_CUDA_KERNELS=round3 on
 * round 3 (product and norm-check kernels, wht passes of at most 8 stages); unset, each op on its
 * default (cuda_kernels.h's QM_CUDA_KERNELS_DEFAULT): the same cases, the same bits, except that
 * IQP phases follow order 1 on rounds 0-2 and order 3 on round 3 and the default.
 * Adding an op: its cases in `cases`, its run in run_backend and run_reference.
 */
#include "cpu_kernels.h"
#include "cuda_backend.h"
#include "fault.h"
#include "qm_math.h"
#include "sim_fixtures.h"
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum values { V_RANDOM, V_ZERO, V_SUBNORMAL, V_NEAR_MAX, V_NONFINITE, V_WIDE, V_BILLIONS };

typedef struct op_case {
    qm_hal_op op;
    qm_dtype st, in;
    unsigned q;          /* period = 2^q slots */
    uint64_t F;          /* values per state (period_valid); 0: the period */
    uint64_t batch;      /* states */
    enum values values;
    uint64_t g0;         /* first global slot of the op's range (sumsq: block-aligned) */
    uint64_t count;      /* stash: values; amp_scale / scan: slots; 0: to the end */
    uint64_t in_first;   /* first input element in the input buffer (stash: the first stashed) */
    uint64_t in_off;     /* stash, batch: elements before it in the input buffer */
    uint64_t st_off;     /* slots before g0 in the state buffer */
    uint64_t sums_off;   /* sumsq_dev, batch: doubles before the sums */
    unsigned lb;         /* sumsq: log2 of the block */
    bool from_input;     /* sumsq, amp_scale: read the input buffer, not the stash */
    double scale;        /* sumsq: 0 = 1; amp_scale: nonzero = per-state powers of two */
    unsigned b0, b1;     /* wht: the stages [b0, b1) (local stages); iqp: [0, b1) */
    bool pair, high;     /* wht: the cross-buffer stage with a partner buffer; which end */
    unsigned cuda_ulp;   /* 0: bit-exact everywhere; else on CUDA each float64 (complex64: float)
                            component within this many ulp of the CPU's (sim and fault: exact) */
} op_case;

#define F64 QM_DTYPE_FLOAT64
#define F32 QM_DTYPE_FLOAT32
#define C128 QM_DTYPE_COMPLEX128
#define C64 QM_DTYPE_COMPLEX64

static const op_case cases[] = {
    /* stash: every dtype pair, runs across states, odd offsets, padding left poisoned */
    {.op = QM_HAL_OP_AMP_STASH, .st = C128, .in = F64, .q = 10, .F = 1000, .batch = 3},
    {.op = QM_HAL_OP_AMP_STASH, .st = C64, .in = F64, .q = 10, .F = 1000, .batch = 3, .in_first = 1501, .in_off = 7, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_STASH, .st = C128, .in = F32, .q = 5, .F = 17, .batch = 9, .in_first = 3, .count = 100, .in_off = 1, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_STASH, .st = C64, .in = F32, .q = 0, .F = 1, .batch = 33, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_AMP_STASH, .st = C128, .in = F64, .q = 16, .F = 65531, .batch = 1, .values = V_NEAR_MAX},
    /* sumsq into host sums: from the stash and from input, every block size, odd input starts,
     * the rescaled path's scale, every magnitude */
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 9},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 14, .st_off = 3, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 10, .g0 = 1024, .from_input = true, .in_first = 3},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F32, .q = 16, .F = 60001, .batch = 1, .lb = 12, .g0 = 4096, .from_input = true, .in_first = 3, .scale = 0x1p-600},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 13, .from_input = true, .values = V_SUBNORMAL, .scale = 0x1p1023},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F32, .q = 16, .F = 65536, .batch = 1, .lb = 14, .from_input = true, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F32, .q = 8, .F = 200, .batch = 10, .lb = 3, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 4, .F = 5, .batch = 8, .lb = 2, .from_input = true, .values = V_ZERO},
    /* round 3's one-warp-per-block sums (QM_CUDA_KERNELS=round3; 2^8 elements and more): the
     * complex64 stash 16-byte aligned and not, the complex128 stash, float64 (2 per lane) and
     * float32 (4 per lane) input with blocks aligned and not (period_valid odd), padding inside
     * and at the end of blocks, 64 groups (2^14 complex128) */
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 14, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F32, .q = 10, .F = 1000, .batch = 6, .lb = 9, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F64, .q = 10, .F = 1021, .batch = 5, .lb = 10, .st_off = 1},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 10, .F = 1021, .batch = 5, .lb = 8, .values = V_SUBNORMAL, .scale = 0x1p1000},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 14, .F = 16384, .batch = 3, .lb = 14, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 10, .F = 1021, .batch = 7, .lb = 9, .from_input = true, .in_first = 0},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F64, .q = 10, .F = 1024, .batch = 7, .lb = 10, .g0 = 1024, .from_input = true, .in_first = 1, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F32, .q = 11, .F = 1999, .batch = 4, .lb = 10, .from_input = true, .in_first = 0, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C64, .in = F32, .q = 14, .F = 16384, .batch = 2, .lb = 14, .from_input = true, .in_first = 0, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_SUMSQ, .st = C128, .in = F32, .q = 12, .F = 4096, .batch = 2, .lb = 11, .g0 = 4096, .from_input = true, .in_first = 2},
    /* sumsq into device memory, at an offset */
    {.op = QM_HAL_OP_AMP_SUMSQ_DEV, .st = C128, .in = F64, .q = 16, .F = 60001, .batch = 1, .lb = 11, .sums_off = 5},
    {.op = QM_HAL_OP_AMP_SUMSQ_DEV, .st = C64, .in = F32, .q = 12, .F = 3000, .batch = 4, .lb = 12, .from_input = true, .in_first = 0, .sums_off = 1, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_SUMSQ_DEV, .st = C128, .in = F64, .q = 14, .F = 16000, .batch = 2, .lb = 9, .g0 = 512, .from_input = true, .in_first = 501, .values = V_NEAR_MAX, .scale = 0x1p-1000},
    /* scan: largest magnitude and the first NaN/Inf of stashed data */
    {.op = QM_HAL_OP_AMP_SCAN, .st = C128, .in = F64, .q = 12, .F = 4000, .batch = 1},
    {.op = QM_HAL_OP_AMP_SCAN, .st = C64, .in = F64, .q = 12, .F = 4000, .batch = 1, .g0 = 17, .st_off = 5, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_SCAN, .st = C128, .in = F32, .q = 12, .F = 4095, .batch = 1, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_AMP_SCAN, .st = C64, .in = F64, .q = 12, .F = 4096, .batch = 1, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_AMP_SCAN, .st = C128, .in = F64, .q = 6, .F = 64, .batch = 1, .values = V_ZERO},
    /* amp_scale: from the stash and from input; one state (odd and even first slots, an odd
     * count) and many states with per-state scales; every dtype pair */
    {.op = QM_HAL_OP_AMP_SCALE, .st = C128, .in = F64, .q = 16, .F = 60001, .batch = 1, .g0 = 1001, .count = 25001, .from_input = true},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C64, .in = F64, .q = 16, .F = 60001, .batch = 1, .g0 = 1000, .count = 25001, .from_input = true},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C128, .in = F32, .q = 16, .F = 60001, .batch = 1, .g0 = 1001, .count = 65535 - 1001, .from_input = true},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C64, .in = F32, .q = 16, .F = 60001, .batch = 1, .g0 = 1000, .count = 25001, .from_input = true},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C128, .in = F64, .q = 16, .F = 65531, .batch = 1, .st_off = 3},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C64, .in = F64, .q = 16, .F = 65531, .batch = 1, .g0 = 7, .values = V_SUBNORMAL, .scale = 1},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C128, .in = F64, .q = 10, .F = 1021, .batch = 12, .g0 = 100, .values = V_WIDE, .scale = 1},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C64, .in = F32, .q = 10, .F = 1000, .batch = 12, .g0 = 3, .from_input = true, .in_first = 3, .values = V_NEAR_MAX, .scale = 1},
    {.op = QM_HAL_OP_AMP_SCALE, .st = C128, .in = F32, .q = 3, .F = 5, .batch = 40, .from_input = true, .values = V_NONFINITE},
    /* amp_batch: periods 1..2^14, values 1..period, offsets, special states side by side */
    {.op = QM_HAL_OP_AMP_BATCH, .st = C128, .in = F64, .q = 0, .F = 1, .batch = 50, .values = V_WIDE},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C64, .in = F32, .q = 1, .F = 1, .batch = 50, .in_off = 1, .st_off = 1, .sums_off = 1},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C128, .in = F32, .q = 3, .F = 7, .batch = 64, .values = V_NONFINITE},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C64, .in = F64, .q = 5, .F = 32, .batch = 64, .values = V_SUBNORMAL, .in_off = 3},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C128, .in = F64, .q = 10, .F = 1021, .batch = 40, .values = V_WIDE, .st_off = 5, .sums_off = 2},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C64, .in = F32, .q = 10, .F = 1024, .batch = 16, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C128, .in = F64, .q = 12, .F = 4000, .batch = 6, .values = V_ZERO},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C128, .in = F32, .q = 14, .F = 16383, .batch = 3, .in_off = 1},
    {.op = QM_HAL_OP_AMP_BATCH, .st = C64, .in = F64, .q = 14, .F = 1, .batch = 2, .values = V_WIDE},
    /* product (angle, basis, phase): the input is the factor table, 4 q doubles per state; small
     * states in a batch, one state past the 2^10 low-bit table with a range that starts and ends
     * inside blocks, offsets; factors that are random, zeros (basis-like), subnormal */
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 10, .batch = 3},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 5, .g0 = 100, .count = 4000, .st_off = 3},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 16, .batch = 1, .g0 = 1001, .count = 30001, .scale = 0x1p-8},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 17, .batch = 2, .g0 = 70000, .count = 130000, .st_off = 1},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 1, .batch = 50, .values = V_ZERO},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 3, .batch = 40, .values = V_SUBNORMAL, .g0 = 5},
    /* the CUDA digit-table kernel's paths: complex64 pairs 16-byte aligned (st_off + g0 even; an
     * odd first slot and a half pair at the end) or not (one slot per lane), more than two digits
     * (n > 20: hi is T_1 * T_2), below 10 qubits (one amplitude per thread) */
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 7},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 12, .batch = 2, .g0 = 5, .count = 8000},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 21, .batch = 1, .g0 = 1000001, .count = 600000, .st_off = 2},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 23, .batch = 1, .g0 = 8188609, .count = 199998, .st_off = 1, .scale = 0x1p-11},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 9, .batch = 5, .g0 = 3, .count = 2000},
    /* the round-2 CUDA kernels' loops: more tiles than resident blocks, so a block's contiguous
     * share holds several tiles (tables kept, the digits above bit 20 recomputed when bit 20
     * changes inside a share), and a batch of 10-qubit states longer than the grid's groups of 4
     * (grid-stride, the last group partial, the range starting and ending inside tiles) */
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 22, .batch = 1, .g0 = 1002, .count = 3145733},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 2503, .g0 = 3, .count = 2563000, .st_off = 1},
    /* round 4's 10-qubit batch kernel with several states per warp (more than twice the
     * resident warps: 4224 on 132 SMs; each warp's next table loaded while it writes a state,
     * buffers taken by parity), an odd count of states on some warps; complex64 pairs from a
     * range that starts and ends inside a state, and complex128 with the phase scale */
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 20011, .g0 = 5, .count = 20491255, .st_off = 1},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 10, .batch = 12007, .scale = 0x1p-5},
    /* round 5's 10-qubit batch kernel with more than one burst of 64 states a block (over 64 x
     * the resident blocks, 396 on 132 SMs; 50989 states: over 128 x, so the shared halves come
     * round again): the next chunk's tables in flight while a chunk is written, the last chunk
     * partial; complex64 pairs from a range cut at both ends, complex128 with the phase scale
     * cut at both ends, complex64 one slot a lane */
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 50989, .g0 = 6, .count = 52212710},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 10, .batch = 26017, .g0 = 1000, .count = 26637408, .scale = 0x1p-5},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 26011, .g0 = 1, .count = 26635262},
    /* round 3 (QM_CUDA_KERNELS=round3): the scale's multiplications (skipped only when it is 1)
     * in a 10-qubit batch split evenly over the blocks (complex128; complex64 pairs, A kept by
     * parity; complex64 one slot per lane) and above 10 qubits (the state's lo table) */
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 10, .batch = 1200, .g0 = 1000, .count = 1200000, .scale = 0x1p-5},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 1500, .scale = 0x1.6a09e667f3bcdp-6},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 10, .batch = 900, .g0 = 511, .count = 900000, .scale = 0x1p-5},
    {.op = QM_HAL_OP_PRODUCT, .st = C64, .in = F64, .q = 11, .batch = 300, .g0 = 2, .count = 600000, .scale = 0x1.6a09e667f3bcdp-6},
    {.op = QM_HAL_OP_PRODUCT, .st = C128, .in = F64, .q = 20, .batch = 2, .g0 = 1048000, .count = 1048000, .st_off = 1, .scale = 0x1p-10},
    /* iqp_phase (iqp, iqp-z): the input is the coefficient table, F = q (iqp-z) or q + q(q-1)/2
     * (iqp) doubles per state; scale 2^-q. cos/sin are the platform's: on CUDA within 2 ulp of
     * libm per component (docs/encodings.md), bit-exact on the simulator and the fault shim */
    {.op = QM_HAL_OP_IQP_PHASE, .st = C128, .in = F64, .q = 10, .F = 10, .batch = 3, .scale = 0x1p-10, .cuda_ulp = 2},
    {.op = QM_HAL_OP_IQP_PHASE, .st = C128, .in = F64, .q = 10, .F = 55, .batch = 2, .g0 = 100, .count = 1500, .st_off = 3, .scale = 0x1p-10, .cuda_ulp = 2},
    {.op = QM_HAL_OP_IQP_PHASE, .st = C64, .in = F64, .q = 16, .F = 136, .batch = 1, .g0 = 1001, .count = 30001, .scale = 0x1p-16, .cuda_ulp = 2},
    {.op = QM_HAL_OP_IQP_PHASE, .st = C128, .in = F64, .q = 17, .F = 17, .batch = 2, .g0 = 70000, .count = 130000, .st_off = 1, .scale = 0x1p-17, .cuda_ulp = 2},
    {.op = QM_HAL_OP_IQP_PHASE, .st = C128, .in = F64, .q = 4, .F = 10, .batch = 50, .values = V_ZERO, .scale = 0x1p-4, .cuda_ulp = 2},
    {.op = QM_HAL_OP_IQP_PHASE, .st = C64, .in = F64, .q = 1, .F = 1, .batch = 9, .g0 = 1, .scale = 0.5, .cuda_ulp = 2},
    /* wht: local stages over whole blocks (the shared-memory stages below 2^10 on CUDA, the
     * per-stage passes above, both together), offsets; the cross-buffer stage, both ends. No
     * value overflows (no NaN: payloads differ between CPU and GPU) */
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 10, .batch = 3, .b0 = 0, .b1 = 10},
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 16, .batch = 1, .b0 = 0, .b1 = 16, .st_off = 3},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 17, .batch = 2, .b0 = 4, .b1 = 15, .st_off = 1},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 13, .batch = 2, .b0 = 11, .b1 = 13},
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 2, .batch = 100, .b0 = 0, .b1 = 1, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 12, .batch = 1, .b0 = 0, .b1 = 12, .values = V_ZERO},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 15, .batch = 1, .pair = true, .st_off = 5, .count = 30001},
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 15, .batch = 1, .pair = true, .high = true, .count = 32768},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 3, .batch = 1, .pair = true, .high = true, .st_off = 2},
    /* the CUDA passes of up to 10 stages above 2^10: whole 10-bit passes (complex128 and
     * complex64), a pass of 4 after the shared-memory stages, two passes (10 + 1) */
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 20, .batch = 1, .b0 = 10, .b1 = 20, .st_off = 1},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 14, .batch = 3, .b0 = 3, .b1 = 14},
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 21, .batch = 1, .b0 = 0, .b1 = 21},
    /* round 3's split of the stages above 2^10 (at most 8 per pass, as even as possible): one
     * stage (no shared-memory round), 8 in one pass (two rounds of 4), 11 as 6 + 5 */
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 11, .batch = 3, .b0 = 0, .b1 = 11, .st_off = 1},
    {.op = QM_HAL_OP_WHT, .st = C128, .in = F64, .q = 18, .batch = 2, .b0 = 10, .b1 = 18},
    {.op = QM_HAL_OP_WHT, .st = C64, .in = F64, .q = 18, .batch = 1, .b0 = 7, .b1 = 18, .st_off = 2},
    /* iqp (iqp_phase, then stages [0, b1) in one op): on the simulator and the fault shim bit for
     * bit against the two CPU kernels; on CUDA bit for bit against CUDA's own iqp_phase followed by
     * the CPU's stages (the phases' cos/sin are CUDA's: the iqp_phase cases above bound them).
     * The fused CUDA pass (q >= 10, b1 >= 10, tile-aligned ranges: a batch of 10-qubit states,
     * shards of one state starting mid-state, passes of 6, 8, 10 + 1 and 2 stages after it, iqp
     * and iqp-z, both dtypes) and the fallbacks (q < 10, an unaligned range, b1 < 10, no stages) */
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 10, .F = 55, .batch = 6, .scale = 0x1p-10, .b1 = 10},
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 10, .F = 10, .batch = 5, .scale = 0x1p-10, .b1 = 10},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 16, .F = 136, .batch = 1, .st_off = 3, .scale = 0x1p-16, .b1 = 16},
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 21, .F = 21, .batch = 1, .scale = 0x1p-21, .b1 = 21},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 20, .F = 20, .batch = 1, .g0 = 262144, .count = 262144, .scale = 0x1p-20, .b1 = 18},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 12, .F = 78, .batch = 3, .g0 = 4096, .count = 8192, .scale = 0x1p-12, .b1 = 12},
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 11, .F = 66, .batch = 2, .g0 = 1024, .count = 2048, .st_off = 1, .scale = 0x1p-11, .b1 = 10},
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 7, .F = 28, .batch = 9, .scale = 0x1p-7, .b1 = 7},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 10, .F = 55, .batch = 3, .g0 = 512, .count = 1024, .scale = 0x1p-10, .b1 = 9},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 13, .F = 91, .batch = 1, .scale = 0x1p-13, .b1 = 0, .values = V_ZERO},
    /* more tiles than resident CUDA blocks (H200: 1056 for the fused kernels), states of 2 tiles:
     * round 3's fused blocks rebuild the per-state tables for every tile of a grid stride (the
     * 2^21 case above keeps them: its blocks take 2 tiles of one state) */
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 11, .F = 66, .batch = 1500, .scale = 0x1p-11, .b1 = 11},
    /* batches of 10-qubit states past the resident warps (round 4: one warp per tile, its next
     * state's coefficients loaded a tile ahead), a scale that is no power of two (round 4 then
     * takes its general kernel, which multiplies it last, as qm_iqp_join; its 10-qubit kernel is
     * launched only for a power of two, folded into U) */
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 10, .F = 55, .batch = 2500, .scale = 0x1.6a09e667f3bcdp-6, .b1 = 10},
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 10, .F = 10, .batch = 2200, .scale = 0x1p-10, .b1 = 10},
    /* table sums in the billions in some lanes of a warp (the 10-qubit kernel's unit numbers take
     * their checked path there, the fast one elsewhere) and a 12-qubit state's */
    {.op = QM_HAL_OP_IQP, .st = C64, .in = F64, .q = 10, .F = 55, .batch = 40, .scale = 0x1p-10, .b1 = 10, .values = V_BILLIONS},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 10, .F = 55, .batch = 40, .scale = 0x1p-10, .b1 = 10, .values = V_BILLIONS},
    {.op = QM_HAL_OP_IQP, .st = C128, .in = F64, .q = 12, .F = 78, .batch = 2, .scale = 0x1p-12, .b1 = 12, .values = V_BILLIONS},
    /* state_sumsq (the norm check): written amplitudes (the input's values as re, im pairs), block
     * sums into device memory at an offset; whole states, a batch range that starts and ends
     * mid-state and mid-block, sizes that are no multiple of the block; the one-block-per-CUDA-
     * block path (2^11..2^14) and the one-thread-per-block path below it; NaN/Inf, subnormal,
     * every exponent */
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 16, .batch = 1, .lb = 14},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 16, .batch = 1, .lb = 14, .st_off = 3, .sums_off = 2},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 12, .batch = 5, .lb = 11, .g0 = 3001, .count = 12345, .st_off = 1, .values = V_WIDE},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 12, .batch = 5, .lb = 12, .g0 = 4095, .count = 8194, .values = V_NONFINITE},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 10, .batch = 40, .lb = 10, .g0 = 1000, .count = 30001, .sums_off = 1, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 10, .batch = 7, .lb = 7, .g0 = 77, .count = 5000},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 2, .batch = 33, .lb = 2, .g0 = 3, .count = 101, .values = V_ZERO},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 0, .batch = 9, .lb = 0, .g0 = 2, .count = 5},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 15, .batch = 1, .lb = 13, .g0 = 5, .count = 3},
    /* round 3's one-warp-per-block kernel (QM_CUDA_KERNELS=round3; blocks of 2^8 slots and more):
     * complex64 16-byte aligned pairs (st_off + g0 even) and not, whole blocks and blocks cut at
     * both ends (checked loads), one group (2^8 complex128, 2^9 complex64), 32 groups, and 64
     * groups (2^14 complex128: two halves of 32) */
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 16, .batch = 1, .lb = 14, .values = V_WIDE},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 10, .batch = 40, .lb = 8, .g0 = 300, .count = 20000, .sums_off = 3},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 12, .batch = 4, .lb = 9, .g0 = 2, .count = 16000},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 11, .batch = 6, .lb = 10, .g0 = 513, .count = 10000, .st_off = 1, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 11, .batch = 6, .lb = 11, .g0 = 513, .count = 10000, .st_off = 2},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 14, .batch = 3, .lb = 14, .g0 = 100, .count = 40000, .st_off = 1, .values = V_NONFINITE},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 13, .batch = 2, .lb = 13, .values = V_WIDE},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C64, .in = F64, .q = 14, .batch = 2, .lb = 14, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_STATE_SUMSQ, .st = C128, .in = F64, .q = 10, .batch = 9, .lb = 10, .values = V_ZERO},
    /* tree_combine (block sums -> piece roots): batch groups of 2^lb doubles from double in_off of
     * the input buffer (poisoned before), roots at sums_off; one sum per group (a copy), the
     * one-thread-per-group kernel (up to 2^6), the one-CUDA-block-per-group kernel with 16..256
     * threads of 8 sums each and 256 threads of 64 and 256 sums, more groups than the grid's
     * 65535 blocks; NaN/Inf, subnormal, every exponent, zeros of both signs */
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 0, .batch = 5, .in_off = 3, .sums_off = 2},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 2, .batch = 1000, .values = V_WIDE},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 6, .batch = 33, .in_off = 1, .values = V_NONFINITE},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 7, .batch = 10, .sums_off = 1},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 10, .batch = 3, .values = V_SUBNORMAL},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 11, .batch = 2, .in_off = 7, .values = V_WIDE},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 14, .batch = 1, .values = V_NEAR_MAX},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 16, .batch = 2, .in_off = 5, .sums_off = 3},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 9, .batch = 4, .values = V_ZERO},
    {.op = QM_HAL_OP_TREE_COMBINE, .st = C128, .in = F64, .lb = 7, .batch = 65601, .in_off = 1},
};

/* ---- inputs ----------------------------------------------------------------------------------- */

static uint64_t rng;
static uint64_t xorshift(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(void) { return (double)(xorshift() >> 11) * 0x1p-52 - 1.0; } /* [-1, 1) */

/* Input element e of a case (a double for float64 input, else exactly a float). */
static double value(const op_case *c, uint64_t e)
{
    const bool f64 = c->in == F64;
    const double r = uniform();
    switch (c->values) {
    case V_RANDOM: return r * ldexp(1.0, (int)(e % 9) - 4);
    case V_ZERO: return e % 2 ? -0.0 : 0.0;
    case V_SUBNORMAL:
        return f64 ? copysign(DBL_TRUE_MIN * (double)(1 + e % 1000), r)
                   : (double)copysignf(FLT_TRUE_MIN * (float)(1 + e % 1000), (float)r);
    case V_NEAR_MAX: return f64 ? DBL_MAX * r : (double)(FLT_MAX * (float)r);
    case V_NONFINITE:
        return e % 97 == 5 ? NAN : e % 89 == 7 ? INFINITY : e % 83 == 11 ? -INFINITY : r;
    case V_BILLIONS: /* one element in 7 of magnitude up to 4e9, the others in [-1, 1): IQP table
                      * sums beyond 2^31 (CUDA's sincos then reduces the long way) in some lanes
                      * of a warp and not in others */
        return e % 7 == 3 ? r * 4e9 : r;
    case V_WIDE: /* every exponent, a few values near the largest */
        if (e % 1009 == 3)
            return f64 ? DBL_MAX * r : (double)(FLT_MAX * (float)r);
        return f64 ? ldexp(r, (int)(e % 2098) - 1074) : (double)ldexpf((float)r, (int)(e % 277) - 149);
    }
    return r;
}

/* ---- the case's geometry ---------------------------------------------------------------------- */

typedef struct geom {
    uint64_t N, F, E, S;  /* period, values per state, input elements, state slots */
    size_t ss, is;        /* slot and input element sizes */
    void *input;          /* all E input elements */
    unsigned char *stash; /* all S slots: poison, then every value stashed (the reference's) */
    uint64_t g0, n;       /* the op's slots [g0, g0 + n) (stash: values [g0, g0 + n)) */
    uint64_t n_blocks;    /* sumsq */
    double *coeffs, *scales; /* amp_scale: one per state */
    /* The state buffer's image for ops that read a stash (sumsq, scan, amp_scale): st_off poisoned
     * slots, then the stash from global slot g0 on — built apart from `stash`, since g0 - st_off
     * may lie before slot 0 and no pointer may be formed there. */
    unsigned char *image;
    uint64_t image_slots;
    unsigned char *partner; /* wht: the partner buffer's S slots */
} geom;

/* The test's own dtype mapping (not the backend's: a reference shares no code under test). */
static qmk_elem elem_of(qm_dtype dt)
{
    switch (dt) {
    case QM_DTYPE_FLOAT32: return QMK_F32;
    case QM_DTYPE_FLOAT64: return QMK_F64;
    case QM_DTYPE_COMPLEX64: return QMK_C64;
    case QM_DTYPE_COMPLEX128: return QMK_C128;
    }
    return QMK_F64;
}

/* wht, state_sumsq: the state buffer's image (st_off poisoned slots, then the first S complex
 * values of the input in the state's dtype) and, for wht, the partner's (the next S values). */
static bool wht_images(const op_case *c, geom *g)
{
    g->image_slots = c->st_off + g->S;
    const bool pair = c->op == QM_HAL_OP_WHT; /* state_sumsq: the image alone */
    g->image = malloc(g->image_slots * g->ss);
    g->partner = malloc(pair ? g->S * g->ss : 1);
    if (!g->image || !g->partner)
        return false;
    memset(g->image, 0xFF, c->st_off * g->ss);
    const double *x = g->input;
    for (uint64_t k = 0; k < (pair ? 2 : 1) * g->S; ++k) {
        unsigned char *dst = k < g->S ? g->image + (c->st_off + k) * g->ss : g->partner + (k - g->S) * g->ss;
        if (c->st == C128) {
            memcpy(dst, x + 2 * k, 16);
        } else {
            const float f[2] = {(float)x[2 * k], (float)x[2 * k + 1]};
            memcpy(dst, f, 8);
        }
    }
    return true;
}

static bool geom_make(const op_case *c, geom *g)
{
    memset(g, 0, sizeof *g);
    g->N = (uint64_t)1 << c->q;
    g->F = c->op == QM_HAL_OP_PRODUCT ? 4 * (uint64_t)c->q
           : c->op == QM_HAL_OP_TREE_COMBINE ? (uint64_t)1 << c->lb /* the sums of a group */
           : c->op == QM_HAL_OP_WHT   ? 4 * g->N /* the state's and the partner's components */
           : c->op == QM_HAL_OP_STATE_SUMSQ ? 2 * g->N /* the amplitudes' components */
           : c->F                     ? c->F
                                      : g->N;
    g->E = c->batch * g->F;
    g->S = c->batch * g->N;
    g->ss = qm_dtype_size(c->st);
    g->is = qm_dtype_size(c->in);
    g->input = malloc(g->E * g->is);
    g->stash = malloc(g->S * g->ss);
    g->coeffs = malloc(c->batch * sizeof *g->coeffs);
    g->scales = malloc(c->batch * sizeof *g->scales);
    if (!g->input || !g->stash || !g->coeffs || !g->scales)
        return false;
    rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)c->op << 32) ^ c->q ^ ((uint64_t)c->values << 8);
    for (uint64_t e = 0; e < g->E; ++e) {
        const double v = value(c, e);
        if (c->in == F64)
            ((double *)g->input)[e] = v;
        else
            ((float *)g->input)[e] = (float)v;
    }
    memset(g->stash, 0xFF, g->S * g->ss);
    /* product, iqp_phase and iqp read their tables, wht and state_sumsq their state image: not a
     * stash */
    if (c->op != QM_HAL_OP_PRODUCT && c->op != QM_HAL_OP_IQP_PHASE && c->op != QM_HAL_OP_WHT &&
        c->op != QM_HAL_OP_IQP && c->op != QM_HAL_OP_STATE_SUMSQ && c->op != QM_HAL_OP_TREE_COMBINE)
        qm_cpu_stash(g->stash, elem_of(c->st), 0, g->N, g->F, g->input, elem_of(c->in), 0, 0, g->E);
    for (uint64_t k = 0; k < c->batch; ++k) {
        g->coeffs[k] = 1.0 / (1.5 + (double)k);
        g->scales[k] = ldexp(1.0, (int)(k % 5) - 2);
    }
    g->g0 = c->op == QM_HAL_OP_AMP_STASH ? c->in_first : c->g0;
    const uint64_t end = c->op == QM_HAL_OP_AMP_STASH ? g->E
                         : c->op == QM_HAL_OP_AMP_SCAN ? g->F /* data slots of state 0 only */
                                                       : g->S;
    g->n = c->count ? c->count : end - g->g0;
    if (c->op == QM_HAL_OP_WHT) /* st_off poisoned slots, then S slots of values; the partner */
        return wht_images(c, g);
    if (c->op == QM_HAL_OP_TREE_COMBINE) { /* the input's doubles only; no state */
        g->n_blocks = c->batch;
        return true;
    }
    if (c->op == QM_HAL_OP_STATE_SUMSQ) { /* st_off poisoned slots, then S slots of amplitudes */
        g->n_blocks = qm_hal_state_sumsq_blocks(g->g0, g->n, c->lb);
        return wht_images(c, g);
    }
    g->n_blocks = (g->S - g->g0) >> c->lb;
    g->image_slots = c->st_off + (g->S - g->g0);
    if (!(g->image = malloc(g->image_slots * g->ss)))
        return false;
    memset(g->image, 0xFF, c->st_off * g->ss);
    memcpy(g->image + c->st_off * g->ss, g->stash + g->g0 * g->ss, (g->S - g->g0) * g->ss);
    return true;
}

static void geom_free(geom *g)
{
    free(g->input);
    free(g->stash);
    free(g->image);
    free(g->partner);
    free(g->coeffs);
    free(g->scales);
}

/* The output of a run: one byte array, and where its float64 sums start (NaN == NaN there). */
typedef struct output {
    unsigned char *bytes;
    uint64_t n;
    uint64_t sums_at, sums_end; /* byte range of float64 sums */
    size_t elem;                /* element size for the report */
} output;

static uint64_t in_buf_first(const op_case *c)
{
    return c->op == QM_HAL_OP_AMP_STASH ? c->in_first - c->in_off
           : c->op == QM_HAL_OP_AMP_BATCH || c->op == QM_HAL_OP_TREE_COMBINE ? 0
                                          : c->in_first;
}

/* The state buffer's slot 0 is global slot st0; it covers [st0, S) (batch: st_off + S slots). */
static uint64_t state_first(const op_case *c, const geom *g)
{
    if (c->op == QM_HAL_OP_AMP_STASH)
        return (c->in_first / g->F) * g->N;
    if (c->op == QM_HAL_OP_AMP_BATCH || c->op == QM_HAL_OP_WHT || c->op == QM_HAL_OP_STATE_SUMSQ)
        return 0;
    return g->g0 - c->st_off;
}

static bool output_alloc(output *o, uint64_t n, uint64_t sums_at, uint64_t sums_end, size_t elem)
{
    o->bytes = malloc(n ? n : 1);
    o->n = n;
    o->sums_at = sums_at;
    o->sums_end = sums_end;
    o->elem = elem;
    return o->bytes != NULL;
}

/* The state buffer's bytes (batch, wht: st_off slots before the S slots of the states). */
static uint64_t state_bytes(const op_case *c, const geom *g)
{
    return c->op == QM_HAL_OP_AMP_BATCH || c->op == QM_HAL_OP_WHT || c->op == QM_HAL_OP_STATE_SUMSQ
               ? (c->st_off + g->S) * g->ss
               : (g->S - state_first(c, g)) * g->ss;
}

/* Layout of the output per op: the state buffer's bytes, then (batch, sumsq_dev) the sums
 * buffer's bytes; sumsq: the host sums; scan: max_abs and first_nonfinite. */
static bool output_make(const op_case *c, const geom *g, output *o)
{
    const uint64_t st_bytes = state_bytes(c, g);
    switch (c->op) {
    case QM_HAL_OP_AMP_STASH:
    case QM_HAL_OP_AMP_SCALE:
    case QM_HAL_OP_PRODUCT:
    case QM_HAL_OP_IQP_PHASE:
    case QM_HAL_OP_IQP:
    case QM_HAL_OP_WHT: return output_alloc(o, st_bytes, 0, 0, g->ss);
    case QM_HAL_OP_AMP_SUMSQ: return output_alloc(o, g->n_blocks * 8, 0, g->n_blocks * 8, 8);
    case QM_HAL_OP_AMP_SUMSQ_DEV:
    case QM_HAL_OP_STATE_SUMSQ:
    case QM_HAL_OP_TREE_COMBINE:
        return output_alloc(o, (c->sums_off + g->n_blocks) * 8, 0, (c->sums_off + g->n_blocks) * 8, 8);
    case QM_HAL_OP_AMP_SCAN: return output_alloc(o, 16, 0, 8, 8);
    case QM_HAL_OP_AMP_BATCH:
        return output_alloc(o, st_bytes + (c->sums_off + c->batch) * 8, st_bytes,
                            st_bytes + (c->sums_off + c->batch) * 8, g->ss);
    case QM_HAL_OP_COUNT_: break;
    }
    return false;
}

/* ---- the reference: the CPU kernels on host memory ------------------------------------------- */

static void run_reference(const op_case *c, const geom *g, output *o)
{
    const uint64_t st0 = state_first(c, g), bf = in_buf_first(c);
    const void *in = c->in == F64 ? (const void *)((const double *)g->input + bf)
                                  : (const void *)((const float *)g->input + bf);
    const double scale = c->scale != 0 ? c->scale : 1.0;
    memset(o->bytes, 0xFF, o->n);
    switch (c->op) {
    case QM_HAL_OP_AMP_STASH:
        qm_cpu_stash(o->bytes, elem_of(c->st), st0, g->N, g->F, in, elem_of(c->in), c->in_off,
                     c->in_first, g->n);
        return;
    case QM_HAL_OP_AMP_SUMSQ:
    case QM_HAL_OP_AMP_SUMSQ_DEV: {
        double *sums = (double *)o->bytes + (c->op == QM_HAL_OP_AMP_SUMSQ_DEV ? c->sums_off : 0);
        qm_cpu_sumsq_blocks(c->from_input ? NULL : g->image, elem_of(c->st), c->st_off,
                            g->g0, g->N, g->F, c->lb, g->n_blocks, scale, sums,
                            c->from_input ? in : NULL, elem_of(c->in), c->in_first);
        return;
    }
    case QM_HAL_OP_AMP_SCAN: {
        double m;
        uint64_t first;
        qm_cpu_scan(g->image, elem_of(c->st), c->st_off, g->n, &m, &first);
        memcpy(o->bytes, &m, 8);
        memcpy(o->bytes + 8, &first, 8);
        return;
    }
    case QM_HAL_OP_AMP_SCALE:
        if (!c->from_input)
            memcpy(o->bytes, g->image, o->n);
        qm_cpu_amp_scale(o->bytes, elem_of(c->st), c->st_off, g->n, g->g0, g->N, g->F, 0, g->coeffs,
                         c->scale != 0 ? g->scales : NULL, c->from_input ? in : NULL,
                         elem_of(c->in), c->in_first);
        return;
    case QM_HAL_OP_AMP_BATCH:
        qm_cpu_amp_batch(o->bytes, elem_of(c->st), c->st_off, g->N, g->F, c->batch, g->input,
                         elem_of(c->in), 0, (double *)(o->bytes + o->sums_at),
                         c->sums_off);
        return;
    case QM_HAL_OP_PRODUCT:
        qm_cpu_product(o->bytes, elem_of(c->st), c->st_off, g->n, g->g0, c->q, 0, g->input, scale);
        return;
    case QM_HAL_OP_IQP_PHASE:
        qm_cpu_iqp_phase(o->bytes, elem_of(c->st), c->st_off, g->n, g->g0, c->q, (unsigned)g->F, 0,
                         g->input, scale);
        return;
    case QM_HAL_OP_WHT:
        memcpy(o->bytes, g->image, o->n);
        qm_cpu_wht(o->bytes, elem_of(c->st), c->st_off, g->n, c->b0, c->b1,
                   c->pair ? g->partner : NULL, c->high);
        return;
    case QM_HAL_OP_STATE_SUMSQ:
        qm_cpu_state_sumsq(g->image + (c->st_off + g->g0) * g->ss, elem_of(c->st), g->n, g->g0,
                           c->lb, (double *)o->bytes + c->sums_off);
        return;
    case QM_HAL_OP_IQP:
        qm_cpu_iqp_phase(o->bytes, elem_of(c->st), c->st_off, g->n, g->g0, c->q, (unsigned)g->F, 0,
                         g->input, scale);
        if (c->b1 > 0)
            qm_cpu_wht(o->bytes, elem_of(c->st), c->st_off, g->n, 0, c->b1, NULL, 0);
        return;
    case QM_HAL_OP_TREE_COMBINE: { /* the engine's host combine, level by level, on a copy */
        double *v = malloc(g->F * sizeof *v);
        for (uint64_t j = 0; v && j < c->batch; ++j) {
            memcpy(v, (const double *)g->input + j * g->F, g->F * sizeof *v);
            const double root = qm_tree_combine(v, g->F);
            memcpy(o->bytes + (c->sums_off + j) * 8, &root, 8);
        }
        free(v);
        return;
    }
    case QM_HAL_OP_COUNT_: break;
    }
}

/* ---- a backend: the same through the HAL wrappers -------------------------------------------- */

static bool upload(qm_hal *hal, uint64_t bytes, const void *src, qm_hal_buf **out, qm_status *st)
{
    return qm_hal_buf_alloc(hal, 0, bytes ? bytes : 1, out, st) == QM_OK &&
           (!bytes || qm_hal_copy_h2d(hal, *out, 0, src, bytes, NULL, st) == QM_OK);
}

static bool run_backend(qm_hal *hal, const op_case *c, const geom *g, output *o, qm_status *st)
{
    const uint64_t st0 = state_first(c, g), bf = in_buf_first(c);
    const double scale = c->scale != 0 ? c->scale : 1.0;
    qm_hal_buf *in = NULL, *state = NULL, *sums = NULL, *partner = NULL;
    bool ok = true;
    const uint64_t st_bytes = state_bytes(c, g);
    /* poison for every buffer that starts poisoned: the output, the state, the device sums */
    uint64_t poison_n = o->n > st_bytes ? o->n : st_bytes;
    if (o->sums_end - o->sums_at > poison_n)
        poison_n = o->sums_end - o->sums_at;
    unsigned char *poison = malloc(poison_n ? poison_n : 1);
    if (!poison)
        return false;
    memset(poison, 0xFF, poison_n);
    /* the input buffer: elements [bf, E) after in_off poisoned ones (stash, batch) */
    const uint64_t lead = c->op == QM_HAL_OP_AMP_STASH || c->op == QM_HAL_OP_AMP_BATCH ||
                                  c->op == QM_HAL_OP_TREE_COMBINE
                              ? c->in_off
                              : 0;
    const uint64_t first = c->op == QM_HAL_OP_AMP_STASH ? c->in_first - c->in_off : bf;
    unsigned char *inb = calloc(1, (lead + g->E - first) * g->is + 1);
    ok = inb != NULL;
    if (ok) {
        if (c->op == QM_HAL_OP_AMP_STASH) /* elements [in_first - in_off, E) */
            memcpy(inb, (const char *)g->input + first * g->is, (g->E - first) * g->is);
        else
            memcpy(inb + lead * g->is, (const char *)g->input + first * g->is, (g->E - first) * g->is);
    }
    const uint64_t in_bytes = c->op == QM_HAL_OP_AMP_STASH ? (g->E - first) * g->is
                                                           : (lead + g->E - first) * g->is;
    ok = ok && upload(hal, in_bytes, inb, &in, st);
    const bool stash_in = !c->from_input && (c->op == QM_HAL_OP_AMP_SUMSQ ||
                                             c->op == QM_HAL_OP_AMP_SUMSQ_DEV ||
                                             c->op == QM_HAL_OP_AMP_SCAN || c->op == QM_HAL_OP_AMP_SCALE);
    ok = ok && upload(hal, st_bytes,
                      stash_in || c->op == QM_HAL_OP_WHT || c->op == QM_HAL_OP_STATE_SUMSQ ? g->image
                                                                                          : poison,
                      &state, st);
    if (c->op == QM_HAL_OP_WHT && c->pair)
        ok = ok && upload(hal, g->S * g->ss, g->partner, &partner, st);
    if (c->op == QM_HAL_OP_AMP_SUMSQ_DEV || c->op == QM_HAL_OP_AMP_BATCH ||
        c->op == QM_HAL_OP_STATE_SUMSQ || c->op == QM_HAL_OP_TREE_COMBINE)
        ok = ok && upload(hal, o->sums_end - o->sums_at, poison, &sums, st);
    if (ok) {
        qm_code rc = QM_E_INTERNAL;
        switch (c->op) {
        case QM_HAL_OP_AMP_STASH: {
            const qm_hal_stash_args a = {.out = state, .out_dtype = c->st, .slot_g0 = st0,
                                         .period = g->N, .period_valid = g->F, .in = in,
                                         .in_dtype = c->in, .in_off = c->in_off,
                                         .in_first = c->in_first, .n = g->n};
            rc = qm_hal_stash(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_AMP_SUMSQ:
        case QM_HAL_OP_AMP_SUMSQ_DEV: {
            const qm_hal_sumsq_args a = {.state = state, .state_dtype = c->st, .off = c->st_off,
                                         .g0 = g->g0, .period = g->N, .period_valid = g->F,
                                         .log2_block = c->lb, .n_blocks = g->n_blocks,
                                         .scale = scale, .out_sums = (double *)o->bytes,
                                         .input = c->from_input ? in : NULL, .in_dtype = c->in,
                                         .in_first = c->in_first};
            rc = c->op == QM_HAL_OP_AMP_SUMSQ ? qm_hal_sumsq_sync(hal, &a, st)
                                              : qm_hal_sumsq(hal, &a, sums, c->sums_off, NULL, st);
            break;
        }
        case QM_HAL_OP_AMP_SCAN: {
            qm_hal_scan_result r;
            rc = qm_hal_scan_sync(hal, state, c->st, c->st_off, g->n, &r, st);
            memcpy(o->bytes, &r.max_abs, 8);
            memcpy(o->bytes + 8, &r.first_nonfinite, 8);
            break;
        }
        case QM_HAL_OP_AMP_SCALE: {
            const qm_hal_amp_scale_args a = {.state = state, .state_dtype = c->st, .off = c->st_off,
                                             .n = g->n, .g0 = g->g0, .period = g->N,
                                             .period_valid = g->F, .first_state = 0,
                                             .n_coeffs = c->batch, .coeffs = g->coeffs,
                                             .input = c->from_input ? in : NULL, .in_dtype = c->in,
                                             .in_first = c->in_first,
                                             .scales = c->scale != 0 ? g->scales : NULL};
            rc = qm_hal_amp_scale(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_AMP_BATCH: {
            const qm_hal_amp_batch_args a = {.state = state, .state_dtype = c->st, .off = c->st_off,
                                             .period = g->N, .period_valid = g->F,
                                             .n_states = c->batch, .input = in, .in_dtype = c->in,
                                             .in_off = c->in_off, .sums = sums,
                                             .sums_off = c->sums_off};
            rc = qm_hal_amp_batch(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_PRODUCT: {
            const qm_hal_product_args a = {.state = state, .state_dtype = c->st, .off = c->st_off,
                                           .n = g->n, .g0 = g->g0, .qubits = c->q,
                                           .first_state = 0, .n_states = c->batch, .table = in,
                                           .table_off = 0, .scale = scale};
            rc = qm_hal_product(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_IQP_PHASE: {
            const qm_hal_iqp_phase_args a = {.state = state, .state_dtype = c->st,
                                             .off = c->st_off, .n = g->n, .g0 = g->g0,
                                             .qubits = c->q, .n_coeffs = (unsigned)g->F,
                                             .first_state = 0, .n_states = c->batch, .table = in,
                                             .table_off = 0, .scale = scale};
            rc = qm_hal_iqp_phase(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_WHT: {
            const qm_hal_wht_args a = {.state = state, .state_dtype = c->st, .off = c->st_off,
                                       .n = g->n, .b0 = c->b0, .b1 = c->b1,
                                       .partner = c->pair ? partner : NULL, .partner_off = 0,
                                       .high = c->high};
            rc = qm_hal_wht(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_STATE_SUMSQ: {
            const qm_hal_state_sumsq_args a = {.state = state, .state_dtype = c->st,
                                               .off = c->st_off + g->g0, .n = g->n, .g0 = g->g0,
                                               .period = g->N, .log2_block = c->lb};
            rc = qm_hal_state_sumsq(hal, &a, sums, c->sums_off, NULL, st);
            break;
        }
        case QM_HAL_OP_IQP: {
            const qm_hal_iqp_args a = {
                .phase = {.state = state, .state_dtype = c->st, .off = c->st_off, .n = g->n,
                          .g0 = g->g0, .qubits = c->q, .n_coeffs = (unsigned)g->F,
                          .first_state = 0, .n_states = c->batch, .table = in, .table_off = 0,
                          .scale = scale},
                .b1 = c->b1};
            rc = qm_hal_iqp(hal, &a, NULL, st);
            break;
        }
        case QM_HAL_OP_TREE_COMBINE: {
            const qm_hal_tree_combine_args a = {.in_off = c->in_off, .n_groups = c->batch,
                                                .log2_group = c->lb};
            rc = qm_hal_tree_combine_dev(hal, &a, in, sums, c->sums_off, NULL, st);
            break;
        }
        case QM_HAL_OP_COUNT_: break;
        }
        ok = rc == QM_OK;
    }
    /* download */
    if (ok && (c->op == QM_HAL_OP_AMP_STASH || c->op == QM_HAL_OP_AMP_SCALE ||
               c->op == QM_HAL_OP_AMP_BATCH || c->op == QM_HAL_OP_PRODUCT ||
               c->op == QM_HAL_OP_IQP_PHASE || c->op == QM_HAL_OP_WHT || c->op == QM_HAL_OP_IQP))
        ok = qm_hal_copy_d2h(hal, o->bytes, state, 0, st_bytes, NULL, st) == QM_OK;
    if (ok && sums)
        ok = qm_hal_copy_d2h(hal, o->bytes + o->sums_at, sums, 0, o->sums_end - o->sums_at, NULL,
                             st) == QM_OK;
    qm_hal_buf_free(hal, in);
    qm_hal_buf_free(hal, state);
    qm_hal_buf_free(hal, sums);
    qm_hal_buf_free(hal, partner);
    free(inb);
    free(poison);
    return ok;
}

/* The first differing byte of a and b (NaN == NaN among the sums), or UINT64_MAX. */
static uint64_t first_difference(const output *a, const output *b)
{
    for (uint64_t i = 0; i < a->n; ++i) {
        if (a->bytes[i] == b->bytes[i])
            continue;
        if (i >= a->sums_at && i < a->sums_end) {
            const uint64_t at = a->sums_at + (i - a->sums_at) / 8 * 8;
            double x, y;
            memcpy(&x, a->bytes + at, 8);
            memcpy(&y, b->bytes + at, 8);
            if (isnan(x) && isnan(y)) {
                i = at + 7;
                continue;
            }
        }
        return i;
    }
    return UINT64_MAX;
}

/* Within `ulp` units in the last place, component by component (float64 for complex128 slots,
 * float for complex64), for the ops whose CUDA results may differ from libm's (iqp_phase): the
 * first component further apart, as a byte offset, or UINT64_MAX. Equal bytes always pass. */
static uint64_t first_beyond_ulp(const output *a, const output *b, unsigned ulp)
{
    const size_t cs = a->elem / 2; /* component size */
    for (uint64_t i = 0; i + cs <= a->n; i += cs) {
        if (memcmp(a->bytes + i, b->bytes + i, cs) == 0)
            continue;
        int64_t ia, ib;
        if (cs == 8) {
            memcpy(&ia, a->bytes + i, 8);
            memcpy(&ib, b->bytes + i, 8);
        } else {
            int32_t x, y;
            memcpy(&x, a->bytes + i, 4);
            memcpy(&y, b->bytes + i, 4);
            ia = x, ib = y;
        }
        /* the same sign: the distance of the bit patterns is the ulp count; else across 0 */
        const bool neg_a = ia < 0, neg_b = ib < 0;
        const int64_t m = cs == 8 ? INT64_MAX : INT32_MAX;
        const int64_t ma = neg_a ? -(ia & m) : ia, mb = neg_b ? -(ib & m) : ib;
        const int64_t d = ma > mb ? ma - mb : mb - ma;
        if (d > (int64_t)ulp)
            return i;
    }
    return UINT64_MAX;
}

/* IQP phases slot by slot, from qm_math.h's per-slot functions rather than the CPU kernel's
 * tables: order 3 (qm_iqp_phase3: the CPU's and CUDA round 3's order, complex64 states order 3f,
 * qm_iqp_phase3f; it must give the kernel's bits exactly) or order 1 (qm_iqp_phi, then libm's cos and sin of phi: the order CUDA rounds 0 to
 * 2 evaluate, the reference their results are held to within 2 ulp per component). */
static void iqp_phase_direct(const op_case *c, const geom *g, output *o, int order)
{
    const double scale = c->scale != 0 ? c->scale : 1.0;
    const uint64_t mask = ((uint64_t)1 << c->q) - 1;
    memset(o->bytes, 0xFF, o->n);
    for (uint64_t i = 0; i < g->n; ++i) {
        const uint64_t x = g->g0 + i;
        const double *co = (const double *)g->input + (x >> c->q) * g->F;
        double re, im;
        if (order == 2 && c->st != C128) { /* complex64: order 3f, float32 products */
            float fr, fi;
            qm_iqp_phase3f(co, c->q, (unsigned)g->F, x & mask, scale, &fr, &fi);
            memcpy(o->bytes + (c->st_off + i) * 8, &fr, 4);
            memcpy(o->bytes + (c->st_off + i) * 8 + 4, &fi, 4);
            continue;
        }
        if (order == 2)
            qm_iqp_phase3(co, c->q, (unsigned)g->F, x & mask, scale, &re, &im);
        else
            qm_iqp_amp(qm_iqp_phi(co, c->q, (unsigned)g->F, x & mask), scale, &re, &im);
        if (c->st == C128) {
            memcpy(o->bytes + (c->st_off + i) * 16, &re, 8);
            memcpy(o->bytes + (c->st_off + i) * 16 + 8, &im, 8);
        } else {
            const float fr = (float)re, fi = (float)im;
            memcpy(o->bytes + (c->st_off + i) * 8, &fr, 4);
            memcpy(o->bytes + (c->st_off + i) * 8 + 4, &fi, 4);
        }
    }
}

/* Within an absolute tolerance component by component (round 3's iqp_phase on CUDA: a product of
 * up to 8 unit numbers whose cos and sin are CUDA's, so a component is bounded relative to the
 * amplitude's magnitude `scale`, not to itself: 128 * 2^-53 * scale for complex128, two float
 * ulps of scale (2^-23 * scale) for complex64, docs/encodings.md); the first component further
 * apart, as a byte offset, or UINT64_MAX. The largest complex128 difference seen, in units of
 * 2^-53 * scale, is kept in worst_abs for the summary line. */
static double worst_abs;
static uint64_t first_beyond_abs(const output *a, const output *b, double scale)
{
    const size_t cs = a->elem / 2;
    const double tol = cs == 8 ? 128 * 0x1p-53 * scale : 0x1p-23 * scale;
    for (uint64_t i = 0; i + cs <= a->n; i += cs) {
        if (memcmp(a->bytes + i, b->bytes + i, cs) == 0)
            continue;
        double x, y;
        if (cs == 8) {
            memcpy(&x, a->bytes + i, 8);
            memcpy(&y, b->bytes + i, 8);
        } else {
            float fx, fy;
            memcpy(&fx, a->bytes + i, 4);
            memcpy(&fy, b->bytes + i, 4);
            x = fx, y = fy;
        }
        if (cs == 8 && fabs(x - y) / (0x1p-53 * scale) > worst_abs)
            worst_abs = fabs(x - y) / (0x1p-53 * scale);
        if (!(fabs(x - y) <= tol))
            return i;
    }
    return UINT64_MAX;
}

typedef struct backend {
    const char *name;
    qm_hal *hal;
} backend;

/* The iqp op's own checks (the phase's checks are iqp_phase's, named "iqp"): exact messages, and
 * nothing written on a refusal. */
static void iqp_validation(qm_hal *hal)
{
    qm_status st;
    qm_hal_buf *state = NULL, *table = NULL;
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 2048 * 16, &state, &st));
    CHECK_OK(qm_hal_buf_alloc(hal, 0, 55 * 8, &table, &st));
    if (!state || !table)
        return;
    const double zeros[55] = {0};
    CHECK_OK(qm_hal_copy_h2d(hal, table, 0, zeros, sizeof zeros, NULL, &st));
    unsigned char *poison = malloc(2048 * 16), *back = malloc(2048 * 16);
    if (poison && back) {
        memset(poison, 0xFF, 2048 * 16);
        CHECK_OK(qm_hal_copy_h2d(hal, state, 0, poison, 2048 * 16, NULL, &st));
    }
    const qm_hal_iqp_phase_args ph = {.state = state, .state_dtype = C128, .off = 0, .n = 1024,
                                      .g0 = 0, .qubits = 10, .n_coeffs = 55, .first_state = 0,
                                      .n_states = 1, .table = table, .table_off = 0,
                                      .scale = 0x1p-10};
    qm_hal_iqp_args a = {.phase = ph, .b1 = 63};
    CHECK(qm_hal_iqp(hal, &a, NULL, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "iqp: stages [0, 63) (at most 62)");
    a.b1 = 10;
    a.phase.n = 1000;
    CHECK(qm_hal_iqp(hal, &a, NULL, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "iqp: 1000 slots are not whole blocks of 2^10");
    a.phase.n = 1024;
    a.phase.n_coeffs = 9;
    CHECK(qm_hal_iqp(hal, &a, NULL, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "iqp: 9 coefficients for 10 qubits (10 or 55)");
    a.phase.n_coeffs = 55;
    a.phase.n = 2048;
    CHECK(qm_hal_iqp(hal, &a, NULL, &st) == QM_E_BOUNDS);
    CHECK_STR(st.msg, "iqp: slots span states 0..1 but the table covers 0..0");
    CHECK(qm_hal_iqp(hal, NULL, NULL, &st) == QM_E_ARG);
    CHECK_STR(st.msg, "iqp: hal, args, state and table must not be NULL");
    if (poison && back) { /* every refusal left the state as it was */
        CHECK_OK(qm_hal_copy_d2h(hal, back, state, 0, 2048 * 16, NULL, &st));
        CHECK(memcmp(back, poison, 2048 * 16) == 0);
    }
    free(poison);
    free(back);
    qm_hal_buf_free(hal, state);
    qm_hal_buf_free(hal, table);
}

int main(int argc, char **argv)
{
    const bool cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    qm_status st;
    backend be[3] = {{"sim", NULL}, {"fault(sim)", NULL}, {"cuda", NULL}};
    int n_be = 2;
    qm_hal *inner = NULL;
    CHECK_OK(fixture_mesh(1, (uint64_t)1 << 30, false, QM_SIM_MATERIALIZED, &be[0].hal, &st));
    CHECK_OK(fixture_mesh(1, (uint64_t)1 << 30, false, QM_SIM_MATERIALIZED, &inner, &st));
    const qm_fault_config nothing = {.points = QM_FAULT_ALL, .fail_at = 0, .code = QM_E_BACKEND};
    CHECK_OK(qm_hal_fault_create(inner, &nothing, &be[1].hal, &st));
    if (cuda) {
        if (qm_hal_cuda_open_logical(1, &be[2].hal, &st) != QM_OK) {
            printf("test_backend_ops: skipped: %s\n", st.msg);
            qm_hal_destroy(be[0].hal);
            qm_hal_destroy(be[1].hal);
            return st.code == QM_E_UNSUPPORTED ? 77 : 1;
        }
        n_be = 3;
    }
    if (!be[0].hal || !be[1].hal)
        return qm_test_end("test_backend_ops");
    int n_run = 0, n_failed = 0;
    const char *gen = getenv("QM_CUDA_KERNELS"); /* as the CUDA backend reads it */
    /* IQP's phases in the CPU's order 3: rounds 3 and 4 and the default (IQP on round 3);
     * order 1: round2, round1, legacy */
    const bool round3 = !gen || !(strcmp(gen, "round2") == 0 || strcmp(gen, "round1") == 0 ||
                                  strcmp(gen, "legacy") == 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const op_case *c = &cases[k];
        geom g;
        output ref = {0};
        CHECK(geom_make(c, &g) && output_make(c, &g, &ref));
        if (!ref.bytes) {
            geom_free(&g);
            continue;
        }
        run_reference(c, &g, &ref);
        /* iqp_phase: on CUDA, rounds 0 to 2 are held to order 1 (cos and sin of phi) within 2 ulp,
         * round 3 to the CPU's order 3 within first_beyond_abs's bound; the CPU kernel's tables
         * must give qm_iqp_phase3's bits slot by slot (CUDA's one-slot-per-thread kernel uses it) */
        output ord1 = ref;
        ord1.bytes = NULL;
        if (c->op == QM_HAL_OP_IQP_PHASE) {
            output direct = ref;
            CHECK((direct.bytes = malloc(direct.n)) != NULL &&
                  (ord1.bytes = malloc(ord1.n)) != NULL);
            if (direct.bytes && ord1.bytes) {
                iqp_phase_direct(c, &g, &direct, 2);
                iqp_phase_direct(c, &g, &ord1, 1);
                const uint64_t dd = first_difference(&ref, &direct);
                if (dd != UINT64_MAX)
                    printf("case %zu: the CPU iqp_phase differs from qm_iqp_phase3 at state slot "
                           "%llu of the buffer\n", k, (unsigned long long)(dd / ref.elem));
                CHECK(dd == UINT64_MAX);
            }
            free(direct.bytes);
        }
        for (int b = 0; b < n_be; ++b) {
            output got = ref;
            got.bytes = malloc(ref.n);
            CHECK(got.bytes != NULL);
            if (!got.bytes)
                continue;
            memset(got.bytes, 0xFF, got.n);
            qm_status_clear(&st);
            bool ok = run_backend(be[b].hal, c, &g, &got, &st);
            /* iqp on CUDA: the reference is CUDA's own iqp_phase, then the CPU's stages */
            output own = ref;
            own.bytes = NULL;
            if (ok && c->op == QM_HAL_OP_IQP && b == 2) {
                op_case pc = *c;
                pc.op = QM_HAL_OP_IQP_PHASE;
                ok = (own.bytes = malloc(own.n)) != NULL;
                if (ok) {
                    memset(own.bytes, 0xFF, own.n);
                    ok = run_backend(be[b].hal, &pc, &g, &own, &st);
                }
                if (ok && c->b1 > 0)
                    qm_cpu_wht(own.bytes, elem_of(c->st), c->st_off, g.n, 0, c->b1, NULL, 0);
            }
            const uint64_t d =
                !ok         ? 0
                : own.bytes ? first_difference(&own, &got)
                : c->cuda_ulp && b == 2
                    ? (round3 ? first_beyond_abs(&ref, &got, c->scale != 0 ? c->scale : 1.0)
                              : first_beyond_ulp(ord1.bytes ? &ord1 : &ref, &got, c->cuda_ulp))
                    : first_difference(&ref, &got);
            free(own.bytes);
            n_run++;
            if (!ok || d != UINT64_MAX) {
                n_failed++;
                if (!ok)
                    printf("case %zu: op %s on %s: %s\n", k, qm_hal_op_name(c->op), be[b].name,
                           st.msg);
                else if (d >= got.sums_at && d < got.sums_end)
                    printf("case %zu: op %s on %s (%s from %s, %u qubits, %llu x %llu values): "
                           "first difference at sum %llu\n", k, qm_hal_op_name(c->op), be[b].name,
                           qm_dtype_name(c->st), qm_dtype_name(c->in), c->q,
                           (unsigned long long)c->batch, (unsigned long long)g.F,
                           (unsigned long long)((d - got.sums_at) / 8));
                else
                    printf("case %zu: op %s on %s (%s from %s, %u qubits, %llu x %llu values): "
                           "first difference at state slot %llu of the buffer\n", k,
                           qm_hal_op_name(c->op), be[b].name, qm_dtype_name(c->st),
                           qm_dtype_name(c->in), c->q, (unsigned long long)c->batch,
                           (unsigned long long)g.F, (unsigned long long)(d / got.elem));
            }
            CHECK(ok && d == UINT64_MAX);
            free(got.bytes);
        }
        free(ref.bytes);
        free(ord1.bytes);
        geom_free(&g);
    }
    if (round3 && n_be == 3)
        printf("test_backend_ops: round 3 iqp_phase on CUDA: worst difference from the CPU %.2f * "
               "2^-53 * scale (bound 128)\n", worst_abs);
    for (int b = 0; b < n_be; ++b)
        iqp_validation(be[b].hal);
    printf("test_backend_ops: %zu cases on %d backends: %d runs, %d failed\n",
           sizeof cases / sizeof cases[0], n_be, n_run, n_failed);
    for (int b = 0; b < n_be; ++b) {
        CHECK_EQ_U64(qm_hal_bytes_in_use(be[b].hal), 0);
        qm_hal_destroy(be[b].hal);
    }
    return qm_test_end("test_backend_ops");
}
