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

/* The same clock as the kernel's last tick saw it (CLOCK_MONOTONIC_COARSE:
 * a few milliseconds behind at most, never ahead of now_ns(), and several
 * times cheaper to read): for deadlines counted in seconds. */
uint64_t now_coarse_ns(void);

/* CLOCK_REALTIME in milliseconds since the epoch: for what outlives the
 * process or is read by another (a sequence's saved idle deadline, a
 * statistic's timestamp), never for measuring time. */
int64_t wall_ms(void);

/* wall_ms() as the kernel's last tick saw it (CLOCK_REALTIME_COARSE): for
 * a timestamp that a few milliseconds do not change. */
int64_t wall_coarse_ms(void);

#endif
