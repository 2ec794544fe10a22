/*
 * check.c - the test runner behind check.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int check_main(int argc, char **argv, const check_case *cases, size_t ncases)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *seed_env = getenv("TALLY_SEED");
    uint64_t seed = seed_env != NULL ? strtoull(seed_env, NULL, 0)
                                     : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("%s: seed %llu (replay with TALLY_SEED=%llu)\n", argv[0],
           (unsigned long long)seed, (unsigned long long)seed);
    int failed = 0, ran = 0;
    for (size_t i = 0; i < ncases; i++) {
        if (filter != NULL && strstr(cases[i].name, filter) == NULL)
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
    }
    if (ran == 0) {
        printf("no case matches \"%s\"\n", filter);
        return 2;
    }
    printf("%s: %d of %d cases failed\n", argv[0], failed, ran);
    return failed ? 1 : 0;
}
