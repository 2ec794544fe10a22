/*
 * reply.h - answering a request: a status, a type and a body, gzipped when
 * the client accepts it and the body is worth it, streamed when large.
 *
 * A handler calls exactly one of these per request (a later call replaces
 * the earlier reply). The transport knows bytes, not formats: a body that
 * is rendered as it goes out (a large JSON tensor) comes as a stream. the
 * transport sends it when the handler returns, or when a suspended request's
 * continuation returns. Every failure goes out through http_error(), which
 * writes the {"error": "..."} body.
 *
 * Memory: each function says what it takes. A reply whose data lies inside
 * r->body or r->ctx takes both over from the request, and frees them once
 * the response has been sent.
 *
 * Threading: call on the HTTP thread that serves r.
 */
#ifndef TALLY_HTTP_REPLY_H
#define TALLY_HTTP_REPLY_H

#include <stddef.h>

#include "request.h"

/* Replies with a malloc'd body, taking it. */
void http_reply_buffer(request *r, int status, const char *type, char *buf,
                       size_t len);

/* Replies with len bytes at data, which outlive every response (built-in
 * or loaded at start-up, freed only after the transport stops): sent
 * from where they lie, not copied. */
void http_reply_static(request *r, int status, const char *type,
                       const void *data, size_t len);

/* Replies with head (malloc'd, taken; may be NULL) followed by data, which
 * lies in r->body or r->ctx's memory: the reply takes both over. */
void http_reply_parts(request *r, int status, const char *type, char *head,
                      size_t head_len, const void *data, size_t data_len);

/* A piece of a body: len bytes at base. */
#define HTTP_MAX_PIECES 10
typedef struct {
    const void *base;
    size_t len;
} http_piece;

/* Replies with n pieces (at most HTTP_MAX_PIECES), sent one after
 * another, that all lie in buf: a buffer from eng_buffer_alloc(), taken,
 * and freed once the response has been sent. Text rendered in parts is
 * sent from where each part was written, without joining them. */
void http_reply_pieces(request *r, int status, const char *type, void *buf,
                       const http_piece *pieces, int n);

/* Produces the next part of a streamed body into buf (at most max bytes)
 * and returns its length; 0 once the body is complete. */
typedef size_t (*http_body_read)(void *state, char *buf, size_t max);

/* Replies with a body of unknown length that read() produces from state,
 * sent chunked (and gzipped when the client accepts it). Takes state: it is
 * freed with state_free (may be NULL) once the response has been sent, or
 * at once when the reply cannot be made. The data read() reads from lies in
 * r->body or r->ctx, which the reply takes over. */
void http_reply_stream(request *r, int status, const char *type,
                       http_body_read read, void *state,
                       void (*state_free)(void *state));

/* The handler's context for r: size zeroed bytes, freed with free_fn
 * when r is (as is any context r had before, now); NULL, with r answered
 * (out of memory), when memory runs out. */
void *http_ctx_new(request *r, size_t size, void (*free_fn)(void *));

/* Replies with {"error": "<message>"} and e's HTTP status (status.h; with
 * Retry-After when a client may simply retry); records e for the metrics
 * and the access log. */
void http_error(request *r, status_code e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The body http_error() sends for msg: {"error": "..."}, valid UTF-8
 * whatever bytes msg holds (those of no valid sequence written as \xNN).
 * malloc'd (free it); NULL when memory runs out. Any thread. */
char *http_error_text(const char *msg);

#endif
