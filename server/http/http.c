/*
 * http.c - the request lifecycle on libmicrohttpd.
 *
 * libmicrohttpd calls on_access() several times per request: once with the
 * headers, once per piece of the body, once when the body is complete, and
 * once more after a suspended connection is resumed. The request's `state`
 * field says which of these it is in. The route is found from the headers
 * alone, so that a 404 or 405 goes out without reading the body. The body
 * is collected into a buffer sized from Content-Length (checked against
 * --max-body-bytes before anything is read: a 413 then goes out without
 * reading the body) or grown up to that cap for chunked uploads.
 *
 * Suspend/resume: http_suspend() starts the work and suspends the
 * connection while holding the request's mutex; http_resume() takes the
 * same mutex and resumes the connection only if it was suspended. So the
 * worker that finishes the work can never resume a connection that is not
 * suspended yet, which libmicrohttpd forbids.
 *
 * Lifetime: a request holds one reference for the connection and one while
 * it is suspended; it is freed when both are gone (on_completed, or
 * http_resume, whichever is last).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admit.h"
#include "auth.h"
#include "body.h"
#include "conns.h"
#include "content_coding.h"
#include "http.h"
#include "http_loops.h"
#include "log.h"
#include "reply.h"
#include "tls.h"

/* A request's read state; calloc makes a new one RQ_READING. */
enum { RQ_READING = 0, RQ_EARLY, RQ_SUSPENDED, RQ_RESUMED, RQ_REPLIED };

/* ------------------------------------------------------------------------
 * Suspend and resume.
 */
bool http_suspend(request *r, http_handler on_resume, bool (*start)(void *arg),
                  void *arg)
{
    OWNER_ASSERT(http_request_owner(r));
    atomic_fetch_add(&r->refs, 1); /* the resumer's */
    r->on_resume = on_resume;
    uv_mutex_lock(&r->mu);
    bool ok = start(arg);
    if (ok) {
        r->state = RQ_SUSPENDED;
        MHD_suspend_connection(r->conn);
        r->suspended = true;
    }
    uv_mutex_unlock(&r->mu);
    if (!ok)
        atomic_fetch_sub(&r->refs, 1);
    return ok;
}

void http_resume(request *r)
{
    uv_mutex_lock(&r->mu);
    bool resume = r->suspended;
    r->suspended = false;
    uv_mutex_unlock(&r->mu);
    if (resume) {
        MHD_resume_connection(r->conn);
        http_loop_wake(r->loop); /* its daemon runs it: external polling */
    }
    request_release(r);
}

loop_owner *http_request_owner(const request *r)
{
    static loop_owner none; /* a request no loop serves: a test's */
    return r->loop != NULL ? &r->loop->mb.owner : &none;
}

void *http_loop_data(const request *r)
{
    OWNER_ASSERT(http_request_owner(r));
    return r->loop != NULL ? r->loop->data : NULL;
}

/* The work is back: http_resume() ran after a successful suspend. */
static bool work_returned(request *r)
{
    uv_mutex_lock(&r->mu);
    bool back = r->state == RQ_SUSPENDED && !r->suspended;
    uv_mutex_unlock(&r->mu);
    return back;
}

bool http_client_left(request *r)
{
    OWNER_ASSERT(http_request_owner(r));
    return r->client_left;
}

int http_client_fd(request *r)
{
    OWNER_ASSERT(http_request_owner(r));
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci != NULL ? (int)ci->connect_fd : -1;
}

void http_discard(request *r)
{
    r->discard = true;
}

/* ------------------------------------------------------------------------
 * Deadlines (conns.h): until a request's first line has come, a connection
 * has --idle-timeout (from when it opened or its previous answer went
 * out); from the first line to the body's last byte, --request-timeout.
 * Nothing is timed while a request is worked on or answered. Deadlines
 * counted in seconds read the coarse clock (clock.h), as the sweep does.
 */
static uint64_t deadline_after(unsigned seconds)
{
    return seconds > 0 ? now_coarse_ns() + (uint64_t)seconds * 1000000000u
                       : 0;
}

static http_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* A request's first line has come (libmicrohttpd's URI logger, which runs
 * before on_access sees the headers). Returns the request's initial
 * context: none yet. */
