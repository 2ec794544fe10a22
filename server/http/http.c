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
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accesslog.h"
#include "auth.h"
#include "buffer.h"
#include "conns.h"
#include "encoding.h"
#include "http.h"
#include "log.h"
#include "reply.h"

/* A request's read state; calloc makes a new one RQ_READING. */
enum { RQ_READING = 0, RQ_SUSPENDED, RQ_RESUMED, RQ_REPLIED };

/* ------------------------------------------------------------------------
 * Suspend and resume.
 */
bool http_suspend(request *r, http_handler on_resume, bool (*start)(void *arg),
                  void *arg)
{
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
    if (resume)
        MHD_resume_connection(r->conn);
    request_release(r);
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
    return r->client_left;
}

int http_client_fd(request *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci != NULL ? (int)ci->connect_fd : -1;
}

size_t http_clients_gone(const int *fds, size_t n, bool *gone)
{
    struct pollfd stack[64], *p = n <= 64 ? stack : calloc(n, sizeof *p);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        gone[i] = false;
    if (p == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        p[i].fd = fds[i]; /* a negative fd is ignored by poll */
        p[i].events = POLLIN;
        p[i].revents = 0;
    }
    if (poll(p, (nfds_t)n, 0) > 0)
        for (size_t i = 0; i < n; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            bool closed = (p[i].revents & (POLLHUP | POLLERR)) != 0;
            if (!closed && (p[i].revents & POLLIN) != 0) {
                /* readable: end of stream, or bytes of a next request */
                char b;
                ssize_t got = recv(p[i].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
                closed = got == 0;
            }
            gone[i] = closed;
            count += closed;
        }
    if (p != stack)
        free(p);
    return count;
}

void http_discard(request *r)
{
    r->discard = true;
}

/* ------------------------------------------------------------------------
 * Deadlines (conns.h): until a request's first line has come, a connection
 * has --idle-timeout (from when it opened or its previous answer went
 * out); from the first line to the body's last byte, --request-timeout.
 * Nothing is timed while a request is worked on or answered.
 */
static uint64_t deadline_after(unsigned seconds)
{
    return seconds > 0 ? now_ns() + (uint64_t)seconds * 1000000000u : 0;
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
    tallyd_server *s = cls;
    (void)uri;
    http_conn_deadline(conn_of(conn), deadline_after(s->cfg.request_timeout_s));
    return NULL;
}

void http_sweep(tallyd_server *s)
{
    if (s->conns == NULL)
        return;
    uint64_t now = now_ns();
    http_accesslog_tick(s->accesslog, now);
    size_t n = http_conns_sweep(s->conns, now);
    if (n == 0)
        return;
    atomic_fetch_add_explicit(&s->metrics.connections_timed_out, n,
                              memory_order_relaxed);
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
    r->reply_ns = now_ns();
    if (r->response == NULL) {
        static const char fallback[] = "{\"error\":\"internal error\"}";
        r->response = MHD_create_response_from_buffer(
            sizeof fallback - 1, (void *)fallback, MHD_RESPMEM_PERSISTENT);
        if (r->response == NULL)
            return MHD_NO;
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json");
        r->status = 500;
        r->bytes_out = sizeof fallback - 1;
    }
    for (int i = 0; i < r->nextra; i++)
        MHD_add_response_header(r->response, r->extra_headers[i][0],
                                r->extra_headers[i][1]);
    MHD_add_response_header(r->response, "X-Request-Id", r->id);
    if (atomic_load(&r->s->draining))
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION,
                                "close");
    enum MHD_Result rc =
        MHD_queue_response(r->conn, (unsigned)r->status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return rc;
}

/* Checks Content-Length against --max-body-bytes (a 413 goes out without
 * reading the body) and remembers it. Memory comes as the bytes do
 * (append_body), not as a client announces them. */
static bool begin_body(request *r)
{
    tallyd_server *s = r->s;
    r->body_expect = SIZE_MAX;
    const char *cl = http_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl == NULL)
        return true; /* chunked or empty: grown as it comes */
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (errno != 0 || *end != '\0')
        return true; /* libmicrohttpd rejects malformed lengths itself */
    if (n > s->cfg.max_body_bytes) {
        http_error(r, ENG_E_TOO_LARGE,
                   "the body is %llu bytes, more than the %zu this server "
                   "accepts (--max-body-bytes)",
                   n, s->cfg.max_body_bytes);
        return false;
    }
    r->body_expect = (size_t)n;
    return true;
}

