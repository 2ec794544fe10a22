/*
 * test_protocol.c - server/protocol/ on its own, case by case: the
 * operator's parameters as every protocol reads them (scan_params), the
 * shared-memory register body and status answer (shm_json), Triton's
 * trace settings (trace_settings), KServe's protobuf request and answer
 * (kserve_pb: messages packed and unpacked with protobuf-c's generated
 * code, as a gRPC client would) and DirectML's operator description
 * (dml), the native API's requests (native) and KServe's JSON ones
 * (kserve_json). No daemon, no transport; the integration suite sends the same
 * documents through the doors. Tensors are drawn with check_rand() (its
 * seed is printed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "check.h"
#include "dml.h"
#include "grpc_service.pb-c.h"
#include "kserve_json.h"
#include "kserve_pb.h"
#include "native.h"
#include "scan_params.h"
#include "shm.h"
#include "shm_json.h"
#include "trace_settings.h"

/* ------------------------------------------------------------------------
 * scan_params: the text forms (query parameters, headers)
 */
static void text_values(void)
{
    char msg[256];
    bool b;
    static const struct {
        const char *text;
        bool ok, value;
    } bools[] = {{"true", true, true},   {"1", true, true},
                 {"false", true, false}, {"0", true, false},
                 {"yes", false, false},  {"", false, false},
                 {"TRUE", false, false}, {"true ", false, false}};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        b = !bools[i].value;
        msg[0] = '\0';
        bool ok = parse_bool_text("exclusive", bools[i].text, &b, msg, sizeof msg);
        CHECK(ok == bools[i].ok && (!ok || b == bools[i].value),
              "bool \"%s\": %d %d", bools[i].text, ok, b);
        CHECK(ok || strstr(msg, "exclusive must be true or false") != NULL,
              "bool \"%s\": its message names the parameter: %s", bools[i].text,
              msg);
    }
    static const struct {
        const char *text;
        bool ok;
        int64_t value;
    } ints[] = {{"0", true, 0},
                {"-3", true, -3},
                {"9223372036854775807", true, INT64_MAX},
                {"-9223372036854775808", true, INT64_MIN},
                {"9223372036854775808", false, 0},
                {"", false, 0},
                {"+1", false, 0},
                {" 1", false, 0},
                {"1x", false, 0},
                {"1.0", false, 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = 12345;
        bool ok = parse_int_text("axis", ints[i].text, &v, msg, sizeof msg);
        CHECK(ok == ints[i].ok && (!ok || v == ints[i].value),
              "int \"%s\": %d %" PRId64, ints[i].text, ok, v);
        CHECK(ok || strstr(msg, "axis must be an integer") != NULL,
              "int \"%s\": %s", ints[i].text, msg);
    }
    bool dec = false;
    CHECK(parse_direction_text("direction", "decreasing", &dec, msg, sizeof msg)
              && dec,
          "decreasing");
    CHECK(parse_direction_text("direction", "increasing", &dec, msg, sizeof msg)
              && !dec,
          "increasing");
    CHECK(!parse_direction_text("direction", "down", &dec, msg, sizeof msg)
              && strstr(msg, "\"increasing\" or \"decreasing\"") != NULL,
          "down: %s", msg);
}

/* A shape's text and back, for random shapes (the seed is printed by
 * check_main), and the shapes' text that is refused. */
static void shape_text(void)
{
    char msg[256], text[64 * 24];
    for (int round = 0; round < 500; round++) {
        int rank = (int)check_below(ENG_MAX_RANK) + 1;
        uint64_t shape[ENG_MAX_RANK], back[ENG_MAX_RANK];
        for (int i = 0; i < rank; i++)
            shape[i] = check_below(4) == 0 ? check_rand() >> 1 /* to INT64_MAX */
                                           : check_below(1000);
        shape_to_text(shape, rank, text, sizeof text);
        int got = -1;
        bool ok = parse_shape_text("shape", text, back, &got, msg, sizeof msg);
        CHECK(ok && got == rank && memcmp(shape, back, rank * sizeof *shape) == 0,
              "\"%s\" read back as rank %d: %s", text, got, ok ? "" : msg);
        if (!ok)
            return;
    }
    static const char *const bad[] = {"",    ",",   "1,",  ",1",
                                      "1,,2", "a",  "-1",  "1 2",
                                      "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t s[ENG_MAX_RANK];
        int rank;
        CHECK(!parse_shape_text("shape", bad[i], s, &rank, msg, sizeof msg)
                  && strstr(msg, "shape") != NULL,
              "\"%s\" taken as a shape", bad[i]);
    }
    /* one dimension more than a tensor may have */
    char *many = check_alloc(2 * (ENG_MAX_RANK + 1) + 1);
    many[0] = '\0';
    for (int i = 0; i <= ENG_MAX_RANK; i++)
        strcat(many, i ? ",1" : "1");
    uint64_t s[ENG_MAX_RANK + 1];
    int rank;
    CHECK(!parse_shape_text("shape", many, s, &rank, msg, sizeof msg),
          "a shape of rank %d taken", ENG_MAX_RANK + 1);
    free(many);
}

