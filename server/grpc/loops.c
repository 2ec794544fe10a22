/*
 * loops.c - the gRPC door on several loops (grpc.h's grpc_door): one
 * transport on the caller's loop, whose listener accepts every
 * connection, and one more on each loop thread this file starts, which
 * serves the connections handed to it.
 *
 * A loop thread owns its loop and everything on it: its transport, the
 * transport's connections and calls, a timer that sweeps them every
 * 100 ms, and a mailbox (core/mailbox.h) through which other threads
 * reach it: the acceptor hands it sockets, and the caller's thread asks
 * it to quiesce or to stop (the flags). Nothing of one loop is
 * touched by another, but for those and the atomics grpc.h names.
 */
#define _DEFAULT_SOURCE /* dup3's O_CLOEXEC on some libcs */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc_int.h"

#define SWEEP_MS 100
#define HANDOFF_MAX 1024 /* sockets waiting for one loop at most */

typedef struct {
    mailbox_item it;
    int fd;
} handed;

struct grpc_loop {
    grpc_door *d;
    unsigned i; /* its transport: d->t[i] */
    uv_loop_t loop;
    uv_thread_t thread;
    uv_timer_t sweep;
    mailbox mb;     /* the loop's one */
    mailbox_rx ask; /* sockets the acceptor handed over; the flags' wakes */
    atomic_bool quiesce, stop;
    /* the start's outcome, for the caller waiting on `started` */
    uv_sem_t started;
    bool ok;
    char msg[256];
    /* what grpc_door_start passes to the transport's start */
    tallyd_server *s;
    const grpc_service *svc;
    auth_tokens *auth;
};

static void on_sweep(uv_timer_t *h)
{
    grpc_loop *l = h->data;
    grpc_sweep(&l->d->t[l->i]);
}

/* Closes the sockets of items (and frees them). */
static void drop_handed(mailbox_item *items)
{
    while (items != NULL) {
        mailbox_item *n = items->next;
        close(((handed *)items)->fd);
        free(items);
        items = n;
    }
}

static void on_ask(mailbox_rx *rx, mailbox_item *items)
{
    grpc_loop *l = rx->data;
    grpc_transport *t = &l->d->t[l->i];
    while (items != NULL) { /* a quiescing transport refuses it */
        mailbox_item *n = items->next;
        grpc_adopt(t, ((handed *)items)->fd);
        free(items);
        items = n;
    }
    if (atomic_load(&l->quiesce))
        grpc_quiesce(t);
    if (atomic_load(&l->stop)) {
        grpc_stop(t);
        uv_timer_stop(&l->sweep);
        uv_close((uv_handle_t *)&l->sweep, NULL);
        drop_handed(mailbox_leave(&l->ask));
        mailbox_close(&l->mb);
        /* the loop ends once the closes have run */
    }
}

