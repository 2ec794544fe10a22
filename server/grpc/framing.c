/*
 * framing.c - gRPC's message framing, grpc-timeout and grpc-message
 * (framing.h).
 */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "buffer.h"
#include "content_coding.h"
#include "framing.h"

size_t grpc_prefix_feed(grpc_prefix *p, const uint8_t *data, size_t len)
{
    size_t n = GRPC_PREFIX_LEN - p->got;
    if (n > len)
        n = len;
    memcpy(p->b + p->got, data, n);
    p->got += n;
    return n;
}

status_code grpc_prefix_check(const grpc_prefix *p, bool encoded, size_t max,
                              bool *compressed, size_t *len, char *msg,
                              size_t msglen)
{
    *compressed = p->b[0] & 1;
    *len = (size_t)p->b[1] << 24 | (size_t)p->b[2] << 16
           | (size_t)p->b[3] << 8 | p->b[4];
    if (p->b[0] > 1)
        return msg_fail_as(STATUS_INVALID, msg, msglen,
                           "bad gRPC message prefix");
    if (*compressed && !encoded)
        return msg_fail_as(STATUS_ENCODING, msg, msglen,
                           "a compressed message without a grpc-encoding");
    if (*len > max)
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "the message is %zu bytes, more than the %zu this server "
            "accepts (--max-body-bytes)",
            *len, max);
    return STATUS_OK;
}

bool grpc_timeout_parse(const char *v, size_t n, int64_t *ms)
{
    if (n < 2 || n > 9)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    /* 8 digits of any unit but hours fit in 64 bits of nanoseconds */
    uint64_t ns;
    switch (v[n - 1]) {
    case 'H':
        ns = x > UINT64_MAX / 3600000000000ull ? UINT64_MAX
                                               : x * 3600000000000ull;
        break;
    case 'M': ns = x * 60000000000ull; break;
    case 'S': ns = x * 1000000000ull; break;
    case 'm': ns = x * 1000000ull; break;
    case 'u': ns = x * 1000ull; break;
    case 'n': ns = x; break;
    default: return false;
    }
    if (ns > (uint64_t)1 << 53) {
        *ms = -1;
        return true;
    }
    *ms = (int64_t)((ns + 999999) / 1000000);
    if (*ms == 0)
        *ms = 1;
    return true;
}

void grpc_message_encode(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    if (outlen == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0';
         p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            if (n + 1 >= outlen)
                break;
            out[n++] = (char)*p;
        } else {
            if (n + 3 >= outlen)
                break;
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
}

status_code grpc_message_decode(tallyd_server *s, int encoding,
                                const uint8_t *in, size_t len, uint8_t **out,
                                size_t *outlen, size_t *reserved, char *msg,
                                size_t msglen)
{
    uint8_t *plain;
    size_t n;
    *out = NULL;
    *reserved = 0;
    status_code e = encoding_decode(encoding, in, len, s->cfg.max_body_bytes,
                                    &plain, &n, msg, msglen);
    if (e != STATUS_OK)
        return e;
    if (!budget_take(s, n)) {
        free(plain);
        return msg_fail_as(STATUS_NOMEM, msg, msglen,
                           "the server holds too many messages now "
                           "(--max-buffered-bytes); retry after a moment");
    }
    /* decoded into malloc'd memory: into an aligned tensor buffer, as
     * REST's body is (one copy) */
    uint8_t *aligned = eng_buffer_alloc(n);
    if (aligned == NULL) {
        free(plain);
        budget_give(s, n);
        return msg_fail_as(STATUS_NOMEM, msg, msglen, "out of memory");
    }
    memcpy(aligned, plain, n);
    free(plain);
    *out = aligned;
    *outlen = n;
    *reserved = n;
    return STATUS_OK;
}
