/*
 * status.h - the daemon's statuses, in one table: what a request ended
 * with, and what each front door says for it.
 *
 * The engine's codes (engine/errors.h) describe the engine only. A request
 * can also fail in the layers above it: its bytes (ENCODING, MEDIA_TYPE),
 * its route (NOT_FOUND, METHOD), its access (UNAUTHORIZED), its transport
 * (REQUEST_TIMEOUT, CANCELLED) and the scheduler (QUEUE_FULL, DEADLINE,
 * DRAINING). This table holds them all, each with the HTTP status and the
 * gRPC status code a front door answers with, so that the two protocols
 * can never disagree about a failure.
 *
 * The first rows are the engine's codes, in the engine's order, so that an
 * eng_err converts by value (status_from_eng); status.c checks each of them
 * at compile time. The name is what /metrics and the access log print
 * (tally_request_failures_total{reason="QUEUE_FULL"}): never rename one.
 *
 * Threading: pure functions over static tables; any thread.
 */
#ifndef TALLY_STATUS_H
#define TALLY_STATUS_H

#include <stdbool.h>

#include "errors.h"

/* gRPC's status codes (grpc/doc/statuscodes.md), those the table uses. */
enum {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_ALREADY_EXISTS = 6,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16
};

/* X(name, http_status, grpc_code, description) */
#define TALLY_STATUSES(X)                                                      \
    X(OK, 200, GRPC_OK, "success")                                             \
    X(INVALID, 400, GRPC_INVALID_ARGUMENT, "invalid argument")                 \
    X(DTYPE, 400, GRPC_INVALID_ARGUMENT, "unknown dtype")                      \
    X(RANK, 400, GRPC_INVALID_ARGUMENT, "rank out of range")                   \
    X(AXIS, 400, GRPC_INVALID_ARGUMENT, "axis out of range")                   \
    X(SHAPE, 400, GRPC_INVALID_ARGUMENT, "invalid shape")                      \
    X(TOO_LARGE, 413, GRPC_RESOURCE_EXHAUSTED, "tensor too large")             \
    X(NOMEM, 503, GRPC_RESOURCE_EXHAUSTED, "out of memory")                    \
    X(NO_DEVICE, 500, GRPC_UNAVAILABLE, "no usable compute device")            \
    X(DEVICE, 500, GRPC_INTERNAL, "device failure")                            \
    X(UNSUPPORTED, 500, GRPC_UNIMPLEMENTED, "not supported by this device")    \
    X(LAUNCH, 500, GRPC_INTERNAL,                                              \
      "the device refused a launch; nothing was written")                      \
    X(MEDIA_TYPE, 415, GRPC_INVALID_ARGUMENT, "unsupported media type")        \
    X(NOT_FOUND, 404, GRPC_NOT_FOUND, "not found")                             \
    X(METHOD, 405, GRPC_UNIMPLEMENTED, "method not allowed")                   \
    X(QUEUE_FULL, 503, GRPC_RESOURCE_EXHAUSTED, "queue full")                 \
    X(DEADLINE, 504, GRPC_DEADLINE_EXCEEDED, "deadline expired")               \
    X(DRAINING, 503, GRPC_UNAVAILABLE, "shutting down")                        \
    X(ENCODING, 400, GRPC_INVALID_ARGUMENT, "bad content encoding")            \
    X(CANCELLED, 499, GRPC_CANCELLED, "the client closed the connection")      \
    X(UNAUTHORIZED, 401, GRPC_UNAUTHENTICATED,                                 \
      "a missing or wrong bearer token")                                       \
    X(REQUEST_TIMEOUT, 408, GRPC_DEADLINE_EXCEEDED,                            \
      "the request did not arrive in time")                                    \
    X(ALREADY_EXISTS, 409, GRPC_ALREADY_EXISTS, "already exists")             \
    X(FORBIDDEN, 403, GRPC_PERMISSION_DENIED,                                  \
      "not allowed by the server's settings")                                  \
    X(SEQUENCES_FULL, 503, GRPC_UNAVAILABLE,                                   \
      "as many sequences are live as the server keeps")                        \
    X(CHUNK_CONFLICT, 409, GRPC_ALREADY_EXISTS,                                \
      "a chunk number already taken by another chunk")                         \
    X(CHUNK_GAP, 409, GRPC_FAILED_PRECONDITION,                                \
      "a chunk before this one did not come in time")                          \
    X(STORE, 503, GRPC_UNAVAILABLE,                                            \
      "the sequence's state could not be read or written (its log, or Redis)")

typedef enum {
#define STATUS_ENUM(name, http, grpc, text) STATUS_##name,
    TALLY_STATUSES(STATUS_ENUM)
#undef STATUS_ENUM
} status_code;

/* How many statuses there are (not a status). */
#define STATUS_COUNT_ONE(name, http, grpc, text) +1
enum { STATUS_COUNT = 0 TALLY_STATUSES(STATUS_COUNT_ONE) };
#undef STATUS_COUNT_ONE

/* The status an engine code stands for (the same name). */
status_code status_from_eng(eng_err e);

/* "QUEUE_FULL"; static storage. */
const char *status_name(status_code s);

/* A sentence describing it; static storage. */
const char *status_text(status_code s);

/* The HTTP status a request failing with it gets (200 for OK). */
int status_http(status_code s);

/* The gRPC status code a call failing with it gets (0 for OK). */
int status_grpc(status_code s);

/* Whether a client may simply retry after a moment (a full queue, a
 * draining server, memory short): HTTP adds Retry-After. */
bool status_retry_later(status_code s);

#endif
