/*
 * submit.h - the HTTP front door's adapter to the scheduler: a parsed
 * request becomes a job (scheduler.h), and the job's end becomes a reply.
 *
 * A handler that has parsed a tensor calls submit_scan() with a finish
 * function that writes the answer. The adapter:
 *   - takes the deadline from the X-Timeout-Ms header, the protocol's own
 *     timeout (KServe's "timeout" parameter), or --timeout-ms;
 *   - sums tensors of at most --inline-max-elements (or, when they came as
 *     JSON text, --json-inline-max-elements) at once on the HTTP thread
 *     (sched_run_inline): for them a hand-off costs more than the sum;
 *   - suspends the request and queues larger ones (sched_submit), its
 *     connection's socket as the job's "has the client gone?" probe;
 *   - on the job's end resumes the request (the job's done runs on a
 *     worker or the loop thread; http_resume is safe from any thread), and
 *     then, on an HTTP thread, answers: finish, or the failure as an HTTP
 *     error (status.h), or nothing at all when the client has gone.
 *
 * Threading: submit_scan() and submit_strided() on an HTTP thread, from a
 * handler.
 */
#ifndef TALLY_API_SUBMIT_H
#define TALLY_API_SUBMIT_H

#include <stdint.h>

#include "http.h"

/* What the tensor came as, for the choice between summing it at once and
 * queueing it: a text tensor has already cost its parse (and will cost
 * its printing) on the HTTP thread, 4 to 60 times the sum at 64K elements
 * (BENCHMARKS.md, "What a JSON tensor costs beside its sum"), so a device
 * hand-off saves nothing until it is large. */
typedef enum { SUBMIT_BYTES, SUBMIT_TEXT } submit_from;

/* Scans desc over inout (in place; inout lies in r->body or r->ctx) and
 * calls finish to reply: at once for a small tensor, else after a worker
 * ran it. timeout_ms < 0 takes the X-Timeout-Ms header or the server's
 * default. When the scan cannot be queued or fails, the adapter replies
 * with the error itself and finish is never called. */
void submit_scan(request *r, const eng_scan_desc *desc, void *inout,
                 int64_t timeout_ms, submit_from from, http_handler finish);

/* The same from in to out (which may be in, or must not overlap it):
 * tensors in shared memory. Both must live as long as the request. */
void submit_scan_to(request *r, const eng_scan_desc *desc, const void *in,
                    void *out, int64_t timeout_ms, submit_from from,
                    http_handler finish);

/* The same for a tensor laid out in its buffers as DirectML's buffer
 * tensors are (engine.h's eng_scan_strided): reads in through iv, writes
 * out through ov. The views and both buffers must live as long as the
 * request (in r->body or r->ctx). */
void submit_strided(request *r, const eng_scan_desc *desc, const eng_view *iv,
                    const void *in, const eng_view *ov, void *out,
                    int64_t timeout_ms, submit_from from, http_handler finish);

#endif
