/*
 * kserve_json.c - KServe v2 inference requests and responses in JSON.
 *
 * The request is walked once with the JSON scanner (format/json.h), member by member.
 * x's JSON data is parsed where it is met when its name, datatype and
 * shape came first (eager_data); otherwise inputs are collected first
 * (their data spans remembered), and tensors are decoded once the whole
 * header has been read, because a binary tensor's place in the body
 * depends on every input before it.
 * Metadata documents are small and built with jansson.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "digits.h"
#include "kserve_json.h"
#include "scan_params.h"
#include "tx_utf8.h"

#define MAX_INPUTS 8

/* The cursor fails with the message already written. */
static bool failed(jcur *c)
{
    c->failed = true;
    return false;
}

/* An input as the JSON has it, before kserve_request_finish(). */
typedef struct {
    kserve_input in;
    bool has_dtype, has_shape;
} input;

/* A parameter's value at the cursor, read as the table's kind says. */
static bool read_value(jcur *c, kserve_kind kind, const char *what,
                       kserve_value *v, char *buf, size_t cap)
{
    jcur_ws(c);
    bool str = c->p < c->end && *c->p == '"';
    switch (kind) {
    case KP_BOOL: return jcur_bool(c, what, &v->b);
    case KP_INT: return jcur_int64(c, what, &v->i);
    case KP_COUNT: return jcur_uint64(c, what, &v->u);
    case KP_ID:
        if (!str && c->p < c->end
            && ((*c->p >= '0' && *c->p <= '9') || *c->p == '-'))
            return jcur_uint64(c, what, &v->u);
        if (!str)
            return jcur_fail(c, "%s must be a number or a string, not %s",
                             what, jcur_found(c));
        /* fall through */
    case KP_STRING:
        if (!str)
            return jcur_fail(c, "%s must be a string, not %s", what,
                             jcur_found(c));
        v->s = buf;
        return jcur_string_value(c, what, buf, cap, &v->n);
    }
    return false;
}

/* A tensor's "parameters": the shared-memory ones into ref; the others
 * to `other` (false: a failure), which skips what it does not take.
 * `kind` and name[0..n) name the tensor in messages ("input", "x"),
 * written out only once a shared-memory parameter comes (ref is
 * untouched until then, and complete without a word). */
static bool tensor_parameters(jcur *c, shm_ref *ref, const char *kind_of,
                              const char *tname, size_t tn,
                              bool (*other)(jcur *, const char *, size_t,
                                            void *),
                              void *arg)
{
    bool first = true;
    const char *k;
    size_t kn;
    char what[64] = "";
    while (jcur_member(c, &first, &k, &kn)) {
        kserve_kind kind;
        if (!kserve_shm_param(k, kn, &kind)) {
            if (!other(c, k, kn, arg))
                return false;
            continue;
        }
        if (what[0] == '\0')
            snprintf(what, sizeof what, "%s \"%.*s\"", kind_of,
                     tn > 32 ? 32 : (int)tn, tname != NULL ? tname : "");
        char name[64], buf[SHM_NAME_MAX + 1];
        snprintf(name, sizeof name, "%.*s", (int)kn, k);
        kserve_value v = {0};
        if (!read_value(c, kind, name, &v, buf, sizeof buf)
            || !kserve_shm_set(ref, k, kn, &v, what, c->err, c->errlen))
            return failed(c);
    }
    return !c->failed
           && (kserve_shm_complete(ref, what, c->err, c->errlen)
               || failed(c));
}

/* An input's other parameters: binary_data_size. */
static bool input_other(jcur *c, const char *k, size_t kn, void *arg)
{
    kserve_input *in = arg;
    if (!json_eq(k, kn, "binary_data_size"))
        return jcur_skip(c);
    in->has_raw = true;
    return jcur_uint64(c, "binary_data_size", &in->raw_len);
}

/* When x's name, datatype and shape come before its data, as tritonclient
 * writes them, the data is parsed as soon as it is met, so that the
 * document is walked once. Anything unusual (another order, a size over
 * the limit, no memory) leaves it to kserve_request_finish(), which
 * parses it at the end, with the messages for those cases. True when the
 * data was taken or left; false when it was taken and is bad. */
