/*
 * json.c - the request scanner and the chunked tensor writer.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "numfmt.h"

#define MAX_DEPTH 64

void jcur_init(jcur *c, const char *text, size_t len, char *err, size_t errlen)
{
    c->base = text;
    c->p = text;
    c->end = text + len;
    c->err = err;
    c->errlen = errlen;
    c->failed = false;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

bool jcur_fail(jcur *c, const char *fmt, ...)
{
    if (!c->failed && c->err != NULL && c->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    c->failed = true;
    return false;
}

static size_t offset(const jcur *c)
{
    return (size_t)(c->p - c->base);
}

/* JSON's four whitespace characters. */
static bool is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

void jcur_ws(jcur *c)
{
    while (c->p < c->end && is_ws(*c->p))
        c->p++;
}

/* A short description of what is at the cursor, for messages. */
static const char *found(const jcur *c)
{
    if (c->p >= c->end)
        return "the end of the body";
    switch (*c->p) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default:
        return (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))
                   ? "a number"
                   : "invalid JSON";
    }
}

bool jcur_expect(jcur *c, char ch, const char *what)
{
    jcur_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return jcur_fail(c, "invalid JSON at byte %zu: expected %s, found %s",
                     offset(c), what, found(c));
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')
           || (ch >= 'A' && ch <= 'F');
}

bool jcur_string(jcur *c, const char **s, size_t *len)
{
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '"')
        return jcur_fail(c,
                         "invalid JSON at byte %zu: expected a string, "
                         "found %s",
                         offset(c), found(c));
    const char *start = ++c->p;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            *s = start;
            *len = (size_t)(c->p - start);
            c->p++;
            return true;
        }
        if (ch < 0x20)
            return jcur_fail(c,
                             "invalid JSON at byte %zu: control character "
                             "in a string",
                             offset(c));
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->end)
                break;
            switch (*c->p) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't': c->p++; continue;
            case 'u':
                if (c->end - c->p >= 5 && is_hex(c->p[1]) && is_hex(c->p[2])
                    && is_hex(c->p[3]) && is_hex(c->p[4])) {
                    c->p += 5;
                    continue;
                }
                /* fall through */
            default:
                return jcur_fail(c,
                                 "invalid JSON at byte %zu: bad escape in "
                                 "a string",
                                 offset(c));
            }
        }
        c->p++;
    }
    return jcur_fail(c, "invalid JSON: unterminated string");
}

static bool literal(jcur *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, lit, n) == 0) {
        c->p += n;
        return true;
    }
    return jcur_fail(c, "invalid JSON at byte %zu", offset(c));
}

/* The array at c->p when it holds numbers only, as tensor data does: one
 * tight loop over it, each number's grammar checked. True with c->p past
 * the array; false, with c untouched, for anything else (the caller's
 * general walk then finds and words any problem). */
static bool skip_numbers(jcur *c)
{
    const char *p = c->p + 1, *end = c->end;
    while (p < end && is_ws(*p))
        p++;
    if (p < end && *p == ']') {
        c->p = p + 1;
        return true;
    }
    for (;;) {
        size_t n = p < end ? numfmt_scan(p, end) : 0;
        if (n == 0)
            return false;
        p += n;
        while (p < end && is_ws(*p))
            p++;
        if (p >= end)
            return false;
        if (*p == ']') {
            c->p = p + 1;
            return true;
        }
        if (*p != ',')
            return false;
        p++;
        while (p < end && is_ws(*p))
            p++;
    }
}

static bool skip_depth(jcur *c, int depth)
{
    if (depth > MAX_DEPTH)
        return jcur_fail(c, "JSON nested deeper than %d levels", MAX_DEPTH);
    jcur_ws(c);
    if (c->p >= c->end)
        return jcur_fail(c, "invalid JSON: the body ends where a value "
                            "should be");
    const char *s;
    size_t n;
    bool first = true;
    switch (*c->p) {
    case '"': return jcur_string(c, &s, &n);
    case '{':
        while (jcur_member(c, &first, &s, &n))
            if (!skip_depth(c, depth + 1))
                return false;
        return !c->failed;
    case '[':
        if (skip_numbers(c))
            return true;
        while (jcur_element(c, &first))
            if (!skip_depth(c, depth + 1))
                return false;
        return !c->failed;
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default:
        n = numfmt_scan(c->p, c->end);
        if (n == 0) {
            bool special =
                *c->p == 'N' || *c->p == 'I'
                || (*c->p == '-' && c->p + 1 < c->end && c->p[1] == 'I');
            return jcur_fail(c, "invalid JSON at byte %zu: unexpected '%c'%s",
                             offset(c), *c->p,
                             special ? " (write NaN and infinities as the "
                                       "strings \"NaN\", \"Infinity\" "
                                       "and \"-Infinity\")"
                                     : "");
        }
        c->p += n;
        return true;
    }
}

