/*
 * accesslog.h - which finished requests get an access line, and the line.
 *
 * --access-log=errors (the default) writes a line for a request that
 * failed (status 400 and up, 499 and 408 included) or was slow (it took
 * --slow-request-ms or more), at most --access-log-max-per-s lines a
 * second: the lines over the cap are counted in
 * tally_access_log_dropped_total, and one warning a second says how many
 * were left out. --access-log=all writes every request's line, uncapped;
 * off writes none. BENCHMARKS.md has what each costs at full load.
 *
 * Threading: http_accesslog_request on any HTTP thread, at the end of a
 * request; http_accesslog_tick on the loop thread. The counters are
 * atomics; the lines go through log_access, which has its own lock.
 * Ownership: http_start creates the one logger (s->accesslog), http_stop
 * frees it once no HTTP thread runs.
 */
#ifndef TALLY_HTTP_ACCESSLOG_H
#define TALLY_HTTP_ACCESSLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "request.h"

typedef struct http_accesslog http_accesslog;

/* The logger for s's settings; NULL when memory runs out. */
http_accesslog *http_accesslog_new(tallyd_server *s, atomic_ullong *dropped);
void http_accesslog_free(http_accesslog *a);

/* Logs r, finished at done_ns, if the mode says so. `terminated` is
 * libmicrohttpd's termination code when the request did not complete
 * normally (0: it did). */
void http_accesslog_request(http_accesslog *a, request *r, uint64_t done_ns,
                            int terminated);

/* Writes the warning for lines left out in a second that has ended, if
 * any; so a burst that stops is still reported. */
void http_accesslog_tick(http_accesslog *a, uint64_t now_ns);

#endif
