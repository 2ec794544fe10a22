/*
 * pbwire.c - protobuf's wire format by hand (pbwire.h).
 */
#include "pbwire.h"

/* Reads a varint of at most 10 bytes; false at the end or when malformed. */
static bool pb_varint(pb_reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && r->p + i < r->end; i++) {
        uint8_t b = r->p[i];
        if (i == 9 && b > 1)
            return false; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            r->p += i + 1;
            *v = x;
            return true;
        }
    }
    return false;
}

int pb_next_header(pb_reader *r, pb_field *f)
{
    if (r->p >= r->end)
        return 0;
    uint64_t key;
    if (!pb_varint(r, &key))
        return -1;
    f->number = (uint32_t)(key >> 3);
    f->type = (int)(key & 7);
    if (key >> 3 == 0 || key >> 3 > 0x1fffffff)
        return -1;
    f->varint = 0;
    switch (f->type) {
    case PB_LEN:
        if (!pb_varint(r, &f->varint))
            return -1;
        return 1;
    case PB_VARINT:
    case PB_I64:
    case PB_I32: return 1;
    default: return -1;
    }
}

bool pb_skip_value(pb_reader *r, const pb_field *f)
{
    size_t left = (size_t)(r->end - r->p);
    switch (f->type) {
    case PB_VARINT: {
        pb_reader t = *r;
        uint64_t v;
        if (!pb_varint(&t, &v))
            return false;
        r->p = t.p;
        return true;
    }
    case PB_I64:
        if (left < 8)
            return false;
        r->p += 8;
        return true;
    case PB_I32:
        if (left < 4)
            return false;
        r->p += 4;
        return true;
    case PB_LEN:
        if (f->varint > left)
            return false;
        r->p += f->varint;
        return true;
    default: return false;
    }
}

int pb_next(pb_reader *r, pb_field *f)
{
    int st = pb_next_header(r, f);
    if (st <= 0)
        return st;
    if (f->type == PB_VARINT) {
        if (!pb_varint(r, &f->varint))
            return -1;
        return 1;
    }
    const uint8_t *at = r->p;
    if (!pb_skip_value(r, f))
        return -1;
    f->span.p = at;
    f->span.len = (size_t)(r->p - at);
    return 1;
}

size_t pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t pb_put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}
