/*
 * conns.h - the open connections and their deadlines.
 *
 * libmicrohttpd closes a connection that has been silent for its idle
 * timeout, but each byte that arrives restarts that timer, so a client
 * that trickles one byte a second would hold a connection (and a slot of
 * --max-connections) forever. Here every connection carries a deadline by
 * which the request it is sending must be whole; a sweep on another
 * thread shuts down the socket of every connection past its deadline, and
 * libmicrohttpd then closes it as it would any connection whose peer went
 * away.
 *
 * Safety of the cross-thread shutdown: libmicrohttpd announces a
 * connection's end (http_conn_close, from its NOTIFY_CONNECTION callback)
 * before it closes the socket, and both that and the sweep hold the
 * registry's mutex, so a sweep never shuts down a descriptor that has
 * been closed, let alone one reused for another connection.
 *
 * Threading: http_conn_open, _close and _deadline run on the HTTP thread
 * that serves the connection; http_conns_sweep on any one thread (the
 * loop thread's tick). Deadlines are atomics.
 */
#ifndef TALLY_HTTP_CONNS_H
#define TALLY_HTTP_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct http_conns http_conns;
typedef struct http_conn http_conn;

/* An empty registry; NULL when memory runs out. Free with
 * http_conns_free() once no connection is open. */
http_conns *http_conns_new(void);
void http_conns_free(http_conns *c);

/* Registers the connection on socket fd, with a deadline (a now_coarse_ns()
 * time; 0 for none). NULL when memory runs out: the connection is then
 * not watched. */
http_conn *http_conn_open(http_conns *c, int fd, uint64_t deadline_ns);

/* Unregisters and frees k, before its socket is closed; NULL is a no-op. */
void http_conn_close(http_conns *c, http_conn *k);

/* Sets k's deadline (0: none); NULL is a no-op. */
void http_conn_deadline(http_conn *k, uint64_t deadline_ns);

/* Whether a sweep shut k down for missing its deadline. */
bool http_conn_timed_out(const http_conn *k);

/* Shuts down the socket of every connection whose deadline is at or
 * before now, once each. Returns how many. */
size_t http_conns_sweep(http_conns *c, uint64_t now);

#endif
