/*
 * scheduler.c - the scheduler (scheduler.h): workers that pop batches and run
 * them, the device pool with its builds and failover, expiry and
 * cancellation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "loop_owner.h"
#include "scheduler.h"

/* Launch size classes for the cost model: class k holds launches of
 * [2^k, 2^(k+1)) input bytes (class 0 also 0 and 1). */
#define COST_CLASSES 48
/* A class is measured on a backend this many times before it is judged. */
#define COST_WARM 3

typedef struct {
    sched *s;
    unsigned id;
    unsigned device;  /* its device, an index of the backend's */
    bool on_fallback; /* its stream is the host's: no device is left */
    uv_thread_t thread;
    void *stream;
    void *host; /* for jobs its device failed to run; opened on need */
    bool started;
    loop_owner owner; /* its thread: everything of w's is that thread's */
} worker;

/* A cold device's build, on a thread of its own. */
typedef struct {
    sched *s;
    unsigned device;
    uv_thread_t thread;
    bool started;
} builder;

struct sched {
    sched_options o;
    loop_owner ticker; /* sched_tick()'s caller: the tick thread */
    sched_backend b;
    const char *names[SCHED_MAX_DEVICES];
    job_queue queue;
    worker *workers;
    unsigned nworkers;
    atomic_bool stopping;
    /* the pool: each device's state (sched_device_state), failed launches
     * in a row, and how long a cold device's build took */
    atomic_uint state[SCHED_MAX_DEVICES];
    atomic_uint failures[SCHED_MAX_DEVICES];
    atomic_ullong built_ns[SCHED_MAX_DEVICES];
    atomic_bool said_on_host; /* "no device is left" was logged */
    builder builders[SCHED_MAX_DEVICES];
    atomic_bool cancel_builds; /* set by sched_stop */
    sched_counters c;
    /* placement by cost (scheduler.h): per backend (each device; the host
     * at SCHED_MAX_DEVICES) and launch size class, the moving average of
     * a launch's time (ns, 0: none yet), how many launches it has seen,
     * and the launches placed by cost since exploring's last turn. Relaxed
     * atomics: a lost update between two workers only slows learning. */
    atomic_ullong cost_ns[SCHED_MAX_DEVICES + 1][COST_CLASSES];
    atomic_uint cost_seen[SCHED_MAX_DEVICES + 1][COST_CLASSES];
    atomic_uint cost_turn[SCHED_MAX_DEVICES][COST_CLASSES];
    /* the tick's, for the waiting jobs' sockets: room for every job the
     * queue can hold (its depth, and a batch per worker put back) */
    size_t watch_max;
    job **watch_jobs, **watch_out;
    int *watch_fds;
    bool *watch_gone;
};

static uint64_t real_clock(void *user)
{
    (void)user;
    return now_ns();
}

uint64_t sched_now(const sched *s)
{
    return s->o.clock(s->o.clock_user);
}

static void sched_free_arrays(sched *s)
{
    free(s->watch_jobs);
    free(s->watch_out);
    free(s->watch_fds);
    free(s->watch_gone);
}

sched *sched_new(const sched_options *o, const sched_backend *b)
{
    sched *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->o = *o;
    s->b = *b;
    if (s->o.clock == NULL)
        s->o.clock = real_clock;
    if (s->o.devices < 1)
        s->o.devices = 1;
    if (s->o.devices > SCHED_MAX_DEVICES)
        s->o.devices = SCHED_MAX_DEVICES;
    if (s->o.workers < s->o.devices)
        s->o.workers = s->o.devices;
    if (s->o.workers > SCHED_MAX_WORKERS)
        s->o.workers = SCHED_MAX_WORKERS;
    if (s->o.max_batch < 1)
        s->o.max_batch = 1;
    if (s->o.max_batch > SCHED_MAX_BATCH)
        s->o.max_batch = SCHED_MAX_BATCH;
    for (unsigned d = 0; d < s->o.devices; d++) {
        s->names[d] = o->device_names != NULL && o->device_names[d] != NULL
                          ? o->device_names[d]
                          : "device";
        /* cold only where the backend can build */
        s->o.cold[d] = s->o.cold[d] && b->prepare != NULL;
        atomic_init(&s->state[d], s->o.cold[d] ? SCHED_DEVICE_COMPILING
                                               : SCHED_DEVICE_UP);
    }
    s->o.device_names = s->names;
    s->watch_max =
        (size_t)o->queue_depth + (size_t)s->o.workers * s->o.max_batch;
    s->watch_jobs = calloc(s->watch_max, sizeof *s->watch_jobs);
    s->watch_out = calloc(s->watch_max, sizeof *s->watch_out);
    s->watch_fds = calloc(s->watch_max, sizeof *s->watch_fds);
    s->watch_gone = calloc(s->watch_max, sizeof *s->watch_gone);
    if (s->watch_jobs == NULL || s->watch_out == NULL || s->watch_fds == NULL
        || s->watch_gone == NULL) {
        sched_free_arrays(s);
        free(s);
        return NULL;
    }
    queue_init(&s->queue, o->queue_depth);
    return s;
}

