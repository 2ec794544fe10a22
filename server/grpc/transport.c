/*
 * transport.c - the gRPC door's lifecycle (grpc.h): the listener, the resume
 * queue, drain and the sweep.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "grpc_int.h"
#include "log.h"

static void on_wake(uv_async_t *a)
{
    grpc_transport *t = a->data;
    uv_mutex_lock(&t->mu);
    grpc_call *list = t->resumed;
    t->resumed = NULL;
    uv_mutex_unlock(&t->mu);
    /* oldest first */
    grpc_call *rev = NULL;
    while (list != NULL) {
        grpc_call *n = list->next_resume;
        list->next_resume = rev;
        rev = list;
        list = n;
    }
    /* each connection sent to once, after all its calls have answered:
     * the answers that came back together leave in one write (a closed
     * connection is freed by its close callback, after this one) */
    grpc_conn *pumps = NULL;
    while (rev != NULL) {
        grpc_call *call = rev;
        rev = call->next_resume;
        call->suspended = false;
        grpc_conn *c = call->st ? call->st->conn : NULL;
        call->busy = true;
        call->on_resume(call);
        call->busy = false;
        if (!call->answered && !call->suspended && call->st != NULL)
            grpc_call_fail(call, STATUS_LAUNCH, "the handler gave no answer");
        h2_call_maybe_free(call);
        if (c != NULL && !c->pump_queued) {
            c->pump_queued = true;
            c->next_pump = pumps;
            pumps = c;
        }
    }
    while (pumps != NULL) {
        grpc_conn *c = pumps;
        pumps = c->next_pump;
        c->pump_queued = false;
        h2_conn_pump(c);
    }
}

static void on_self_wake(uv_timer_t *h)
{
    grpc_transport *t = h->data;
    on_wake(&t->wake);
}

/* The resume handles, on the loop's thread (the caller's). */
static void init_wakes(grpc_transport *t, uv_loop_t *loop)
{
    uv_mutex_init(&t->mu);
    uv_async_init(loop, &t->wake, on_wake);
    t->wake.data = t;
    uv_timer_init(loop, &t->self_wake);
    t->self_wake.data = t;
    loop_owner_set(&t->self);
}

void grpc_wake_self(grpc_transport *t)
{
    if (t->started)
        uv_timer_start(&t->self_wake, on_self_wake, 0, 0);
}

bool grpc_start(grpc_transport *t, tallyd_server *s, uv_loop_t *loop,
                const grpc_service *svc, auth_tokens *auth, char *msg,
                size_t msglen)
{
    return grpc_start_on(t, s, loop, svc, auth, true, NULL, msg, msglen);
}

bool grpc_start_on(grpc_transport *t, tallyd_server *s, uv_loop_t *loop,
                   const grpc_service *svc, auth_tokens *auth, bool listen,
                   atomic_llong *open_all, char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->svc = svc;
    t->auth = auth;
    t->loop = loop;
    t->open_all = open_all != NULL ? open_all : &t->open_connections;
    if (!h2_callbacks_init()) {
        snprintf(msg, msglen, "gRPC: out of memory");
        return false;
    }
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(s->cfg.grpc_listen, host, sizeof host,
                                    &port)) {
        snprintf(msg, msglen, "grpc-listen \"%s\" is not HOST:PORT",
                 s->cfg.grpc_listen);
        return false;
    }
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) != 0
        && uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr) != 0) {
        snprintf(msg, msglen, "grpc-listen: \"%s\" is not an IP address",
                 host);
        return false;
    }
    if (s->cfg.tls_cert[0] != '\0' || s->cfg.tls_key[0] != '\0') {
        t->tls = grpc_tls_new(s->cfg.tls_cert, s->cfg.tls_key, msg, msglen);
        if (t->tls == NULL)
            return false;
    }
    if (!listen) { /* another loop's: connections come through grpc_adopt */
        init_wakes(t, loop);
        t->started = true;
        if (svc->loop_open != NULL)
            t->loop_data = svc->loop_open(s, loop);
        return true;
    }
    uv_tcp_init(loop, &t->listener);
    t->listener.data = t;
    int rc = uv_tcp_bind(&t->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&t->listener, 1024, h2_on_connection);
    if (rc != 0) {
        snprintf(msg, msglen, "cannot listen for gRPC on %s: %s",
                 s->cfg.grpc_listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&t->listener, NULL);
        grpc_tls_free(t->tls);
        t->tls = NULL;
        return false;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&t->listener, (struct sockaddr *)&bound, &blen);
    t->port = ntohs(bound.ss_family == AF_INET6
                        ? ((struct sockaddr_in6 *)&bound)->sin6_port
                        : ((struct sockaddr_in *)&bound)->sin_port);
    init_wakes(t, loop);
    t->listening = t->started = true;
    if (svc->loop_open != NULL)
        t->loop_data = svc->loop_open(s, loop);
    return true;
}

void grpc_quiesce(grpc_transport *t)
{
    if (!t->started || t->quiescing)
        return;
    t->quiescing = true;
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    /* first a notice (streams the client opens meanwhile still count),
     * then, at the next sweep, the GOAWAY that names the last one */
    for (grpc_conn *c = t->conns; c != NULL; c = c->next) {
        if (c->closing)
            continue;
        h2_session_notice(c);
        c->notice_sent = true;
        h2_conn_pump(c);
    }
}

void grpc_sweep(grpc_transport *t)
{
    if (!t->started)
        return;
    tallyd_server *s = t->s;
    uint64_t now = now_ns();
    uint64_t idle = (uint64_t)s->cfg.idle_timeout_s * 1000000000u;
    uint64_t req = (uint64_t)s->cfg.request_timeout_s * 1000000000u;
    for (grpc_conn *c = t->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->closing)
            continue;
        if (t->quiescing && !c->goaway_sent) {
            h2_session_goaway(c);
            c->goaway_sent = true;
            atomic_fetch_add_explicit(&t->c.goaway_sent, 1,
                                      memory_order_relaxed);
        }
        for (gstream *st = c->streams; st != NULL; st = st->next) {
            if (req == 0 || st->rejected)
                continue;
            bool partial = st->pre.got != 0;
            bool waiting = !st->m || (!st->m->streaming && !st->got_message);
            uint64_t since = partial ? st->msg_started_ns : st->opened_ns;
            if ((partial || waiting) && now - since > req)
                h2_stream_fail(
                    st, STATUS_REQUEST_TIMEOUT,
                    "the request message did not arrive within "
                    "--request-timeout");
        }
        if (c->streams == NULL && idle != 0 && now - c->last_active_ns > idle
            && c->writes == 0) {
            h2_session_goaway(c);
            c->goaway_sent = true;
        }
        h2_conn_pump(c);
    }
}

void grpc_stop(grpc_transport *t)
{
    if (!t->started)
        return;
    /* the service's first: what it still had waiting there ends, and
     * resumes its calls, while the transport can take them */
    if (t->loop_data != NULL && t->svc->loop_close != NULL)
        t->svc->loop_close(t->s, t->loop_data);
    t->loop_data = NULL;
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    for (grpc_conn *c = t->conns; c != NULL; c = c->next)
        h2_conn_close(c);
    uv_close((uv_handle_t *)&t->wake, NULL);
    uv_close((uv_handle_t *)&t->self_wake, NULL);
    t->started = false;
    /* the sessions go with their connections' handles, before the loop
     * closes; the context is freed by then (OpenSSL counts its users) */
    grpc_tls_free(t->tls);
    t->tls = NULL;
}

long long grpc_open_connections(grpc_transport *t)
{
    return atomic_load(&t->open_connections);
}
