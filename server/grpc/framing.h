/*
 * framing.h - gRPC's own layer over HTTP/2, apart from the HTTP/2 glue:
 * the 5-byte message prefix, its checks and the size cap, decoding a
 * compressed message, the grpc-timeout header, and grpc-message's
 * percent-encoding (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md).
 *
 * It knows neither nghttp2 nor libuv, so that tests/server/test_grpc.c
 * can feed it byte by byte.
 *
 * Threading: pure functions of their arguments, except
 * grpc_message_decode(), which takes room from the server's budget
 * (core/budget.h: atomics); any thread.
 */
#ifndef TALLY_GRPC_FRAMING_H
#define TALLY_GRPC_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"
#include "status.h"

#define GRPC_PREFIX_LEN 5

/* A message's prefix (a compressed flag, then a 32-bit big-endian
 * length), gathered from however many DATA frames it came in. */
typedef struct {
    uint8_t b[GRPC_PREFIX_LEN];
    size_t got; /* 0 to 5 */
} grpc_prefix;

/* Takes as many of len bytes as the prefix still needs; returns how many
 * it took. The prefix is whole when got is 5. */
size_t grpc_prefix_feed(grpc_prefix *p, const uint8_t *data, size_t len);

/* A whole prefix's message: *compressed and *len; or the failure, with
 * msg: a flag byte other than 0 or 1 (INVALID), a compressed message on a
 * call with no grpc-encoding (`encoded` false: ENCODING), or a length
 * over max (--max-body-bytes: TOO_LARGE). */
status_code grpc_prefix_check(const grpc_prefix *p, bool encoded, size_t max,
                              bool *compressed, size_t *len, char *msg,
                              size_t msglen);

/* grpc-timeout: 1 to 8 ASCII digits and a unit, H M S m u n, as n bytes
 * at v. *ms: the deadline in milliseconds, rounded up, at least 1 (a
 * "0n" deadline is already due; 0 would mean none); -1 when it is too
 * long to count (over 2^53 ns). False when malformed. */
bool grpc_timeout_parse(const char *v, size_t n, int64_t *ms);

/* grpc-message: `in` with every byte outside printable ASCII, and '%',
 * written as %XX; cut, never mid-escape, to fit outlen (NUL included). */
void grpc_message_encode(const char *in, char *out, size_t outlen);

/* Decodes a compressed message (encoding: core/content_coding.h's) into a new
 * 128-byte-aligned buffer (*out, eng_buffer_alloc'd, *outlen bytes) of
 * at most --max-body-bytes, whose room it takes from --max-buffered-bytes
 * (*reserved: give it back with budget_give when *out is freed).
 * STATUS_OK, or the failure with msg and nothing held. */
status_code grpc_message_decode(tallyd_server *s, int encoding,
                                const uint8_t *in, size_t len, uint8_t **out,
                                size_t *outlen, size_t *reserved, char *msg,
                                size_t msglen);

#endif
