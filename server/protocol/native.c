/*
 * native.c - the native API's request parsing and response text.
 */
#include <string.h>

#include "buffer.h"
#include "native.h"
#include "scan_params.h"

/* Member spans of the top-level object, found in a first pass so that
 * "data" can come before "dtype" and "shape". */
typedef struct {
    const char *dtype, *shape, *data, *axis, *exclusive, *reverse, *direction;
    size_t dtype_len;
} members;

/* When dtype and shape come before data, the data is parsed as soon as it
 * is met, so that the document is walked once. Anything unusual (a dtype
 * or shape that does not read, a size over the limit, no memory) leaves it
 * to the second pass, with the messages for those cases. True when the
 * data was taken (*data set) or left; false when it was taken and is bad
 * (*data is then set too, for the caller to free). */
static bool eager_data(jcur *c, const members *m, size_t max_bytes,
                       void **data, uint64_t *bytes_out)
{
    jcur q;
    const char *s;
    size_t n;
    uint64_t shape[ENG_MAX_RANK];
    int rank, t;
    jcur_init(&q, c->base, (size_t)(c->end - c->base), NULL, 0);
    q.p = m->dtype;
    if (!jcur_string(&q, &s, &n) || (t = tx_dtype_parse(s, n)) < 0)
        return true;
    q.p = m->shape;
    if (!jcur_shape(&q, "shape", shape, &rank) || rank == 0)
        return true;
    uint64_t elements = 1, bytes;
    for (int d = 0; d < rank; d++)
        if (!eng_mul_u64(elements, shape[d], &elements))
            return true;
    if (!eng_mul_u64(elements, tx_dtype_size((tx_dtype)t), &bytes)
        || bytes > max_bytes)
        return true;
    *data = eng_buffer_alloc((size_t)bytes);
    if (*data == NULL)
        return true;
    *bytes_out = bytes;
    return jcur_tensor(c, "data", (tx_dtype)t, shape, rank, elements, *data);
}

