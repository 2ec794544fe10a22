/*
 * json_tensor_in.c - tensor data in JSON: arrays of numbers, flat or nested,
 * parsed straight into typed memory, and shapes inferred from nesting.
 *
 * Long arrays take a fast loop: the common tokens (integers of up to 19
 * digits, floats that fast_float takes whole) are parsed and stored with
 * no call per element beyond the number itself, and commas and whitespace
 * are stepped over in place. Anything else, and every error, goes through
 * scalar(), the general path, which words the message.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "fanout.h"
#include "json.h"
#include "numtext.h"

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && json_is_ws(*p))
        p++;
    return p;
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

/* "data[1][2]" for the element indices path[0..depth), or "data[7]" when
 * flat. */
static void path_text(const char *what, const uint64_t *path, int depth,
                      char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s", what);
    for (int d = 0; d < depth && n > 0 && (size_t)n < len; d++)
        n += snprintf(buf + n, len - (size_t)n, "[%" PRIu64 "]", path[d]);
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

static bool too_many(tctx *x)
{
    char sh[120];
    shape_text(x, sh, sizeof sh);
    return jcur_fail(x->c,
                     "%s has more than the %" PRIu64 " elements shape %s "
                     "holds",
                     x->what, x->count, sh);
}

/* The general path for one element at c->p: any number, "NaN" and the
 * infinities, and every message. */
static bool scalar(tctx *x, int depth)
{
    jcur *c = x->c;
    char where[160], why[160];
    if (x->next >= x->count)
        return too_many(x);
    bool ok;
    size_t bare = jcur_bare_special(c->p, c->end);
    if (c->p < c->end && *c->p == '"') {
        const char *s;
        size_t n;
        if (!jcur_string(c, &s, &n))
            return false;
        ok = numtext_parse_special(x->t, s, n, x->dst, (size_t)x->next, why,
                                  sizeof why);
    } else if (bare > 0) { /* NaN, Infinity, -Infinity without quotes */
        ok = numtext_parse_special(x->t, c->p, bare, x->dst, (size_t)x->next,
                                  why, sizeof why);
        c->p += bare;
    } else {
        /* one pass: the parser finds the token's end as it parses */
        size_t n = 0;
        if (c->p < c->end && tx_dtype_kind(x->t) == TX_KIND_FLOAT)
            ok = numtext_parse_float_at(x->t, c->p, c->end, x->dst,
                                       (size_t)x->next, &n, why, sizeof why);
        else
            ok = c->p < c->end
                 && numtext_parse_int_at(x->t, c->p, c->end, x->dst,
                                        (size_t)x->next, &n, why, sizeof why);
        if (n == 0) {
            path_text(x->what, x->path, depth, where, sizeof where);
            const char *what = jcur_found(c);
            if (strcmp(what, "a number") != 0)
                return jcur_fail(c, "%s must be a number, not %s", where,
                                 what);
            /* it starts like one: "01", "1.", "1e+"; shown up to what
             * ends it, and never past printable ASCII (the message goes
             * into JSON, which takes only UTF-8) */
            int len = 0;
            while (c->p + len < c->end && len < 24 && c->p[len] > ' '
                   && c->p[len] < 0x7f && c->p[len] != ','
                   && c->p[len] != ']')
                len++;
            return jcur_fail(c,
                             "%s: %.*s is not a number in JSON's grammar (no "
                             "leading zeros, digits after a point and in an "
                             "exponent)",
                             where, len, c->p);
        }
        c->p += n;
    }
    if (!ok) {
        path_text(x->what, x->path, depth, where, sizeof where);
        return jcur_fail(c, "%s: %s", where, why);
    }
    x->next++;
    return true;
}

/* The integer dtypes' widths, and whether they are signed; 0 for the
 * floats. Inline, so that run_t()'s constant dtype folds them away. */
static inline unsigned int_bits(tx_dtype t)
{
    switch (t) {
    case TX_INT8:
    case TX_UINT8: return 8;
    case TX_INT16:
    case TX_UINT16: return 16;
    case TX_INT32:
    case TX_UINT32: return 32;
    case TX_INT64:
    case TX_UINT64: return 64;
    default: return 0;
    }
}

static inline bool is_unsigned(tx_dtype t)
{
    return t == TX_UINT8 || t == TX_UINT16 || t == TX_UINT32
           || t == TX_UINT64;
}

/* One element at p through the fast path of dtype t; NULL to leave it to
 * scalar(). Inlined into run() with t a constant, so that each dtype gets
 * its own loop. */
static inline __attribute__((always_inline)) const char *
fast(tx_dtype t, const char *p, const char *end, void *dst, size_t i)
{
    unsigned bits = int_bits(t);
    if (bits == 0)
        return numtext_float_fast(t, p, end, dst, i);
    bool neg;
    uint64_t v;
    const char *q = numtext_int_token(p, end, &neg, &v);
    if (q == NULL)
        return NULL;
    if (is_unsigned(t)) {
        if ((neg && v != 0) || (bits < 64 && v >> bits != 0))
            return NULL;
    } else if (v > (1ull << (bits - 1)) - !neg) {
        return NULL;
    }
    uint64_t flip = 0 - (uint64_t)neg; /* no branch: signs are random */
    v = (v ^ flip) - flip;
    switch (bits) {
    case 8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    case 16: ((uint16_t *)dst)[i] = (uint16_t)v; break;
    case 32: ((uint32_t *)dst)[i] = (uint32_t)v; break;
    default: ((uint64_t *)dst)[i] = v; break;
    }
    return q;
}

#ifdef __SSE2__
/* Bit i set where p[i] (i < 64) separates numbers: a comma, or a byte up
 * to 0x20 (JSON's whitespace among them). */
static inline uint64_t separators(const char *p)
{
    const __m128i comma = _mm_set1_epi8(','), space = _mm_set1_epi8(' ');
    uint64_t m = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i low = _mm_cmpeq_epi8(_mm_max_epu8(v, space), space);
        __m128i sep = _mm_or_si128(_mm_cmpeq_epi8(v, comma), low);
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(sep) << (16 * k);
    }
    return m;
}

