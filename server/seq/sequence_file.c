/*
 * sequence_file.c - a sequence's record, made, encoded and decoded
 * (sequence_file.h).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sequence_file.h"
#include "tx_fnv.h"

static const char magic[8] = {'T', 'A', 'L', 'L', 'Y', 'S', 'E', 'Q'};

size_t seq_record_key(const seq_params *id, uint8_t *key)
{
    char b[SEQ_KEY_MAX + 1];
    int n = id->is_string ? snprintf(b, sizeof b, "{s:%s}", id->str)
                          : snprintf(b, sizeof b, "{n:%" PRIu64 "}", id->num);
    memcpy(key, b, (size_t)n);
    return (size_t)n;
}

bool seq_record_info(const uint8_t *b, size_t len, uint8_t *key, size_t *keylen,
                     int *state, bool *numbered, uint64_t *count,
                     int64_t *deadline_ms)
{
    seq_file_entry *e;
    size_t n;
    char msg[200];
    if (!seq_file_decode(b, len, 1, SIZE_MAX / 4, &e, &n, msg, sizeof msg))
        return false;
    bool one = n == 1;
    if (one) {
        *keylen = seq_record_key(&e[0].id, key);
        *state = e[0].state;
        *numbered = e[0].numbered;
        *count = e[0].count;
        *deadline_ms = e[0].idle_deadline_ms;
    }
    seq_file_free(e, n);
    return one;
}

/* ------------------------------------------------------------ writing */

typedef struct {
    uint8_t *b;
    size_t len, cap;
    bool failed;
} wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->failed)
        return;
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n)
            cap *= 2;
        uint8_t *b = realloc(w->b, cap);
        if (b == NULL) {
            w->failed = true;
            return;
        }
        w->b = b;
        w->cap = cap;
    }
    memcpy(w->b + w->len, p, n);
    w->len += n;
}

static void put_u(wbuf *w, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, (size_t)bytes);
}

void seq_record_init(seq_file_entry *x, const seq_params *id,
                     const eng_scan_desc *desc, int state,
                     int64_t idle_deadline_ms, uint64_t count, eng_carry *carry)
{
    memset(x, 0, sizeof *x);
    x->id = *id;
    x->id.start = x->id.end = x->id.has_flags = x->id.has_chunk = false;
    x->id.chunk = 0;
    x->desc = *desc;
    x->desc.axis = desc->axis < 0 ? desc->axis + desc->rank : desc->axis;
    x->desc.shape[x->desc.axis] = 0;
    x->state = state;
    x->idle_deadline_ms = idle_deadline_ms;
    x->count = count;
    x->carry = carry;
}

void seq_record_numbered(seq_file_entry *x, uint64_t applied, bool last_end,
                         const unsigned char sha[32], eng_carry *prev)
{
    x->numbered = true;
    x->applied = applied;
    x->last_end = last_end;
    memcpy(x->sha, sha, sizeof x->sha);
    x->prev = prev;
}

uint8_t *seq_file_encode(const seq_file_entry *e, size_t n, size_t *len)
{
    wbuf w = {0};
    put(&w, magic, sizeof magic);
    put_u(&w, SEQ_FILE_VERSION, 4);
    put_u(&w, 0, 4);
    put_u(&w, n, 8);
    for (size_t i = 0; i < n; i++) {
        const seq_file_entry *x = &e[i];
        put_u(&w, x->id.is_string, 1);
        put_u(&w, (uint64_t)x->desc.dtype, 1);
        put_u(&w,
              (x->desc.exclusive ? 1u : 0u) | (x->desc.reverse ? 2u : 0u)
                  | (x->numbered ? 4u : 0u) | (x->state == SEQ_ENDED ? 8u : 0u)
                  | (x->state == SEQ_GONE ? 16u : 0u),
              1);
        put_u(&w, (uint64_t)x->desc.rank, 1);
        if (x->id.is_string) {
            put_u(&w, x->id.len, 2);
            put(&w, x->id.str, x->id.len);
        } else {
            put_u(&w, x->id.num, 8);
        }
        put_u(&w, (uint64_t)x->desc.axis, 8);
        for (int d = 0; d < x->desc.rank; d++)
            put_u(&w, d == x->desc.axis ? 0 : x->desc.shape[d], 8);
        put_u(&w, (uint64_t)x->idle_deadline_ms, 8);
        put_u(&w, x->count, 8);
        for (uint64_t k = 0; k < x->count; k++)
            put_u(&w, x->carry[k].u, 8);
        if (x->numbered) {
            put_u(&w, x->applied, 8);
            put_u(&w, x->last_end ? 1 : 0, 1);
            put(&w, x->sha, sizeof x->sha);
            for (uint64_t k = 0; k < x->count; k++)
                put_u(&w, x->prev[k].u, 8);
        }
    }
    if (!w.failed)
        put_u(&w, tx_fnv1a64(w.b, w.len), 8);
    if (w.failed) {
        free(w.b);
        return NULL;
    }
    *len = w.len;
    return w.b;
}