/* ------------------------------------------------------------------------
 * Counting and completing.
 */
static void count_batch(sched_counters *c, size_t n)
{
    size_t b = 0;
    while (b < 7 && n > ((size_t)1 << b))
        b++;
    counter_add(&c->batches[b], 1);
    counter_add(&c->batched_jobs, n);
}

/* Every accepted job ends here, once. */
static void complete(sched *s, job *j)
{
    if (j->started_ns != 0) {
        metrics_observe(&s->c.queue, j->started_ns - j->enqueued_ns);
        metrics_observe(&s->c.compute, j->finished_ns - j->started_ns);
    } else {
        metrics_observe(&s->c.queue, j->finished_ns - j->enqueued_ns);
    }
    if (j->status == STATUS_DEADLINE)
        counter_add(&s->c.expired, 1);
    j->done(j);
}

static void set_msg(job *j, const char *msg)
{
    snprintf(j->msg, sizeof j->msg, "%s", msg != NULL ? msg : "");
}

static bool sampled(const job *j)
{
    return j->trace != NULL && (j->trace->flags & TRACE_SAMPLED);
}

/* Links each sampled job of a launch to the other sampled ones' request
 * spans, for their compute spans. O(n^2) in the batch, only when more
 * than one job of it is sampled. */
static void link_batch(job **jobs, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < 2; i++)
        k += sampled(jobs[i]);
    if (k < 2)
        return;
    for (size_t i = 0; i < n; i++) {
        if (!sampled(jobs[i]))
            continue;
        trace_links *l = &jobs[i]->links;
        for (size_t o = 0; o < n; o++) {
            if (o == i || !sampled(jobs[o]))
                continue;
            if (l->n == TRACE_MAX_LINKS) {
                l->dropped++;
                continue;
            }
            memcpy(l->l[l->n].trace_id, jobs[o]->trace->trace_id, 16);
            memcpy(l->l[l->n].span_id, jobs[o]->trace->span_id, 8);
            l->n++;
        }
    }
}

/* Completes a job that ran (on the host backend, or on w's device) from
 * start to end with err (message msg): late is a deadline miss, and a
 * client that left meanwhile is a cancellation. */
static void ran(worker *w, job *j, bool on_host, uint64_t start, uint64_t end,
                size_t batch, eng_err err, const char *msg)
{
    sched *s = w->s;
    j->worker = w->id;
    j->device = on_host ? "host" : s->names[w->device];
    j->batch = (unsigned)batch;
    j->started_ns = start;
    j->finished_ns = end;
    j->status = status_from_eng(err);
    set_msg(j, err != ENG_E_OK ? msg : NULL);
    if (j->status == STATUS_OK && j->deadline_ns != 0 && end > j->deadline_ns)
        j->status = STATUS_DEADLINE;
    if (j->gone != NULL && j->gone(j->ctx)) {
        j->status = STATUS_CANCELLED;
        counter_add(&s->c.cancelled_running, 1);
    }
    complete(s, j);
}

/* ------------------------------------------------------------------------
 * The device pool.
 */

/* True for the failures that mean the device itself is broken. */
static bool device_failure(eng_err e)
{
    return e == ENG_E_DEVICE || e == ENG_E_NO_DEVICE || e == ENG_E_LAUNCH;
}

/* w's stream on the host backend; NULL with a message when even that
 * cannot be had. */
static void *host_stream(worker *w, char *msg, size_t msglen)
{
    OWNER_ASSERT(&w->owner);
    if (w->host == NULL
        && w->s->b.stream_open(w->s->b.user, SCHED_HOST, &w->host, msg, msglen)
               != ENG_E_OK)
        w->host = NULL;
    return w->host;
}

static unsigned device_state(sched *s, unsigned d)
{
    return atomic_load(&s->state[d]);
}

/* Whether a device is in the pool or on its way to it. */
static bool any_device_left(sched *s)
{
    for (unsigned d = 0; d < s->o.devices; d++) {
        unsigned st = device_state(s, d);
        if (st == SCHED_DEVICE_UP || st == SCHED_DEVICE_COMPILING)
            return true;
    }
    return false;
}

