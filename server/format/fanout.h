/*
 * fanout.h - one piece of work split into parts that the cores share: the
 * parse and the render of a large JSON tensor.
 *
 * A few fanout helpers (threads: one per CPU the process may run on, at most
 * FANOUT_MAX, each pinned to its CPU) are started on first use and kept
 * for the life of the process, so a request pays no thread start-up. fanout_run() offers its
 * parts to them and takes parts itself until none is left, then waits
 * for the parts a helper took. When every helper is busy (other requests
 * are fanning out too), the caller simply runs all its parts: fanning out
 * never waits for a helper to become free.
 *
 * Threading: fanout_run() may be called from any number of threads at
 * once. The parts must be independent of each other.
 */
#ifndef TALLY_FANOUT_H
#define TALLY_FANOUT_H

#include <stddef.h>

#define FANOUT_MAX 8

/* Runs fn(arg + i * stride) for every i in [0, n), n at most FANOUT_MAX,
 * on the caller and the helpers, and returns when all have returned. */
void fanout_run(void (*fn)(void *part), void *arg, size_t stride, unsigned n);

/* How many parts are worth making: the CPUs the process may run on, 1 to
 * FANOUT_MAX (1 when fewer than two helpers could be started). */
unsigned fanout_width(void);

#endif
