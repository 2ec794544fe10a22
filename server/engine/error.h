/*
 * error.h - the error codes of tally, in one table.
 *
 * Codes are grouped in bands that map onto HTTP statuses: input errors
 * (400, 413, 415), capacity (503) and device or internal failures (500).
 * New codes are only ever appended, so a code's number never changes.
 */
#ifndef TALLY_ERROR_H
#define TALLY_ERROR_H

#include <stddef.h>

/* X(name, http_status, description) */
#define ENG_ERRORS(X)                                                          \
    X(OK, 200, "success")                                                      \
    X(INVALID, 400, "invalid argument")                                        \
    X(DTYPE, 400, "unknown dtype")                                             \
    X(RANK, 400, "rank out of range")                                          \
    X(AXIS, 400, "axis out of range")                                          \
    X(SHAPE, 400, "invalid shape")                                             \
    X(TOO_LARGE, 413, "tensor too large")                                      \
    X(NOMEM, 503, "out of memory")                                             \
    X(NO_DEVICE, 500, "no usable compute device")                              \
    X(DEVICE, 500, "device failure")                                           \
    X(UNSUPPORTED, 500, "not supported by this device")                        \
    X(MEDIA_TYPE, 415, "unsupported media type")                               \
    X(NOT_FOUND, 404, "not found")                                             \
    X(METHOD, 405, "method not allowed")                                       \
    X(QUEUE_FULL, 503, "queue full")                                           \
    X(DEADLINE, 504, "deadline expired")                                       \
    X(DRAINING, 503, "shutting down")                                          \
    X(ENCODING, 400, "bad content encoding")                                   \
    X(CANCELLED, 499, "the client closed the connection")                      \
    X(UNAUTHORIZED, 401, "a missing or wrong bearer token")                    \
    X(REQUEST_TIMEOUT, 408, "the request did not arrive in time")              \
    X(LAUNCH, 500, "the device refused a launch; nothing was written")

typedef enum {
#define ENG_ERR_ENUM(name, status, text) ENG_E_##name,
    ENG_ERRORS(ENG_ERR_ENUM)
#undef ENG_ERR_ENUM
} eng_err;

/* How many codes there are (not a code: no switch has a case for it). */
#define ENG_ERR_COUNT(name, status, text) +1
enum { ENG_NERRORS = 0 ENG_ERRORS(ENG_ERR_COUNT) };
#undef ENG_ERR_COUNT

/* A sentence describing the code; static storage. */
const char *eng_err_text(eng_err e);

/* The code's name without prefix, e.g. "AXIS"; static storage. */
const char *eng_err_name(eng_err e);

/* The HTTP status a request failing with this code should get. */
int eng_err_http_status(eng_err e);

/* Formats a message into buf (if buf is not NULL) and returns e, so that
 * callers can write `return eng_fail(msg, len, ENG_E_AXIS, "...", ...)`. */
eng_err eng_fail(char *buf, size_t len, eng_err e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