static void loop_main(void *arg)
{
    grpc_loop *l = arg;
    grpc_transport *t = &l->d->t[l->i];
    /* the loop made here: its descriptors are this thread's from the start */
    if (uv_loop_init(&l->loop) != 0) {
        snprintf(l->msg, sizeof l->msg, "cannot make its loop");
        l->ok = false;
        uv_sem_post(&l->started);
        return;
    }
    mailbox_init(&l->mb, &l->loop);
    mailbox_own(&l->mb);
    mailbox_listen(&l->mb, &l->ask, HANDOFF_MAX, on_ask, l);
    l->ok = grpc_start_on(t, l->s, &l->mb, l->svc, l->auth, false,
                          &l->d->open_all, l->msg, sizeof l->msg);
    if (l->ok) {
        uv_timer_init(&l->loop, &l->sweep);
        l->sweep.data = l;
        uv_timer_start(&l->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    } else {
        mailbox_leave(&l->ask);
        mailbox_close(&l->mb);
    }
    uv_sem_post(&l->started);
    if (l->ok)
        uv_run(&l->loop, UV_RUN_DEFAULT);
    else
        uv_run(&l->loop, UV_RUN_NOWAIT); /* the failed start's closes */
    uv_loop_close(&l->loop);
}

/* Stops loop thread l (started or not) and frees it, with any socket
 * still waiting for it. */
static void loop_end(grpc_loop *l)
{
    if (l->ok) {
        atomic_store(&l->stop, true);
        mailbox_post(&l->ask, NULL);
    }
    uv_thread_join(&l->thread);
    uv_sem_destroy(&l->started);
    free(l);
}

/* The scratch handle a connection for another loop is accepted into,
 * closed once its socket has been duplicated for that loop. */
static void scratch_closed(uv_handle_t *h)
{
    free(h);
}

void grpc_door_deal(grpc_door *d, uv_stream_t *server)
{
    unsigned i = d->next;
    d->next = (d->next + 1) % d->n;
    grpc_loop *l = i == 0 ? NULL : d->loops[i];
    if (l == NULL) {
        grpc_accept_here(&d->t[0], server);
        return;
    }
    /* libuv accepts only into a handle of the listener's loop: accept
     * here, then give the other loop a duplicate of the socket */
    uv_tcp_t *tmp = malloc(sizeof *tmp);
    if (tmp == NULL) {
        grpc_accept_here(&d->t[0], server); /* it is refused there */
        return;
    }
    uv_tcp_init(server->loop, tmp);
    uv_os_fd_t fd = -1;
    int dup_fd = -1;
    if (uv_accept(server, (uv_stream_t *)tmp) == 0
        && uv_fileno((uv_handle_t *)tmp, &fd) == 0)
        dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    uv_close((uv_handle_t *)tmp, scratch_closed);
    if (dup_fd < 0) {
        counter_add(&d->t[0].c.refused, 1);
        return;
    }
    handed *h = malloc(sizeof *h);
    if (h != NULL)
        h->fd = dup_fd;
    if (h == NULL || !mailbox_post(&l->ask, &h->it)) {
        free(h); /* that loop is far behind: refused */
        close(dup_fd);
        counter_add(&d->t[i].c.refused, 1);
    }
}

bool grpc_door_start(grpc_door *d, tallyd_server *s, uv_loop_t *loop,
                     unsigned n, const grpc_service *svc, auth_tokens *auth,
                     char *msg, size_t msglen)
{
    memset(d, 0, sizeof *d);
    if (n < 1)
        n = 1;
    if (n > GRPC_MAX_LOOPS)
        n = GRPC_MAX_LOOPS;
    atomic_init(&d->open_all, 0);
    mailbox_init(&d->mb, loop);
    mailbox_own(&d->mb);
    if (!grpc_start_on(&d->t[0], s, &d->mb, svc, auth, true, &d->open_all,
                       msg, msglen)) {
        mailbox_close(&d->mb);
        return false;
    }
    d->t[0].door = d;
    d->n = 1;
    for (unsigned i = 1; i < n; i++) {
        grpc_loop *l = calloc(1, sizeof *l);
        if (l == NULL) {
            snprintf(msg, msglen, "gRPC: out of memory");
            grpc_door_stop(d);
            return false;
        }
        l->d = d;
        l->i = i;
        l->s = s;
        l->svc = svc;
        l->auth = auth;
        atomic_init(&l->quiesce, false);
        atomic_init(&l->stop, false);
        uv_sem_init(&l->started, 0);
        if (uv_thread_create(&l->thread, loop_main, l) != 0) {
            uv_sem_destroy(&l->started);
            free(l);
            snprintf(msg, msglen, "gRPC: cannot start loop thread %u", i);
            grpc_door_stop(d);
            return false;
        }
        uv_sem_wait(&l->started);
        if (!l->ok) {
            snprintf(msg, msglen, "gRPC loop %u: %s", i, l->msg);
            loop_end(l);
            grpc_door_stop(d);
            return false;
        }
        d->t[i].port = d->t[0].port;
        d->loops[i] = l;
        d->n = i + 1;
    }
    return true;
}

void grpc_door_quiesce(grpc_door *d)
{
    grpc_quiesce(&d->t[0]); /* the listener closes: no more deals */
    for (unsigned i = 1; i < d->n; i++) {
        atomic_store(&d->loops[i]->quiesce, true);
        mailbox_post(&d->loops[i]->ask, NULL);
    }
}

void grpc_door_sweep(grpc_door *d)
{
    grpc_sweep(&d->t[0]);
}

void grpc_door_stop(grpc_door *d)
{
    for (unsigned i = 1; i < d->n; i++) {
        if (d->loops[i] != NULL)
            loop_end(d->loops[i]);
        d->loops[i] = NULL;
    }
    if (d->n > 0) {
        grpc_stop(&d->t[0]); /* a no-op once stopped */
        mailbox_close(&d->mb);
    }
}

long long grpc_door_open_connections(grpc_door *d)
{
    return atomic_load(&d->open_all);
}

void grpc_door_render_metrics(grpc_door *d, textbuf *o)
{
    grpc_render_metrics_n(d->t, d->n, o);
}