static void *on_first_line(void *cls, const char *uri,
                           struct MHD_Connection *conn)
{
    http_transport *t = ((http_loop *)cls)->t;
    tallyd_server *s = t->s;
    (void)uri;
    http_conn_deadline(conn_of(conn), deadline_after(s->cfg.request_timeout_s));
    return NULL;
}

void http_sweep(http_transport *t)
{
    OWNER_ASSERT(&t->s->main_loop);
    tallyd_server *s = t->s;
    if (t->conns == NULL)
        return;
    size_t n = http_conns_sweep(t->conns, now_coarse_ns());
    if (n == 0)
        return;
    counter_add(&t->c.timed_out, n);
    log_msg("http", "warn",
            "closed %zu connections that did not send a whole request in "
            "time (--idle-timeout %u s to the first line, --request-timeout "
            "%u s from there to the body's end)",
            n, s->cfg.idle_timeout_s, s->cfg.request_timeout_s);
}

/* ------------------------------------------------------------------------
 * libmicrohttpd callbacks.
 */
static enum MHD_Result send_reply(request *r)
{
    r->state = RQ_REPLIED;
    if (r->rec.reply == 0) /* else stamped as the answer was written */
        r->rec.reply = now_ns();
    if (r->response == NULL) {
        static const char fallback[] = "{\"error\":\"internal error\"}";
        r->response = MHD_create_response_from_buffer(
            sizeof fallback - 1, (void *)fallback, MHD_RESPMEM_PERSISTENT);
        if (r->response == NULL)
            return MHD_NO;
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json");
        r->rec.status = 500;
        r->rec.bytes_out = sizeof fallback - 1;
    }
    for (int i = 0; i < r->nextra; i++)
        MHD_add_response_header(r->response, r->extra_headers[i][0],
                                r->extra_headers[i][1]);
    MHD_add_response_header(r->response, "X-Request-Id", r->id);
    char tp[TRACE_PARENT_LEN + 1];
    trace_format(&r->trace, tp);
    MHD_add_response_header(r->response, "traceparent", tp);
    if (atomic_load(&r->s->draining))
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION,
                                "close");
    enum MHD_Result rc =
        MHD_queue_response(r->conn, (unsigned)r->rec.status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return rc;
}

/* The body is complete: decode it and run the handler. */
static void body_complete(request *r)
{
    r->rec.body = now_ns();
    http_conn_deadline(r->link, 0);
    char msg[512];
    status_code e = http_body_finish(
        r, http_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING), msg, sizeof msg);
    if (e != STATUS_OK) {
        http_error(r, e, "%s", msg);
        return;
    }
    /* nothing but a decoding (timed on its own) lies between the two */
    r->rec.handler = r->rec.decode_ns ? now_ns() : r->rec.body;
    r->handler(r);
}

/* With --auth-token-file, whether r may use the route m found: the
 * route's access rule, then its Authorization header against the tokens;
 * r->caller is who it is, once and for the rest of the request.
 * When not, the 401 (with WWW-Authenticate, as RFC 6750 has it) is
 * written, to go out before any of the body is read. */
static bool authorized(request *r, const http_match *m)
{
    tallyd_server *s = r->s;
    auth_tokens *auth = r->t->auth;
    r->caller = AUTH_ANYONE;
    if (auth == NULL
        || (m->access == HTTP_ACCESS_HEALTH && !s->cfg.auth_health)
        || (m->access == HTTP_ACCESS_METRICS && !s->cfg.auth_metrics))
        return true;
    auth_result a = auth_check(
        auth, http_header(r, MHD_HTTP_HEADER_AUTHORIZATION), &r->caller);
    if (a == AUTH_OK)
        return true;
    bool missing = a == AUTH_MISSING;
    http_add_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                    missing
                        ? "Bearer realm=\"tally\""
                        : "Bearer realm=\"tally\", error=\"invalid_token\"");
    http_error(r, STATUS_UNAUTHORIZED, "%s",
               missing ? "this server requires a bearer token "
                         "(Authorization: Bearer <token>)"
                       : "the bearer token is not one this server accepts");
    return false;
}

/* The X-Timeout-Ms header, REST's deadline for the request (the API's
 * adapter chooses among the deadlines: submit.h): r->timeout_ms, -1 when
 * absent. One that is no non-negative integer of milliseconds is a 400,
 * written here to go out before any of the body is read, as gRPC refuses
 * a bad grpc-timeout at its headers. */
