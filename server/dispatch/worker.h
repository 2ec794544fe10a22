/*
 * worker.h - device workers: threads that run what dispatch queues.
 *
 * Each worker owns one engine stream (one OpenCL command queue, or a slice
 * of the host's cores) and loops: pop a batch of compatible jobs from the
 * queue (up to --max-batch, waiting up to --max-queue-delay-us for
 * company) and hand it, with its stream, to the run function it was
 * started with, which runs it as one launch. What a job means, its
 * deadline and its completion are dispatch's business, not the worker's.
 */
#ifndef TALLY_WORKER_H
#define TALLY_WORKER_H

#include "server.h"

/* The most jobs one launch serves. */
#define WORKER_MAX_BATCH 64

/* Jobs larger than this run alone: stacking their lines costs two copies,
 * which pays for a launch's overhead only on small tensors (BENCHMARKS.md,
 * bench-serve). */
#define WORKER_BATCH_BYTES ((size_t)1 << 20)

/* Runs a batch of n compatible jobs on the worker's stream, and completes
 * each (or puts them back in the queue for other workers). Returns false
 * when the worker must stop: its device has left the pool and others are
 * left. */
typedef bool (*worker_run_fn)(worker *w, job **jobs, size_t n);

struct worker {
    tallyd_server *s;
    unsigned id;
    unsigned device;  /* index into s->devices */
    bool on_fallback; /* its stream is the host's: every device is out */
    uv_thread_t thread;
    eng_stream *stream;
    eng_stream *host; /* for jobs a device failed to run; opened on need */
    worker_run_fn run;
    bool started;
};

/* Opens a stream per worker (--workers, spread over the devices in turn:
 * worker w on device w % ndevices) and starts the threads, each handing
 * the jobs it pops to run. Loop thread. */
eng_err workers_start(tallyd_server *s, worker_run_fn run, char *msg,
                      size_t msglen);

/* Closes the queue, waits for the workers to drain it and stop, and closes
 * their streams. Loop thread. */
void workers_stop(tallyd_server *s);

#endif