/* ------------------------------------------------------------ reading */

typedef struct {
    const uint8_t *b;
    size_t len, at;
    char *msg;
    size_t msglen;
    bool failed;
} rbuf;

static bool fail(rbuf *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool fail(rbuf *r, const char *fmt, ...)
{
    if (r->failed)
        return false;
    r->failed = true;
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return msg_fail(r->msg, r->msglen, "%s (at byte %zu)", why, r->at);
}

static bool get_u(rbuf *r, int bytes, uint64_t *v)
{
    if (r->failed)
        return false;
    if (r->len - r->at < (size_t)bytes)
        return fail(r, "the file ends in the middle of a record (truncated)");
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++)
        x |= (uint64_t)r->b[r->at + (size_t)i] << (8 * i);
    r->at += (size_t)bytes;
    *v = x;
    return true;
}

void seq_file_free(seq_file_entry *e, size_t n)
{
    if (e == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(e[i].carry);
        free(e[i].prev);
    }
    free(e);
}

/* One record into x; false (with r's message) when it is not one. */
/* An entry's id: kind 1 a string, 0 a number. */
static bool get_id(rbuf *r, uint64_t kind, seq_params *id)
{
    char err[160];
    uint64_t v = 0;
    if (kind == 1) {
        if (!get_u(r, 2, &v))
            return false;
        if (r->len - r->at < v)
            return fail(r, "the file ends inside an id (truncated)");
        if (!seq_id_string(id, (const char *)r->b + r->at, (size_t)v, err,
                           sizeof err))
            return fail(r, "%s", err);
        r->at += (size_t)v;
        return true;
    }
    if (!get_u(r, 8, &v))
        return false;
    return seq_id_number(id, v, err, sizeof err) || fail(r, "%s", err);
}

/* The axis and the shape of a rank-`rank` entry: *lines, the product of
 * the other dimensions. */
static bool get_shape(rbuf *r, uint64_t rank, eng_scan_desc *desc,
                      uint64_t *lines)
{
    uint64_t v = 0;
    if (!get_u(r, 8, &v))
        return false;
    if (v >= rank)
        return fail(r, "axis %" PRIu64 " of a rank-%" PRIu64 " tensor", v,
                    rank);
    desc->rank = (int)rank;
    desc->axis = (int64_t)v;
    *lines = 1;
    for (uint64_t d = 0; d < rank; d++) {
        if (!get_u(r, 8, &v))
            return false;
        if (d == (uint64_t)desc->axis && v != 0)
            return fail(r, "the axis's own dimension is %" PRIu64 ", not 0", v);
        desc->shape[d] = v;
        if (d != (uint64_t)desc->axis && !eng_mul_u64(*lines, v, lines))
            return fail(r, "a shape whose size overflows");
    }
    return true;
}

/* count carries, malloc'd into *out. */
static bool get_carries(rbuf *r, uint64_t count, eng_carry **out)
{
    if ((r->len - r->at) / 8 < count)
        return fail(r, "the file ends inside the carries (truncated)");
    *out = malloc(count ? count * sizeof **out : 1);
    if (*out == NULL)
        return fail(r, "out of memory");
    for (uint64_t k = 0; k < count; k++)
        get_u(r, 8, &(*out)[k].u);
    return true;
}

/* A numbered entry's last chunk: its number, end flag, input hash and
 * the carries before it. */
static bool get_numbers(rbuf *r, seq_file_entry *x)
{
    uint64_t end = 0;
    if (!get_u(r, 8, &x->applied) || !get_u(r, 1, &end))
        return false;
    if (x->applied == 0)
        return fail(r, "a numbered sequence with no chunk applied");
    if (end > 1)
        return fail(r, "an end flag of %" PRIu64, end);
    x->last_end = end;
    if (r->len - r->at < sizeof x->sha)
        return fail(r, "the file ends inside a hash (truncated)");
    memcpy(x->sha, r->b + r->at, sizeof x->sha);
    r->at += sizeof x->sha;
    return get_carries(r, x->count, &x->prev);
}

