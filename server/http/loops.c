/*
 * loops.c - the REST door's threads (http.h): each a libuv loop that
 * drives one libmicrohttpd daemon in its external epoll mode.
 *
 * A loop watches its daemon's epoll descriptor (readable: something for
 * the daemon to do) and a timer armed from MHD_get_timeout() after each
 * MHD_run(), which is 0 while the daemon has work left without a new
 * event (a resumed connection, data it has read but not yet handled).
 * Other threads reach a loop through its mailbox (core/mailbox.h):
 * http_resume() after MHD_resume_connection(), which libmicrohttpd
 * documents as safe from any thread but leaves to the application to act
 * on in its external modes; the quiesce and stop flags; and sockets to
 * adopt.
 *
 * Everything else of a loop (its daemon, its handles, the routes' state
 * on it) is its thread's, but for the daemon's start and its stop, on
 * tallyd's loop thread while the loop's thread is not running.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_loops.h"

#define ADOPT_MAX 64 /* sockets waiting for one loop at most */

typedef struct {
    mailbox_item it;
    int fd;
} adopted;

static void drive(http_loop *l);

static void on_timer(uv_timer_t *h)
{
    drive(h->data);
}

/* The daemon's turn: its events handled, and the timer set for its
 * next. */
static void drive(http_loop *l)
{
    OWNER_ASSERT(&l->mb.owner);
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

/* What came through the mailbox: sockets adopted, the flags, a run. */
static void on_mail(mailbox_rx *rx, mailbox_item *items)
{
    http_loop *l = rx->data;
    while (items != NULL) {
        adopted *a = (adopted *)items;
        items = items->next;
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (MHD_add_connection(l->mhd, a->fd, (struct sockaddr *)&sin,
                               sizeof sin)
            != MHD_YES)
            close(a->fd); /* refused: libmicrohttpd logged why */
        free(a);
    }
    if (atomic_load(&l->quiesce))
        quiesce(l);
    if (atomic_load(&l->stop)) {
        /* the routes' first: what they still had waiting there ends,
         * and resumes its requests, while the daemon can take them */
        if (l->data != NULL && l->t->routes->loop_close != NULL)
            l->t->routes->loop_close(l->t->s, l->data);
        l->data = NULL;
        for (mailbox_item *i = mailbox_leave(&l->rx), *n; i != NULL; i = n) {
            n = i->next;
            close(((adopted *)i)->fd);
            free(i);
        }
        mailbox_close(&l->mb);
        uv_close((uv_handle_t *)&l->poll, NULL);
        uv_close((uv_handle_t *)&l->timer, NULL);
        return; /* the loop ends once the closes have run */
    }
    drive(l);
}

static void loop_main(void *arg)
{
    http_loop *l = arg;
    mailbox_own(&l->mb);
    uv_run(&l->loop, UV_RUN_DEFAULT);
}

bool http_loop_start(http_loop *l, char *msg, size_t msglen)
{
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == NULL)
        return msg_fail(msg, msglen, "libmicrohttpd has no epoll descriptor");
    if (uv_loop_init(&l->loop) != 0)
        return msg_fail(msg, msglen, "cannot make an HTTP loop");
    uv_poll_init(&l->loop, &l->poll, info->epoll_fd);
    l->poll.data = l;
    uv_timer_init(&l->loop, &l->timer);
    l->timer.data = l;
    mailbox_init(&l->mb, &l->loop);
    mailbox_listen(&l->mb, &l->rx, ADOPT_MAX, on_mail, l);
    l->quiesced_fd = -1;
    /* before any request: its handlers may look for it */
    if (l->t->routes->loop_open != NULL)
        l->data = l->t->routes->loop_open(l->t->s, &l->mb);
    uv_poll_start(&l->poll, UV_READABLE, on_poll);
    uv_timer_start(&l->timer, on_timer, 0, 0); /* a first turn */
    if (uv_thread_create(&l->thread, loop_main, l) != 0) {
        if (l->data != NULL && l->t->routes->loop_close != NULL)
            l->t->routes->loop_close(l->t->s, l->data);
        l->data = NULL;
        uv_close((uv_handle_t *)&l->poll, NULL);
        uv_close((uv_handle_t *)&l->timer, NULL);
        mailbox_leave(&l->rx);
        mailbox_close(&l->mb);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l->loop);
        return msg_fail(msg, msglen, "cannot start an HTTP thread");
    }
    l->running = true;
    return true;
}

void http_loop_wake(http_loop *l)
{
    mailbox_post(&l->rx, NULL);
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
    l->running = false;
}

bool http_loop_adopt(http_loop *l, int fd)
{
    adopted *a = malloc(sizeof *a);
    if (a != NULL)
        a->fd = fd;
    if (a != NULL && mailbox_post(&l->rx, &a->it))
        return true;
    free(a);
    return false;
}