/* Integers in bulk, for an integer dtype t: from the token at *pp, the
 * numbers of a "1,2,3" or "1, 2, 3" list, at most max of them, stored from
 * element `next` on. Where the tokens start is read off 64 bytes at a time
 * (a byte that is not a separator after one that is), so that finding the
 * next token does not wait for the digits of this one; each start found
 * must be where the text after the last token (its comma, and a space)
 * says the next begins, or the run stops. Stops too at anything the fast
 * path does not take, at a token that no comma follows, and 96 bytes
 * before end. Returns how many were stored, with *pp at the end of the
 * last (unchanged when none was). */
static inline __attribute__((always_inline)) uint64_t
int_blocks(tx_dtype t, const char **pp, const char *end, void *dst,
           uint64_t next, uint64_t max)
{
    const char *base = *pp, *expect = *pp, *last = *pp;
    uint64_t n = 0, carry = 1; /* *pp starts a token */
    /* a token starting in the block (a minus and 20 digits at most are
     * read) and the two bytes after it lie before end */
    while (n < max && end - base >= 64 + 32) {
        uint64_t sep = separators(base);
        uint64_t starts = ~sep & ((sep << 1) | carry);
        carry = sep >> 63;
        while (starts != 0) {
            const char *s = base + __builtin_ctzll(starts);
            starts &= starts - 1;
            const char *q;
            if (s != expect
                || (q = fast(t, s, end, dst, (size_t)(next + n))) == NULL)
                goto done;
            n++;
            last = q;
            if (n == max || q[0] != ',')
                goto done;
            expect = q + 1 + (q[1] == ' ');
        }
        base += 64;
    }
done:
    *pp = last;
    return n;
}
#endif

