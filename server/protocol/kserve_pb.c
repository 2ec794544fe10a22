/*
 * kserve_pb.c - ModelInferRequest in, ModelInferResponse out (kserve_pb.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "kserve_pb.h"
#include "scan_params.h"
#include "pbwire.h"
#include "tx_utf8.h"

#define MAX_INPUTS 8

/* Request field numbers (proto/grpc_service.proto). */
enum {
    F_MODEL_NAME = 1,
    F_MODEL_VERSION = 2,
    F_ID = 3,
    F_PARAMETERS = 4,
    F_INPUTS = 5,
    F_OUTPUTS = 6,
    F_RAW_INPUT = 7
};

typedef Inference__ModelInferRequest__InferInputTensor input_pb;
typedef Inference__ModelInferRequest__InferRequestedOutputTensor output_pb;
typedef Inference__ModelInferRequest__ParametersEntry param_pb;

typedef struct {
    pb_span model, version, id;
    param_pb *params[16];
    size_t nparams;
    input_pb *inputs[MAX_INPUTS];
    size_t ninputs;
    pb_span raw[MAX_INPUTS];
    size_t nraw;
} walked;

static void walked_free(walked *w)
{
    for (size_t i = 0; i < w->nparams; i++)
        protobuf_c_message_free_unpacked(&w->params[i]->base, NULL);
    for (size_t i = 0; i < w->ninputs; i++)
        protobuf_c_message_free_unpacked(&w->inputs[i]->base, NULL);
}

/* A parameter's value as the table's kind says, in protobuf's terms: a
 * bool_param; an int64_param or a uint64_param (an integer, a count
 * when not negative); a string_param (a string; or an id). False with a
 * message naming `what` and the kinds it takes. */
static bool read_value(const Inference__InferParameter *v, kserve_kind kind,
                       const char *what, kserve_value *out, char *err,
                       size_t errlen)
{
    int c = v ? (int)v->parameter_choice_case : 0;
    bool i64 = c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    bool u64 = c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
    bool str = c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    bool count = u64 || (i64 && v->int64_param >= 0);
    const char *takes = NULL;
    switch (kind) {
    case KP_BOOL:
        if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            out->b = v->bool_param;
        else
            takes = "a bool_param";
        break;
    case KP_INT:
        if (i64)
            out->i = v->int64_param;
        else if (u64)
            out->i = v->uint64_param > INT64_MAX ? INT64_MAX
                                                 : (int64_t)v->uint64_param;
        else
            takes = "an int64_param";
        break;
    case KP_COUNT:
    case KP_ID:
        if (count)
            out->u = u64 ? v->uint64_param : (uint64_t)v->int64_param;
        else if (!(str && kind == KP_ID))
            takes = kind == KP_ID ? "a uint64_param, a non-negative "
                                    "int64_param or a string_param"
                                  : "a uint64_param or a non-negative "
                                    "int64_param";
        if (takes != NULL || count)
            break;
        /* an id given as a string */
        /* fall through */
    case KP_STRING:
        if (str) {
            out->s = v->string_param;
            out->n = strlen(v->string_param);
        } else {
            takes = "a string_param";
        }
        break;
    }
    if (takes == NULL)
        return true;
    return msg_fail(err, errlen, "%s must be %s", what, takes);
}

/* One of a tensor's parameters (k, v): the shared-memory ones into ref;
 * the others ignored. `kind_of` and tname name the tensor in messages
 * ("input", "x"), written out only for a shared-memory parameter. */
static bool tensor_param(const char *k, const Inference__InferParameter *v,
                         const char *kind_of, const char *tname, shm_ref *ref,
                         char *err, size_t errlen)
{
    kserve_kind kind;
    size_t kn = strlen(k);
    if (!kserve_shm_param(k, kn, &kind))
        return true;
    char what[48], name[80];
    size_t tn = strlen(tname);
    snprintf(what, sizeof what, "%s \"%.32s\"", kind_of,
             tx_utf8_valid(tname, tn) == tn ? tname : "(not UTF-8)");
    snprintf(name, sizeof name, "%s: %s", what, k);
    kserve_value val = {0};
    return read_value(v, kind, name, &val, err, errlen)
           && kserve_shm_set(ref, k, kn, &val, what, err, errlen);
}

