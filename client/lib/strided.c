/*
 * strided.c - tally_cumsum_strided(): DirectML's buffer tensors, sent as
 * the binary form of POST /v1/cumsum (the operator description in the
 * DML-Operator header, the input buffer's bytes as the body; see
 * proto/openapi.yaml). The answer is the output buffer; its addressed
 * elements are copied into the caller's.
 *
 * Threading: as every call on a client, one thread at a time per client.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tx_strides.h"

/* Checks d; fills its strides (packed when NULL) and its span. */
static tally_code check_desc(tally_client *c, const char *what,
                             const tally_tensor_desc *d, uint64_t *strides,
                             uint64_t *span, uint64_t *total)
{
    if (d == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "%s is NULL", what);
    if (tally_dt_size(d->dtype) == 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "%s: dtype %d is not a "
                            "tally_dt",
                            what, (int)d->dtype);
    if (d->rank < 1 || d->rank > TALLY_MAX_RANK || d->sizes == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "%s: rank %d (1 to %d, with sizes)", what, d->rank,
                            TALLY_MAX_RANK);
    for (int k = 0; k < d->rank; k++)
        if (d->sizes[k] == 0)
            return tc_set_error(c, TALLYE_ARGUMENT, 0,
                                "%s: sizes[%d] is 0 (DirectML sizes are 1 "
                                "or more)",
                                what, k);
    if (d->strides != NULL)
        memcpy(strides, d->strides, sizeof *strides * (size_t)d->rank);
    uint64_t last, min;
    if ((d->strides == NULL && !tx_strides_packed(d->rank, d->sizes, strides))
        || !tx_strides_last_index(d->rank, d->sizes, strides, &last)
        || !tx_strides_buffer_bytes(tally_dt_size(d->dtype), d->rank, d->sizes,
                                    strides, &min)
        || min > SIZE_MAX / 2)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "%s addresses more memory than there is", what);
    if (d->total_bytes != 0 && d->total_bytes < min)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "%s: total_bytes %" PRIu64 " is less than the "
                            "%" PRIu64 " its sizes and strides need",
                            what, d->total_bytes, min);
    *span = last + 1;
    *total = d->total_bytes ? d->total_bytes : min;
    return TALLY_OK;
}

/* Appends printf text to buf (cap bytes, *len used); false when full. */
static bool put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return false;
    *len += (size_t)n;
    return true;
}

static bool put_tensor(char *buf, size_t cap, size_t *len, const char *name,
                       const tally_tensor_desc *d, const uint64_t *strides)
{
    bool ok = put(buf, cap, len, "\"%s\":{\"DataType\":\"%s\",\"Sizes\":[",
                  name, tally_dt_name(d->dtype));
    for (int k = 0; ok && k < d->rank; k++)
        ok = put(buf, cap, len, "%s%" PRIu64, k ? "," : "", d->sizes[k]);
    ok = ok && put(buf, cap, len, "],\"Strides\":[");
    for (int k = 0; ok && k < d->rank; k++)
        ok = put(buf, cap, len, "%s%" PRIu64, k ? "," : "", strides[k]);
    ok = ok && put(buf, cap, len, "]");
    if (ok && d->total_bytes != 0)
        ok = put(buf, cap, len, ",\"TotalTensorSizeInBytes\":%" PRIu64,
                 d->total_bytes);
    return ok && put(buf, cap, len, "}");
}

TALLY_API tally_code tally_buffer_bytes(const tally_tensor_desc *d,
                                        uint64_t *bytes)
{
    uint64_t strides[TALLY_MAX_RANK];
    if (d == NULL || bytes == NULL || tally_dt_size(d->dtype) == 0
        || d->rank < 1 || d->rank > TALLY_MAX_RANK || d->sizes == NULL)
        return TALLYE_ARGUMENT;
    if (d->strides != NULL)
        memcpy(strides, d->strides, sizeof *strides * (size_t)d->rank);
    else if (!tx_strides_packed(d->rank, d->sizes, strides))
        return TALLYE_ARGUMENT;
    return tx_strides_buffer_bytes(tally_dt_size(d->dtype), d->rank, d->sizes,
                                   strides, bytes)
               ? TALLY_OK
               : TALLYE_ARGUMENT;
}

