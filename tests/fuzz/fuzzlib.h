/*
 * fuzzlib.h - what the libFuzzer harnesses (tests/fuzz/fuzz_*.c) share:
 * failing a property loudly, and the checks most of them make.
 *
 * A harness checks properties, not only crashes: a failed one prints what
 * was wrong and aborts, which libFuzzer reports as a crash and saves the
 * input for.
 */
#ifndef TALLY_FUZZLIB_H
#define TALLY_FUZZLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Prints "property failed: ..." and aborts. */
void fuzz_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            fuzz_fail(__VA_ARGS__);                                            \
    } while (0)

/* Aborts unless s[0..len) is valid UTF-8 (what JSON must carry); `what`
 * names the text in the message. */
void fuzz_utf8(const char *what, const char *s, size_t len);

/* Aborts unless the NUL-terminated message msg is valid UTF-8 and ends
 * within msglen bytes. */
void fuzz_message(const char *what, const char *msg, size_t msglen);

/* Aborts unless s[0..len) is one JSON value that jansson reads, and, when
 * member is not NULL, an object with a string member of that name. */
void fuzz_json(const char *what, const char *s, size_t len, const char *member);

/* Whether count elements of dtype t (a tx_dtype) at a and b are the same:
 * the same bits, or both NaN (text carries no NaN payload). */
bool fuzz_same_values(int t, const void *a, const void *b, size_t count);

/* A copy of data[0..size) with a NUL after it (malloc'd; free it). */
char *fuzz_text(const uint8_t *data, size_t size);

#endif
