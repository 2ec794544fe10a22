/*
 * submit.c - the one adapter from a parsed inference to a job and back
 * (submit.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "submit.h"

/* Hands the door the job's steps. */
static void note_times(submit_work *w)
{
    const job *j = &w->j;
    uint64_t queue = 0, compute = 0;
    if (j->started_ns != 0) {
        queue = j->enqueued_ns ? j->started_ns - j->enqueued_ns : 0;
        compute = j->finished_ns - j->started_ns;
    } else if (j->finished_ns != 0 && j->enqueued_ns != 0) {
        queue = j->finished_ns - j->enqueued_ns; /* expired in the queue */
    }
    trace_work ran;
    sched_ran(j, &ran);
    w->door->times(w->req, w->parse_ns, queue, compute, &ran);
}

/* The job's outcome, told to the door once. A queued job's client may
 * have gone while it waited (a summed-at-once one is answered, and the
 * transport drops the answer if nobody reads it: probing costs a poll(2)
 * on the REST door). */
static void conclude(submit_work *w, bool queued, bool left)
{
    const job *j = &w->j;
    const submit_door *d = w->door;
    if (j->status == STATUS_CANCELLED) { /* counted by the scheduler */
        d->cancelled(w->req);
        return;
    }
    if (queued && (left || d->gone(w))) { /* gone after the last probe */
        sched_count_cancelled(w->sched);
        d->cancelled(w->req);
        return;
    }
    char msg[512];
    switch (j->status) {
    case STATUS_OK:
        d->answer(w->req);
        return;
    case STATUS_DEADLINE:
        snprintf(msg, sizeof msg,
                 "the deadline of %" PRId64 " ms expired after %" PRIu64
                 " ms %s",
                 w->timeout_ms, (j->finished_ns - j->enqueued_ns) / 1000000u,
                 j->started_ns ? "(during the computation)"
                               : "in the queue; the work was dropped");
        break;
    default:
        snprintf(msg, sizeof msg, "%s",
                 j->msg[0] ? j->msg : status_text(j->status));
        break;
    }
    d->fail(w->req, j->status, msg);
}

/* The job's done: back to the door's thread. A worker or the tick. */
static void on_job_done(job *j)
{
    submit_work *w = j->ctx;
    w->door->resume(w->req);
}

static bool probe_gone(void *ctx)
{
    const submit_work *w = ctx;
    return w->door->gone(w);
}

/* Pushes the job, under the door's handshake. */
static bool push(submit_work *w)
{
    w->refused = sched_submit(w->sched, &w->j);
    return w->refused == STATUS_OK;
}

void submit_start(submit_work *w, const submit_door *door, void *req,
                  tallyd_server *s, sched *sc, int64_t transport_ms,
                  int64_t protocol_ms, submit_from from, uint64_t handler_ns)
{
    w->parse_ns = handler_ns ? now_ns() - handler_ns : 0;
    w->door = door;
    w->req = req;
    w->s = s;
    w->sched = sc;
    if (sched_prepare(&w->j) != STATUS_OK) {
        note_times(w);
        door->fail(req, w->j.status, w->j.msg);
        return;
    }
    int64_t ms = submit_deadline_ms(transport_ms, protocol_ms,
                                    (int64_t)s->cfg.timeout_ms);
    w->timeout_ms = ms;

    uint64_t inline_max = s->cfg.inline_max;
    if (from == SUBMIT_TEXT && s->cfg.json_inline_max > inline_max)
        inline_max = s->cfg.json_inline_max;
    if (sched_elements(&w->j) <= inline_max) {
        sched_run_inline(sc, &w->j);
        note_times(w);
        conclude(w, false, false);
        return;
    }

    w->j.deadline_ns = ms > 0 ? sched_now(sc) + (uint64_t)ms * 1000000u : 0;
    w->j.done = on_job_done;
    w->j.gone = probe_gone;
    w->j.ctx = w;
    if (door->suspend(req, push, w))
        return;
    /* refused: done will not run */
    char msg[160];
    if (w->refused == STATUS_DRAINING)
        snprintf(msg, sizeof msg, "the server is shutting down");
    else if (w->refused == STATUS_QUEUE_FULL)
        snprintf(msg, sizeof msg,
                 "the queue is full (%u jobs wait); retry after a moment",
                 s->cfg.queue_depth);
    else
        snprintf(msg, sizeof msg, "%s", status_text(w->refused));
    note_times(w);
    door->fail(req, w->refused, msg);
}

void submit_finish(submit_work *w, bool left)
{
    note_times(w);
    conclude(w, true, left);
}
