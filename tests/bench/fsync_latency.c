/*
 * fsync_latency.c - what one durable append costs on this machine, with
 * nothing of tally's in the way: write 64 bytes to a file in DIR and
 * fdatasync it, N times, the way tally's sequence log does (into room
 * allocated ahead with fallocate, so that the file's size does not
 * change: server/store/kv_log.c), and then N more times as plain
 * appends that grow the file; print the median and the 90th and 99th
 * percentiles in microseconds of each, one JSON object on stdout (the
 * top-level figures are the first way: the floor under `--state-fsync
 * always`, docs/kserve.md, "Durable running sums"); and N more into room
 * with GAP microseconds of sleep before each, as a client at concurrency
 * 1 paces the log's flushes with its own round trip. On a virtual disk a
 * flush that follows a pause takes longer than one that follows another
 * flush (machine F: p50 164 us back to back, 197 us after 300 us of
 * sleep, 268 us after 1 ms; BENCHMARKS.md, "fdatasync after a pause").
 *
 *   fsync_latency DIR [N [GAP]]    N: 2000, GAP: 200 by default
 */
#define _GNU_SOURCE /* fallocate */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n writes of 64 bytes, each followed by fdatasync: into room allocated
 * first (room), or appended, each after gap_us of sleep (not timed);
 * their times sorted into us. */
static int run(const char *dir, int n, int room, int gap_us, double *us)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync_latency.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    if (room && (fallocate(fd, 0, 0, (off_t)n * 64) != 0 || fsync(fd) != 0)) {
        perror("fallocate");
        close(fd);
        unlink(path);
        return 1;
    }
    char rec[64];
    memset(rec, 'r', sizeof rec);
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        if (gap_us > 0) {
            struct timespec g = {gap_us / 1000000, (long)(gap_us % 1000000) * 1000};
            nanosleep(&g, NULL);
        }
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (pwrite(fd, rec, sizeof rec, (off_t)i * 64) != (ssize_t)sizeof rec
            || fdatasync(fd) != 0) {
            perror(path);
            close(fd);
            unlink(path);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6
                + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    close(fd);
    unlink(path);
    qsort(us, (size_t)n, sizeof *us, cmp);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fsync_latency DIR [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 2000;
    if (n < 10)
        n = 10;
    int gap = argc > 3 ? atoi(argv[3]) : 200;
    if (gap < 0 || gap > 1000000)
        gap = 200;
    double *room = malloc((size_t)n * sizeof *room);
    double *grow = malloc((size_t)n * sizeof *grow);
    double *paced = malloc((size_t)n * sizeof *paced);
    if (room == NULL || grow == NULL || paced == NULL
        || run(argv[1], n, 1, 0, room) != 0 || run(argv[1], n, 0, 0, grow) != 0
        || run(argv[1], n, 1, gap, paced) != 0)
        return 1;
    printf("{\"writes\": %d, \"bytes\": 64, \"p50_us\": %.1f, \"p90_us\": %.1f, "
           "\"p99_us\": %.1f, \"append_p50_us\": %.1f, \"append_p90_us\": %.1f, "
           "\"append_p99_us\": %.1f, \"gap_us\": %d, \"paced_p50_us\": %.1f, "
           "\"paced_p90_us\": %.1f, \"paced_p99_us\": %.1f}\n",
           n, room[n / 2], room[n * 9 / 10], room[n * 99 / 100], grow[n / 2],
           grow[n * 9 / 10], grow[n * 99 / 100], gap, paced[n / 2],
           paced[n * 9 / 10], paced[n * 99 / 100]);
    free(room);
    free(grow);
    free(paced);
    return 0;
}
