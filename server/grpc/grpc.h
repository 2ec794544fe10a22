/*
 * grpc.h - the gRPC front door's transport: HTTP/2 (nghttp2) on libuv,
 * gRPC's message framing, deadlines, compression, tokens and limits.
 *
 * It serves one service's methods (a table the API layer hands it), each
 * at /<service>/<method>. A request message, once whole (and decoded
 * when it came compressed), becomes a call handed to the method's
 * handler; the handler answers with grpc_call_reply() or grpc_call_fail(),
 * at once or, after grpc_call_suspend(), once grpc_call_resume() (any
 * thread) has brought the call back to the loop thread. A unary method's
 * call is the whole RPC: its answer is the response message and the
 * status. A streaming method (both ways) makes a call of every request
 * message; the answers go out in the order the messages came, and the
 * status (OK) once the client has half-closed and every call is answered.
 *
 * Before a message is read: the path must name a method (else
 * UNIMPLEMENTED), the content-type must be application/grpc, and with
 * --auth-token-file the `authorization` metadata must carry a token
 * (UNAUTHENTICATED), except for methods marked open (health checks, which
 * --auth-health closes too, as it does REST's). A message longer
 * than --max-body-bytes is refused (RESOURCE_EXHAUSTED) from its 5-byte
 * prefix, and memory follows the bytes that arrive: the first buffer
 * holds at most 256 KiB, then the announced length once that much has
 * come, every byte of it taken from --max-buffered-bytes. grpc-timeout is
 * the call's deadline (grpc_call_timeout_ms). grpc-encoding gzip and
 * deflate are decoded with REST's caps (core/content_coding.h).
 *
 * Abuse: at most --grpc-max-streams streams per connection (the SETTINGS
 * value; more are refused by nghttp2), --max-connections connections; a
 * header list over 16 KiB resets its stream; rapid resets beyond
 * nghttp2's rate limit, and SETTINGS or PING floods that leave acks
 * unread, end the connection with GOAWAY; a stream that sends no
 * END_STREAM is bounded by the budget and by --request-timeout.
 *
 * With --tls-cert and --tls-key (HTTPS's), the door speaks TLS and
 * requires ALPN "h2" (grpc_tls.h); without, h2c with prior knowledge.
 *
 * Drain: grpc_quiesce() closes the listener and sends GOAWAY to every
 * connection; calls already accepted are answered, and a connection
 * closes once its last stream has.
 *
 * Threading: everything of a transport runs on the thread that runs the
 * loop grpc_start_on() was given (the loop thread, or a gRPC loop
 * thread), asserted in the debug and sanitizer builds, except
 * grpc_call_resume() and grpc_call_gone(), which any thread may call,
 * and grpc_open_connections() and grpc_render_metrics(). A door on
 * several loops (grpc_door, below) is several transports, each on its
 * own loop's thread.
 */
#ifndef TALLY_GRPC_H
#define TALLY_GRPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "list.h"
#include "mailbox.h"
#include "server.h"
#include "status.h"
#include "textbuf.h"

typedef struct grpc_call grpc_call;
typedef void (*grpc_handler)(grpc_call *c);

typedef struct {
    const char *name;     /* the method: "ModelInfer" */
    grpc_handler handler; /* NULL: UNIMPLEMENTED, with `unimplemented` */
    bool streaming;       /* client and server streaming */
    bool open;            /* needs no token (health checks) */
    unsigned label;       /* the metrics label it counts under */
    /* For methods whose messages carry a large payload: its offset in
     * the message given the message's first n bytes (SIZE_MAX: not
     * known), so that a large message is placed with the payload on a
     * 128-byte boundary. NULL: none. */
    size_t (*bulk_offset)(const uint8_t *prefix, size_t n);
    /* Runs on the loop thread when a call of this method has ended,
     * after the transport has counted it: the API's own accounting
     * (Triton's statistics). NULL: none. */
    req_ended_fn ended;
} grpc_method;

typedef struct grpc_service {
    const char *service; /* "inference.GRPCInferenceService" */
    const grpc_method *methods;
    unsigned n;
    unsigned other_label; /* what calls of no method count under */
    /* Another service the door serves beside this one (grpc.health.v1.
     * Health), or NULL: a chain. The first's other_label counts calls of
     * no method. */
    const struct grpc_service *next;
    /* The service's own state on each loop that serves it (NULL: none;
     * the first service's, for the chain): loop_open runs on the loop's
     * thread once the transport has started there, loop_close there
     * first thing when it stops; the handlers of that loop's calls find
     * it with grpc_call_loop_data(). Given the loop's mailbox, as
     * router.h's loop_open is. */
    void *(*loop_open)(tallyd_server *s, mailbox *mb);
    void (*loop_close)(tallyd_server *s, void *data);
} grpc_service;

