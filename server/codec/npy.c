/*
 * npy.c - reading and writing .npy headers.
 *
 * The header dict is parsed by a strict little parser of the Python literal
 * subset numpy writes: string keys in either quotes, values that are
 * strings, True/False, or tuples of non-negative integers. Anything else,
 * unknown keys, missing keys and sizes that do not add up are errors; the
 * header length is checked against the body before it is read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "npy.h"

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

/* A quoted string without escapes (numpy writes none). */
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

static bool eq(const char *s, size_t n, const char *lit_)
{
    return strlen(lit_) == n && memcmp(s, lit_, n) == 0;
}

static tally_err bad(char *msg, size_t msglen, const char *what)
{
    return tally_fail(msg, msglen, TALLY_E_INVALID, "bad .npy header: %s",
                      what);
}

/* descr: byte order, kind, size. */
static tally_err parse_descr(const char *s, size_t n, bool bf16, npy_header *h,
                             char *msg, size_t msglen)
{
    char order = '=';
    if (n > 0 && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
        order = s[0];
        s++;
        n--;
    }
    if (n < 2 || n > 3)
        goto unknown;
    char kind = s[0];
    unsigned size = 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            goto unknown;
        size = size * 10 + (unsigned)(s[i] - '0');
    }
    h->big_endian = order == '>' && size > 1;
    if (bf16) {
        if (size != 2
            || (kind != 'u' && kind != 'i' && kind != 'f' && kind != 'V'))
            return tally_fail(msg, msglen, TALLY_E_DTYPE,
                              "dtype=bfloat16 needs a 2-byte array ('<u2', "
                              "'<i2', '<f2' or '|V2'), not '%.*s'",
                              (int)n, s);
        h->dtype = TALLY_BFLOAT16;
        return TALLY_E_OK;
    }
    static const struct {
        char kind;
        unsigned size;
        tally_dtype t;
    } map[] = {
        {'f', 2, TALLY_FLOAT16}, {'f', 4, TALLY_FLOAT32},
        {'f', 8, TALLY_FLOAT64}, {'i', 1, TALLY_INT8},
        {'i', 2, TALLY_INT16},   {'i', 4, TALLY_INT32},
        {'i', 8, TALLY_INT64},   {'u', 1, TALLY_UINT8},
        {'u', 2, TALLY_UINT16},  {'u', 4, TALLY_UINT32},
        {'u', 8, TALLY_UINT64},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].kind == kind && map[i].size == size) {
            h->dtype = map[i].t;
            return TALLY_E_OK;
        }
unknown:
    return tally_fail(msg, msglen, TALLY_E_DTYPE,
                      "unsupported .npy dtype '%.*s' (tally takes %s; bool, "
                      "complex and structured arrays have no cumulative sum "
                      "here)",
                      n > 16 ? 16 : (int)n, s, tally_dtype_list());
}

static bool parse_shape(lit *l, npy_header *h)
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
        if (h->rank >= TALLY_MAX_RANK)
            return false;
        h->shape[h->rank++] = v;
        ws(l);
        if (take(l, ')'))
            return true;
        if (!take(l, ','))
            return false;
    }
}

tally_err npy_parse(const uint8_t *buf, size_t len, bool bf16, npy_header *h,
                    char *msg, size_t msglen)
{
    memset(h, 0, sizeof *h);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "not a .npy file: it must start with \\x93NUMPY "
                          "(%zu bytes received)",
                          len);
    unsigned major = buf[6], minor = buf[7];
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return bad(msg, msglen, "truncated before the header length");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16
               | (size_t)buf[11] << 24;
        pre = 12;
    } else {
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "unsupported .npy format version %u.%u (1.0, 2.0 "
                          "and 3.0 are)",
                          major, minor);
    }
    if (hlen > NPY_MAX_HEADER)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "bad .npy header: %zu bytes long, more than the "
                          "%d accepted",
                          hlen, NPY_MAX_HEADER);
    if (hlen > len - pre)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "bad .npy header: it claims %zu bytes but the body "
                          "has only %zu after the preamble",
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
                return bad(msg, msglen, "descr must be a string such as '<f4'");
            have_descr = true;
        } else if (eq(k, kn, "fortran_order") && !have_order) {
            ws(&l);
            if ((size_t)(l.end - l.p) >= 4 && memcmp(l.p, "True", 4) == 0) {
                h->fortran_order = true;
                l.p += 4;
            } else if ((size_t)(l.end - l.p) >= 5
                       && memcmp(l.p, "False", 5) == 0) {
                l.p += 5;
            } else {
                return bad(msg, msglen, "fortran_order must be True or False");
            }
            have_order = true;
        } else if (eq(k, kn, "shape") && !have_shape) {
            if (!parse_shape(&l, h))
                return bad(msg, msglen,
                           "shape must be a tuple of non-negative integers");
            have_shape = true;
        } else {
            return tally_fail(msg, msglen, TALLY_E_INVALID,
                              "bad .npy header: unknown or repeated key "
                              "'%.*s'",
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
    tally_err e = parse_descr(descr, descr_len, bf16, h, msg, msglen);
    if (e != TALLY_E_OK)
        return e;
    if (h->rank == 0)
        return tally_fail(msg, msglen, TALLY_E_RANK,
                          "the .npy array has shape () (rank 0): a cumulative "
                          "sum needs at least one axis");

    uint64_t count = 1, bytes;
    for (int d = 0; d < h->rank; d++)
        if (h->shape[d] && !tally_mul_u64(count, h->shape[d], &count))
            return tally_fail(msg, msglen, TALLY_E_TOO_LARGE,
                              ".npy shape overflows 64 bits");
    for (int d = 0; d < h->rank; d++)
        if (h->shape[d] == 0)
            count = 0;
    if (!tally_mul_u64(count, tally_dtype_size(h->dtype), &bytes))
        return tally_fail(msg, msglen, TALLY_E_TOO_LARGE,
                          ".npy array size overflows 64 bits");
    h->data_offset = pre + hlen;
    h->data_bytes = (size_t)bytes;
    if (len - h->data_offset != bytes)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "the .npy header describes %" PRIu64 " bytes of "
                          "data but the body has %zu",
                          bytes, len - h->data_offset);
    return TALLY_E_OK;
}

void npy_byteswap(void *data, size_t count, size_t size)
{
    uint8_t *p = data;
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

void npy_fortran_to_c(const void *src, void *dst, size_t size,
                      const uint64_t *shape, int rank)
{
    /* walk C order with a multi-index, tracking the Fortran offset */
    uint64_t idx[TALLY_MAX_RANK] = {0}, fstride[TALLY_MAX_RANK];
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

size_t npy_write_header(tally_dtype t, const uint64_t *shape, int rank,
                        uint8_t *out)
{
    static const char *descr[TALLY_NDTYPES] = {
        [TALLY_FLOAT16] = "<f2", [TALLY_BFLOAT16] = "<u2",
        [TALLY_FLOAT32] = "<f4", [TALLY_FLOAT64] = "<f8",
        [TALLY_INT8] = "|i1",    [TALLY_INT16] = "<i2",
        [TALLY_INT32] = "<i4",   [TALLY_INT64] = "<i8",
        [TALLY_UINT8] = "|u1",   [TALLY_UINT16] = "<u2",
        [TALLY_UINT32] = "<u4",  [TALLY_UINT64] = "<u8",
    };
    char dict[NPY_MAX_HEADER / 2];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr[t]);
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
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', hlen - (size_t)n - 1);
    out[padded - 1] = '\n';
    return padded;
}
