/*
 * submit_http.h - the REST door's way into the adapter (submit.h).
 *
 * A handler that has parsed a tensor calls submit_scan() with a finish
 * function that writes the answer. The deadline is the tightest of the
 * X-Timeout-Ms header (r->timeout_ms: the transport checked it at the
 * headers, a bad one was a 400 before the body), the protocol's timeout
 * passed as timeout_ms (KServe's "timeout" parameter; -1: none) and
 * --timeout-ms (submit.h's submit_deadline_ms). The adapter then sums the
 * tensor at once or queues it, and finally either calls finish on an HTTP thread, or answers with
 * the failure as an HTTP error (status.h), or sends nothing when the
 * client has gone. The request's access-log steps (parse, queue, compute,
 * render) are filled on the way.
 *
 * Threading: an HTTP thread, from a handler.
 */
#ifndef TALLY_API_SUBMIT_HTTP_H
#define TALLY_API_SUBMIT_HTTP_H

#include <stdint.h>

#include "http.h"
#include "submit.h"

/* Scans desc over inout (in place; inout lies in r->body or r->ctx) and
 * calls finish to reply: at once for a small tensor, else after a worker
 * ran it. When the scan cannot be queued or fails, the adapter replies
 * with the error itself and finish is never called. seq: the sequence
 * the request is a chunk of (copied), or NULL. */
void submit_scan(request *r, const eng_scan_desc *desc, void *inout,
                 const seq_params *seq, int64_t timeout_ms, submit_from from,
                 http_handler finish);

/* The same from in to out (which may be in, or must not overlap it):
 * tensors in shared memory. Both must live as long as the request. */
void submit_scan_to(request *r, const eng_scan_desc *desc, const void *in,
                    void *out, const seq_params *seq, int64_t timeout_ms,
                    submit_from from, http_handler finish);

/* The same for a tensor laid out in its buffers as DirectML's buffer
 * tensors are (engine.h's eng_scan_strided): reads in through iv, writes
 * out through ov. The views and both buffers must live as long as the
 * request (in r->body or r->ctx). */
void submit_strided(request *r, const eng_scan_desc *desc, const eng_view *iv,
                    const void *in, const eng_view *ov, void *out,
                    int64_t timeout_ms, submit_from from, http_handler finish);

#endif