bool jcur_skip(jcur *c)
{
    return skip_depth(c, 0);
}

bool jcur_span(jcur *c, const char **s, size_t *len)
{
    jcur_ws(c);
    const char *start = c->p;
    if (!jcur_skip(c))
        return false;
    *s = start;
    *len = (size_t)(c->p - start);
    return true;
}

bool jcur_member(jcur *c, bool *first, const char **key, size_t *klen)
{
    if (*first) {
        if (!jcur_expect(c, '{', "an object"))
            return false;
        *first = false;
        jcur_ws(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return false;
        }
    } else {
        jcur_ws(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return false;
        }
        if (!jcur_expect(c, ',', "',' or '}'"))
            return false;
    }
    if (!jcur_string(c, key, klen) || !jcur_expect(c, ':', "':'"))
        return false;
    jcur_ws(c);
    return true;
}

bool jcur_element(jcur *c, bool *first)
{
    if (*first) {
        if (!jcur_expect(c, '[', "an array"))
            return false;
        *first = false;
        jcur_ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return false;
        }
    } else {
        jcur_ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return false;
        }
        if (!jcur_expect(c, ',', "',' or ']'"))
            return false;
    }
    jcur_ws(c);
    return true;
}

bool json_eq(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

bool jcur_int64(jcur *c, const char *what, int64_t *out)
{
    jcur_ws(c);
    size_t n = c->p < c->end ? numfmt_scan(c->p, c->end) : 0;
    if (n == 0)
        return jcur_fail(c, "%s must be an integer, not %s", what, found(c));
    char buf[32];
    bool integral = memchr(c->p, '.', n) == NULL && memchr(c->p, 'e', n) == NULL
                    && memchr(c->p, 'E', n) == NULL;
    if (!integral || n >= sizeof buf)
        return jcur_fail(c, "%s must be an integer, not %.*s", what,
                         (int)(n < 24 ? n : 24), c->p);
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno != 0)
        return jcur_fail(c, "%s: %s is out of range", what, buf);
    *out = v;
    c->p += n;
    return true;
}

bool jcur_bool(jcur *c, const char *what, bool *out)
{
    jcur_ws(c);
    if ((size_t)(c->end - c->p) >= 4 && memcmp(c->p, "true", 4) == 0) {
        c->p += 4;
        *out = true;
        return true;
    }
    if ((size_t)(c->end - c->p) >= 5 && memcmp(c->p, "false", 5) == 0) {
        c->p += 5;
        *out = false;
        return true;
    }
    return jcur_fail(c, "%s must be true or false, not %s", what, found(c));
}

