/*
 * request.h - one HTTP request, as the transport hands it to a handler.
 *
 * The transport (http/) creates a request when libmicrohttpd shows it the
 * headers, reads the body into it, and calls the route's handler once the
 * body is complete. The handler reads the body and the headers through
 * this interface, and answers with reply.h, or hands work to a layer above
 * the transport that suspends the request (http.h) and answers later.
 * The transport parses no tensor: the steps' times and the job's record
 * (ran) are filled by the layer that runs the work, for the request's
 * end (core/reqlog.h).
 *
 * Memory: the request owns its body (eng_buffer_alloc'd) and two attachments,
 * each freed with the request by its own free function:
 *   ctx/ctx_free     the handler's parsed request;
 *   work/work_free   what the layer that suspended the request keeps while
 *                    its work is out (the API's job record, api/submit_http.c).
 * A reply that answers with data inside the body or ctx takes both over
 * and frees them once the response has been sent (reply.h).
 *
 * Threading: a request belongs to the HTTP thread that serves its
 * connection. The only calls that may come from another thread are
 * http_resume() and request_release() (http.h).
 */
#ifndef TALLY_HTTP_REQUEST_H
#define TALLY_HTTP_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "server.h"
#include "status.h"
#include "trace.h"

typedef struct request request;

/* A route's handler, and the continuation of a suspended request: both
 * run on an HTTP thread and answer through reply.h. */
typedef void (*http_handler)(request *r);

struct request {
    tallyd_server *s;
    struct http_transport *t; /* the transport serving it */
    struct http_loop *loop;   /* the loop whose daemon serves it */
    struct MHD_Connection *conn;
    char method[8];
    const char *path; /* without the query string; in path_buf */
    char id[72];
    trace_ctx trace; /* W3C trace context: the caller's, continued, or new */
    char *tracestate; /* the caller's, when it sampled the trace; or NULL */
    http_handler handler;
    /* who is asking, decided at the headers (auth.h); AUTH_ANYONE when no
     * token was asked for */
    auth_caller caller;
    /* X-Timeout-Ms, REST's own deadline, checked at the headers (a bad one
     * is a 400 before the body is read); -1: not given */
    int64_t timeout_ms;
    /* The request's record (core/reqlog.h), carried from its arrival to
     * its end, where the transport hands it to req_end() as it is: the
     * route row's label, pattern and hook (rec.label, rec.route,
     * rec.ended), the stamps, the steps' times, the job's record, the
     * status and its reason, the bytes sent. Its strings point into this
     * request (method, path, id, trace, tracestate).
     *
     * Where the time went, step by step (0 for a step that did not
     * happen): the transport stamps rec.t0 (arrival), rec.body (the body
     * is complete), rec.handler (decoded; the handler starts) and
     * rec.reply (the reply is queued), and measures rec.decode_ns
     * (Content-Encoding) and rec.gzip_ns (compressing the reply as it is
     * sent). The layer that runs the work fills the rest: rec.parse_ns
     * (the handler, up to its scan), rec.queue_ns, rec.compute_ns,
     * rec.render_ns (writing the answer) and rec.ran (the job's stamps,
     * device and batch, for the spans). The reply sets rec.status (HTTP),
     * rec.err (why it failed) and rec.bytes_out. */
    req_record rec;

    uint8_t *body; /* eng_buffer_alloc'd; NULL when empty */
    size_t body_len, body_cap;
    size_t body_expect;   /* Content-Length; SIZE_MAX when not given */
    size_t body_reserved; /* of the server's --max-buffered-bytes */
    bool body_too_large, body_no_room;

    void *ctx; /* the handler's */
    void (*ctx_free)(void *ctx);
    void *work; /* the suspending layer's */
    void (*work_free)(void *work);

    /* the reply (its status, reason and bytes are in rec) */
    bool accepts_gzip;
    char *(*extra_headers)[2]; /* HTTP_EXTRA_MAX pairs, made at the first */
    int nextra;
    struct MHD_Response *response;

    /* The transport's own: the read state and the suspend/resume
     * handshake (http.c). Handlers never touch these. */
    int state;
    http_handler on_resume;
    uv_mutex_t mu;
    bool suspended;
    bool discard;           /* close instead of answering (http_discard) */
    bool client_left; /* the connection ended before on_resume ran */
    struct http_conn *link; /* the connection's deadline (conns.h) */
    atomic_int refs;
    char path_buf[]; /* the path, allocated with the request */
};

/* The body's bytes, never NULL: an empty body (which has no buffer) gives
 * a static one of zero length, so that the codecs need no special case.
 * Borrowed, valid while r is; write only within r->body_len. */
uint8_t *http_body(request *r);

/* The value of a request header, or NULL; borrowed, valid while r is. */
const char *http_header(request *r, const char *name);

/* The value of a query parameter, or NULL; borrowed, valid while r is. */
const char *http_query(request *r, const char *name);

/* Fails with a message naming the first query parameter not in allowed
 * (NULL-terminated); true when all are known. */
bool http_query_known(request *r, const char *const *allowed, char *msg,
                      size_t msglen);

/* Adds a response header to the coming reply (both strings copied; at most
 * HTTP_EXTRA_MAX such headers, later ones are dropped). */
#define HTTP_EXTRA_MAX 8
void http_add_header(request *r, const char *name, const char *value);

/* ------------------------------------------------------------------------
 * For the transport's own files.
 */

/* A new request with one reference (the connection's); NULL when memory
 * runs out. The id is X-Request-Id when that is a sane token, else a fresh
 * one drawn from s->next_id. */
request *request_new(struct http_transport *t, struct MHD_Connection *conn,
                     const char *url, const char *method);

/* Drops a reference; the last one frees the request, its body and both
 * attachments. Any thread. */
void request_release(request *r);

/* Seeds s->next_id from /dev/urandom, so that the logs of several replicas,
 * or of one daemon across restarts, do not share ids. */
void request_seed_ids(tallyd_server *s);

#endif
