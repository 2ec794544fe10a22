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
#include "kserve_json.h"
#include "scan_params.h"
#include "tx_utf8.h"

#define MAX_INPUTS 8

typedef struct {
    const char *name;
    size_t name_len;
    int dtype; /* -1 until known */
    uint64_t shape[ENG_MAX_RANK];
    int rank;
    bool has_shape;
    const char *data; /* span of the JSON data array, or NULL */
    bool binary;
    uint64_t binary_size;
    uint8_t *binary_at; /* where its bytes are in the body */
    bool parsed;        /* x's data, parsed as it was met (eager_data) */
    shm_ref shm;        /* its place in a shared-memory region */
} input;

/* What parse_input() needs besides the input itself. */
typedef struct {
    size_t max_bytes;
    kserve_request *out;
} parse_ctx;

static eng_err fail_invalid(jcur *c)
{
    (void)c;
    return ENG_E_INVALID;
}

/* One of the shared-memory parameters of a tensor, at key k, into ref;
 * *taken when k was one of them. */
static bool shm_parameter(jcur *c, const char *k, size_t kn, shm_ref *ref,
                          bool *taken)
{
    *taken = true;
    if (json_eq(k, kn, "shared_memory_region")) {
        const char *s;
        size_t n;
        jcur_ws(c);
        if (c->p < c->end && *c->p != '"')
            return jcur_fail(c, "shared_memory_region must be a string");
        if (!jcur_string(c, &s, &n))
            return false;
        if (memchr(s, '\\', n) != NULL)
            return jcur_fail(c, "shared_memory_region cannot hold JSON "
                                "escapes");
        char why[160];
        if (!shm_ref_region(ref, s, n, why, sizeof why))
            return jcur_fail(c, "%s", why);
        return true;
    }
    bool off = json_eq(k, kn, "shared_memory_offset");
    if (off || json_eq(k, kn, "shared_memory_byte_size")) {
        int64_t v;
        if (!jcur_int64(c, off ? "shared_memory_offset"
                               : "shared_memory_byte_size",
                        &v))
            return false;
        if (v < 0)
            return jcur_fail(c, "%s cannot be negative",
                             off ? "shared_memory_offset"
                                 : "shared_memory_byte_size");
        if (off) {
            ref->offset = (uint64_t)v;
        } else {
            ref->byte_size = (uint64_t)v;
            ref->has_byte_size = true;
        }
        return true;
    }
    *taken = false;
    return true;
}

/* An input's "parameters": binary_data_size and the shared-memory ones
 * matter, the rest is ignored (but must be valid JSON). */
static bool input_parameters(jcur *c, input *in)
{
    bool first = true;
    const char *k;
    size_t kn;
    while (jcur_member(c, &first, &k, &kn)) {
        bool taken;
        if (!shm_parameter(c, k, kn, &in->shm, &taken))
            return false;
        if (taken)
            continue;
        if (json_eq(k, kn, "binary_data_size")) {
            int64_t v;
            if (!jcur_int64(c, "binary_data_size", &v))
                return false;
            if (v < 0)
                return jcur_fail(c, "binary_data_size cannot be negative");
            in->binary = true;
            in->binary_size = (uint64_t)v;
        } else if (!jcur_skip(c)) {
            return false;
        }
    }
    return !c->failed;
}

/* When x's name, datatype and shape come before its data, as tritonclient
 * writes them, the data is parsed as soon as it is met, so that the
 * document is walked once. Anything unusual (another order, a size over
 * the limit, no memory) leaves it to kserve_parse(), which skips the data
 * now and parses it at the end, with the messages for those cases. True
 * when the data was taken or left; false when it was taken and is bad. */
static bool eager_data(jcur *c, input *in, const parse_ctx *px)
{
    if (px->out->data != NULL || in->binary || in->dtype < 0 || !in->has_shape
        || in->rank == 0 || !json_eq(in->name, in->name_len, "x"))
        return true;
    uint64_t elements = 1, bytes;
    for (int d = 0; d < in->rank; d++)
        if (!eng_mul_u64(elements, in->shape[d], &elements))
            return true;
    if (!eng_mul_u64(elements, tx_dtype_size((tx_dtype)in->dtype), &bytes)
        || bytes > px->max_bytes)
        return true;
    void *data = eng_buffer_alloc((size_t)bytes);
    if (data == NULL)
        return true;
    px->out->data = data;
    px->out->data_owned = true;
    in->parsed = true;
    return jcur_tensor(c, "input \"x\" data", (tx_dtype)in->dtype, in->shape,
                       in->rank, elements, data);
}

