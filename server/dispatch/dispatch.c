/*
 * dispatch.c - the one owner of a job's life: inline or queued, deadline,
 * refusal, running, expiry and completion (see dispatch.h).
 *
 * A queued job lives in a `pending` record attached to its request as the
 * request's `work`, so it is freed with the request, never before: the
 * request holds a reference for the job (taken by http_suspend) until the
 * job completes through on_job_done().
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "log.h"
#include "native.h"
#include "reply.h"
#include "worker.h"

typedef struct {
    job j;
    request *r;
    http_handler finish;
} pending;

/* Copies a finished job's times into the request, for the access log. */
static void note_times(request *r, const job *j)
{
    if (j->started_ns != 0) {
        r->queue_ns = j->enqueued_ns ? j->started_ns - j->enqueued_ns : 0;
        r->compute_ns = j->finished_ns - j->started_ns;
    } else if (j->finished_ns != 0) { /* expired in the queue */
        r->queue_ns = j->finished_ns - j->enqueued_ns;
    }
}

/* Replies with a finished job's error; true if there was one. */
static bool job_failed(request *r, const job *j)
{
    if (j->err == ENG_E_OK)
        return false;
    if (j->err == ENG_E_DEADLINE) {
        uint64_t waited =
            ((j->finished_ns ? j->finished_ns : now_ns()) - j->enqueued_ns)
            / 1000000u;
        http_error(r, ENG_E_DEADLINE,
                   "the deadline of %" PRIu64 " ms expired after %" PRIu64
                   " ms %s",
                   (j->deadline_ns - j->enqueued_ns) / 1000000u, waited,
                   j->started_ns ? "(during the computation)"
                                 : "in the queue; the work was dropped");
        return true;
    }
    http_error(r, j->err, "%s", j->msg[0] ? j->msg : eng_err_text(j->err));
    return true;
}

/* Every queued job ends here, once: on a worker, or on the loop thread
 * when it expired in the queue. */
static void on_job_done(job *j)
{
    pending *p = j->user;
    tallyd_server *s = p->r->s;
    if (j->started_ns != 0) {
        metrics_observe(&s->metrics.queue, j->started_ns - j->enqueued_ns);
        metrics_observe(&s->metrics.compute, j->finished_ns - j->started_ns);
    } else {
        metrics_observe(&s->metrics.queue, now_ns() - j->enqueued_ns);
    }
    note_times(p->r, j);
    http_resume(p->r);
}

/* Runs finish, timing it as the render step (less the gzip it may do,
 * which the transport times apart). */
static void render(request *r, http_handler finish)
{
    uint64_t t = now_ns(), gzip = r->gzip_ns;
    finish(r);
    r->render_ns = now_ns() - t - (r->gzip_ns - gzip);
}

/* The continuation, on an HTTP thread once the request is resumed. A
 * request whose client has gone is not answered: dropped from the queue
 * (dispatch_cancel), or its result discarded when the job had already
 * run. */
static void after_job(request *r)
{
    pending *p = r->work;
    if (p->j.err == ENG_E_CANCELLED) {
        r->err = ENG_E_CANCELLED;
        http_discard(r);
        return;
    }
    bool gone = http_client_left(r);
    if (!gone && p->j.client_fd >= 0)
        http_clients_gone(&p->j.client_fd, 1, &gone);
    if (gone) {
        atomic_fetch_add_explicit(&r->s->metrics.cancelled_running, 1,
                                  memory_order_relaxed);
        r->err = ENG_E_CANCELLED;
        http_discard(r);
        return;
    }
    if (!job_failed(r, &p->j))
        render(r, p->finish);
}

static bool push(void *arg)
{
    pending *p = arg;
    return queue_push(&p->r->s->queue, &p->j);
}

static int64_t header_timeout_ms(request *r, char *msg, size_t msglen,
                                 bool *bad)
{
    const char *h = http_header(r, "X-Timeout-Ms");
    *bad = false;
    if (h == NULL)
        return -1;
    int64_t v;
    if (!parse_int_text("X-Timeout-Ms", h, &v, msg, msglen) || v < 0) {
        if (v < 0)
            snprintf(msg, msglen, "X-Timeout-Ms cannot be negative");
        *bad = true;
        return -1;
    }
    return v;
}

