/*
 * body.h - a request's body, as it arrives: capped, budgeted, decoded.
 *
 * The buffer is sized from what arrives, never from what a client
 * announces: a Content-Length over --max-body-bytes is refused before a
 * byte is read; otherwise the first buffer holds at most 256 KiB, then the
 * announced length once that much has come (or doubling, for chunked
 * bodies), every byte of it taken first from the server's
 * --max-buffered-bytes. A Content-Encoding (gzip, deflate) is decoded into
 * an aligned buffer that counts against the same budget.
 *
 * Memory: the buffer is the request's (r->body); http_body_release() gives
 * its share of the budget back, and request_release() calls it.
 *
 * The transport hands it the headers it needs, so that nothing here calls
 * back into the request's other files.
 *
 * Threading: the HTTP thread that serves r; the budget is atomic.
 */
#ifndef TALLY_HTTP_BODY_H
#define TALLY_HTTP_BODY_H

#include <stddef.h>

#include "request.h"
#include "status.h"

/* The headers are in: checks Content-Length (cl; NULL when none was
 * sent) against --max-body-bytes (STATUS_TOO_LARGE, with msg) and
 * remembers it. */
status_code http_body_begin(request *r, const char *cl, char *msg,
                            size_t msglen);

/* Appends a piece of the body; a body past the cap or the budget is
 * remembered and refused by http_body_finish(). */
void http_body_append(request *r, const char *data, size_t n);

/* The body is complete: refuses one that was too large or found no room,
 * counts its bytes, and decodes its Content-Encoding (ce; NULL: identity)
 * in place of the raw bytes (timed in r->rec.decode_ns). */
status_code http_body_finish(request *r, const char *ce, char *msg,
                             size_t msglen);

/* Gives r's share of --max-buffered-bytes back. Any thread. */
void http_body_release(request *r);

#endif
