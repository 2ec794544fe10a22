/*
 * submit.h - the one adapter from a parsed inference to a scheduler job
 * and back, whichever door the request came through (REST: submit_http.c;
 * gRPC and its stream: grpc_service.c).
 *
 * A door embeds a submit_work in its request's record, fills the job's
 * scan (desc, in, out, views) and calls submit_start() with the deadline
 * its transport gave and the one its protocol gave. The adapter:
 *   - checks the scan (sched_prepare);
 *   - chooses the deadline, the same way for every door: the tightest
 *     wins (submit_deadline_ms below). The transport's (REST's
 *     X-Timeout-Ms header, gRPC's grpc-timeout), the protocol's (KServe's
 *     "timeout" parameter, in microseconds rounded up to milliseconds)
 *     and the server's --timeout-ms are all upper bounds; 0 from any of
 *     them sets no bound, so a client can tighten the server's deadline
 *     but never lift it. A malformed one never gets here: the door
 *     refuses it (400 / INVALID_ARGUMENT);
 *   - sums a tensor of at most --inline-max-elements (or, when it came as
 *     text, --json-inline-max-elements) at once on the door's thread
 *     (sched_run_inline): for it a hand-off costs more than the sum;
 *   - suspends the request and queues a larger one (sched_submit), the
 *     door's "has the client gone?" probe as the job's;
 *   - once the job has ended, brings the request back to the door's
 *     thread (door->resume) and there, in submit_finish(), writes the
 *     job's steps into the request's record (w->rec) and then hands the
 *     door exactly one of: the answer, a failure with its
 *     words, or "the client has gone" (nothing is sent).
 * A request that names a sequence (w->seq, sequence_id.h) is a chunk of
 * it (seq/sequence.h): the adapter admits it into its sequence before
 * anything else (a refusal is answered at once), scans it as any
 * request, then ends its scan in its sequence, where it takes its turn:
 * a queued one when its job ends (on_job_done), a small one summed at
 * once under the door's suspend handshake. Its end in its sequence
 * comes once, through the slot's done(): at once (the request goes on
 * unsuspended), or later, from whatever thread ended it (the log
 * writer, a store's loop, the tick), which resumes the request. Then,
 * on the door's thread, the sequence's carries are added to its answer.
 * So an answer waits for its turn and its state's write without a
 * door's thread waiting, and without suspending a request twice. A chunk
 * takes a packed tensor: DirectML's strided layouts are refused in
 * sequences.
 * Refusals and failures read the same through every door; the status
 * table (status.h) maps them to an HTTP status or a gRPC code.
 *
 * Ownership: the door owns the submit_work (inside its request's record)
 * and keeps it, with the job's buffers, alive until the job has ended:
 * submit_finish() has run, or submit_start() returned without suspending.
 * Threading: submit_start() and submit_finish() on the door's thread (an
 * HTTP thread; a gRPC loop thread); door->resume and door->gone on any
 * thread (a worker, the scheduler's tick).
 */
#ifndef TALLY_API_SUBMIT_H
#define TALLY_API_SUBMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "scheduler.h"
#include "sequence.h"
#include "server.h"

/* What the tensor came as, for the choice between summing it at once and
 * queueing it: a text tensor has already cost its parse (and will cost
 * its printing) on the door's thread, several times the sum at 64K
 * elements (BENCHMARKS.md, "What a JSON tensor costs beside its sum"), so
 * a device hand-off saves nothing until it is large. */
typedef enum { SUBMIT_BYTES, SUBMIT_TEXT } submit_from;

typedef struct submit_work submit_work;

/* A door's side of the adapter. req is the door's request (REST's request,
 * gRPC's call), as given to submit_start(). */