static void submit(request *r, const eng_scan_desc *desc, const eng_view *iv,
                   const void *in, const eng_view *ov, void *out,
                   int64_t timeout_ms, dispatch_from from, http_handler finish)
{
    tallyd_server *s = r->s;
    char msg[256];
    job j;
    memset(&j, 0, sizeof j);
    j.client_fd = -1;
    if (r->handler_ns != 0)
        r->parse_ns = now_ns() - r->handler_ns;
    eng_err e = eng_lines_from_desc(desc, &j.lines, msg, sizeof msg);
    if (e != ENG_E_OK) {
        http_error(r, e, "%s", msg);
        return;
    }
    if (timeout_ms < 0) {
        bool bad;
        timeout_ms = header_timeout_ms(r, msg, sizeof msg, &bad);
        if (bad) {
            http_error(r, ENG_E_INVALID, "%s", msg);
            return;
        }
    }
    if (timeout_ms < 0)
        timeout_ms = s->cfg.timeout_ms;
    j.desc = *desc;
    j.in = in;
    j.out = out;
    j.iv = iv;
    j.ov = ov;
    j.enqueued_ns = now_ns();
    j.deadline_ns =
        timeout_ms > 0 ? j.enqueued_ns + (uint64_t)timeout_ms * 1000000u : 0;

    /* Tiny tensors, and text tensors up to their own bound: summing them
     * here is cheaper than the hand-off to a worker and back (let alone a
     * device launch). */
    uint64_t inline_max = s->cfg.inline_max;
    if (from == DISPATCH_TEXT && s->cfg.json_inline_max > inline_max)
        inline_max = s->cfg.json_inline_max;
    if (j.lines.elements <= inline_max) {
        j.started_ns = now_ns();
        j.err = iv != NULL
                    ? eng_scan_strided_inline(desc, iv, in, ov, out, j.msg,
                                              sizeof j.msg)
                    : eng_scan_inline(desc, in, out, j.msg, sizeof j.msg);
        j.finished_ns = now_ns();
        metrics_observe(&s->metrics.queue, 0);
        metrics_observe(&s->metrics.compute, j.finished_ns - j.started_ns);
        metrics_batch(&s->metrics, 1);
        if (j.err == ENG_E_OK)
            stats_execution(&s->stats, 1, 0, j.finished_ns - j.started_ns, 0);
        note_times(r, &j);
        if (!job_failed(r, &j))
            render(r, finish);
        return;
    }

    pending *p = malloc(sizeof *p);
    if (p == NULL) {
        http_error(r, ENG_E_NOMEM, "out of memory queueing the job");
        return;
    }
    p->j = j;
    p->j.client_fd = http_client_fd(r);
    p->j.done = on_job_done;
    p->j.user = p;
    p->r = r;
    p->finish = finish;
    r->work = p;
    r->work_free = free;
    if (http_suspend(r, after_job, push, p))
        return;
    if (atomic_load(&s->draining))
        http_error(r, ENG_E_DRAINING, "the server is shutting down");
    else
        http_error(r, ENG_E_QUEUE_FULL,
                   "the queue is full (%u jobs wait); retry after a moment",
                   s->cfg.queue_depth);
}

void dispatch_submit(request *r, const eng_scan_desc *desc, void *inout,
                     int64_t timeout_ms, dispatch_from from,
                     http_handler finish)
{
    submit(r, desc, NULL, inout, NULL, inout, timeout_ms, from, finish);
}

void dispatch_submit_strided(request *r, const eng_scan_desc *desc,
                             const eng_view *iv, const void *in,
                             const eng_view *ov, void *out, int64_t timeout_ms,
                             dispatch_from from, http_handler finish)
{
    submit(r, desc, iv, in, ov, out, timeout_ms, from, finish);
}

/* Completes a job that ran from start to end with err (message msg). */
static void ran(worker *w, job *j, uint64_t start, uint64_t end, eng_err err,
                const char *msg)
{
    j->worker = w->id;
    j->started_ns = start;
    j->finished_ns = end;
    j->err = err;
    if (err != ENG_E_OK)
        snprintf(j->msg, sizeof j->msg, "%s", msg);
    if (j->err == ENG_E_OK && j->deadline_ns != 0 && end > j->deadline_ns)
        j->err = ENG_E_DEADLINE;
    j->done(j);
}

/* True for the failures that mean the device itself is broken. */
static bool device_failure(eng_err e)
{
    return e == ENG_E_DEVICE || e == ENG_E_NO_DEVICE || e == ENG_E_LAUNCH;
}

