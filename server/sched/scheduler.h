/*
 * scheduler.h - the scheduler: jobs in, completions out, whatever door they
 * came through.
 *
 * A front door (REST over HTTP/1.1, gRPC over HTTP/2; either with tensors
 * in shared memory) parses a request into a job (queue.h: the scan's description, its
 * buffers and views, an absolute deadline, a completion callback and a
 * "has the client gone?" probe) and hands it here. The scheduler owns
 * everything from there to the completion:
 *   - the bounded queue, and refusal when it is full (STATUS_QUEUE_FULL)
 *     or the scheduler is stopping (STATUS_DRAINING);
 *   - the device workers, one engine stream each, and dynamic batching
 *     (compatible small jobs run as one launch);
 *   - the device pool: a cold device (its kernels not built yet) joins
 *     it once the backend's prepare() has built them on a thread of the
 *     scheduler's own, one per cold device, while the workers of that
 *     device run their jobs on the host backend; a device whose build
 *     fails never joins; a device whose launches fail
 *     --device-max-failures times in a row leaves it; the jobs of a
 *     failed launch run again on the host backend when their inputs are
 *     intact; once no device is in the pool or on its way to it, the host
 *     backend runs every job;
 *   - expiry: a job whose deadline passes in the queue, or before its
 *     launch, completes with STATUS_DEADLINE, and so does one whose launch
 *     ended after it;
 *   - cancellation: a waiting job whose probe says its client has gone is
 *     dropped unrun (counted "queued"); a job whose client went while it
 *     ran completes with STATUS_CANCELLED (counted "running");
 *   - drain: sched_stop() refuses new jobs and returns once the workers
 *     have run every job already queued.
 * It knows nothing of HTTP, sockets or protocols, and keeps its own
 * counters (sched_render_metrics).
 *
 * The contract with a front door, and how each door meets it:
 *   - A job is the submitter's memory, embedded in its own record, valid
 *     with its buffers until done. HTTP: the suspended request's `work`.
 *     gRPC: the stream's call record, kept alive by the HTTP/2 session
 *     until done even when the peer resets the stream. Shared memory: the
 *     same, with in/out pointing into the mapped region, which stays mapped
 *     until done (a region is unregistered only after its jobs are done).
 *   - done(j) runs exactly once per accepted job, on a worker or the tick
 *     thread, never on the submitter's thread during sched_submit... except
 *     that a worker may finish the job before sched_submit returns, so a
 *     door that must do something first (HTTP suspends the connection)
 *     submits under its own lock and takes the same lock in done. done
 *     must not block; it hands the result back to the door's own thread
 *     (HTTP: http_resume; gRPC: a uv_async to the session's loop).
 *   - deadline_ns is absolute on the scheduler's clock, chosen by the one
 *     adapter (api/submit.h) for every door: the tightest of the
 *     transport's (X-Timeout-Ms, grpc-timeout), the protocol's ("timeout")
 *     and --timeout-ms.
 *     STATUS_DEADLINE maps to 504 / DEADLINE_EXCEEDED (status.h).
 *   - gone(ctx) is cheap and never blocks. HTTP: one poll(2) of the
 *     connection's socket, which is also the job's watch_fd, so that the
 *     tick asks every waiting HTTP job in one poll(2). gRPC: a flag the
 *     session sets on RST_STREAM or when the connection drops (its
 *     streams share a socket: no watch_fd).
 *   - Small tensors may skip the queue: sched_run_inline() scans on the
 *     caller's thread, counted like a launch of one.
 *
 * Threading: sched_submit() and sched_run_inline() from any thread;
 * sched_tick() from one thread (tallyd's tick thread); sched_start() and sched_stop()
 * from the thread that owns the scheduler; done on workers and the tick
 * thread. Counters are relaxed atomics.
 */
#ifndef TALLY_SCHEDULER_H
#define TALLY_SCHEDULER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "metrics.h"
#include "queue.h"
#include "stats.h"
#include "textbuf.h"
#include "trace.h"

typedef struct sched sched;

/* The most devices, workers and jobs per launch. */
#define SCHED_MAX_DEVICES 16
#define SCHED_MAX_WORKERS 64
#define SCHED_MAX_BATCH TALLYD_MAX_BATCH /* config.h: --max-batch's most */

/* Jobs larger than this run alone: stacking their lines costs two copies,
 * which pays for a launch's overhead only on small tensors (BENCHMARKS.md,
 * bench-serve and bench-engine's batch rows). */
#define SCHED_BATCH_BYTES ((size_t)1 << 20)

/* The device index that names the host backend in a backend's calls. */
#define SCHED_HOST ((unsigned)-1)

/*
 * What runs the jobs: the engine (sched_engine_backend), or a fake in the
 * scheduler's tests. Streams are the backend's; each is used by one device
 * worker at a time.
 */
