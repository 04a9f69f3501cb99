/* hal_stream.h — ordering work on a device: streams, events and copies (part of hal.h).
 *
 * Role: streams (in-order queues per device; the simulator runs everything at once), events that
 * order work between streams of one device, and bounds-checked copies host <-> device and device
 * <-> device (direct between peers, else staged through host memory).
 * In: buffers of hal_device.h, byte offsets and sizes; a stream may be NULL everywhere (the
 * device's default stream, blocking).
 * Out: enqueued or finished copies, counted in the devices' usage (h2d, d2h, d2d, peer bytes).
 * Must not: expose any backend type.
 */
#ifndef QM_HAL_STREAM_H
#define QM_HAL_STREAM_H

#include "hal_device.h"

typedef struct qm_hal_stream qm_hal_stream;
typedef struct qm_hal_event qm_hal_event;

/* --- streams (sim: synchronous; stream may be NULL everywhere = the device's default, blocking) - */
qm_code qm_hal_stream_create(qm_hal *hal, int dev, qm_hal_stream **out, qm_status *st);
void qm_hal_stream_destroy(qm_hal *hal, qm_hal_stream *s);
qm_code qm_hal_stream_sync(qm_hal *hal, qm_hal_stream *s, qm_status *st);

/* --- events: order work between streams of one device (backends without events: no-ops, since
 * their work is synchronous). An event is recorded on a stream; a stream told to wait for it starts
 * its later work only once the work enqueued before the record has finished. ------------------- */
qm_code qm_hal_event_create(qm_hal *hal, int dev, qm_hal_event **out, qm_status *st);
void qm_hal_event_destroy(qm_hal *hal, qm_hal_event *ev); /* NULL is a no-op */
qm_code qm_hal_event_record(qm_hal *hal, qm_hal_event *ev, qm_hal_stream *s, qm_status *st);
qm_code qm_hal_stream_wait(qm_hal *hal, qm_hal_stream *s, qm_hal_event *ev, qm_status *st);
/* Block the host until the work before the event's last record has finished. */
qm_code qm_hal_event_sync(qm_hal *hal, qm_hal_event *ev, qm_status *st);

/* --- copies: destination before source; offsets and sizes in bytes, bounds-checked ------------ */
qm_code qm_hal_copy_h2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const void *src,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st);
qm_code qm_hal_copy_d2h(qm_hal *hal, void *dst, const qm_hal_buf *src, uint64_t src_off,
                        uint64_t bytes, qm_hal_stream *s, qm_status *st);
/* Same device, or different devices: direct when qm_hal_peer_get says so, else staged through a
 * host bounce buffer (two copies, counted as d2h + h2d). */
qm_code qm_hal_copy_d2d(qm_hal *hal, qm_hal_buf *dst, uint64_t dst_off, const qm_hal_buf *src,
                        uint64_t src_off, uint64_t bytes, qm_hal_stream *s, qm_status *st);

#endif
