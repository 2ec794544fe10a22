/*
 * http.h - requests and replies, between libmicrohttpd and the handlers.
 *
 * http.c owns the request lifecycle: it reads the body into a capped buffer,
 * decodes Content-Encoding, routes, and calls the route's handler once the
 * body is complete. A handler then either replies at once (http_reply_*,
 * http_error) or submits a scan (http_submit) with a finish function; the
 * connection is suspended while the job waits and runs, and finish is
 * called on an HTTP thread when it is resumed, to reply with the result or
 * the job's error.
 *
 * Memory: the body belongs to the request (a tally_buffer, see buffer.h). A
 * reply that answers with data inside the body (or inside the handler's
 * context, r->ctx) takes both over, and frees them when the response has been
 * sent.
 */
#ifndef TALLY_HTTP_H
#define TALLY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "server.h"

typedef struct request request;

typedef void (*handler_fn)(request *r);

struct request {
    tally_server *s;
    struct MHD_Connection *conn;
    char method[8];
    char *path; /* without the query string */
    char id[72];
    route_id metric_route;
    handler_fn handler;
    uint64_t t0_ns;

    uint8_t *body; /* tally_buffer_alloc'd; NULL when empty */
    size_t body_len, body_cap;
    bool body_too_large;

    /* the handler's parsed request, freed with ctx_free */
    void *ctx;
    void (*ctx_free)(void *ctx);

    /* the job, while it is queued or running */
    job job;
    handler_fn finish;

    /* the reply */
    int status;
    tally_err err;
    size_t bytes_out;
    bool accepts_gzip;
    char *extra_headers[8][2];
    int nextra;
    struct MHD_Response *response;

    /* suspend/resume handshake with the worker (see http_submit) */
    uv_mutex_t mu;
    bool suspended, job_done, queued;
    atomic_int refs;
};

/* Starts libmicrohttpd on cfg.listen (and fills s->port). */
tally_err http_start(tally_server *s, char *msg, size_t msglen);

/* Stops accepting new connections (SIGTERM); in-flight requests go on. */
void http_quiesce(tally_server *s);

/* Stops the daemon; call only when no request is in flight. */
void http_stop(tally_server *s);

/* Request accessors. */
const char *http_header(request *r, const char *name);
const char *http_query(request *r, const char *name);

/* Fails with a message naming the first query parameter not in allowed
 * (NULL-terminated); true when all are known. */
bool http_query_known(request *r, const char *const *allowed, char *msg,
                      size_t msglen);

/* Replies with {"error": "<message>"} and the status of e's band. */
void http_error(request *r, tally_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds a response header to the coming reply (copied). */
void http_add_header(request *r, const char *name, const char *value);

/* Replies with a malloc'd body, taking it. */
void http_reply_buffer(request *r, int status, const char *type, char *buf,
                       size_t len);

/* Replies with head (malloc'd, taken; may be NULL) followed by data, which
 * lies in r->body or r->ctx's memory: the reply takes both over. */
void http_reply_parts(request *r, int status, const char *type, char *head,
                      size_t head_len, const void *data, size_t data_len);

/* Replies with the text of a JSON writer (its data borrowed from r->body or
 * r->ctx, which the reply takes over); streamed when large. */
void http_reply_json(request *r, int status, json_writer *w);

/* Queues a scan of desc over inout (in place) and suspends the request;
 * `finish` replies once it has run. Tensors of at most --inline-max-elements
 * are summed at once instead, and finish is called before this returns.
 * timeout_ms < 0 takes the X-Timeout-Ms header or the server's default. On
 * failure (a full queue, draining) replies with the error itself and does
 * not call finish. */
void http_submit(request *r, const tally_scan_desc *desc, void *inout,
                 int64_t timeout_ms, handler_fn finish);

/* Reports a finished job's error as the reply; true if there was one. */
bool http_job_failed(request *r);

#endif
