/*
 * bench_sched.c - what the scheduler's tick costs with many jobs waiting.
 *
 * The loop thread's tick (every 5 ms) asks every waiting job whether its
 * client has gone. This times sched_tick() with N jobs queued (no worker
 * runs), each with a socket of its own that stays open, asked two ways:
 * through each job's gone probe (one poll(2) of its socket, under the
 * queue's lock), and through the jobs' watch_fd (one poll(2) for all,
 * outside the lock; what the HTTP door uses); and beside them the bare
 * poll(2) over all N sockets (peers_gone). The median over 200 ticks, and
 * what share of one core that is at a tick every 5 ms.
 *
 * usage: bench_sched [N ...]   (default: 64 256 1024 4096)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"
#include "scheduler.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    job j;
    int fd;
    float data[4];
} waiting;

static bool probe(void *ctx)
{
    return peer_gone(((waiting *)ctx)->fd);
}

static void done(job *j)
{
    (void)j;
}

static eng_err no_open(void *u, unsigned d, void **s, char *m, size_t n)
{
    (void)u, (void)d, (void)m, (void)n;
    *s = NULL;
    return ENG_E_OK;
}

static void no_close(void *u, void *s)
{
    (void)u, (void)s;
}

static eng_err no_run(void *u, void *s, job **j, size_t n, eng_batch_times *t,
                      char *m, size_t l)
{
    (void)u, (void)s, (void)j, (void)n, (void)t, (void)m, (void)l;
    return ENG_E_OK;
}

static eng_err no_inline(void *u, job *j, char *m, size_t l)
{
    (void)u, (void)j, (void)m, (void)l;
    return ENG_E_OK;
}

int main(int argc, char **argv)
{
    unsigned sizes[16] = {64, 256, 1024, 4096}, nsizes = 4;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 16; i++)
            sizes[nsizes++] = (unsigned)strtoul(argv[i], NULL, 10);
    }
    printf("the tick with N jobs waiting, each on a socket of its own; "
           "median of 200 ticks, and its share of a core at 200 ticks/s\n");
    printf("%6s %16s %8s %16s %8s %16s %8s\n", "N", "probe per job", "of core",
           "watch_fd", "of core", "bare poll", "of core");
    sched_backend b = {.stream_open = no_open,
                       .stream_close = no_close,
                       .run = no_run,
                       .run_inline = no_inline};
    for (unsigned si = 0; si < nsizes; si++) {
        unsigned n = sizes[si];
        sched_options o = {
            .workers = 1, .devices = 1, .queue_depth = n, .max_batch = 1};
        sched *s = sched_new(&o, &b);
        waiting *w = calloc(n, sizeof *w);
        int *peers = calloc(n, sizeof *peers), *fds = calloc(n, sizeof *fds);
        bool *gone = calloc(n, sizeof *gone);
        if (s == NULL || w == NULL || peers == NULL || fds == NULL
            || gone == NULL) {
            fprintf(stderr, "bench_sched: out of memory\n");
            return 1;
        }
        for (unsigned i = 0; i < n; i++) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
                perror("socketpair (raise ulimit -n)");
                return 1;
            }
            w[i].fd = fds[i] = sv[0];
            peers[i] = sv[1];
            w[i].j.desc =
                (eng_scan_desc){.dtype = TX_FLOAT32, .rank = 1, .shape = {4}};
            w[i].j.in = w[i].j.out = w[i].data;
            w[i].j.done = done;
            w[i].j.gone = probe;
            w[i].j.watch_fd = -1; /* the probe first */
            w[i].j.ctx = &w[i];
            if (sched_prepare(&w[i].j) != STATUS_OK
                || sched_submit(s, &w[i].j) != STATUS_OK) {
                fprintf(stderr, "bench_sched: submit: %s\n", w[i].j.msg);
                return 1;
            }
        }
        double tick[200], watch[200], once[200];
        for (int k = 0; k < 200; k++) {
            double t0 = now();
            sched_tick(s);
            tick[k] = now() - t0;
            t0 = now();
            peers_gone(fds, n, gone);
            once[k] = now() - t0;
        }
        for (unsigned i = 0; i < n; i++) /* the jobs are waiting: no race */
            w[i].j.watch_fd = w[i].fd;
        for (int k = 0; k < 200; k++) {
            double t0 = now();
            sched_tick(s);
            watch[k] = now() - t0;
        }
        if (sched_queue_depth(s) != n) {
            fprintf(stderr, "bench_sched: a job left the queue\n");
            return 1;
        }
        qsort(tick, 200, sizeof *tick, cmp);
        qsort(watch, 200, sizeof *watch, cmp);
        qsort(once, 200, sizeof *once, cmp);
        printf("%6u %13.1f us %7.1f%% %13.1f us %7.1f%% %13.1f us %7.1f%%\n", n,
               tick[100] * 1e6, tick[100] / 0.005 * 100, watch[100] * 1e6,
               watch[100] / 0.005 * 100, once[100] * 1e6,
               once[100] / 0.005 * 100);
        for (unsigned i = 0; i < n; i++) {
            close(fds[i]);
            close(peers[i]);
        }
        sched_stop(s);
        sched_free(s);
        free(w);
        free(peers);
        free(fds);
        free(gone);
    }
    return 0;
}