TALLY_API tally_code tally_cumsum_strided(tally_client *c,
                                          const tally_tensor_desc *in_desc,
                                          const void *in,
                                          const tally_tensor_desc *out_desc,
                                          void *out, int axis, unsigned flags)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (c->nurls == 0)
        return tc_set_error(c, TALLYE_URL, 0, "no server URL (tally_add_url)");
    uint64_t is[TALLY_MAX_RANK], os[TALLY_MAX_RANK];
    uint64_t in_span, out_span, in_total, out_total;
    tally_code code =
        check_desc(c, "the input descriptor", in_desc, is, &in_span, &in_total);
    if (code == TALLY_OK)
        code = check_desc(c, "the output descriptor", out_desc, os, &out_span,
                          &out_total);
    if (code != TALLY_OK)
        return code;
    if (in == NULL || out == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "in and out must not be "
                            "NULL");
    if (in_desc->dtype != out_desc->dtype || in_desc->rank != out_desc->rank
        || memcmp(in_desc->sizes, out_desc->sizes,
                  sizeof *in_desc->sizes * (size_t)in_desc->rank)
               != 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "the output descriptor must have the input's "
                            "dtype and sizes");
    if (!tx_strides_disjoint(out_desc->rank, out_desc->sizes, os))
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "the output strides could make two elements "
                            "share an address");
    if (in == out && memcmp(is, os, sizeof *is * (size_t)in_desc->rank) != 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "in place, the two descriptors must have the "
                            "same strides");
    int rank = in_desc->rank;
    if (axis < -rank || axis >= rank)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "axis %d is out of range for rank %d", axis, rank);
    if (flags & ~(TALLY_EXCLUSIVE | TALLY_REVERSE))
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "unknown flags 0x%x",
                            flags & ~(TALLY_EXCLUSIVE | TALLY_REVERSE));
    if (axis < 0)
        axis += rank;

    /* the descriptor, as the DML-Operator header */
    size_t cap = 512 + (size_t)rank * 2 * 2 * 22, len = 0;
    char *hdr = malloc(cap);
    if (hdr == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    bool ok = put(hdr, cap, &len, "DML-Operator: {")
              && put_tensor(hdr, cap, &len, "InputTensor", in_desc, is)
              && put(hdr, cap, &len, ",")
              && put_tensor(hdr, cap, &len, "OutputTensor", out_desc, os)
              && put(hdr, cap, &len,
                     ",\"Axis\":%d,\"AxisDirection\":%d,"
                     "\"HasExclusiveSum\":%d}",
                     axis, (flags & TALLY_REVERSE) ? 1 : 0,
                     (flags & TALLY_EXCLUSIVE) ? 1 : 0);
    if (!ok) {
        free(hdr);
        return tc_set_error(c, TALLYE_NOMEM, 0, "descriptor too long");
    }

    size_t size = tally_dt_size(in_desc->dtype);
    tc_transfer t = {
        .method = "POST",
        .path = strdup("/v1/cumsum"),
        .content_type = "application/octet-stream",
        .header = hdr,
        .body = in,
        /* the addressed bytes, or the whole buffer when its size is given */
        .body_len =
            in_desc->total_bytes ? (size_t)in_total : (size_t)in_span * size,
        .url = tc_next_url(c),
        .recv_cap = (size_t)out_total,
    };
    if (t.path == NULL) {
        free(hdr);
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    }
    tc_transfer *one = &t;
    tc_run(c, &one, 1);
    code = t.code;
    if (code == TALLY_OK && t.recv_len != out_total) {
        code = tc_set_error(c, TALLYE_PROTOCOL, t.status,
                            "the server answered %zu bytes, not the %" PRIu64
                            " of the output buffer",
                            t.recv_len, out_total);
    } else if (code == TALLY_OK) {
        /* the addressed elements, and no other byte */
        const char *src = t.grown;
        char *dst = out;
        uint64_t idx[TALLY_MAX_RANK] = {0}, off = 0;
        for (;;) {
            memcpy(dst + off * size, src + off * size, size);
            int k = rank - 1;
            while (k >= 0 && ++idx[k] == out_desc->sizes[k]) {
                off -= (out_desc->sizes[k] - 1) * os[k];
                idx[k--] = 0;
            }
            if (k < 0)
                break;
            off += os[k];
        }
        tc_ok(c, t.status);
    } else {
        tc_set_error(c, code, t.status, "%s", t.msg);
    }
    (void)out_span;
    tc_transfer_clear(&t);
    free(hdr);
    return code;
}
