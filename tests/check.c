/*
 * check.c - the test runner behind check.h.
 */
#define _DEFAULT_SOURCE /* flock */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

unsigned long check_failures;
static uint64_t rng_state;

void check_fail(const char *file, int line, const char *fmt, ...)
{
    check_failures++;
    if (check_failures > 20) /* the first few say enough */
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "    %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

uint64_t check_rand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t check_below(uint64_t n)
{
    return check_rand() % n;
}

double check_unit(void)
{
    return (double)(check_rand() >> 11) * 0x1p-53;
}

void *check_alloc(size_t bytes)
{
    size_t rounded = (bytes + 127) / 128 * 128;
    void *p = aligned_alloc(128, rounded ? rounded : 128);
    if (p == NULL) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    memset(p, 0, rounded ? rounded : 128);
    return p;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Whether a case runs: it contains one of the plain patterns, or is named
 * exactly by one written with a leading '=' (or there is no plain or '='
 * pattern), and contains none of those written with a leading '-'.
 * "--list" is no pattern. */
static int selected(const char *name, int argc, char **argv)
{
    int plain = 0, hit = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--list") == 0)
            continue;
        if (argv[a][0] == '-') {
            if (argv[a][1] != '\0' && strstr(name, argv[a] + 1) != NULL)
                return 0;
        } else if (argv[a][0] == '=') {
            plain = 1;
            hit |= strcmp(name, argv[a] + 1) == 0;
        } else {
            plain = 1;
            hit |= strstr(name, argv[a]) != NULL;
        }
    }
    return !plain || hit;
}

/* TALLY_SHARD_QUEUE=FILE: the ordinal of the next selected case nobody
 * has taken, from FILE (the count taken so far, as text; an empty file
 * is 0), under flock, so that the processes of TALLY_SHARD deal the cases
 * out as each finishes one rather than by index; -1 on an error. */
static long take_next(int fd)
{
    if (flock(fd, LOCK_EX) != 0)
        return -1;
    char buf[32] = {0};
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    long next = got > 0 ? strtol(buf, NULL, 10) : 0;
    int len = snprintf(buf, sizeof buf, "%ld\n", next + 1);
    if (got < 0 || pwrite(fd, buf, (size_t)len, 0) != len)
        next = -1;
    flock(fd, LOCK_UN);
    return next;
}

int check_main(int argc, char **argv, const check_case *cases, size_t ncases)
{
    /* a line as each case ends, also into a pipe: a run stopped by a
     * timeout shows the case it was in (make bench-node) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* TALLY_SHARD=k/n: only the selected cases whose index is k modulo n,
     * so that n processes run one program's cases between them */
    unsigned long shard = 0, shards = 1;
    const char *shard_env = getenv("TALLY_SHARD");
    if (shard_env != NULL && shard_env[0] != '\0') {
        char *end;
        shard = strtoul(shard_env, &end, 10);
        if (*end == '/')
            shards = strtoul(end + 1, &end, 10);
        if (*end != '\0' || shards == 0 || shard >= shards) {
            fprintf(stderr, "TALLY_SHARD=%s: want k/n with k < n\n", shard_env);
            return 2;
        }
    }
    /* --list: the selected cases' names, one a line, in the order they
     * run; nothing runs (make bench-node deals them out to processes) */
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--list") != 0)
            continue;
        for (size_t i = 0; i < ncases; i++)
            if (selected(cases[i].name, argc, argv) && i % shards == shard)
                printf("%s\n", cases[i].name);
        return 0;
    }
    /* with TALLY_SHARD_QUEUE, the processes take cases from one queue
     * (take_next) instead of by index: a few long cases no longer fall
     * to one of them */
    int queue = -1;
    const char *queue_env = getenv("TALLY_SHARD_QUEUE");
    if (queue_env != NULL && queue_env[0] != '\0') {
        queue = open(queue_env, O_RDWR | O_CREAT, 0644);
        if (queue < 0) {
            fprintf(stderr, "TALLY_SHARD_QUEUE=%s: cannot open it\n", queue_env);
            return 2;
        }
    }
    const char *seed_env = getenv("TALLY_SEED");
    uint64_t seed = seed_env != NULL ? strtoull(seed_env, NULL, 0)
                                     : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("%s: seed %llu (replay with TALLY_SEED=%llu)\n", argv[0],
           (unsigned long long)seed, (unsigned long long)seed);
    int failed = 0, ran = 0;
    long ordinal = -1, mine = queue >= 0 ? take_next(queue) : 0;
    if (mine < 0) {
        fprintf(stderr, "TALLY_SHARD_QUEUE=%s: cannot take a case\n", queue_env);
        return 2;
    }
    for (size_t i = 0; i < ncases; i++) {
        if (!selected(cases[i].name, argc, argv))
            continue;
        ordinal++;
        if (queue >= 0 ? ordinal != mine : i % shards != shard)
            continue;
        /* each case draws from its own stream, so that running one case
         * alone reproduces exactly what it did in the full run */
        rng_state = seed ^ (0x100000001b3ull * (i + 1));
        check_failures = 0;
        double t0 = now();
        cases[i].fn();
        double ms = (now() - t0) * 1e3;
        ran++;
        if (check_failures) {
            failed++;
            printf("  FAIL %s (%lu failed checks, %.0f ms)\n", cases[i].name,
                   check_failures, ms);
        } else {
            printf("  ok   %s (%.0f ms)\n", cases[i].name, ms);
        }
        fflush(stdout);
        if (queue >= 0 && (mine = take_next(queue)) < 0) {
            fprintf(stderr, "TALLY_SHARD_QUEUE=%s: cannot take the next case\n", queue_env);
            return 2;
        }
    }
    if (queue >= 0)
        close(queue);
    if (ran == 0 && !(queue >= 0 && ordinal >= 0)) {
        printf("no case matches the patterns given\n");
        return 2;
    }
    printf("%s: %d of %d cases failed\n", argv[0], failed, ran);
    return failed ? 1 : 0;
}