/* The parameters applied to a scan: what was given, and the defaults
 * (axis 0, inclusive, increasing) for what was not; decreasing is
 * reverse, and a direction that disagrees with reverse is refused. The
 * axis is taken as given: the engine checks it against the rank. */
static void apply(void)
{
    char msg[256];
    eng_scan_desc d;
    memset(&d, 0xa5, sizeof d);
    scan_params none = {0};
    CHECK(scan_params_apply(&none, &d, msg, sizeof msg) && d.axis == 0
              && !d.exclusive && !d.reverse,
          "the defaults: %" PRId64 " %d %d", d.axis, d.exclusive, d.reverse);
    scan_params p = {.has_axis = true, .axis = -2, .has_exclusive = true,
                     .exclusive = true, .has_direction = true, .decreasing = true};
    CHECK(scan_params_apply(&p, &d, msg, sizeof msg) && d.axis == -2 && d.exclusive
              && d.reverse,
          "axis -2, exclusive, decreasing: %" PRId64 " %d %d", d.axis, d.exclusive,
          d.reverse);
    p.has_reverse = true;
    p.reverse = true;
    CHECK(scan_params_apply(&p, &d, msg, sizeof msg), "reverse agrees: %s", msg);
    p.reverse = false;
    CHECK(!scan_params_apply(&p, &d, msg, sizeof msg)
              && strstr(msg, "disagrees with reverse=false") != NULL,
          "reverse disagrees: %s", msg);
    scan_params r = {.has_reverse = true, .reverse = true};
    CHECK(scan_params_apply(&r, &d, msg, sizeof msg) && d.reverse && d.axis == 0,
          "reverse alone");
}

/* ------------------------------------------------------------------------
 * shm_json: the register body
 */