static bool deadline_header(request *r)
{
    const char *h = http_header(r, "X-Timeout-Ms");
    r->timeout_ms = -1;
    if (h == NULL)
        return true;
    char *end;
    errno = 0;
    long long v = strtoll(h, &end, 10);
    if (h[0] == '\0' || *end != '\0' || errno != 0 || h[0] == ' '
        || h[0] == '+') {
        http_error(r, STATUS_INVALID,
                   "X-Timeout-Ms must be an integer, not \"%.40s\"", h);
        return false;
    }
    if (v < 0) {
        http_error(r, STATUS_INVALID, "X-Timeout-Ms cannot be negative");
        return false;
    }
    r->timeout_ms = v;
    return true;
}

/* With --cors-origins, a request from an allowed Origin gets the CORS
 * headers on whatever it is answered (cors.h); true when it was a
 * preflight, now answered 204. */
static bool cors_headers(request *r, const http_match *m, const char *method)
{
    if (r->t->cors == NULL) /* CORS off: no Origin to look up */
        return false;
    const char *allow = http_cors_allow(r->t->cors, http_header(r, "Origin"));
    if (allow == NULL)
        return false;
    http_add_header(r, "Access-Control-Allow-Origin", allow);
    http_add_header(r, MHD_HTTP_HEADER_VARY, "Origin");
    if (strcmp(method, "OPTIONS") != 0 || m->status != 405
        || http_header(r, "Access-Control-Request-Method") == NULL) {
        http_add_header(r, "Access-Control-Expose-Headers", HTTP_CORS_EXPOSE);
        return false;
    }
    http_add_header(r, "Access-Control-Allow-Methods", m->allow);
    http_add_header(r, "Access-Control-Allow-Headers", HTTP_CORS_HEADERS);
    http_add_header(r, "Access-Control-Max-Age", HTTP_CORS_MAX_AGE);
    http_reply_buffer(r, 204, "text/plain", NULL, 0);
    return true;
}

/* An answer made from the headers alone (404, 405, 401, a preflight, a
 * refused body). When a body is coming it goes out at once, and
 * libmicrohttpd closes the connection rather than read a body nobody
 * wants; a request without one is answered on the next call, once
 * libmicrohttpd has the request whole, so that its connection stays open
 * (an answer queued from the first call closes it whatever the body). */
static enum MHD_Result early_reply(request *r)
{
    const char *cl = http_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    bool body = (cl != NULL && strcmp(cl, "0") != 0)
                || http_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
    if (body)
        return send_reply(r);
    r->state = RQ_EARLY;
    return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    (void)version;
    http_loop *l = cls;
    OWNER_ASSERT(&l->mb.owner);
    http_transport *t = l->t;
    request *r = *con_cls;

