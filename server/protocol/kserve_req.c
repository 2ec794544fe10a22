/*
 * kserve_req.c - the inference request's rules, for both codecs
 * (kserve_req.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "kserve_req.h"
#include "tx_utf8.h"

void kserve_request_free(kserve_request *r)
{
    if (r->data_owned)
        eng_buffer_free(r->data);
    free(r->id);
    r->data = NULL;
    r->data_owned = false;
    r->id = NULL;
    r->id_len = 0;
}

/* The table of request parameters, which kserve_param_set() applies. */
enum {
    P_AXIS,
    P_EXCLUSIVE,
    P_REVERSE,
    P_DIRECTION,
    P_TIMEOUT,
    P_BINARY_OUTPUT,
    P_SEQ_ID,
    P_SEQ_CHUNK,
    P_SEQ_START,
    P_SEQ_END,
    P_COUNT
};

#define P(name, kind) {name, kind, "parameters." name, "parameter " name}
static const kserve_param params[P_COUNT] = {
    [P_AXIS] = P("axis", KP_INT),
    [P_EXCLUSIVE] = P("exclusive", KP_BOOL),
    [P_REVERSE] = P("reverse", KP_BOOL),
    [P_DIRECTION] = P("direction", KP_STRING),
    [P_TIMEOUT] = P("timeout", KP_INT),
    [P_BINARY_OUTPUT] = P("binary_data_output", KP_BOOL),
    [P_SEQ_ID] = P("sequence_id", KP_ID),
    [P_SEQ_CHUNK] = P("sequence_chunk", KP_COUNT),
    [P_SEQ_START] = P("sequence_start", KP_BOOL),
    [P_SEQ_END] = P("sequence_end", KP_BOOL),
};
#undef P

const kserve_param *kserve_param_find(const char *name, size_t n)
{
    for (size_t i = 0; i < P_COUNT; i++)
        if (json_eq(name, n, params[i].name))
            return &params[i];
    return NULL;
}

bool kserve_param_set(const kserve_param *q, const kserve_value *v,
                      kserve_request *r, scan_params *p, const char *where,
                      char *msg, size_t msglen)
{
    switch ((int)(q - params)) {
    case P_AXIS:
        p->axis = v->i;
        p->has_axis = true;
        return true;
    case P_EXCLUSIVE:
        p->exclusive = v->b;
        p->has_exclusive = true;
        return true;
    case P_REVERSE:
        p->reverse = v->b;
        p->has_reverse = true;
        return true;
    case P_DIRECTION:
        if (!json_eq(v->s, v->n, "increasing") && !json_eq(v->s, v->n, "decreasing"))
            return msg_fail(msg, msglen,
                            "%sdirection must be \"increasing\" or "
                            "\"decreasing\"",
                            where);
        p->decreasing = v->s[0] == 'd';
        p->has_direction = true;
        return true;
    case P_TIMEOUT:
        if (v->i < 0)
            return msg_fail(msg, msglen,
                            "%stimeout (microseconds) cannot be negative",
                            where);
        r->has_timeout = true;
        r->timeout_us = v->i;
        return true;
    case P_BINARY_OUTPUT: r->binary_output = v->b; return true;
    case P_SEQ_ID:
        return v->s != NULL ? seq_id_string(&r->seq, v->s, v->n, msg, msglen)
                            : seq_id_number(&r->seq, v->u, msg, msglen);
    case P_SEQ_CHUNK: return seq_chunk_number(&r->seq, v->u, msg, msglen);
    case P_SEQ_START:
    case P_SEQ_END:
        *(q == &params[P_SEQ_START] ? &r->seq.start : &r->seq.end) = v->b;
        r->seq.has_flags = true;
        return true;
    default: return msg_fail(msg, msglen, "not a request parameter");
    }
}

bool kserve_shm_param(const char *k, size_t kn, kserve_kind *kind)
{
    *kind = json_eq(k, kn, "shared_memory_region") ? KP_STRING : KP_COUNT;
    return *kind == KP_STRING || json_eq(k, kn, "shared_memory_offset")
           || json_eq(k, kn, "shared_memory_byte_size");
}

bool kserve_shm_set(shm_ref *ref, const char *k, size_t kn,
                    const kserve_value *v, const char *what, char *msg,
                    size_t msglen)
{
    if (json_eq(k, kn, "shared_memory_region")) {
        char why[160];
        return shm_ref_region(ref, v->s, v->n, why, sizeof why)
               || msg_fail(msg, msglen, "%s: %s", what, why);
    }
    if (json_eq(k, kn, "shared_memory_offset")) {
        ref->offset = v->u;
    } else {
        ref->byte_size = v->u;
        ref->has_byte_size = true;
    }
    return true;
}

bool kserve_shm_complete(const shm_ref *ref, const char *what, char *msg,
                         size_t msglen)
{
    if (!ref->set && (ref->has_byte_size || ref->offset != 0))
        return msg_fail(
            msg, msglen,
            "%s has shared_memory_offset or shared_memory_byte_size "
            "but no shared_memory_region",
            what);
    return true;
}

/* An input's name for messages: at most 32 bytes of it, or "(not UTF-8)". */
static void shown(const kserve_input *in, char *out, size_t len)
{
    size_t n = in->name_len > 32 ? 32 : in->name_len;
    if (tx_utf8_valid(in->name, n) != n)
        snprintf(out, len, "(not UTF-8)");
    else
        snprintf(out, len, "%.*s", (int)n, in->name);
}

/* Fails with "input "NAME" " and the rest: a message formatted only
 * when an input is refused. */
static bool bad_input(const kserve_input *in, const char *rest, char *msg,
                      size_t msglen)
{
    char name[40];
    shown(in, name, sizeof name);
    return msg_fail(msg, msglen, "input \"%s\" %s", name, rest);
}