static void shm_register_body(void)
{
    char key[SHM_KEY_MAX + 1], msg[256];
    size_t klen;
    uint64_t off, size;
    const char *good = "{\"key\": \"/tally-x\", \"offset\": 16, \"byte_size\": 4096}";
    CHECK(shm_json_register((const uint8_t *)good, strlen(good), key, &klen, &off,
                            &size, msg, sizeof msg)
              && klen == 8 && memcmp(key, "/tally-x", 8) == 0 && off == 16
              && size == 4096,
          "a register body: %s", msg);
    const char *no_offset = "{\"key\": \"/k\", \"byte_size\": 8}";
    CHECK(shm_json_register((const uint8_t *)no_offset, strlen(no_offset), key,
                            &klen, &off, &size, msg, sizeof msg)
              && off == 0 && size == 8,
          "offset defaults to 0: %s", msg);
    static const struct {
        const char *body, *says;
    } bad[] = {
        {"[1]", ""},
        {"{\"key\": \"/k\"}", "byte_size"},
        {"{\"key\": \"/k\", \"byte_size\": -1}", "byte_size"},
        {"{\"key\": \"/k\", \"byte_size\": 8, \"ofset\": 4}", "ofset"},
        {"{\"key\": 5, \"byte_size\": 8}", "key"},
        {"{\"key\": \"/k\", \"byte_size\": \"8\"}", "byte_size"},
        {"{\"key\": \"/k\", \"byte_size\": 8, \"byte_size\": 9}", ""},
        {"not json", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = '\0';
        bool ok = shm_json_register((const uint8_t *)bad[i].body,
                                    strlen(bad[i].body), key, &klen, &off, &size,
                                    msg, sizeof msg);
        CHECK(!ok && msg[0] != '\0' && strstr(msg, bad[i].says) != NULL,
              "%s: taken, or its message (%s) does not name \"%s\"", bad[i].body,
              msg, bad[i].says);
    }
}

/* ------------------------------------------------------------------------
 * trace_settings: Triton's trace settings over tally's sampler
 */
static void trace_setting_updates(void)
{
    char msg[256];
    const trace_setting start = {.on = true, .ratio = 0.01};
    trace_setting t = start;
    const char *rate = "{\"trace_rate\": \"4\"}";
    CHECK(trace_settings_update((const uint8_t *)rate, strlen(rate), &t, &start,
                                msg, sizeof msg)
              && t.on && t.ratio == 0.25,
          "trace_rate 4: %g %s", t.ratio, msg);
    const char *off = "{\"trace_level\": [\"OFF\"]}";
    CHECK(trace_settings_update((const uint8_t *)off, strlen(off), &t, &start,
                                msg, sizeof msg)
              && !t.on,
          "OFF: %s", msg);
    const char *reset = "{\"trace_level\": null, \"trace_rate\": null}";
    CHECK(trace_settings_update((const uint8_t *)reset, strlen(reset), &t, &start,
                                msg, sizeof msg)
              && t.on == start.on && t.ratio == start.ratio,
          "null puts them back: %d %g %s", t.on, t.ratio, msg);
    char *text = trace_settings_render(&t);
    CHECK(text != NULL && strstr(text, "\"trace_rate\":\"100\"") != NULL
              && strstr(text, "TIMESTAMPS") != NULL,
          "rendered: %s", text ? text : "(null)");
    free(text);
    static const char *const bad[] = {
        "{\"trace_level\": [\"TENSORS\"]}", "{\"trace_rate\": \"0\"}",
        "{\"trace_file\": \"/tmp/x\"}",     "{\"trace_count\": \"5\"}",
        "{\"sample_ratio\": 2}",            "{\"no_such\": 1}",
        "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        trace_setting before = t;
        msg[0] = '\0';
        bool ok = trace_settings_update((const uint8_t *)bad[i], strlen(bad[i]), &t,
                                        &start, msg, sizeof msg);
        CHECK(!ok && msg[0] != '\0' && t.on == before.on && t.ratio == before.ratio,
              "%s: taken, or the settings moved (%s)", bad[i], msg);
    }
}


/* ------------------------------------------------------------------------
 * kserve_pb: ModelInferRequest in, ModelInferResponse out
 */

/* One request parameter, as a client sets it. */
typedef struct {
    const char *key;
    char kind; /* 'i' int64, 'u' uint64, 'b' bool, 's' string */
    int64_t i;
    const char *s;
} pb_param;

/* A ModelInferRequest with one input x, its bytes raw (raw != NULL) or
 * typed (contents), packed into a 128-byte-aligned buffer as the
 * transport hands it over; *len its length. */
static uint8_t *pack_request(const char *model, const char *version,
                             const char *dtype, const int64_t *shape,
                             size_t rank, const void *raw, size_t raw_len,
                             Inference__InferTensorContents *contents,
                             const pb_param *params, size_t nparams,
                             size_t *len)
{
    Inference__ModelInferRequest m = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor x =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    Inference__ModelInferRequest__InferInputTensor *inputs[1] = {&x};
    Inference__ModelInferRequest__ParametersEntry entries[8], *pe[8];
    Inference__InferParameter values[8];
    m.model_name = (char *)model;
    m.model_version = (char *)version;
    m.id = (char *)"req-7";
    x.name = (char *)"x";
    x.datatype = (char *)dtype;
    x.n_shape = rank;
    x.shape = (int64_t *)shape;
    x.contents = contents;
    m.n_inputs = 1;
    m.inputs = inputs;
    ProtobufCBinaryData bin = {raw_len, (uint8_t *)raw};
    if (raw != NULL) {
        m.n_raw_input_contents = 1;
        m.raw_input_contents = &bin;
    }
    for (size_t i = 0; i < nparams && i < 8; i++) {
        inference__model_infer_request__parameters_entry__init(&entries[i]);
        inference__infer_parameter__init(&values[i]);
        entries[i].key = (char *)params[i].key;
        entries[i].value = &values[i];
        switch (params[i].kind) {
        case 'i':
            values[i].parameter_choice_case =
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
            values[i].int64_param = params[i].i;
            break;
        case 'u':
            values[i].parameter_choice_case =
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
            values[i].uint64_param = (uint64_t)params[i].i;
            break;
        case 'b':
            values[i].parameter_choice_case =
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
            values[i].bool_param = params[i].i != 0;
            break;
        default:
            values[i].parameter_choice_case =
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
            values[i].string_param = (char *)params[i].s;
            break;
        }
        pe[i] = &entries[i];
    }
    m.n_parameters = nparams;
    m.parameters = pe;
    *len = inference__model_infer_request__get_packed_size(&m);
    uint8_t *b = eng_buffer_alloc(*len + 1);
    if (b != NULL)
        inference__model_infer_request__pack(&m, b);
    return b;
}

static void kserve_pb_raw_in_place(void)
{
    float x[6];
    for (int i = 0; i < 6; i++)
        x[i] = (float)(check_below(2001)) / 8.0f - 125.0f;
    int64_t shape[2] = {2, 3};
    pb_param ps[] = {{"axis", 'i', 1, NULL},
                     {"exclusive", 'b', 1, NULL},
                     {"direction", 's', 0, "decreasing"},
                     {"timeout", 'i', 2500, NULL}};
    size_t len;
    uint8_t *msg = pack_request("cumsum", "1", "FP32", shape, 2, x, sizeof x,
                                NULL, ps, 4, &len);
    CHECK(msg != NULL, "packed");
    if (msg == NULL)
        return;
    /* where the bulk starts (before the parse, which moves x in place) */
    size_t at = kserve_pb_bulk_offset(msg, len);
    CHECK(at != SIZE_MAX && at + sizeof x <= len
              && memcmp(msg + at, x, sizeof x) == 0,
          "bulk offset %zu of %zu", at, len);
    CHECK(kserve_pb_bulk_offset(msg, 2) == SIZE_MAX, "no entry in two bytes");
    kserve_request r;
    bool nf = false;
    char err[256] = "";
    eng_err e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_OK && !nf, "parse: %d %s", (int)e, err);
    if (e != ENG_E_OK) {
        eng_buffer_free(msg);
        return;
    }
    CHECK(r.desc.dtype == TX_FLOAT32 && r.desc.rank == 2 && r.desc.shape[0] == 2
              && r.desc.shape[1] == 3 && r.desc.axis == 1 && r.desc.exclusive
              && r.desc.reverse,
          "desc: dtype %d rank %d axis %lld ex %d rev %d", (int)r.desc.dtype,
          r.desc.rank, (long long)r.desc.axis, r.desc.exclusive, r.desc.reverse);
    CHECK(!r.data_owned && r.data >= msg && r.data + r.bytes <= msg + len,
          "raw x is used where it lies in the message");
    CHECK(((uintptr_t)r.data & 127) == 0, "x on a 128-byte boundary: %p",
          (void *)r.data);
    CHECK(r.bytes == sizeof x && memcmp(r.data, x, sizeof x) == 0,
          "x's bytes: %zu", r.bytes);
    CHECK(r.id != NULL && strcmp(r.id, "req-7") == 0, "id: %s", r.id);
    CHECK(r.has_timeout && r.timeout_us == 2500, "timeout: %d %lld",
          r.has_timeout, (long long)r.timeout_us);
    CHECK(!r.seq.has_id, "not a chunk");

    /* the answer: head, then y's bytes, unpacked as a client would */
    size_t hlen;
    uint8_t *head = kserve_pb_head(&r, &hlen);
    CHECK(head != NULL, "head");
    uint8_t *whole = malloc(hlen + r.bytes);
    if (head != NULL && whole != NULL) {
        memcpy(whole, head, hlen);
        memcpy(whole + hlen, x, r.bytes);
        Inference__ModelInferResponse *a =
            inference__model_infer_response__unpack(NULL, hlen + r.bytes, whole);
        CHECK(a != NULL, "the answer unpacks");
        if (a != NULL) {
            CHECK(strcmp(a->model_name, "cumsum") == 0 && strcmp(a->id, "req-7") == 0,
                  "model %s id %s", a->model_name, a->id);
            CHECK(a->n_outputs == 1 && strcmp(a->outputs[0]->name, "y") == 0
                      && strcmp(a->outputs[0]->datatype, "FP32") == 0
                      && a->outputs[0]->n_shape == 2 && a->outputs[0]->shape[0] == 2
                      && a->outputs[0]->shape[1] == 3,
                  "y's description");
            CHECK(a->n_raw_output_contents == 1
                      && a->raw_output_contents[0].len == sizeof x
                      && memcmp(a->raw_output_contents[0].data, x, sizeof x) == 0,
                  "y's bytes follow the head as raw_output_contents");
            inference__model_infer_response__free_unpacked(a, NULL);
        }
    }
    free(whole);
    free(head);

    uint8_t *sh = kserve_pb_stream_head(&r, &hlen);
    whole = sh != NULL ? malloc(hlen + r.bytes) : NULL;
    CHECK(whole != NULL, "stream head");
    if (whole != NULL) {
        memcpy(whole, sh, hlen);
        memcpy(whole + hlen, x, r.bytes);
        Inference__ModelStreamInferResponse *a =
            inference__model_stream_infer_response__unpack(NULL, hlen + r.bytes, whole);
        CHECK(a != NULL && a->infer_response != NULL
                  && a->infer_response->n_raw_output_contents == 1
                  && a->infer_response->raw_output_contents[0].len == sizeof x,
              "the stream's answer wraps the same response");
        if (a != NULL)
            inference__model_stream_infer_response__free_unpacked(a, NULL);
    }
    free(whole);
    free(sh);
    kserve_request_free(&r);

    eng_buffer_free(msg);
}