    if (r == NULL) {
        r = request_new(t, conn, url, method);
        if (r == NULL) {
            log_msg("http", "error",
                    "out of memory for a request; closing its connection");
            return MHD_NO;
        }
        r->loop = l;
        *con_cls = r;
        r->link = conn_of(conn);
        const char *ae = http_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING);
        r->accepts_gzip = encoding_accepts_gzip(ae);
        /* libmicrohttpd hands over the path without its query and with
         * its escapes undone, so a '?' here is a %3F of the path's own (a
         * region named "a?b"), not the start of a query. */
        http_match m;
        http_route_match(t->routes, method, r->path, &m);
        r->rec.label = m.label;
        r->rec.route = m.pattern;
        r->rec.ended = m.ended;
        r->handler = m.handler;
        if (cors_headers(r, &m, method))
            return early_reply(r); /* a preflight, answered */
        if (r->handler == NULL) {
            if (m.status == 405)
                http_add_header(r, MHD_HTTP_HEADER_ALLOW, m.allow);
            http_error(r, m.status == 405 ? STATUS_METHOD : STATUS_NOT_FOUND,
                       "%s", m.msg);
            return early_reply(r);
        }
        if (!authorized(r, &m) || !deadline_header(r))
            return early_reply(r);
        char msg[256];
        status_code e = http_body_begin(
            r, http_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH), msg, sizeof msg);
        if (e != STATUS_OK) {
            http_error(r, e, "%s", msg);
            return send_reply(r);
        }
        return MHD_YES;
    }

    switch (r->state) {
    case RQ_EARLY: /* answered from its headers; the request is whole */
        if (*upload_size > 0) { /* a body after all (none was announced) */
            *upload_size = 0;
            return MHD_YES;
        }
        return send_reply(r);
    case RQ_READING:
        if (*upload_size > 0) {
            http_body_append(r, upload, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        body_complete(r);
        if (r->state == RQ_SUSPENDED)
            return MHD_YES; /* until http_resume() */
        return send_reply(r);
    case RQ_RESUMED:
    case RQ_SUSPENDED:
        /* called again after MHD_resume_connection */
        r->state = RQ_RESUMED;
        r->on_resume(r);
        if (r->discard) { /* the client has gone: close, quietly */
            r->state = RQ_REPLIED;
            r->rec.status = 499;
            return MHD_NO;
        }
        return send_reply(r);
    default:
        /* a reply went out before the body was read: discard the rest */
        *upload_size = 0;
        return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    OWNER_ASSERT(&((http_loop *)cls)->mb.owner);
    http_transport *t = ((http_loop *)cls)->t;
    tallyd_server *s = t->s;
    request *r = *con_cls;
    http_conn *k = conn_of(conn);
    bool timed_out = http_conn_timed_out(k);
    /* the next request on this connection, if any, starts its clock */
    http_conn_deadline(k, deadline_after(s->cfg.idle_timeout_s));
    if (r == NULL)
        return;
    *con_cls = NULL;
    uint64_t done = now_ns();
    if (timed_out && r->state == RQ_READING) {
        r->rec.status = 408; /* cut off by http_sweep */
        r->rec.err = STATUS_REQUEST_TIMEOUT;
    } else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK
               && r->state != RQ_REPLIED) {
        if (work_returned(r)) {
            /* resumed, but libmicrohttpd found the client gone before it
             * called on_access again: the continuation still runs, for
             * its accounting (http.h), and its reply goes nowhere */
            r->client_left = true;
            r->state = RQ_RESUMED;
            r->on_resume(r);
            r->state = RQ_REPLIED;
        }
        r->rec.status = 499; /* the client went away first */
    }
    req_record *rec = &r->rec;
    rec->failed = rec->status >= 400;
    rec->bytes_in = r->body_len;
    rec->done = done;
    rec->terminated =
        toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? 0 : (int)toe;
    rec->in_flight = true;
    req_end(s, rec);
    request_release(r);
}

/* A connection arrives (libmicrohttpd's accept policy callback, before it
 * is set up): admitted within --max-connections and
 * --max-client-connections (admit.h), else closed at once, counted, and
 * logged at most once a second (a client that opens thousands would flood
 * the log). */
static enum MHD_Result on_admit(void *cls, const struct sockaddr *addr,
                                socklen_t len)
{
    http_transport *t = ((http_loop *)cls)->t;
    tallyd_server *s = t->s;
    if (http_admit_enter(t->admit, addr, len))
        return MHD_YES;
    counter_add(&t->c.refused, 1);
    atomic_fetch_add(&t->refused_unlogged, 1);
    unsigned long long now = now_ns(), last = atomic_load(&t->refused_logged_ns);
    if (now - last < 1000000000u
        || !atomic_compare_exchange_strong(&t->refused_logged_ns, &last, now))
        return MHD_NO;
    unsigned long long n = atomic_exchange(&t->refused_unlogged, 0);
    log_msg("http", "warn",
            "refused %llu connections at the connection limits "
            "(--max-connections %u, --max-client-connections %u)",
            n, s->cfg.max_connections, s->cfg.max_client_connections);
    return MHD_NO;
}

/* Counts connections, so that operators (and the client's tests) can see
 * whether clients keep theirs alive, and registers them for their
 * deadlines. libmicrohttpd calls this with NOTIFY_CLOSED before it closes
 * the socket (conns.h relies on that). */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    http_transport *t = ((http_loop *)cls)->t;
    tallyd_server *s = t->s;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&t->c.opened, 1);
        atomic_fetch_add(&t->open_connections, 1);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL)
            *socket_context =
                http_conn_open(t->conns, (int)ci->connect_fd,
                               deadline_after(s->cfg.idle_timeout_s));
    } else {
        atomic_fetch_sub(&t->open_connections, 1);
        http_conn_close(t->conns, *socket_context);
        *socket_context = NULL;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *a = ci != NULL ? ci->client_addr : NULL;
        socklen_t alen = a == NULL                ? 0
                         : a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in);
        http_admit_leave(t->admit, a, alen);
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* what libmicrohttpd says when a handler closes a connection, which
     * tallyd does on purpose when the client has gone (http_discard) or
     * memory runs out; the access log has the request either way */
    if (strncmp(msg, "Application reported internal error", 35) == 0)
        return;
    /* a client gone, or cut off by http_sweep, while it sent a request:
     * the access log and the counters have those */
    if (strncmp(msg, "Connection socket is closed when reading request", 48)
        == 0)
        return;
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_msg("http", "warn", "libmicrohttpd: %s", msg);
}

