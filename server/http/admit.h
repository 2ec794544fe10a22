/*
 * admit.h - admission: --max-connections and --max-client-connections.
 *
 * tallyd enforces both itself, in libmicrohttpd's accept policy callback,
 * so that each refusal is seen where it happens and counted: when
 * libmicrohttpd enforces its own limits (MHD_OPTION_CONNECTION_LIMIT,
 * MHD_OPTION_PER_IP_CONNECTION_LIMIT) it closes the socket before any
 * callback runs, and says so only in an English log line. Its own limits
 * are set above these, as a backstop.
 *
 * A client is its address (IPv4, or IPv6 without the port); the counts
 * live in a small open-addressing table sized for --max-connections.
 * A connection is counted when admitted and uncounted when libmicrohttpd
 * says it closed. One that libmicrohttpd fails to set up after admitting
 * it (out of memory, or its backstop limit) is never announced and stays
 * counted: a slot lost until restart, in a case that is already an
 * error logged by libmicrohttpd.
 *
 * Threading: any thread (the HTTP threads admit, the
 * threads that close connections release); one mutex.
 */
#ifndef TALLY_HTTP_ADMIT_H
#define TALLY_HTTP_ADMIT_H

#include <stdbool.h>
#include <sys/socket.h>

typedef struct http_admit http_admit;

/* At most max_total connections, and max_per_client from one address (0:
 * no per-address limit). NULL when memory runs out. */
http_admit *http_admit_new(unsigned max_total, unsigned max_per_client);

void http_admit_free(http_admit *l);

/* A connection from addr arrives: true, and it is counted, when both
 * limits leave room for it; false, and nothing is counted, when not. */
bool http_admit_enter(http_admit *l, const struct sockaddr *addr,
                      socklen_t len);

/* An admitted connection from addr has closed. */
void http_admit_leave(http_admit *l, const struct sockaddr *addr,
                      socklen_t len);

/* Connections admitted and not yet released. */
unsigned http_admit_open(http_admit *l);

#endif