static void kserve_pb_typed_contents(void)
{
    int64_t v[5];
    for (int i = 0; i < 5; i++)
        v[i] = (int64_t)check_rand();
    Inference__InferTensorContents c = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
    c.n_int64_contents = 5;
    c.int64_contents = v;
    int64_t shape[1] = {5};
    size_t len;
    uint8_t *msg = pack_request("cumsum", "", "INT64", shape, 1, NULL, 0, &c,
                                NULL, 0, &len);
    kserve_request r;
    bool nf = false;
    char err[256] = "";
    eng_err e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_OK, "parse: %s", err);
    if (e == ENG_E_OK) {
        CHECK(r.desc.dtype == TX_INT64 && r.data_owned && r.bytes == sizeof v
                  && memcmp(r.data, v, sizeof v) == 0,
              "typed contents converted into a buffer of their own");
        kserve_request_free(&r);
    }
    /* the same contents over a small limit */
    e = kserve_pb_parse(msg, len, 16, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_TOO_LARGE, "40 bytes over a 16-byte limit: %d %s", (int)e, err);
    eng_buffer_free(msg);
}

static void kserve_pb_sequences(void)
{
    float x[2] = {1, 2};
    int64_t shape[1] = {2};
    pb_param ps[] = {{"sequence_id", 'u', 77, NULL},
                     {"sequence_start", 'b', 1, NULL},
                     {"sequence_chunk", 'u', 1, NULL}};
    size_t len;
    uint8_t *msg = pack_request("cumsum", "1", "FP32", shape, 1, x, sizeof x,
                                NULL, ps, 3, &len);
    kserve_request r;
    bool nf = false;
    char err[256] = "";
    eng_err e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_OK && r.seq.has_id && !r.seq.is_string && r.seq.num == 77
              && r.seq.start && !r.seq.end && r.seq.has_chunk && r.seq.chunk == 1,
          "numbered start: %s", err);
    if (e == ENG_E_OK)
        kserve_request_free(&r);
    eng_buffer_free(msg);

    pb_param sp[] = {{"sequence_id", 's', 0, "meter-4"},
                     {"sequence_end", 'b', 1, NULL}};
    msg = pack_request("cumsum", "1", "FP32", shape, 1, x, sizeof x, NULL, sp,
                       2, &len);
    e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_OK && r.seq.has_id && r.seq.is_string
              && strcmp(r.seq.str, "meter-4") == 0 && r.seq.end,
          "string id: %s", err);
    if (e == ENG_E_OK)
        kserve_request_free(&r);
    eng_buffer_free(msg);

    pb_param zero[] = {{"sequence_id", 'u', 0, NULL}};
    msg = pack_request("cumsum", "1", "FP32", shape, 1, x, sizeof x, NULL, zero,
                       1, &len);
    err[0] = '\0';
    e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
    CHECK(e == ENG_E_INVALID && strstr(err, "sequence_id") != NULL,
          "sequence_id 0 is refused, by name: %d %s", (int)e, err);
    eng_buffer_free(msg);
}