static bool parse_input(jcur *c, input *in, int index, const parse_ctx *px)
{
    bool first = true;
    const char *k;
    size_t kn;
    char what[64];
    in->dtype = -1;
    while (jcur_member(c, &first, &k, &kn)) {
        if (json_eq(k, kn, "name")) {
            if (!jcur_string(c, &in->name, &in->name_len))
                return false;
        } else if (json_eq(k, kn, "datatype")) {
            const char *s;
            size_t n;
            if (!jcur_string(c, &s, &n))
                return false;
            in->dtype = tx_dtype_parse(s, n);
            if (in->dtype < 0)
                return jcur_fail(c,
                                 "inputs[%d].datatype \"%.*s\" is not "
                                 "supported (FP16, BF16, FP32, FP64, INT8 "
                                 "to INT64 and UINT8 to UINT64 are)",
                                 index, n > 16 ? 16 : (int)n, s);
        } else if (json_eq(k, kn, "shape")) {
            snprintf(what, sizeof what, "inputs[%d].shape", index);
            if (!jcur_shape(c, what, in->shape, &in->rank))
                return false;
            in->has_shape = true;
        } else if (json_eq(k, kn, "parameters")) {
            if (!input_parameters(c, in))
                return false;
        } else if (json_eq(k, kn, "data")) {
            jcur_ws(c);
            in->data = c->p;
            if (!eager_data(c, in, px))
                return false;
            if (!in->parsed && !jcur_skip(c))
                return false;
        } else if (!jcur_skip(c)) {
            return false;
        }
    }
    if (c->failed)
        return false;
    if (in->name == NULL)
        return jcur_fail(c, "inputs[%d] has no name", index);
    if (in->dtype < 0)
        return jcur_fail(c, "input \"%.*s\" has no datatype", (int)in->name_len,
                         in->name);
    if (!in->has_shape)
        return jcur_fail(c, "input \"%.*s\" has no shape", (int)in->name_len,
                         in->name);
    if (in->data != NULL && in->binary)
        return jcur_fail(c,
                         "input \"%.*s\" has both data and "
                         "binary_data_size",
                         (int)in->name_len, in->name);
    if (in->shm.set && (in->data != NULL || in->binary))
        return jcur_fail(c,
                         "input \"%.*s\" names a shared-memory region but "
                         "also has %s",
                         (int)in->name_len, in->name,
                         in->binary ? "binary_data_size" : "data");
    if (!in->shm.set && (in->shm.has_byte_size || in->shm.offset != 0))
        return jcur_fail(c,
                         "input \"%.*s\" has shared_memory_offset or "
                         "shared_memory_byte_size but no "
                         "shared_memory_region",
                         (int)in->name_len, in->name);
    if (in->data == NULL && !in->binary && !in->shm.set)
        return jcur_fail(c,
                         "input \"%.*s\" has neither data nor "
                         "parameters.binary_data_size nor "
                         "parameters.shared_memory_region",
                         (int)in->name_len, in->name);
    return true;
}

/* Request "parameters". */
static bool request_parameters(jcur *c, scan_params *p, kserve_request *r)
{
    bool first = true;
    const char *k;
    size_t kn;
    while (jcur_member(c, &first, &k, &kn)) {
        bool ok = true;
        if (seq_json_param(c, k, kn, "parameters.", &r->seq, &ok)) {
            /* read */
        } else if (json_eq(k, kn, "axis")) {
            ok = jcur_int64(c, "parameters.axis", &p->axis);
            p->has_axis = true;
        } else if (json_eq(k, kn, "exclusive")) {
            ok = jcur_bool(c, "parameters.exclusive", &p->exclusive);
            p->has_exclusive = true;
        } else if (json_eq(k, kn, "reverse")) {
            ok = jcur_bool(c, "parameters.reverse", &p->reverse);
            p->has_reverse = true;
        } else if (json_eq(k, kn, "direction")) {
            const char *s;
            size_t n;
            ok = jcur_string(c, &s, &n);
            if (ok && !json_eq(s, n, "increasing")
                && !json_eq(s, n, "decreasing"))
                return jcur_fail(c, "parameters.direction must be "
                                    "\"increasing\" or \"decreasing\"");
            p->decreasing = ok && s[0] == 'd';
            p->has_direction = true;
        } else if (json_eq(k, kn, "binary_data_output")) {
            ok = jcur_bool(c, "parameters.binary_data_output",
                           &r->binary_output);
        } else if (json_eq(k, kn, "timeout")) {
            ok = jcur_int64(c, "parameters.timeout", &r->timeout_us);
            if (ok && r->timeout_us < 0)
                return jcur_fail(c, "parameters.timeout (microseconds) cannot "
                                    "be negative");
            r->has_timeout = true;
        } else {
            ok = jcur_skip(c);
        }
        if (!ok)
            return false;
    }
    return !c->failed;
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
                bool pfirst = true;
                const char *pk;
                size_t pkn;
                while (jcur_member(c, &pfirst, &pk, &pkn)) {
                    bool taken;
                    if (!shm_parameter(c, pk, pkn, &r->y_shm, &taken))
                        return false;
                    if (taken)
                        continue;
                    if (json_eq(pk, pkn, "binary_data")) {
                        if (!jcur_bool(c, "outputs[].parameters.binary_data",
                                       &r->binary_output))
                            return false;
                    } else if (json_eq(pk, pkn, "classification")) {
                        return jcur_fail(c, "output classification is not "
                                            "supported");
                    } else if (!jcur_skip(c)) {
                        return false;
                    }
                }
                if (c->failed)
                    return false;
            } else if (!jcur_skip(c)) {
                return false;
            }
        }
        if (c->failed)
            return false;
        if (!named)
            return jcur_fail(c, "outputs[%d] has no name", i);
        if (!r->y_shm.set && (r->y_shm.has_byte_size || r->y_shm.offset))
            return jcur_fail(c, "output \"y\" has shared_memory_offset or "
                                "shared_memory_byte_size but no "
                                "shared_memory_region");
        i++;
    }
    return !c->failed;
}

