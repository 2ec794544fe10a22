/*
 * hop_latency.c - what `--state-fsync everysec` adds to a chunk at the
 * least, with nothing of tally's in the way: a libuv loop thread (a door)
 * hands a 64-byte record to a writer thread through a mutex and a
 * condition variable, the writer writes it to a file in DIR (pwrite, no
 * flush) and wakes the loop with uv_async_send, as tally's sequence log
 * does (server/store/kv_log.c). N round trips, each after GAP
 * microseconds of sleep on the loop thread (not timed), as a client at
 * concurrency 1 paces them; the median and the 90th and 99th
 * percentiles in microseconds, one JSON object on stdout.
 *
 *   hop_latency DIR [N [GAP]]    N: 5000, GAP: 150 by default
 *
 * Threading: main() runs the loop; writer() is the one other thread.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static uv_mutex_t mu;
static uv_cond_t cv;
static int pending, stop; /* under mu */
static uv_async_t back;
static int fd;
static uint64_t sent_ns;
static double *us;
static int n, done, gap_us;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The writer thread: one record a wake, then the loop is woken. */
static void writer(void *arg)
{
    (void)arg;
    char rec[64] = {1};
    uv_mutex_lock(&mu);
    for (;;) {
        while (!pending && !stop)
            uv_cond_wait(&cv, &mu);
        if (stop)
            break;
        pending = 0;
        uv_mutex_unlock(&mu);
        if (pwrite(fd, rec, sizeof rec, 0) != (ssize_t)sizeof rec) {
            perror("pwrite");
            exit(1);
        }
        uv_async_send(&back);
        uv_mutex_lock(&mu);
    }
    uv_mutex_unlock(&mu);
}

/* The loop thread: hands the next record over. */
static void hand_over(void)
{
    if (gap_us > 0) {
        struct timespec g = {gap_us / 1000000, (long)(gap_us % 1000000) * 1000};
        nanosleep(&g, NULL);
    }
    sent_ns = now_ns();
    uv_mutex_lock(&mu);
    pending = 1;
    uv_cond_signal(&cv);
    uv_mutex_unlock(&mu);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The loop thread: a record is written. */
static void on_back(uv_async_t *a)
{
    us[done++] = (double)(now_ns() - sent_ns) / 1e3;
    if (done < n) {
        hand_over();
        return;
    }
    uv_mutex_lock(&mu);
    stop = 1;
    uv_cond_signal(&cv);
    uv_mutex_unlock(&mu);
    uv_close((uv_handle_t *)a, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hop_latency DIR [N [GAP]]\n");
        return 2;
    }
    n = argc > 2 ? atoi(argv[2]) : 5000;
    if (n < 10)
        n = 10;
    gap_us = argc > 3 ? atoi(argv[3]) : 150;
    if (gap_us < 0 || gap_us > 1000000)
        gap_us = 150;
    char path[4096];
    snprintf(path, sizeof path, "%s/hop_latency.%d", argv[1], (int)getpid());
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    us = malloc((size_t)n * sizeof *us);
    if (fd < 0 || us == NULL) {
        perror(path);
        return 1;
    }
    uv_loop_t *loop = uv_default_loop();
    uv_thread_t th;
    if (uv_mutex_init(&mu) != 0 || uv_cond_init(&cv) != 0
        || uv_async_init(loop, &back, on_back) != 0
        || uv_thread_create(&th, writer, NULL) != 0) {
        fprintf(stderr, "hop_latency: cannot start\n");
        return 1;
    }
    hand_over();
    uv_run(loop, UV_RUN_DEFAULT);
    uv_thread_join(&th);
    close(fd);
    unlink(path);
    qsort(us, (size_t)n, sizeof *us, cmp);
    printf("{\"round_trips\": %d, \"gap_us\": %d, \"p50_us\": %.1f, \"p90_us\": %.1f, "
           "\"p99_us\": %.1f}\n",
           n, gap_us, us[n / 2], us[n * 9 / 10], us[n * 99 / 100]);
    free(us);
    return 0;
}
