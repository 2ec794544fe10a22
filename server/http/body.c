/*
 * body.c - a request's body: read into a buffer capped by --max-body-bytes
 * and sized by what arrives, its share of --max-buffered-bytes, and its
 * Content-Encoding decoded (body.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "budget.h"
#include "buffer.h"
#include "content_coding.h"

#define NO_ROOM                                                                \
    "the server holds as many request bodies in memory as it may "             \
    "(--max-buffered-bytes); retry in a moment"

/* Checks Content-Length against --max-body-bytes (a 413 goes out without
 * reading the body) and remembers it. Memory comes as the bytes do
 * (http_body_append), not as a client announces them. */
status_code http_body_begin(request *r, const char *cl, char *msg,
                            size_t msglen)
{
    tallyd_server *s = r->s;
    r->body_expect = SIZE_MAX;
    if (cl == NULL)
        return STATUS_OK; /* chunked or empty: grown as it comes */
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (errno != 0 || *end != '\0')
        return STATUS_OK; /* libmicrohttpd rejects malformed lengths itself */
    if (n > s->cfg.max_body_bytes)
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "the body is %llu bytes, more than the %zu this server "
            "accepts (--max-body-bytes)",
            n, s->cfg.max_body_bytes);
    r->body_expect = (size_t)n;
    return STATUS_OK;
}

/* A body's first buffer (a medium one, 256 KiB with its header): a
 * client that announces a large body and sends little holds no more. */
#define BODY_FIRST (((size_t)256 << 10) - 128)

/* Takes `more` bytes of room from the server's --max-buffered-bytes for
 * r; false when they are not there. */
static bool reserve_body(request *r, size_t more)
{
    if (!budget_take(r->s, more))
        return false;
    r->body_reserved += more;
    return true;
}

void http_body_release(request *r)
{
    budget_give(r->s, r->body_reserved);
    r->body_reserved = 0;
}

void http_body_append(request *r, const char *data, size_t n)
{
    size_t max = r->s->cfg.max_body_bytes;
    if (r->body_too_large || r->body_no_room)
        return;
    if (n > max - r->body_len) {
        r->body_too_large = true;
        return;
    }
    if (r->body_len + n > r->body_cap) {
        /* room for what has come: the first buffer, then the whole
         * announced length (one copy of at most the first), or doubling
         * up to the limit when no length was announced */
        size_t need = r->body_len + n, cap;
        if (r->body_expect != SIZE_MAX && need <= r->body_expect)
            cap = need <= BODY_FIRST && r->body_cap < BODY_FIRST
                      ? (r->body_expect < BODY_FIRST ? r->body_expect
                                                     : BODY_FIRST)
                      : r->body_expect;
        else
            for (cap = r->body_cap ? r->body_cap : 65536; cap < need;)
                cap = cap > max / 2 ? max : cap * 2;
        if (!reserve_body(r, cap - r->body_cap)) {
            r->body_no_room = true;
            return;
        }
        uint8_t *nb = eng_buffer_alloc(cap);
        if (nb == NULL) {
            r->body_no_room = true;
            return;
        }
        if (r->body_len)
            memcpy(nb, r->body, r->body_len);
        eng_buffer_free(r->body);
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
}

status_code http_body_finish(request *r, const char *ce, char *msg,
                             size_t msglen)
{
    tallyd_server *s = r->s;
    if (r->body_too_large)
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "the body is more than the %zu bytes this server accepts "
            "(--max-body-bytes)",
            s->cfg.max_body_bytes);
    if (r->body_no_room)
        return msg_fail_as(STATUS_NOMEM, msg, msglen, "%s", NO_ROOM);
    counter_add(&s->metrics.bytes_in, r->body_len);
    int coding = encoding_parse(ce);
    if (coding < 0)
        return msg_fail_as(STATUS_MEDIA_TYPE, msg, msglen,
                           "Content-Encoding \"%.40s\" is not supported (gzip, "
                           "deflate and identity are)",
                           ce);
    if (coding > 0 && r->body_len > 0) {
        uint64_t t = now_ns();
        uint8_t *plain;
        size_t plen;
        status_code e =
            encoding_decode(coding, r->body, r->body_len, s->cfg.max_body_bytes,
                            &plain, &plen, msg, msglen);
        if (e != STATUS_OK)
            return e;
        /* copy into an aligned buffer: tensors are used in place; the
         * decoded body counts against --max-buffered-bytes too */
        if (plen > r->body_cap && !reserve_body(r, plen - r->body_cap)) {
            free(plain);
            return msg_fail_as(STATUS_NOMEM, msg, msglen, "%s", NO_ROOM);
        }
        uint8_t *aligned = eng_buffer_alloc(plen);
        if (aligned == NULL) {
            free(plain);
            return msg_fail_as(STATUS_NOMEM, msg, msglen,
                               "out of memory decoding the body");
        }
        memcpy(aligned, plain, plen);
        free(plain);
        eng_buffer_free(r->body);
        r->body = aligned;
        r->body_len = r->body_cap = plen;
        r->rec.decode_ns = now_ns() - t;
    }
    return STATUS_OK;
}
