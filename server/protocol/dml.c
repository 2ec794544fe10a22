/*
 * dml.c - DirectML's operator description as JSON (see dml.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "buffer.h"
#include "dml.h"
#include "tx_strides.h"

/* DML_TENSOR_DATA_TYPE: the short name and DirectML's enum number. */
static const struct {
    const char *name;
    int64_t number;
    tx_dtype t;
} dml_types[] = {
    {"FLOAT32", 1, TX_FLOAT32}, {"FLOAT16", 2, TX_FLOAT16},
    {"UINT32", 3, TX_UINT32},   {"UINT16", 4, TX_UINT16},
    {"UINT8", 5, TX_UINT8},     {"INT32", 6, TX_INT32},
    {"INT16", 7, TX_INT16},     {"INT8", 8, TX_INT8},
    {"FLOAT64", 9, TX_FLOAT64}, {"UINT64", 10, TX_UINT64},
    {"INT64", 11, TX_INT64},
};
#define NTYPES (sizeof dml_types / sizeof dml_types[0])
#define TYPE_PREFIX "DML_TENSOR_DATA_TYPE_"
#define DIR_PREFIX "DML_AXIS_DIRECTION_"

/* Whether s[0..n) can go into a message as it is: printable ASCII. */
static bool printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
            return false;
    return n <= 48;
}

/* s[0..n) equals prefix + name, or name alone. */
static bool is_name(const char *s, size_t n, const char *prefix,
                    const char *name)
{
    size_t p = strlen(prefix);
    if (n > p && memcmp(s, prefix, p) == 0) {
        s += p;
        n -= p;
    }
    return json_eq(s, n, name);
}

/* The value at the cursor is a string: true (after consuming it). */
static bool at_string(jcur *c)
{
    jcur_ws(c);
    return c->p < c->end && *c->p == '"';
}

static bool parse_dtype(jcur *c, const char *what, tx_dtype *t, bool *bad)
{
    *bad = true;
    if (!at_string(c)) {
        int64_t v;
        if (!jcur_int64(c, what, &v))
            return false;
        for (size_t i = 0; i < NTYPES; i++)
            if (dml_types[i].number == v) {
                *t = dml_types[i].t;
                *bad = false;
                return true;
            }
        return jcur_fail(c,
                         "%s %" PRId64 " is not a DML_TENSOR_DATA_TYPE that "
                         "tally supports (1 to 11)",
                         what, v);
    }
    const char *s;
    size_t n;
    if (!jcur_string(c, &s, &n))
        return false;
    for (size_t i = 0; i < NTYPES; i++)
        if (is_name(s, n, TYPE_PREFIX, dml_types[i].name)) {
            *t = dml_types[i].t;
            *bad = false;
            return true;
        }
    int own = tx_dtype_parse(s, n);
    if (own >= 0) {
        *t = (tx_dtype)own;
        *bad = false;
        return true;
    }
    return jcur_fail(c,
                     "%s \"%.*s\" is not a data type (expected FLOAT16, "
                     "FLOAT32, FLOAT64, INT8 to INT64 or UINT8 to UINT64, "
                     "with or without " TYPE_PREFIX ", or one of %s)",
                     what, printable(s, n) ? (int)n : 3,
                     printable(s, n) ? s : "...", tx_dtype_list());
}

/* A non-negative integer member. */
static bool parse_u64(jcur *c, const char *what, uint64_t *out)
{
    int64_t v;
    if (!jcur_int64(c, what, &v))
        return false;
    if (v < 0)
        return jcur_fail(c, "%s cannot be negative (%" PRId64 ")", what, v);
    *out = (uint64_t)v;
    return true;
}

