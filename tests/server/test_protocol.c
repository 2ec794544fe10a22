/*
 * test_protocol.c - server/protocol/ on its own, case by case: the
 * operator's parameters as every protocol reads them (scan_params), the
 * shared-memory register body and status answer (shm_json), and Triton's
 * trace settings (trace_settings). No daemon, no transport; the
 * integration suite sends the same documents through the doors.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
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

static const check_case cases[] = {
    {"text_values", text_values},
    {"shape_text", shape_text},
    {"apply", apply},
    {"shm_register_body", shm_register_body},
    {"trace_setting_updates", trace_setting_updates},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
