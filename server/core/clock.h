/*
 * clock.h - the daemon's clocks: the monotonic one, and the wall clock.
 *
 * Threading: any thread.
 */
#ifndef TALLY_CLOCK_H
#define TALLY_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* CLOCK_REALTIME in milliseconds since the epoch: for what outlives the
 * process or is read by another (a sequence's saved idle deadline, a
 * statistic's timestamp), never for measuring time. */
int64_t wall_ms(void);

#endif