typedef struct {
    /* Opens a stream on device d (SCHED_HOST: the host backend, opened
     * the first time a worker needs it). */
    eng_err (*stream_open)(void *user, unsigned d, void **stream, char *msg,
                           size_t msglen);
    void (*stream_close)(void *user, void *stream);
    /* Runs jobs[0..n) as one launch (n > 1: compatible packed jobs; n ==
     * 1: any job); the scan's time in *t. */
    eng_err (*run)(void *user, void *stream, job **jobs, size_t n,
                   eng_batch_times *t, char *msg, size_t msglen);
    /* Runs one job on the calling thread (sched_run_inline). */
    eng_err (*run_inline)(void *user, job *j, char *msg, size_t msglen);
    /* Builds device d's kernels, on a thread of the scheduler's own, for a
     * device sched_options.cold names; stops early (with an error) once
     * *cancel is true. Streams of d may be open meanwhile; none runs a job
     * on d until this has returned ENG_E_OK. */
    eng_err (*prepare)(void *user, unsigned d, const atomic_bool *cancel,
                       char *msg, size_t msglen);
    void *user;
} sched_backend;

/* The backend over real engines (backend.c): devices[0..n) (borrowed:
 * they must outlive it), and the host backend, opened on first need, with
 * host_threads threads for each worker's stream on it (0: every core; a
 * worker's share of the cores, as `--device host` has). False when memory
 * runs out. Free with sched_engines_free() once the scheduler that used it
 * is freed. */
bool sched_engines(sched_backend *b, eng_engine *const *devices, unsigned n,
                   unsigned host_threads);
void sched_engines_free(sched_backend *b);

typedef struct {
    unsigned workers; /* at least one per device; worker w on device
                         w % devices */
    unsigned devices; /* how many the backend has, 1..16 */
    const char *const *device_names; /* borrowed; for logs and metrics */
    unsigned queue_depth;            /* --queue-depth */
    unsigned max_batch;              /* --max-batch, 1..SCHED_MAX_BATCH */
    unsigned max_queue_delay_us;
    unsigned device_max_failures; /* 0 counts as 1 */
    unsigned fault_delay_ms;      /* testing: a slow device */
    /* The devices whose kernels are not built: each joins the pool when
     * the backend's prepare() returns; until then its workers run their
     * jobs on the host backend. The others are in the pool from the
     * start. */
    bool cold[SCHED_MAX_DEVICES];
    unsigned fault_build_ms; /* testing: each build starts this late */
    /* The clock deadlines and times are read on; NULL: now_ns(). */
    uint64_t (*clock)(void *user);
    void *clock_user;
    /* Triton's statistics: executions are counted here; may be NULL. */
    model_stats *stats;
    /* Where a device worker runs a batch while its device is in the pool:
     * SCHED_PLACE_DEVICE, always there; SCHED_PLACE_COST, on its device
     * or on the host backend, whichever the cost model expects to finish
     * it sooner (--placement; below). */
    unsigned placement;
} sched_options;

/*
 * Placement by cost (SCHED_PLACE_COST). The scheduler keeps, for each
 * backend (each device, and the host backend) and each launch size class
 * (the launch's input bytes, by powers of two), a moving average of how
 * long launches of that class took there, end to end, as workers saw
 * them: with the contention they met (a GPU's two PCIe copies, host cores
 * shared with the doors' threads). A worker whose device is in the pool
 * runs a batch where the average is lower. A class with too few launches
 * on either backend is measured first (reason "explore"), and after that
 * one launch in SCHED_EXPLORE_EVERY x r (r: how many times slower the
 * backend not chosen is, rounded down; at most SCHED_EXPLORE_MAX) goes to it,
 * so that an average the load has moved is measured again (that launch's
 * time replaces the average; a launch placed by cost moves it an eighth
 * of the way) while exploring costs under 1/SCHED_EXPLORE_EVERY of the
 * class's time however slow the other backend is. So a GPU slower
 * end to end than the idle host cores gets work when those cores are busy
 * enough to be slower, and a device that is faster takes everything.
 * Each placement is counted by backend and reason (tally_placements_total)
 * and named on the job (job.placement) for its compute span.
 */
enum { SCHED_PLACE_DEVICE, SCHED_PLACE_COST };
#define SCHED_EXPLORE_EVERY 64
#define SCHED_EXPLORE_MAX 4096
/* Why a batch ran where it ran (tally_placements_total's reason). */
typedef enum {
    SCHED_WHY_DEVICE,    /* SCHED_PLACE_DEVICE: its worker's device */
    SCHED_WHY_COST,      /* the backend with the lower average */
    SCHED_WHY_EXPLORE,   /* measured: too few launches, or its turn */
    SCHED_WHY_COMPILING, /* the host: its device builds its kernels */
    SCHED_WHY_FALLBACK,  /* the host: no device is left */
    SCHED_WHY_COUNT
} sched_why;
/* The reason's label: "device", "cost", "explore", "compiling",
 * "fallback". */
const char *sched_why_name(sched_why w);