static bool eager_data(jcur *c, input *x, size_t max_bytes, kserve_request *r)
{
    kserve_input *in = &x->in;
    if (r->data != NULL || in->has_raw || !x->has_dtype || !x->has_shape
        || in->rank == 0 || !json_eq(in->name, in->name_len, "x"))
        return true;
    uint64_t elements = 1, bytes;
    for (int d = 0; d < in->rank; d++)
        if (!eng_mul_u64(elements, in->shape[d], &elements))
            return true;
    if (!eng_mul_u64(elements, tx_dtype_size(in->dtype), &bytes)
        || bytes > max_bytes)
        return true;
    r->data = eng_buffer_alloc((size_t)bytes);
    if (r->data == NULL)
        return true;
    r->data_owned = true;
    in->decoded = true;
    return jcur_tensor(c, "input \"x\" data", in->dtype, in->shape, in->rank,
                       elements, r->data);
}

static bool parse_input(jcur *c, input *x, int index, size_t max_bytes,
                        kserve_request *r)
{
    kserve_input *in = &x->in;
    bool first = true;
    const char *k;
    size_t kn;
    char what[64];
    while (jcur_member(c, &first, &k, &kn)) {
        if (json_eq(k, kn, "name")) {
            if (!jcur_string(c, &in->name, &in->name_len))
                return false;
        } else if (json_eq(k, kn, "datatype")) {
            const char *s;
            size_t n;
            if (!jcur_string(c, &s, &n))
                return false;
            int dt = tx_dtype_parse(s, n);
            if (dt < 0)
                return jcur_fail(c,
                                 "inputs[%d].datatype \"%.*s\" is not "
                                 "supported (FP16, BF16, FP32, FP64, INT8 "
                                 "to INT64 and UINT8 to UINT64 are)",
                                 index, n > 16 ? 16 : (int)n, s);
            in->dtype = (tx_dtype)dt;
            x->has_dtype = true;
        } else if (json_eq(k, kn, "shape")) {
            /* "inputs[N].shape", written without a printf each request */
            int d = digits_count((uint64_t)index);
            memcpy(what, "inputs[", 7);
            digits_write(what + 7, d, (uint64_t)index);
            memcpy(what + 7 + d, "].shape", 8);
            if (!jcur_shape(c, what, in->shape, &in->rank))
                return false;
            x->has_shape = true;
        } else if (json_eq(k, kn, "parameters")) {
            if (!tensor_parameters(c, &in->shm, "input", in->name,
                                   in->name_len, input_other, in))
                return false;
        } else if (json_eq(k, kn, "data")) {
            jcur_ws(c);
            in->has_typed = true;
            in->typed = c->p;
            in->typed_len = (size_t)(c->end - c->p);
            if (!eager_data(c, x, max_bytes, r))
                return false;
            if (!in->decoded && !jcur_skip(c))
                return false;
        } else if (!jcur_skip(c)) {
            return false;
        }
    }
    if (c->failed)
        return false;
    if (in->name == NULL)
        return jcur_fail(c, "inputs[%d] has no name", index);
    if (!x->has_dtype || !x->has_shape)
        return jcur_fail(c, "input \"%.*s\" has no %s",
                         in->name_len > 32 ? 32 : (int)in->name_len, in->name,
                         x->has_dtype ? "shape" : "datatype");
    return true;
}

/* Request "parameters", by the table. */
static bool request_parameters(jcur *c, scan_params *p, kserve_request *r)
{
    bool first = true;
    const char *k;
    size_t kn;
    while (jcur_member(c, &first, &k, &kn)) {
        const kserve_param *q = kserve_param_find(k, kn);
        if (q == NULL) {
            if (!jcur_skip(c))
                return false;
            continue;
        }
        char buf[4 * SEQ_ID_MAX];
        kserve_value v = {0};
        if (!read_value(c, q->kind, q->in_json, &v, buf, sizeof buf))
            return false;
        if (!kserve_param_set(q, &v, r, p, "parameters.", c->err, c->errlen))
            return failed(c);
    }
    return !c->failed;
}

/* An output's other parameters: binary_data; classification refused. */
static bool output_other(jcur *c, const char *k, size_t kn, void *arg)
{
    if (json_eq(k, kn, "classification"))
        return jcur_fail(c, "output classification is not supported");
    if (json_eq(k, kn, "binary_data"))
        return jcur_bool(c, "outputs[].parameters.binary_data", arg);
    return jcur_skip(c);
}