/* Logs, once, that the host backend runs every job from now on. */
static void say_on_host(sched *s)
{
    if (!atomic_exchange(&s->said_on_host, true))
        log_msg("sched", "error",
                "no device is left in the pool; the host backend runs "
                "every job from now on");
}

/* Moves w onto the host backend for good: no device is in the pool or on
 * its way to it. False when the host backend cannot start. */
static bool use_fallback(worker *w)
{
    OWNER_ASSERT(&w->owner);
    sched *s = w->s;
    char why[256];
    if (host_stream(w, why, sizeof why) == NULL) {
        log_msg("sched", "error",
                "every device has failed and the host backend cannot "
                "start: %s",
                why);
        return false;
    }
    s->b.stream_close(s->b.user, w->stream);
    w->stream = w->host;
    w->host = NULL;
    w->on_fallback = true;
    say_on_host(s);
    return true;
}

/* w's device failed to run a batch (err, msg). The device leaves the pool
 * after --device-max-failures failures in a row, logged and counted. The
 * jobs are run again on the host backend when their inputs are intact (a
 * launch the device refused ran nothing; a batch is scanned in a copy; a
 * tensor out of place keeps its input); an in-place tensor that a device
 * may have half-written fails, with the device's error. When the device
 * has left and no device is left, w goes on with the host backend.
 * Returns whether w goes on. */
static bool device_failed(worker *w, job **jobs, size_t live, eng_err err,
                          const char *msg, uint64_t start)
{
    OWNER_ASSERT(&w->owner);
    sched *s = w->s;
    unsigned d = w->device;
    counter_add(&s->c.device_errors[d], 1);
    unsigned most = s->o.device_max_failures ? s->o.device_max_failures : 1;
    unsigned streak = atomic_fetch_add(&s->failures[d], 1) + 1;
    unsigned was = SCHED_DEVICE_UP;
    if (streak >= most
        && atomic_compare_exchange_strong(&s->state[d], &was,
                                          SCHED_DEVICE_LEFT)) {
        log_msg("sched", "error",
                "device %s failed %u launches in a row (the last: %s: %s); "
                "it is taken out of the pool",
                s->names[d], streak, eng_err_name(err), msg);
    } else if (streak == 1) {
        log_msg("sched", "warn",
                "device %s failed a launch (%s: %s); its jobs run on the host "
                "backend",
                s->names[d], eng_err_name(err), msg);
    }

    bool intact =
        err == ENG_E_LAUNCH || live > 1 || jobs[0]->in != jobs[0]->out;
    char why[256];
    void *host = intact ? host_stream(w, why, sizeof why) : NULL;
    if (host != NULL) {
        eng_batch_times t = {0};
        uint64_t again = sched_now(s);
        eng_err e = s->b.run(s->b.user, host, jobs, live, &t, why, sizeof why);
        counter_add(&s->c.host_reruns, live);
        if (e == ENG_E_OK && s->o.stats != NULL)
            stats_execution(s->o.stats, (unsigned)live, t.gather_ns, t.scan_ns,
                            t.scatter_ns);
        uint64_t end = sched_now(s);
        link_batch(jobs, live);
        for (size_t i = 0; i < live; i++)
            ran(w, jobs[i], true, again, end, live, e, why);
    } else {
        uint64_t end = sched_now(s);
        link_batch(jobs, live);
        for (size_t i = 0; i < live; i++)
            ran(w, jobs[i], false, start, end, live, err, msg);
    }

    if (device_state(s, d) == SCHED_DEVICE_UP)
        return true;
    if (any_device_left(s))
        return false; /* this worker stops; the others take the jobs */
    return use_fallback(w);
}

/* ------------------------------------------------------------------------
 * The builds: a cold device joins the pool when its kernels are built.
 */
