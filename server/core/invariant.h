/*
 * invariant.h - the invariants tallyd holds, asserted in every build (as
 * redis's serverAssert is): CHECK(cond) says the file, the line and the
 * condition that broke on stderr, as one JSON log line, then aborts. A
 * broken invariant is a programming error, never a runtime one: bad
 * input, a full queue or a failed device are returned, never asserted.
 *
 * Threading: any thread.
 */
#ifndef TALLY_INVARIANT_H
#define TALLY_INVARIANT_H

/* Says what broke, where, and aborts. */
_Noreturn void invariant_failed(const char *file, int line, const char *what);

#define INVARIANT(cond)                                                       \
    do {                                                                       \
        if (__builtin_expect(!(cond), 0))                                      \
            invariant_failed(__FILE__, __LINE__, #cond);                           \
    } while (0)

#endif
