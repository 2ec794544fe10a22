/*
 * errors.h - the engine's error codes, in one table.
 *
 * These describe the engine only: a tensor it cannot scan (a bad argument,
 * dtype, rank, axis, shape or size), memory, and the device. What a
 * request can fail with above the engine (its encoding, route, access,
 * deadline, a full queue) is the daemon's, in core/status.h, whose first
 * rows are these codes in this order; it also says which HTTP status and
 * gRPC code each one gets. Codes are only ever appended.
 *
 * Threading: constant strings; any thread.
 */
#ifndef TALLY_ERROR_H
#define TALLY_ERROR_H

#include <stdbool.h>
#include <stddef.h>

/* X(name, description) */
#define ENG_ERRORS(X)                                                          \
    X(OK, "success")                                                           \
    X(INVALID, "invalid argument")                                             \
    X(DTYPE, "unknown dtype")                                                  \
    X(RANK, "rank out of range")                                               \
    X(AXIS, "axis out of range")                                               \
    X(SHAPE, "invalid shape")                                                  \
    X(TOO_LARGE, "tensor too large")                                           \
    X(NOMEM, "out of memory")                                                  \
    X(NO_DEVICE, "no usable compute device")                                   \
    X(DEVICE, "device failure")                                                \
    X(UNSUPPORTED, "not supported by this device")                             \
    X(LAUNCH, "the device refused a launch; nothing was written")

typedef enum {
#define ENG_ERR_ENUM(name, text) ENG_E_##name,
    ENG_ERRORS(ENG_ERR_ENUM)
#undef ENG_ERR_ENUM
} eng_err;

/* How many codes there are (not a code: no switch has a case for it). */
#define ENG_ERR_COUNT(name, text) +1
enum { ENG_NERRORS = 0 ENG_ERRORS(ENG_ERR_COUNT) };
#undef ENG_ERR_COUNT

/* A sentence describing the code; static storage. */
const char *eng_err_text(eng_err e);

/* The code's name without prefix, e.g. "AXIS"; static storage. */
const char *eng_err_name(eng_err e);

/* Formats a message into buf (if buf is not NULL) and returns e, so that
 * callers can write `return eng_fail(msg, len, ENG_E_AXIS, "...", ...)`. */
eng_err eng_fail(char *buf, size_t len, eng_err e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The same for a function that answers false on failure: `return
 * msg_fail(msg, msglen, "...", ...)` writes the message and is false (a
 * macro, so that the compiler sees the false). */
#define msg_fail(buf, len, ...)                                                \
    ((void)eng_fail((buf), (len), ENG_E_OK, __VA_ARGS__), false)

/* And for any other failure value v (NULL, -1, a status, a result
 * code): `return msg_fail_as(NULL, msg, msglen, "...", ...)`. */
#define msg_fail_as(v, buf, len, ...)                                          \
    ((void)eng_fail((buf), (len), ENG_E_OK, __VA_ARGS__), (v))

#endif