/* An output request: only "y" exists. */
static eng_err check_output(pb_span s, shm_ref *y, char *err, size_t errlen)
{
    output_pb *o = (output_pb *)protobuf_c_message_unpack(
        &inference__model_infer_request__infer_requested_output_tensor__descriptor,
        NULL, s.len, s.p);
    if (o == NULL)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "outputs: not a valid InferRequestedOutputTensor");
    eng_err e = ENG_E_OK;
    if (strcmp(o->name, "y") != 0)
        e = eng_fail(err, errlen, ENG_E_INVALID,
                 "unknown output \"%.32s\" (the model has one output, \"y\")",
                 tx_utf8_valid(o->name, strlen(o->name)) == strlen(o->name)
                     ? o->name
                     : "(not UTF-8)");
    for (size_t i = 0; e == ENG_E_OK && i < o->n_parameters; i++)
        if (strcmp(o->parameters[i]->key, "classification") == 0)
            e = eng_fail(err, errlen, ENG_E_INVALID,
                         "output classification is not supported");
        else if (!tensor_param(o->parameters[i]->key, o->parameters[i]->value,
                               "output", "y", y, err, errlen))
            e = ENG_E_INVALID;
    if (e == ENG_E_OK && !kserve_shm_complete(y, "output \"y\"", err, errlen))
        e = ENG_E_INVALID;
    protobuf_c_message_free_unpacked(&o->base, NULL);
    return e;
}
/* The top-level fields, with nested messages unpacked. */
static eng_err walk(const uint8_t *msg, size_t len, walked *w, shm_ref *y,
                    char *err, size_t errlen)
{
    pb_reader r = {msg, msg + len};
    pb_field f;
    int st;
    while ((st = pb_next(&r, &f)) > 0) {
        if (f.type != PB_LEN)
            continue; /* every field tally reads is length-delimited */
        switch (f.number) {
        case F_MODEL_NAME: w->model = f.span; break;
        case F_MODEL_VERSION: w->version = f.span; break;
        case F_ID: w->id = f.span; break;
        case F_PARAMETERS:
            if (w->nparams == sizeof w->params / sizeof w->params[0])
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "too many request parameters (at most 16)");
            w->params[w->nparams] = (param_pb *)protobuf_c_message_unpack(
                &inference__model_infer_request__parameters_entry__descriptor,
                NULL, f.span.len, f.span.p);
            if (w->params[w->nparams] == NULL)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "parameters: not a valid map entry");
            w->nparams++;
            break;
        case F_INPUTS:
            if (w->ninputs == MAX_INPUTS)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "too many inputs (the model takes \"x\" and "
                            "optionally \"axis\")");
            w->inputs[w->ninputs] = (input_pb *)protobuf_c_message_unpack(
                &inference__model_infer_request__infer_input_tensor__descriptor,
                NULL, f.span.len, f.span.p);
            if (w->inputs[w->ninputs] == NULL)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "inputs[%zu]: not a valid InferInputTensor",
                            w->ninputs);
            w->ninputs++;
            break;
        case F_OUTPUTS: {
            eng_err e = check_output(f.span, y, err, errlen);
            if (e != ENG_E_OK)
                return e;
            break;
        }
        case F_RAW_INPUT:
            if (w->nraw == MAX_INPUTS)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "too many raw_input_contents entries");
            w->raw[w->nraw++] = f.span;
            break;
        default: break;
        }
    }
    if (st < 0)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "the message is not a valid ModelInferRequest (bad "
                    "protobuf wire format at byte %zu)",
                    (size_t)(r.p - msg));
    return ENG_E_OK;
}