bool jcur_shape(jcur *c, const char *what, uint64_t *shape, int *rank)
{
    bool first = true;
    int r = 0;
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[')
        return jcur_fail(c, "%s must be an array of integers, not %s", what,
                         found(c));
    while (jcur_element(c, &first)) {
        int64_t v;
        char name[48];
        snprintf(name, sizeof name, "%s[%d]", what, r);
        if (!jcur_int64(c, name, &v))
            return false;
        if (v < 0)
            return jcur_fail(c,
                             "%s is %" PRId64 ": dimensions cannot be "
                             "negative",
                             name, v);
        if (r >= ENG_MAX_RANK)
            return jcur_fail(c, "%s has more than %d dimensions", what,
                             ENG_MAX_RANK);
        shape[r++] = (uint64_t)v;
    }
    if (c->failed)
        return false;
    *rank = r;
    return true;
}

/* ------------------------------------------------------------------------
 * Tensor data.
 */
typedef struct {
    jcur *c;
    const char *what;
    tx_dtype t;
    const uint64_t *shape;
    int rank;
    uint64_t count, next;
    void *dst;
    uint64_t path[ENG_MAX_RANK]; /* element indices, for messages */
} tctx;

/* "data[1][2]" for the current nesting, or "data[7]" when flat. */
static void path_text(const tctx *x, int depth, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s", x->what);
    for (int d = 0; d < depth && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, "[%" PRIu64 "]", x->path[d]);
}

static void shape_text(const tctx *x, char *buf, size_t len)
{
    int n = snprintf(buf, len, "[");
    for (int d = 0; d < x->rank && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, "%s%" PRIu64, d ? ", " : "",
                      x->shape[d]);
    if ((size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
}

static bool scalar(tctx *x, int depth)
{
    jcur *c = x->c;
    char where[160], why[160];
    if (x->next >= x->count) {
        char sh[120];
        shape_text(x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s has more than the %" PRIu64 " elements shape "
                         "%s holds",
                         x->what, x->count, sh);
    }
    bool ok;
    if (c->p < c->end && *c->p == '"') {
        const char *s;
        size_t n;
        if (!jcur_string(c, &s, &n))
            return false;
        ok = numfmt_parse_special(x->t, s, n, x->dst, (size_t)x->next, why,
                                  sizeof why);
    } else {
        /* one pass: the parser finds the token's end as it parses */
        size_t n = 0;
        if (c->p < c->end && tx_dtype_kind(x->t) == TX_KIND_FLOAT)
            ok = numfmt_parse_float_at(x->t, c->p, c->end, x->dst,
                                       (size_t)x->next, &n, why, sizeof why);
        else
            ok = c->p < c->end
                 && numfmt_parse_int_at(x->t, c->p, c->end, x->dst,
                                        (size_t)x->next, &n, why, sizeof why);
        if (n == 0) {
            path_text(x, depth, where, sizeof where);
            return jcur_fail(c, "%s must be a number, not %s", where, found(c));
        }
        c->p += n;
    }
    if (!ok) {
        path_text(x, depth, where, sizeof where);
        return jcur_fail(c, "%s: %s", where, why);
    }
    x->next++;
    return true;
}

static bool nested(tctx *x, int depth)
{
    jcur *c = x->c;
    char where[160], sh[120];
    bool first = true;
    uint64_t i = 0;
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[') {
        path_text(x, depth, where, sizeof where);
        shape_text(x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s must be an array of %" PRIu64 " (shape %s), "
                         "not %s",
                         where, x->shape[depth], sh, found(c));
    }
    while (jcur_element(c, &first)) {
        if (i >= x->shape[depth]) {
            path_text(x, depth, where, sizeof where);
            shape_text(x, sh, sizeof sh);
            return jcur_fail(c,
                             "%s has more than %" PRIu64 " elements "
                             "(shape %s)",
                             where, x->shape[depth], sh);
        }
        x->path[depth] = i;
        if (depth + 1 < x->rank) {
            if (!nested(x, depth + 1))
                return false;
        } else {
            if (c->p < c->end && *c->p == '[') {
                path_text(x, depth + 1, where, sizeof where);
                return jcur_fail(c,
                                 "%s is an array, but shape has only %d "
                                 "dimensions",
                                 where, x->rank);
            }
            if (!scalar(x, depth + 1))
                return false;
        }
        i++;
    }
    if (c->failed)
        return false;
    if (i != x->shape[depth]) {
        path_text(x, depth, where, sizeof where);
        shape_text(x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s has %" PRIu64 " elements, but shape %s needs "
                         "%" PRIu64 " there (ragged nesting?)",
                         where, i, sh, x->shape[depth]);
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Inferring a tensor's shape and kind from its nesting, as numpy.array
 * does.
 */
typedef struct {
    jcur *c;
    const char *what;
    uint64_t *shape;
    bool seen[ENG_MAX_RANK]; /* shape[d] is known */
    int rank;                /* -1 until the first number or empty array */
    bool any_number, is_float;
    uint64_t path[ENG_MAX_RANK];
} ictx;

static void ipath(const ictx *x, int depth, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s", x->what);
    for (int d = 0; d < depth && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, "[%" PRIu64 "]", x->path[d]);
}

/* A leaf level at depth: numbers, or an empty array, end the nesting
 * there; every leaf must end it at the same depth. */
static bool leaf_at(ictx *x, int depth, bool number)
{
    if (x->rank < 0) {
        x->rank = depth;
        return true;
    }
    if (x->rank == depth)
        return true;
    char where[160];
    ipath(x, number ? depth : depth - 1, where, sizeof where);
    return jcur_fail(x->c,
                     "%s is %s where earlier elements nest %d deep (ragged "
                     "nesting: without a shape, data must be a regular "
                     "array of arrays)",
                     where, number ? "a number" : "an empty array", x->rank);
}

static bool infer_level(ictx *x, int depth)
{
    jcur *c = x->c;
    char where[160];
    if (depth >= ENG_MAX_RANK) {
        ipath(x, depth, where, sizeof where);
        return jcur_fail(c, "%s nests more than %d arrays deep", where,
                         ENG_MAX_RANK);
    }
    bool first = true;
    uint64_t n = 0;
    while (jcur_element(c, &first)) {
        x->path[depth] = n;
        if (*c->p == '[') {
            if (x->rank >= 0 && depth + 1 >= x->rank) {
                ipath(x, depth + 1, where, sizeof where);
                return jcur_fail(c,
                                 "%s is an array where earlier elements are "
                                 "numbers (ragged nesting: without a shape, "
                                 "data must be a regular array of arrays)",
                                 where);
            }
            if (!infer_level(x, depth + 1))
                return false;
        } else {
            if (!leaf_at(x, depth + 1, true))
                return false;
            const char *v;
            size_t len;
            if (!jcur_span(c, &v, &len))
                return false;
            x->any_number = true;
            if (v[0] == '"')
                x->is_float = true; /* "NaN", "Infinity": checked later */
            for (size_t i = 0; i < len && !x->is_float; i++)
                x->is_float = v[i] == '.' || v[i] == 'e' || v[i] == 'E';
        }
        n++;
    }
    if (c->failed)
        return false;
    if (n == 0 && !leaf_at(x, depth + 1, false))
        return false;
    if (!x->seen[depth]) {
        x->seen[depth] = true;
        x->shape[depth] = n;
    } else if (x->shape[depth] != n) {
        ipath(x, depth, where, sizeof where);
        return jcur_fail(c,
                         "%s has %" PRIu64 " element%s where the arrays "
                         "before it at that depth have %" PRIu64
                         " (ragged nesting: without a shape, data must be a "
                         "regular array of arrays)",
                         where, n, n == 1 ? "" : "s", x->shape[depth]);
    }
    return true;
}

bool jcur_infer(jcur *c, const char *what, uint64_t *shape, int *rank,
                bool *is_float)
{
    ictx x = {.c = c, .what = what, .shape = shape, .rank = -1};
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[')
        return jcur_fail(c, "%s must be an array, not %s", what, found(c));
    if (!infer_level(&x, 0))
        return false;
    *rank = x.rank;
    /* numpy makes an array without numbers float64 too */
    *is_float = x.is_float || !x.any_number;
    return true;
}

/* ------------------------------------------------------------------------
 * Large flat arrays on two threads. The text is cut at a comma near its
 * middle; the commas before the cut say where the second half's elements
 * go, and each half is parsed into place by its own thread. Any failure
 * (a bad number, a string holding a comma or a bracket, a count that does
 * not add up) falls back to the one-thread parse, which finds the first
 * problem and words its message. */
#define FLAT_PARALLEL_MIN 131072

typedef struct {
    tctx x;
    jcur c;
    char err[200];
    bool ok;
} flat_part;

static void *flat_part_run(void *arg)
{
    flat_part *f = arg;
    jcur *c = &f->c;
    f->x.c = c;
    f->ok = false;
    for (;;) {
        jcur_ws(c);
        if (c->p >= c->end || *c->p == '[' || !scalar(&f->x, 1))
            return NULL;
        jcur_ws(c);
        if (c->p >= c->end)
            break;
        if (*c->p != ',')
            return NULL;
        c->p++;
    }
    f->ok = true;
    return NULL;
}

/* True when the flat array at c->p ('[') was parsed into x on two
 * threads; c->p is then past its ']'. False leaves c and x as they were
 * (x's elements may have been written: the caller parses them again). */
static bool flat_parallel(jcur *c, tctx *x)
{
    const char *open = c->p;
    const char *close = memchr(open, ']', (size_t)(c->end - open));
    if (close == NULL)
        return false;
    const char *cut = memchr(open + (close - open) / 2, ',',
                             (size_t)(close - (open + (close - open) / 2)));
    if (cut == NULL)
        return false;
    uint64_t before = 1; /* elements before the cut: its commas, plus one */
    for (const char *q = open;
         (q = memchr(q + 1, ',', (size_t)(cut - q - 1))) != NULL;)
        before++;
    flat_part parts[2];
    for (int k = 0; k < 2; k++) {
        parts[k].x = *x;
        parts[k].x.next = k ? before : 0;
        jcur_init(&parts[k].c, c->base, (size_t)(c->end - c->base),
                  parts[k].err, sizeof parts[k].err);
        parts[k].c.p = k ? cut + 1 : open + 1;
        parts[k].c.end = k ? close : cut;
    }
    pthread_t tid;
    bool threaded = pthread_create(&tid, NULL, flat_part_run, &parts[1]) == 0;
    if (!threaded)
        flat_part_run(&parts[1]);
    flat_part_run(&parts[0]);
    if (threaded)
        pthread_join(tid, NULL);
    if (!parts[0].ok || !parts[1].ok || parts[0].x.next != before
        || parts[1].x.next != x->count)
        return false;
    x->next = x->count;
    c->p = close + 1;
    return true;
}

bool jcur_tensor(jcur *c, const char *what, tx_dtype t, const uint64_t *shape,
                 int rank, uint64_t count, void *dst)
{
    tctx x = {.c = c,
              .what = what,
              .t = t,
              .shape = shape,
              .rank = rank,
              .count = count,
              .dst = dst};
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[')
        return jcur_fail(c, "%s must be an array, not %s", what, found(c));
    /* nested when the first element is itself an array */
    const char *q = c->p + 1;
    while (q < c->end && is_ws(*q))
        q++;
    if (q < c->end && *q == '[' && rank > 1)
        return nested(&x, 0);
    if (rank == 0)
        return jcur_fail(c, "%s: shape is empty (rank 0)", what);
    if (count >= FLAT_PARALLEL_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1
        && flat_parallel(c, &x))
        return true;
    bool first = true;
    while (jcur_element(c, &first)) {
        x.path[0] = x.next;
        if (c->p < c->end && *c->p == '[') {
            char where[160];
            path_text(&x, 1, where, sizeof where);
            return jcur_fail(c, "%s is an array in a flat data list", where);
        }
        if (!scalar(&x, 1))
            return false;
    }
    if (c->failed)
        return false;
    if (x.next != count) {
        char sh[120];
        shape_text(&x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s has %" PRIu64 " elements, but shape %s needs "
                         "%" PRIu64,
                         what, x.next, sh, count);
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Writing.
 */
bool json_append(char **buf, size_t *blen, const char *s, size_t len)
{
    char *nb = realloc(*buf, *blen + len + 1);
    if (nb == NULL)
        return false;
    memcpy(nb + *blen, s, len);
    *blen += len;
    nb[*blen] = '\0';
    *buf = nb;
    return true;
}

bool json_append_string(char **buf, size_t *blen, const char *s, size_t len)
{
    if (!json_append(buf, blen, "\"", 1))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            if (!json_append(buf, blen, esc, 2))
                return false;
        } else if (ch < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            if (!json_append(buf, blen, esc, 6))
                return false;
        } else if (!json_append(buf, blen, (const char *)&s[i], 1)) {
            return false;
        }
    }
    return json_append(buf, blen, "\"", 1);
}

bool json_append_shape(char **buf, size_t *blen, const uint64_t *shape,
                       int rank)
{
    if (!json_append(buf, blen, "[", 1))
        return false;
    for (int d = 0; d < rank; d++) {
        char num[32];
        int n = snprintf(num, sizeof num, "%s%" PRIu64, d ? "," : "", shape[d]);
        if (!json_append(buf, blen, num, (size_t)n))
            return false;
    }
    return json_append(buf, blen, "]", 1);
}

size_t json_writer_read(json_writer *w, char *out, size_t max)
{
    size_t n = 0;
    while (n < max && w->stage < 3) {
        if (w->stage == 0 || w->stage == 2) {
            const char *s = w->stage == 0 ? w->prefix : w->suffix;
            size_t len = w->stage == 0 ? w->prefix_len : w->suffix_len;
            size_t take = len - w->pos < max - n ? len - w->pos : max - n;
            if (take > 0)
                memcpy(out + n, s + w->pos, take);
            n += take;
            w->pos += take;
            if (w->pos == len) {
                w->stage++;
                w->pos = 0;
            }
            continue;
        }
        /* elements: flush what is pending, then format the next one */
        if (w->pend_pos < w->pend_len) {
            size_t take = w->pend_len - w->pend_pos;
            if (take > max - n)
                take = max - n;
            memcpy(out + n, w->pending + w->pend_pos, take);
            n += take;
            w->pend_pos += take;
            continue;
        }
        if (w->next == w->count) {
            w->stage = 2;
            continue;
        }
        size_t k = 0;
        if (w->next > 0)
            w->pending[k++] = ',';
        k += numfmt_print(w->dtype, w->data, (size_t)w->next, w->pending + k);
        w->next++;
        /* fast path: write straight through when it fits */
        if (k <= max - n) {
            memcpy(out + n, w->pending, k);
            n += k;
            w->pend_len = w->pend_pos = 0;
        } else {
            w->pend_len = k;
            w->pend_pos = 0;
        }
    }
    return n;
}

/* One thread's share of json_writer_render(): elements [a, b). */
typedef struct {
    const json_writer *w;
    uint64_t a, b;
    char *dst;
    size_t n;
} render_part;

static void *render_part_run(void *arg)
{
    render_part *p = arg;
    size_t n = 0;
    for (uint64_t i = p->a; i < p->b; i++) {
        if (i > 0)
            p->dst[n++] = ',';
        n += numfmt_print(p->w->dtype, p->w->data, (size_t)i, p->dst + n);
    }
    p->n = n;
    return NULL;
}

bool json_writer_render(json_writer *w, unsigned threads, char **out,
                        size_t *len)
{
    const size_t per = NUMFMT_MAX + 1; /* an element and its comma */
    if (threads < 1)
        threads = 1;
    if (threads > 8)
        threads = 8;
    if (w->count > (SIZE_MAX - w->prefix_len - w->suffix_len) / per / 2)
        return false;
    char *buf = malloc(w->prefix_len + w->suffix_len + (size_t)w->count * per);
    if (buf == NULL)
        return false;
    render_part parts[8];
    pthread_t tid[8];
    unsigned started = 0;
    for (unsigned k = 0; k < threads; k++) {
        parts[k].w = w;
        parts[k].a = w->count * k / threads;
        parts[k].b = w->count * (k + 1) / threads;
        parts[k].dst = buf + w->prefix_len + (size_t)parts[k].a * per;
        parts[k].n = 0;
    }
    for (unsigned k = 1; k < threads; k++) {
        if (pthread_create(&tid[k], NULL, render_part_run, &parts[k]) != 0)
            break;
        started++;
    }
    /* parts whose thread did not start are rendered here */
    for (unsigned k = 1 + started; k < threads; k++)
        render_part_run(&parts[k]);
    render_part_run(&parts[0]);
    for (unsigned k = 1; k <= started; k++)
        pthread_join(tid[k], NULL);
    memcpy(buf, w->prefix, w->prefix_len);
    size_t at = w->prefix_len;
    for (unsigned k = 0; k < threads; k++) {
        memmove(buf + at, parts[k].dst, parts[k].n);
        at += parts[k].n;
    }
    memcpy(buf + at, w->suffix, w->suffix_len);
    *out = buf;
    *len = at + w->suffix_len;
    json_writer_free(w);
    return true;
}

bool json_writer_init(json_writer *w, bool ok, char *prefix, size_t prefix_len,
                      char *suffix, size_t suffix_len,
                      const eng_scan_desc *desc, const void *data)
{
    memset(w, 0, sizeof *w);
    if (!ok) {
        free(prefix);
        free(suffix);
        return false;
    }
    uint64_t count = 1;
    for (int d = 0; d < desc->rank; d++)
        count *= desc->shape[d];
    w->prefix = prefix;
    w->prefix_len = prefix_len;
    w->suffix = suffix;
    w->suffix_len = suffix_len;
    w->dtype = desc->dtype;
    w->data = data;
    w->count = count;
    return true;
}

void json_writer_free(json_writer *w)
{
    free(w->prefix);
    free(w->suffix);
    w->prefix = w->suffix = NULL;
}