static void kserve_pb_refusals(void)
{
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4}, wrong[1] = {5};
    int64_t deep[65];
    for (int i = 0; i < 65; i++)
        deep[i] = 1;
    static const struct {
        const char *model, *version, *dtype;
        int which; /* 0 shape, 1 wrong, 2 deep */
        size_t raw;
        eng_err want;
        bool not_found;
        const char *says;
    } cases[] = {
        {"nope", "1", "FP32", 0, 16, ENG_E_INVALID, true, "nope"},
        {"cumsum", "2", "FP32", 0, 16, ENG_E_INVALID, true, "2"},
        {"cumsum", "1", "FP17", 0, 16, ENG_E_DTYPE, false, "FP17"},
        {"cumsum", "1", "FP32", 1, 16, ENG_E_INVALID, false, "x"},
        {"cumsum", "1", "FP32", 0, 12, ENG_E_INVALID, false, "x"},
        {"cumsum", "1", "FP32", 2, 4, ENG_E_RANK, false, "65"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t *sh = cases[i].which == 0 ? shape
                            : cases[i].which == 1 ? wrong
                                                  : deep;
        size_t rank = cases[i].which == 2 ? 65 : 1, len;
        uint8_t *msg = pack_request(cases[i].model, cases[i].version,
                                    cases[i].dtype, sh, rank, x, cases[i].raw,
                                    NULL, NULL, 0, &len);
        kserve_request r;
        bool nf = false;
        char err[256] = "";
        eng_err e = kserve_pb_parse(msg, len, 1 << 20, &r, &nf, err, sizeof err);
        CHECK(e == cases[i].want && nf == cases[i].not_found
                  && strstr(err, cases[i].says) != NULL,
              "case %zu: %d (want %d), not_found %d: %s", i, (int)e,
              (int)cases[i].want, nf, err);
        if (e == ENG_E_OK)
            kserve_request_free(&r);
        eng_buffer_free(msg);
    }
    /* bytes that are not a message */
    uint8_t *junk = eng_buffer_alloc(64);
    memset(junk, 0xff, 64);
    kserve_request r;
    bool nf = false;
    char err[256] = "";
    CHECK(kserve_pb_parse(junk, 64, 1 << 20, &r, &nf, err, sizeof err) == ENG_E_INVALID
              && err[0] != '\0',
          "junk: %s", err);
    eng_buffer_free(junk);

    size_t len;
    uint8_t *m = kserve_pb_stream_error("no such sequence \"a\"", &len);
    Inference__ModelStreamInferResponse *a =
        m ? inference__model_stream_infer_response__unpack(NULL, len, m) : NULL;
    CHECK(a != NULL && a->infer_response == NULL
              && strcmp(a->error_message, "no such sequence \"a\"") == 0,
          "a stream's error carries only the message");
    if (a != NULL)
        inference__model_stream_infer_response__free_unpacked(a, NULL);
    free(m);
}

/* ------------------------------------------------------------------------
 * dml: DirectML's operator description
 */
