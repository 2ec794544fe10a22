/*
 * submit.c - the one adapter from a parsed inference to a job and back
 * (submit.h).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "submit.h"

/* The job's steps, into the door's record. */
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
    req_record *rec = w->rec;
    trace_work *ran = &rec->ran;
    sched_ran(j, ran);
    if (w->seq.has_id) {
        ran->sequence_is_string = w->seq.is_string;
        if (w->seq.is_string)
            memcpy(ran->sequence_id, w->seq.str, w->seq.len + 1);
        else
            snprintf(ran->sequence_id, sizeof ran->sequence_id, "%llu",
                     (unsigned long long)w->seq.num);
    }
    rec->parse_ns = w->parse_ns;
    rec->queue_ns = queue;
    rec->compute_ns = compute;
}

/* The request's one outcome (the job's status and words): a chunk's
 * end in its sequence that failed (st) takes the place of a job that
 * succeeded. */
static void outcome(submit_work *w, status_code st, const char *msg)
{
    if (st == STATUS_OK || w->j.status != STATUS_OK)
        return;
    w->j.status = st;
    snprintf(w->j.msg, sizeof w->j.msg, "%s", msg);
}

/* A chunk's end in its sequence, once: ok adds the carries to its answer
 * and advances them; otherwise they stay as they were. It may hand the
 * turn to the next chunk (seq_ready). A numbered chunk that conflicts
 * with its sequence becomes the outcome; out is no answer then. */
static void seq_end(submit_work *w, bool ok)
{
    seq_table *t = w->seqs;
    if (t == NULL)
        return;
    w->seqs = NULL;
    char msg[512];
    outcome(w, seq_finish(t, &w->slot, ok, w->j.out, msg, sizeof msg), msg);
}

/* The job's outcome, told to the door once. A queued job's client may
 * have gone while it waited (a summed-at-once one is answered, and the
 * transport drops the answer if nobody reads it: probing costs a poll(2)
 * on the REST door). So may a chunk's whose end went through a durable
 * table, but that chunk was applied (or refused) already, before its
 * resume: it is answered without a probe, as a summed-at-once one. */
