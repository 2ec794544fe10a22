/*
 * http.h - the transport: libmicrohttpd connections, routing through a
 * table, and suspend/resume (bodies: body.h; TLS files: tls.h;
 * admission: admit.h).
 *
 * http.c owns the request lifecycle. It reads the body into a capped
 * buffer, decodes its Content-Encoding, finds the route in the table that
 * tallyd hands to http_start(), and calls the route's handler once the
 * body is complete. The handler answers at once (reply.h) or suspends the
 * request (http_suspend) while work runs elsewhere; whoever finishes that
 * work calls http_resume() from any thread, and the transport then runs
 * the continuation on an HTTP thread and sends its reply.
 *
 * The transport never includes a handler, nor anything that knows what
 * the requests ask for: routes come in as a table.
 *
 * Its threads are its own (loops.c): --http-threads libuv loops, each
 * with a thread, each driving one libmicrohttpd daemon in its external
 * epoll mode; the daemons share one listening socket, and each serves
 * the connections it accepts from start to end. A loop is where the
 * routes' own per-loop state lives (http_routes's loop_open: a shared
 * store's connection), so that what a request waits for can be read on
 * the thread that answers it.
 */
#ifndef TALLY_HTTP_HTTP_H
#define TALLY_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <stdatomic.h>
#include <uv.h>

#include "admit.h"
#include "auth.h"
#include "conns.h"
#include "cors.h"
#include "loop_owner.h"
#include "counters.h"
#include "request.h"
#include "router.h"

/* The transport's state. The daemon (tallyd.c) owns it; it sets auth
 * before http_start() (NULL: no token required) and reloads the tokens
 * through it (auth.h's own lock); http_start() fills the rest.
 * Threading: the loop thread starts, sweeps, quiesces and stops it;
 * the HTTP threads (http/loops.c: libuv loops, each driving one
 * libmicrohttpd daemon, which starts no thread of its own) serve through
 * it. */
typedef struct http_loop http_loop;

typedef struct http_transport {
    tallyd_server *s; /* settings, counters, drain state (borrowed) */
    const http_routes *routes; /* borrowed: must outlive the daemon */
    auth_tokens *auth;
    http_loop *loops; /* nloops of them, each a daemon and its thread */
    unsigned nloops;
    atomic_uint quiesced; /* loops whose daemons stopped accepting */
    unsigned port; /* the port actually bound */
    bool tls;      /* serving HTTPS */
    http_conns *conns;         /* open connections' deadlines (conns.h) */
    http_admit *admit;         /* connection counts, for the limits */
    http_cors *cors;           /* --cors-origins; NULL: CORS off */
    /* refused connections not yet logged, and when that was last done */
    atomic_ullong refused_unlogged, refused_logged_ns;
    atomic_llong open_connections; /* state: drain waits on it */
    http_counters c;
} http_transport;

/* Starts --http-threads loops with a libmicrohttpd daemon each on
 * s->cfg.listen (and fills t->port), serving the routes in `routes`
 * (borrowed: it must outlive the daemons). False with msg when it
 * cannot. Loop thread. */
bool http_start(http_transport *t, tallyd_server *s, const http_routes *routes,
                char *msg, size_t msglen);

/* Closes the connections that have not sent a whole request in time
 * (--idle-timeout to its first line, --request-timeout from there to the
 * end of its body), counts and logs them. Loop thread, every 100 ms. */
void http_sweep(http_transport *t);

/* Stops accepting new connections (SIGTERM): each loop takes its daemon
 * off the listening socket, and the last one shuts the socket down, so
 * that new connections are refused; in-flight requests go on. Loop
 * thread; the loops do it a moment later. */
void http_quiesce(http_transport *t);

/* Stops the loops and their daemons; call only when no request is in
 * flight. Loop thread. */
void http_stop(http_transport *t);

/* Serves fd, a connected stream socket, as a connection of the first
 * loop's daemon (the fuzz harness's socket pairs): handed to its thread,
 * which adds it. Any thread. */
void http_adopt(http_transport *t, int fd);

/* Connections open now. Any thread. */
long long http_open_connections(http_transport *t);

/* Appends the transport's section of /metrics. Any thread. */
void http_render_metrics(http_transport *t, textbuf *o);

/*
 * Suspends r until http_resume(r). Call from a handler, at most once per
 * request. Under r's handshake lock it calls start(arg), which hands the
 * work to whoever will call http_resume() (pushes a job, say), and
 * suspends the connection only if start succeeds, so that the resume can
 * never come before the suspend. Takes a reference to r for the resumer.
 * True when suspended: on_resume then runs on an HTTP thread after
 * http_resume() and replies. False when start failed: nothing was taken,
 * and the handler still has to reply.
 */
bool http_suspend(request *r, http_handler on_resume, bool (*start)(void *arg),
                  void *arg);

/* Resumes a request suspended by http_suspend() and drops the reference it
 * took. Any thread; exactly once per successful http_suspend(). on_resume
 * runs once after it, even when the client closes the connection first
 * (libmicrohttpd can read the end of the stream before it calls the
 * handler again): it then runs as the connection ends, with
 * http_client_left() true, and its reply is not sent. */
void http_resume(request *r);

/* The thread r belongs to, for OWNER_ASSERT (loop_owner.h): its loop's.
 * Any thread. */
loop_owner *http_request_owner(const request *r);

/* What the routes' loop_open gave r's loop (NULL: nothing). HTTP thread. */
void *http_loop_data(const request *r);

/* True when r's connection has already ended: the client left while the
 * work was out. HTTP thread, in on_resume. */
bool http_client_left(request *r);

/* The request's client socket, to be watched while the request waits
 * (-1 when unknown). HTTP thread. */
int http_client_fd(request *r);

/* Marks r so that its continuation, once resumed, closes the connection
 * instead of answering: its client has gone, and the answer would only
 * fail. HTTP thread or the thread that resumes r, before the resume. */
void http_discard(request *r);

#endif