static void builder_main(void *arg)
{
    builder *b = arg;
    sched *s = b->s;
    unsigned d = b->device;
    /* testing (--fault-build-ms): a slow build, cut short by a drain */
    for (unsigned ms = 0; ms < s->o.fault_build_ms; ms += 10) {
        if (atomic_load(&s->cancel_builds))
            break;
        uv_sleep(10);
    }
    char msg[256] = "";
    uint64_t start = now_ns();
    eng_err err = atomic_load(&s->cancel_builds)
                      ? ENG_E_DEVICE
                      : s->b.prepare(s->b.user, d, &s->cancel_builds, msg,
                                     sizeof msg);
    uint64_t took = now_ns() - start;
    if (atomic_load(&s->cancel_builds)) {
        log_msg("sched", "info",
                "device %s: its build stopped for the drain; it never "
                "joined the pool",
                s->names[d]);
        return;
    }
    if (err != ENG_E_OK) {
        atomic_store(&s->state[d], SCHED_DEVICE_FAILED);
        log_msg("sched", "error",
                "device %s stays out of the pool: its kernels did not build "
                "(%s: %s); the host backend runs its jobs",
                s->names[d], eng_err_name(err), msg);
        if (!any_device_left(s))
            say_on_host(s);
        return;
    }
    atomic_store(&s->built_ns[d], took);
    atomic_store(&s->state[d], SCHED_DEVICE_UP);
    log_msg("sched", "info",
            "device %s joined the pool: its kernels were built in %.1f s",
            s->names[d], (double)took * 1e-9);
}

/* ------------------------------------------------------------------------
 * Placement by cost (scheduler.h).
 */
const char *sched_why_name(sched_why w)
{
    static const char *const names[] = {"device", "cost", "explore",
                                        "compiling", "fallback"};
    return (unsigned)w < SCHED_WHY_COUNT ? names[w] : "?";
}

static unsigned cost_class(size_t bytes)
{
    unsigned k = 0;
    while (k + 1 < COST_CLASSES && bytes >> (k + 1) != 0)
        k++;
    return k;
}

/* A launch of class k took ns on backend b (a device, or SCHED_MAX_DEVICES
 * for the host). The average moves an eighth of the way for a launch
 * placed by cost, which comes often; a launch that explored replaces it:
 * that backend's average may be old, and the load since have moved it
 * (if the new time is a fluke, the launches it draws there correct it). */
static void cost_learn(sched *s, unsigned b, unsigned k, uint64_t ns,
                       bool explored)
{
    if (ns == 0)
        ns = 1; /* 0 means "none yet" */
    unsigned seen = atomic_fetch_add_explicit(&s->cost_seen[b][k], 1,
                                              memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&s->cost_ns[b][k], memory_order_relaxed);
    /* the first launches set it: the first of all pays one-off costs
     * (a stream's buffers, a page-in) that would linger in an average */
    uint64_t v = seen < 2 || old == 0 || explored ? ns : old - old / 8 + ns / 8;
    atomic_store_explicit(&s->cost_ns[b][k], v, memory_order_relaxed);
}

/* Where worker w (its device in the pool) runs a launch of `bytes`: true
 * for the host backend, with the reason in *why. */
static bool place_on_host(worker *w, size_t bytes, sched_why *why)
{
    OWNER_ASSERT(&w->owner);
    sched *s = w->s;
    if (s->o.placement != SCHED_PLACE_COST) {
        *why = SCHED_WHY_DEVICE;
        return false;
    }
    unsigned d = w->device, k = cost_class(bytes);
    unsigned dev_seen = atomic_load_explicit(&s->cost_seen[d][k],
                                             memory_order_relaxed),
             host_seen = atomic_load_explicit(
                 &s->cost_seen[SCHED_MAX_DEVICES][k], memory_order_relaxed);
    if (dev_seen < COST_WARM || host_seen < COST_WARM) {
        *why = SCHED_WHY_EXPLORE;
        return host_seen < dev_seen;
    }
    uint64_t dev = atomic_load_explicit(&s->cost_ns[d][k], memory_order_relaxed),
             host = atomic_load_explicit(&s->cost_ns[SCHED_MAX_DEVICES][k],
                                         memory_order_relaxed);
    bool host_better = host < dev;
    /* exploring's turn: every SCHED_EXPLORE_EVERY launches, times how
     * many times slower the other backend is, so that what exploring
     * costs stays under 1/SCHED_EXPLORE_EVERY of the class's time however
     * slow the other is (without it, a much slower GPU explored one launch
     * in 64 cost the class a sizeable share). The counter restarts at each turn;
     * two workers that both see it due explore twice, which is harmless. */
    uint64_t best = host_better ? host : dev, other = host_better ? dev : host;
    if (best == 0) /* another worker's first time not yet seen here */
        best = 1;
    uint64_t r = other / best; /* at least 1 */
    uint64_t every = r < SCHED_EXPLORE_MAX / SCHED_EXPLORE_EVERY
                         ? SCHED_EXPLORE_EVERY * r
                         : SCHED_EXPLORE_MAX;
    unsigned turn = atomic_fetch_add_explicit(&s->cost_turn[d][k], 1,
                                              memory_order_relaxed) + 1;
    if (turn >= every) {
        atomic_store_explicit(&s->cost_turn[d][k], 0, memory_order_relaxed);
        *why = SCHED_WHY_EXPLORE;
        return !host_better;
    }
    *why = SCHED_WHY_COST;
    return host_better;
}

