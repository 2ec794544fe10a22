/*
 * worker.h - device workers: threads that run queued scans.
 *
 * Each worker owns one engine stream (one OpenCL command queue, or a slice
 * of the host's cores) and loops: pop a batch of compatible jobs, run each,
 * complete it through its done callback (which resumes the HTTP
 * connection). A job whose deadline passed while it waited is completed
 * with TALLY_E_DEADLINE without running.
 */
#ifndef TALLY_WORKER_H
#define TALLY_WORKER_H

#include "server.h"

struct worker {
    tally_server *s;
    unsigned id;
    uv_thread_t thread;
    tally_stream *stream;
    bool started;
};

/* Opens a stream per worker and starts the threads. */
tally_err workers_start(tally_server *s, char *msg, size_t msglen);

/* Closes the queue, waits for the workers to drain it and stop, and closes
 * their streams. */
void workers_stop(tally_server *s);

#endif
