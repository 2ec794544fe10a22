/*
 * dispatch.h - a job's life, from a handler's scan to its reply.
 *
 * A handler that has parsed a tensor calls dispatch_submit() with a finish
 * function that writes the answer. Dispatch owns everything in between:
 *   - the deadline: the X-Timeout-Ms header, the protocol's own timeout, or
 *     --timeout-ms;
 *   - the choice: tensors of at most --inline-max-elements (or, when they
 *     came as JSON text, --json-inline-max-elements) are summed at once on
 *     the HTTP thread; larger ones are queued for a device worker, and the
 *     request is suspended;
 *   - refusal: a full queue answers 503 with Retry-After, and so does a
 *     draining server;
 *   - running: workers call back into dispatch_run() with a batch of
 *     compatible jobs; it drops those whose deadline has passed and runs
 *     the rest as one launch (eng_scan_batch), timing it;
 *   - expiry: the loop thread's tick fails jobs that waited too long,
 *     and drops those whose client has closed its connection;
 *   - completion: every job completes once, through one path, which
 *     resumes the request; finish (or the job's error) then replies on an
 *     HTTP thread.
 *
 * Threading: dispatch_submit() on an HTTP thread; dispatch_run() on a
 * worker; dispatch_expire(), dispatch_start() and dispatch_stop() on the
 * loop thread. Completion crosses threads only through http_resume().
 */
#ifndef TALLY_DISPATCH_H
#define TALLY_DISPATCH_H

#include <stdint.h>

#include "http.h"

/* What the tensor came as, for the choice between summing it at once and
 * queueing it: a text tensor has already cost its parse (and will cost its
 * printing) on the HTTP thread, 10 to 50 times the sum, so a device hand-off
 * saves nothing until it is large. */
typedef enum { DISPATCH_BYTES, DISPATCH_TEXT } dispatch_from;

/* Scans desc over inout (in place; inout lies in r->body or r->ctx) and
 * calls finish to reply: at once for a small tensor, else after a worker
 * ran it. timeout_ms < 0 takes the X-Timeout-Ms header or the server's
 * default. When the scan cannot be queued or fails, dispatch replies with
 * the error itself and finish is never called. */
void dispatch_submit(request *r, const eng_scan_desc *desc, void *inout,
                     int64_t timeout_ms, dispatch_from from,
                     http_handler finish);

/* The same for a tensor laid out in its buffers as DirectML's buffer
 * tensors are (engine.h's eng_scan_strided): reads in through iv, writes
 * out through ov. The views and both buffers must live as long as the
 * request (in r->body or r->ctx). */
void dispatch_submit_strided(request *r, const eng_scan_desc *desc,
                             const eng_view *iv, const void *in,
                             const eng_view *ov, void *out, int64_t timeout_ms,
                             dispatch_from from, http_handler finish);

/* Starts the device workers, which run queued jobs through dispatch. */
eng_err dispatch_start(tallyd_server *s, char *msg, size_t msglen);

/* Closes the queue, lets the workers finish what it holds, and stops
 * them. */
void dispatch_stop(tallyd_server *s);

/* Fails the queued jobs whose deadline has passed (the loop's tick). */
void dispatch_expire(tallyd_server *s);

/* Drops the queued jobs whose client has closed its connection, unrun
 * (counted in tally_cancelled_total{when="queued"}); a job that is running
 * when its client goes finishes, and its answer is discarded (when
 * "running"). The loop's tick. */
void dispatch_cancel(tallyd_server *s);

#endif
