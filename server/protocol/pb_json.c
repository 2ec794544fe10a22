/*
 * pb_json.c - a protobuf message from its JSON form (pb_json.h), through
 * jansson and protobuf-c's descriptors.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pb_json.h"

static bool fill(ProtobufCMessage *m, const json_t *o);

/* A number from a JSON number or a decimal string. */
static bool number(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = (long long)json_integer_value(v);
        return true;
    }
    if (!json_is_string(v))
        return false;
    char *end;
    *out = strtoll(json_string_value(v), &end, 10);
    return *end == '\0' && end != json_string_value(v);
}

/* One value v of field f into dst (the field's storage, or a repeated
 * field's element). */
static bool value(const ProtobufCFieldDescriptor *f, const json_t *v, void *dst)
{
    long long n;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v))
            return false;
        char *s = strdup(json_string_value(v));
        *(char **)dst = s;
        return s != NULL;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return false;
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return true;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_UINT32:
        if (!number(v, &n))
            return false;
        *(int32_t *)dst = (int32_t)n;
        return true;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_UINT64:
        if (!number(v, &n))
            return false;
        *(int64_t *)dst = (int64_t)n;
        return true;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *e =
            json_is_string(v) ? protobuf_c_enum_descriptor_get_value_by_name(
                f->descriptor, json_string_value(v))
                              : NULL;
        if (e == NULL)
            return false;
        *(int *)dst = e->value;
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *d = f->descriptor;
        ProtobufCMessage *sub = calloc(1, d->sizeof_message);
        if (sub == NULL)
            return false;
        d->message_init(sub);
        *(ProtobufCMessage **)dst = sub; /* freed with m, whatever comes */
        return json_is_object(v) && fill(sub, v);
    }
    default: return false; /* no field of the documents has another type */
    }
}

/* Whether f's values are pointers (a string's, a message's). */
static bool is_pointer(const ProtobufCFieldDescriptor *f)
{
    return f->type == PROTOBUF_C_TYPE_STRING
           || f->type == PROTOBUF_C_TYPE_MESSAGE;
}

/* The storage one element of f takes. */
static size_t element_size(const ProtobufCFieldDescriptor *f)
{
    if (is_pointer(f))
        return sizeof(void *);
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_UINT64: return 8;
    default: return 4;
    }
}

static bool fill(ProtobufCMessage *m, const json_t *o)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(m->descriptor, key);
        if (f == NULL)
            continue; /* a field this message does not have */
        char *at = (char *)m + f->offset;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (f->quantifier_offset != 0 && f->type != PROTOBUF_C_TYPE_MESSAGE
                && f->type != PROTOBUF_C_TYPE_STRING)
                *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
            if (!value(f, v, at))
                return false;
            continue;
        }
        if (!json_is_array(v))
            return false;
        size_t n = json_array_size(v), k;
        void *arr = calloc(n ? n : 1, element_size(f));
        if (arr == NULL)
            return false;
        *(void **)at = arr;
        const json_t *e;
        json_array_foreach(v, k, e)
        {
            void *slot = (char *)arr + k * element_size(f);
            bool ok = value(f, e, slot);
            /* counted as it fills, so that a failure frees what was made
             * (a pointer's element only once it is there) */
            if (!is_pointer(f) || *(void **)slot != NULL)
                *(size_t *)((char *)m + f->quantifier_offset) = k + 1;
            if (!ok)
                return false;
        }
    }
    return true;
}

ProtobufCMessage *pb_from_json(const ProtobufCMessageDescriptor *d,
                               const char *text, size_t len)
{
    json_t *o = json_loadb(text, len, 0, NULL);
    ProtobufCMessage *m =
        o != NULL && json_is_object(o) ? calloc(1, d->sizeof_message) : NULL;
    if (m != NULL) {
        d->message_init(m);
        if (!fill(m, o)) {
            protobuf_c_message_free_unpacked(m, NULL);
            m = NULL;
        }
    }
    json_decref(o);
    return m;
}
