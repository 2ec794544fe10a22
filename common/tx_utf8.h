/*
 * tx_utf8.h - UTF-8 checks, for text that goes into JSON (which must be
 * valid UTF-8): messages that quote what a client sent, ids echoed back,
 * log lines.
 *
 * Threading: pure functions.
 */
#ifndef TALLY_TX_UTF8_H
#define TALLY_TX_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length of the longest prefix of s[0..len) that is valid UTF-8 (no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
size_t tx_utf8_valid(const char *s, size_t len);

/* Replaces, in place, every byte of s[0..len) that is not part of a valid
 * UTF-8 sequence with '?'; the length does not change. */
void tx_utf8_scrub(char *s, size_t len);

/* Copies s[0..len) into out (outlen bytes, NUL-terminated) as valid
 * UTF-8: each byte that is not part of a valid sequence becomes the four
 * characters \xNN (its value in hex), so that a message can say which
 * bytes a client sent. Stops early, at a sequence boundary, when out is
 * full. Returns the length written. */
size_t tx_utf8_escape(const char *s, size_t len, char *out, size_t outlen);

#endif