typedef struct {
    atomic_ullong opened, refused, calls, goaway_sent, resets_received,
        abuse_closed, bytes_in, bytes_out;
} grpc_counters;

typedef struct grpc_conn grpc_conn;

/* The transport's state. The daemon owns it; grpc_start_on() fills it. */
typedef struct {
    tallyd_server *s;           /* borrowed */
    const grpc_service *svc;    /* borrowed */
    auth_tokens *auth;          /* borrowed; NULL: no tokens needed */
    uv_loop_t *loop;
    uv_tcp_t listener;
    mailbox *mb;        /* the loop's */
    mailbox_rx resumed; /* resumed calls to run on the loop */
    list_node conns; /* every open connection (grpc_conn) */
    struct grpc_tls *tls; /* with --tls-cert: TLS with ALPN h2; else h2c */
    unsigned port;
    bool listening, quiescing, started;
    atomic_llong open_connections;
    /* every loop's connections (grpc_door), for --max-connections: the
     * door's count, or open_connections when the transport is alone */
    atomic_llong *open_all;
    /* the door whose first transport this is (it deals the connections
     * its listener accepts out to the door's loops); NULL: none */
    struct grpc_door *door;
    void *loop_data; /* what the service's loop_open gave; the loop's */
    grpc_counters c;
} grpc_transport;

/* On the loop of mb, that loop's mailbox (on which it takes a receiver,
 * for resumed calls): with `listen`, listens on s->cfg.grpc_listen
 * (HOST:PORT; fills t->port); without, the transport has no listener and
 * serves the connections grpc_adopt() gives it (a grpc_door's other
 * loops). open_all counts the connections of every transport of a door
 * (NULL: this one's alone). False with msg when it cannot. On the loop's
 * thread. */
bool grpc_start_on(grpc_transport *t, tallyd_server *s, mailbox *mb,
                   const grpc_service *svc, auth_tokens *auth, bool listen,
                   atomic_llong *open_all, char *msg, size_t msglen);

/* Serves fd, a connected stream socket (the fuzz harness's socket pairs),
 * as a connection it now owns. Loop thread. */
void grpc_adopt(grpc_transport *t, int fd);

/* Drain: closes the listener and sends GOAWAY on every connection; calls
 * in flight go on. Loop thread. */
void grpc_quiesce(grpc_transport *t);

/* Closes every connection and the handles; the loop must run once more
 * for the closes to finish. Call only when no call is in flight. */
void grpc_stop(grpc_transport *t);

/* Connections open now. Any thread. */
long long grpc_open_connections(grpc_transport *t);

/* Closes connections that have sent a stream's headers but not its whole
 * message within --request-timeout, and idle ones past --idle-timeout.
 * Loop thread, every 100 ms. */
void grpc_sweep(grpc_transport *t);

/* Appends the transport's section of /metrics. Any thread. */
void grpc_render_metrics(grpc_transport *t, textbuf *o);

/* The same for the transports t[0..n), their counters summed. */
void grpc_render_metrics_n(grpc_transport *t, unsigned n, textbuf *o);

/*
 * The door on several loops (--grpc-threads): n transports, t[0] on the
 * caller's loop (tallyd's main loop, which also runs the door's sweep and
 * drain for it) and each other one on a loop thread of its own, which
 * owns its connections end to end (reading, HTTP/2, calls, answers) and
 * sweeps them every 100 ms. One acceptor: t[0]'s listener accepts every
 * connection and deals them out in turn, keeping every n-th and handing
 * the others to their loops (the socket through a queue and an async).
 * One listening socket, so a second server on the same port still fails
 * to bind, as it would with one loop (SO_REUSEPORT would let it share the
 * port silently). A call resumed from any thread goes back to its own
 * loop (grpc_call_resume). Each transport counts on its own counters;
 * /metrics sums them, and --max-connections counts every loop's
 * connections together (one atomic, at accept). With n = 1 it is the one
 * transport as before.
 *
 * Threading: grpc_door_start, _quiesce, _sweep and _stop on the caller's
 * loop thread; _open_connections and _render_metrics on any thread.
 */
#define GRPC_MAX_LOOPS TALLYD_GRPC_THREADS_MAX /* config.h */

typedef struct grpc_loop grpc_loop;

typedef struct grpc_door {
    grpc_transport t[GRPC_MAX_LOOPS];
    grpc_loop *loops[GRPC_MAX_LOOPS]; /* [1..n): the threads' */
    mailbox mb; /* t[0]'s loop's (the caller's) */
    unsigned n;
    unsigned next; /* the loop the next connection goes to (t[0]'s loop) */
    atomic_llong open_all;
} grpc_door;

/* t[0]'s listener has a connection: accepts it into t[0] or hands it to
 * the next loop in turn. t[0]'s loop thread (conn.c). */
void grpc_door_deal(grpc_door *d, uv_stream_t *server);