/* ------------------------------------------------------------------------
 * The workers.
 */

/* A worker runs a batch: jobs whose deadline passed while they waited are
 * dropped; the rest run as one launch, and are completed. A device failure
 * goes to device_failed. Returns whether the worker goes on. */
static bool run_batch(worker *w, job **jobs, size_t n)
{
    OWNER_ASSERT(&w->owner);
    sched *s = w->s;
    unsigned st = w->on_fallback ? SCHED_DEVICE_UP : device_state(s, w->device);
    if (st == SCHED_DEVICE_FAILED || st == SCHED_DEVICE_LEFT) {
        if (any_device_left(s) || !use_fallback(w)) {
            queue_push_front(&s->queue, jobs, n); /* for a device left */
            return false;
        }
    }
    /* its device compiling: the host backend runs the jobs meanwhile */
    bool on_host = w->on_fallback || st == SCHED_DEVICE_COMPILING;
    sched_why why_here = w->on_fallback ? SCHED_WHY_FALLBACK
                         : on_host      ? SCHED_WHY_COMPILING
                                        : SCHED_WHY_DEVICE;
    void *stream = w->stream;
    char why[256];
    if (on_host && !w->on_fallback
        && (stream = host_stream(w, why, sizeof why)) == NULL) {
        uint64_t now = sched_now(s);
        for (size_t i = 0; i < n; i++)
            ran(w, jobs[i], true, now, now, n, ENG_E_NOMEM, why);
        return true;
    }
    if (s->o.fault_delay_ms > 0) /* --fault-delay-ms: a slow device */
        uv_sleep(s->o.fault_delay_ms);
    uint64_t start = sched_now(s);
    size_t live = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        job *j = jobs[i];
        if (j->deadline_ns != 0 && start >= j->deadline_ns) {
            j->worker = w->id;
            j->status = STATUS_DEADLINE;
            j->msg[0] = '\0';
            j->finished_ns = start;
            complete(s, j);
        } else {
            jobs[live++] = j;
            bytes += j->lines.bytes;
        }
    }
    if (live == 0)
        return true;
    /* its device in the pool: there, or on the host if that is cheaper
     * (a host stream that cannot be had leaves it on the device) */
    void *host;
    if (!on_host && place_on_host(w, bytes, &why_here)
        && (host = host_stream(w, why, sizeof why)) != NULL) {
        on_host = true;
        stream = host;
    }
    unsigned backend = on_host ? SCHED_MAX_DEVICES : w->device;
    counter_add(&s->c.placements[backend][why_here], live);
    eng_batch_times t = {0};
    char msg[256];
    msg[0] = '\0';
    eng_err err = s->b.run(s->b.user, stream, jobs, live, &t, msg, sizeof msg);
    uint64_t end = sched_now(s);
    counter_add(&s->c.busy_ns[w->id], end - start);
    if (err == ENG_E_OK) /* only where the worker could have run it */
        if (why_here == SCHED_WHY_COST || why_here == SCHED_WHY_EXPLORE)
            cost_learn(s, backend, cost_class(bytes), end - start,
                       why_here == SCHED_WHY_EXPLORE);
    for (size_t i = 0; i < live; i++)
        jobs[i]->placement = sched_why_name(why_here);
    if (!on_host && device_failure(err))
        return device_failed(w, jobs, live, err, msg, start);
    count_batch(&s->c, live);
    if (err == ENG_E_OK) {
        if (s->o.stats != NULL)
            stats_execution(s->o.stats, (unsigned)live, t.gather_ns, t.scan_ns,
                            t.scatter_ns);
        if (on_host) {
            counter_add(&s->c.host_jobs, live);
        } else {
            atomic_store(&s->failures[w->device], 0);
            counter_add(&s->c.device_jobs[w->device], live);
        }
    }
    link_batch(jobs, live);
    for (size_t i = 0; i < live; i++)
        ran(w, jobs[i], on_host, start, end, live, err, msg);
    return true;
}

static void worker_main(void *arg)
{
    worker *w = arg;
    loop_owner_set(&w->owner);
    sched *s = w->s;
    job *batch[SCHED_MAX_BATCH];
    queue_take how = {
        .max = s->o.max_batch,
        .batch_bytes = SCHED_BATCH_BYTES,
        .delay_ns = (uint64_t)s->o.max_queue_delay_us * 1000u,
    };
    for (;;) {
        size_t n = queue_pop(&s->queue, batch, &how);
        if (n == 0)
            return;
        atomic_fetch_add(&s->c.running, (long long)n);
        bool more = run_batch(w, batch, n);
        atomic_fetch_sub(&s->c.running, (long long)n);
        if (!more)
            return;
    }
}

