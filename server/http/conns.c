/*
 * conns.c - the open connections and their deadlines (see conns.h).
 *
 * A list (list.h) under one mutex: connections come and go once per
 * connection, not per request, and a sweep every 100 ms walks a few
 * thousand of them at most.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <uv.h>

#include "conns.h"
#include "list.h"

struct http_conn {
    list_node link;
    int fd;
    atomic_ullong deadline_ns;
    atomic_bool timed_out;
};

struct http_conns {
    uv_mutex_t mu;
    list_node open;
    size_t n;
};

http_conns *http_conns_new(void)
{
    http_conns *c = calloc(1, sizeof *c);
    if (c != NULL && uv_mutex_init(&c->mu) != 0) {
        free(c);
        return NULL;
    }
    if (c != NULL)
        list_init(&c->open);
    return c;
}

void http_conns_free(http_conns *c)
{
    if (c == NULL)
        return;
    for (list_node *n; (n = list_first(&c->open)) != NULL;) {
        list_remove(n);
        free(container_of(n, http_conn, link));
    }
    uv_mutex_destroy(&c->mu);
    free(c);
}

http_conn *http_conn_open(http_conns *c, int fd, uint64_t deadline_ns)
{
    http_conn *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->fd = fd;
    atomic_init(&k->deadline_ns, deadline_ns);
    atomic_init(&k->timed_out, false);
    uv_mutex_lock(&c->mu);
    list_push_front(&c->open, &k->link);
    c->n++;
    uv_mutex_unlock(&c->mu);
    return k;
}

void http_conn_close(http_conns *c, http_conn *k)
{
    if (k == NULL)
        return;
    uv_mutex_lock(&c->mu);
    list_remove(&k->link);
    c->n--;
    uv_mutex_unlock(&c->mu);
    free(k);
}

void http_conn_deadline(http_conn *k, uint64_t deadline_ns)
{
    if (k != NULL)
        atomic_store_explicit(&k->deadline_ns, deadline_ns,
                              memory_order_relaxed);
}

bool http_conn_timed_out(const http_conn *k)
{
    return k != NULL && atomic_load(&k->timed_out);
}

size_t http_conns_sweep(http_conns *c, uint64_t now)
{
    size_t shut = 0;
    uv_mutex_lock(&c->mu);
    for (list_node *n = list_first(&c->open); n != NULL;
         n = list_next(&c->open, n)) {
        http_conn *k = container_of(n, http_conn, link);
        uint64_t d =
            atomic_load_explicit(&k->deadline_ns, memory_order_relaxed);
        if (d == 0 || d > now || atomic_load(&k->timed_out))
            continue;
        atomic_store(&k->timed_out, true);
        /* the peer sees the connection end; libmicrohttpd sees it too,
         * and closes it on its own thread */
        shutdown(k->fd, SHUT_RDWR);
        shut++;
    }
    uv_mutex_unlock(&c->mu);
    return shut;
}