/* What ends an array's elements for run(): its ']', or the end of the
 * span (the parallel parts). */
typedef struct {
    uint64_t max;  /* elements at most */
    uint64_t base; /* index of the first, for messages */
    int depth;     /* of the elements, for messages */
} run_limits;

/* Parses up to lim.max comma-separated numbers from c->p into x. Stops
 * after a number that no comma follows, with c->p at what follows it
 * (whitespace skipped), or after lim.max numbers with c->p at the comma
 * after the last. *got counts them. An element that is an array fails,
 * worded for flat data or for nesting deeper than the shape. */
static inline __attribute__((always_inline)) bool
run_t(tctx *x, tx_dtype t, run_limits lim, uint64_t *got)
{
    jcur *c = x->c;
    const char *p = skip_ws(c->p, c->end), *end = c->end;
    void *dst = x->dst;
    uint64_t i = 0, next = x->next; /* x->next, kept here in the loop */
    while (i < lim.max) {
#ifdef __SSE2__
        if (int_bits(t) != 0 && end - p >= 1024) {
            uint64_t n = int_blocks(t, &p, end, dst, next, lim.max - i);
            if (n > 0) {
                next += n;
                i += n;
                goto after;
            }
        }
#endif
        const char *q = fast(t, p, end, dst, (size_t)next);
        if (q == NULL && p < end && json_is_ws(*p)) { /* more whitespace */
            p = skip_ws(p, end);
            q = fast(t, p, end, dst, (size_t)next);
        }
        if (q != NULL) {
            next++;
            p = q;
        } else {
            c->p = p;
            x->next = next;
            x->path[lim.depth - 1] = lim.base + i;
            if (p < end && *p == '[') {
                char where[160];
                path_text(x->what, x->path, lim.depth, where, sizeof where);
                if (lim.depth == 1)
                    return jcur_fail(c, "%s is an array in a flat data list",
                                     where);
                return jcur_fail(c,
                                 "%s is an array, but shape has only %d "
                                 "dimensions",
                                 where, x->rank);
            }
            if (!scalar(x, lim.depth))
                return false;
            next = x->next;
            p = c->p;
        }
        i++;
#ifdef __SSE2__
    after:
#endif
        if (end - p >= 2 && p[0] == ',') {
            /* the usual cases: "1,2", and json.dumps' "1, 2"; more
             * whitespace is skipped at the top */
            if (i == lim.max)
                break;
            p += 1 + (p[1] == ' ');
            continue;
        }
        p = skip_ws(p, end);
        if (p >= end || *p != ',' || i == lim.max)
            break;
        p = skip_ws(p + 1, end);
    }
    c->p = p;
    x->next = next;
    *got = i;
    return true;
}

static bool run(tctx *x, run_limits lim, uint64_t *got)
{
    switch (x->t) {
    case TX_FLOAT16: return run_t(x, TX_FLOAT16, lim, got);
    case TX_BFLOAT16: return run_t(x, TX_BFLOAT16, lim, got);
    case TX_FLOAT32: return run_t(x, TX_FLOAT32, lim, got);
    case TX_FLOAT64: return run_t(x, TX_FLOAT64, lim, got);
    case TX_INT8: return run_t(x, TX_INT8, lim, got);
    case TX_INT16: return run_t(x, TX_INT16, lim, got);
    case TX_INT32: return run_t(x, TX_INT32, lim, got);
    case TX_INT64: return run_t(x, TX_INT64, lim, got);
    case TX_UINT8: return run_t(x, TX_UINT8, lim, got);
    case TX_UINT16: return run_t(x, TX_UINT16, lim, got);
    case TX_UINT32: return run_t(x, TX_UINT32, lim, got);
    case TX_UINT64: return run_t(x, TX_UINT64, lim, got);
    case TX_NDTYPES: break;
    }
    return jcur_fail(x->c, "%s: no such dtype", x->what);
}

