/*
 * json_scan.c - the request scanner, and small JSON text appended to buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "json.h"
#include "numtext.h"

#define MAX_DEPTH 64

void jcur_init(jcur *c, const char *text, size_t len, char *err, size_t errlen)
{
    static const char empty[1] = "";
    if (text == NULL) /* an empty body has no buffer */
        text = empty;
    c->base = text;
    c->p = text;
    c->end = text + len;
    c->err = err;
    c->errlen = errlen;
    c->failed = false;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

bool jcur_fail(jcur *c, const char *fmt, ...)
{
    if (!c->failed && c->err != NULL && c->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    c->failed = true;
    return false;
}

static size_t offset(const jcur *c)
{
    return (size_t)(c->p - c->base);
}

/* JSON's four whitespace characters. */
void jcur_ws(jcur *c)
{
    while (c->p < c->end && json_is_ws(*c->p))
        c->p++;
}

const char *jcur_found(const jcur *c)
{
    if (c->p >= c->end)
        return "the end of the body";
    switch (*c->p) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default:
        return (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))
                   ? "a number"
                   : "invalid JSON";
    }
}

bool jcur_expect(jcur *c, char ch, const char *what)
{
    jcur_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return jcur_fail(c, "invalid JSON at byte %zu: expected %s, found %s",
                     offset(c), what, jcur_found(c));
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')
           || (ch >= 'A' && ch <= 'F');
}

bool jcur_string(jcur *c, const char **s, size_t *len)
{
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '"')
        return jcur_fail(c,
                         "invalid JSON at byte %zu: expected a string, "
                         "found %s",
                         offset(c), jcur_found(c));
    const char *start = ++c->p;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            *s = start;
            *len = (size_t)(c->p - start);
            c->p++;
            return true;
        }
        if (ch < 0x20)
            return jcur_fail(c,
                             "invalid JSON at byte %zu: control character "
                             "in a string",
                             offset(c));
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->end)
                break;
            switch (*c->p) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't': c->p++; continue;
            case 'u':
                if (c->end - c->p >= 5 && is_hex(c->p[1]) && is_hex(c->p[2])
                    && is_hex(c->p[3]) && is_hex(c->p[4])) {
                    c->p += 5;
                    continue;
                }
                /* fall through */
            default:
                return jcur_fail(c,
                                 "invalid JSON at byte %zu: bad escape in "
                                 "a string",
                                 offset(c));
            }
        }
        c->p++;
    }
    return jcur_fail(c, "invalid JSON: unterminated string");
}

static bool literal(jcur *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, lit, n) == 0) {
        c->p += n;
        return true;
    }
    return jcur_fail(c, "invalid JSON at byte %zu", offset(c));
}

/* The array at c->p when it holds numbers only, as tensor data does: one
 * tight loop over it, each number's grammar checked. True with c->p past
 * the array; false, with c untouched, for anything else (the caller's
 * general walk then finds and words any problem). */
static bool skip_numbers(jcur *c)
{
    const char *p = c->p + 1, *end = c->end;
    while (p < end && json_is_ws(*p))
        p++;
    if (p < end && *p == ']') {
        c->p = p + 1;
        return true;
    }
    for (;;) {
        size_t n = p < end ? numtext_scan(p, end) : 0;
        if (n == 0)
            return false;
        p += n;
        while (p < end && json_is_ws(*p))
            p++;
        if (p >= end)
            return false;
        if (*p == ']') {
            c->p = p + 1;
            return true;
        }
        if (*p != ',')
            return false;
        p++;
        while (p < end && json_is_ws(*p))
            p++;
    }
}

static bool skip_depth(jcur *c, int depth)
{
    if (depth > MAX_DEPTH)
        return jcur_fail(c, "JSON nested deeper than %d levels", MAX_DEPTH);
    jcur_ws(c);
    if (c->p >= c->end)
        return jcur_fail(c, "invalid JSON: the body ends where a value "
                            "should be");
    const char *s;
    size_t n;
    bool first = true;
    switch (*c->p) {
    case '"': return jcur_string(c, &s, &n);
    case '{':
        while (jcur_member(c, &first, &s, &n))
            if (!skip_depth(c, depth + 1))
                return false;
        return !c->failed;
    case '[':
        if (skip_numbers(c))
            return true;
        while (jcur_element(c, &first))
            if (!skip_depth(c, depth + 1))
                return false;
        return !c->failed;
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default:
        n = numtext_scan(c->p, c->end);
        if (n == 0)
            n = jcur_bare_special(c->p, c->end);
        if (n == 0)
            return jcur_fail(c, "invalid JSON at byte %zu: unexpected '%c'",
                             offset(c), *c->p);
        c->p += n;
        return true;
    }
}