static void add_option(struct MHD_OptionItem *opts, size_t *n,
                       enum MHD_OPTION option, intptr_t value, void *ptr)
{
    opts[(*n)++] = (struct MHD_OptionItem){option, value, ptr};
}

/* Starts loop i's daemon: the first binds the listening socket, the
 * others serve the same one (a duplicate: each daemon closes its own).
 * NULL when it cannot. */
static struct MHD_Daemon *start_daemon(http_transport *t, http_loop *l,
                                       unsigned flags, const struct addrinfo *ai,
                                       unsigned port, const char *cert,
                                       const char *key, int listen_fd)
{
    tallyd_server *s = t->s;
    struct MHD_OptionItem opts[16];
    size_t n = 0;
    add_option(opts, &n, MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, l);
    if (listen_fd < 0)
        add_option(opts, &n, MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr);
    else
        add_option(opts, &n, MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL);
    add_option(opts, &n, MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, l);
    add_option(opts, &n, MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, l);
    add_option(opts, &n, MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_first_line, l);
    add_option(opts, &n, MHD_OPTION_CONNECTION_TIMEOUT,
               (intptr_t)s->cfg.idle_timeout_s, NULL);
    /* the limits are tallyd's own (on_admit, the accept policy callback
     * above); libmicrohttpd's, each daemon's, is only a backstop well
     * above them, and it keeps no count per address */
    add_option(opts, &n, MHD_OPTION_CONNECTION_LIMIT,
               (intptr_t)(s->cfg.max_connections + 64u), NULL);
    /* 32 KiB: libmicrohttpd clears the pool for every request, so a larger
     * one slows small requests down more than it speeds large uploads up */
    add_option(opts, &n, MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 * 1024, NULL);
    add_option(opts, &n, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL);
    if (cert != NULL) {
        add_option(opts, &n, MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert);
        add_option(opts, &n, MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key);
        add_option(opts, &n, MHD_OPTION_HTTPS_PRIORITIES, 0,
                   s->cfg.tls_priorities);
    }
    add_option(opts, &n, MHD_OPTION_END, 0, NULL);
    return MHD_start_daemon(flags, (uint16_t)port, on_admit, l, on_access, l,
                            MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

/* The daemons, one a loop, on one listening socket: the first binds it,
 * the others take a copy. False with msg. */
static bool start_daemons(http_transport *t, unsigned n, unsigned flags,
                          const struct addrinfo *ai, unsigned port,
                          const char *cert, const char *key, char *msg,
                          size_t msglen)
{
    int listen_fd = -1;
    for (unsigned i = 0; i < n; i++) {
        http_loop *l = &t->loops[i];
        l->t = t;
        int fd = -1;
        if (i > 0 && (fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 0)) < 0)
            return msg_fail(msg, msglen,
                            "cannot share the listening socket: %s",
                            strerror(errno));
        l->mhd = start_daemon(t, l, flags, ai, port, cert, key, fd);
        if (l->mhd == NULL) {
            if (fd >= 0)
                close(fd);
            if (i > 0)
                return msg_fail(
                    msg, msglen,
                    "cannot start HTTP daemon %u (see the log above)", i);
            return msg_fail(msg, msglen,
                            "cannot listen on %s (in use? a bad certificate or "
                            "key? see the log above)",
                            t->s->cfg.listen);
        }
        t->nloops = i + 1;
        if (i > 0)
            continue;
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_LISTEN_FD);
        listen_fd = info != NULL ? info->listen_fd : -1;
        info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_BIND_PORT);
        t->port = info != NULL ? info->port : port;
        /* every daemon waits for the same socket, and only one of them
         * gets a connection: the others must not block */
        int fl = listen_fd >= 0 ? fcntl(listen_fd, F_GETFL) : -1;
        if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) != 0)
            return msg_fail(msg, msglen, "cannot set up the listening socket");
    }
    return true;
}

