/*
 * clock.c - the daemon's clocks (clock.h).
 */
#include <time.h>

#include "clock.h"

uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t now_coarse_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int64_t wall_coarse_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME_COARSE, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