/* A body's first buffer (a medium one, 256 KiB with its header): a
 * client that announces a large body and sends little holds no more. */
#define BODY_FIRST (((size_t)256 << 10) - 128)

/* Takes `more` bytes of room from the server's --max-buffered-bytes for
 * r; false when they are not there. */
static bool reserve_body(request *r, size_t more)
{
    tallyd_server *s = r->s;
    unsigned long long had = atomic_fetch_add_explicit(&s->buffered_bytes, more,
                                                       memory_order_relaxed);
    if (had + more > s->cfg.max_buffered_bytes) {
        atomic_fetch_sub_explicit(&s->buffered_bytes, more,
                                  memory_order_relaxed);
        return false;
    }
    r->body_reserved += more;
    return true;
}

void http_release_body_room(request *r)
{
    atomic_fetch_sub_explicit(&r->s->buffered_bytes, r->body_reserved,
                              memory_order_relaxed);
    r->body_reserved = 0;
}

static void append_body(request *r, const char *data, size_t n)
{
    size_t max = r->s->cfg.max_body_bytes;
    if (r->body_too_large || r->body_no_room)
        return;
    if (n > max - r->body_len) {
        r->body_too_large = true;
        return;
    }
    if (r->body_len + n > r->body_cap) {
        /* room for what has come: the first buffer, then the whole
         * announced length (one copy of at most the first), or doubling
         * up to the limit when no length was announced */
        size_t need = r->body_len + n, cap;
        if (r->body_expect != SIZE_MAX && need <= r->body_expect)
            cap = need <= BODY_FIRST && r->body_cap < BODY_FIRST
                      ? (r->body_expect < BODY_FIRST ? r->body_expect
                                                     : BODY_FIRST)
                      : r->body_expect;
        else
            for (cap = r->body_cap ? r->body_cap : 65536; cap < need;)
                cap = cap > max / 2 ? max : cap * 2;
        if (!reserve_body(r, cap - r->body_cap)) {
            r->body_no_room = true;
            return;
        }
        uint8_t *nb = eng_buffer_alloc(cap);
        if (nb == NULL) {
            r->body_no_room = true;
            return;
        }
        if (r->body_len)
            memcpy(nb, r->body, r->body_len);
        eng_buffer_free(r->body);
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
}

/* The body is complete: decode it and run the handler. */
static void body_complete(request *r)
{
    tallyd_server *s = r->s;
    r->body_ns = now_ns();
    http_conn_deadline(r->link, 0);
    if (r->body_too_large) {
        http_error(r, ENG_E_TOO_LARGE,
                   "the body is more than the %zu bytes this server accepts "
                   "(--max-body-bytes)",
                   s->cfg.max_body_bytes);
        return;
    }
    if (r->body_no_room) {
        http_error(r, ENG_E_NOMEM,
                   "the server holds as many request bodies in memory as it "
                   "may (--max-buffered-bytes); retry in a moment");
        return;
    }
    atomic_fetch_add_explicit(&s->metrics.bytes_in, r->body_len,
                              memory_order_relaxed);
    const char *ce = http_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
    int coding = encoding_parse(ce);
    if (coding < 0) {
        http_error(r, ENG_E_MEDIA_TYPE,
                   "Content-Encoding \"%.40s\" is not supported (gzip, "
                   "deflate and identity are)",
                   ce);
        return;
    }
    if (coding > 0 && r->body_len > 0) {
        uint64_t t = now_ns();
        uint8_t *plain;
        size_t plen;
        char msg[256];
        eng_err e =
            encoding_decode(coding, r->body, r->body_len, s->cfg.max_body_bytes,
                            &plain, &plen, msg, sizeof msg);
        if (e != ENG_E_OK) {
            http_error(r, e, "%s", msg);
            return;
        }
        /* copy into an aligned buffer: tensors are used in place; the
         * decoded body counts against --max-buffered-bytes too */
        if (plen > r->body_cap && !reserve_body(r, plen - r->body_cap)) {
            free(plain);
            http_error(r, ENG_E_NOMEM,
                       "the server holds as many request bodies in memory "
                       "as it may (--max-buffered-bytes); retry in a "
                       "moment");
            return;
        }
        uint8_t *aligned = eng_buffer_alloc(plen);
        if (aligned == NULL) {
            free(plain);
            http_error(r, ENG_E_NOMEM, "out of memory decoding the body");
            return;
        }
        memcpy(aligned, plain, plen);
        free(plain);
        eng_buffer_free(r->body);
        r->body = aligned;
        r->body_len = r->body_cap = plen;
        r->decode_ns = now_ns() - t;
    }
    r->handler_ns = now_ns();
    r->handler(r);
}

/* With --auth-token-file, whether r may use the route m found: the
 * route's access rule, then its Authorization header against the tokens.
 * When not, the 401 (with WWW-Authenticate, as RFC 6750 has it) is
 * written, to go out before any of the body is read. */
static bool authorized(request *r, const http_match *m)
{
    tallyd_server *s = r->s;
    if (s->auth == NULL
        || (m->access == HTTP_ACCESS_HEALTH && !s->cfg.auth_health)
        || (m->access == HTTP_ACCESS_METRICS && !s->cfg.auth_metrics))
        return true;
    http_auth_result a =
        http_auth_check(s->auth, http_header(r, MHD_HTTP_HEADER_AUTHORIZATION));
    if (a == HTTP_AUTH_OK)
        return true;
    bool missing = a == HTTP_AUTH_MISSING;
    http_add_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                    missing
                        ? "Bearer realm=\"tally\""
                        : "Bearer realm=\"tally\", error=\"invalid_token\"");
    http_error(r, ENG_E_UNAUTHORIZED, "%s",
               missing ? "this server requires a bearer token "
                         "(Authorization: Bearer <token>)"
                       : "the bearer token is not one this server accepts");
    return false;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    (void)version;
    tallyd_server *s = cls;
    request *r = *con_cls;

    if (r == NULL) {
        r = request_new(s, conn, url, method);
        if (r == NULL) {
            log_msg("http", "error",
                    "out of memory for a request; closing its connection");
            return MHD_NO;
        }
        *con_cls = r;
        r->link = conn_of(conn);
        const char *ae = http_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING);
        r->accepts_gzip = encoding_accepts_gzip(ae);
        char *q = strchr(r->path, '?');
        if (q != NULL)
            *q = '\0';
        http_match m;
        http_route_match(s->routes, method, r->path, &m);
        r->metric_route = m.metric;
        r->handler = m.handler;
        if (r->handler == NULL) {
            if (m.status == 405)
                http_add_header(r, MHD_HTTP_HEADER_ALLOW, m.allow);
            http_error(r, m.status == 405 ? ENG_E_METHOD : ENG_E_NOT_FOUND,
                       "%s", m.msg);
            return send_reply(r);
        }
        if (!authorized(r, &m) || !begin_body(r))
            return send_reply(r);
        return MHD_YES;
    }

    switch (r->state) {
    case RQ_READING:
        if (*upload_size > 0) {
            append_body(r, upload, *upload_size);
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
            r->status = 499;
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
    tallyd_server *s = cls;
    request *r = *con_cls;
    http_conn *k = conn_of(conn);
    bool timed_out = http_conn_timed_out(k);
    /* the next request on this connection, if any, starts its clock */
    http_conn_deadline(k, deadline_after(s->cfg.idle_timeout_s));
    if (r == NULL)
        return;
    *con_cls = NULL;
    uint64_t done = now_ns(), total = done - r->t0_ns;
    if (timed_out && r->state == RQ_READING) {
        r->status = 408; /* cut off by http_sweep */
        r->err = ENG_E_REQUEST_TIMEOUT;
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
        r->status = 499; /* the client went away first */
    }
    metrics_request(&s->metrics, r->metric_route, r->status, r->err, total, 0,
                    r->bytes_out);
    if (r->metric_route == ROUTE_NATIVE || r->metric_route == ROUTE_INFER)
        stats_request(&s->stats, r->status >= 200 && r->status < 300, total,
                      r->queue_ns, r->decode_ns + r->parse_ns, r->compute_ns,
                      r->render_ns + r->gzip_ns);
    http_accesslog_request(s->accesslog, r, done,
                           toe == MHD_REQUEST_TERMINATED_COMPLETED_OK
                               ? 0
                               : (int)toe);
    atomic_store(&s->last_done_ns, now_ns());
    atomic_fetch_sub(&s->metrics.inflight, 1);
    request_release(r);
}

/* Counts connections, so that operators (and the client's tests) can see
 * whether clients keep theirs alive, and registers them for their
 * deadlines. libmicrohttpd calls this with NOTIFY_CLOSED before it closes
 * the socket (conns.h relies on that). */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    tallyd_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&s->metrics.connections_opened, 1);
        atomic_fetch_add(&s->metrics.connections_open, 1);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL)
            *socket_context =
                http_conn_open(s->conns, (int)ci->connect_fd,
                               deadline_after(s->cfg.idle_timeout_s));
    } else {
        atomic_fetch_sub(&s->metrics.connections_open, 1);
        http_conn_close(s->conns, *socket_context);
        *socket_context = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    tallyd_server *s = cls;
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
    /* a connection closed as it came, at --max-connections or
     * --max-client-connections: counted, and logged at most once a second
     * (a client that opens thousands would flood the log) */
    if (strncmp(msg, "Server reached connection limit", 31) == 0) {
        atomic_fetch_add_explicit(&s->metrics.connections_refused, 1,
                                  memory_order_relaxed);
        atomic_fetch_add(&s->refused_unlogged, 1);
        unsigned long long now = now_ns(),
                           last = atomic_load(&s->refused_logged_ns);
        if (now - last < 1000000000u
            || !atomic_compare_exchange_strong(&s->refused_logged_ns, &last,
                                               now))
            return;
        unsigned long long n = atomic_exchange(&s->refused_unlogged, 0);
        log_msg("http", "warn",
                "refused %llu connections at the connection limits "
                "(--max-connections %u, --max-client-connections %u)",
                n, s->cfg.max_connections, s->cfg.max_client_connections);
        return;
    }
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

/* A PEM file's text, for --tls-cert and --tls-key: NUL-terminated, at
 * most 1 MiB. NULL with a message when it cannot be read. */
static char *read_pem(const char *flag, const char *path, char *msg,
                      size_t msglen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        eng_fail(msg, msglen, ENG_E_INVALID, "--%s %s: %s", flag, path,
                 strerror(errno));
        return NULL;
    }
    size_t cap = 1u << 20;
    char *text = malloc(cap + 1);
    size_t n = text != NULL ? fread(text, 1, cap + 1, f) : 0;
    bool ok =
        text != NULL && !ferror(f) && n <= cap && memchr(text, '\0', n) == NULL;
    if (ok) {
        text[n] = '\0';
        ok = strstr(text, "-----BEGIN ") != NULL;
    }
    fclose(f);
    if (!ok) {
        eng_fail(msg, msglen, ENG_E_INVALID,
                 "--%s %s: not a PEM file of at most 1 MiB", flag, path);
        free(text);
        return NULL;
    }
    return text;
}