/* w's stream on the host backend (the server's fallback engine, opened
 * once for every worker that needs it); NULL with a message when even that
 * cannot be had. */
static eng_stream *host_stream(worker *w, char *msg, size_t msglen)
{
    tallyd_server *s = w->s;
    if (w->host != NULL)
        return w->host;
    eng_err e = ENG_E_OK;
    uv_mutex_lock(&s->fallback_mu);
    if (s->fallback == NULL) {
        eng_engine_options o;
        eng_engine_options_init(&o);
        o.device = "host";
        o.warmup = false;
        e = eng_engine_open(&o, &s->fallback, msg, msglen);
    }
    uv_mutex_unlock(&s->fallback_mu);
    if (e == ENG_E_OK)
        e = eng_stream_open(s->fallback, &w->host, msg, msglen);
    return e == ENG_E_OK ? w->host : NULL;
}

/* Runs the batch jobs[0..n) on stream st; the scan's time in *t. */
static eng_err run_on(eng_stream *st, job **jobs, size_t n, eng_batch_times *t,
                      char *msg, size_t msglen)
{
    uint64_t start = now_ns();
    if (n > 1) {
        eng_part parts[WORKER_MAX_BATCH];
        for (size_t i = 0; i < n; i++) {
            parts[i].in = jobs[i]->in;
            parts[i].out = jobs[i]->out;
            parts[i].outer = jobs[i]->lines.outer;
        }
        return eng_scan_batch(st, &jobs[0]->lines, parts, n, t, msg, msglen);
    }
    job *j = jobs[0];
    eng_err e = j->iv != NULL
                    ? eng_scan_strided(st, &j->desc, j->iv, j->in, j->ov,
                                       j->out, msg, msglen)
                    : eng_scan(st, &j->desc, j->in, j->out, msg, msglen);
    t->scan_ns = now_ns() - start;
    return e;
}

/* Moves w onto the host backend for good: every device has left the pool.
 * False when the host backend cannot start. */
static bool use_fallback(worker *w)
{
    tallyd_server *s = w->s;
    char why[256];
    if (host_stream(w, why, sizeof why) == NULL) {
        log_msg("dispatch", "error",
                "every device has failed and the host backend cannot "
                "start: %s",
                why);
        return false;
    }
    eng_stream_close(w->stream);
    w->stream = w->host;
    w->host = NULL;
    w->on_fallback = true;
    if (!atomic_exchange(&s->metrics.host_fallback, true))
        log_msg("dispatch", "error",
                "every device has left the pool; the host backend runs "
                "every job from now on");
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
    tallyd_server *s = w->s;
    tallyd_device *dev = &s->devices[w->device];
    if (w->device < METRIC_MAX_DEVICES)
        atomic_fetch_add_explicit(&s->metrics.device_errors[w->device], 1,
                                  memory_order_relaxed);
    unsigned most = s->cfg.device_max_failures ? s->cfg.device_max_failures : 1;
    unsigned streak = atomic_fetch_add(&dev->failures, 1) + 1;
    if (streak >= most && !atomic_exchange(&dev->down, true)) {
        if (w->device < METRIC_MAX_DEVICES)
            atomic_store(&s->metrics.device_down[w->device], true);
        log_msg("dispatch", "error",
                "device %s failed %u launches in a row (the last: %s: %s); "
                "it is taken out of the pool",
                dev->name, streak, eng_err_name(err), msg);
    } else if (streak == 1) {
        log_msg("dispatch", "warn",
                "device %s failed a launch (%s: %s); its jobs run on the host "
                "backend",
                dev->name, eng_err_name(err), msg);
    }

    bool intact =
        err == ENG_E_LAUNCH || live > 1 || jobs[0]->in != jobs[0]->out;
    char why[256];
    eng_stream *host = intact ? host_stream(w, why, sizeof why) : NULL;
    if (host != NULL) {
        eng_batch_times t = {0};
        uint64_t again = now_ns();
        eng_err e = run_on(host, jobs, live, &t, why, sizeof why);
        atomic_fetch_add_explicit(&s->metrics.host_reruns, live,
                                  memory_order_relaxed);
        if (e == ENG_E_OK)
            stats_execution(&s->stats, (unsigned)live, t.gather_ns, t.scan_ns,
                            t.scatter_ns);
        for (size_t i = 0; i < live; i++)
            ran(w, jobs[i], again, now_ns(), e, why);
    } else {
        for (size_t i = 0; i < live; i++)
            ran(w, jobs[i], start, now_ns(), err, msg);
    }

    if (!atomic_load(&dev->down))
        return true;
    for (unsigned d = 0; d < s->ndevices; d++)
        if (!atomic_load(&s->devices[d].down))
            return false; /* this worker stops; the others take the jobs */
    return use_fallback(w);
}

