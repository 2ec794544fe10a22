/*
 * tx_npy.c - reading and writing .npy headers.
 *
 * The header dict is parsed by a strict little parser of the Python literal
 * subset numpy writes: string keys in either quotes, values that are
 * strings, True/False, or tuples of non-negative integers. Anything else,
 * unknown or repeated keys, missing keys and sizes that overflow are
 * errors; the header length is checked against the bytes at hand before
 * the header is read.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tx_npy.h"
#include "tx_utf8.h"

#define MAGIC "\x93NUMPY"

static tx_npy_status say(char *msg, size_t msglen, tx_npy_status st,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static tx_npy_status say(char *msg, size_t msglen, tx_npy_status st,
                         const char *fmt, ...)
{
    if (msg != NULL && msglen > 0) {
        /* messages quote the header, which may hold any bytes: those of
         * no UTF-8 sequence are written \xNN */
        char raw[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        tx_utf8_escape(raw, strlen(raw), msg, msglen);
    }
    return st;
}

static tx_npy_status bad(char *msg, size_t msglen, const char *what)
{
    return say(msg, msglen, TX_NPY_FORMAT, "bad .npy header: %s", what);
}

typedef struct {
    const char *p, *end;
} lit;

static void ws(lit *l)
{
    while (l->p < l->end
           && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static bool take(lit *l, char ch)
{
    ws(l);
    if (l->p < l->end && *l->p == ch) {
        l->p++;
        return true;
    }
    return false;
}

static bool word(lit *l, const char *w)
{
    ws(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) >= n && memcmp(l->p, w, n) == 0) {
        l->p += n;
        return true;
    }
    return false;
}

/* A quoted string without escapes or newlines (numpy writes neither). */
static bool string(lit *l, const char **s, size_t *n)
{
    ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return false;
    char q = *l->p++;
    const char *start = l->p;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || *l->p == '\n')
            return false;
        l->p++;
    }
    if (l->p >= l->end)
        return false;
    *s = start;
    *n = (size_t)(l->p - start);
    l->p++;
    return true;
}

static bool eq(const char *s, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(s, want, n) == 0;
}

/* descr: a byte order, then one of numpy's codes exactly. */
static tx_npy_status parse_descr(const char *s, size_t n, bool bf16,
                                 tx_npy_header *h, char *msg, size_t msglen)
{
    if (n < 1 || (s[0] != '<' && s[0] != '>' && s[0] != '|' && s[0] != '='))
        return say(msg, msglen, TX_NPY_DTYPE,
                   "unsupported .npy dtype '%.*s': a descr starts with its "
                   "byte order, such as '<f4'",
                   n > 16 ? 16 : (int)n, s);
    char order = s[0];
    const char *code = s + 1;
    size_t clen = n - 1;
    if (bf16) {
        if (eq(code, clen, "u2") || eq(code, clen, "i2") || eq(code, clen, "f2")
            || eq(code, clen, "V2")) {
            h->dtype = TX_BFLOAT16;
            h->big_endian = order == '>';
            return TX_NPY_OK;
        }
        return say(msg, msglen, TX_NPY_DTYPE,
                   "bfloat16 needs a 2-byte array ('<u2', '<i2', '<f2' or "
                   "'|V2'), not '%.*s'",
                   n > 16 ? 16 : (int)n, s);
    }
    for (int t = 0; t < TX_NDTYPES; t++) {
        if (t == TX_BFLOAT16)
            continue;
        /* the table's descr is little-endian or '|'; compare the code */
        if (eq(code, clen, tx_dtype_npy((tx_dtype)t) + 1)) {
            h->dtype = (tx_dtype)t;
            h->big_endian = order == '>' && tx_dtype_size(h->dtype) > 1;
            return TX_NPY_OK;
        }
    }
    return say(msg, msglen, TX_NPY_DTYPE,
               "unsupported .npy dtype '%.*s' (tally takes %s; bool, "
               "complex and structured arrays have no cumulative sum here)",
               clen > 16 ? 16 : (int)clen, code, tx_dtype_list());
}

static bool parse_shape(lit *l, tx_npy_header *h)
{
    if (!take(l, '('))
        return false;
    h->rank = 0;
    for (;;) {
        ws(l);
        if (take(l, ')'))
            return true;
        if (l->p >= l->end || *l->p < '0' || *l->p > '9')
            return false;
        uint64_t v = 0;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (v > (UINT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (uint64_t)(*l->p++ - '0');
        }
        if (l->p < l->end && *l->p == 'L') /* Python 2 long */
            l->p++;
        if (h->rank >= TX_MAX_RANK)
            return false;
        h->shape[h->rank++] = v;
        ws(l);
        if (take(l, ')'))
            return true;
        if (!take(l, ','))
            return false;
    }
}

tx_npy_status tx_npy_preamble(const uint8_t *buf, size_t len, size_t *pre,
                              size_t *hlen, size_t *need, char *msg,
                              size_t msglen)
{
    *need = 0;
    if (len < 10 || memcmp(buf, MAGIC, 6) != 0) {
        if (len < 10 && memcmp(buf, MAGIC, len < 6 ? len : 6) == 0)
            *need = 10;
        return say(msg, msglen, TX_NPY_FORMAT,
                   "not a .npy file: it must start with \\x93NUMPY (%zu "
                   "bytes received)",
                   len);
    }
    unsigned major = buf[6], minor = buf[7];
    if (major == 1) {
        *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        *pre = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) {
            *need = 12;
            return bad(msg, msglen, "truncated before the header length");
        }
        *hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16
                | (size_t)buf[11] << 24;
        *pre = 12;
    } else {
        return say(msg, msglen, TX_NPY_FORMAT,
                   "unsupported .npy format version %u.%u (1.0, 2.0 and 3.0 "
                   "are)",
                   major, minor);
    }
    if (*hlen > TX_NPY_MAX_HEADER)
        return say(msg, msglen, TX_NPY_FORMAT,
                   "bad .npy header: %zu bytes long, more than the %d "
                   "accepted",
                   *hlen, TX_NPY_MAX_HEADER);
    return TX_NPY_OK;
}