/* "outputs": only y exists; binary_data chooses its encoding. */
static bool parse_outputs(jcur *c, kserve_request *r)
{
    bool first = true;
    int i = 0;
    while (jcur_element(c, &first)) {
        bool mfirst = true, named = false;
        const char *k;
        size_t kn;
        while (jcur_member(c, &mfirst, &k, &kn)) {
            if (json_eq(k, kn, "name")) {
                const char *s;
                size_t n;
                if (!jcur_string(c, &s, &n))
                    return false;
                if (!json_eq(s, n, "y"))
                    return jcur_fail(c,
                                     "unknown output \"%.*s\" (the model "
                                     "has one output, \"y\")",
                                     n > 32 ? 32 : (int)n, s);
                named = true;
            } else if (json_eq(k, kn, "parameters")) {
                if (!tensor_parameters(c, &r->y_shm, "output", "y", 1,
                                       output_other, &r->binary_output))
                    return false;
            } else if (!jcur_skip(c)) {
                return false;
            }
        }
        if (c->failed)
            return false;
        if (!named)
            return jcur_fail(c, "outputs[%d] has no name", i);
        i++;
    }
    return !c->failed;
}

/* Typed data: the JSON array at in->typed. */
static bool decode(const kserve_input *in, uint64_t elements, void *dst,
                   char *msg, size_t msglen)
{
    jcur c;
    jcur_init(&c, in->typed, in->typed_len, msg, msglen);
    bool x = json_eq(in->name, in->name_len, "x");
    uint64_t one = 1;
    return jcur_tensor(&c, x ? "input \"x\" data" : "input \"axis\" data",
                       in->dtype, x ? in->shape : &one, x ? in->rank : 1,
                       elements, dst);
}

static const kserve_codec json_codec = {
    .typed_name = "data",
    .raw_name = "parameters.binary_data_size",
    .raw_field = "binary_data_size",
    .param_where = "parameters.",
    .decode = decode,
};

/* The id, as written (escapes and all), copied: the JSON text may be
 * moved over by the tensor. */
static eng_err read_id(jcur *c, kserve_request *r)
{
    const char *s;
    size_t n;
    jcur_ws(c);
    if (c->p < c->end && *c->p != '"')
        return eng_fail(c->err, c->errlen, ENG_E_INVALID, "id must be a string");
    if (!jcur_string(c, &s, &n))
        return ENG_E_INVALID;
    /* it is echoed into the answer, which must be JSON */
    if (tx_utf8_valid(s, n) != n)
        return eng_fail(c->err, c->errlen, ENG_E_INVALID,
                        "id must be valid UTF-8");
    free(r->id);
    r->id = malloc(n + 1);
    if (r->id == NULL)
        return eng_fail(c->err, c->errlen, ENG_E_NOMEM, "out of memory");
    memcpy(r->id, s, n);
    r->id[n] = '\0';
    r->id_len = n;
    return ENG_E_OK;
}

/* The document's members; the inputs into in[0..*n). */
static eng_err walk(jcur *c, input *in, size_t *n, scan_params *p,
                    size_t max_bytes, kserve_request *r)
{
    bool have_inputs = false, first = true;
    const char *k;
    size_t kn;
    while (jcur_member(c, &first, &k, &kn)) {
        if (json_eq(k, kn, "id")) {
            eng_err e = read_id(c, r);
            if (e != ENG_E_OK)
                return e;
        } else if (json_eq(k, kn, "parameters")) {
            if (!request_parameters(c, p, r))
                return ENG_E_INVALID;
        } else if (json_eq(k, kn, "inputs")) {
            bool efirst = true;
            have_inputs = true;
            while (jcur_element(c, &efirst)) {
                if (*n >= MAX_INPUTS)
                    return eng_fail(c->err, c->errlen, ENG_E_INVALID,
                                    "too many inputs (the model takes \"x\" "
                                    "and optionally \"axis\")");
                memset(&in[*n], 0, sizeof in[*n]);
                if (!parse_input(c, &in[*n], (int)*n, max_bytes, r))
                    return ENG_E_INVALID;
                (*n)++;
            }
            if (c->failed)
                return ENG_E_INVALID;
        } else if (json_eq(k, kn, "outputs")) {
            if (!parse_outputs(c, r))
                return ENG_E_INVALID;
        } else if (!jcur_skip(c)) {
            return ENG_E_INVALID;
        }
    }
    if (c->failed)
        return ENG_E_INVALID;
    if (!have_inputs)
        return eng_fail(c->err, c->errlen, ENG_E_INVALID,
                        "the request has no \"inputs\"");
    return ENG_E_OK;
}