/* One tensor object into t; `what` is "InputTensor" or "OutputTensor". */
static bool parse_tensor(jcur *c, const char *what, dml_tensor *t)
{
    char name[64];
    bool first = true, has_type = false, has_sizes = false;
    bool has_count = false;
    uint64_t count = 0;
    int nstrides = 0;
    const char *key;
    size_t klen;
    memset(t, 0, sizeof *t);
    jcur_ws(c);
    if (c->p >= c->end || *c->p != '{')
        return jcur_fail(c, "%s must be an object with DataType and Sizes",
                         what);
    while (jcur_member(c, &first, &key, &klen)) {
        bool ok;
        snprintf(name, sizeof name, "%s.%.*s", what,
                 printable(key, klen) ? (int)klen : 0, key);
        if (json_eq(key, klen, "DataType")) {
            ok = !has_type && parse_dtype(c, name, &t->dtype, &t->bad_dtype);
            has_type = true;
        } else if (json_eq(key, klen, "Sizes")) {
            ok = !has_sizes && jcur_shape(c, name, t->sizes, &t->rank);
            has_sizes = true;
        } else if (json_eq(key, klen, "Strides")) {
            ok = !t->has_strides && jcur_shape(c, name, t->strides, &nstrides);
            t->has_strides = true;
        } else if (json_eq(key, klen, "TotalTensorSizeInBytes")) {
            ok = !t->has_total && parse_u64(c, name, &t->total_bytes);
            t->has_total = true;
        } else if (json_eq(key, klen, "DimensionCount")) {
            ok = !has_count && parse_u64(c, name, &count);
            has_count = true;
        } else if (json_eq(key, klen, "Flags")) {
            ok = parse_u64(c, name, &t->flags);
            if (ok && t->flags > 1)
                return jcur_fail(c,
                                 "%s must be 0 (DML_TENSOR_FLAG_NONE) or 1 "
                                 "(DML_TENSOR_FLAG_OWNED_BY_DML)",
                                 name);
        } else if (json_eq(key, klen, "GuaranteedBaseOffsetAlignment")) {
            ok = parse_u64(c, name, &t->alignment);
        } else {
            return jcur_fail(c,
                             "%s has an unknown member \"%.*s\" (expected "
                             "DataType, Sizes, Strides, "
                             "TotalTensorSizeInBytes, DimensionCount, Flags "
                             "or GuaranteedBaseOffsetAlignment)",
                             what, printable(key, klen) ? (int)klen : 3,
                             printable(key, klen) ? key : "...");
        }
        if (!ok)
            return c->failed ? false : jcur_fail(c, "%s appears twice", name);
    }
    if (c->failed)
        return false;
    if (!has_type || !has_sizes)
        return jcur_fail(c, "%s needs %s", what,
                         has_type ? "Sizes" : "DataType");
    if (t->rank == 0)
        return jcur_fail(c,
                         "%s.Sizes is empty: a tensor has 1 to %d "
                         "dimensions",
                         what, ENG_MAX_RANK);
    for (int k = 0; k < t->rank; k++)
        if (t->sizes[k] == 0)
            return jcur_fail(c,
                             "%s.Sizes[%d] is 0: DirectML sizes are 1 "
                             "or more",
                             what, k);
    if (has_count && count != (uint64_t)t->rank)
        return jcur_fail(c,
                         "%s.DimensionCount is %" PRIu64 " but Sizes has %d "
                         "dimensions",
                         what, count, t->rank);
    if (t->has_strides && nstrides != t->rank)
        return jcur_fail(c,
                         "%s.Strides has %d entries but Sizes has %d "
                         "dimensions",
                         what, nstrides, t->rank);
    if (!t->has_strides && !tx_strides_packed(t->rank, t->sizes, t->strides))
        return jcur_fail(c, "%s.Sizes: the element count overflows 64 bits",
                         what);
    uint64_t last;
    if (!tx_strides_buffer_bytes(tx_dtype_size(t->dtype), t->rank, t->sizes,
                                 t->strides, &t->min_bytes)
        || !tx_strides_last_index(t->rank, t->sizes, t->strides, &last))
        return jcur_fail(c,
                         "%s: the Sizes and Strides address more than 2^64 "
                         "bytes",
                         what);
    t->span = last + 1;
    if (!t->has_total)
        t->total_bytes = t->min_bytes;
    else if (t->total_bytes < t->min_bytes)
        return jcur_fail(c,
                         "%s.TotalTensorSizeInBytes is %" PRIu64 " but its "
                         "Sizes and Strides need at least %" PRIu64
                         " (DMLCalcBufferTensorSize: the addressed bytes "
                         "rounded up to a multiple of 4)",
                         what, t->total_bytes, t->min_bytes);
    return true;
}

static bool parse_direction(jcur *c, bool *decreasing)
{
    if (!at_string(c)) {
        int64_t v;
        if (!jcur_int64(c, "AxisDirection", &v))
            return false;
        if (v != 0 && v != 1)
            return jcur_fail(c,
                             "AxisDirection %" PRId64 " is not 0 "
                             "(INCREASING) or 1 (DECREASING)",
                             v);
        *decreasing = v == 1;
        return true;
    }
    const char *s;
    size_t n;
    if (!jcur_string(c, &s, &n))
        return false;
    if (is_name(s, n, DIR_PREFIX, "INCREASING"))
        *decreasing = false;
    else if (is_name(s, n, DIR_PREFIX, "DECREASING"))
        *decreasing = true;
    else
        return jcur_fail(c, "AxisDirection must be " DIR_PREFIX
                            "INCREASING or " DIR_PREFIX
                            "DECREASING (or INCREASING, DECREASING, "
                            "0, 1)");
    return true;
}