/* The scheduler's counters; read with relaxed loads. */
typedef struct {
    histogram queue, compute;
    atomic_llong running; /* jobs the workers hold */
    atomic_ullong busy_ns[SCHED_MAX_WORKERS];
    atomic_ullong device_jobs[SCHED_MAX_DEVICES],
        device_errors[SCHED_MAX_DEVICES];
    atomic_ullong host_reruns;
    atomic_ullong host_jobs; /* run on the host backend by device workers
                                (a device compiling, or none left) */
    atomic_ullong batches[8], batched_jobs; /* le 1, 2, 4, ..., 64, +Inf */
    atomic_ullong cancelled_queued, cancelled_running;
    atomic_ullong expired; /* jobs that completed with STATUS_DEADLINE */
    /* launches by backend (each device; the host at SCHED_MAX_DEVICES)
     * and reason */
    atomic_ullong placements[SCHED_MAX_DEVICES + 1][SCHED_WHY_COUNT];
} sched_counters;

/* A scheduler with o's settings (copied; the names borrowed) and backend
 * b; NULL when memory runs out. No thread runs yet. */
sched *sched_new(const sched_options *o, const sched_backend *b);

/* Starts the workers, opening a stream each, and a kernel builder for each
 * cold device. Fails with a message when a stream or a thread cannot be
 * had. */
eng_err sched_start(sched *s, char *msg, size_t msglen);

/* Refuses new jobs (STATUS_DRAINING), tells the builds to stop (a build
 * in progress ends with the kernel it is compiling), lets the workers run
 * every job already queued, and joins them all. */
void sched_stop(sched *s);

/* Frees a stopped scheduler; NULL is a no-op. */
void sched_free(sched *s);

/* The scheduler's clock. */
uint64_t sched_now(const sched *s);

/* Collapses j->desc into the batching key and checks it: a status other
 * than STATUS_OK (with j->msg) means the job cannot run. Call before
 * sched_submit() or sched_run_inline(); any thread. */
status_code sched_prepare(job *j);

/* The job's element count, once prepared. */
static inline uint64_t sched_elements(const job *j)
{
    return j->lines.elements;
}

/* What a finished job did, for its request's spans (trace.h), into *w.
 * The links are copied only for a sampled trace: no one reads them
 * otherwise. */
static inline void sched_ran(const job *j, trace_work *w)
{
    w->enqueued_ns = j->enqueued_ns;
    w->started_ns = j->started_ns;
    w->finished_ns = j->finished_ns;
    w->device = j->device;
    w->placement = j->placement;
    w->batch = j->batch;
    w->elements = sched_elements(j);
    w->sequence_is_string = false;
    w->sequence_id[0] = '\0'; /* the adapter's to say */
    if (j->trace != NULL && (j->trace->flags & TRACE_SAMPLED)) {
        w->links.n = j->links.n;
        w->links.dropped = j->links.dropped;
        memcpy(w->links.l, j->links.l, j->links.n * sizeof j->links.l[0]);
    } else {
        w->links.n = w->links.dropped = 0;
    }
}

/* Queues a prepared job. STATUS_OK: accepted, and done will run exactly
 * once (possibly before this returns: see the contract above). Otherwise
 * (STATUS_QUEUE_FULL, STATUS_DRAINING) refused: done never runs. */
status_code sched_submit(sched *s, job *j);

/* Runs a prepared job on the calling thread, at once, with no device
 * hand-off: for tensors so small that a hand-off costs more than the sum.
 * Fills j's status and times; done is not called. */
void sched_run_inline(sched *s, job *j);

/* The tick, which tallyd runs every 5 ms on a thread of its own:
 * completes the queued jobs whose deadline has passed (STATUS_DEADLINE)
 * and drops those whose client has gone (STATUS_CANCELLED). */
void sched_tick(sched *s);

/* Counts a job that ran for a client the front door later found gone
 * (its answer discarded), when the probe did not see it first. */
void sched_count_cancelled(sched *s);

/* Jobs waiting in the queue. */
size_t sched_queue_depth(sched *s);

/* Where a device stands. */
typedef enum {
    SCHED_DEVICE_COMPILING, /* cold: its kernels are being built */
    SCHED_DEVICE_UP,        /* in the pool */
    SCHED_DEVICE_FAILED,    /* its kernels did not build: never joined */
    SCHED_DEVICE_LEFT,      /* left after --device-max-failures failures */
} sched_device_state;

/* The pool's state, for readiness. */
typedef struct {
    unsigned devices;   /* how many there are */
    unsigned up;        /* in the pool */
    unsigned compiling; /* on their way to it */
    bool on_host;       /* none is either: the host backend runs every job */
} sched_pool;

/* Any thread; a snapshot of relaxed loads. */
sched_pool sched_devices(sched *s);

const sched_counters *sched_counters_of(const sched *s);

/* Appends the scheduler's section of /metrics (Prometheus text): queue
 * and compute times, depth, running jobs, batch sizes, cancellations and
 * the devices. Any thread. */
void sched_render_metrics(sched *s, textbuf *o);

#endif