static void conclude(submit_work *w, bool queued, bool left)
{
    const job *j = &w->j;
    const submit_door *d = w->door;
    /* slot.durable: set when its end went through the durable table (the
     * door's record starts zeroed) */
    bool gone =
        j->status == STATUS_CANCELLED
        || (queued && (left || (w->slot.durable == NULL && d->gone(w))));
    seq_end(w, j->status == STATUS_OK && !gone);
    char msg[512];
    if (j->status == STATUS_CANCELLED) { /* counted by the scheduler */
        d->cancelled(w->req);
        return;
    }
    if (gone) { /* gone after the last probe */
        sched_count_cancelled(w->sched);
        d->cancelled(w->req);
        return;
    }
    switch (j->status) {
    case STATUS_OK: d->answer(w->req); return;
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

/* A durable chunk's state is in the log, or could not be written: back
 * to the door's thread. The log writer. */
static void seq_durable_done(seq_slot *slot, status_code st, const char *msg)
{
    submit_work *w =
        (submit_work *)((char *)slot - offsetof(submit_work, slot));
    outcome(w, st, msg);
    w->door->resume(w->req);
}

/* A durable table's chunk ended (ok: its job succeeded): true when its
 * state goes to the log or the store first, and seq_durable_done() comes
 * later; false when it ended at once (a repeat, a conflict, a failure:
 * the outcome says). */
static bool end_durable(submit_work *w, bool ok)
{
    seq_table *t = w->seqs;
    w->seqs = NULL;
    w->slot.durable = seq_durable_done;
    w->slot.deadline_ns = w->j.deadline_ns;
    bool later;
    char msg[512];
    status_code st =
        seq_finish_durable(t, &w->slot, ok, w->j.out, &later, msg, sizeof msg);
    if (!later)
        outcome(w, st, msg);
    return later;
}

/* The job's done: back to the door's thread; a chunk of a durable
 * sequence ends first, and comes back once its state is written. A
 * worker or the tick. */
static void on_job_done(job *j)
{
    submit_work *w = j->ctx;
    if (w->seqs != NULL && seq_durable(w->seqs)
        && end_durable(w, j->status == STATUS_OK && !w->door->gone(w)))
        return; /* seq_durable_done() resumes it */
    w->door->resume(w->req);
}

static bool probe_gone(void *ctx)
{
    const submit_work *w = ctx;
    return w->door->gone(w);
}

/* A small chunk of a durable sequence, summed at once under the door's
 * handshake (so that the log writer's resume cannot come first) and
 * ended there: true when the request waits for its state's write; false
 * when the chunk ended at once, and the adapter answers it. */
static bool run_inline_durable(submit_work *w)
{
    sched_run_inline(w->sched, &w->j);
    return end_durable(w, w->j.status == STATUS_OK);
}

/* The outcome of a job the scheduler would not take (st), with words. */
static void refused(submit_work *w, status_code st)
{
    w->j.status = st;
    if (st == STATUS_DRAINING)
        snprintf(w->j.msg, sizeof w->j.msg, "the server is shutting down");
    else if (st == STATUS_QUEUE_FULL)
        snprintf(w->j.msg, sizeof w->j.msg,
                 "the queue is full (%u jobs wait); retry after a moment",
                 w->s->cfg.queue_depth);
    else
        snprintf(w->j.msg, sizeof w->j.msg, "%s", status_text(st));
}

/* Pushes the job, under the door's handshake. */
static bool push(submit_work *w)
{
    status_code st = sched_submit(w->sched, &w->j);
    if (st != STATUS_OK) /* not queued: the job is still ours */
        refused(w, st);
    return st == STATUS_OK;
}

/* A waiting chunk's turn has come (sequence.h's ready), on the thread
 * that finished the chunk before it; or the table refused it (a numbered
 * chunk that waited too long for the ones before it: slot->refused), on
 * the tick thread. Its request is suspended. Queued (never summed here:
 * this may be another door's thread); a refusal comes back to its door
 * as the job's end. */
static void seq_ready(seq_slot *slot)
{
    submit_work *w =
        (submit_work *)((char *)slot - offsetof(submit_work, slot));
    if (w->j.status != STATUS_OK) { /* refused: no longer admitted */
        w->seqs = NULL;
        w->door->resume(w->req);
        return;
    }
    /* once queued, the job may end and its request be freed before
     * sched_submit() returns (no handshake holds it here, as push()'s
     * does): only a refusal touches w after it */
    status_code st = sched_submit(w->sched, &w->j);
    if (st == STATUS_OK)
        return;
    refused(w, st);
    w->door->resume(w->req);
}

/* Suspends a chunk until its turn, under the door's handshake: false
 * when the turn came first (the request goes on at once, unsuspended). */
static bool wait_turn(submit_work *w)
{
    return seq_arm(w->seqs, &w->slot);
}

/* Admits a chunk into its sequence. False: answered (refused), or
 * suspended until its turn. */
static bool admit(submit_work *w, seq_table *t)
{
    job *j = &w->j;
    char msg[512];
    status_code st = STATUS_OK;
    bool wait = false;
    if (j->iv != NULL || j->ov != NULL) {
        snprintf(msg, sizeof msg,
                 "a sequence's chunks are packed tensors; DirectML's "
                 "strided layouts cannot be one");
        st = STATUS_INVALID;
    } else {
        w->slot.refused = &j->status; /* the one outcome */
        w->slot.why = j->msg;
        w->slot.whylen = sizeof j->msg;
        st = seq_admit(t, &w->seq, &j->desc, &j->lines, j->in, &w->slot, &wait,
                       msg, sizeof msg);
    }
    if (st != STATUS_OK) {
        note_times(w);
        w->door->fail(w->req, st, msg);
        return false;
    }
    w->seqs = t;
    if (!wait)
        return true;
    w->slot.ready = seq_ready;
    if (w->door->suspend(w->req, wait_turn, w))
        return false;
    if (j->status != STATUS_OK) { /* refused before it was armed */
        w->seqs = NULL;
        note_times(w);
        w->door->fail(w->req, j->status, j->msg);
        return false;
    }
    return true; /* its turn came while it was being suspended */
}

void submit_start(submit_work *w, const submit_door *door, void *req,
                  tallyd_server *s, sched *sc, seq_table *seqs,
                  const submit_req *q)
{
    job *j = &w->j;
    j->desc = q->desc;
    j->in = q->in;
    j->out = q->out;
    j->iv = q->iv;
    j->ov = q->ov;
    j->watch_fd = q->watch_fd;
    j->trace = q->trace;
    if (q->seq != NULL && q->seq->has_id)
        w->seq = *q->seq;
    w->slot.near = q->near;
    w->rec = q->rec;
    submit_from from = q->from;
    w->parse_ns = q->handler_ns ? now_ns() - q->handler_ns : 0;
    w->door = door;
    w->req = req;
    w->s = s;
    w->sched = sc;
    if (sched_prepare(&w->j) != STATUS_OK) {
        note_times(w);
        door->fail(req, w->j.status, w->j.msg);
        return;
    }
    int64_t ms = submit_deadline_ms(q->transport_ms, q->protocol_ms,
                                    (int64_t)s->cfg.timeout_ms);
    w->timeout_ms = ms;
    w->from = from;
    /* a chunk that waits for its turn is queued when it comes: the job
     * is whole before it is admitted */
    w->j.deadline_ns = ms > 0 ? sched_now(sc) + (uint64_t)ms * 1000000u : 0;
    w->j.done = on_job_done;
    w->j.gone = probe_gone;
    w->j.ctx = w;
    if (w->seq.has_id && !admit(w, seqs))
        return;

    uint64_t inline_max = s->cfg.inline_max;
    if (from == SUBMIT_TEXT && s->cfg.json_inline_max > inline_max)
        inline_max = s->cfg.json_inline_max;
    if (sched_elements(&w->j) <= inline_max) {
        bool durable = w->seqs != NULL && seq_durable(w->seqs);
        if (durable && door->suspend(req, run_inline_durable, w))
            return; /* its answer waits for its record */
        if (!durable)
            sched_run_inline(sc, &w->j);
        note_times(w);
        conclude(w, false, false);
        return;
    }

    if (door->suspend(req, push, w))
        return;
    /* refused: done will not run */
    status_code st = w->j.status;
    seq_end(w, false);
    note_times(w);
    door->fail(req, st, w->j.msg);
}

void submit_finish(submit_work *w, bool left)
{
    note_times(w);
    conclude(w, true, left);
}