static bool get_entry(rbuf *r, uint64_t version, seq_file_entry *x,
                      size_t *bytes_left)
{
    uint64_t kind = 0, dtype = 0, flags = 0, rank = 0, v = 0, count = 0;
    if (!get_u(r, 1, &kind) || !get_u(r, 1, &dtype) || !get_u(r, 1, &flags)
        || !get_u(r, 1, &rank))
        return false;
    if (kind > 1)
        return fail(r, "an id kind of %" PRIu64 " (0 or 1)", kind);
    if (dtype >= TX_NDTYPES)
        return fail(r, "a dtype of %" PRIu64, dtype);
    if (flags > (version >= 3   ? 31u
                 : version >= 2 ? 7u
                                : 3u)
        || (flags & 24) == 24)
        return fail(r, "mode flags of %" PRIu64, flags);
    if (rank < 1 || rank > ENG_MAX_RANK)
        return fail(r, "a rank of %" PRIu64, rank);
    if (!get_id(r, kind, &x->id) || !get_shape(r, rank, &x->desc, &count))
        return false;
    x->desc.dtype = (tx_dtype)dtype;
    x->desc.exclusive = flags & 1;
    x->desc.reverse = flags & 2;
    x->numbered = flags & 4;
    x->state = flags & 8 ? SEQ_ENDED : flags & 16 ? SEQ_GONE : SEQ_LIVE;
    if (!get_u(r, 8, &v))
        return false;
    x->idle_deadline_ms = (int64_t)v;
    if (!get_u(r, 8, &v))
        return false;
    if (v != count)
        return fail(
            r, "%" PRIu64 " carries for a shape that has %" PRIu64 " lines", v,
            count);
    uint64_t per = x->numbered ? 16 : 8;
    if (count > *bytes_left / per)
        return fail(r, "more carries than the server's limits hold");
    *bytes_left -= count * per;
    x->count = count;
    return get_carries(r, count, &x->carry)
           && (!x->numbered || get_numbers(r, x));
}

bool seq_file_decode(const uint8_t *b, size_t len, size_t max_entries,
                     size_t max_bytes, seq_file_entry **out, size_t *n,
                     char *msg, size_t msglen)
{
    rbuf r = {b, len, 0, msg, msglen, false};
    if (len < sizeof magic + 24 || memcmp(b, magic, sizeof magic) != 0)
        return fail(&r, "not a tally sequence state file (no TALLYSEQ "
                        "header)");
    r.at = sizeof magic;
    uint64_t version = 0, zero = 0, count = 0;
    get_u(&r, 4, &version);
    get_u(&r, 4, &zero);
    if (version < 1 || version > SEQ_FILE_VERSION)
        return fail(&r,
                    "format version %" PRIu64 "; this tallyd reads "
                    "versions 1 to %u",
                    version, SEQ_FILE_VERSION);
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++)
        sum |= (uint64_t)b[len - 8 + (size_t)i] << (8 * i);
    if (sum != tx_fnv1a64(b, len - 8))
        return fail(&r, "the checksum does not match (the file is corrupt "
                        "or truncated)");
    r.len = len - 8;
    if (zero != 0)
        return fail(&r, "unknown flags %" PRIu64, zero);
    get_u(&r, 8, &count);
    if (count > max_entries)
        return fail(&r,
                    "%" PRIu64 " sequences, more than the %zu the "
                    "server keeps (--max-sequences)",
                    count, max_entries);
    /* a record takes 44 bytes at least: memory follows the bytes read,
     * not the count the file announces */
    if (count > (r.len - r.at) / 44)
        return fail(&r,
                    "%" PRIu64 " sequences announced in %zu bytes "
                    "(truncated)",
                    count, r.len - r.at);
    seq_file_entry *e = calloc(count ? count : 1, sizeof *e);
    if (e == NULL)
        return fail(&r, "out of memory");
    size_t left = max_bytes;
    for (uint64_t i = 0; i < count; i++) {
        if (!get_entry(&r, version, &e[i], &left)) {
            seq_file_free(e, count);
            return false;
        }
    }
    if (r.at != r.len) {
        seq_file_free(e, count);
        return fail(&r, "%zu bytes left over after the last sequence",
                    r.len - r.at);
    }
    *out = e;
    *n = count;
    return true;
}