static eng_err parse_json(const char *body, size_t len, size_t max_bytes,
                          native_request *out, void **early, char *msg,
                          size_t msglen)
{
    uint64_t early_bytes = 0;
    jcur c;
    jcur_init(&c, body, len, msg, msglen);
    members m = {0};
    bool first = true;
    const char *key;
    size_t klen;
    jcur_ws(&c);
    if (c.p >= c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the body is empty: "
                        "expected a JSON object with data (and dtype, shape)");
    while (jcur_member(&c, &first, &key, &klen)) {
        const char **slot;
        bool seq_ok;
        if (seq_json_param(&c, key, klen, "", &out->seq, &seq_ok)) {
            if (!seq_ok)
                return ENG_E_INVALID;
            continue;
        }
        if (json_eq(key, klen, "dtype"))
            slot = &m.dtype;
        else if (json_eq(key, klen, "shape"))
            slot = &m.shape;
        else if (json_eq(key, klen, "data"))
            slot = &m.data;
        else if (json_eq(key, klen, "axis"))
            slot = &m.axis;
        else if (json_eq(key, klen, "exclusive"))
            slot = &m.exclusive;
        else if (json_eq(key, klen, "reverse"))
            slot = &m.reverse;
        else if (json_eq(key, klen, "direction"))
            slot = &m.direction;
        else if (json_eq(key, klen, "InputTensor")
                 || json_eq(key, klen, "OutputTensor")
                 || json_eq(key, klen, "Axis")
                 || json_eq(key, klen, "AxisDirection")
                 || json_eq(key, klen, "HasExclusiveSum")) {
            out->dml = true; /* DirectML's form: the caller's to parse */
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "a DirectML operator description");
        } else
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "unknown member \"%.*s\" (expected dtype, "
                            "shape, data, axis, exclusive, reverse, "
                            "direction, sequence_id, sequence_start, "
                            "sequence_end or sequence_chunk)",
                            klen > 40 ? 40 : (int)klen, key);
        if (*slot != NULL)
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "member \"%.*s\" appears twice", (int)klen, key);
        *slot = c.p;
        if (slot == &m.data && m.dtype != NULL && m.shape != NULL) {
            jcur_ws(&c);
            m.data = c.p;
            if (!eager_data(&c, &m, max_bytes, early, &early_bytes))
                return ENG_E_INVALID;
            if (*early != NULL)
                continue;
        }
        if (!jcur_skip(&c))
            return ENG_E_INVALID;
    }
    if (c.failed)
        return ENG_E_INVALID;
    jcur_ws(&c);
    if (c.p != c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "invalid JSON: text after the object at byte %zu",
                        (size_t)(c.p - c.base));
    if (m.data == NULL)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "missing member \"data\" (the tensor's elements)");

    /* Without a shape or a dtype, they are read off the data as
     * numpy.array would: the nesting gives the shape, and the numbers give
     * int64, or float64 when one has a fraction or an exponent. */
    uint64_t inferred[ENG_MAX_RANK];
    int inferred_rank = 0;
    bool is_float = false;
    if (m.dtype == NULL || m.shape == NULL) {
        c.p = m.data;
        if (!jcur_infer(&c, "data", inferred, &inferred_rank, &is_float))
            return ENG_E_INVALID;
    }

    /* dtype */
    const char *s;
    size_t n;
    if (m.dtype == NULL) {
        out->desc.dtype = is_float ? TX_FLOAT64 : TX_INT64;
    } else {
        c.p = m.dtype;
        jcur_ws(&c);
        if (c.p < c.end && *c.p != '"')
            return eng_fail(msg, msglen, ENG_E_DTYPE,
                            "dtype must be a string such as \"float32\"");
        if (!jcur_string(&c, &s, &n))
            return ENG_E_INVALID;
        int t = tx_dtype_parse(s, n);
        if (t < 0)
            return eng_fail(msg, msglen, ENG_E_DTYPE,
                            "unknown dtype \"%.*s\" (expected one of %s)",
                            n > 32 ? 32 : (int)n, s, tx_dtype_list());
        out->desc.dtype = (tx_dtype)t;
    }

    /* shape */
    if (m.shape == NULL) {
        out->desc.rank = inferred_rank;
        memcpy(out->desc.shape, inferred,
               (size_t)inferred_rank * sizeof inferred[0]);
    } else {
        c.p = m.shape;
        if (!jcur_shape(&c, "shape", out->desc.shape, &out->desc.rank))
            return ENG_E_INVALID;
        if (out->desc.rank == 0)
            return eng_fail(msg, msglen, ENG_E_RANK,
                            "shape is [] (rank 0): a cumulative sum needs at "
                            "least one axis");
    }

    /* parameters */
    scan_params p = {0};
    if (m.axis != NULL) {
        c.p = m.axis;
        if (!jcur_int64(&c, "axis", &p.axis))
            return ENG_E_INVALID;
        p.has_axis = true;
    }
    if (m.exclusive != NULL) {
        c.p = m.exclusive;
        if (!jcur_bool(&c, "exclusive", &p.exclusive))
            return ENG_E_INVALID;
        p.has_exclusive = true;
    }
    if (m.reverse != NULL) {
        c.p = m.reverse;
        if (!jcur_bool(&c, "reverse", &p.reverse))
            return ENG_E_INVALID;
        p.has_reverse = true;
    }
    if (m.direction != NULL) {
        c.p = m.direction;
        jcur_ws(&c);
        if (c.p < c.end && *c.p != '"')
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "direction must be the string \"increasing\" "
                            "or \"decreasing\"");
        if (!jcur_string(&c, &s, &n))
            return ENG_E_INVALID;
        if (!json_eq(s, n, "increasing") && !json_eq(s, n, "decreasing"))
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "direction must be \"increasing\" or "
                            "\"decreasing\", not \"%.*s\"",
                            n > 32 ? 32 : (int)n, s);
        p.decreasing = s[0] == 'd';
        p.has_direction = true;
    }
    if (!scan_params_apply(&p, &out->desc, msg, msglen))
        return ENG_E_INVALID;
    if (!seq_params_check(&out->seq, msg, msglen))
        return ENG_E_INVALID;

    /* sizes, checked before allocating */
    eng_lines l;
    eng_err e = eng_lines_from_desc(&out->desc, &l, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    if (*early != NULL && early_bytes == l.bytes) {
        out->data = *early; /* parsed where it was met */
        out->bytes = l.bytes;
        *early = NULL;
        return ENG_E_OK;
    }
    if (l.bytes > max_bytes)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "the tensor would take %zu bytes, more than the "
                        "%zu this server accepts",
                        l.bytes, max_bytes);
    void *data = eng_buffer_alloc(l.bytes);
    if (data == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM,
                        "out of memory for a %zu-byte tensor", l.bytes);
    c.p = m.data;
    if (!jcur_tensor(&c, "data", out->desc.dtype, out->desc.shape,
                     out->desc.rank, l.elements, data)) {
        eng_buffer_free(data);
        return ENG_E_INVALID;
    }
    out->data = data;
    out->bytes = l.bytes;
    return ENG_E_OK;
}

eng_err native_parse_json(const char *body, size_t len, size_t max_bytes,
                          native_request *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    void *early = NULL; /* the data, when eager_data() parsed it */
    eng_err e = parse_json(body, len, max_bytes, out, &early, msg, msglen);
    eng_buffer_free(early);
    return e;
}

bool native_json_writer(json_writer *w, const eng_scan_desc *desc,
                        const void *data)
{
    char *pre = NULL, *suf = NULL;
    size_t plen = 0, slen = 0;
    const char *name = tx_dtype_name(desc->dtype);
    bool ok = json_append(&pre, &plen, "{\"dtype\":\"", 10)
              && json_append(&pre, &plen, name, strlen(name))
              && json_append(&pre, &plen, "\",\"shape\":", 10)
              && json_append_shape(&pre, &plen, desc->shape, desc->rank)
              && json_append(&pre, &plen, ",\"data\":[", 9)
              && json_append(&suf, &slen, "]}", 2);
    return json_writer_init(w, ok, pre, plen, suf, slen, desc, data);
}