tx_npy_status tx_npy_parse(const uint8_t *buf, size_t len, bool bf16,
                           tx_npy_header *h, char *msg, size_t msglen)
{
    memset(h, 0, sizeof *h);
    size_t pre, hlen, need;
    tx_npy_status st =
        tx_npy_preamble(buf, len, &pre, &hlen, &need, msg, msglen);
    if (st != TX_NPY_OK)
        return st;
    if (hlen > len - pre)
        return say(msg, msglen, TX_NPY_FORMAT,
                   "bad .npy header: it claims %zu bytes but the body has "
                   "only %zu after the preamble",
                   hlen, len - pre);

    lit l = {(const char *)buf + pre, (const char *)buf + pre + hlen};
    bool have_descr = false, have_order = false, have_shape = false;
    const char *descr = NULL;
    size_t descr_len = 0;
    if (!take(&l, '{'))
        return bad(msg, msglen, "it is not a dict");
    for (;;) {
        if (take(&l, '}'))
            break;
        const char *k;
        size_t kn;
        if (!string(&l, &k, &kn) || !take(&l, ':'))
            return bad(msg, msglen, "expected a quoted key and ':'");
        if (eq(k, kn, "descr") && !have_descr) {
            if (!string(&l, &descr, &descr_len))
                return bad(msg, msglen,
                           "descr must be a string such as '<f4' (structured "
                           "arrays are not tensors)");
            have_descr = true;
        } else if (eq(k, kn, "fortran_order") && !have_order) {
            if (word(&l, "True"))
                h->fortran_order = true;
            else if (!word(&l, "False"))
                return bad(msg, msglen, "fortran_order must be True or False");
            have_order = true;
        } else if (eq(k, kn, "shape") && !have_shape) {
            if (!parse_shape(&l, h))
                return bad(msg, msglen,
                           "shape must be a tuple of non-negative integers");
            have_shape = true;
        } else {
            return say(msg, msglen, TX_NPY_FORMAT,
                       "bad .npy header: unknown or repeated key '%.*s'",
                       kn > 24 ? 24 : (int)kn, k);
        }
        if (!take(&l, ',')) {
            if (take(&l, '}'))
                break;
            return bad(msg, msglen, "expected ',' or '}'");
        }
    }
    ws(&l);
    if (l.p != l.end)
        return bad(msg, msglen, "text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return bad(msg, msglen, "descr, fortran_order and shape are required");
    st = parse_descr(descr, descr_len, bf16, h, msg, msglen);
    if (st != TX_NPY_OK)
        return st;
    if (h->rank == 0)
        return say(msg, msglen, TX_NPY_RANK,
                   "the .npy array has shape () (rank 0): a cumulative sum "
                   "needs at least one axis");

    uint64_t count = 1, bytes;
    for (int d = 0; d < h->rank; d++)
        if (h->shape[d] && __builtin_mul_overflow(count, h->shape[d], &count))
            return say(msg, msglen, TX_NPY_TOO_LARGE,
                       ".npy shape overflows 64 bits");
    for (int d = 0; d < h->rank; d++)
        if (h->shape[d] == 0)
            count = 0;
    if (__builtin_mul_overflow(count, (uint64_t)tx_dtype_size(h->dtype),
                               &bytes))
        return say(msg, msglen, TX_NPY_TOO_LARGE,
                   ".npy array size overflows 64 bits");
    h->data_offset = pre + hlen;
    h->data_bytes = bytes;
    return TX_NPY_OK;
}

size_t tx_npy_write_header(tx_dtype t, const uint64_t *shape, int rank,
                           uint8_t *out)
{
    char dict[TX_NPY_WRITE_MAX];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     tx_dtype_npy(t));
    for (int d = 0; d < rank; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%" PRIu64 "%s",
                      shape[d],
                      rank == 1      ? ","
                      : d + 1 < rank ? ", "
                                     : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces and a final newline to a multiple of 64 bytes */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    memcpy(out, MAGIC "\x01\x00", 8);
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', hlen - (size_t)n - 1);
    out[padded - 1] = '\n';
    return padded;
}

void tx_npy_byteswap(void *data, size_t count, size_t size)
{
    uint8_t *p = data;
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

void tx_npy_fortran_to_c(const void *src, void *dst, size_t size,
                         const uint64_t *shape, int rank)
{
    /* walk C order with a multi-index, tracking the Fortran offset */
    uint64_t idx[TX_MAX_RANK] = {0}, fstride[TX_MAX_RANK];
    uint64_t count = 1;
    for (int d = 0; d < rank; d++) {
        fstride[d] = count;
        count *= shape[d];
    }
    const uint8_t *s = src;
    uint8_t *o = dst;
    uint64_t f = 0;
    for (uint64_t i = 0; i < count; i++) {
        memcpy(o + i * size, s + f * size, size);
        for (int d = rank - 1; d >= 0; d--) {
            idx[d]++;
            f += fstride[d];
            if (idx[d] < shape[d])
                break;
            f -= idx[d] * fstride[d];
            idx[d] = 0;
        }
    }
}
