/*
 * worker.h - device workers: threads that run what dispatch queues.
 *
 * Each worker owns one engine stream (one OpenCL command queue, or a slice
 * of the host's cores) and loops: pop a batch of compatible jobs from the
 * queue and hand each, with its stream, to the run function it was
 * started with. What a job means, its deadline and its completion are
 * dispatch's business, not the worker's.
 */
#ifndef TALLY_WORKER_H
#define TALLY_WORKER_H

#include "server.h"

/* Runs one job on the worker's stream, and completes it. */
typedef void (*worker_run_fn)(worker *w, job *j);

struct worker {
    tallyd_server *s;
    unsigned id;
    uv_thread_t thread;
    eng_stream *stream;
    worker_run_fn run;
    bool started;
};

/* Opens a stream per worker (--workers) and starts the threads, each
 * handing the jobs it pops to run. Loop thread. */
eng_err workers_start(tallyd_server *s, worker_run_fn run, char *msg,
                      size_t msglen);

/* Closes the queue, waits for the workers to drain it and stop, and closes
 * their streams. Loop thread. */
void workers_stop(tallyd_server *s);

#endif