bool http_start(http_transport *t, tallyd_server *s, const http_routes *routes,
                char *msg, size_t msglen)
{
    OWNER_ASSERT(&s->main_loop);
    t->s = s;
    t->routes = routes;
    atomic_init(&t->quiesced, 0);
    if (!http_cors_parse(s->cfg.cors_origins, &t->cors, msg, msglen))
        return false;
    request_seed_ids(s);
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(s->cfg.listen, host, sizeof host, &port))
        return msg_fail(msg, msglen, "bad listen address");
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0)
        return msg_fail(msg, msglen, "cannot resolve listen host \"%s\": %s",
                        host, gai_strerror(rc));
    char *cert, *key;
    if (!http_tls_read(&s->cfg, &cert, &key, msg, msglen)) {
        freeaddrinfo(ai);
        return false;
    }
    unsigned n = s->cfg.http_threads > 1 ? s->cfg.http_threads : 1;
    t->conns = http_conns_new();
    t->admit = http_admit_new(s->cfg.max_connections,
                              s->cfg.max_client_connections);
    t->loops = calloc(n, sizeof *t->loops);
    /* external polling: each daemon runs on a loop of ours (loops.c) */
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                     | MHD_USE_ERROR_LOG
                     | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0)
                     | (cert != NULL ? MHD_USE_TLS : 0);
    t->tls = flags & MHD_USE_TLS;
    bool ok = (t->conns != NULL && t->admit != NULL && t->loops != NULL)
              || msg_fail(msg, msglen, "out of memory");
    ok = ok && start_daemons(t, n, flags, ai, port, cert, key, msg, msglen);
    freeaddrinfo(ai);
    free(cert);
    free(key);
    for (unsigned i = 0; i < t->nloops && ok; i++)
        ok = http_loop_start(&t->loops[i], msg, msglen);
    if (!ok) {
        http_stop(t);
        return false;
    }
    return true;
}

/* Each loop takes its daemon off the listening socket (the last one shuts
 * it down: new connections are refused), but the socket stays open until
 * http_stop(): closing it under a daemon's epoll set could hand its
 * number to another descriptor meanwhile. */
void http_quiesce(http_transport *t)
{
    OWNER_ASSERT(&t->s->main_loop);
    for (unsigned i = 0; i < t->nloops; i++)
        http_loop_quiesce(&t->loops[i]);
}

void http_stop(http_transport *t)
{
    OWNER_ASSERT(&t->s->main_loop);
    for (unsigned i = 0; i < t->nloops; i++)
        http_loop_stop(&t->loops[i]);
    for (unsigned i = 0; i < t->nloops; i++) {
        http_loop *l = &t->loops[i];
        if (l->mhd != NULL) /* closes (and unregisters) every connection */
            MHD_stop_daemon(l->mhd);
        l->mhd = NULL;
        if (l->quiesced_fd >= 0)
            close(l->quiesced_fd); /* its daemon no longer has it */
        l->quiesced_fd = -1;
    }
    free(t->loops);
    t->loops = NULL;
    t->nloops = 0;
    http_conns_free(t->conns);
    t->conns = NULL;
    http_admit_free(t->admit);
    t->admit = NULL;
    http_cors_free(t->cors);
    t->cors = NULL;
}

void http_adopt(http_transport *t, int fd)
{
    if (t->nloops == 0 || !http_loop_adopt(&t->loops[0], fd))
        close(fd);
}

long long http_open_connections(http_transport *t)
{
    return atomic_load(&t->open_connections);
}

void http_render_metrics(http_transport *t, textbuf *o)
{
    http_counters_render(&t->c, http_open_connections(t), o);
}
