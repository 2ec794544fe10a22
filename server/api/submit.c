/*
 * submit.c - the HTTP front door's adapter to the scheduler (submit.h).
 *
 * A queued job lives in a `pending` record attached to its request as the
 * request's `work`, so it is freed with the request, never before: the
 * request holds a reference for the job (taken by http_suspend) until the
 * job's done callback resumes it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "native.h"
#include "peer.h"
#include "reply.h"
#include "submit.h"

typedef struct {
    job j;
    request *r;
    sched *sched;
    http_handler finish;
    int64_t timeout_ms; /* as asked, for the deadline's message */
    status_code refused;
} pending;

/* Copies a finished job's times into the request, for the access log
 * and the request's spans. */
static void note_times(request *r, const job *j)
{
    sched_ran(j, &r->ran);
    if (j->started_ns != 0) {
        r->queue_ns = j->enqueued_ns ? j->started_ns - j->enqueued_ns : 0;
        r->compute_ns = j->finished_ns - j->started_ns;
    } else if (j->finished_ns != 0) { /* expired in the queue */
        r->queue_ns = j->finished_ns - j->enqueued_ns;
    }
}

/* Replies with a finished job's failure; true if there was one. */
static bool job_failed(request *r, const job *j, int64_t timeout_ms)
{
    if (j->status == STATUS_OK)
        return false;
    if (j->status == STATUS_DEADLINE) {
        uint64_t waited = (j->finished_ns - j->enqueued_ns) / 1000000u;
        http_error(r, STATUS_DEADLINE,
                   "the deadline of %" PRId64 " ms expired after %" PRIu64
                   " ms %s",
                   timeout_ms, waited,
                   j->started_ns ? "(during the computation)"
                                 : "in the queue; the work was dropped");
        return true;
    }
    http_error(r, j->status, "%s", j->msg[0] ? j->msg : status_text(j->status));
    return true;
}

/* The job's end, once, on a worker or the loop thread. */
static void on_job_done(job *j)
{
    pending *p = j->ctx;
    note_times(p->r, j);
    http_resume(p->r);
}

/* The probe: the client's socket has hung up. */
static bool client_gone(void *ctx)
{
    const pending *p = ctx;
    return peer_gone(p->j.watch_fd);
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
 * request whose client has gone is not answered: dropped from the queue,
 * or its result discarded when the job had already run. */
static void after_job(request *r)
{
    pending *p = r->work;
    if (p->j.status == STATUS_CANCELLED) { /* counted by the scheduler */
        r->err = STATUS_CANCELLED;
        http_discard(r);
        return;
    }
    /* gone after the worker's probe, or found gone by libmicrohttpd */
    if (http_client_left(r) || peer_gone(p->j.watch_fd)) {
        sched_count_cancelled(p->sched);
        r->err = STATUS_CANCELLED;
        http_discard(r);
        return;
    }
    if (!job_failed(r, &p->j, p->timeout_ms))
        render(r, p->finish);
}

static bool push(void *arg)
{
    pending *p = arg;
    p->refused = sched_submit(p->sched, &p->j);
    return p->refused == STATUS_OK;
}

/* The X-Timeout-Ms header: -1 when absent; false when it is no
 * non-negative integer (msg says why). */
static bool header_timeout_ms(request *r, int64_t *ms, char *msg, size_t msglen)
{
    const char *h = http_header(r, "X-Timeout-Ms");
    *ms = -1;
    if (h == NULL)
        return true;
    int64_t v;
    if (!parse_int_text("X-Timeout-Ms", h, &v, msg, msglen) || v < 0) {
        if (v < 0)
            snprintf(msg, msglen, "X-Timeout-Ms cannot be negative");
        return false;
    }
    *ms = v;
    return true;
}

static void submit(request *r, const eng_scan_desc *desc, const eng_view *iv,
                   const void *in, const eng_view *ov, void *out,
                   int64_t timeout_ms, submit_from from, http_handler finish)
{
    tallyd_server *s = r->s;
    sched *sc = api_sched(r);
    char msg[256];
    if (r->handler_ns != 0)
        r->parse_ns = now_ns() - r->handler_ns;
    job j;
    memset(&j, 0, sizeof j);
    j.desc = *desc;
    j.in = in;
    j.out = out;
    j.iv = iv;
    j.ov = ov;
    if (sched_prepare(&j) != STATUS_OK) {
        http_error(r, j.status, "%s", j.msg);
        return;
    }
    if (timeout_ms < 0 && !header_timeout_ms(r, &timeout_ms, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    if (timeout_ms < 0)
        timeout_ms = s->cfg.timeout_ms;

    uint64_t inline_max = s->cfg.inline_max;
    if (from == SUBMIT_TEXT && s->cfg.json_inline_max > inline_max)
        inline_max = s->cfg.json_inline_max;
    if (sched_elements(&j) <= inline_max) {
        sched_run_inline(sc, &j);
        note_times(r, &j);
        if (!job_failed(r, &j, timeout_ms))
            render(r, finish);
        return;
    }

    pending *p = malloc(sizeof *p);
    if (p == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory queueing the job");
        return;
    }
    p->j = j;
    p->j.deadline_ns =
        timeout_ms > 0 ? sched_now(sc) + (uint64_t)timeout_ms * 1000000u : 0;
    p->j.done = on_job_done;
    p->j.gone = client_gone;
    p->j.watch_fd = http_client_fd(r);
    p->j.trace = &r->trace;
    p->j.ctx = p;
    p->r = r;
    p->sched = sc;
    p->finish = finish;
    p->timeout_ms = timeout_ms;
    r->work = p;
    r->work_free = free;
    if (http_suspend(r, after_job, push, p))
        return;
    if (p->refused == STATUS_DRAINING || atomic_load(&s->draining))
        http_error(r, STATUS_DRAINING, "the server is shutting down");
    else
        http_error(r, STATUS_QUEUE_FULL,
                   "the queue is full (%u jobs wait); retry after a moment",
                   s->cfg.queue_depth);
}

void submit_scan(request *r, const eng_scan_desc *desc, void *inout,
                 int64_t timeout_ms, submit_from from, http_handler finish)
{
    submit(r, desc, NULL, inout, NULL, inout, timeout_ms, from, finish);
}

void submit_scan_to(request *r, const eng_scan_desc *desc, const void *in,
                    void *out, int64_t timeout_ms, submit_from from,
                    http_handler finish)
{
    submit(r, desc, NULL, in, NULL, out, timeout_ms, from, finish);
}

void submit_strided(request *r, const eng_scan_desc *desc, const eng_view *iv,
                    const void *in, const eng_view *ov, void *out,
                    int64_t timeout_ms, submit_from from, http_handler finish)
{
    submit(r, desc, iv, in, ov, out, timeout_ms, from, finish);
}
