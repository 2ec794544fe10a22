/*
 * clock.h - the daemon's monotonic clock.
 *
 * Threading: any thread.
 */
#ifndef TALLY_CLOCK_H
#define TALLY_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

#endif
