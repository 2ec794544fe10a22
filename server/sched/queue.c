/*
 * queue.c - the bounded job queue.
 */
#include "queue.h"
#include "clock.h"
#include "peer.h"

void queue_init(job_queue *q, size_t cap)
{
    list_init(&q->jobs);
    q->depth = 0;
    q->cap = cap;
    q->waiting = 0;
    q->closed = false;
    mutex_init(&q->mu);
    uv_cond_init(&q->cv);
}

void queue_destroy(job_queue *q)
{
    uv_cond_destroy(&q->cv);
    mutex_destroy(&q->mu);
}

bool queue_push(job_queue *q, job *j)
{
    mutex_lock(&q->mu);
    bool ok = !q->closed && q->depth < q->cap;
    if (ok) {
        list_push_back(&q->jobs, &j->link);
        q->depth++;
        uv_cond_signal(&q->cv);
    }
    mutex_unlock(&q->mu);
    return ok;
}

/* Jobs one launch could serve: same element type, line length, stride
 * and mode (their outer dimensions would stack). */
static bool compatible(const job *a, const job *b)
{
    return a->iv == NULL && b->iv == NULL && a->lines.dtype == b->lines.dtype
           && a->lines.n == b->lines.n && a->lines.inner == b->lines.inner
           && a->lines.reverse == b->lines.reverse
           && a->lines.exclusive == b->lines.exclusive;
}

/* What take_where() batches with: the head job, and the size limit. */
typedef struct {
    const job *first;
    size_t batch_bytes;
} batch_key;

static job *job_at(list_node *n)
{
    return n != NULL ? container_of(n, job, link) : NULL;
}

static void unlink_job(job_queue *q, job *j)
{
    list_remove(&j->link);
    q->depth--;
}

/* Moves the queued jobs that `take` accepts, in queue order, to out[n..]
 * until out holds `max`; returns the new count. The caller holds the
 * mutex. */
static size_t take_where(job_queue *q, bool (*take)(const job *, const void *),
                         const void *arg, job **out, size_t n, size_t max)
{
    LOCK_HELD(&q->mu);
    for (list_node *at = list_first(&q->jobs), *next; at != NULL && n < max;
         at = next) {
        next = list_next(&q->jobs, at);
        job *j = job_at(at);
        if (take(j, arg)) {
            unlink_job(q, j);
            out[n++] = j;
        }
    }
    return n;
}

static bool take_batchable(const job *j, const void *arg)
{
    const batch_key *k = arg;
    return j->lines.bytes <= k->batch_bytes && compatible(k->first, j);
}

/* How many queued jobs take_batchable() accepts, up to max. */
static size_t count_batchable(const job_queue *q, const batch_key *k,
                              size_t max)
{
    size_t n = 0;
    for (const list_node *at = list_first(&q->jobs); at != NULL && n < max;
         at = list_next(&q->jobs, at))
        n += take_batchable(container_of(at, job, link), k);
    return n;
}

static bool take_expired(const job *j, const void *now)
{
    return j->deadline_ns != 0 && j->deadline_ns <= *(const uint64_t *)now;
}

size_t queue_pop(job_queue *q, job **out, const queue_take *how)
{
    mutex_lock(&q->mu);
    q->waiting++;
    while (list_empty(&q->jobs) && !q->closed)
        mutex_wait(&q->cv, &q->mu);
    q->waiting--;
    size_t n = 0;
    if (!list_empty(&q->jobs) && how->max > 0) {
        job *first = job_at(list_first(&q->jobs));
        unlink_job(q, first);
        out[n++] = first;
        batch_key k = {first, how->batch_bytes};
        if (first->lines.bytes <= how->batch_bytes && how->max > 1) {
            /* a fair share of what could go together now */
            size_t could = 1 + count_batchable(q, &k, how->max - 1);
            size_t share = (could + q->waiting) / (q->waiting + 1);
            n = take_where(q, take_batchable, &k, out, n, share);
            /* company, while nobody else is idle */
            uint64_t until = first->enqueued_ns + how->delay_ns;
            while (n < how->max && how->delay_ns > 0 && q->waiting == 0
                   && !q->closed) {
                uint64_t now = now_ns();
                if (now >= until)
                    break;
                mutex_timedwait(&q->cv, &q->mu, until - now);
                n = take_where(q, take_batchable, &k, out, n, how->max);
            }
        }
        if (!list_empty(&q->jobs) && q->waiting > 0)
            uv_cond_signal(&q->cv); /* the rest, for an idle worker */
    }
    mutex_unlock(&q->mu);
    return n;
}

void queue_push_front(job_queue *q, job **jobs, size_t n)
{
    mutex_lock(&q->mu);
    for (size_t i = n; i-- > 0;) {
        list_push_front(&q->jobs, &jobs[i]->link);
        q->depth++;
    }
    uv_cond_broadcast(&q->cv);
    mutex_unlock(&q->mu);
}

static bool take_gone(const job *j, const void *arg)
{
    (void)arg;
    return j->watch_fd < 0 && j->gone != NULL && j->gone(j->ctx);
}

typedef struct {
    job *const *which;
    size_t n;
} job_set;

static bool take_listed(const job *j, const void *arg)
{
    const job_set *set = arg;
    for (size_t i = 0; i < set->n; i++)
        if (set->which[i] == j)
            return true;
    return false;
}

size_t queue_take_hung_up(job_queue *q, job **jobs, int *fds, bool *gone,
                          size_t max, job **out)
{
    mutex_lock(&q->mu);
    size_t n = 0, k = 0, got = 0;
    for (list_node *at = list_first(&q->jobs); at != NULL && n < max;
         at = list_next(&q->jobs, at)) {
        job *j = job_at(at);
        if (j->watch_fd >= 0) {
            jobs[n] = j;
            fds[n++] = j->watch_fd;
        }
    }
    if (n > 0 && peers_gone(fds, n, gone) > 0) {
        for (size_t i = 0; i < n; i++)
            if (gone[i])
                jobs[k++] = jobs[i];
        job_set set = {jobs, k};
        got = take_where(q, take_listed, &set, out, 0, k);
    }
    mutex_unlock(&q->mu);
    return got;
}

size_t queue_take_gone(job_queue *q, job **out, size_t max)
{
    mutex_lock(&q->mu);
    size_t n = take_where(q, take_gone, NULL, out, 0, max);
    mutex_unlock(&q->mu);
    return n;
}

size_t queue_expire(job_queue *q, uint64_t now, job **out, size_t max)
{
    mutex_lock(&q->mu);
    size_t n = take_where(q, take_expired, &now, out, 0, max);
    mutex_unlock(&q->mu);
    return n;
}

void queue_close(job_queue *q)
{
    mutex_lock(&q->mu);
    q->closed = true;
    uv_cond_broadcast(&q->cv);
    mutex_unlock(&q->mu);
}

size_t queue_depth(job_queue *q)
{
    mutex_lock(&q->mu);
    size_t d = q->depth;
    mutex_unlock(&q->mu);
    return d;
}