/* Request parameters, by the table, into r and p. */
static bool parameters(const walked *w, scan_params *p, kserve_request *r,
                       char *err, size_t errlen)
{
    for (size_t i = 0; i < w->nparams; i++) {
        const char *k = w->params[i]->key;
        const kserve_param *q = kserve_param_find(k, strlen(k));
        if (q == NULL)
            continue; /* not tally's (priority...): ignored, as REST does */
        kserve_value v = {0};
        if (!read_value(w->params[i]->value, q->kind, q->in_pb, &v, err,
                        errlen)
            || !kserve_param_set(q, &v, r, p, "parameter ", err, errlen))
            return false;
    }
    return true;
}

/* The input's datatype and shape, checked. */
static eng_err input_desc(const input_pb *in, int *dtype, uint64_t *shape,
                          int *rank, uint64_t *elements, char *err,
                          size_t errlen)
{
    *dtype = tx_dtype_parse(in->datatype, strlen(in->datatype));
    if (*dtype < 0)
        return eng_fail(err, errlen, ENG_E_DTYPE,
                    "input \"%.32s\": datatype \"%.16s\" is not supported "
                    "(FP16, BF16, FP32, FP64, INT8 to INT64 and UINT8 to "
                    "UINT64 are)",
                    in->name, in->datatype);
    if (in->n_shape > ENG_MAX_RANK)
        return eng_fail(err, errlen, ENG_E_RANK,
                    "input \"%.32s\" has rank %zu, more than %d", in->name,
                    in->n_shape, ENG_MAX_RANK);
    *rank = (int)in->n_shape;
    *elements = 1;
    for (size_t d = 0; d < in->n_shape; d++) {
        if (in->shape[d] < 0)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "input \"%.32s\": shape[%zu] is %" PRId64
                        ", and dimensions cannot be negative",
                        in->name, d, in->shape[d]);
        shape[d] = (uint64_t)in->shape[d];
        if (!eng_mul_u64(*elements, shape[d], elements))
            return eng_fail(err, errlen, ENG_E_TOO_LARGE,
                        "input \"%.32s\": the shape's element count "
                        "overflows",
                        in->name);
    }
    return ENG_E_OK;
}

/* Typed contents into dst (elements of dtype); the count must match. */
static eng_err typed_contents(const input_pb *in, tx_dtype dt,
                              uint64_t elements, void *dst, char *err,
                              size_t errlen)
{
    const Inference__InferTensorContents *c = in->contents;
    size_t n = 0;
    const char *field = "";
    switch (dt) {
    case TX_FLOAT32: n = c->n_fp32_contents; field = "fp32_contents"; break;
    case TX_FLOAT64: n = c->n_fp64_contents; field = "fp64_contents"; break;
    case TX_INT8:
    case TX_INT16:
    case TX_INT32: n = c->n_int_contents; field = "int_contents"; break;
    case TX_INT64: n = c->n_int64_contents; field = "int64_contents"; break;
    case TX_UINT8:
    case TX_UINT16:
    case TX_UINT32: n = c->n_uint_contents; field = "uint_contents"; break;
    case TX_UINT64: n = c->n_uint64_contents; field = "uint64_contents"; break;
    default:
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "input \"%.32s\": %s tensors have no typed contents "
                    "field; send them in raw_input_contents",
                    in->name, tx_dtype_kserve(dt));
    }
    if (n != elements)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "input \"%.32s\": contents.%s has %zu elements, but the "
                    "shape needs %" PRIu64,
                    in->name, field, n, elements);
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case TX_FLOAT32: ((float *)dst)[i] = c->fp32_contents[i]; break;
        case TX_FLOAT64: ((double *)dst)[i] = c->fp64_contents[i]; break;
        case TX_INT64: ((int64_t *)dst)[i] = c->int64_contents[i]; break;
        case TX_UINT64: ((uint64_t *)dst)[i] = c->uint64_contents[i]; break;
        case TX_INT32: ((int32_t *)dst)[i] = c->int_contents[i]; break;
        case TX_UINT32: ((uint32_t *)dst)[i] = c->uint_contents[i]; break;
        case TX_INT8:
        case TX_INT16: {
            int32_t v = c->int_contents[i];
            int32_t lo = dt == TX_INT8 ? INT8_MIN : INT16_MIN;
            int32_t hi = dt == TX_INT8 ? INT8_MAX : INT16_MAX;
            if (v < lo || v > hi)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "input \"%.32s\": int_contents[%zu] = %" PRId32
                            " does not fit in %s",
                            in->name, i, v, tx_dtype_kserve(dt));
            if (dt == TX_INT8)
                ((int8_t *)dst)[i] = (int8_t)v;
            else
                ((int16_t *)dst)[i] = (int16_t)v;
            break;
        }
        default: { /* UINT8, UINT16 */
            uint32_t v = c->uint_contents[i];
            uint32_t hi = dt == TX_UINT8 ? UINT8_MAX : UINT16_MAX;
            if (v > hi)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "input \"%.32s\": uint_contents[%zu] = %" PRIu32
                            " does not fit in %s",
                            in->name, i, v, tx_dtype_kserve(dt));
            if (dt == TX_UINT8)
                ((uint8_t *)dst)[i] = (uint8_t)v;
            else
                ((uint16_t *)dst)[i] = (uint16_t)v;
            break;
        }
        }
    }
    return ENG_E_OK;
}