/* The array at depth holds more elements than the shape gives it. */
static bool too_long(tctx *x, int depth)
{
    char where[160], sh[120];
    path_text(x->what, x->path, depth, where, sizeof where);
    shape_text(x, sh, sizeof sh);
    return jcur_fail(x->c, "%s has more than %" PRIu64 " elements (shape %s)",
                     where, x->shape[depth], sh);
}

static bool nested(tctx *x, int depth)
{
    jcur *c = x->c;
    char where[160], sh[120];
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '[') {
        path_text(x->what, x->path, depth, where, sizeof where);
        shape_text(x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s must be an array of %" PRIu64 " (shape %s), "
                         "not %s",
                         where, x->shape[depth], sh, jcur_found(c));
    }
    uint64_t i = 0;
    if (depth + 1 == x->rank) {
        /* the innermost arrays: numbers, in the fast loop */
        c->p = skip_ws(c->p + 1, c->end);
        if (c->p < c->end && *c->p != ']') {
            run_limits lim = {x->shape[depth], 0, depth + 1};
            if (!run(x, lim, &i))
                return false;
        }
        if (c->p < c->end && *c->p == ',')
            return too_long(x, depth);
        if (!jcur_expect(c, ']', "',' or ']'"))
            return false;
    } else {
        bool first = true;
        while (jcur_element(c, &first)) {
            if (i >= x->shape[depth])
                return too_long(x, depth);
            x->path[depth] = i;
            if (!nested(x, depth + 1))
                return false;
            i++;
        }
        if (c->failed)
            return false;
    }
    if (i != x->shape[depth]) {
        path_text(x->what, x->path, depth, where, sizeof where);
        shape_text(x, sh, sizeof sh);
        return jcur_fail(c,
                         "%s has %" PRIu64 " elements, but shape %s needs "
                         "%" PRIu64 " there (ragged nesting?)",
                         where, i, sh, x->shape[depth]);
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Large flat arrays in parts that the cores share (fanout.h). The text is
 * cut at commas near equal offsets; the commas before a cut say where the
 * next part's elements go, and each part is parsed into place on its own.
 * Any failure (a bad number, a string holding a comma or a bracket, a
 * count that does not add up) falls back to the one-thread parse, which
 * finds the first problem and words its message. */
#define FLAT_PARALLEL_MIN 65536

static atomic_ullong parallel_parses;

unsigned long long jcur_parallel_parses(void)
{
    return atomic_load(&parallel_parses);
}

typedef struct {
    tctx x;
    jcur c;
    uint64_t want; /* elements in this part */
    char err[200];
    bool ok;
} flat_part;

static void flat_part_run(void *arg)
{
    flat_part *f = arg;
    jcur *c = &f->c;
    f->x.c = c;
    run_limits lim = {f->want, f->x.next, 1};
    uint64_t got;
    f->ok = run(&f->x, lim, &got) && got == f->want && c->p == c->end;
}

/* The commas in [p, end), eight bytes at a time. */
static uint64_t count_commas(const char *p, const char *end)
{
    uint64_t n = 0;
    while (end - p >= 8) {
        /* one in each byte lane per comma, summed every 255 words at most
         * so that no lane overflows */
        uint64_t lanes = 0;
        for (int k = 0; k < 255 && end - p >= 8; k++, p += 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            w ^= 0x2c2c2c2c2c2c2c2cull; /* commas become zero bytes */
            uint64_t nonzero = ((w & 0x7f7f7f7f7f7f7f7full)
                                + 0x7f7f7f7f7f7f7f7full)
                               | w;
            lanes += (~nonzero >> 7) & 0x0101010101010101ull;
        }
        /* the eight lanes (up to 255 each) summed in 16-bit lanes */
        lanes = (lanes & 0x00ff00ff00ff00ffull)
                + ((lanes >> 8) & 0x00ff00ff00ff00ffull);
        n += (lanes * 0x0001000100010001ull) >> 48;
    }
    for (; p < end; p++)
        n += *p == ',';
    return n;
}

/* True when the flat array at c->p ('[') was parsed into x in parts; c->p
 * is then past its ']'. False leaves c and x as they were (x's elements
 * may have been written: the caller parses them again). */
static bool flat_parallel(jcur *c, tctx *x, unsigned nparts)
{
    const char *open = c->p;
    const char *close = memchr(open, ']', (size_t)(c->end - open));
    if (close == NULL)
        return false;
    flat_part parts[FANOUT_MAX];
    const char *from = open + 1;
    uint64_t first = 0; /* the part's first element */
    unsigned n = 0;
    while (n < nparts && from < close) {
        const char *cut = close;
        if (n + 1 < nparts) {
            const char *aim = from + (close - from) / (nparts - n);
            cut = memchr(aim, ',', (size_t)(close - aim));
            if (cut == NULL)
                cut = close;
        }
        /* the last part takes the rest: run() checks that it holds
         * just that many */
        uint64_t elements = cut == close ? x->count - first
                                         : count_commas(from, cut) + 1;
        if (elements == 0 || first + elements > x->count)
            return false;
        flat_part *f = &parts[n++];
        f->x = *x;
        f->x.next = first;
        f->want = elements;
        jcur_init(&f->c, c->base, (size_t)(c->end - c->base), f->err,
                  sizeof f->err);
        f->c.p = from;
        /* the part ends at the cut, or at its last number's end */
        const char *e = cut;
        while (e > from && json_is_ws(e[-1]))
            e--;
        f->c.end = e;
        first += elements;
        from = cut + 1;
    }
    if (n < 2 || first != x->count)
        return false;
    fanout_run(flat_part_run, parts, sizeof parts[0], n);
    for (unsigned k = 0; k < n; k++)
        if (!parts[k].ok)
            return false;
    atomic_fetch_add_explicit(&parallel_parses, 1, memory_order_relaxed);
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
        return jcur_fail(c, "%s must be an array, not %s", what,
                         jcur_found(c));
    /* nested when the first element is itself an array */
    const char *q = skip_ws(c->p + 1, c->end);
    if (q < c->end && *q == '[' && rank > 1)
        return nested(&x, 0);
    if (rank == 0)
        return jcur_fail(c, "%s: shape is empty (rank 0)", what);
    if (count >= FLAT_PARALLEL_MIN && fanout_width() > 1
        && flat_parallel(c, &x, fanout_width()))
        return true;
    c->p = q;
    if (c->p < c->end && *c->p != ']') {
        run_limits lim = {count, 0, 1};
        uint64_t got;
        if (!run(&x, lim, &got))
            return false;
        if (c->p < c->end && *c->p == ',')
            return too_many(&x);
    }
    if (!jcur_expect(c, ']', "',' or ']'"))
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
    path_text(x->what, x->path, number ? depth : depth - 1, where,
              sizeof where);
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
        path_text(x->what, x->path, depth, where, sizeof where);
        return jcur_fail(c, "%s nests more than %d arrays deep", where,
                         ENG_MAX_RANK);
    }
    bool first = true;
    uint64_t n = 0;
    while (jcur_element(c, &first)) {
        x->path[depth] = n;
        if (*c->p == '[') {
            if (x->rank >= 0 && depth + 1 >= x->rank) {
                path_text(x->what, x->path, depth + 1, where, sizeof where);
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
            if (v[0] == '"' || jcur_bare_special(v, v + len) == len)
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
        path_text(x->what, x->path, depth, where, sizeof where);
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
        return jcur_fail(c, "%s must be an array, not %s", what, jcur_found(c));
    if (!infer_level(&x, 0))
        return false;
    *rank = x.rank;
    /* numpy makes an array without numbers float64 too */
    *is_float = x.is_float || !x.any_number;
    return true;
}

