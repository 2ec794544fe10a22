/*
 * budget.h - --max-buffered-bytes: the room every door's request bodies
 * and messages may hold at once, over the whole server, in
 * tallyd_server's buffered_bytes.
 *
 * A door takes room before it grows a buffer for bytes that have arrived,
 * and gives it back when the buffer is freed. A take that would pass the
 * limit fails and takes nothing: the total never goes over it, even for a
 * moment (a compare-and-swap loop), so a refusal never hits a request
 * that would have fitted.
 *
 * Threading: any thread (relaxed atomics).
 */
#ifndef TALLY_CORE_BUDGET_H
#define TALLY_CORE_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* Takes n bytes of room; false (nothing taken) when they are not there. */
bool budget_take(tallyd_server *s, size_t n);

/* Gives back n bytes taken before. */
void budget_give(tallyd_server *s, size_t n);

#endif
