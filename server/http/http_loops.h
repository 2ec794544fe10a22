/*
 * http_loops.h - the REST door's threads (loops.c), for http.c: one
 * libuv loop each, on a thread of its own, driving one libmicrohttpd
 * daemon started in its external epoll mode, with the loop as the
 * daemon's callbacks' closure.
 *
 * Threading: http_loop_start(), _quiesce() and _stop() on tallyd's loop
 * thread; _wake() and _adopt() from any thread; the rest of a loop is
 * its own thread's (an HTTP thread).
 */
#ifndef TALLY_HTTP_LOOPS_H
#define TALLY_HTTP_LOOPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "http.h"
#include "mailbox.h"

struct http_loop {
    http_transport *t;
    struct MHD_Daemon *mhd; /* started by http.c with this loop as cls */
    void *data;             /* the routes' loop_open's */
    uv_loop_t loop;
    uv_thread_t thread;
    uv_poll_t poll;   /* the daemon's epoll descriptor */
    uv_timer_t timer; /* MHD_get_timeout()'s */
    mailbox mb;       /* the loop's one */
    mailbox_rx rx;    /* its wakes, and sockets to adopt (http_loop_adopt) */
    atomic_bool quiesce, stop;
    bool quiesced;    /* the loop's */
    int quiesced_fd;  /* the listening socket the daemon gave back; -1 */
    bool running;     /* tallyd's loop thread's */
};

/* Makes l's loop and starts its thread, with l->t and l->mhd set; the
 * routes' loop_open runs first. False with msg (nothing is left
 * started). */
bool http_loop_start(http_loop *l, char *msg, size_t msglen);

/* Wakes l's loop to run its daemon (after MHD_resume_connection),
 * through its mailbox (from its own thread, a reply to a request read
 * there, before the loop next waits). Any thread. */
void http_loop_wake(http_loop *l);

/* Asks l's loop to take its daemon off the listening socket. */
void http_loop_quiesce(http_loop *l);

/* Stops l's loop and joins its thread (the routes' loop_close runs
 * there first); the daemon is left for MHD_stop_daemon(). A loop never
 * started: nothing. */
void http_loop_stop(http_loop *l);

/* Hands fd to l's loop, whose daemon adds it as a connection. False
 * when the loop has stopped or too many wait. */
bool http_loop_adopt(http_loop *l, int fd);

#endif