/* Each input's data in one place; x and axis found. */
static bool find_inputs(kserve_input *in, size_t n, const kserve_codec *k,
                        kserve_input **x, kserve_input **axis, char *msg,
                        size_t msglen)
{
    *x = *axis = NULL;
    for (size_t i = 0; i < n; i++) {
        const kserve_input *a = &in[i];
        char rest[200];
        if (!a->shm.set && (a->shm.has_byte_size || a->shm.offset != 0))
            return bad_input(a,
                             "has shared_memory_offset or "
                             "shared_memory_byte_size but no "
                             "shared_memory_region",
                             msg, msglen);
        if (a->shm.set && (a->has_raw || a->has_typed)) {
            snprintf(rest, sizeof rest,
                     "names a shared-memory region but also has %s",
                     a->has_raw ? k->raw_name : k->typed_name);
            return bad_input(a, rest, msg, msglen);
        }
        if (a->has_raw && a->has_typed) {
            snprintf(rest, sizeof rest, "has both %s and %s", k->typed_name,
                     k->raw_name);
            return bad_input(a, rest, msg, msglen);
        }
        if (!a->shm.set && !a->has_raw && !a->has_typed) {
            snprintf(rest, sizeof rest,
                     "has no data: neither %s nor %s nor a shared-memory "
                     "region",
                     k->typed_name, k->raw_name);
            return bad_input(a, rest, msg, msglen);
        }
        kserve_input **which = json_eq(a->name, a->name_len, "x")      ? x
                               : json_eq(a->name, a->name_len, "axis") ? axis
                                                                  : NULL;
        if (which == NULL) {
            char name[40];
            shown(a, name, sizeof name);
            return msg_fail(msg, msglen,
                            "unknown input \"%s\" (the model takes \"x\" and "
                            "optionally \"axis\")",
                            name);
        }
        if (*which != NULL)
            return bad_input(a, "appears twice", msg, msglen);
        *which = &in[i];
    }
    if (*x == NULL)
        return msg_fail(msg, msglen, "the request has no input \"x\"");
    if (*axis != NULL && (*axis)->shm.set)
        return msg_fail(msg, msglen,
                        "input \"axis\" cannot come in shared memory: send its "
                        "value in the request, or use %saxis",
                        k->param_where);
    return true;
}

/* The axis input's one INT32 or INT64 element, into p. */
static bool axis_input(const kserve_input *a, const kserve_codec *k,
                       scan_params *p, char *msg, size_t msglen)
{
    uint64_t count = 1;
    for (int d = 0; d < a->rank; d++)
        if (!eng_mul_u64(count, a->shape[d], &count))
            count = UINT64_MAX;
    if (!scan_axis_input_kind(a->dtype, count, msg, msglen))
        return false;
    int64_t axis, one;
    if (a->has_raw) {
        if (!scan_axis_input_raw(a->dtype, a->raw, a->raw_len, k->raw_field,
                                 &axis, msg, msglen))
            return false;
    } else {
        if (!k->decode(a, 1, &one, msg, msglen))
            return false;
        axis = scan_axis_value(a->dtype, &one);
    }
    return scan_params_axis_input(p, axis, msg, msglen);
}

eng_err kserve_request_finish(kserve_request *r, kserve_input *in, size_t n,
                              scan_params *p, const kserve_codec *k,
                              uint8_t *base, size_t max_bytes, char *msg,
                              size_t msglen)
{
    kserve_input *x, *a;
    if (!find_inputs(in, n, k, &x, &a, msg, msglen)
        || !seq_params_check(&r->seq, msg, msglen)
        || (a != NULL && !axis_input(a, k, p, msg, msglen)))
        return ENG_E_INVALID;
    r->desc.dtype = x->dtype;
    r->desc.rank = x->rank;
    memcpy(r->desc.shape, x->shape, sizeof x->shape);
    if (x->rank == 0)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "input \"x\" has shape [] (rank 0): a cumulative "
                        "sum needs at least one axis");
    if (!scan_params_apply(p, &r->desc, msg, msglen))
        return ENG_E_INVALID;
    eng_lines l;
    eng_err e = eng_lines_from_desc(&r->desc, &l, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    r->bytes = l.bytes;
    if (x->shm.set) {
        r->x_shm = x->shm; /* the API layer finds its bytes */
        return ENG_E_OK;
    }
    if (x->has_raw) {
        if (x->raw_len != l.bytes)
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "input \"x\": %s is %" PRIu64 " bytes, but "
                            "shape and datatype need %zu bytes",
                            k->raw_field, x->raw_len, l.bytes);
        /* Moved down to a 128-byte boundary over what came before it
         * (all read by now), so that the scan has it aligned with no
         * copy to another buffer; the message's start is so aligned. */
        uint8_t *at = (uint8_t *)x->raw;
        uint8_t *to = (uint8_t *)((uintptr_t)at & ~(uintptr_t)127);
        if (to != at && to >= base) {
            memmove(to, at, l.bytes);
            at = to;
        }
        r->data = at;
        return ENG_E_OK;
    }
    if (x->decoded)
        return ENG_E_OK;
    if (l.bytes > max_bytes)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "input \"x\" would take %zu bytes, more than the "
                        "%zu this server accepts",
                        l.bytes, max_bytes);
    r->data = eng_buffer_alloc(l.bytes);
    if (r->data == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM,
                        "out of memory for a %zu-byte tensor", l.bytes);
    r->data_owned = true;
    return k->decode(x, l.elements, r->data, msg, msglen) ? ENG_E_OK
                                                          : ENG_E_INVALID;
}