size_t jcur_bare_special(const char *p, const char *end)
{
    static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(end - p) >= n && memcmp(p, words[i], n) == 0)
            return n;
    }
    return 0;
}

bool jcur_skip(jcur *c)
{
    return skip_depth(c, 0);
}

bool jcur_span(jcur *c, const char **s, size_t *len)
{
    jcur_ws(c);
    const char *start = c->p;
    if (!jcur_skip(c))
        return false;
    *s = start;
    *len = (size_t)(c->p - start);
    return true;
}

/* Steps to the next item of an object or array (opened by `open`, the
 * first time): false at its end (`close`, consumed), or with c failed. */
static bool next_item(jcur *c, bool *first, char open, char close,
                      const char *what, const char *sep)
{
    bool was_first = *first;
    if (was_first) {
        if (!jcur_expect(c, open, what))
            return false;
        *first = false;
    }
    jcur_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return false;
    }
    return was_first || jcur_expect(c, ',', sep);
}

bool jcur_member(jcur *c, bool *first, const char **key, size_t *klen)
{
    if (!next_item(c, first, '{', '}', "an object", "',' or '}'")
        || !jcur_string(c, key, klen) || !jcur_expect(c, ':', "':'"))
        return false;
    jcur_ws(c);
    return true;
}

bool jcur_element(jcur *c, bool *first)
{
    if (!next_item(c, first, '[', ']', "an array", "',' or ']'"))
        return false;
    jcur_ws(c);
    return true;
}

bool json_eq(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

bool jcur_int64(jcur *c, const char *what, int64_t *out)
{
    jcur_ws(c);
    size_t n = c->p < c->end ? numtext_scan(c->p, c->end) : 0;
    if (n == 0)
        return jcur_fail(c, "%s must be an integer, not %s", what, jcur_found(c));
    char buf[32];
    bool integral = memchr(c->p, '.', n) == NULL && memchr(c->p, 'e', n) == NULL
                    && memchr(c->p, 'E', n) == NULL;
    if (!integral || n >= sizeof buf)
        return jcur_fail(c, "%s must be an integer, not %.*s", what,
                         (int)(n < 24 ? n : 24), c->p);
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno != 0)
        return jcur_fail(c, "%s: %s is out of range", what, buf);
    *out = v;
    c->p += n;
    return true;
}

bool jcur_uint64(jcur *c, const char *what, uint64_t *out)
{
    jcur_ws(c);
    size_t n = c->p < c->end ? numtext_scan(c->p, c->end) : 0;
    if (n == 0)
        return jcur_fail(c, "%s must be an integer, not %s", what, jcur_found(c));
    char buf[32];
    if (c->p[0] == '-' || n >= sizeof buf || memchr(c->p, '.', n) != NULL
        || memchr(c->p, 'e', n) != NULL || memchr(c->p, 'E', n) != NULL)
        return jcur_fail(c, "%s must be a non-negative integer, not %.*s",
                         what, (int)(n < 24 ? n : 24), c->p);
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno != 0)
        return jcur_fail(c, "%s: %s is out of range", what, buf);
    *out = v;
    c->p += n;
    return true;
}

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        v = v * 16
            + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
}

