/*
 * counters.h - the transport's counters, and its section of /metrics:
 * connections opened, open, refused at the limits and cut off for being
 * slow (the access log's are the core's: reqlog.h).
 *
 * Threading: relaxed atomics, bumped from any thread; rendering may mix
 * counts from just before and just after a concurrent update.
 */
#ifndef TALLY_HTTP_COUNTERS_H
#define TALLY_HTTP_COUNTERS_H

#include <stdatomic.h>

#include "textbuf.h"

typedef struct {
    atomic_ullong opened; /* keep-alive shows as few of these */
    /* closed at once at --max-connections or --max-client-connections,
     * and closed for not delivering a request within --idle-timeout /
     * --request-timeout */
    atomic_ullong refused, timed_out;
} http_counters;

/* Appends the section, with the connections open now (state the caller
 * reads). */
void http_counters_render(http_counters *c, long long open_connections,
                          textbuf *o);

#endif
