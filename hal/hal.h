/* hal.h — the hardware abstraction layer as the engine sees it (the umbrella header).
 *
 * Role: one interface over every backend (hal/sim: CPU-simulated mesh; hal/cuda: real GPUs;
 * hal/fault: a shim that fails the k-th call of any backend), split by concern:
 *  - hal_device.h: lifetime, device info, buffers with accounting, host staging memory, trim;
 *  - hal_stream.h: streams, events, copies;
 *  - hal_ops.h: kernels as an extensible set of ops (op ids with parameter blocks, typed wrappers,
 *    qm_hal_supports_op) and the few maths functions of kernels/qm_math.h the engine needs.
 * The engine includes this file and calls only the qm_hal_* wrappers; they check device indices
 * and buffer bounds, supply the fallbacks of optional backend members, keep per-device capacity
 * accounting (in use, peak) and put the operation and device in front of backend messages.
 * Backends implement hal_impl.h, which the engine never includes.
 *
 * Devices are numbered 0..count-1 inside one qm_hal; their ids ("n0.g3") come with qm_hal_device_info.
 */
#ifndef QM_HAL_H
#define QM_HAL_H

#include "hal_device.h"
#include "hal_stream.h"
#include "hal_ops.h"   

#endif