static eng_err check_model(const walked *w, bool *not_found, char *err,
                           size_t errlen)
{
    if (w->model.len != strlen(KSERVE_MODEL)
        || memcmp(w->model.p, KSERVE_MODEL, w->model.len) != 0) {
        *not_found = true;
        bool text = tx_utf8_valid((const char *)w->model.p, w->model.len)
                    == w->model.len;
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "unknown model \"%.*s\" (this server has one model, "
                    "\"" KSERVE_MODEL "\")",
                    text ? (int)(w->model.len > 64 ? 64 : w->model.len) : 0,
                    (const char *)w->model.p);
    }
    if (w->version.len != 0
        && (w->version.len != strlen(KSERVE_VERSION)
            || memcmp(w->version.p, KSERVE_VERSION, w->version.len) != 0)) {
        *not_found = true;
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "model \"" KSERVE_MODEL "\" has no version \"%.*s\" "
                    "(it has version \"" KSERVE_VERSION "\")",
                    tx_utf8_valid((const char *)w->version.p, w->version.len)
                            == w->version.len
                        ? (int)(w->version.len > 32 ? 32 : w->version.len)
                        : 0,
                    (const char *)w->version.p);
    }
    return ENG_E_OK;
}

static bool decode(const kserve_input *in, uint64_t elements, void *dst,
                   char *err, size_t errlen)
{
    return typed_contents(in->typed, in->dtype, elements, dst, err,
                          errlen) == ENG_E_OK;
}

static const kserve_codec pb_codec = {
    .typed_name = "contents",
    .raw_name = "raw_input_contents",
    .raw_field = "raw_input_contents",
    .param_where = "the parameter ",
    .decode = decode,
};

/* The inputs as the model's rules take them: datatype, shape, place in
 * shared memory, and data (raw contents are one entry for each input not
 * in shared memory, in input order, or none at all). */
static eng_err inputs(const walked *w, kserve_input *in, char *err,
                      size_t errlen)
{
    if (w->ninputs == 0)
        return eng_fail(err, errlen, ENG_E_INVALID,
                        "the request has no inputs");
    size_t with_data = 0;
    for (size_t i = 0; i < w->ninputs; i++) {
        const input_pb *p = w->inputs[i];
        int dt;
        uint64_t elements;
        eng_err e = input_desc(p, &dt, in[i].shape, &in[i].rank, &elements,
                               err, errlen);
        if (e != ENG_E_OK)
            return e;
        in[i].name = p->name;
        in[i].name_len = strlen(p->name);
        in[i].dtype = (tx_dtype)dt;
        in[i].has_typed = p->contents != NULL;
        in[i].typed = p;
        for (size_t k = 0; k < p->n_parameters; k++)
            if (!tensor_param(p->parameters[k]->key, p->parameters[k]->value,
                              "input", p->name, &in[i].shm, err, errlen))
                return ENG_E_INVALID;
        if (!in[i].shm.set)
            with_data++;
    }
    if (w->nraw != 0 && w->nraw != with_data)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "the request has %zu inputs with data but %zu "
                    "raw_input_contents entries: raw contents must be given "
                    "for every input not in shared memory, or for none",
                    with_data, w->nraw);
    for (size_t i = 0, r = 0; w->nraw != 0 && i < w->ninputs; i++)
        if (!in[i].shm.set) {
            in[i].has_raw = true;
            in[i].raw = w->raw[r].p;
            in[i].raw_len = w->raw[r++].len;
        }
    return ENG_E_OK;
}

