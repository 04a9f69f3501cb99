/* api_internal.h — what the engine's own front ends (the stream of stream.c) use of a public
 * context beyond include/qmesh.h.
 *
 * In: a context opened by qm_context_open. Out: a state encoded from any input the pipeline reads
 * (a file reader, a batch of a stream with its global sample numbers), with materialize's options
 * (phase times, staging chunk); the backend's allocation high-water mark; the backend itself and
 * the counters of the context's encode cache.
 * Must not: be included outside engine/pipeline (the public API stays include/qmesh.h).
 */
#ifndef QM_API_INTERNAL_H
#define QM_API_INTERNAL_H

#include "materialize_internal.h"
#include "reuse.h"
#include "qmesh.h"

/* As qm_context_encode, from a qm_amp_input (opts may be NULL); the same checks and errors. */
qm_code qm_context_encode_input(qm_context *ctx, const qm_amp_input *in,
                                const qm_materialize_opts *opts, qm_state **out, qm_status *st);
/* The sum over the context's devices of each device's peak allocated bytes since its backend was
 * opened (0 before qm_context_open). Cannot fail. */
uint64_t qm_context_device_peak_bytes(const qm_context *ctx);
/* The context's backend (NULL before qm_context_open): for host staging memory of the same kind
 * as the encode's (stream.c's batch buffers) and for counters in tests. Cannot fail. */
qm_hal *qm_context_hal(const qm_context *ctx);
/* Before qm_context_open: the context will read no file through qm_context_encode_file, so its
 * open takes no share of the process's reader threads (a stream's contexts: the stream's reader
 * thread reads each batch through its input's own reader). Cannot fail. */
void qm_context_no_read_pool(qm_context *ctx);
/* What the context's encode cache holds and reused (reuse.h; zeros before the first encode).
 * Cannot fail. */
qm_reuse_stats qm_context_reuse_stats(const qm_context *ctx);

#endif