static bool parse_flag(jcur *c, const char *what, bool *out)
{
    jcur_ws(c);
    if (c->p < c->end && (*c->p == 't' || *c->p == 'f'))
        return jcur_bool(c, what, out);
    int64_t v;
    if (!jcur_int64(c, what, &v))
        return false;
    if (v != 0 && v != 1)
        return jcur_fail(c, "%s must be true, false, 0 or 1", what);
    *out = v == 1;
    return true;
}

/* The rules between the two tensors and the scan's own members. */
static eng_err check_operator(dml_request *q, uint64_t axis, size_t max_bytes,
                              char *msg, size_t msglen)
{
    const dml_tensor *in = &q->in, *out = &q->out;
    if (out->dtype != in->dtype)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "OutputTensor.DataType (%s) must be InputTensor's "
                        "(%s)",
                        tx_dtype_name(out->dtype), tx_dtype_name(in->dtype));
    if (out->rank != in->rank
        || memcmp(out->sizes, in->sizes, sizeof in->sizes[0] * (size_t)in->rank)
               != 0)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "OutputTensor.Sizes must equal InputTensor.Sizes");
    if (in->rank > ENG_MAX_RANK)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "InputTensor.Sizes has %d dimensions, more than the "
                        "%d supported",
                        in->rank, ENG_MAX_RANK);
    if (axis >= (uint64_t)in->rank)
        return eng_fail(msg, msglen, ENG_E_AXIS,
                        "Axis %" PRIu64 " is out of range for %d dimensions "
                        "(0 to %d)",
                        axis, in->rank, in->rank - 1);
    if (!tx_strides_disjoint(out->rank, out->sizes, out->strides))
        return eng_fail(msg, msglen, ENG_E_SHAPE,
                        "OutputTensor.Strides could make two elements share "
                        "an address: sorted by stride, each dimension's "
                        "stride must exceed the furthest offset of the "
                        "smaller ones");
    if (out->total_bytes > max_bytes)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "OutputTensor needs a buffer of %" PRIu64 " bytes, "
                        "more than the %zu allowed",
                        out->total_bytes, max_bytes);
    q->desc.dtype = in->dtype;
    q->desc.rank = in->rank;
    memcpy(q->desc.shape, in->sizes, sizeof in->sizes);
    q->desc.axis = (int64_t)axis;
    q->iv.strides = in->strides;
    q->ov.strides = out->strides;
    eng_lines l;
    return eng_lines_from_desc(&q->desc, &l, msg, msglen);
}

eng_err dml_parse(const char *text, size_t len, size_t max_bytes,
                  bool want_data, dml_request *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    jcur c;
    jcur_init(&c, text, len, msg, msglen);
    bool first = true, has_in = false, has_out = false, has_axis = false;
    bool has_dir = false, has_excl = false;
    const char *data = NULL, *key;
    size_t klen;
    uint64_t axis = 0;
    jcur_ws(&c);
    if (c.p >= c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the operator description is empty");
    while (jcur_member(&c, &first, &key, &klen)) {
        bool ok, dup;
        if (json_eq(key, klen, "InputTensor")) {
            dup = has_in;
            ok = !dup && parse_tensor(&c, "InputTensor", &out->in);
            has_in = true;
        } else if (json_eq(key, klen, "OutputTensor")) {
            dup = has_out;
            ok = !dup && parse_tensor(&c, "OutputTensor", &out->out);
            has_out = true;
        } else if (json_eq(key, klen, "Axis")) {
            dup = has_axis;
            ok = !dup && parse_u64(&c, "Axis", &axis);
            has_axis = true;
        } else if (json_eq(key, klen, "AxisDirection")) {
            dup = has_dir;
            ok = !dup && parse_direction(&c, &out->desc.reverse);
            has_dir = true;
        } else if (json_eq(key, klen, "HasExclusiveSum")) {
            dup = has_excl;
            ok =
                !dup && parse_flag(&c, "HasExclusiveSum", &out->desc.exclusive);
            has_excl = true;
        } else if (json_eq(key, klen, "data") && want_data) {
            dup = data != NULL;
            data = c.p;
            ok = !dup && jcur_skip(&c);
        } else {
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "unknown member \"%.*s\" (expected InputTensor, "
                            "OutputTensor, Axis, AxisDirection, "
                            "HasExclusiveSum%s)",
                            printable(key, klen) ? (int)klen : 3,
                            printable(key, klen) ? key : "...",
                            want_data ? " or data"
                                      : "; the binary form's data is the "
                                        "body");
        }
        if (!ok) {
            if (dup)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "member \"%.*s\" appears twice", (int)klen,
                                key);
            return out->in.bad_dtype || out->out.bad_dtype ? ENG_E_DTYPE
                                                           : ENG_E_INVALID;
        }
    }
    if (c.failed)
        return ENG_E_INVALID;
    jcur_ws(&c);
    if (c.p != c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "invalid JSON: text after the object at byte %zu",
                        (size_t)(c.p - c.base));
    if (!has_in || !has_out || !has_axis)
        return eng_fail(msg, msglen, ENG_E_INVALID, "missing member \"%s\"",
                        !has_in    ? "InputTensor"
                        : !has_out ? "OutputTensor"
                                   : "Axis");
    if (want_data && data == NULL)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "missing member \"data\" (the input buffer's "
                        "elements in memory order)");
    eng_err e = check_operator(out, axis, max_bytes, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    size_t size = tx_dtype_size(out->in.dtype);
    if (out->in.span > max_bytes / size)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "InputTensor addresses %" PRIu64 " elements of %zu "
                        "bytes, more than the %zu bytes a body may have",
                        out->in.span, size, max_bytes);
    if (!want_data)
        return ENG_E_OK;

    /* data: the input buffer's elements, 0 to the last one addressed */
    size_t bytes = (size_t)out->in.span * size;
    out->data = eng_buffer_alloc(bytes ? bytes : 1);
    if (out->data == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM,
                        "out of memory for %zu bytes of input", bytes);
    uint64_t shape[1] = {out->in.span};
    c.p = data;
    if (!jcur_tensor(&c, "data", out->in.dtype, shape, 1, out->in.span,
                     out->data)) {
        eng_buffer_free(out->data);
        out->data = NULL;
        return ENG_E_INVALID;
    }
    out->iv.bytes = bytes;
    return ENG_E_OK;
}