/* --tls-cert and --tls-key, read for libmicrohttpd (which hands them to
 * GnuTLS while the daemon starts, and keeps no pointer to them after):
 * both, or neither. */
static bool read_tls(const tallyd_config *c, char **cert, char **key, char *msg,
                     size_t msglen)
{
    *cert = *key = NULL;
    bool has_cert = c->tls_cert[0] != '\0', has_key = c->tls_key[0] != '\0';
    if (!has_cert && !has_key)
        return true;
    if (has_cert != has_key) {
        eng_fail(msg, msglen, ENG_E_INVALID,
                 "HTTPS needs both --tls-cert and --tls-key");
        return false;
    }
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
        eng_fail(msg, msglen, ENG_E_INVALID,
                 "this libmicrohttpd was built without TLS");
        return false;
    }
    *cert = read_pem("tls-cert", c->tls_cert, msg, msglen);
    *key = *cert != NULL ? read_pem("tls-key", c->tls_key, msg, msglen) : NULL;
    if (*key == NULL) {
        free(*cert);
        *cert = NULL;
        return false;
    }
    return true;
}

eng_err http_start(tallyd_server *s, const http_routes *routes, char *msg,
                   size_t msglen)
{
    s->routes = routes;
    request_seed_ids(s);
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(s->cfg.listen, host, sizeof host, &port))
        return eng_fail(msg, msglen, ENG_E_INVALID, "bad listen address");
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "cannot resolve listen host \"%s\": %s", host,
                        gai_strerror(rc));
    char *cert, *key;
    if (!read_tls(&s->cfg, &cert, &key, msg, msglen)) {
        freeaddrinfo(ai);
        return ENG_E_INVALID;
    }
    s->conns = http_conns_new();
    s->accesslog = http_accesslog_new(s);
    if (s->conns == NULL || s->accesslog == NULL) {
        freeaddrinfo(ai);
        free(cert);
        free(key);
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL
                     | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (cert != NULL)
        flags |= MHD_USE_TLS;
    struct MHD_OptionItem opts[16];
    size_t n = 0;
    add_option(opts, &n, MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, s);
    add_option(opts, &n, MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr);
    add_option(opts, &n, MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed,
               s);
    add_option(opts, &n, MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection,
               s);
    add_option(opts, &n, MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_first_line,
               s);
    add_option(opts, &n, MHD_OPTION_CONNECTION_TIMEOUT,
               (intptr_t)s->cfg.idle_timeout_s, NULL);
    add_option(opts, &n, MHD_OPTION_CONNECTION_LIMIT,
               (intptr_t)s->cfg.max_connections, NULL);
    add_option(opts, &n, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
               (intptr_t)s->cfg.max_client_connections, NULL);
    /* 32 KiB: libmicrohttpd clears the pool for every request, so a larger
     * one slows small requests down more than it speeds large uploads up */
    add_option(opts, &n, MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 * 1024, NULL);
    add_option(opts, &n, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL);
    if (s->cfg.http_threads > 1)
        add_option(opts, &n, MHD_OPTION_THREAD_POOL_SIZE,
                   (intptr_t)s->cfg.http_threads, NULL);
    if (cert != NULL) {
        add_option(opts, &n, MHD_OPTION_HTTPS_MEM_CERT, 0, cert);
        add_option(opts, &n, MHD_OPTION_HTTPS_MEM_KEY, 0, key);
        add_option(opts, &n, MHD_OPTION_HTTPS_PRIORITIES, 0,
                   s->cfg.tls_priorities);
    }
    add_option(opts, &n, MHD_OPTION_END, 0, NULL);
    s->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_access, s,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    freeaddrinfo(ai);
    free(cert);
    free(key);
    if (s->mhd == NULL)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "cannot listen on %s (in use? a bad certificate or "
                        "key? see the log above)",
                        s->cfg.listen);
    s->tls = flags & MHD_USE_TLS;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL ? info->port : port;
    return ENG_E_OK;
}

void http_quiesce(tallyd_server *s)
{
    if (s->mhd == NULL)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void http_stop(tallyd_server *s)
{
    if (s->mhd != NULL)
        MHD_stop_daemon(s->mhd); /* closes (and unregisters) every connection */
    s->mhd = NULL;
    http_conns_free(s->conns);
    s->conns = NULL;
    http_accesslog_free(s->accesslog);
    s->accesslog = NULL;
}
