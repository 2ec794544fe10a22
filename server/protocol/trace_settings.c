/*
 * trace_settings.c - Triton's trace settings, read and written with jansson
 * (trace_settings.h).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "trace_settings.h"

/* A member's value as text: Triton's clients send strings, people send
 * numbers too. False when it is neither. */
static bool text_of(json_t *v, char *out, size_t n)
{
    if (json_is_string(v))
        snprintf(out, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, n, "%.17g", json_real_value(v));
    else
        return false;
    return true;
}

/* A whole number from text; false when it is not one. */
static bool whole(const char *s, long long *out)
{
    char *end;
    if (*s == '\0')
        return false;
    *out = strtoll(s, &end, 10);
    return *end == '\0';
}

static bool set_level(json_t *v, trace_setting *t, char *msg, size_t msglen)
{
    json_t *one = json_is_array(v) && json_array_size(v) == 1
                      ? json_array_get(v, 0)
                      : v;
    const char *s = json_is_string(one) ? json_string_value(one) : NULL;
    if (s != NULL && strcmp(s, "OFF") == 0) {
        t->on = false;
        return true;
    }
    if (s != NULL && strcmp(s, "TIMESTAMPS") == 0) {
        t->on = true;
        return true;
    }
    return msg_fail(
        msg, msglen,
        "trace_level must be [\"OFF\"] or [\"TIMESTAMPS\"]: tally's "
        "spans carry the request's steps and times, not its tensors");
}

/* The settings that only take the value they have. */
static const struct {
    const char *key, *only, *why;
} fixed[] = {
    {"trace_count", "-1", "tally samples by ratio, without a count"},
    {"log_frequency", "0", "tally sends spans to a collector, not a file"},
    {"trace_file", "", "tally sends spans to a collector, not a file"},
    {"trace_mode", "opentelemetry", "tally's spans are OpenTelemetry's"},
};

static bool is_fixed(const char *key)
{
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(key, fixed[i].key) == 0)
            return true;
    return false;
}

static void unknown(const char *key, char *msg, size_t msglen)
{
    snprintf(msg, msglen,
             "unknown trace setting \"%.64s\" (tally has trace_level, "
             "trace_rate, sample_ratio, trace_count, log_frequency, "
             "trace_file and trace_mode)",
             key);
}

/* Applies member key = v (not null) to t. */
static bool apply(const char *key, json_t *v, trace_setting *t, char *msg,
                  size_t msglen)
{
    char text[64];
    long long n;
    if (strcmp(key, "trace_level") == 0)
        return set_level(v, t, msg, msglen);
    if (!text_of(v, text, sizeof text))
        return msg_fail(msg, msglen, "%s must be a string or a number", key);
    if (strcmp(key, "trace_rate") == 0) {
        if (!whole(text, &n) || n < 1)
            return msg_fail(
                msg, msglen,
                "trace_rate must be a whole number from 1 (sample one "
                "new trace in trace_rate), not \"%.32s\"",
                text);
        t->ratio = 1.0 / (double)n;
        return true;
    }
    if (strcmp(key, "sample_ratio") == 0) {
        char *end;
        double r = strtod(text, &end);
        if (*end != '\0' || !(r > 0 && r <= 1))
            return msg_fail(
                msg, msglen,
                "sample_ratio must be a number above 0 and at most 1 "
                "(trace_level [\"OFF\"] samples none)");
        t->ratio = r;
        return true;
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(key, fixed[i].key) == 0) {
            if (strcmp(text, fixed[i].only) == 0)
                return true;
            return msg_fail(msg, msglen, "%s can only be \"%s\": %s", key,
                            fixed[i].only, fixed[i].why);
        }
    unknown(key, msg, msglen);
    return false;
}

bool trace_settings_update(const uint8_t *body, size_t len, trace_setting *t,
                       const trace_setting *defaults, char *msg,
                       size_t msglen)
{
    if (len > TRACE_JSON_BODY_MAX)
        return msg_fail(msg, msglen,
                        "a trace settings body takes at most %d bytes",
                        TRACE_JSON_BODY_MAX);
    json_error_t je;
    json_t *o =
        json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    if (o == NULL || !json_is_object(o)) {
        snprintf(msg, msglen,
                 "the body must be a JSON object of settings "
                 "({\"trace_rate\": \"100\"})%s%.200s",
                 o == NULL ? ": " : "", o == NULL ? je.text : "");
        json_decref(o);
        return false;
    }
    trace_setting next = *t;
    const char *key;
    json_t *v;
    bool ok = true;
    json_object_foreach(o, key, v)
    {
        if (json_is_null(v)) { /* back to the start-up value */
            if (strcmp(key, "trace_level") == 0)
                next.on = defaults->on;
            else if (strcmp(key, "trace_rate") == 0
                     || strcmp(key, "sample_ratio") == 0)
                next.ratio = defaults->ratio;
            else if (!is_fixed(key)) {
                unknown(key, msg, msglen);
                ok = false;
                break;
            }
            continue;
        }
        if (!apply(key, v, &next, msg, msglen)) {
            ok = false;
            break;
        }
    }
    json_decref(o);
    if (ok)
        *t = next;
    return ok;
}

char *trace_settings_render(const trace_setting *t)
{
    char rate[32];
    snprintf(rate, sizeof rate, "%.0f", t->ratio > 0 ? round(1.0 / t->ratio) : 0);
    json_t *o = json_pack(
        "{s:[s], s:s, s:s, s:s, s:s, s:s, s:f}", "trace_level",
        t->on ? "TIMESTAMPS" : "OFF", "trace_rate", rate, "trace_count", "-1",
        "log_frequency", "0", "trace_file", "", "trace_mode", "opentelemetry",
        "sample_ratio", t->ratio);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}
