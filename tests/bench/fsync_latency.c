/*
 * fsync_latency.c - what one durable append costs on this machine, with
 * nothing of tally's in the way: append 64 bytes to a file in DIR and
 * fdatasync it, N times; print the median and the 90th and 99th
 * percentiles in microseconds, one JSON object on stdout. The floor
 * under `--state-fsync always` (docs/kserve.md, "Durable running sums").
 *
 *   fsync_latency DIR [N]      N: 2000 by default
 */
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fsync_latency DIR [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 2000;
    if (n < 10)
        n = 10;
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync_latency.%d", argv[1], (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    double *us = malloc((size_t)n * sizeof *us);
    char rec[64];
    memset(rec, 'r', sizeof rec);
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (write(fd, rec, sizeof rec) != (ssize_t)sizeof rec
            || fdatasync(fd) != 0) {
            perror(path);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6
                + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    close(fd);
    unlink(path);
    qsort(us, (size_t)n, sizeof *us, cmp);
    printf("{\"appends\": %d, \"bytes\": 64, \"p50_us\": %.1f, \"p90_us\": %.1f, "
           "\"p99_us\": %.1f}\n",
           n, us[n / 2], us[n * 9 / 10], us[n * 99 / 100]);
    free(us);
    return 0;
}
