/*
 * fuzz_numbers.c - number text, as JSON bodies carry it.
 *
 * Input: one byte picks the dtype, the rest is the text. Properties:
 *   - numtext_scan() accepts exactly JSON's number grammar (checked against
 *     a plain reading of RFC 8259's rule);
 *   - every path that reads a number (numtext_parse, the one-pass
 *     numtext_parse_float_at / _int_at, the fast numtext_float_fast and
 *     numtext_int_token) agrees on the value and the token's length, or
 *     refuses it with a UTF-8 reason;
 *   - float32 and float64 equal what the C library's strtof/strtod give
 *     (both correctly rounded), integers what strtoll/strtoull give;
 *   - a value read back from its printed text is the same bits.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzd.h"
#include "numtext.h"

/* RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static size_t json_number_len(const char *s, const char *end)
{
    const char *p = s;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return 0;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (p < end && *p == '.') {
        const char *d = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return 0;
    }
    return (size_t)(p - s);
}

static void check_reference(tx_dtype t, const char *tok, const void *got)
{
    errno = 0;
    char *end;
    switch (t) {
    case TX_FLOAT32: {
        float want = strtof(tok, &end), v;
        memcpy(&v, got, sizeof v);
        if (isfinite(want))
            FUZZ_CHECK(memcmp(&v, &want, sizeof v) == 0,
                       "float32 \"%s\": %a, strtof gives %a", tok, (double)v,
                       (double)want);
        break;
    }
    case TX_FLOAT64: {
        double want = strtod(tok, &end), v;
        memcpy(&v, got, sizeof v);
        if (isfinite(want))
            FUZZ_CHECK(memcmp(&v, &want, sizeof v) == 0,
                       "float64 \"%s\": %a, strtod gives %a", tok, v, want);
        break;
    }
    case TX_INT64: {
        long long want = strtoll(tok, &end, 10), v;
        memcpy(&v, got, sizeof v);
        if (errno == 0 && *end == '\0')
            FUZZ_CHECK(v == want, "int64 \"%s\": %lld, not %lld", tok, v, want);
        break;
    }
    case TX_UINT64: {
        unsigned long long want = strtoull(tok, &end, 10), v;
        memcpy(&v, got, sizeof v);
        if (errno == 0 && *end == '\0' && tok[0] != '-')
            FUZZ_CHECK(v == want, "uint64 \"%s\": %llu, not %llu", tok, v,
                       want);
        break;
    }
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    tx_dtype t = (tx_dtype)(data[0] % TX_NDTYPES);
    char *text = fuzz_text(data + 1, size - 1);
    const char *s = text, *end = text + size - 1;
    size_t n = numtext_scan(s, end);
    size_t want = json_number_len(s, end);
    /* the scanner takes the whole token: a digit after it is no number */
    FUZZ_CHECK(n == want, "numtext_scan(\"%s\") = %zu, JSON's grammar %zu", text,
               n, want);
    char why[256] = "", why2[256] = "";
    uint64_t v1 = 0, v2 = 0, v3 = 0;
    size_t used = 0;
    bool ok = n > 0 && numtext_parse(t, s, n, &v1, 0, why, sizeof why);
    if (n > 0 && !ok)
        fuzz_message("numtext_parse's reason", why, sizeof why);
    bool isfloat = tx_dtype_kind(t) == TX_KIND_FLOAT;
    bool ok2 =
        isfloat
            ? numtext_parse_float_at(t, s, end, &v2, 0, &used, why2, sizeof why2)
            : numtext_parse_int_at(t, s, end, &v2, 0, &used, why2, sizeof why2);
    if (!ok2)
        fuzz_message("the one-pass reason", why2, sizeof why2);
    /* where JSON lets a number end, both readers agree */
    bool delimited =
        n > 0 && (s + n == end || (s[n] != '\0' && strchr(",]} \t\r\n", s[n])));
    if (delimited)
        FUZZ_CHECK(ok2 == ok,
                   "\"%s\" as %s: numtext_parse %d, one pass %d (%s / %s)", text,
                   tx_dtype_name(t), ok, ok2, why, why2);
    size_t sz = tx_dtype_size(t);
    if (ok && delimited)
        FUZZ_CHECK(used == n && memcmp(&v1, &v2, sz) == 0,
                   "\"%s\" as %s: the one-pass read differs", text,
                   tx_dtype_name(t));
    if (ok) {
        char tok[512];
        if (n < sizeof tok) {
            memcpy(tok, s, n);
            tok[n] = '\0';
            check_reference(t, tok, &v1);
        }
        /* printed and read back: the same bits */
        char out[NUMFMT_MAX + 1];
        size_t m = numtext_print(t, &v1, 0, out);
        out[m] = '\0';
        FUZZ_CHECK(numtext_scan(out, out + m) == m,
                   "printed \"%s\" is no number", out);
        FUZZ_CHECK(numtext_parse(t, out, m, &v3, 0, why, sizeof why)
                       && memcmp(&v1, &v3, sz) == 0,
                   "%s \"%s\" printed as \"%s\" reads back differently",
                   tx_dtype_name(t), text, out);
    }
    /* the fast paths take a token or leave it, never read it otherwise */
    if (isfloat && n > 0) {
        uint64_t v4 = 0;
        const char *e = numtext_float_fast(t, s, end, &v4, 0);
        if (e != NULL)
            FUZZ_CHECK(ok && e == s + n && memcmp(&v4, &v1, sz) == 0,
                       "numtext_float_fast disagrees on \"%s\"", text);
    }
    free(text);
    return 0;
}
