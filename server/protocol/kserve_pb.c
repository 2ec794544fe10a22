/*
 * kserve_pb.c - ModelInferRequest in, ModelInferResponse out (kserve_pb.h).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "grpc_service.pb-c.h"
#include "kserve_pb.h"
#include "kserve_model.h"
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
    shm_ref shm[MAX_INPUTS]; /* each input's place in shared memory */
    size_t rawof[MAX_INPUTS]; /* its raw entry; SIZE_MAX: none */
} walked;

static void walked_free(walked *w)
{
    for (size_t i = 0; i < w->nparams; i++)
        protobuf_c_message_free_unpacked(&w->params[i]->base, NULL);
    for (size_t i = 0; i < w->ninputs; i++)
        protobuf_c_message_free_unpacked(&w->inputs[i]->base, NULL);
}

/* One of a tensor's shared-memory parameters (k, v) into ref. */
static eng_err shm_parameter(const char *what, const char *k,
                             const Inference__InferParameter *v, shm_ref *ref,
                             char *err, size_t errlen)
{
    int c = v ? (int)v->parameter_choice_case : 0;
    if (strcmp(k, "shared_memory_region") == 0) {
        if (c != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "%s: shared_memory_region must be a string_param",
                        what);
        char why[160];
        if (!shm_ref_region(ref, v->string_param, strlen(v->string_param), why,
                            sizeof why))
            return eng_fail(err, errlen, ENG_E_INVALID, "%s: %s", what, why);
        return ENG_E_OK;
    }
    bool off = strcmp(k, "shared_memory_offset") == 0;
    if (!off && strcmp(k, "shared_memory_byte_size") != 0)
        return ENG_E_OK; /* not one of them */
    uint64_t u;
    if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM
        && v->int64_param >= 0)
        u = (uint64_t)v->int64_param;
    else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
        u = v->uint64_param;
    else
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "%s: %s must be a non-negative int64_param", what, k);
    if (off) {
        ref->offset = u;
    } else {
        ref->byte_size = u;
        ref->has_byte_size = true;
    }
    return ENG_E_OK;
}

/* A tensor's parameters that say where it lies, once all are read. */
static eng_err shm_complete(const char *what, const shm_ref *ref, char *err,
                            size_t errlen)
{
    if (!ref->set && (ref->has_byte_size || ref->offset != 0))
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "%s has shared_memory_offset or shared_memory_byte_size "
                    "but no shared_memory_region",
                    what);
    return ENG_E_OK;
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
    for (size_t i = 0; e == ENG_E_OK && i < o->n_parameters; i++) {
        if (strcmp(o->parameters[i]->key, "classification") == 0)
            e = eng_fail(err, errlen, ENG_E_INVALID,
                     "output classification is not supported");
        else
            e = shm_parameter("output \"y\"", o->parameters[i]->key,
                              o->parameters[i]->value, y, err, errlen);
    }
    if (e == ENG_E_OK)
        e = shm_complete("output \"y\"", y, err, errlen);
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

/* Request parameters into p (and the timeout into out). */
static eng_err parameters(const walked *w, scan_params *p,
                          kserve_pb_request *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < w->nparams; i++) {
        const char *k = w->params[i]->key;
        const Inference__InferParameter *v = w->params[i]->value;
        int c = v ? (int)v->parameter_choice_case : 0;
        bool is_bool =
            c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        bool is_int =
            c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM
            || c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
        int64_t iv = 0;
        if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
            iv = v->int64_param;
        else if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
            iv = v->uint64_param > INT64_MAX ? INT64_MAX
                                             : (int64_t)v->uint64_param;
        if (strcmp(k, "sequence_id") == 0) {
            char msg[256];
            bool ok;
            if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
                ok = seq_id_string(&out->seq, v->string_param,
                                   strlen(v->string_param), msg, sizeof msg);
            else if (c
                     == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
                ok = seq_id_number(&out->seq, v->uint64_param, msg, sizeof msg);
            else if (c
                     == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM
                     && v->int64_param >= 0)
                ok = seq_id_number(&out->seq, (uint64_t)v->int64_param, msg,
                                   sizeof msg);
            else
                return eng_fail(err, errlen, ENG_E_INVALID,
                                "parameter sequence_id must be a "
                                "uint64_param, a non-negative int64_param "
                                "or a string_param");
            if (!ok)
                return eng_fail(err, errlen, ENG_E_INVALID, "%s", msg);
        } else if (strcmp(k, "sequence_chunk") == 0) {
            char msg[256];
            uint64_t n;
            if (c == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
                n = v->uint64_param;
            else if (c
                     == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM
                     && v->int64_param >= 0)
                n = (uint64_t)v->int64_param;
            else
                return eng_fail(err, errlen, ENG_E_INVALID,
                                "parameter sequence_chunk must be a "
                                "uint64_param or a non-negative "
                                "int64_param");
            if (!seq_chunk_number(&out->seq, n, msg, sizeof msg))
                return eng_fail(err, errlen, ENG_E_INVALID, "%s", msg);
        } else if (strcmp(k, "sequence_start") == 0
                   || strcmp(k, "sequence_end") == 0) {
            if (!is_bool)
                return eng_fail(err, errlen, ENG_E_INVALID,
                                "parameter %s must be a bool_param", k);
            if (k[9] == 's')
                out->seq.start = v->bool_param;
            else
                out->seq.end = v->bool_param;
            out->seq.has_flags = true;
        } else if (strcmp(k, "axis") == 0) {
            if (!is_int)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "parameter axis must be an int64_param");
            p->axis = iv;
            p->has_axis = true;
        } else if (strcmp(k, "exclusive") == 0 || strcmp(k, "reverse") == 0) {
            if (!is_bool)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "parameter %s must be a bool_param", k);
            if (k[0] == 'e') {
                p->exclusive = v->bool_param;
                p->has_exclusive = true;
            } else {
                p->reverse = v->bool_param;
                p->has_reverse = true;
            }
        } else if (strcmp(k, "direction") == 0) {
            if (c != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM
                || (strcmp(v->string_param, "increasing") != 0
                    && strcmp(v->string_param, "decreasing") != 0))
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "parameter direction must be the string "
                            "\"increasing\" or \"decreasing\"");
            p->decreasing = v->string_param[0] == 'd';
            p->has_direction = true;
        } else if (strcmp(k, "timeout") == 0) {
            if (!is_int || iv < 0)
                return eng_fail(err, errlen, ENG_E_INVALID,
                            "parameter timeout must be a non-negative "
                            "int64_param (microseconds)");
            out->has_timeout = true;
            out->timeout_us = iv;
        }
        /* others (binary_data_output, priority...) are not tally's and
         * are ignored, as REST ignores them */
    }
    char msg[160];
    if (!seq_params_check(&out->seq, msg, sizeof msg))
        return eng_fail(err, errlen, ENG_E_INVALID, "%s", msg);
    return ENG_E_OK;
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