eng_err sched_start(sched *s, char *msg, size_t msglen)
{
    s->workers = calloc(s->o.workers, sizeof *s->workers);
    if (s->workers == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    s->nworkers = s->o.workers;
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->id = i;
        w->device = i % s->o.devices;
        eng_err e =
            s->b.stream_open(s->b.user, w->device, &w->stream, msg, msglen);
        if (e != ENG_E_OK)
            return e;
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (uv_thread_create(&w->thread, worker_main, w) != 0)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "cannot start worker thread %u", i);
        w->started = true;
    }
    for (unsigned d = 0; d < s->o.devices; d++) {
        builder *b = &s->builders[d];
        if (!s->o.cold[d])
            continue;
        b->s = s;
        b->device = d;
        if (uv_thread_create(&b->thread, builder_main, b) != 0)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "cannot start the build thread of device %s",
                            s->names[d]);
        b->started = true;
    }
    return ENG_E_OK;
}

void sched_stop(sched *s)
{
    atomic_store(&s->stopping, true);
    atomic_store(&s->cancel_builds, true);
    queue_close(&s->queue);
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (w->started)
            uv_thread_join(&w->thread);
        w->started = false;
        if (w->stream != NULL)
            s->b.stream_close(s->b.user, w->stream);
        if (w->host != NULL)
            s->b.stream_close(s->b.user, w->host);
        w->stream = w->host = NULL;
    }
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
    for (unsigned d = 0; d < s->o.devices; d++) {
        builder *b = &s->builders[d];
        if (b->started)
            uv_thread_join(&b->thread);
        b->started = false;
    }
}

void sched_free(sched *s)
{
    if (s == NULL)
        return;
    queue_destroy(&s->queue);
    sched_free_arrays(s);
    free(s);
}

/* ------------------------------------------------------------------------
 * Jobs in.
 */
status_code sched_prepare(job *j)
{
    j->status = STATUS_OK;
    j->msg[0] = '\0';
    j->enqueued_ns = j->started_ns = j->finished_ns = 0;
    j->batch = 0;
    j->device = NULL;
    j->links.n = j->links.dropped = 0;
    j->link = (list_node){NULL, NULL};
    eng_err e = eng_lines_from_desc(&j->desc, &j->lines, j->msg, sizeof j->msg);
    if (e != ENG_E_OK)
        j->status = status_from_eng(e);
    return j->status;
}

status_code sched_submit(sched *s, job *j)
{
    j->enqueued_ns = sched_now(s);
    if (queue_push(&s->queue, j))
        return STATUS_OK;
    return atomic_load(&s->stopping) ? STATUS_DRAINING : STATUS_QUEUE_FULL;
}

void sched_run_inline(sched *s, job *j)
{
    j->enqueued_ns = j->started_ns = sched_now(s);
    eng_err e = s->b.run_inline(s->b.user, j, j->msg, sizeof j->msg);
    j->finished_ns = sched_now(s);
    j->batch = 1;
    j->device = "host (inline)";
    j->status = status_from_eng(e);
    if (e == ENG_E_OK)
        j->msg[0] = '\0';
    metrics_observe(&s->c.queue, 0);
    metrics_observe(&s->c.compute, j->finished_ns - j->started_ns);
    count_batch(&s->c, 1);
    if (e == ENG_E_OK && s->o.stats != NULL)
        stats_execution(s->o.stats, 1, 0, j->finished_ns - j->started_ns, 0);
}

/* ------------------------------------------------------------------------
 * The tick.
 */
#define TICK_BATCH 256

/* A waiting job whose client has gone: dropped unrun. */
static void cancel_queued(sched *s, job *j)
{
    counter_add(&s->c.cancelled_queued, 1);
    j->status = STATUS_CANCELLED;
    j->msg[0] = '\0';
    j->finished_ns = sched_now(s);
    complete(s, j);
}