static void dml_described(void)
{
    static const char text[] =
        "{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [1,1,3,4],"
        " \"Strides\": [12,12,1,3]},"
        " \"OutputTensor\": {\"DataType\": \"DML_TENSOR_DATA_TYPE_FLOAT32\","
        " \"Sizes\": [1,1,3,4]},"
        " \"Axis\": 3, \"AxisDirection\": \"DML_AXIS_DIRECTION_DECREASING\","
        " \"HasExclusiveSum\": true}";
    dml_request q;
    char msg[256] = "";
    eng_err e = dml_parse(text, strlen(text), 1 << 20, false, &q, msg, sizeof msg);
    CHECK(e == ENG_E_OK, "parse: %s", msg);
    if (e != ENG_E_OK)
        return;
    CHECK(q.desc.dtype == TX_FLOAT32 && q.desc.rank == 4 && q.desc.axis == 3
              && q.desc.reverse && q.desc.exclusive && q.data == NULL,
          "desc");
    /* the last element addressed: 2*1 + 3*3 = 11, so 12 elements, 48 bytes */
    CHECK(q.in.has_strides && q.in.span == 12 && q.in.min_bytes == 48
              && q.in.total_bytes == 48,
          "input: span %llu min %llu", (unsigned long long)q.in.span,
          (unsigned long long)q.in.min_bytes);
    CHECK(!q.out.has_strides && q.out.strides[3] == 1 && q.out.strides[2] == 4
              && q.out.strides[0] == 12 && q.out.min_bytes == 48,
          "output packed: %llu %llu", (unsigned long long)q.out.strides[2],
          (unsigned long long)q.out.min_bytes);
    /* the binary body: from the addressed bytes to the padded size */
    CHECK(dml_check_body(&q, 48, msg, sizeof msg), "48 bytes: %s", msg);
    CHECK(!dml_check_body(&q, 44, msg, sizeof msg), "44 bytes are too few");
    CHECK(!dml_check_body(&q, 52, msg, sizeof msg), "52 bytes are too many");
    char *buf = NULL;
    size_t blen = 0;
    CHECK(dml_append_output(&buf, &blen, &q) && buf != NULL
              && strstr(buf, "\"Strides\"") != NULL
              && strstr(buf, "\"TotalTensorSizeInBytes\"") != NULL,
          "the output echoed with its strides and size: %s", buf ? buf : "");
    free(buf);

    /* the JSON form: data parsed into a buffer of span elements */
    static const char with_data[] =
        "{\"InputTensor\": {\"DataType\": \"INT32\", \"Sizes\": [4]},"
        " \"OutputTensor\": {\"DataType\": \"INT32\", \"Sizes\": [4]},"
        " \"Axis\": 0, \"data\": [1, -2, 3, 2147483647]}";
    e = dml_parse(with_data, strlen(with_data), 1 << 20, true, &q, msg, sizeof msg);
    CHECK(e == ENG_E_OK && q.data != NULL, "JSON form: %s", msg);
    if (e == ENG_E_OK) {
        const int32_t *d = q.data;
        CHECK(d[0] == 1 && d[1] == -2 && d[2] == 3 && d[3] == 2147483647
                  && !q.desc.reverse && !q.desc.exclusive,
              "data");
        eng_buffer_free(q.data);
    }
}

static void dml_refusals(void)
{
    static const struct {
        const char *text;
        bool want_data;
        size_t max;
        eng_err want;
        const char *names;
    } cases[] = {
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": []},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": []}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "Sizes"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,0]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,0]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "Sizes"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,3], \"Strides\": [1]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,3]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "Strides"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4],"
         " \"TotalTensorSizeInBytes\": 12},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "TotalTensorSizeInBytes"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]},"
         " \"OutputTensor\": {\"DataType\": \"INT32\", \"Sizes\": [4]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "OutputTensor"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,2]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [2,2],"
         " \"Strides\": [1,1]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_SHAPE, "OutputTensor.Strides"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 1}",
         false, 1 << 20, ENG_E_AXIS, "Axis"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4],"
         " \"DimensionCount\": 2},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "DimensionCount"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4], \"Flags\": 2},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_INVALID, "Flags"},
        {"{\"InputTensor\": {\"DataType\": \"COMPLEX64\", \"Sizes\": [4]},"
         " \"OutputTensor\": {\"DataType\": \"COMPLEX64\", \"Sizes\": [4]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_DTYPE, "DataType"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 0}",
         true, 1 << 20, ENG_E_INVALID, "data"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [4]}, \"Axis\": 0,"
         " \"data\": [1,2,3,4]}",
         false, 1 << 20, ENG_E_INVALID, "data"},
        {"{\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [1048576]},"
         " \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [1048576]}, \"Axis\": 0}",
         false, 1 << 20, ENG_E_TOO_LARGE, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dml_request q;
        char msg[256] = "";
        eng_err e = dml_parse(cases[i].text, strlen(cases[i].text), cases[i].max,
                              cases[i].want_data, &q, msg, sizeof msg);
        CHECK(e == cases[i].want && strstr(msg, cases[i].names) != NULL,
              "case %zu: %d (want %d): %s", i, (int)e, (int)cases[i].want, msg);
        if (e == ENG_E_OK)
            eng_buffer_free(q.data);
    }
}

/* ------------------------------------------------------------------------
 * The native API's requests (native) and KServe's JSON ones (kserve_json)
 */

static eng_err native(const char *text, native_request *out, char *err)
{
    return native_parse_json(text, strlen(text), 1 << 20, out, err, 300);
}

