/*
 * transport.c - the gRPC door's lifecycle (grpc.h): the listener, the resume
 * mailbox, drain and the sweep.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "grpc_int.h"

/* The resumed calls, oldest first. */
static void on_resumed(mailbox_rx *rx, mailbox_item *items)
{
    /* each connection sent to once, after all its calls have answered:
     * the answers that came back together leave in one write (a closed
     * connection is freed by its close callback, after this one) */
    list_node pumps;
    list_init(&pumps);
    (void)rx;
    while (items != NULL) {
        grpc_call *call = container_of(items, grpc_call, resume_item);
        items = items->next;
        call->suspended = false;
        grpc_conn *c = call->st ? call->st->conn : NULL;
        call->busy = true;
        call->on_resume(call);
        call->busy = false;
        if (!call->answered && !call->suspended && call->st != NULL)
            grpc_call_fail(call, STATUS_LAUNCH, "the handler gave no answer");
        h2_call_maybe_free(call);
        if (c != NULL && !list_linked(&c->pumping))
            list_push_back(&pumps, &c->pumping);
    }
    for (list_node *n; (n = list_first(&pumps)) != NULL;) {
        list_remove(n);
        h2_conn_pump(container_of(n, grpc_conn, pumping));
    }
}

/* The resumed calls' receiver, on the loop's mailbox; false: no room. */
static bool init_wakes(grpc_transport *t, char *msg, size_t msglen)
{
    if (mailbox_listen(t->mb, &t->resumed, 0, on_resumed, t))
        return true;
    return msg_fail(msg, msglen, "gRPC: the loop's mailbox has no room");
}

bool grpc_start_on(grpc_transport *t, tallyd_server *s, mailbox *mb,
                   const grpc_service *svc, auth_tokens *auth, bool listen,
                   atomic_llong *open_all, char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->svc = svc;
    t->auth = auth;
    t->mb = mb;
    t->loop = mb->loop;
    uv_loop_t *loop = mb->loop;
    list_init(&t->conns);
    t->open_all = open_all != NULL ? open_all : &t->open_connections;
    if (!h2_callbacks_init())
        return msg_fail(msg, msglen, "gRPC: out of memory");
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(s->cfg.grpc_listen, host, sizeof host,
                                    &port))
        return msg_fail(msg, msglen, "grpc-listen \"%s\" is not HOST:PORT",
                        s->cfg.grpc_listen);
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) != 0
        && uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr) != 0)
        return msg_fail(msg, msglen, "grpc-listen: \"%s\" is not an IP address",
                        host);
    if (s->cfg.tls_cert[0] != '\0' || s->cfg.tls_key[0] != '\0') {
        t->tls = grpc_tls_new(s->cfg.tls_cert, s->cfg.tls_key, msg, msglen);
        if (t->tls == NULL)
            return false;
    }
    /* without the listener, another loop's connections come through
     * grpc_adopt */
    if (listen) {
        uv_tcp_init(loop, &t->listener);
        t->listener.data = t;
        int rc = uv_tcp_bind(&t->listener, (const struct sockaddr *)&addr, 0);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&t->listener, 1024, h2_on_connection);
        if (rc != 0) {
            snprintf(msg, msglen, "cannot listen for gRPC on %s: %s",
                     s->cfg.grpc_listen, uv_strerror(rc));
            goto fail;
        }
        struct sockaddr_storage bound;
        int blen = sizeof bound;
        uv_tcp_getsockname(&t->listener, (struct sockaddr *)&bound, &blen);
        t->port = ntohs(bound.ss_family == AF_INET6
                            ? ((struct sockaddr_in6 *)&bound)->sin6_port
                            : ((struct sockaddr_in *)&bound)->sin_port);
    }
    if (!init_wakes(t, msg, msglen))
        goto fail;
    t->listening = listen;
    t->started = true;
    if (svc->loop_open != NULL)
        t->loop_data = svc->loop_open(s, mb);
    return true;
fail:
    if (listen)
        uv_close((uv_handle_t *)&t->listener, NULL);
    grpc_tls_free(t->tls);
    t->tls = NULL;
    return false;
}

void grpc_quiesce(grpc_transport *t)
{
    if (!t->started || t->quiescing)
        return;
    OWNER_ASSERT(&t->mb->owner);
    t->quiescing = true;
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    /* first a notice (streams the client opens meanwhile still count),
     * then, at the next sweep, the GOAWAY that names the last one */
    for (list_node *n = list_first(&t->conns); n != NULL;
         n = list_next(&t->conns, n)) {
        grpc_conn *c = container_of(n, grpc_conn, link);
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
    OWNER_ASSERT(&t->mb->owner);
    tallyd_server *s = t->s;
    uint64_t now = now_ns();
    uint64_t idle = (uint64_t)s->cfg.idle_timeout_s * 1000000000u;
    uint64_t req = (uint64_t)s->cfg.request_timeout_s * 1000000000u;
    /* a connection leaves the list when its handle has closed, after */
    for (list_node *n = list_first(&t->conns); n != NULL;
         n = list_next(&t->conns, n)) {
        grpc_conn *c = container_of(n, grpc_conn, link);
        if (c->closing)
            continue;
        if (t->quiescing && !c->goaway_sent) {
            h2_session_goaway(c);
            c->goaway_sent = true;
            counter_add(&t->c.goaway_sent, 1);
        }
        for (list_node *sn = list_first(&c->streams), *next; sn != NULL;
             sn = next) {
            next = list_next(&c->streams, sn); /* st may fail and go */
            gstream *st = container_of(sn, gstream, link);
            if (req == 0 || st->rejected)
                continue;
            bool partial = st->pre.got != 0;
            bool waiting = !st->m || (!st->m->streaming && !st->got_message);
            uint64_t since = partial ? st->msg_started_ns : st->opened_ns;
            if ((partial || waiting) && now - since > req)
                h2_stream_fail(st, STATUS_REQUEST_TIMEOUT,
                               "the request message did not arrive within "
                               "--request-timeout");
        }
        if (list_empty(&c->streams) && idle != 0 && now - c->last_active_ns > idle
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
    OWNER_ASSERT(&t->mb->owner);
    /* the service's first: what it still had waiting there ends, and
     * resumes its calls, while the transport can take them */
    if (t->loop_data != NULL && t->svc->loop_close != NULL)
        t->svc->loop_close(t->s, t->loop_data);
    t->loop_data = NULL;
    mailbox_drain(&t->resumed);
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    for (list_node *n = list_first(&t->conns); n != NULL;
         n = list_next(&t->conns, n))
        h2_conn_close(container_of(n, grpc_conn, link));
    /* a call resumed since runs now, its stream gone: it is freed */
    on_resumed(&t->resumed, mailbox_leave(&t->resumed));
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
