/*
 * tx_utf8.c - UTF-8 validation (RFC 3629's well-formed sequences).
 */
#include <stdint.h>

#include "tx_utf8.h"

/* The length of the valid sequence at s (before end), or 0. */
static size_t sequence(const unsigned char *s, const unsigned char *end)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

size_t tx_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        size_t n = sequence(p, end);
        if (n == 0)
            break;
        p += n;
    }
    return (size_t)(p - (const unsigned char *)s);
}

void tx_utf8_scrub(char *s, size_t len)
{
    unsigned char *p = (unsigned char *)s, *end = p + len;
    while (p < end) {
        size_t n = sequence(p, end);
        if (n == 0) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

size_t tx_utf8_escape(const char *s, size_t len, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    size_t o = 0;
    if (outlen == 0)
        return 0;
    while (p < end) {
        size_t n = sequence(p, end);
        if (n == 0) { /* a byte of no valid sequence: \xNN */
            if (o + 4 >= outlen)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
            p++;
            continue;
        }
        if (o + n >= outlen)
            break;
        for (size_t i = 0; i < n; i++)
            out[o++] = (char)p[i];
        p += n;
    }
    out[o] = '\0';
    return o;
}
