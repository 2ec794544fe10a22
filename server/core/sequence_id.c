/*
 * sequence_id.c - the checks on a request's sequence parameters
 * (sequence_id.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sequence_id.h"
#include "tx_utf8.h"

bool seq_id_number(seq_params *p, uint64_t v, char *msg, size_t msglen)
{
    if (v == 0)
        return msg_fail(msg, msglen,
                        "sequence_id 0 names no sequence: give a number from 1 "
                        "to 2^64 - 1 or a non-empty string");
    p->has_id = true;
    p->is_string = false;
    p->num = v;
    p->len = 0;
    p->str[0] = '\0';
    return true;
}

bool seq_id_string(seq_params *p, const char *s, size_t n, char *msg,
                   size_t msglen)
{
    if (n == 0)
        return msg_fail(msg, msglen,
                        "sequence_id \"\" names no sequence: give a non-empty "
                        "string or a number other than 0");
    if (n > SEQ_ID_MAX)
        return msg_fail(
            msg, msglen,
            "sequence_id is %zu bytes long; a string id takes at most "
            "%d",
            n, SEQ_ID_MAX);
    if (tx_utf8_valid(s, n) != n)
        return msg_fail(msg, msglen, "sequence_id is not valid UTF-8");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return msg_fail(
                msg, msglen,
                "sequence_id cannot hold control characters (byte %zu "
                "is 0x%02x)",
                i, (unsigned char)s[i]);
    p->has_id = true;
    p->is_string = true;
    p->num = 0;
    memcpy(p->str, s, n);
    p->str[n] = '\0';
    p->len = n;
    return true;
}

bool seq_id_text(seq_params *p, const char *v, char *msg, size_t msglen)
{
    size_t n = strlen(v);
    bool digits = n > 0;
    for (size_t i = 0; digits && i < n; i++)
        digits = v[i] >= '0' && v[i] <= '9';
    if (digits) {
        errno = 0;
        unsigned long long x = strtoull(v, NULL, 10);
        if (errno == 0)
            return seq_id_number(p, x, msg, msglen);
    }
    /* more digits than a uint64 holds: a string, as anything else */
    return seq_id_string(p, v, n, msg, msglen);
}

bool seq_chunk_number(seq_params *p, uint64_t v, char *msg, size_t msglen)
{
    if (v == 0)
        return msg_fail(msg, msglen,
                        "sequence_chunk counts from 1 (the chunk that carries "
                        "sequence_start); 0 is not a chunk number");
    p->has_chunk = true;
    p->chunk = v;
    return true;
}

bool seq_chunk_text(seq_params *p, const char *v, char *msg, size_t msglen)
{
    size_t n = strlen(v);
    bool digits = n > 0 && n <= 20;
    for (size_t i = 0; digits && i < n; i++)
        digits = v[i] >= '0' && v[i] <= '9';
    unsigned long long x = 0;
    if (digits) {
        errno = 0;
        x = strtoull(v, NULL, 10);
        digits = errno == 0;
    }
    if (!digits)
        return msg_fail(msg, msglen,
                        "sequence_chunk must be a whole number from 1 to "
                        "18446744073709551615");
    return seq_chunk_number(p, x, msg, msglen);
}

bool seq_params_check(const seq_params *p, char *msg, size_t msglen)
{
    if ((p->has_flags || p->has_chunk) && !p->has_id)
        return msg_fail(msg, msglen,
                        "sequence_start, sequence_end and "
                        "sequence_chunk need a sequence_id");
    if (p->start && p->has_chunk && p->chunk != 1)
        return msg_fail(
            msg, msglen,
            "sequence_chunk is %llu on a chunk with sequence_start; "
            "a sequence's chunks are numbered from 1, its start",
            (unsigned long long)p->chunk);
    return true;
}

void seq_id_format(const seq_params *p, char *buf, size_t len)
{
    if (len == 0)
        return;
    if (!p->is_string) {
        snprintf(buf, len, "%llu", (unsigned long long)p->num);
        return;
    }
    /* cut at a character's start, so that the text stays UTF-8 */
    size_t n = p->len, room = len > 3 ? len - 3 : 0;
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)p->str[n] & 0xc0) == 0x80)
            n--;
    }
    snprintf(buf, len, "\"%.*s\"", (int)n, p->str);
}

bool seq_id_equal(const seq_params *a, const seq_params *b)
{
    if (a->is_string != b->is_string)
        return false;
    if (!a->is_string)
        return a->num == b->num;
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}