/* Starts n (1..GRPC_MAX_LOOPS) transports, the first on loop, listening
 * on s->cfg.grpc_listen (d->t[0].port is the port), the others on threads
 * of their own. False with msg when any cannot start (those started are
 * stopped again). */
bool grpc_door_start(grpc_door *d, tallyd_server *s, uv_loop_t *loop,
                     unsigned n, const grpc_service *svc, auth_tokens *auth,
                     char *msg, size_t msglen);

/* grpc_quiesce() on every loop: the first at once, the others through
 * their loops (asynchronously). */
void grpc_door_quiesce(grpc_door *d);

/* grpc_sweep() of the first loop's transport (the others sweep
 * themselves). */
void grpc_door_sweep(grpc_door *d);

/* grpc_stop() on every loop, the threads joined. Call only when no call
 * is in flight (at the end of a drain). */
void grpc_door_stop(grpc_door *d);

long long grpc_door_open_connections(grpc_door *d);

void grpc_door_render_metrics(grpc_door *d, textbuf *o);

/* ---- a call (handlers; loop thread unless said) ---- */

/* The request message (decoded), modifiable, the call's until it ends. */
uint8_t *grpc_call_message(grpc_call *c, size_t *len);

/* The deadline grpc-timeout gave, in milliseconds; -1 when none. A
 * timeout too long to count (over 2^53 ns) is none. */
int64_t grpc_call_timeout_ms(const grpc_call *c);

/* Who is asking, as the door decided at the call's headers (auth.h);
 * AUTH_ANYONE when no token was asked for (or the stream has closed).
 * Borrowed, valid until the handler returns. */
auth_caller grpc_call_caller(const grpc_call *c);

/* The method the call is of. */
const grpc_method *grpc_call_method(const grpc_call *c);

/* The server the call came to. */
tallyd_server *grpc_call_server(const grpc_call *c);

/* The thread c belongs to, for OWNER_ASSERT (loop_owner.h): its loop's.
 * Any thread. */
loop_owner *grpc_call_owner(const grpc_call *c);

/* What the service's loop_open gave the call's loop (NULL: nothing). */
void *grpc_call_loop_data(const grpc_call *c);

/* A slot for the handler's own record, freed with free_fn when the call
 * is (after its answer is sent, or when the client has gone). */
void grpc_call_set_work(grpc_call *c, void *work, void (*free_fn)(void *));
void *grpc_call_work(grpc_call *c);

/* Answers with one response message: head (malloc'd, taken: the call
 * frees it, whatever happens; NULL when head_len is 0), then tail
 * (borrowed: it must stay valid until the call is freed, which is why it
 * is usually the call's work's memory). For a unary call, OK follows. */
void grpc_call_reply(grpc_call *c, void *head, size_t head_len,
                     const void *tail, size_t tail_len);

/* Answers with a failure: grpc-status from the status table (status.h),
 * grpc-message from fmt. On a streaming call it ends the whole RPC. */
void grpc_call_fail(grpc_call *c, status_code st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The handler returns without answering; on_resume runs on the loop
 * thread after grpc_call_resume(). Until then the call stays alive even
 * when its client goes. */
void grpc_call_suspend(grpc_call *c, grpc_handler on_resume);

/* Any thread, once per suspend: the call goes to its loop's mailbox
 * (core/mailbox.h), and on_resume runs there. */
void grpc_call_resume(grpc_call *c);

/* Takes back a suspend whose work never started (the scheduler refused
 * the job): the handler goes on answering. */
void grpc_call_unsuspend(grpc_call *c);

/* Server streaming: a call that follows c on c's stream, with no message
 * of its own, suspended (on_resume runs once grpc_call_resume() brings it
 * back, and answers it), so that a method answers one request with more
 * than one message over time (grpc.health.v1.Health's Watch). Its answer
 * goes out after c's; the stream's status waits for it. NULL when c's
 * stream has gone or memory ran out. Loop thread, from c's handler or a
 * resume of it. */
grpc_call *grpc_call_follow(grpc_call *c, grpc_handler on_resume);

/* Whether the client reset the stream or the connection went. Any
 * thread; cheap. A call whose client has gone may still be answered:
 * the answer is dropped. */
bool grpc_call_gone(const grpc_call *c);

/* The call's trace context; valid while the call is. */
const trace_ctx *grpc_call_trace(const grpc_call *c);

/* The call's record (core/reqlog.h), carried to its end: the layer
 * that runs its work fills the steps (parse_ns, queue_ns, compute_ns)
 * and what the job did (ran: stamps, device, batch, for its spans).
 * Valid while the call is; the loop thread. */
req_record *grpc_call_record(grpc_call *c);

/* The status the metrics count a call under when it was answered with a
 * message that reports a failure (a stream's error_message). */
void grpc_call_set_status(grpc_call *c, status_code st);

#endif
