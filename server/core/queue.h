/*
 * queue.h - jobs waiting for a device worker.
 *
 * A bounded FIFO: pushing onto a full queue fails at once (the HTTP layer
 * answers 503 with Retry-After) rather than waiting. A worker pops the job
 * at the head together with later jobs that are compatible with it (same
 * dtype, line length, stride and mode: the jobs one kernel launch can serve
 * by stacking their lines) and small enough to batch: a batch. It takes no
 * more than its share while other workers wait for work (no worker holds
 * queued jobs while another is idle), and when none waits it may hold the
 * head job a while for company (--max-queue-delay-us). Jobs whose
 * deadline passes while they wait are taken out by queue_expire().
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

typedef struct job job;

/* Called exactly once per queued job, when it has run, failed or expired;
 * on a worker thread or the loop thread. */
typedef void (*job_done_fn)(job *j);

struct job {
    eng_scan_desc desc;
    eng_lines lines; /* desc collapsed: the batching key */
    const void *in;
    void *out; /* may equal in */
    /* strided layouts (eng_scan_strided), owned by the submitter and valid
     * until done; NULL for packed tensors. Strided jobs never batch. */
    const eng_view *iv, *ov;
    uint64_t deadline_ns; /* monotonic; 0 for none */
    uint64_t enqueued_ns, started_ns, finished_ns;
    eng_err err;
    char msg[256];
    unsigned worker; /* which worker ran it */
    int client_fd;   /* the submitter's socket, for queue_snapshot(); -1 */
    job_done_fn done;
    void *user;
    job *next;
};

typedef struct {
    uv_mutex_t mu;
    uv_cond_t cv;
    job *head, *tail;
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

/* Copies up to max queued jobs and their client_fd, in queue order, so
 * that their sockets can be checked without the queue's lock; the job
 * pointers are only to be compared (queue_remove), never followed: the
 * jobs may run and be freed meanwhile. Returns how many. */
size_t queue_snapshot(job_queue *q, job **jobs, int *fds, size_t max);

/* Takes out those of which[0..n) that are still queued, into out (room
 * for n); returns how many. */
size_t queue_remove(job_queue *q, job *const *which, size_t n, job **out);

/* Takes out up to max jobs whose deadline is at or before now. */
size_t queue_expire(job_queue *q, uint64_t now, job **out, size_t max);

/* Wakes every waiting worker; later pops drain what is left, then return
 * 0, and pushes fail. */
void queue_close(job_queue *q);

size_t queue_depth(job_queue *q);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);

#endif
