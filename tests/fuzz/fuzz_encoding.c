/*
 * fuzz_encoding.c - Content-Encoding and Accept-Encoding.
 *
 * The first byte picks what the rest is:
 *   0, 1  a gzip or deflate body, decoded with a 64 KiB cap (bombs
 *         included: the seeds hold megabytes of zeros in a few bytes).
 *         Properties: never more than the cap, a refusal with a message
 *         the server can send, and what decodes, gzipped again (whole and
 *         streamed in pieces), decodes to the same bytes;
 *   2     an Accept-Encoding value: whether gzip is accepted, against an
 *         independent reading of RFC 9110 when the value is well formed;
 *   3     plain bytes, gzipped whole and streamed, decoded back.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "content_coding.h"
#include "fuzzd.h"

#define CAP (64u << 10)

static void decodes_to(const uint8_t *gz, size_t n, const uint8_t *want,
                       size_t wlen)
{
    uint8_t *out;
    size_t olen;
    char msg[256];
    status_code e =
        encoding_decode(1, gz, n, wlen + 1, &out, &olen, msg, sizeof msg);
    FUZZ_CHECK(e == STATUS_OK, "our own gzip does not decode: %s", msg);
    FUZZ_CHECK(olen == wlen && memcmp(out, want, wlen) == 0,
               "gzip changed %zu bytes into %zu", wlen, olen);
    free(out);
}

static void regzip(const uint8_t *in, size_t len, unsigned seed)
{
    uint8_t *gz;
    size_t n;
    FUZZ_CHECK(gzip_whole(in, len, &gz, &n), "out of memory");
    decodes_to(gz, n, in, len);
    free(gz);
    /* streamed: input and output in pieces of varying size */
    gzip_stream *g = gzip_stream_new();
    FUZZ_CHECK(g != NULL, "out of memory");
    size_t cap = len + len / 2 + 1024, used = 0, at = 0;
    uint8_t *buf = malloc(cap);
    FUZZ_CHECK(buf != NULL, "out of memory");
    bool done = false;
    for (int guard = 0; !done; guard++) {
        FUZZ_CHECK(guard < 100000, "gzip_stream_run makes no progress");
        seed = seed * 1103515245u + 12345u;
        size_t take = len - at < 1 + (seed >> 16) % 700
                          ? len - at
                          : 1 + (seed >> 16) % 700;
        size_t room = cap - used < 1 + (seed >> 8) % 300
                          ? cap - used
                          : 1 + (seed >> 8) % 300;
        size_t in_len = take, out_len = room;
        done = gzip_stream_run(g, in + at, &in_len, at + take == len,
                               buf + used, &out_len);
        at += in_len;
        used += out_len;
        FUZZ_CHECK(used < cap || done, "the stream outgrew %zu bytes", cap);
    }
    gzip_stream_free(g);
    decodes_to(buf, used, in, len);
    free(buf);
}

/* RFC 9110, 12.5.3 and 12.4.2: codings with optional q=qvalue, where
 * qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ). Returns -1
 * when the value is not well formed, else whether gzip is accepted: its
 * own q (x-gzip counts as gzip) when named, else that of "*". */
static int reference_accepts(const char *v)
{
    double gz = -1, star = -1;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        const char *tok = p;
        while (*p && strchr("!#$%&'*+-.^_`|~", *p) != NULL
                   ? 1
                   : ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                      || (*p >= '0' && *p <= '9')))
            p++;
        size_t n = (size_t)(p - tok);
        if (n == 0)
            return -1;
        double q = 1;
        while (*p == ' ' || *p == '\t')
            p++;
        while (*p == ';') {
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            if (!((p[0] == 'q' || p[0] == 'Q') && p[1] == '='))
                return -1;
            p += 2;
            if (*p == '0') {
                q = 0;
                p++;
                if (*p == '.') {
                    p++;
                    double scale = 0.1;
                    for (int i = 0; i < 3 && *p >= '0' && *p <= '9'; i++) {
                        q += (*p++ - '0') * scale;
                        scale /= 10;
                    }
                }
            } else if (*p == '1') {
                q = 1;
                p++;
                if (*p == '.') {
                    p++;
                    for (int i = 0; i < 3 && *p == '0'; i++)
                        p++;
                }
            } else {
                return -1;
            }
            while (*p == ' ' || *p == '\t')
                p++;
        }
        if (*p != ',' && *p != '\0')
            return -1;
        if ((n == 4 && strncasecmp(tok, "gzip", 4) == 0)
            || (n == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
            gz = q > gz ? q : gz;
        else if (n == 1 && *tok == '*')
            star = q > star ? q : star;
    }
    return gz >= 0 ? gz > 0 : star > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    data++;
    size--;
    if (mode < 2) {
        uint8_t *out = NULL;
        size_t olen = 0;
        char msg[256];
        status_code e = encoding_decode(mode + 1, data, size, CAP, &out, &olen,
                                        msg, sizeof msg);
        if (e != STATUS_OK) {
            FUZZ_CHECK(e == STATUS_TOO_LARGE || e == STATUS_ENCODING
                           || e == STATUS_NOMEM,
                       "decoding failed with %s", status_name(e));
            fuzz_refusal("the decoder's message", msg, sizeof msg);
            return 0;
        }
        FUZZ_CHECK(olen <= CAP, "decoded %zu bytes past the cap of %u", olen,
                   CAP);
        regzip(out, olen, (unsigned)size);
        free(out);
    } else if (mode == 2) {
        char *v = fuzz_text(data, size);
        bool got = encoding_accepts_gzip(v);
        int want = strlen(v) == size ? reference_accepts(v) : -1;
        FUZZ_CHECK(want < 0 || got == (want == 1),
                   "Accept-Encoding \"%s\": gzip %s, RFC 9110 says %s", v,
                   got ? "accepted" : "refused", want ? "accepted" : "refused");
        (void)encoding_parse(v);
        free(v);
    } else {
        regzip(data, size, (unsigned)size * 7u);
    }
    return 0;
}
