/*
 * grpc_int.h - the gRPC door's insides, shared by its files and by no one
 * else (grpc.h is the door's API):
 *   transport.c  the listener, the resume queue, drain and the sweep
 *                (grpc.h's lifecycle);
 *   loops.c      the door on several loops (grpc_door): the other
 *                loops' threads, started, asked to quiesce and stopped;
 *   grpc_counters.c  the door's section of /metrics;
 *   conn.c       one connection: the socket, TLS input, reading, closing;
 *   session.c    the nghttp2 session glue, the only file that includes
 *                nghttp2.h: callbacks, responses, trailers, GOAWAY;
 *   calls.c      streams and calls: a message becoming a call, the
 *                handler API (grpc_call_*), and a call's end (its record
 *                for core/reqlog.h);
 *   writes.c     the zero-copy write batch and TLS output;
 *   framing.c    gRPC's message prefix, grpc-timeout, grpc-message and
 *                decompression (framing.h; knows neither nghttp2 nor
 *                libuv).
 *
 * Objects and who owns them (each on its transport's loop thread: the
 * loop thread, or a gRPC loop thread's, loops.c):
 *   conn    one TCP connection and its nghttp2 session; in t->conns until
 *           its handle has closed.
 *   stream  one HTTP/2 stream (one RPC): its headers, the message being
 *           assembled, and the FIFO of its calls; nghttp2's stream user
 *           data, freed in on_stream_close (or when the conn goes).
 *   call    one request message and its answer. Alive while it is in its
 *           stream's FIFO (until its answer's last byte is handed to a
 *           write), while suspended (a job holds it), and while a write
 *           that points into its answer is in flight. When the stream
 *           goes first, the call is detached (st = NULL, gone = true) and
 *           lives on until the other two let go.
 *
 * Writes: nghttp2_session_send() runs with a send callback that copies
 * frame bytes (headers, settings, frame headers) into a batch, and a
 * send_data callback (NGHTTP2_DATA_FLAG_NO_COPY) that adds pointers into
 * the calls' answers to the batch: a tensor goes from where it was
 * scanned to the socket in one writev, never copied. Each batch is one
 * uv_write holding references on the calls it points into.
  *
 * Threading: everything here runs on its transport's loop thread (the
 * loop thread, or one of the gRPC loop threads), except what grpc.h
 * says any thread may call.
 */
#ifndef TALLY_GRPC_INT_H
#define TALLY_GRPC_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "budget.h"
#include "framing.h"
#include "grpc.h"
#include "grpc_tls.h"
#include "trace.h"

struct nghttp2_session;

#define FIRST_BUFFER ((size_t)256 * 1024)
#define MAX_HEADER_LIST 16384
#define STREAM_WINDOW (8 << 20)
#define CONN_WINDOW (64 << 20)
#define WRITE_HIGH ((size_t)8 << 20) /* queued bytes before sends wait */
#define READ_BUFFER 65536
#define BATCH_PIECES 64
#define BATCH_CALLS 32

typedef struct gstream gstream;

struct grpc_call {
    grpc_transport *t;
    gstream *st; /* NULL once detached */
    trace_ctx trace; /* its stream's, for the access line */
    char *tracestate; /* its stream's (taken), or NULL */
    const grpc_method *m;
    const grpc_service *svc; /* the service m is of */
    uint8_t *buf; /* the message's buffer (eng_buffer), msg inside it */
    uint8_t *msg;
    size_t len, reserved;
    void *work;
    void (*work_free)(void *);
    grpc_handler on_resume;
    atomic_bool gone;
    bool suspended, answered, counted;
    bool busy; /* a handler runs with it: not to be freed */
    unsigned writes; /* in-flight batches pointing into the answer */
    int64_t timeout_ms;
    uint8_t prefix[5];
    uint8_t *head;
    size_t head_len;
    const uint8_t *tail;
    size_t tail_len, total, sent;
    /* The call's record (core/reqlog.h), carried from its message to its
     * end (call_account hands it to req_end()): the method's label and
     * hook; the stamps (rec.t0: the message began, rec.body: it was
     * whole, rec.handler, rec.reply: the answer queued); the adapter's
     * steps and the job's record (rec.parse_ns, queue_ns, compute_ns,
     * ran); rec.err, the call's status. Its strings point into the call
     * (route, path, trace, tracestate). */
    req_record rec;
    char route[160]; /* "<service>/<method>" */
    char path[168];  /* "/<service>/<method>" */
    list_node link;           /* in its stream's calls while there */
    mailbox_item resume_item; /* in t->resumed */
};