/* A worker runs a batch: jobs whose deadline passed while they waited are
 * dropped; the rest run as one launch (eng_scan_batch) when there are
 * several, and are completed. A device failure goes to device_failed. */
static bool dispatch_run(worker *w, job **jobs, size_t n)
{
    tallyd_server *s = w->s;
    if (!w->on_fallback && atomic_load(&s->devices[w->device].down)) {
        bool any = false;
        for (unsigned d = 0; d < s->ndevices && !any; d++)
            any = !atomic_load(&s->devices[d].down);
        if (any || !use_fallback(w)) {
            queue_push_front(&s->queue, jobs, n); /* for a device left */
            return false;
        }
    }
    if (s->cfg.fault_delay_ms > 0) /* --fault-delay-ms: a slow device */
        uv_sleep(s->cfg.fault_delay_ms);
    uint64_t start = now_ns();
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        job *j = jobs[i];
        if (j->deadline_ns != 0 && start >= j->deadline_ns) {
            j->worker = w->id;
            j->err = ENG_E_DEADLINE;
            j->finished_ns = start;
            j->done(j);
        } else {
            jobs[live++] = j;
        }
    }
    if (live == 0)
        return true;
    eng_batch_times t = {0};
    char msg[256];
    msg[0] = '\0';
    eng_err err = run_on(w->stream, jobs, live, &t, msg, sizeof msg);
    uint64_t end = now_ns();
    if (w->id < METRIC_MAX_WORKERS)
        atomic_fetch_add_explicit(&s->metrics.busy_ns[w->id], end - start,
                                  memory_order_relaxed);
    if (!w->on_fallback && device_failure(err))
        return device_failed(w, jobs, live, err, msg, start);
    metrics_batch(&s->metrics, live);
    if (err == ENG_E_OK) {
        stats_execution(&s->stats, (unsigned)live, t.gather_ns, t.scan_ns,
                        t.scatter_ns);
        if (!w->on_fallback) {
            atomic_store(&s->devices[w->device].failures, 0);
            if (w->device < METRIC_MAX_DEVICES)
                atomic_fetch_add_explicit(&s->metrics.device_jobs[w->device],
                                          live, memory_order_relaxed);
        }
    }
    for (size_t i = 0; i < live; i++)
        ran(w, jobs[i], start, end, err, msg);
    return true;
}

#define MAX_WATCH 1024

void dispatch_cancel(tallyd_server *s)
{
    static job *jobs[MAX_WATCH], *gone_jobs[MAX_WATCH], *out[MAX_WATCH];
    static int fds[MAX_WATCH];
    static bool gone[MAX_WATCH]; /* the loop thread's alone */
    size_t n = queue_snapshot(&s->queue, jobs, fds, MAX_WATCH);
    if (n == 0 || http_clients_gone(fds, n, gone) == 0)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (gone[i])
            gone_jobs[k++] = jobs[i];
    /* those a worker took meanwhile run, and are discarded after */
    size_t got = queue_remove(&s->queue, gone_jobs, k, out);
    uint64_t now = now_ns();
    for (size_t i = 0; i < got; i++) {
        atomic_fetch_add_explicit(&s->metrics.cancelled_queued, 1,
                                  memory_order_relaxed);
        out[i]->err = ENG_E_CANCELLED;
        out[i]->finished_ns = now;
        out[i]->done(out[i]);
    }
}

#define MAX_EXPIRE 256

void dispatch_expire(tallyd_server *s)
{
    job *expired[MAX_EXPIRE];
    uint64_t now = now_ns();
    size_t n = queue_expire(&s->queue, now, expired, MAX_EXPIRE);
    for (size_t i = 0; i < n; i++) {
        expired[i]->err = ENG_E_DEADLINE;
        expired[i]->finished_ns = now;
        expired[i]->done(expired[i]);
    }
}

eng_err dispatch_start(tallyd_server *s, char *msg, size_t msglen)
{
    return workers_start(s, dispatch_run, msg, msglen);
}

void dispatch_stop(tallyd_server *s)
{
    workers_stop(s);
}