static eng_err parse_request(uint8_t *body, size_t len, size_t header_len,
                             size_t max_bytes, kserve_request *out, char *msg,
                             size_t msglen)
{
    bool binary = header_len != SIZE_MAX;
    if (binary && header_len > len)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "Inference-Header-Content-Length is %zu but the "
                        "body has only %zu bytes",
                        header_len, len);
    size_t jlen = binary ? header_len : len;
    jcur c;
    jcur_init(&c, (const char *)body, jlen, msg, msglen);
    jcur_ws(&c);
    if (c.p >= c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the inference request is empty: expected a JSON "
                        "object with \"inputs\"");
    input inputs[MAX_INPUTS];
    kserve_input in[MAX_INPUTS];
    size_t n = 0;
    scan_params p = {0};
    eng_err e = walk(&c, inputs, &n, &p, max_bytes, out);
    if (e != ENG_E_OK)
        return e;
    jcur_ws(&c);
    if (c.p != c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        binary ? "the JSON header is longer or shorter than "
                                 "Inference-Header-Content-Length says"
                               : "invalid JSON: text after the object");
    /* the binary tensors follow the header, in input order */
    uint8_t *at = body + jlen;
    size_t left = len - jlen;
    for (size_t i = 0; i < n; i++) {
        in[i] = inputs[i].in;
        if (!in[i].has_raw)
            continue;
        if (!binary)
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "input \"%.*s\" declares binary_data_size "
                            "but the request has no "
                            "Inference-Header-Content-Length header",
                            (int)in[i].name_len, in[i].name);
        if (in[i].raw_len > left)
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "input \"%.*s\" declares %" PRIu64 " bytes "
                            "of binary data but only %zu remain in the "
                            "body",
                            (int)in[i].name_len, in[i].name, in[i].raw_len,
                            left);
        in[i].raw = at;
        at += in[i].raw_len;
        left -= (size_t)in[i].raw_len;
    }
    if (binary && left != 0)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "%zu bytes of binary data follow the header but the "
                        "inputs declare none of them",
                        left);
    return kserve_request_finish(out, in, n, &p, &json_codec, body, max_bytes,
                                 msg, msglen);
}

eng_err kserve_parse(uint8_t *body, size_t len, size_t header_len,
                     size_t max_bytes, kserve_request *out, char *msg,
                     size_t msglen)
{
    memset(out, 0, sizeof *out);
    eng_err e = parse_request(body, len, header_len, max_bytes, out, msg, msglen);
    if (e != ENG_E_OK)
        kserve_request_free(out); /* x's data, when it was parsed early */
    return e;
}

/* {"model_name":"cumsum","model_version":"1","id":"..","parameters":
 * {"sequence_chunk":N},"outputs":[{"name":"y","datatype":"FP32","shape":
 * [..], (id and parameters when the request had them) */
static bool output_head(char **b, size_t *n, const kserve_request *r)
{
    const char *dt = tx_dtype_kserve(r->desc.dtype);
    bool ok =
        json_append(b, n,
                    "{\"model_name\":\"" KSERVE_MODEL
                    "\",\"model_version\":\"" KSERVE_VERSION "\"",
                    strlen("{\"model_name\":\"" KSERVE_MODEL
                           "\",\"model_version\":\"" KSERVE_VERSION "\""));
    if (ok && r->id != NULL)
        ok = json_append(b, n, ",\"id\":\"", 7)
             && json_append(b, n, r->id, r->id_len) /* already escaped */
             && json_append(b, n, "\"", 1);
    if (ok && r->seq.has_chunk) /* echoed: which chunk this answers */
        ok = json_append(b, n, ",\"parameters\":{\"sequence_chunk\":",
                         strlen(",\"parameters\":{\"sequence_chunk\":"))
             && json_append_u64(b, n, r->seq.chunk)
             && json_append(b, n, "}", 1);
    return ok
           && json_append(
               b, n, ",\"outputs\":[{\"name\":\"y\",\"datatype\":\"",
               strlen(",\"outputs\":[{\"name\":\"y\",\"datatype\":\""))
           && json_append(b, n, dt, strlen(dt))
           && json_append(b, n, "\",\"shape\":", 10)
           && json_append_shape(b, n, r->desc.shape, r->desc.rank);
}

