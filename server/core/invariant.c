/*
 * invariant.c - a broken invariant, said and aborted (invariant.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "invariant.h"
#include "log.h"

_Noreturn void invariant_failed(const char *file, int line, const char *what)
{
    log_msg("tallyd", "error", "invariant broken at %s:%d: %s", file, line,
            what);
    fflush(stderr);
    abort();
}