bool dml_check_body(const dml_request *q, size_t len, char *msg, size_t msglen)
{
    const dml_tensor *t = &q->in;
    uint64_t exact = t->span * tx_dtype_size(t->dtype);
    bool has_total = t->has_total;
    if (has_total ? len == t->total_bytes : len >= exact && len <= t->min_bytes)
        return true;
    if (has_total)
        snprintf(msg, msglen,
                 "the body has %zu bytes, but InputTensor's "
                 "TotalTensorSizeInBytes is %" PRIu64,
                 len, t->total_bytes);
    else
        snprintf(msg, msglen,
                 "the body has %zu bytes, but InputTensor addresses %" PRIu64
                 " (%" PRIu64 " with DirectML's padding to 4 bytes); send "
                 "one of those, or give TotalTensorSizeInBytes",
                 len, exact, t->min_bytes);
    return false;
}

static bool append_u64(char **buf, size_t *blen, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    return json_append(buf, blen, tmp, (size_t)n);
}

#define LIT(s) (s), sizeof(s) - 1

bool dml_append_output(char **buf, size_t *blen, const dml_request *q)
{
    const dml_tensor *t = &q->out;
    const char *type = NULL;
    for (size_t i = 0; i < NTYPES; i++)
        if (dml_types[i].t == t->dtype)
            type = dml_types[i].name;
    bool ok = json_append(buf, blen, LIT("{\"DataType\":\""));
    if (type != NULL)
        ok = ok && json_append(buf, blen, LIT(TYPE_PREFIX))
             && json_append(buf, blen, type, strlen(type));
    else /* bfloat16: tally's name, DirectML has none */
        ok = ok
             && json_append(buf, blen, tx_dtype_name(t->dtype),
                            strlen(tx_dtype_name(t->dtype)));
    return ok && json_append(buf, blen, LIT("\",\"Flags\":"))
           && append_u64(buf, blen, t->flags)
           && json_append(buf, blen, LIT(",\"DimensionCount\":"))
           && append_u64(buf, blen, (uint64_t)t->rank)
           && json_append(buf, blen, LIT(",\"Sizes\":"))
           && json_append_shape(buf, blen, t->sizes, t->rank)
           && json_append(buf, blen, LIT(",\"Strides\":"))
           && json_append_shape(buf, blen, t->strides, t->rank)
           && json_append(buf, blen, LIT(",\"TotalTensorSizeInBytes\":"))
           && append_u64(buf, blen, t->total_bytes)
           && json_append(buf, blen, LIT(",\"GuaranteedBaseOffsetAlignment\":"))
           && append_u64(buf, blen, t->alignment)
           && json_append(buf, blen, LIT("}"));
}

bool dml_json_writer(json_writer *w, const dml_request *q, const void *out)
{
    char *pre = NULL, *suf = NULL;
    size_t plen = 0, slen = 0;
    bool ok = json_append(&pre, &plen, LIT("{\"OutputTensor\":"))
              && dml_append_output(&pre, &plen, q)
              && json_append(&pre, &plen, LIT(",\"data\":["))
              && json_append(&suf, &slen, LIT("]}"));
    eng_scan_desc flat = {
        .dtype = q->out.dtype, .rank = 1, .shape = {q->out.span}};
    return json_writer_init(w, ok, pre, plen, suf, slen, &flat, out);
}
