/*
 * redis_server.h - Debian's redis-server for the C tests (test_redis.c,
 * test_seq.c): started on a free port, never a mock, and a connection of
 * the test's own.
 *
 * Threading: the test's thread.
 */
#ifndef TALLY_TEST_REDIS_SERVER_H
#define TALLY_TEST_REDIS_SERVER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <sys/types.h>

#define REDIS_SERVER "/usr/bin/redis-server"

/* A free loopback port (0: none). */
unsigned free_port(void);

/* A sync connection of the test's own; NULL until the server answers
 * PING. */
redisContext *sync_conn(unsigned port, const char *password);

/* redis-server on port (its dir /tmp, nothing saved unless extra says),
 * with `extra` arguments (NULL-terminated; NULL: none): its pid, once it
 * answers, or 0 (a CHECK failed). */
pid_t start_redis_with(unsigned port, const char *password,
                       const char *const *extra);
pid_t start_redis(unsigned port, const char *password);

/* Sends sig (after SIGCONT) and reaps it; 0 is a no-op. */
void stop_redis(pid_t pid, int sig);

#endif