bool jcur_string_value(jcur *c, const char *what, char *out, size_t cap,
                       size_t *len)
{
    const char *s;
    size_t n;
    if (!jcur_string(c, &s, &n)) /* checks the escapes' syntax */
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        char enc[4];
        size_t k = 0;
        if (s[i] != '\\') {
            enc[k++] = s[i++];
        } else {
            char e = s[i + 1];
            i += 2;
            if (e != 'u') {
                enc[k++] = e == 'b'   ? '\b'
                           : e == 'f' ? '\f'
                           : e == 'n' ? '\n'
                           : e == 'r' ? '\r'
                           : e == 't' ? '\t'
                                      : e;
            } else {
                unsigned u = hex4(s + i);
                i += 4;
                if (u >= 0xd800 && u <= 0xdbff && n - i >= 6 && s[i] == '\\'
                    && s[i + 1] == 'u') {
                    unsigned lo = hex4(s + i + 2);
                    if (lo >= 0xdc00 && lo <= 0xdfff) {
                        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                        i += 6;
                    }
                }
                if ((u >= 0xd800 && u <= 0xdfff) || u == 0)
                    return jcur_fail(c, "%s holds \\u%04x, which is no "
                                        "character here", what, u);
                if (u < 0x80) {
                    enc[k++] = (char)u;
                } else if (u < 0x800) {
                    enc[k++] = (char)(0xc0 | (u >> 6));
                    enc[k++] = (char)(0x80 | (u & 0x3f));
                } else if (u < 0x10000) {
                    enc[k++] = (char)(0xe0 | (u >> 12));
                    enc[k++] = (char)(0x80 | ((u >> 6) & 0x3f));
                    enc[k++] = (char)(0x80 | (u & 0x3f));
                } else {
                    enc[k++] = (char)(0xf0 | (u >> 18));
                    enc[k++] = (char)(0x80 | ((u >> 12) & 0x3f));
                    enc[k++] = (char)(0x80 | ((u >> 6) & 0x3f));
                    enc[k++] = (char)(0x80 | (u & 0x3f));
                }
            }
        }
        if (cap - o < k)
            return jcur_fail(c, "%s is longer than %zu bytes", what, cap);
        memcpy(out + o, enc, k);
        o += k;
    }
    *len = o;
    return true;
}

bool jcur_bool(jcur *c, const char *what, bool *out)
{
    jcur_ws(c);
    if ((size_t)(c->end - c->p) >= 4 && memcmp(c->p, "true", 4) == 0) {
        c->p += 4;
        *out = true;
        return true;
    }
    if ((size_t)(c->end - c->p) >= 5 && memcmp(c->p, "false", 5) == 0) {
        c->p += 5;
        *out = false;
        return true;
    }
    return jcur_fail(c, "%s must be true or false, not %s", what, jcur_found(c));
}

bool jcur_shape(jcur *c, const char *what, uint64_t *shape, int *rank)
{
    bool first = true;
    int r = 0;
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[')
        return jcur_fail(c, "%s must be an array of integers, not %s", what,
                         jcur_found(c));
    while (jcur_element(c, &first)) {
        int64_t v;
        char name[48];
        const char *at = c->p;
        if (!jcur_int64(c, what, &v) || v < 0) {
            /* named by its index, which is formatted only now */
            snprintf(name, sizeof name, "%s[%d]", what, r);
            if (c->failed) {
                c->failed = false;
                c->p = at;
                return jcur_int64(c, name, &v);
            }
            return jcur_fail(c,
                             "%s is %" PRId64 ": dimensions cannot be "
                             "negative",
                             name, v);
        }
        if (r >= ENG_MAX_RANK)
            return jcur_fail(c, "%s has more than %d dimensions", what,
                             ENG_MAX_RANK);
        shape[r++] = (uint64_t)v;
    }
    if (c->failed)
        return false;
    *rank = r;
    return true;
}

/* ------------------------------------------------------------------------
 * Writing.
 */
/* The room a buffer of n bytes (and its '\0') was given: a power of two
 * of at least 64 bytes. Every buffer json_append() grows starts NULL, so
 * the room follows from the length, and it grows by doubling. */
static size_t room(size_t n)
{
    size_t r = 64;
    while (r < n + 1 && r <= SIZE_MAX / 2)
        r *= 2;
    return r;
}

bool json_append(char **buf, size_t *blen, const char *s, size_t len)
{
    if (len > SIZE_MAX / 4 - *blen)
        return false;
    char *nb = *buf;
    if (nb == NULL || *blen + len + 1 > room(*blen)) {
        nb = realloc(*buf, room(*blen + len));
        if (nb == NULL)
            return false;
    }
    memcpy(nb + *blen, s, len);
    *blen += len;
    nb[*blen] = '\0';
    *buf = nb;
    return true;
}

bool json_append_u64(char **buf, size_t *blen, uint64_t v)
{
    char num[20];
    int n = digits_count(v);
    digits_write(num, n, v);
    return json_append(buf, blen, num, (size_t)n);
}

bool json_append_shape(char **buf, size_t *blen, const uint64_t *shape,
                       int rank)
{
    bool ok = json_append(buf, blen, "[", 1);
    for (int d = 0; ok && d < rank; d++)
        ok = (d == 0 || json_append(buf, blen, ",", 1))
             && json_append_u64(buf, blen, shape[d]);
    return ok && json_append(buf, blen, "]", 1);
}

