/*
 * conn.c - one gRPC connection (grpc_int.h): the socket, TLS input, reading
 * and closing.
 */
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "grpc_int.h"

static void conn_free(uv_handle_t *h)
{
    grpc_conn *c = h->data;
    grpc_transport *t = c->t;
    for (list_node *n; (n = list_first(&c->streams)) != NULL;)
        h2_stream_free(container_of(n, gstream, link));
    if (c->b != NULL) { /* built, never written */
        for (unsigned i = 0; i < c->b->ncalls; i++) {
            c->b->calls[i]->writes--;
            h2_call_maybe_free(c->b->calls[i]);
        }
        free(c->b->copy);
        free(c->b);
    }
    h2_session_close(c);
    grpc_tls_session_free(c->tls);
    free(c->plain);
    list_remove(&c->link);
    free(c->rbuf);
    free(c);
    atomic_fetch_sub(&t->open_connections, 1);
    atomic_fetch_sub(t->open_all, 1);
}

void h2_conn_close(grpc_conn *c)
{
    if (c->closing)
        return;
    if (c->in_session > 0) {
        c->close_pending = true;
        return;
    }
    c->closing = true;
    /* the calls go now: their jobs see them gone */
    for (list_node *n = list_first(&c->streams); n != NULL;
         n = list_next(&c->streams, n))
        h2_detach_calls(container_of(n, gstream, link), true);
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, conn_free);
}

void h2_conn_pump(grpc_conn *c)
{
    OWNER_ASSERT(&c->t->mb->owner);
    /* A send stops at WRITE_HIGH bytes built or queued; when the socket
     * took them all at once, nothing will call back: send again. */
    for (int round = 0; round < 64; round++) {
        if (c->closing)
            return;
        if (!h2_session_send(c)) {
            h2_conn_close(c);
            return;
        }
        h2_batch_flush(c);
        if (c->closing || c->writes > 0 || !h2_session_wants_write(c))
            break;
    }
    if (c->closing)
        return;
    if (!h2_session_wants_read(c) && !h2_session_wants_write(c)
        && c->writes == 0)
        h2_conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    grpc_conn *c = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)c->rbuf, READ_BUFFER);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    grpc_conn *c = s->data;
    if (n < 0) {
        h2_conn_close(c);
        return;
    }
    if (n == 0)
        return;
    c->last_active_ns = now_ns();
    counter_add(&c->t->c.bytes_in, (unsigned long long)n);
    if (c->tls == NULL) {
        if (!h2_session_input(c, (const uint8_t *)buf->base, (size_t)n)) {
            h2_conn_close(c);
            return;
        }
        h2_conn_pump(c);
        return;
    }
    if (!grpc_tls_input(c->tls, (const uint8_t *)buf->base, (size_t)n)) {
        h2_conn_close(c);
        return;
    }
    for (;;) {
        long got = grpc_tls_read(c->tls, c->plain, READ_BUFFER);
        if (got == 0)
            break;
        if (got < 0 || !h2_session_input(c, c->plain, (size_t)got)) {
            h2_tls_flush(c); /* an alert, say */
            h2_conn_close(c);
            return;
        }
        if (c->closing)
            return;
    }
    h2_tls_flush(c); /* the handshake's own records */
    h2_conn_pump(c);
}

/* A new connection: accepted from the listener (server != NULL), or an
 * open socket handed over (fd). */
static void conn_open(grpc_transport *t, uv_stream_t *server, int fd)
{
    grpc_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        if (server == NULL)
            close(fd);
        return;
    }
    list_init(&c->streams);
    c->t = t;
    c->rbuf = malloc(READ_BUFFER);
    uv_tcp_init(t->loop, &c->tcp);
    c->tcp.data = c;
    atomic_fetch_add(&t->open_connections, 1);
    long long open_all = atomic_fetch_add(t->open_all, 1) + 1;
    list_push_front(&t->conns, &c->link);
    if (t->tls != NULL) {
        c->tls = grpc_tls_accept(t->tls);
        c->plain = malloc(READ_BUFFER);
    }
    int rc = server != NULL ? uv_accept(server, (uv_stream_t *)&c->tcp)
                            : uv_tcp_open(&c->tcp, fd);
    if (rc != 0 || c->rbuf == NULL
        || (t->tls != NULL && (c->tls == NULL || c->plain == NULL))
        || t->quiescing
        || open_all > (long long)t->s->cfg.max_connections
        || !h2_session_open(c)) {
        counter_add(&t->c.refused, 1);
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, conn_free);
        return;
    }
    counter_add(&t->c.opened, 1);
    c->last_active_ns = now_ns();
    uv_tcp_nodelay(&c->tcp, 1); /* fails harmlessly on a socket pair */
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    h2_conn_pump(c);
}

void h2_on_connection(uv_stream_t *server, int status)
{
    grpc_transport *t = server->data;
    if (status < 0)
        return;
    if (t->door != NULL && t->door->n > 1)
        grpc_door_deal(t->door, server); /* may hand it to another loop */
    else
        conn_open(t, server, -1);
}

void grpc_accept_here(grpc_transport *t, uv_stream_t *server)
{
    conn_open(t, server, -1);
}

void grpc_adopt(grpc_transport *t, int fd)
{
    OWNER_ASSERT(&t->mb->owner);
    conn_open(t, NULL, fd);
}
