/*
 * fuzzlib.c - the harnesses' shared checks (see fuzzlib.h).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzlib.h"
#include "tx_dtype.h"
#include "tx_utf8.h"

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("property failed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_utf8(const char *what, const char *s, size_t len)
{
    size_t ok = tx_utf8_valid(s, len);
    FUZZ_CHECK(ok == len, "%s is not UTF-8 at byte %zu of %zu: %.*s", what, ok,
               len, (int)(len > 200 ? 200 : len), s);
}

void fuzz_message(const char *what, const char *msg, size_t msglen)
{
    size_t n = strnlen(msg, msglen);
    FUZZ_CHECK(n < msglen, "%s is not NUL-terminated", what);
    fuzz_utf8(what, msg, n);
}

void fuzz_json(const char *what, const char *s, size_t len, const char *member)
{
    fuzz_utf8(what, s, len);
    json_error_t err;
    /* integers as reals: jansson refuses those above int64 (uint64 data) */
    json_t *j = json_loadb(
        s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
        &err);
    FUZZ_CHECK(j != NULL, "%s is not JSON (%s): %.*s", what, err.text,
               (int)(len > 300 ? 300 : len), s);
    if (member != NULL)
        FUZZ_CHECK(json_is_string(json_object_get(j, member)),
                   "%s has no string \"%s\": %.*s", what, member,
                   (int)(len > 300 ? 300 : len), s);
    json_decref(j);
}

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (t == NULL)
        abort();
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

static bool is_nan(int t, const unsigned char *p)
{
    uint16_t h;
    uint32_t f;
    uint64_t d;
    switch (t) {
    case TX_FLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    case TX_BFLOAT16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    case TX_FLOAT32:
        memcpy(&f, p, 4);
        return (f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu) != 0;
    case TX_FLOAT64:
        memcpy(&d, p, 8);
        return (d & 0x7ff0000000000000ull) == 0x7ff0000000000000ull
               && (d & 0xfffffffffffffull) != 0;
    default: return false;
    }
}

bool fuzz_same_values(int t, const void *a, const void *b, size_t count)
{
    size_t size = tx_dtype_size((tx_dtype)t);
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < count; i++, x += size, y += size)
        if (memcmp(x, y, size) != 0 && !(is_nan(t, x) && is_nan(t, y)))
            return false;
    return true;
}