struct gstream {
    grpc_conn *conn;
    int32_t id;
    const grpc_method *m;
    const grpc_service *svc;
    list_node link; /* in conn->streams */
    /* headers */
    size_t header_bytes;
    bool post, grpc_ct;
    char path[256];
    char auth[1100];
    bool has_auth;
    /* who is asking, decided at the headers (auth.h): borrowed from auth;
     * AUTH_ANYONE when no token was asked for */
    auth_caller caller;
    trace_ctx trace; /* W3C trace context: traceparent, continued, or new */
    char *tracestate; /* malloc'd, when the call sent one; or NULL */
    int64_t timeout_ms;
    int encoding; /* content_coding.h's, 0: identity */
    bool bad_encoding, bad_timeout;
    /* state */
    bool accepted, rejected, remote_closed, response_started, deferred,
        final_set, got_message;
    status_code final;
    char final_msg[512];
    uint64_t opened_ns, msg_started_ns;
    /* the message being assembled */
    grpc_prefix pre;
    bool compressed;
    size_t want; /* the message's length */
    uint8_t *buf;
    size_t lead, cap, got, reserved;
    /* calls, in arrival order: answers go from the first */
    list_node calls;
};

/* The stream's first call, whose answer goes next; NULL: none. */
static inline grpc_call *h2_first_call(const gstream *st)
{
    list_node *n = list_first(&st->calls);
    return n != NULL ? container_of(n, grpc_call, link) : NULL;
}

typedef struct {
    bool copy;
    size_t off; /* copy: offset in the batch's copy buffer */
    const uint8_t *p;
    size_t len;
} h2_piece;

typedef struct h2_batch {
    uv_write_t req;
    grpc_conn *conn;
    uint8_t *copy;
    size_t copy_len, copy_cap;
    h2_piece pieces[BATCH_PIECES];
    unsigned npieces;
    grpc_call *calls[BATCH_CALLS];
    unsigned ncalls;
    size_t bytes;
    uv_buf_t bufs[BATCH_PIECES];
} h2_batch;

struct grpc_conn {
    grpc_transport *t;
    uv_tcp_t tcp;
    struct nghttp2_session *h2; /* session.c's alone */
    list_node link; /* in t->conns */
    list_node streams; /* its open streams (gstream) */
    h2_batch *b;
    uint8_t *rbuf;
    grpc_tls_session *tls; /* NULL: h2c */
    uint8_t *plain;        /* decrypted bytes, with TLS */
    size_t queued; /* bytes in in-flight writes */
    unsigned writes;
    bool closing, notice_sent, goaway_sent;
    /* Inside nghttp2 (session.c's in_session): a close asked for there
     * (a write that failed while a callback filled a batch) waits for the
     * session call to return, since the callback still holds the call it
     * is sending and nghttp2 its streams. */
    unsigned in_session;
    bool close_pending;
    list_node pumping; /* in on_resumed's list of connections to send on */
    uint64_t last_active_ns;
};

/* --max-buffered-bytes, shared with the other door (budget.h) */
static inline bool h2_reserve(grpc_transport *t, size_t n)
{
    return budget_take(t->s, n);
}

static inline void h2_unreserve(grpc_transport *t, size_t n)
{
    budget_give(t->s, n);
}

/* conn.c */
/* Ends the connection: its calls are detached (their jobs see them gone)
 * and it is freed by its close callback. Inside nghttp2's callbacks it
 * only marks close_pending; the session call's caller closes it once
 * nghttp2 has returned (h2_session_send and h2_session_input say false). */
void h2_conn_close(grpc_conn *c);
/* Sends what the session has to send, then closes the connection if
 * neither side has more to say. */
void h2_conn_pump(grpc_conn *c);
void h2_on_connection(uv_stream_t *server, int status);
/* Accepts the listener's waiting connection into t (conn.c). */
void grpc_accept_here(grpc_transport *t, uv_stream_t *server);

/* session.c: the session, and what the other files ask of it */
bool h2_callbacks_init(void);
bool h2_session_open(grpc_conn *c); /* with our SETTINGS and window */
void h2_session_close(grpc_conn *c);
/* Plaintext from the client; false when the connection is to go. */
bool h2_session_input(grpc_conn *c, const uint8_t *data, size_t n);
bool h2_session_send(grpc_conn *c); /* false: the session failed */
bool h2_session_wants_read(grpc_conn *c);
bool h2_session_wants_write(grpc_conn *c);
void h2_session_notice(grpc_conn *c); /* drain, first step */
void h2_session_goaway(grpc_conn *c); /* GOAWAY naming the last stream */
/* Ends the stream with a failure (a status alone, or trailers after the
 * answers already sent). */
void h2_stream_fail(gstream *st, status_code code, const char *msg);
/* Starts or resumes the stream's response: its head call's answer. */
void h2_stream_respond(gstream *st);

/* calls.c */
void h2_call_maybe_free(grpc_call *call);
void h2_fifo_remove(gstream *st, grpc_call *call);
void h2_detach_calls(gstream *st, bool gone);
void h2_stream_free(gstream *st);
void h2_count_stream_failure(gstream *st, status_code code);
void h2_stream_headers_done(gstream *st);
void h2_stream_data(gstream *st, const uint8_t *data, size_t len);

/* writes.c */
bool h2_add_copy(grpc_conn *c, const uint8_t *data, size_t len);
bool h2_add_borrowed(grpc_conn *c, const uint8_t *p, size_t len,
                     grpc_call *call);
void h2_batch_flush(grpc_conn *c);
void h2_tls_flush(grpc_conn *c);

#endif
