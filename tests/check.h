/*
 * check.h - a small test runner.
 *
 * A test program lists its cases and calls check_main(), which runs every
 * case, or only those selected by its arguments, and exits non-zero if any
 * CHECK failed. An argument is a pattern: a case runs when its name
 * contains one of the plain patterns (or none is given) and none of those
 * written with a leading '-' ("batches -cl_gpu": the batches cases but
 * those on the cl_gpu backends); one with a leading '=' names a case
 * exactly. "--list" prints the selected cases' names and runs none.
 * TALLY_SHARD=k/n runs only the cases whose index is k modulo n, for n
 * processes that share a program's cases; with TALLY_SHARD_QUEUE=FILE as
 * well, the n processes take the selected cases from one queue in FILE
 * instead, each the next one as it finishes one (make test-engine).
 * Each case's random stream follows from the seed and its index, so that
 * either way a case replays alone. Random inputs come from check_rand(),
 * seeded by TALLY_SEED or the clock; the seed is printed so that a failure
 * can be replayed: TALLY_SEED=<seed> build/bin/test_x <case>.
 */
#ifndef TALLY_CHECK_H
#define TALLY_CHECK_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    void (*fn)(void);
} check_case;

int check_main(int argc, char **argv, const check_case *cases, size_t ncases);

void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Failures so far in the running case. */
extern unsigned long check_failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            check_fail(__FILE__, __LINE__, __VA_ARGS__);                       \
    } while (0)

/* Uniform 64-bit random numbers (splitmix64). */
uint64_t check_rand(void);
/* Uniform in [0, n); n > 0. */
uint64_t check_below(uint64_t n);
/* Uniform in [0, 1). */
double check_unit(void);

/* Memory aligned to 128 bytes, zeroed; aborts when it runs out. */
void *check_alloc(size_t bytes);

#endif