void sched_tick(sched *s)
{
    OWNER_CLAIM(&s->ticker);
    job *out[TICK_BATCH];
    size_t n;
    do {
        uint64_t now = sched_now(s);
        n = queue_expire(&s->queue, now, out, TICK_BATCH);
        for (size_t i = 0; i < n; i++) {
            out[i]->status = STATUS_DEADLINE;
            out[i]->msg[0] = '\0';
            out[i]->finished_ns = now;
            complete(s, out[i]);
        }
    } while (n == TICK_BATCH);
    /* every waiting job is asked, however many wait: those with a socket
     * of their own in one poll(2) for all (one per job cost several times
     * as much: BENCHMARKS.md, make bench-sched), the others through their
     * probe */
    n = queue_take_hung_up(&s->queue, s->watch_jobs, s->watch_fds,
                           s->watch_gone, s->watch_max, s->watch_out);
    for (size_t i = 0; i < n; i++)
        cancel_queued(s, s->watch_out[i]);
    do {
        n = queue_take_gone(&s->queue, out, TICK_BATCH);
        for (size_t i = 0; i < n; i++)
            cancel_queued(s, out[i]);
    } while (n == TICK_BATCH);
}

void sched_count_cancelled(sched *s)
{
    counter_add(&s->c.cancelled_running, 1);
}

/* ------------------------------------------------------------------------
 * State and counters.
 */
size_t sched_queue_depth(sched *s)
{
    return queue_depth(&s->queue);
}

sched_pool sched_devices(sched *s)
{
    sched_pool p = {.devices = s->o.devices};
    for (unsigned d = 0; d < s->o.devices; d++) {
        unsigned st = device_state(s, d);
        p.up += st == SCHED_DEVICE_UP;
        p.compiling += st == SCHED_DEVICE_COMPILING;
    }
    p.on_host = p.up == 0 && p.compiling == 0;
    return p;
}

const sched_counters *sched_counters_of(const sched *s)
{
    return &s->c;
}