char *kserve_binary_header(const kserve_request *r, size_t *len)
{
    char *b = NULL;
    size_t n = 0;
    static const char size_is[] = ",\"parameters\":{\"binary_data_size\":";
    if (!output_head(&b, &n, r)
        || !json_append(&b, &n, size_is, sizeof size_is - 1)
        || !json_append_u64(&b, &n, r->bytes)
        || !json_append(&b, &n, "}}]}", 4)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

char *kserve_shm_output_json(const kserve_request *r, size_t *len)
{
    char *b = NULL;
    size_t n = 0;
    if (!output_head(&b, &n, r) || !json_append(&b, &n, "}]}", 3)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

bool kserve_json_writer(json_writer *w, const kserve_request *r,
                        const void *data)
{
    char *pre = NULL, *suf = NULL;
    size_t plen = 0, slen = 0;
    bool ok = output_head(&pre, &plen, r)
              && json_append(&pre, &plen, ",\"data\":[", 9)
              && json_append(&suf, &slen, "]}]}", 4);
    return json_writer_init(w, ok, pre, plen, suf, slen, &r->desc, data);
}

static char *dump(json_t *j)
{
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

const kserve_model_info kserve_model = {
    .server = "tally",
    .name = KSERVE_MODEL,
    .version = KSERVE_VERSION,
    .platform = "tally",
    .backend = "tally",
    .max_batch_size = 0,
    .input = {"x", "FP32", -1},
    .output = {"y", "FP32", -1},
};

size_t kserve_extensions(bool shm, bool seq, const char **list)
{
    static const char *const always[] = {"binary_tensor_data", "parameters",
                                         "model_configuration", "statistics"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        list[n++] = always[i];
    if (shm)
        list[n++] = "system_shared_memory";
    if (seq) {
        list[n++] = "sequence";
        list[n++] = "sequence(string_id)";
    }
    return n;
}

char *kserve_server_metadata(const char *version, bool shm, bool seq)
{
    const char *ext[KSERVE_MAX_EXTENSIONS];
    size_t n = kserve_extensions(shm, seq, ext);
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < n; i++)
        if (json_array_append_new(list, json_string(ext[i])) != 0) {
            json_decref(list);
            list = NULL;
        }
    if (list == NULL)
        return NULL;
    return dump(json_pack("{s:s, s:s, s:o}", "name", kserve_model.server,
                          "version", version, "extensions", list));
}

/* A tensor's entry: {"name", "datatype", "shape": [dim]} in the metadata,
 * {"name", "data_type": "TYPE_...", "dims": [dim]} in the config. */
static json_t *tensor_json(const kserve_tensor_info *t, bool config)
{
    char type[32];
    snprintf(type, sizeof type, "%s%s", config ? "TYPE_" : "", t->datatype);
    return json_pack("[{s:s, s:s, s:[I]}]", "name", t->name,
                     config ? "data_type" : "datatype", type,
                     config ? "dims" : "shape", (json_int_t)t->dim);
}

char *kserve_model_metadata(void)
{
    const kserve_model_info *m = &kserve_model;
    return dump(json_pack("{s:s, s:[s], s:s, s:o, s:o}", "name", m->name,
                          "versions", m->version, "platform", m->platform,
                          "inputs", tensor_json(&m->input, false), "outputs",
                          tensor_json(&m->output, false)));
}

char *kserve_model_config(uint64_t seq_idle_us)
{
    const kserve_model_info *m = &kserve_model;
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:o, s:o}", "name", m->name,
                          "platform", m->platform, "backend", m->backend,
                          "max_batch_size", m->max_batch_size, "input",
                          tensor_json(&m->input, true), "output",
                          tensor_json(&m->output, true));
    if (o != NULL && seq_idle_us > 0
        && json_object_set_new(o, "sequence_batching",
                               json_pack("{s:I}",
                                         "max_sequence_idle_microseconds",
                                         (json_int_t)seq_idle_us))
               != 0) {
        json_decref(o);
        o = NULL;
    }
    return dump(o);
}
