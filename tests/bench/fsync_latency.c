/*
 * fsync_latency.c - what one durable append costs on this machine, with
 * nothing of tally's in the way: write 64 bytes to a file in DIR and
 * fdatasync it, N times, the way tally's sequence log does (into room
 * allocated ahead with fallocate, so that the file's size does not
 * change: server/sched/seq_store.c), and then N more times as plain
 * appends that grow the file; print the median and the 90th and 99th
 * percentiles in microseconds of each, one JSON object on stdout (the
 * top-level figures are the first way: the floor under `--state-fsync
 * always`, docs/kserve.md, "Durable running sums").
 *
 *   fsync_latency DIR [N]      N: 2000 by default
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
 * first (room), or appended; their times sorted into us. */
static int run(const char *dir, int n, int room, double *us)
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
    double *room = malloc((size_t)n * sizeof *room);
    double *grow = malloc((size_t)n * sizeof *grow);
    if (room == NULL || grow == NULL || run(argv[1], n, 1, room) != 0
        || run(argv[1], n, 0, grow) != 0)
        return 1;
    printf("{\"writes\": %d, \"bytes\": 64, \"p50_us\": %.1f, \"p90_us\": %.1f, "
           "\"p99_us\": %.1f, \"append_p50_us\": %.1f, \"append_p90_us\": %.1f, "
           "\"append_p99_us\": %.1f}\n",
           n, room[n / 2], room[n * 9 / 10], room[n * 99 / 100], grow[n / 2],
           grow[n * 9 / 10], grow[n * 99 / 100]);
    free(room);
    free(grow);
    return 0;
}
