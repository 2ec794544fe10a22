/*
 * scan_params.c - the operator's parameters, for every protocol
 * (scan_params.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan_params.h"

bool scan_params_axis_input(scan_params *p, int64_t axis, char *msg,
                            size_t msglen)
{
    if (p->has_axis && p->axis != axis)
        return msg_fail(msg, msglen,
                        "input \"axis\" (%" PRId64 ") disagrees with the axis "
                        "parameter (%" PRId64 ")",
                        axis, p->axis);
    p->axis = axis;
    p->has_axis = true;
    return true;
}

bool scan_axis_input_kind(int dtype, uint64_t elements, char *msg,
                          size_t msglen)
{
    if (dtype != TX_INT32 && dtype != TX_INT64)
        return msg_fail(msg, msglen,
                        "input \"axis\" must be INT32 or INT64, not %s",
                        tx_dtype_kserve((tx_dtype)dtype));
    if (elements != 1)
        return msg_fail(msg, msglen,
                        "input \"axis\" must hold one element (shape [1]), not "
                        "%" PRIu64,
                        elements);
    return true;
}

int64_t scan_axis_value(int dtype, const void *one)
{
    if (dtype == TX_INT32) {
        int32_t v;
        memcpy(&v, one, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, one, sizeof v);
    return v;
}

bool scan_axis_input_raw(int dtype, const void *bytes, uint64_t len,
                         const char *field, int64_t *axis, char *msg,
                         size_t msglen)
{
    size_t want = tx_dtype_size((tx_dtype)dtype);
    if (len != want)
        return msg_fail(msg, msglen,
                        "input \"axis\": %s is %" PRIu64
                        " bytes, but one %s takes "
                        "%zu",
                        field, len, tx_dtype_kserve((tx_dtype)dtype), want);
    *axis = scan_axis_value(dtype, bytes);
    return true;
}

bool scan_params_apply(const scan_params *p, eng_scan_desc *desc, char *msg,
                       size_t msglen)
{
    desc->axis = p->has_axis ? p->axis : 0;
    desc->exclusive = p->has_exclusive && p->exclusive;
    bool reverse = p->has_reverse && p->reverse;
    if (p->has_direction) {
        if (p->has_reverse && p->reverse != p->decreasing)
            return msg_fail(
                msg, msglen,
                "direction \"%s\" disagrees with reverse=%s (give one "
                "of them, or make them agree)",
                p->decreasing ? "decreasing" : "increasing",
                p->reverse ? "true" : "false");
        reverse = p->decreasing;
    }
    desc->reverse = reverse;
    return true;
}

bool parse_bool_text(const char *name, const char *v, bool *out, char *msg,
                     size_t msglen)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
        *out = false;
        return true;
    }
    return msg_fail(msg, msglen, "%s must be true or false, not \"%.40s\"",
                    name, v);
}

bool parse_int_text(const char *name, const char *v, int64_t *out, char *msg,
                    size_t msglen)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (v[0] == '\0' || *end != '\0' || errno != 0 || v[0] == ' '
        || v[0] == '+')
        return msg_fail(msg, msglen, "%s must be an integer, not \"%.40s\"",
                        name, v);
    *out = x;
    return true;
}

bool parse_direction_text(const char *name, const char *v, bool *decreasing,
                          char *msg, size_t msglen)
{
    if (strcmp(v, "increasing") == 0 || strcmp(v, "decreasing") == 0) {
        *decreasing = v[0] == 'd';
        return true;
    }
    return msg_fail(
        msg, msglen,
        "%s must be \"increasing\" or \"decreasing\", not \"%.40s\"", name, v);
}

bool parse_shape_text(const char *name, const char *v, uint64_t *shape,
                      int *rank, char *msg, size_t msglen)
{
    int r = 0;
    const char *p = v;
    if (*p == '\0')
        return msg_fail(msg, msglen,
                        "%s is empty: rank 0 tensors have no axis to "
                        "sum along",
                        name);
    for (;;) {
        if (*p < '0' || *p > '9')
            return msg_fail(msg, msglen,
                            "%s must be comma-separated non-negative "
                            "integers, like 3,4 (got \"%.40s\")",
                            name, v);
        char *end;
        errno = 0;
        unsigned long long d = strtoull(p, &end, 10);
        if (errno != 0 || d > INT64_MAX)
            return msg_fail(msg, msglen, "%s: dimension %d is too large", name,
                            r);
        if (r >= ENG_MAX_RANK)
            return msg_fail(msg, msglen, "%s has more than %d dimensions", name,
                            ENG_MAX_RANK);
        shape[r++] = d;
        if (*end == '\0')
            break;
        if (*end != ',')
            return msg_fail(msg, msglen,
                            "%s must be comma-separated non-negative "
                            "integers, like 3,4 (got \"%.40s\")",
                            name, v);
        p = end + 1;
    }
    *rank = r;
    return true;
}

void shape_to_text(const uint64_t *shape, int rank, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64, d ? "," : "",
                              shape[d]);
}

bool seq_json_param(jcur *c, const char *key, size_t kn, const char *where,
                    seq_params *p, bool *ok)
{
    char what[64], err[256];
    if (json_eq(key, kn, "sequence_id")) {
        snprintf(what, sizeof what, "%ssequence_id", where);
        jcur_ws(c);
        bool good;
        if (c->p < c->end && *c->p == '"') {
            char id[4 * SEQ_ID_MAX]; /* seq_id_string says how long */
            size_t n;
            good = jcur_string_value(c, what, id, sizeof id, &n);
            if (good && !seq_id_string(p, id, n, err, sizeof err))
                good = jcur_fail(c, "%s", err);
        } else if (c->p < c->end && ((*c->p >= '0' && *c->p <= '9')
                                     || *c->p == '-')) {
            uint64_t v;
            good = jcur_uint64(c, what, &v);
            if (good && !seq_id_number(p, v, err, sizeof err))
                good = jcur_fail(c, "%s", err);
        } else {
            good = jcur_fail(c, "%s must be a number or a string, not %s",
                             what, jcur_found(c));
        }
        *ok = good;
        return true;
    }
    if (json_eq(key, kn, "sequence_chunk")) {
        snprintf(what, sizeof what, "%ssequence_chunk", where);
        jcur_ws(c);
        uint64_t v;
        bool good = jcur_uint64(c, what, &v);
        if (good && !seq_chunk_number(p, v, err, sizeof err))
            good = jcur_fail(c, "%s", err);
        *ok = good;
        return true;
    }
    bool start = json_eq(key, kn, "sequence_start");
    if (start || json_eq(key, kn, "sequence_end")) {
        snprintf(what, sizeof what, "%s%s", where,
                 start ? "sequence_start" : "sequence_end");
        *ok = jcur_bool(c, what, start ? &p->start : &p->end);
        p->has_flags = true;
        return true;
    }
    return false;
}

bool seq_query_param(const char *name, const char *v, seq_params *p, bool *ok,
                     char *msg, size_t msglen)
{
    if (strcmp(name, "sequence_id") == 0) {
        *ok = seq_id_text(p, v, msg, msglen);
        return true;
    }
    if (strcmp(name, "sequence_chunk") == 0) {
        *ok = seq_chunk_text(p, v, msg, msglen);
        return true;
    }
    bool start = strcmp(name, "sequence_start") == 0;
    if (start || strcmp(name, "sequence_end") == 0) {
        *ok = parse_bool_text(name, v, start ? &p->start : &p->end, msg,
                              msglen);
        p->has_flags = true;
        return true;
    }
    return false;
}