/* The "axis" input: one INT32 or INT64 element, raw or typed. */
static eng_err axis_input(const input_pb *in, const pb_span *raw,
                          int64_t *axis, char *err, size_t errlen)
{
    int dt;
    uint64_t shape[ENG_MAX_RANK], elements;
    int rank;
    eng_err e = input_desc(in, &dt, shape, &rank, &elements, err, errlen);
    if (e != ENG_E_OK)
        return e;
    if (!scan_axis_input_kind(dt, elements, err, errlen))
        return ENG_E_INVALID;
    if (raw != NULL)
        return scan_axis_input_raw(dt, raw->p, raw->len, "raw_input_contents",
                                   axis, err, errlen)
                   ? ENG_E_OK
                   : ENG_E_INVALID;
    int64_t one;
    e = typed_contents(in, (tx_dtype)dt, 1, &one, err, errlen);
    if (e == ENG_E_OK)
        *axis = scan_axis_value(dt, &one);
    return e;
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

/* Finds x and axis, their places in shared memory, and the raw entries
 * of the others when the request has raw contents (one entry per input
 * not in shared memory, in input order). */
static eng_err find_inputs(walked *w, size_t *x, size_t *axis, char *err,
                           size_t errlen)
{
    *x = *axis = SIZE_MAX;
    if (w->ninputs == 0)
        return eng_fail(err, errlen, ENG_E_INVALID,
                        "the request has no inputs");
    size_t with_data = 0;
    for (size_t i = 0; i < w->ninputs; i++) {
        const input_pb *in = w->inputs[i];
        char what[48];
        snprintf(what, sizeof what, "input \"%.32s\"",
                 tx_utf8_valid(in->name, strlen(in->name)) == strlen(in->name)
                     ? in->name
                     : "(not UTF-8)");
        for (size_t k = 0; k < in->n_parameters; k++) {
            eng_err e = shm_parameter(what, in->parameters[k]->key,
                                      in->parameters[k]->value, &w->shm[i],
                                      err, errlen);
            if (e != ENG_E_OK)
                return e;
        }
        eng_err e = shm_complete(what, &w->shm[i], err, errlen);
        if (e != ENG_E_OK)
            return e;
        w->rawof[i] = SIZE_MAX;
        if (!w->shm[i].set)
            w->rawof[i] = with_data++;
    }
    if (w->nraw != 0 && w->nraw != with_data)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "the request has %zu inputs with data but %zu "
                    "raw_input_contents entries: raw contents must be given "
                    "for every input not in shared memory, or for none",
                    with_data, w->nraw);
    if (w->nraw == 0)
        for (size_t i = 0; i < w->ninputs; i++)
            w->rawof[i] = SIZE_MAX;
    for (size_t i = 0; i < w->ninputs; i++) {
        const char *name = w->inputs[i]->name;
        size_t *which = strcmp(name, "x") == 0      ? x
                        : strcmp(name, "axis") == 0 ? axis
                                                    : NULL;
        if (which == NULL)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "unknown input \"%.32s\" (the model takes \"x\" and "
                        "optionally \"axis\")",
                        tx_utf8_valid(name, strlen(name)) == strlen(name)
                            ? name
                            : "(not UTF-8)");
        if (*which != SIZE_MAX)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "input \"%s\" appears twice", name);
        *which = i;
        bool raw = w->rawof[i] != SIZE_MAX;
        bool typed = w->inputs[i]->contents != NULL;
        if (w->shm[i].set && typed)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "input \"%s\" names a shared-memory region but "
                        "also has contents",
                        name);
        if (w->shm[i].set)
            continue;
        if (raw && typed)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "input \"%s\" has both contents and "
                        "raw_input_contents",
                        name);
        if (!raw && !typed)
            return eng_fail(err, errlen, ENG_E_INVALID,
                        "input \"%s\" has no data: neither contents nor "
                        "raw_input_contents nor a shared-memory region",
                        name);
    }
    if (*x == SIZE_MAX)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "the request has no input \"x\"");
    if (*axis != SIZE_MAX && w->shm[*axis].set)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "input \"axis\" cannot come in shared memory: send its "
                    "value in the request, or use the parameter axis");
    return ENG_E_OK;
}

