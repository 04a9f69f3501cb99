/* stream.h — the batch stream behind qm_stream_* (include/qmesh.h) and `qmesh encode
 * --batch-size`: what the engine's own front ends need beyond the public calls.
 *
 * In: an input already opened by qm_input_open_stream (so the CLI's CSV options and HDF5 dataset
 * apply, and a CSV file is read batch by batch)
 * and a complete request (qubits and dtype decided by the caller). Out: the stream, which owns the
 * input from then on; materialize's phase times summed over the batches.
 * Must not: be included outside engine/pipeline and engine/cli.
 */
#ifndef QM_STREAM_H
#define QM_STREAM_H

#include "materialize_internal.h"
#include "pipeline.h"
#include "qmesh.h"

/* Open a stream over `file` (taken over: on return, success or not, *file is zeroed and the
 * stream or this call closes it). `request` is complete (qubits set; batch and features are the
 * stream's); `ndim` is the input's (1 or 2, after the basis reshape). Errors as
 * qm_stream_open_file. */
qm_code qm_stream_open_input(const qm_scenario *scenario, const qm_request *request,
                             qm_input_file *file, int ndim, const qm_stream_options *opts,
                             qm_stream **out, qm_status *st);
/* The context of the full batch shape (its plan: qm_context_plan_json). Cannot fail. */
qm_context *qm_stream_context_get(const qm_stream *stream);
/* materialize's phases summed over the batches returned so far. Cannot fail. */
qm_materialize_times qm_stream_phases_get(const qm_stream *stream);

#endif