static void native_requests(void)
{
    char err[300];
    native_request q;
    eng_err e = native("{\"shape\":[2,2],\"data\":[[1,2],[3,4]],\"dtype\":"
                       "\"INT16\",\"axis\":-1,"
                       "\"direction\":\"decreasing\",\"exclusive\":true}",
                       &q, err);
    CHECK(e == ENG_E_OK && q.desc.dtype == TX_INT16 && q.desc.axis == -1
              && q.desc.reverse && q.desc.exclusive
              && ((int16_t *)q.data)[3] == 4,
          "full request: %s", err);
    eng_buffer_free(q.data);
    /* dtype and shape read off the data, as numpy.array reads it */
    struct {
        const char *text;
        tx_dtype dtype;
        int rank;
        uint64_t shape[3];
    } inferred[] = {
        {"{\"data\":[[1,2,3],[4,5,6]]}", TX_INT64, 2, {2, 3}},
        {"{\"data\":[[[1],[2]]]}", TX_INT64, 3, {1, 2, 1}},
        {"{\"data\":[1,2.5]}", TX_FLOAT64, 1, {2}},
        {"{\"data\":[1,2E3]}", TX_FLOAT64, 1, {2}},
        {"{\"data\":[\"Infinity\",1]}", TX_FLOAT64, 1, {2}},
        {"{\"data\":[]}", TX_FLOAT64, 1, {0}},
        {"{\"data\":[[],[]]}", TX_FLOAT64, 2, {2, 0}},
        {"{\"data\":[[1,2]],\"dtype\":\"uint8\"}", TX_UINT8, 2, {1, 2}},
        {"{\"shape\":[2,2],\"data\":[1,2,3,4]}", TX_INT64, 2, {2, 2}},
    };
    for (size_t i = 0; i < sizeof inferred / sizeof inferred[0]; i++) {
        memset(err, 0, sizeof err);
        e = native(inferred[i].text, &q, err);
        bool same = e == ENG_E_OK && q.desc.dtype == inferred[i].dtype
                    && q.desc.rank == inferred[i].rank;
        for (int d = 0; same && d < inferred[i].rank; d++)
            same = q.desc.shape[d] == inferred[i].shape[d];
        CHECK(same, "%s: %s (dtype %d, rank %d)", inferred[i].text, err,
              (int)q.desc.dtype, q.desc.rank);
        if (e == ENG_E_OK)
            eng_buffer_free(q.data);
    }

    struct {
        const char *text;
        eng_err want;
        const char *says;
    } bad[] = {
        {"", ENG_E_INVALID, "empty"},
        {"[1]", ENG_E_INVALID, "expected an object"},
        {"{\"dtype\":\"float32\",\"shape\":[1]}", ENG_E_INVALID, "\"data\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"data\":[1],\"axes\":0}",
         ENG_E_INVALID, "unknown member \"axes\""},
        {"{\"dtype\":\"float32\",\"dtype\":\"int8\",\"shape\":[1],\"data\":[1]"
         "}",
         ENG_E_INVALID, "twice"},
        {"{\"dtype\":\"float33\",\"shape\":[1],\"data\":[1]}", ENG_E_DTYPE,
         "float33"},
        {"{\"dtype\":32,\"shape\":[1],\"data\":[1]}", ENG_E_DTYPE, "string"},
        {"{\"dtype\":\"int8\",\"shape\":[],\"data\":[]}", ENG_E_RANK, "rank 0"},
        {"{\"dtype\":\"int8\",\"shape\":[-1],\"data\":[]}", ENG_E_INVALID,
         "negative"},
        {"{\"dtype\":\"int8\",\"shape\":[\"2\"],\"data\":[1,2]}", ENG_E_INVALID,
         "shape[0] must be an integer"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"axis\":\"0\"}",
         ENG_E_INVALID, "axis must be an integer"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"axis\":1.0}",
         ENG_E_INVALID, "axis must be an integer"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"axis\":1}",
         ENG_E_AXIS, "rank 1"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"exclusive\":1}",
         ENG_E_INVALID, "true or false"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"reverse\":true,"
         "\"direction\":\"increasing\"}",
         ENG_E_INVALID, "disagrees"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2],\"direction\":"
         "\"up\"}",
         ENG_E_INVALID, "increasing"},
        {"{\"dtype\":\"int8\",\"shape\":[4294967296,4294967296,4],\"data\":[]}",
         ENG_E_TOO_LARGE, "overflows"},
        {"{\"dtype\":\"int64\",\"shape\":[1048576],\"data\":[]}",
         ENG_E_TOO_LARGE, "more than the"},
        {"{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2]} x", ENG_E_INVALID,
         "after the object"},
        /* without a shape, the nesting must be regular */
        {"{\"data\":[[1,2],[3]]}", ENG_E_INVALID, "data[1] has 1 element "},
        {"{\"data\":[[1,2],3]}", ENG_E_INVALID, "data[1] is a number"},
        {"{\"data\":[1,[2]]}", ENG_E_INVALID, "data[1] is an array"},
        {"{\"data\":[[1],[]]}", ENG_E_INVALID, "data[1] has 0 elements"},
        {"{\"data\":[[[]],[]]}", ENG_E_INVALID, "data[1] is an empty array"},
        {"{\"data\":7}", ENG_E_INVALID, "must be an array"},
        {"{\"dtype\":\"int8\",\"data\":[[1],[2,3]]}", ENG_E_INVALID,
         "data[1] has 2 elements"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(err, 0, sizeof err);
        e = native(bad[i].text, &q, err);
        CHECK(e == bad[i].want && strstr(err, bad[i].says) != NULL,
              "%s: got %s \"%s\", want %s mentioning \"%s\"", bad[i].text,
              eng_err_name(e), err, eng_err_name(bad[i].want), bad[i].says);
        if (e == ENG_E_OK)
            eng_buffer_free(q.data);
    }
}

static eng_err kparse(const char *json, const uint8_t *bin, size_t binlen,
                      bool binary, kserve_request *r, uint8_t *body, char *err)
{
    size_t jl = strlen(json);
    memcpy(body, json, jl);
    if (binlen)
        memcpy(body + jl, bin, binlen);
    return kserve_parse(body, jl + binlen, binary ? jl : SIZE_MAX, 1 << 20, r,
                        err, 300);
}

