/* io_internal.h — what the files of engine/io share and nothing else sees: the numbering of the I/O
 * fault hook's steps (io_out.c), so that a step taken on one thread can be carried out on another
 * (io_pool.c) and QM_FAULT_IO=K still fails the same write whatever the threads do. */
#ifndef QM_IO_INTERNAL_H
#define QM_IO_INTERNAL_H

/* Count one I/O step and return its number (1, 2, ...). Thread-safe. */
long qm_io_step_take(void);
/* -1 with errno set when step is the one QM_FAULT_IO fails, else 0. Thread-safe. */
int qm_io_step_check(long step);

#endif