static eng_err parse(uint8_t *msg, size_t len, size_t max_bytes, walked *w,
                     kserve_request *out, bool *not_found, char *err,
                     size_t errlen)
{
    eng_err e = walk(msg, len, w, &out->y_shm, err, errlen);
    /* absent strings are empty ones */
    static const uint8_t empty[1] = {0};
    pb_span *strings[] = {&w->model, &w->version, &w->id};
    for (size_t i = 0; i < 3; i++)
        if (strings[i]->p == NULL)
            strings[i]->p = empty;
    if (e == ENG_E_OK)
        e = check_model(w, not_found, err, errlen);
    if (e != ENG_E_OK)
        return e;
    if (tx_utf8_valid((const char *)w->id.p, w->id.len) != w->id.len)
        return eng_fail(err, errlen, ENG_E_INVALID, "id must be valid UTF-8");
    out->id = malloc(w->id.len + 1);
    if (out->id == NULL)
        return eng_fail(err, errlen, ENG_E_NOMEM, "out of memory");
    memcpy(out->id, w->id.p, w->id.len);
    out->id[w->id.len] = '\0';
    out->id_len = w->id.len;

    kserve_input in[MAX_INPUTS];
    memset(in, 0, sizeof in);
    scan_params p = {0};
    if ((e = inputs(w, in, err, errlen)) != ENG_E_OK)
        return e;
    if (!parameters(w, &p, out, err, errlen))
        return ENG_E_INVALID;
    return kserve_request_finish(out, in, w->ninputs, &p, &pb_codec, msg,
                                 max_bytes, err, errlen);
}

eng_err kserve_pb_parse(uint8_t *msg, size_t len, size_t max_bytes,
                       kserve_request *out, bool *not_found, char *err,
                       size_t errlen)
{
    walked w;
    memset(&w, 0, sizeof w);
    memset(out, 0, sizeof *out);
    *not_found = false;
    eng_err e = parse(msg, len, max_bytes, &w, out, not_found, err, errlen);
    walked_free(&w);
    if (e != ENG_E_OK)
        kserve_request_free(out);
    return e;
}

size_t kserve_pb_bulk_offset(const uint8_t *prefix, size_t n)
{
    pb_reader r = {prefix, prefix + n};
    size_t at = SIZE_MAX;
    pb_field f;
    for (;;) {
        int st = pb_next_header(&r, &f);
        if (st <= 0)
            return at;
        if (f.number == F_RAW_INPUT && f.type == PB_LEN)
            at = (size_t)(r.p - prefix); /* where its bytes begin */
        if (!pb_skip_value(&r, &f))
            return at; /* the field runs past the prefix */
    }
}

/* The response, less y's bytes, packed once by protobuf-c; then field 6's
 * tag and length, so that y's bytes follow as raw_output_contents (not
 * when y is in shared memory: that entry is empty, and y's says where
 * the data went). With
 * `stream`, all of it is wrapped as a ModelStreamInferResponse's field 2,
 * whose length (fields, tag, length and y) is known before packing. */
