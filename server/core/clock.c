/*
 * clock.c - the daemon's monotonic clock.
 */
#include <time.h>

#include "clock.h"

uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
