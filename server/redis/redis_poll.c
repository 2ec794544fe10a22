/*
 * redis_poll.c - hiredis's events on a libuv loop (redis_poll.h).
 *
 * An adapter of our own rather than hiredis's adapters/libuv.h (0.14 in
 * Debian 12): that one drops a poll whose status is an error, and libuv
 * reports a socket's POLLERR (a refused connect, a reset) as exactly
 * that, stopping the poll; hiredis then never learns, and a connect to a
 * port nobody listens on waits for ever. Ours hands such an event to
 * hiredis, which reads the socket's error and fails the connect or drops
 * the connection.
 */
#include <hiredis/async.h>
#include <stdbool.h>
#include <stdlib.h>
#include <uv.h>

#include "redis_poll.h"

/* A connected context's writes wait for the loop's prepare step
 * (rpoll_flush, before the loop next waits): hiredis asks for
 * writability after each command it queues and lets go once its buffer
 * is out, and libuv pays two epoll_ctl calls for each change of a poll,
 * and a turn of the loop for the writability it reports at once. So the
 * poll watches writability only while the socket has refused a write's
 * end, and a batch of commands is one write(2), in the same turn. */
typedef struct {
    redisAsyncContext *ac; /* NULL once hiredis let go */
    uv_poll_t h;
    int events;    /* what hiredis asked for */
    int armed;     /* what the poll watches */
    bool flush;    /* a write waits for the prepare step */
    bool flushing; /* in rpoll_flush: a write asked for is a real one */
} rpoll;

static void rpoll_cb(uv_poll_t *h, int status, int events)
{
    rpoll *p = h->data;
    if (p->ac == NULL)
        return;
    if (status < 0) {
        /* POLLERR (libuv stopped the poll): hiredis finds the error on
         * the socket, on a connect's write or a connection's read */
        if (!(p->ac->c.flags & REDIS_CONNECTED))
            redisAsyncHandleWrite(p->ac);
        else
            redisAsyncHandleRead(p->ac);
        return;
    }
    if (events & UV_READABLE)
        redisAsyncHandleRead(p->ac);
    if (p->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void rpoll_update(rpoll *p, int add, int del)
{
    p->events = (p->events | add) & ~del;
    int want = p->events;
    if ((want & UV_WRITABLE) && !p->flushing
        && (p->ac->c.flags & REDIS_CONNECTED)) {
        want &= ~UV_WRITABLE;
        p->flush = true;
    }
    if (want == p->armed)
        return;
    p->armed = want;
    if (want)
        uv_poll_start(&p->h, want, rpoll_cb);
    else
        uv_poll_stop(&p->h);
}

/* The writes hiredis asked for since the last turn, made now; one the
 * socket cannot take whole arms the poll (hiredis asks again, inside). */
static void rpoll_flush(rpoll *p)
{
    if (!p->flush || p->ac == NULL)
        return;
    p->flush = false;
    p->flushing = true;
    redisAsyncHandleWrite(p->ac); /* may let go of the context */
    p->flushing = false;
}

static void rpoll_add_read(void *d)
{
    rpoll_update(d, UV_READABLE, 0);
}
static void rpoll_del_read(void *d)
{
    rpoll_update(d, 0, UV_READABLE);
}
static void rpoll_add_write(void *d)
{
    rpoll_update(d, UV_WRITABLE, 0);
}
static void rpoll_del_write(void *d)
{
    rpoll_update(d, 0, UV_WRITABLE);
}

static void rpoll_closed(uv_handle_t *h)
{
    free(h->data);
}

static void rpoll_cleanup(void *d)
{
    rpoll *p = d;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->h, rpoll_closed);
}

bool redis_poll_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    rpoll *p = calloc(1, sizeof *p);
    if (p == NULL)
        return false;
    if (uv_poll_init(loop, &p->h, ac->c.fd) != 0) {
        free(p);
        return false;
    }
    p->ac = ac;
    p->h.data = p;
    ac->ev.data = p;
    ac->ev.addRead = rpoll_add_read;
    ac->ev.delRead = rpoll_del_read;
    ac->ev.addWrite = rpoll_add_write;
    ac->ev.delWrite = rpoll_del_write;
    ac->ev.cleanup = rpoll_cleanup;
    return true;
}

void redis_poll_flush(redisAsyncContext *ac)
{
    rpoll_flush(ac->ev.data);
}