static uint8_t *head(const kserve_request *r, bool stream, size_t *len)
{
    Inference__ModelInferResponse m = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    Inference__ModelInferResponse__InferOutputTensor y =
        INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    Inference__ModelInferResponse__InferOutputTensor *outs[1] = {&y};
    int64_t shape[ENG_MAX_RANK];
    m.model_name = (char *)KSERVE_MODEL;
    m.model_version = (char *)KSERVE_VERSION;
    m.id = r->id ? r->id : (char *)"";
    y.name = (char *)"y";
    y.datatype = (char *)tx_dtype_kserve(r->desc.dtype);
    for (int d = 0; d < r->desc.rank; d++)
        shape[d] = (int64_t)r->desc.shape[d];
    y.n_shape = (size_t)r->desc.rank;
    y.shape = shape;
    m.n_outputs = 1;
    m.outputs = outs;
    /* the chunk number, echoed */
    Inference__ModelInferResponse__ParametersEntry ce =
        INFERENCE__MODEL_INFER_RESPONSE__PARAMETERS_ENTRY__INIT;
    Inference__ModelInferResponse__ParametersEntry *cep[1] = {&ce};
    Inference__InferParameter cv = INFERENCE__INFER_PARAMETER__INIT;
    if (r->seq.has_chunk) {
        ce.key = (char *)"sequence_chunk";
        ce.value = &cv;
        cv.parameter_choice_case =
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
        cv.uint64_param = r->seq.chunk;
        m.n_parameters = 1;
        m.parameters = cep;
    }

    bool in_shm = r->y_shm.set;
    typedef Inference__ModelInferResponse__InferOutputTensor__ParametersEntry
        entry;
    entry e[3];
    entry *ep[3] = {&e[0], &e[1], &e[2]};
    Inference__InferParameter v[3];
    if (in_shm) {
        static const char *const keys[3] = {"shared_memory_region",
                                            "shared_memory_byte_size",
                                            "shared_memory_offset"};
        for (int i = 0; i < 3; i++) {
            entry z =
                INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__PARAMETERS_ENTRY__INIT;
            Inference__InferParameter pz = INFERENCE__INFER_PARAMETER__INIT;
            e[i] = z;
            v[i] = pz;
            e[i].key = (char *)keys[i];
            e[i].value = &v[i];
        }
        v[0].parameter_choice_case =
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        v[0].string_param = (char *)r->y_shm.region;
        v[1].parameter_choice_case =
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        v[1].int64_param = (int64_t)r->bytes;
        v[2].parameter_choice_case =
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        v[2].int64_param = (int64_t)r->y_shm.offset;
        y.n_parameters = r->y_shm.offset ? 3 : 2;
        y.parameters = ep;
    }
    size_t body = protobuf_c_message_get_packed_size(&m.base);
    /* y in shared memory still has its raw_output_contents entry, empty:
     * Triton's C++ client (perf_analyzer's) indexes the entries by
     * output */
    size_t tail = 1 + pb_varint_size(in_shm ? 0 : r->bytes);
    uint64_t whole = (uint64_t)body + tail + (in_shm ? 0 : r->bytes);
    size_t room = stream ? 1 + pb_varint_size(whole) : 0;
    uint8_t *b = malloc(room + body + tail);
    if (b == NULL)
        return NULL;
    uint8_t *p = b;
    if (stream) {
        *p++ = (uint8_t)(2 << 3 | PB_LEN); /* infer_response */
        p += pb_put_varint(p, whole);
    }
    p += protobuf_c_message_pack(&m.base, p);
    *p++ = (uint8_t)(6 << 3 | PB_LEN); /* raw_output_contents */
    p += pb_put_varint(p, in_shm ? 0 : r->bytes);
    *len = (size_t)(p - b);
    return b;
}

uint8_t *kserve_pb_head(const kserve_request *r, size_t *len)
{
    return head(r, false, len);
}

uint8_t *kserve_pb_stream_head(const kserve_request *r, size_t *len)
{
    return head(r, true, len);
}

uint8_t *kserve_pb_stream_error(const char *message, size_t *len)
{
    Inference__ModelStreamInferResponse m =
        INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    m.error_message = (char *)message;
    *len = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b != NULL)
        protobuf_c_message_pack(&m.base, b);
    return b;
}
