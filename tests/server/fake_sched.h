/*
 * fake_sched.h - the scheduler's one fake backend and clock, for the
 * tests of the scheduler (test_sched.c) and of the adapter over it
 * (test_submit.c): a backend that records every launch, whose devices
 * can fail, hold a launch until the test lets it go, cost the clock
 * time, and build their kernels when the test says; and a clock the test
 * moves.
 *
 * Threading: the scheduler's workers call the backend; the test's thread
 * sets the fields (atomics where a worker reads them meanwhile).
 */
#ifndef TALLY_TEST_FAKE_SCHED_H
#define TALLY_TEST_FAKE_SCHED_H

#include <stdatomic.h>
#include <stddef.h>
#include <uv.h>

#include "scheduler.h"

#define FAKE_HOST_DEV 99 /* a launch's device on the host backend */
#define FAKE_MAX_LAUNCHES 256

/* The fake clock (sched_options' clock), in ns: the test moves it. */
extern atomic_ullong fake_now;
uint64_t fake_clock(void *user);

typedef struct {
    /* per device: the error every launch returns (ENG_E_OK: none) */
    eng_err fail[4];
    /* when set, a launch waits until `open` (the first launch says it
     * has started through `holding`); gate_device + 1 names the one
     * device whose launches wait (0: every device's) */
    atomic_bool gate, open, holding;
    int gate_device;
    /* what ran: device and job count of each launch, and the jobs run
     * inline */
    uv_mutex_t mu;
    int launch_device[FAKE_MAX_LAUNCHES];
    size_t launch_jobs[FAKE_MAX_LAUNCHES];
    size_t nlaunches;
    atomic_uint inline_runs, streams_open;
    /* builds (prepare): each waits until build_open (or its cancel), then
     * returns build_fail[d] */
    atomic_bool build_open;
    eng_err build_fail[4];
    atomic_uint builds, builds_cancelled;
    /* what a launch costs on each device, and at [4] on the host: the
     * fake clock moves on this many ns in the launch (0: not at all) */
    atomic_ullong cost_ns[5];
    /* the test's own look at each job as it runs (its device, or -2
     * inline), before the launch's failure if any; NULL: none */
    void (*on_run)(job *j, int device);
} fake;

/* f zeroed, its mutex made: no gate, no failure, builds held. */
void fake_init(fake *f);

/* The backend over f's devices. */
sched_backend fake_backend(fake *f);

/* Until a gated launch has begun (5 s at most: a CHECK fails then). */
void fake_wait_holding(fake *f);

#endif
