/*
 * queue.h - jobs waiting for a device worker.
 *
 * A bounded FIFO: pushing onto a full queue fails at once (the front door
 * answers that the queue is full) rather than waiting. A worker pops the job
 * at the head together with later jobs that are compatible with it (same
 * dtype, line length, stride and mode: the jobs one kernel launch can serve
 * by stacking their lines) and small enough to batch: a batch. It takes no
 * more than its share while other workers wait for work (no worker holds
 * queued jobs while another is idle), and when none waits it may hold the
 * head job a while for company (--max-queue-delay-us, measured on the
 * monotonic clock from the job's enqueued_ns). Jobs whose deadline passes
 * while they wait are taken out by queue_expire(), and those whose client
 * has gone by queue_take_gone().
 *
 * Threading: every function may be called from any thread; the queue's
 * mutex guards its list.
 */
#ifndef TALLY_QUEUE_H
#define TALLY_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine.h"
#include "list.h"
#include "mutex.h"
#include "status.h"
#include "trace.h"

typedef struct job job;

/*
 * A job: one scan, as a front door hands it to the scheduler (scheduler.h).
 * The memory is the submitter's (it embeds the job in its own record) and
 * must stay valid, with the buffers and views, until done has run.
 */
struct job {
    /* Set by the submitter. */
    eng_scan_desc desc;
    const void *in;
    void *out; /* may equal in */
    /* strided layouts (eng_scan_strided); NULL for packed tensors.
     * Strided jobs never batch. */
    const eng_view *iv, *ov;
    uint64_t deadline_ns; /* absolute, on the scheduler's clock; 0: none */
    /* The completion: called exactly once for every job the scheduler
     * accepted, on a worker or the tick thread, when it has run, failed,
     * expired or been cancelled. The job is the submitter's again inside
     * done, and may be freed there. */
    void (*done)(job *j);
    void *ctx; /* the submitter's, for done and gone */
    /* The "has the client gone?" probe; NULL: never asked. Called on the
     * worker once the job has run (true marks it STATUS_CANCELLED), and,
     * when the job has no watch_fd, on the tick thread while it waits in
     * the queue (true drops it unrun; under the queue's lock: it must not
     * block, nor call into the scheduler). */
    bool (*gone)(void *ctx);
    /* A socket that is the client's alone (HTTP/1.1's connection), or -1.
     * While the job waits, the tick asks every such socket in one poll(2)
     * (queue_take_hung_up) instead of calling gone: a
     * hang-up drops the job unrun. A door whose clients share a socket
     * (gRPC's streams) leaves it -1 and answers through gone. */
    int watch_fd;
    /* The request's trace context (its transport's, valid until done
     * has run), for the links between the spans of requests that share a
     * launch; NULL: none. */
    const trace_ctx *trace;

    /* Set by the scheduler: how it ended, read in done. */
    status_code status;
    char msg[512]; /* why, when status is not STATUS_OK; may be "" */
    uint64_t enqueued_ns, started_ns, finished_ns; /* 0: did not happen */
    unsigned worker;                               /* which worker ran it */
    const char *device; /* what ran it: a device's name (the scheduler's,
                         * valid while it is) or "host"; NULL: unrun */
    unsigned batch; /* how many jobs its launch served */
    const char *placement; /* why it ran there (sched_why_name); NULL:
                            * unrun, or run inline */
    trace_links links; /* when sampled: the batch's other sampled jobs */

    /* The scheduler's own. */
    eng_lines lines; /* desc collapsed: the batching key */
    list_node link;  /* in the queue while queued */
};

typedef struct {
    mutex mu;
    uv_cond_t cv;
    list_node jobs; /* queued, oldest first */
    size_t depth, cap;
    unsigned waiting; /* workers blocked in queue_pop() */
    bool closed;
} job_queue;

/* How a worker takes a batch. */
typedef struct {
    size_t max;         /* jobs at most (--max-batch) */
    size_t batch_bytes; /* a job larger than this is taken alone */
    uint64_t delay_ns;  /* how long the head job may wait for company */
} queue_take;

void queue_init(job_queue *q, size_t cap);
void queue_destroy(job_queue *q);

/* Appends j; false when the queue is full or closed. */
bool queue_push(job_queue *q, job *j);

/* Waits for work and takes a batch into out (at most how->max jobs): the
 * head job, and when it is at most how->batch_bytes, the compatible ones
 * of at most that size behind it, in queue order. With w other workers
 * waiting, it takes ceil(k / (w + 1)) of the k it could and wakes one of
 * them for the rest. With none waiting and room left, it waits up to
 * how->delay_ns from the head job's enqueue time for more. Returns how
 * many, or 0 once the queue is closed and empty. */
size_t queue_pop(job_queue *q, job **out, const queue_take *how);

/* Puts jobs[0..n) back at the head of the queue, in that order, whatever
 * its capacity (they were admitted once): a batch that a failed device
 * could not run, for other workers. */
void queue_push_front(job_queue *q, job **jobs, size_t n);

/* Asks the sockets of up to max queued jobs that have a watch_fd, in
 * queue order, in one poll(2) (peer.h), and takes out those whose client
 * hung up, into out; returns how many. jobs, fds and gone are the
 * caller's scratch, room for max each. All under the queue's lock: a job
 * still queued has its request waiting, so its socket stays open while
 * it is asked. Asked outside the lock, a job taken meanwhile could be
 * answered and its socket closed, or its number given to another
 * socket, by the time the poll ran. */
size_t queue_take_hung_up(job_queue *q, job **jobs, int *fds, bool *gone,
                          size_t max, job **out);

/* Takes out up to max queued jobs without a watch_fd whose gone probe
 * says their client has gone, in queue order (the probes run under the
 * queue's lock, so that no job completes while its probe runs). */
size_t queue_take_gone(job_queue *q, job **out, size_t max);

/* Takes out up to max jobs whose deadline is at or before now. */
size_t queue_expire(job_queue *q, uint64_t now, job **out, size_t max);

/* Wakes every waiting worker; later pops drain what is left, then return
 * 0, and pushes fail. */
void queue_close(job_queue *q);

size_t queue_depth(job_queue *q);

#endif
