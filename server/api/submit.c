/*
 * submit.c - the one adapter from a parsed inference to a job and back
 * (submit.h).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "list.h"
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
    w->seq_failed = true;
    snprintf(w->j.msg, sizeof w->j.msg, "%s", msg);
}

/* Where a chunk's end in its sequence stands (seq_end, seq_done). */
enum { SEQ_NONE, SEQ_SYNC, SEQ_LATER, SEQ_DONE };

/* The chunk's end in its sequence (sequence.h's done): its outcome
 * kept, and its request resumed, unless it ended inside seq_end(), whose
 * caller goes on with it. Any thread. */
static void seq_done(seq_slot *slot, status_code st, const char *msg)
{
    submit_work *w = container_of(slot, submit_work, slot);
    outcome(w, st, msg);
    int sync = SEQ_SYNC;
    if (atomic_compare_exchange_strong(&w->seq_state, &sync, SEQ_DONE))
        return;
    w->door->resume(w->req);
}

/* Ends the chunk's scan in its sequence (ok: it ran), once: true when
 * its end comes later (seq_done() resumes the request then); false when
 * it ended here, its outcome kept. */
static bool seq_end(submit_work *w, bool ok)
{
    seq_table *t = w->seqs;
    w->seqs = NULL;
    atomic_store(&w->seq_state, SEQ_SYNC);
    seq_finish(t, &w->slot, ok);
    int sync = SEQ_SYNC;
    return atomic_compare_exchange_strong(&w->seq_state, &sync, SEQ_LATER);
}

/* The job's outcome, told to the door once. A queued job's client may
 * have gone while it waited (a summed-at-once one is answered, and the
 * transport drops the answer if nobody reads it: probing costs a poll(2)
 * on the REST door). A chunk's was asked at its job's end, before its
 * sequence took it (chunk_left): after that it is answered without a
 * probe, as it was decided. */
static void conclude(submit_work *w, bool queued, bool left)
{
    const job *j = &w->j;
    const submit_door *d = w->door;
    bool chunk = w->slot.done != NULL;
    bool gone = j->status == STATUS_CANCELLED || w->chunk_left
                || (queued && !chunk && (left || d->gone(w)));
    if (chunk) /* its carries are in the answer: the slot let go */
        seq_answer(&w->slot);
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
    if (j->status == STATUS_OK) {
        d->answer(w->req);
        return;
    }
    if (j->status == STATUS_DEADLINE && !w->seq_failed)
        snprintf(msg, sizeof msg,
                 "the deadline of %" PRId64 " ms expired after %" PRIu64
                 " ms %s",
                 w->timeout_ms, (j->finished_ns - j->enqueued_ns) / 1000000u,
                 j->started_ns ? "(during the computation)"
                               : "in the queue; the work was dropped");
    else
        snprintf(msg, sizeof msg, "%s",
                 j->msg[0] ? j->msg : status_text(j->status));
    d->fail(w->req, j->status, msg);
}

/* The job's done: a chunk ends in its sequence first (the client asked
 * once more: a chunk whose client has gone is not added), and its
 * request comes back when that has ended. A worker or the tick. */
static void on_job_done(job *j)
{
    submit_work *w = j->ctx;
    if (w->seqs != NULL) {
        w->chunk_left = j->status == STATUS_OK && w->door->gone(w);
        if (seq_end(w, j->status == STATUS_OK && !w->chunk_left))
            return; /* seq_done() resumes it */
    }
    w->door->resume(w->req);
}

static bool probe_gone(void *ctx)
{
    const submit_work *w = ctx;
    return w->door->gone(w);
}

/* A small chunk, summed at once under the door's handshake (so that a
 * resume from another thread cannot come before the suspend) and ended
 * in its sequence there: true when the request waits for its end; false
 * when it ended at once, and the adapter answers it. */
static bool run_inline_chunk(submit_work *w)
{
    sched_run_inline(w->sched, &w->j);
    return seq_end(w, w->j.status == STATUS_OK);
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

/* Admits a chunk into its sequence. False: answered (refused). */
static bool admit(submit_work *w, seq_table *t)
{
    job *j = &w->j;
    char msg[512];
    status_code st = STATUS_OK;
    if (j->iv != NULL || j->ov != NULL) {
        snprintf(msg, sizeof msg,
                 "a sequence's chunks are packed tensors; DirectML's "
                 "strided layouts cannot be one");
        st = STATUS_INVALID;
    } else {
        w->slot.done = seq_done;
        w->slot.deadline_ns = j->deadline_ns;
        w->slot.out = j->out;
        st = seq_admit(t, &w->seq, &j->desc, &j->lines, j->in, &w->slot, msg,
                       sizeof msg);
    }
    if (st != STATUS_OK) {
        w->slot.done = NULL;
        note_times(w);
        w->door->fail(w->req, st, msg);
        return false;
    }
    w->seqs = t;
    return true;
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
        bool chunk = w->seqs != NULL;
        if (chunk && door->suspend(req, run_inline_chunk, w))
            return; /* its answer waits for its sequence */
        if (!chunk)
            sched_run_inline(sc, &w->j);
        note_times(w);
        conclude(w, false, false);
        return;
    }

    if (door->suspend(req, push, w))
        return;
    /* refused: done will not run */
    if (w->seqs != NULL)
        seq_end(w, false); /* it did not run: it ends at once */
    note_times(w);
    conclude(w, false, false);
}

void submit_finish(submit_work *w, bool left)
{
    note_times(w);
    conclude(w, true, left);
}
