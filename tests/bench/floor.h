/*
 * floor.h - what the bench's smallest servers share (store_floor.c,
 * grpc_floor.c): a blocking connection to Redis on 127.0.0.1, and tally's
 * write as tallyd sends it. Bench tools' code: a failure ends the process
 * with a message. Every function may be called from any thread.
 */
#ifndef TALLY_BENCH_FLOOR_H
#define TALLY_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>

/* A write's record, after its 32-byte version: as long as a float32
 * chunk's of one line (server/redis/redis_store.c's store keeps the
 * same), 'r' after the carry. */
#define FLOOR_RECORD 131
#define FLOOR_TTL_MS "600000"

/* perror(what), then exit(1). */
void floor_die(const char *what);

/* *bufp (a char *) grown by realloc to hold need bytes, *cap updated. */
void floor_grow(void *bufp, size_t *cap, size_t need);

/* All n bytes of p written to the blocking fd. */
void floor_write_all(int fd, const void *p, size_t n);

/* A blocking TCP connection to 127.0.0.1:port, TCP_NODELAY on. */
int floor_connect(int port);

/* A socket listening on 127.0.0.1:port (0: any), its port in *bound. */
int floor_listen(int port, int *bound);

/* RESP for tally's write script (EVALSHA sha 1 key expect ttl put|del
 * value) into out (cap bytes, 512 are enough for a key of 96): the state
 * at version (0: none) replaced by version + 1, whose record starts with
 * the carry's carrylen bytes; del: deleted instead. Its length. */
size_t floor_evalsha(char *out, size_t cap, const char *sha, const char *key,
                     uint64_t version, const void *carry, size_t carrylen,
                     int del);

#endif