static void kserve(void)
{
    char err[300];
    _Alignas(128) uint8_t body[4096];
    kserve_request r;
    eng_err e =
        kparse("{\"id\":\"a\\\"b\",\"inputs\":[{\"name\":\"x\",\"shape\":[2,2],"
               "\"datatype\":\"INT32\",\"data\":[1,2,3,4]}],\"parameters\":{"
               "\"axis\":1,"
               "\"timeout\":5000,\"unknown\":[1]}}",
               NULL, 0, false, &r, body, err);
    CHECK(e == ENG_E_OK && r.desc.axis == 1 && r.data_owned && r.has_timeout
              && r.timeout_us == 5000 && r.id_len == 4,
          "json request: %s", err);
    json_writer w;
    CHECK(kserve_json_writer(&w, &r, r.data), "writer");
    char out[512];
    size_t n = json_writer_read(&w, out, sizeof out);
    out[n] = '\0';
    CHECK(strstr(out, "\"id\":\"a\\\"b\"") && strstr(out, "\"data\":[1,2,3,4]"),
          "response: %s", out);
    json_writer_free(&w);
    kserve_request_free(&r);

    /* binary input and the axis input */
    float x[3] = {1, 2, 3};
    int64_t axis = 0;
    uint8_t bin[32];
    memcpy(bin, x, 12);
    memcpy(bin + 12, &axis, 8);
    e = kparse(
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[3],\"datatype\":\"FP32\","
        "\"parameters\":{\"binary_data_size\":12}},{\"name\":\"axis\","
        "\"shape\":[1],\"datatype\":\"INT64\",\"parameters\":"
        "{\"binary_data_size\":8}}],\"outputs\":[{\"name\":\"y\","
        "\"parameters\":{\"binary_data\":true}}]}",
        bin, 20, true, &r, body, err);
    CHECK(e == ENG_E_OK && !r.data_owned && r.binary_output && r.bytes == 12
              && (uintptr_t)r.data % 128 == 0 && ((float *)r.data)[2] == 3,
          "binary request (aligned in place): %s", err);
    size_t hl;
    char *head = kserve_binary_header(&r, &hl);
    CHECK(head != NULL && strstr(head, "\"binary_data_size\":12"), "header %s",
          head);
    free(head);
    kserve_request_free(&r);

    struct {
        const char *json;
        size_t binlen;
        bool binary;
        const char *says;
    } bad[] = {
        {"", 0, false, "empty"},
        {"{}", 0, false, "no \"inputs\""},
        {"{\"inputs\":[]}", 0, false, "no input \"x\""},
        {"{\"inputs\":[{\"name\":\"z\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]}]}",
         0, false, "unknown input \"z\""},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"BYTES\","
         "\"data\":[1]}]}",
         0, false, "BYTES"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\"}]}",
         0, false, "neither data"},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"data\":[1]}]}",
         0, false, "no shape"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[2],\"datatype\":\"FP32\","
         "\"data\":[1]}]}",
         0, false, "1 elements"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[3],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":8}}]}",
         8, true, "need 12 bytes"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[3],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":12}}]}",
         16, true, "4 bytes"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[3],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":12}}]}",
         0, false, "no Inference-Header-Content-Length"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]},{\"name\":\"axis\",\"shape\":[1],\"datatype\":"
         "\"INT64\","
         "\"data\":[0]}],\"parameters\":{\"axis\":-1}}",
         0, false, "disagrees"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]},{\"name\":\"axis\",\"shape\":[2],\"datatype\":"
         "\"INT64\","
         "\"data\":[0,0]}]}",
         0, false, "one element"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]}],\"outputs\":[{\"name\":\"z\"}]}",
         0, false, "unknown output"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[],\"datatype\":\"FP32\","
         "\"data\":[]}]}",
         0, false, "rank 0"},
        {"{\"id\":5,\"inputs\":[]}", 0, false, "id must be a string"},
        {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"data\":[1]}],\"parameters\":{\"timeout\":-1}}",
         0, false, "negative"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t zeros[32] = {0};
        memset(err, 0, sizeof err);
        e = kparse(bad[i].json, zeros, bad[i].binlen, bad[i].binary, &r, body,
                   err);
        CHECK(e != ENG_E_OK && strstr(err, bad[i].says) != NULL,
              "%s: got %s \"%s\"", bad[i].json, eng_err_name(e), err);
        if (e == ENG_E_OK)
            kserve_request_free(&r);
    }
    /* a header length longer than the body */
    memcpy(body, "{}", 2);
    e = kserve_parse(body, 2, 10, 1 << 20, &r, err, sizeof err);
    CHECK(e == ENG_E_INVALID && strstr(err, "only 2"), "header length: %s",
          err);
}

static const check_case cases[] = {
    {"text_values", text_values},
    {"shape_text", shape_text},
    {"apply", apply},
    {"shm_register_body", shm_register_body},
    {"trace_setting_updates", trace_setting_updates},
    {"kserve_pb_raw_in_place", kserve_pb_raw_in_place},
    {"kserve_pb_typed_contents", kserve_pb_typed_contents},
    {"kserve_pb_sequences", kserve_pb_sequences},
    {"kserve_pb_refusals", kserve_pb_refusals},
    {"dml_described", dml_described},
    {"dml_refusals", dml_refusals},
    {"native_requests", native_requests},
    {"kserve", kserve},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
