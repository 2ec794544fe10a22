/*
 * shm_json.c - the register body and the status answer (shm_json.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shm_json.h"
#include "tx_utf8.h"

/* A body's unsigned integer member; false with a message. */
static bool member_u64(json_t *o, const char *key, bool required, uint64_t *out,
                       char *msg, size_t msglen)
{
    json_t *v = json_object_get(o, key);
    *out = 0;
    if (v == NULL) {
        if (required)
            snprintf(msg, msglen, "the body has no \"%s\"", key);
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return msg_fail(msg, msglen, "\"%s\" must be a non-negative integer",
                        key);
    *out = (uint64_t)json_integer_value(v);
    return true;
}

bool shm_json_register(const uint8_t *body, size_t len, char *key, size_t *klen,
                       uint64_t *offset, uint64_t *byte_size, char *msg,
                       size_t msglen)
{
    if (len > SHM_JSON_BODY_MAX)
        return msg_fail(msg, msglen, "a register body takes at most %d bytes",
                        SHM_JSON_BODY_MAX);
    json_error_t je;
    json_t *o =
        json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    bool ok = false;
    if (o == NULL || !json_is_object(o)) {
        snprintf(msg, msglen,
                 "the body must be a JSON object {\"key\": \"/name\", "
                 "\"offset\": 0, \"byte_size\": N}%s%.200s",
                 o == NULL ? ": " : "", o == NULL ? je.text : "");
    } else {
        json_t *k = json_object_get(o, "key");
        const char *name;
        json_t *v;
        json_object_foreach(o, name, v)
        {
            if (strcmp(name, "key") != 0 && strcmp(name, "offset") != 0
                && strcmp(name, "byte_size") != 0) {
                /* a misspelt member would otherwise be left out unseen:
                 * "ofset" would register the object's first bytes */
                char quoted[96];
                tx_utf8_escape(name, strlen(name), quoted, sizeof quoted);
                snprintf(msg, msglen,
                         "unknown member \"%s\" (a register body has key, "
                         "offset and byte_size)",
                         quoted);
                json_decref(o);
                return false;
            }
        }
        if (!json_is_string(k)) {
            snprintf(msg, msglen, "\"key\" must be a string (\"/name\")");
        } else if (json_string_length(k) > SHM_KEY_MAX) {
            snprintf(msg, msglen, "\"key\" has more than %d bytes",
                     SHM_KEY_MAX);
        } else if (member_u64(o, "offset", false, offset, msg, msglen)
                   && member_u64(o, "byte_size", true, byte_size, msg,
                                 msglen)) {
            *klen = json_string_length(k);
            memcpy(key, json_string_value(k), *klen);
            key[*klen] = '\0';
            ok = true;
        }
    }
    json_decref(o);
    return ok;
}

char *shm_json_status(const shm_info *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        json_t *e = json_pack("{s:s, s:s, s:I, s:I}", "name", v[i].name, "key",
                              v[i].key, "offset", (json_int_t)v[i].offset,
                              "byte_size", (json_int_t)v[i].byte_size);
        if (e == NULL || json_array_append_new(a, e) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    char *text = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return text;
}