/* The queue's, the launches' and the cancellations' metrics. */
static void render_jobs(sched *s, textbuf *o)
{
    sched_counters *c = &s->c;
    metrics_family(o, "tally_queue_duration_seconds", "histogram",
                   "Time jobs waited for a worker.");
    metrics_put_histogram(o, "tally_queue_duration_seconds", "", &c->queue);
    metrics_family(o, "tally_compute_duration_seconds", "histogram",
                   "Time a worker spent on a job (data movement and kernel).");
    metrics_put_histogram(o, "tally_compute_duration_seconds", "", &c->compute);
    metrics_one(o, "tally_queue_depth", "gauge", "Jobs waiting for a worker.",
                "%zu", sched_queue_depth(s));
    metrics_one(o, "tally_running_jobs", "gauge",
                "Jobs device workers hold: taken from the queue, not yet "
                "finished.",
                "%lld", (long long)atomic_load(&c->running));
    metrics_family(o, "tally_batch_size", "histogram",
                   "Requests served by one launch (dynamic batching; inline "
                   "sums count as 1).");
    unsigned long long cum = 0, launches = 0;
    for (size_t b = 0; b < 8; b++)
        launches += counter_get(&c->batches[b]);
    for (size_t b = 0; b < 8; b++) {
        cum += counter_get(&c->batches[b]);
        if (b < 7)
            textbuf_put(o, "tally_batch_size_bucket{le=\"%u\"} %llu\n", 1u << b,
                        cum);
        else
            textbuf_put(o, "tally_batch_size_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    textbuf_put(o, "tally_batch_size_sum %llu\ntally_batch_size_count %llu\n",
                counter_get(&c->batched_jobs), launches);
    metrics_family(o, "tally_cancelled_total", "counter",
                   "Requests whose client closed the connection while their "
                   "job waited (dropped unrun) or ran (answer discarded).");
    textbuf_put(o,
                "tally_cancelled_total{when=\"queued\"} %llu\n"
                "tally_cancelled_total{when=\"running\"} %llu\n",
                counter_get(&c->cancelled_queued),
                counter_get(&c->cancelled_running));
}

/* The devices' metrics, and the placements' (names: the devices'
 * escaped). */
static void render_devices(sched *s, textbuf *o,
                           char names[][512])
{
    sched_counters *c = &s->c;
    metrics_family(o, "tally_device_busy_seconds_total", "counter",
                   "Time each device worker spent computing.");
    for (unsigned w = 0; w < s->o.workers; w++)
        textbuf_put(
            o,
            "tally_device_busy_seconds_total{worker=\"%u\",device=\"%s\"} "
            "%.9f\n",
            w, names[w % s->o.devices],
            (double)counter_get(&c->busy_ns[w]) * 1e-9);
    metrics_family(o, "tally_device_jobs_total", "counter",
                   "Jobs each device ran.");
    for (unsigned d = 0; d < s->o.devices; d++)
        textbuf_put(o, "tally_device_jobs_total{device=\"%s\"} %llu\n",
                    names[d], counter_get(&c->device_jobs[d]));
    metrics_family(o, "tally_device_errors_total", "counter",
                   "Launches that failed on each device.");
    for (unsigned d = 0; d < s->o.devices; d++)
        textbuf_put(o, "tally_device_errors_total{device=\"%s\"} %llu\n",
                    names[d], counter_get(&c->device_errors[d]));
    metrics_family(o, "tally_device_up", "gauge",
                   "Whether each device is in the pool (0 while its kernels "
                   "build, when they did not, and once --device-max-failures "
                   "launches in a row failed).");
    for (unsigned d = 0; d < s->o.devices; d++)
        textbuf_put(o, "tally_device_up{device=\"%s\"} %d\n", names[d],
                    device_state(s, d) == SCHED_DEVICE_UP ? 1 : 0);
    /* indexed by sched_device_state */
    static const char *const states[] = {"compiling", "up", "failed", "left"};
    metrics_family(o, "tally_device_state", "gauge",
                   "Where each device stands: compiling (its kernels build in "
                   "the background), up (in the pool), failed (its kernels "
                   "did not build), left (its launches failed).");
    for (unsigned d = 0; d < s->o.devices; d++)
        for (unsigned k = 0; k < 4; k++)
            textbuf_put(o,
                        "tally_device_state{device=\"%s\",state=\"%s\"} %d\n",
                        names[d], states[k], device_state(s, d) == k ? 1 : 0);
    metrics_family(o, "tally_device_build_seconds", "gauge",
                   "How long each device took to build its kernels in the "
                   "background before it joined the pool (0: built before "
                   "the server listened, or not yet).");
    for (unsigned d = 0; d < s->o.devices; d++)
        textbuf_put(o, "tally_device_build_seconds{device=\"%s\"} %.3f\n",
                    names[d], (double)atomic_load(&s->built_ns[d]) * 1e-9);
    metrics_one(o, "tally_host_reruns_total", "counter",
                "Jobs a device failed to run (its launch refused) that the "
                "host backend ran instead.",
                "%llu", counter_get(&c->host_reruns));
    metrics_one(o, "tally_host_jobs_total", "counter",
                "Jobs device workers ran on the host backend: while their "
                "device built its kernels, once no device was left, or where "
                "the host was cheaper (tally_placements_total).",
                "%llu", counter_get(&c->host_jobs));
    metrics_one(o, "tally_host_fallback", "gauge",
                "Whether no device is in the pool or on its way to it, and "
                "the host backend runs every job.",
                "%d", sched_devices(s).on_host ? 1 : 0);
}

/* Where the device workers ran their jobs, and why. */
static void render_placements(sched *s, textbuf *o, char names[][512])
{
    sched_counters *c = &s->c;
    metrics_family(o, "tally_placements_total", "counter",
                   "Jobs device workers ran, by backend and why there: device "
                   "(--placement=device), cost (the lower average time for "
                   "launches of that size), explore (measuring), compiling "
                   "(the host, while the device built its kernels), fallback "
                   "(the host, no device left).");
    static const sched_why on_device[] = {SCHED_WHY_DEVICE, SCHED_WHY_COST,
                                          SCHED_WHY_EXPLORE};
    static const sched_why on_host[] = {SCHED_WHY_COST, SCHED_WHY_EXPLORE,
                                        SCHED_WHY_COMPILING,
                                        SCHED_WHY_FALLBACK};
    for (unsigned d = 0; d < s->o.devices; d++)
        for (size_t k = 0; k < sizeof on_device / sizeof on_device[0]; k++)
            textbuf_put(o,
                        "tally_placements_total{backend=\"%s\",reason=\"%s\"} "
                        "%llu\n",
                        names[d], sched_why_name(on_device[k]),
                        counter_get(&c->placements[d][on_device[k]]));
    for (size_t k = 0; k < sizeof on_host / sizeof on_host[0]; k++)
        textbuf_put(o,
                    "tally_placements_total{backend=\"host\",reason=\"%s\"} "
                    "%llu\n",
                    sched_why_name(on_host[k]),
                    counter_get(&c->placements[SCHED_MAX_DEVICES][on_host[k]]));
}

void sched_render_metrics(sched *s, textbuf *o)
{
    char names[SCHED_MAX_DEVICES][512];
    for (unsigned d = 0; d < s->o.devices; d++)
        metrics_escape_label(s->names[d], names[d], sizeof names[d]);
    render_jobs(s, o);
    render_devices(s, o, names);
    render_placements(s, o, names);
}
