/* qm_passes.h — how many passes over a state the CUDA Walsh-Hadamard and IQP kernels make, as
 * plain host functions, so that the kernels and the cost model count the same passes: the round-3
 * split of the stages above 2^10 (cuda_featuremap.cu's qm_cuda_wht_passes3 runs exactly
 * qm_wht3_split's passes) and the iqp op's traffic over a range (cuda_kernels.cu's
 * qm_cuda_launch_iqp: the fused phase pass, then wht_launch). The cost model reads them through
 * hal.c (qm_hal_iqp_passes), since the engine does not include kernels/.
 * In: stage numbers (bits). Out: pass counts. Must not: include anything of qmesh, read the
 * environment, or allocate.
 */
#ifndef QM_PASSES_H
#define QM_PASSES_H

/* Stages below this bit run in shared memory, one block per aligned chunk of 2^10 slots; the iqp
 * op writes the phases together with them in one pass. */
#define QM_WHT_SMEM_BITS 10u
/* Round 3's most stages per pass on rows of 256 (or 512) contiguous bytes (shared memory holds
 * 16 columns x 2^8 rows of 16 bytes). */
#define QM_WHT3_MAX_W 8u

/* The passes round 3 makes for stages [b0, b1) with at most w_max stages per pass (0: the
 * default split: at most QM_WHT3_MAX_W stages per pass, but never more than ceil(b1 / 10) passes
 * (issue 16: the whole iqp op in ceil(n / 10) + 1 passes, one of them the fused phase pass); past
 * that, passes of up to 10 stages on round 2's kernel). A 2^30 state: stages [10, 30) in 3
 * passes (7, 7, 6). */
static inline unsigned qm_wht3_split(unsigned b0, unsigned b1, unsigned w_max)
{
    if (b1 <= b0)
        return 0;
    const unsigned S = b1 - b0;
    if (w_max == 0) {
        const unsigned most = (b1 + 9) / 10;
        w_max = (S + QM_WHT3_MAX_W - 1) / QM_WHT3_MAX_W <= most ? QM_WHT3_MAX_W
                                                                  : (S + most - 1) / most;
    }
    if (w_max > 10)
        w_max = 10;
    return (S + w_max - 1) / w_max;
}

/* The default iqp op's traffic over a range of whole blocks of 2^bits slots (a shard, or a batch
 * of states of `bits` qubits), in units of the range's bytes: with at least QM_WHT_SMEM_BITS bits,
 * 1 (the phases and stages 0..9 written in one pass) + 2 per round-3 pass of the higher stages
 * (read and write); below that, 1 (the phases written) + 2 (one read and write of every chunk for
 * its stages in shared memory); 1 for bits 0 (no stage). A 2^30 state: 1 + 2 x 3 = 7. */
static inline unsigned qm_iqp_traffic(unsigned bits)
{
    if (bits == 0)
        return 1;
    if (bits < QM_WHT_SMEM_BITS)
        return 3;
    return 1 + 2 * qm_wht3_split(QM_WHT_SMEM_BITS, bits, 0);
}

#endif