/* The axis input: one INT32 or INT64 element. */
static eng_err axis_value(jcur *c, const input *in, int64_t *axis, char *msg,
                          size_t msglen)
{
    uint64_t count = 1;
    for (int d = 0; d < in->rank; d++)
        if (!eng_mul_u64(count, in->shape[d], &count))
            count = UINT64_MAX;
    if (!scan_axis_input_kind(in->dtype, count, msg, msglen))
        return ENG_E_INVALID;
    if (in->binary)
        return scan_axis_input_raw(in->dtype, in->binary_at, in->binary_size,
                                   "binary_data_size", axis, msg, msglen)
                   ? ENG_E_OK
                   : ENG_E_INVALID;
    int64_t one;
    c->p = in->data;
    uint64_t n = 1;
    if (!jcur_tensor(c, "input \"axis\" data", (tx_dtype)in->dtype, &n, 1, 1,
                     &one))
        return ENG_E_INVALID;
    *axis = scan_axis_value(in->dtype, &one);
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
    int ninputs = 0;
    bool have_inputs = false;
    scan_params p = {0};
    bool first = true;
    const char *k;
    size_t kn;
    while (jcur_member(&c, &first, &k, &kn)) {
        if (json_eq(k, kn, "id")) {
            jcur_ws(&c);
            if (c.p < c.end && *c.p != '"')
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "id must be a string");
            if (!jcur_string(&c, &out->id, &out->id_len))
                return fail_invalid(&c);
            /* it is echoed into the answer, which must be JSON */
            if (tx_utf8_valid(out->id, out->id_len) != out->id_len)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "id must be valid UTF-8");
        } else if (json_eq(k, kn, "parameters")) {
            if (!request_parameters(&c, &p, out))
                return fail_invalid(&c);
        } else if (json_eq(k, kn, "inputs")) {
            bool efirst = true;
            have_inputs = true;
            while (jcur_element(&c, &efirst)) {
                if (ninputs >= MAX_INPUTS)
                    return eng_fail(msg, msglen, ENG_E_INVALID,
                                    "too many inputs (the model takes \"x\" "
                                    "and optionally \"axis\")");
                memset(&inputs[ninputs], 0, sizeof inputs[ninputs]);
                parse_ctx px = {max_bytes, out};
                if (!parse_input(&c, &inputs[ninputs], ninputs, &px))
                    return fail_invalid(&c);
                ninputs++;
            }
            if (c.failed)
                return fail_invalid(&c);
        } else if (json_eq(k, kn, "outputs")) {
            if (!parse_outputs(&c, out))
                return fail_invalid(&c);
        } else if (!jcur_skip(&c)) {
            return fail_invalid(&c);
        }
    }
    if (c.failed)
        return fail_invalid(&c);
    jcur_ws(&c);
    if (c.p != c.end)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        binary ? "the JSON header is longer or shorter than "
                                 "Inference-Header-Content-Length says"
                               : "invalid JSON: text after the object");
    if (!have_inputs)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the request has no \"inputs\"");
    if (!seq_params_check(&out->seq, msg, msglen))
        return ENG_E_INVALID;

    /* place binary tensors and find x and axis */
    uint8_t *at = body + jlen;
    size_t left = len - jlen;
    input *x = NULL, *axis_in = NULL;
    for (int i = 0; i < ninputs; i++) {
        input *in = &inputs[i];
        if (in->binary) {
            if (!binary)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "input \"%.*s\" declares binary_data_size "
                                "but the request has no "
                                "Inference-Header-Content-Length header",
                                (int)in->name_len, in->name);
            if (in->binary_size > left)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "input \"%.*s\" declares %" PRIu64 " bytes "
                                "of binary data but only %zu remain in the "
                                "body",
                                (int)in->name_len, in->name, in->binary_size,
                                left);
            in->binary_at = at;
            at += in->binary_size;
            left -= (size_t)in->binary_size;
        }
        if (json_eq(in->name, in->name_len, "x")) {
            if (x != NULL)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "input \"x\" appears twice");
            x = in;
        } else if (json_eq(in->name, in->name_len, "axis")) {
            if (axis_in != NULL)
                return eng_fail(msg, msglen, ENG_E_INVALID,
                                "input \"axis\" appears twice");
            axis_in = in;
        } else {
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "unknown input \"%.*s\" (the model takes \"x\" "
                            "and optionally \"axis\")",
                            in->name_len > 32 ? 32 : (int)in->name_len,
                            in->name);
        }
    }
    if (binary && left != 0)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "%zu bytes of binary data follow the header but the "
                        "inputs declare none of them",
                        left);
    if (x == NULL)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the request has no input \"x\"");

    if (axis_in != NULL && axis_in->shm.set)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "input \"axis\" cannot come in shared memory: send "
                        "its value in the request, or use parameters.axis");
    if (axis_in != NULL) {
        int64_t a = 0;
        eng_err e = axis_value(&c, axis_in, &a, msg, msglen);
        if (e != ENG_E_OK)
            return e;
        if (!scan_params_axis_input(&p, a, msg, msglen))
            return ENG_E_INVALID;
    }

    out->desc.dtype = (tx_dtype)x->dtype;
    out->desc.rank = x->rank;
    memcpy(out->desc.shape, x->shape, sizeof x->shape);
    if (x->rank == 0)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "input \"x\" has shape [] (rank 0): a cumulative "
                        "sum needs at least one axis");
    if (!scan_params_apply(&p, &out->desc, msg, msglen))
        return ENG_E_INVALID;
    eng_lines l;
    eng_err e = eng_lines_from_desc(&out->desc, &l, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    out->bytes = l.bytes;
    /* the id lives in the JSON text, which the tensor may be moved over */
    if (out->id != NULL) {
        char *id = malloc(out->id_len + 1);
        if (id == NULL)
            return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
        memcpy(id, out->id, out->id_len);
        id[out->id_len] = '\0';
        out->id = id;
        out->id_owned = true;
    }
    if (x->shm.set) {
        out->x_shm = x->shm; /* the API layer finds its bytes */
        return ENG_E_OK;
    }
    if (x->binary) {
        if (x->binary_size != l.bytes) {
            kserve_request_free(out);
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "input \"x\": binary_data_size is %" PRIu64
                            " but shape and datatype need %zu bytes",
                            x->binary_size, l.bytes);
        }
        /* Binary data follows a JSON header of any length. Slide it down
         * to a 128-byte boundary inside the body (over the header, no
         * longer needed) so that it is aligned for the scan, with no copy
         * to another buffer. The body's start is so aligned. */
        size_t off = (size_t)(x->binary_at - body);
        uint8_t *to = body + off / 128 * 128;
        if (to != x->binary_at)
            memmove(to, x->binary_at, l.bytes);
        out->data = to;
        return ENG_E_OK;
    }
    if (x->parsed)
        return ENG_E_OK; /* eager_data() did the rest */
    if (l.bytes > max_bytes) {
        kserve_request_free(out);
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "input \"x\" would take %zu bytes, more than the "
                        "%zu this server accepts",
                        l.bytes, max_bytes);
    }
    out->data = eng_buffer_alloc(l.bytes);
    if (out->data == NULL) {
        kserve_request_free(out);
        return eng_fail(msg, msglen, ENG_E_NOMEM,
                        "out of memory for a %zu-byte tensor", l.bytes);
    }
    out->data_owned = true;
    c.p = x->data;
    if (!jcur_tensor(&c, "input \"x\" data", out->desc.dtype, out->desc.shape,
                     out->desc.rank, l.elements, out->data)) {
        kserve_request_free(out);
        return ENG_E_INVALID;
    }
    return ENG_E_OK;
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

void kserve_request_free(kserve_request *r)
{
    if (r->data_owned)
        eng_buffer_free(r->data);
    if (r->id_owned)
        free((char *)r->id);
    r->data = NULL;
    r->data_owned = false;
    r->id = NULL;
    r->id_owned = false;
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
    if (ok && r->seq.has_chunk) { /* echoed: which chunk this answers */
        char p[64];
        int pn = snprintf(p, sizeof p,
                          ",\"parameters\":{\"sequence_chunk\":%llu}",
                          (unsigned long long)r->seq.chunk);
        ok = json_append(b, n, p, (size_t)pn);
    }
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
    char tail[96];
    int tn =
        snprintf(tail, sizeof tail,
                 ",\"parameters\":{\"binary_data_size\":%zu}}]}", r->bytes);
    if (!output_head(&b, &n, r) || !json_append(&b, &n, tail, (size_t)tn)) {
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