typedef struct {
    /* Suspends req and, so that the resume cannot come before the
     * suspend, calls push(w) under the door's own handshake; true when
     * push succeeded and req waits for resume. False: push refused, req
     * is not suspended and the adapter answers it. Door's thread. */
    bool (*suspend)(void *req, bool (*push)(submit_work *w), submit_work *w);
    /* Brings req back to the door's thread, which then calls
     * submit_finish(). Any thread, once per suspend. */
    void (*resume)(void *req);
    /* Whether w's client has gone: cheap, never blocks. Any thread. */
    bool (*gone)(const submit_work *w);
    /* The outcomes, exactly one per submit_start(), on the door's thread:
     * the scan is done (in out); a failure, in words; the client has gone
     * (nothing to send; counted as cancelled). */
    void (*answer)(void *req);
    void (*fail)(void *req, status_code st, const char *msg);
    void (*cancelled)(void *req);
} submit_door;

/* What a door hands the adapter: the scan, and where its request
 * stands. */
typedef struct {
    eng_scan_desc desc;
    const void *in;
    void *out;
    const eng_view *iv, *ov; /* DirectML's strided layouts; NULL: packed */
    const seq_params *seq;   /* NULL, or no id: not a chunk */
    int watch_fd;            /* the request's own socket; -1: none */
    const trace_ctx *trace;  /* valid until the outcome */
    void *near;              /* the door loop's, as seq_loop_open gave it */
    req_record *rec;         /* the request's record (core/reqlog.h) */
    /* the request's two deadlines (-1: not given) */
    int64_t transport_ms, protocol_ms;
    submit_from from;
    uint64_t handler_ns; /* when the door began to parse; 0: unknown */
} submit_req;

/* The adapter's record: the door embeds it, zeroed, in its request's
 * record; submit_start() fills it from a submit_req. */
struct submit_work {
    /* The request's own record (core/reqlog.h), the door's: the adapter
     * writes the job's steps into it (parse_ns, from the door's handler
     * stamp to the submission; queue_ns, compute_ns; ran, what the job
     * did), on the door's thread, always before the outcome. */
    req_record *rec;
    job j;
    seq_params seq;
    seq_slot slot;         /* the chunk's, once admitted (its done() set) */
    seq_table *seqs;       /* NULL: not admitted, or its scan already ended */
    _Atomic int seq_state; /* where its end stands (submit.c) */
    bool seq_failed;       /* the outcome is its sequence's refusal */
    bool chunk_left;       /* its client had gone when its job ended */
    submit_from from;
    const submit_door *door;
    void *req;
    tallyd_server *s;
    sched *sched;
    uint64_t parse_ns;  /* handler_ns to submit_start() */
    int64_t timeout_ms; /* as chosen, for the deadline's words */
    /* The request's one outcome is its job's status and msg: the
     * scheduler's, a refusal's (the queue's, the sequence's), or a
     * chunk's end in its sequence that failed. */
};

/* Starts q's scan for req through door, the one place a job is filled:
 * see above. sc takes its job and seqs its chunk (both the API layer's,
 * borrowed; seqs may be NULL when q names no sequence). Door's thread. */
void submit_start(submit_work *w, const submit_door *door, void *req,
                  tallyd_server *s, sched *sc, seq_table *seqs,
                  const submit_req *q);

/* The deadline in milliseconds, 0 for none: the least of the bounds
 * that are set (> 0). transport_ms and protocol_ms are -1 when not given;
 * server_ms is --timeout-ms. */
static inline int64_t submit_deadline_ms(int64_t transport_ms,
                                         int64_t protocol_ms, int64_t server_ms)
{
    int64_t b[3] = {transport_ms, protocol_ms, server_ms}, ms = 0;
    for (int i = 0; i < 3; i++)
        if (b[i] > 0 && (ms == 0 || b[i] < ms))
            ms = b[i];
    return ms;
}

/* KServe's "timeout" parameter (microseconds) as the protocol's deadline
 * in milliseconds, rounded up; -1 when not given. */
static inline int64_t submit_protocol_ms(bool given, int64_t us)
{
    if (!given)
        return -1;
    return us > 0 ? (us + 999) / 1000 : 0;
}

/* The queued job's end, on the door's thread after door->resume(req).
 * `left`: the door already knows its client has gone (checked beside
 * door->gone). */
void submit_finish(submit_work *w, bool left);

#endif
