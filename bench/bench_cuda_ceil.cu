// bench_cuda_ceil.cu — the read ceiling of bench_cuda's norm-check benchmarks: a plain read of
// the same bytes, measured in the same run.
// Role: one grid-stride kernel that reads `bytes` (a multiple of 16) from device memory with
// 16-byte loads, 4 independent loads in flight per thread, as many 256-thread blocks as are
// resident (the occupancy calculator), and writes nothing unless the running sum hits a value
// it cannot reach (so the loads are not dead code). In: a device pointer, a byte count, a stream.
// Out: the launch's cudaError_t as an int. Must not: allocate or synchronise.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

__global__ void __launch_bounds__(256) read_ceiling_kernel(const double2 *x, uint64_t n,
                                                           double *sink)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const double2 a = __ldg(x + i), b = __ldg(x + i + stride), c = __ldg(x + i + 2 * stride),
                      d = __ldg(x + i + 3 * stride);
        acc += (a.x + a.y) + (b.x + b.y) + (c.x + c.y) + (d.x + d.y);
    }
    for (; i < n; i += stride) {
        const double2 a = __ldg(x + i);
        acc += a.x + a.y;
    }
    if (acc == -1.25e300) /* never for the benchmark's data; keeps the loads */
        *sink = acc;
}

} // namespace

extern "C" int qm_bench_read_ceiling(const void *x, uint64_t bytes, double *sink, void *stream)
{
    static int blocks = 0;
    if (!blocks) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_ceiling_kernel, 256, 0);
        blocks = (sms > 0 ? sms : 132) * (per_sm > 0 ? per_sm : 8);
    }
    read_ceiling_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>((const double2 *)x, bytes / 16,
                                                                  sink);
    return (int)cudaGetLastError();
}
