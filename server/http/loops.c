/*
 * loops.c - the REST door's threads (http.h): each a libuv loop that
 * drives one libmicrohttpd daemon in its external epoll mode.
 *
 * A loop watches its daemon's epoll descriptor (readable: something for
 * the daemon to do) and a timer armed from MHD_get_timeout() after each
 * MHD_run(), which is 0 while the daemon has work left without a new
 * event (a resumed connection, data it has read but not yet handled).
 * Other threads reach a loop through its async handle: http_resume()
 * after MHD_resume_connection(), which libmicrohttpd documents as safe
 * from any thread but leaves to the application to act on in its
 * external modes; the quiesce and stop flags; and sockets to adopt.
 * The wake is sent under the loop's mutex, and the handle is closed
 * only under it, so no thread wakes a loop that has gone.
 *
 * Everything else of a loop (its daemon, its handles, the routes' state
 * on it) is its thread's, but for the daemon's start and its stop, on
 * tallyd's loop thread while the loop's thread is not running.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_loops.h"

#define ADOPT_MAX 64 /* sockets waiting for one loop at most */

static void drive(http_loop *l);

static void on_timer(uv_timer_t *h)
{
    drive(h->data);
}

/* The daemon's turn: its events handled, and the timer set for its
 * next. */
static void drive(http_loop *l)
{
    MHD_run(l->mhd);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(l->mhd, &ms) == MHD_YES)
        uv_timer_start(&l->timer, on_timer, ms, 0);
    else
        uv_timer_stop(&l->timer);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    drive(h->data);
}

/* The listening socket: the last loop to let go of it shuts it down,
 * so that new connections are refused rather than left in its queue. */
static void quiesce(http_loop *l)
{
    if (l->quiesced)
        return;
    l->quiesced = true;
    MHD_socket fd = MHD_quiesce_daemon(l->mhd);
    l->quiesced_fd = fd != MHD_INVALID_SOCKET ? fd : -1;
    http_transport *t = l->t;
    if (atomic_fetch_add(&t->quiesced, 1) + 1 == t->nloops
        && l->quiesced_fd >= 0)
        shutdown(l->quiesced_fd, SHUT_RDWR);
}

static void on_wake(uv_async_t *h)
{
    http_loop *l = h->data;
    int fds[ADOPT_MAX];
    uv_mutex_lock(&l->mu);
    unsigned n = l->nfds;
    memcpy(fds, l->fds, n * sizeof fds[0]);
    l->nfds = 0;
    uv_mutex_unlock(&l->mu);
    for (unsigned k = 0; k < n; k++) {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (MHD_add_connection(l->mhd, fds[k], (struct sockaddr *)&sin,
                               sizeof sin)
            != MHD_YES)
            close(fds[k]); /* refused: libmicrohttpd logged why */
    }
    if (atomic_load(&l->quiesce))
        quiesce(l);
    if (atomic_load(&l->stop)) {
        /* the routes' first: what they still had waiting there ends,
         * and resumes its requests, while the daemon can take them */
        if (l->data != NULL && l->t->routes->loop_close != NULL)
            l->t->routes->loop_close(l->t->s, l->data);
        l->data = NULL;
        uv_mutex_lock(&l->mu);
        l->closed = true;
        uv_close((uv_handle_t *)&l->wake, NULL);
        uv_mutex_unlock(&l->mu);
        uv_close((uv_handle_t *)&l->poll, NULL);
        uv_close((uv_handle_t *)&l->timer, NULL);
        return; /* the loop ends once the closes have run */
    }
    drive(l);
}

static void loop_main(void *arg)
{
    http_loop *l = arg;
    loop_owner_set(&l->self);
    uv_run(&l->loop, UV_RUN_DEFAULT);
}

bool http_loop_start(http_loop *l, char *msg, size_t msglen)
{
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == NULL) {
        snprintf(msg, msglen, "libmicrohttpd has no epoll descriptor");
        return false;
    }
    if (uv_loop_init(&l->loop) != 0) {
        snprintf(msg, msglen, "cannot make an HTTP loop");
        return false;
    }
    uv_mutex_init(&l->mu);
    uv_poll_init(&l->loop, &l->poll, info->epoll_fd);
    l->poll.data = l;
    uv_timer_init(&l->loop, &l->timer);
    l->timer.data = l;
    uv_async_init(&l->loop, &l->wake, on_wake);
    l->wake.data = l;
    l->quiesced_fd = -1;
    /* before any request: its handlers may look for it */
    if (l->t->routes->loop_open != NULL)
        l->data = l->t->routes->loop_open(l->t->s, &l->loop);
    uv_poll_start(&l->poll, UV_READABLE, on_poll);
    uv_timer_start(&l->timer, on_timer, 0, 0); /* a first turn */
    if (uv_thread_create(&l->thread, loop_main, l) != 0) {
        if (l->data != NULL && l->t->routes->loop_close != NULL)
            l->t->routes->loop_close(l->t->s, l->data);
        l->data = NULL;
        uv_close((uv_handle_t *)&l->poll, NULL);
        uv_close((uv_handle_t *)&l->timer, NULL);
        uv_close((uv_handle_t *)&l->wake, NULL);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l->loop);
        uv_mutex_destroy(&l->mu);
        snprintf(msg, msglen, "cannot start an HTTP thread");
        return false;
    }
    l->running = true;
    return true;
}

void http_loop_wake(http_loop *l)
{
    if (loop_owner_is_me(&l->self)) {
        /* the timer is this thread's (closed is written only here):
         * drive() before the loop next waits, which sets it again */
        if (!l->closed)
            uv_timer_start(&l->timer, on_timer, 0, 0);
        return;
    }
    uv_mutex_lock(&l->mu);
    if (!l->closed)
        uv_async_send(&l->wake);
    uv_mutex_unlock(&l->mu);
}

void http_loop_quiesce(http_loop *l)
{
    if (!l->running)
        return;
    atomic_store(&l->quiesce, true);
    http_loop_wake(l);
}

void http_loop_stop(http_loop *l)
{
    if (!l->running)
        return;
    atomic_store(&l->stop, true);
    http_loop_wake(l);
    uv_thread_join(&l->thread);
    uv_loop_close(&l->loop);
    uv_mutex_destroy(&l->mu);
    for (unsigned k = 0; k < l->nfds; k++)
        close(l->fds[k]);
    l->nfds = 0;
    l->running = false;
}

bool http_loop_adopt(http_loop *l, int fd)
{
    uv_mutex_lock(&l->mu);
    bool room = !l->closed && l->nfds < ADOPT_MAX;
    if (room) {
        l->fds[l->nfds++] = fd;
        uv_async_send(&l->wake);
    }
    uv_mutex_unlock(&l->mu);
    return room;
}
