/*
 * redis_poll.h - hiredis's asynchronous context on a libuv loop: its
 * socket watched by a uv_poll, and its writes made once a turn
 * (redis_poll.c says why).
 *
 * Threading: the thread that runs the loop (a gRPC loop thread, an HTTP
 * thread, the loop thread, or the store's thread).
 */
#ifndef TALLY_REDIS_POLL_H
#define TALLY_REDIS_POLL_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <uv.h>

/* Watches ac's socket on loop, for as long as hiredis keeps the context
 * (its cleanup closes the poll). False when memory runs out. */
bool redis_poll_attach(redisAsyncContext *ac, uv_loop_t *loop);

/* Makes the writes hiredis asked for since the last turn: call from the
 * loop's prepare step, before the loop waits. */
void redis_poll_flush(redisAsyncContext *ac);

#endif