static eng_err parse(uint8_t *msg, size_t len, size_t max_bytes, walked *w,
                     kserve_pb_request *out, bool *not_found, char *err,
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

    size_t xi, ai;
    if ((e = find_inputs(w, &xi, &ai, err, errlen)) != ENG_E_OK)
        return e;
    scan_params p = {0};
    if ((e = parameters(w, &p, out, err, errlen)) != ENG_E_OK)
        return e;
    if (ai != SIZE_MAX) {
        int64_t a = 0;
        e = axis_input(w->inputs[ai],
                       w->rawof[ai] != SIZE_MAX ? &w->raw[w->rawof[ai]] : NULL,
                       &a, err, errlen);
        if (e != ENG_E_OK)
            return e;
        if (!scan_params_axis_input(&p, a, err, errlen))
            return ENG_E_INVALID;
    }

    const input_pb *x = w->inputs[xi];
    int dt, rank;
    uint64_t elements;
    e = input_desc(x, &dt, out->desc.shape, &rank, &elements, err, errlen);
    if (e != ENG_E_OK)
        return e;
    out->desc.dtype = (tx_dtype)dt;
    out->desc.rank = rank;
    if (rank == 0)
        return eng_fail(err, errlen, ENG_E_RANK,
                    "input \"x\" has shape [] (rank 0): a cumulative sum "
                    "needs at least one axis");
    if (!scan_params_apply(&p, &out->desc, err, errlen))
        return ENG_E_INVALID;
    eng_lines l;
    if ((e = eng_lines_from_desc(&out->desc, &l, err, errlen)) != ENG_E_OK)
        return e;
    out->bytes = l.bytes;

    if (w->shm[xi].set) {
        out->x_shm = w->shm[xi]; /* the API layer finds its bytes */
        return ENG_E_OK;
    }
    if (w->rawof[xi] == SIZE_MAX) {
        if (l.bytes > max_bytes)
            return eng_fail(err, errlen, ENG_E_TOO_LARGE,
                        "input \"x\" would take %zu bytes, more than the %zu "
                        "this server accepts",
                        l.bytes, max_bytes);
        out->data = eng_buffer_alloc(l.bytes);
        if (out->data == NULL)
            return eng_fail(err, errlen, ENG_E_NOMEM,
                        "out of memory for a %zu-byte tensor", l.bytes);
        out->data_owned = true;
        return typed_contents(x, (tx_dtype)dt, elements, out->data, err,
                              errlen);
    }
    const pb_span *raw = &w->raw[w->rawof[xi]];
    if (raw->len != l.bytes)
        return eng_fail(err, errlen, ENG_E_INVALID,
                    "input \"x\": raw_input_contents has %zu bytes, but "
                    "shape and datatype need %zu",
                    raw->len, l.bytes);
    /* Moved down to a 128-byte boundary over the fields before it (all
     * read by now) when it is not on one and there is room. */
    uint8_t *at = (uint8_t *)raw->p;
    uint8_t *to = (uint8_t *)((uintptr_t)at & ~(uintptr_t)127);
    if (to != at && to >= msg) {
        memmove(to, at, l.bytes);
        at = to;
    }
    out->data = at;
    return ENG_E_OK;
}

eng_err kserve_pb_parse(uint8_t *msg, size_t len, size_t max_bytes,
                       kserve_pb_request *out, bool *not_found, char *err,
                       size_t errlen)
{
    walked w;
    memset(&w, 0, sizeof w);
    memset(out, 0, sizeof *out);
    *not_found = false;
    eng_err e = parse(msg, len, max_bytes, &w, out, not_found, err, errlen);
    walked_free(&w);
    if (e != ENG_E_OK)
        kserve_pb_request_free(out);
    return e;
}

void kserve_pb_request_free(kserve_pb_request *r)
{
    if (r->data_owned)
        eng_buffer_free(r->data);
    free(r->id);
    r->data = NULL;
    r->id = NULL;
    r->data_owned = false;
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
static uint8_t *head(const kserve_pb_request *r, bool stream, size_t *len)
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

uint8_t *kserve_pb_head(const kserve_pb_request *r, size_t *len)
{
    return head(r, false, len);
}

uint8_t *kserve_pb_stream_head(const kserve_pb_request *r, size_t *len)
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
