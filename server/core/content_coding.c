/*
 * content_coding.c - zlib behind the content codings, and libdeflate for bodies
 * compressed whole.
 */
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "content_coding.h"

int encoding_parse(const char *value)
{
    if (value == NULL || value[0] == '\0' || strcasecmp(value, "identity") == 0)
        return 0;
    if (strcasecmp(value, "gzip") == 0 || strcasecmp(value, "x-gzip") == 0)
        return 1;
    if (strcasecmp(value, "deflate") == 0)
        return 2;
    return -1;
}

/* Inflates with the given window setting; returns Z_STREAM_END on
 * success, Z_BUF_ERROR when the output would exceed max. */
static int inflate_all(int window, const uint8_t *in, size_t len, size_t max,
                       uint8_t **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, window) != Z_OK)
        return Z_MEM_ERROR;
    size_t cap = len * 4 < 65536 ? 65536 : len * 4;
    if (cap > max)
        cap = max;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (buf == NULL) {
        inflateEnd(&z);
        return Z_MEM_ERROR;
    }
    size_t have = 0;
    int rc = Z_OK;
    z.next_in = (Bytef *)in;
    /* zlib counts in uInt: feed large inputs in pieces */
    size_t in_left = len;
    while (rc == Z_OK) {
        if (z.avail_in == 0 && in_left > 0) {
            uInt piece = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
            z.avail_in = piece;
            in_left -= piece;
        }
        if (have == cap) {
            if (cap == max) {
                rc = Z_BUF_ERROR;
                break;
            }
            size_t ncap = cap * 2 > max ? max : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                rc = Z_MEM_ERROR;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t room = cap - have;
        z.next_out = buf + have;
        z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        uInt before = z.avail_out;
        rc = inflate(&z, Z_NO_FLUSH);
        have += before - z.avail_out;
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_left == 0) {
            rc = Z_DATA_ERROR; /* truncated stream */
            break;
        }
        if (rc == Z_BUF_ERROR)
            rc = Z_OK; /* needs more room or input: loop */
    }
    if (rc == Z_STREAM_END && (z.avail_in != 0 || in_left != 0))
        rc = Z_DATA_ERROR; /* trailing garbage */
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = have;
    return rc;
}

status_code encoding_decode(int coding, const uint8_t *in, size_t len,
                            size_t max, uint8_t **out, size_t *out_len,
                            char *msg, size_t msglen)
{
    const char *name = coding == 1 ? "gzip" : "deflate";
    /* gzip: gzip header; deflate: zlib header, or raw as some clients send */
    int rc = inflate_all(coding == 1 ? 16 + MAX_WBITS : MAX_WBITS, in, len, max,
                         out, out_len);
    if (coding == 2 && rc == Z_DATA_ERROR)
        rc = inflate_all(-MAX_WBITS, in, len, max, out, out_len);
    switch (rc) {
    case Z_STREAM_END: return STATUS_OK;
    case Z_BUF_ERROR:
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "the %s body expands to more than the %zu bytes this server "
            "accepts",
            name, max);
    case Z_MEM_ERROR:
        return msg_fail_as(STATUS_NOMEM, msg, msglen,
                           "out of memory decoding the %s body", name);
    default:
        return msg_fail_as(
            STATUS_ENCODING, msg, msglen,
            "the body is not valid %s data (Content-Encoding: %s)", name, name);
    }
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t'; /* RFC 9110's optional whitespace */
}

/* RFC 9110, 12.5.3: gzip is acceptable when it is listed with a weight
 * above 0, or when it is not listed and "*" is, with a weight above 0. An
 * explicit "gzip;q=0" refuses it whatever "*" says. */
bool encoding_accepts_gzip(const char *accept)
{
    if (accept == NULL)
        return false;
    double gz = -1, star = -1; /* -1: not listed */
    const char *p = accept;
    for (;;) {
        while (is_ows(*p) || *p == ',')
            p++;
        if (*p == '\0')
            break;
        const char *tok = p;
        while (*p != '\0' && *p != ',' && *p != ';' && !is_ows(*p))
            p++;
        size_t n = (size_t)(p - tok);
        double q = 1;
        while (is_ows(*p))
            p++;
        while (*p == ';') {
            p++;
            while (is_ows(*p))
                p++;
            if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
                q = strtod(p + 2, NULL);
            while (*p != '\0' && *p != ',' && *p != ';')
                p++;
        }
        if ((n == 4 && strncasecmp(tok, "gzip", 4) == 0)
            || (n == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
            gz = q > gz ? q : gz;
        else if (n == 1 && tok[0] == '*')
            star = q > star ? q : star;
        while (*p != '\0' && *p != ',')
            p++;
    }
    return gz >= 0 ? gz > 0 : star > 0;
}

struct gzip_stream {
    z_stream z;
    bool done;
};

gzip_stream *gzip_stream_new(void)
{
    gzip_stream *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    /* level 1: tensors compress little, so favour speed */
    if (deflateInit2(&g->z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY)
        != Z_OK) {
        free(g);
        return NULL;
    }
    return g;
}

void gzip_stream_free(gzip_stream *g)
{
    if (g == NULL)
        return;
    deflateEnd(&g->z);
    free(g);
}

bool gzip_stream_run(gzip_stream *g, const uint8_t *in, size_t *in_len,
                     bool final, uint8_t *out, size_t *out_len)
{
    if (g->done) {
        *in_len = 0;
        *out_len = 0;
        return true;
    }
    uInt ain = *in_len > (1u << 30) ? (1u << 30) : (uInt)*in_len;
    uInt aout = *out_len > (1u << 30) ? (1u << 30) : (uInt)*out_len;
    g->z.next_in = (Bytef *)in;
    g->z.avail_in = ain;
    g->z.next_out = out;
    g->z.avail_out = aout;
    bool all_in = ain == *in_len;
    int rc = deflate(&g->z, final && all_in ? Z_FINISH : Z_NO_FLUSH);
    *in_len = ain - g->z.avail_in;
    *out_len = aout - g->z.avail_out;
    if (rc == Z_STREAM_END)
        g->done = true;
    return g->done;
}

bool gzip_whole(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
    /* level 1: measured fastest, and the higher levels shrink JSON tensors
     * little more for several times the time (BENCHMARKS.md's figures) */
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
    if (c == NULL)
        return false;
    size_t cap = libdeflate_gzip_compress_bound(c, len);
    uint8_t *buf = malloc(cap);
    size_t n = buf != NULL ? libdeflate_gzip_compress(c, in, len, buf, cap) : 0;
    libdeflate_free_compressor(c);
    if (n == 0) {
        free(buf);
        return false;
    }
    *out = buf;
    *out_len = n;
    return true;
}
