/*
 * tensor.c - validating a scan request and collapsing its shape.
 */
#include <inttypes.h>
#include <string.h>

#include "tensor.h"
#include "tx_strides.h"

eng_err eng_lines_from_desc(const eng_scan_desc *desc, eng_lines *out,
                            char *msg, size_t msglen)
{
    if ((unsigned)desc->dtype >= TX_NDTYPES)
        return eng_fail(msg, msglen, ENG_E_DTYPE,
                        "unknown dtype %d (expected one of %s)",
                        (int)desc->dtype, tx_dtype_list());
    if (desc->rank < 1)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "rank %d: a cumulative sum needs a tensor of rank 1 "
                        "or more",
                        desc->rank);
    if (desc->rank > ENG_MAX_RANK)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "rank %d is more than the %d supported", desc->rank,
                        ENG_MAX_RANK);

    int64_t rank = desc->rank, axis = desc->axis;
    if (axis < -rank || axis >= rank)
        return eng_fail(msg, msglen, ENG_E_AXIS,
                        "axis %" PRId64 " is out of range for a tensor of "
                        "rank %d (valid: %d to %d)",
                        axis, desc->rank, -desc->rank, desc->rank - 1);
    if (axis < 0)
        axis += rank;

    /* The total must fit even when some dimension is zero, so that a
     * declared shape cannot hide an overflow behind an empty one. */
    uint64_t outer = 1, inner = 1, total = 1;
    for (int64_t d = 0; d < rank; d++) {
        uint64_t s = desc->shape[d];
        if (s > 0 && !eng_mul_u64(total, s, &total))
            return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                            "shape overflows: the product of its dimensions "
                            "does not fit in 64 bits");
        if (d < axis)
            outer *= s;
        else if (d > axis)
            inner *= s;
    }
    uint64_t n = desc->shape[axis];
    uint64_t elements = outer * n * inner;
    size_t size = tx_dtype_size(desc->dtype);
    uint64_t bytes;
    if (!eng_mul_u64(total, size, &bytes) || bytes > SIZE_MAX / 2)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "tensor of %" PRIu64 " %s elements is too large", total,
                        tx_dtype_name(desc->dtype));

    out->dtype = desc->dtype;
    out->outer = outer;
    out->n = n;
    out->inner = inner;
    out->elements = elements;
    out->bytes = (size_t)(elements * size);
    out->exclusive = desc->exclusive;
    out->reverse = desc->reverse;
    return ENG_E_OK;
}

/* ------------------------------------------------------------------------
 * Strided layouts.
 */
typedef struct {
    uint64_t size, si, so;
} dim;

/* The packed (outer, n, inner) form of merged dims, if they have one. */
static bool as_packed(const dim *d, int nd, uint64_t n, uint64_t ri,
                      uint64_t ro, eng_lines *l)
{
    for (int k = 0; k < nd; k++)
        if (d[k].si != d[k].so)
            return false;
    if (n == 1) {
        if (nd == 0 || (nd == 1 && d[0].si == 1)) {
            l->outer = nd ? d[0].size : 1;
            l->n = 1;
            l->inner = 1;
            return true;
        }
        return false;
    }
    if (ri != ro)
        return false;
    if (nd == 0 && ri == 1) {
        l->outer = l->inner = 1;
        return true;
    }
    if (nd == 1 && d[0].si == 1 && ri == d[0].size) {
        l->outer = 1;
        l->inner = d[0].size;
        return true;
    }
    if (nd == 1 && ri == 1 && d[0].si == n) {
        l->outer = d[0].size;
        l->inner = 1;
        return true;
    }
    if (nd == 2 && d[1].si == 1 && ri == d[1].size
        && d[0].si == n * d[1].size) {
        l->outer = d[0].size;
        l->inner = d[1].size;
        return true;
    }
    return false;
}

/* Checks that a layout's last element lies in its buffer; *span is the
 * element count from the first to the last addressed. */
static eng_err check_buffer(const eng_scan_desc *desc, const eng_view *v,
                            const char *which, uint64_t *span, char *msg,
                            size_t msglen)
{
    uint64_t last;
    size_t size = tx_dtype_size(desc->dtype);
    if (!tx_strides_last_index(desc->rank, desc->shape, v->strides, &last)
        || last >= UINT64_MAX / size)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "the %s strides address elements beyond 2^64 bytes",
                        which);
    if (last + 1 > v->bytes / size)
        return eng_fail(msg, msglen, ENG_E_SHAPE,
                        "the %s strides address %" PRIu64 " bytes, more "
                        "than the %zu of its buffer",
                        which, (last + 1) * size, v->bytes);
    *span = last + 1;
    return ENG_E_OK;
}

eng_err eng_strided_from_desc(const eng_scan_desc *desc, const eng_view *in,
                              const eng_view *out, eng_strided *v, bool *packed,
                              char *msg, size_t msglen)
{
    memset(v, 0, sizeof *v);
    eng_err err = eng_lines_from_desc(desc, &v->l, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    *packed = true;
    if (v->l.elements == 0)
        return ENG_E_OK; /* nothing is addressed */
    err = check_buffer(desc, in, "input", &v->in_span, msg, msglen);
    if (err == ENG_E_OK)
        err = check_buffer(desc, out, "output", &v->out_span, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    if (out->strides != NULL
        && !tx_strides_disjoint(desc->rank, desc->shape, out->strides))
        return eng_fail(msg, msglen, ENG_E_SHAPE,
                        "the output strides let two elements share an "
                        "address");

    int rank = desc->rank;
    int axis = (int)(desc->axis < 0 ? desc->axis + rank : desc->axis);
    uint64_t packed_strides[ENG_MAX_RANK];
    tx_strides_packed(rank, desc->shape, packed_strides);
    const uint64_t *is = in->strides ? in->strides : packed_strides;
    const uint64_t *os = out->strides ? out->strides : packed_strides;

    /* the dimensions that move, by decreasing input stride */
    dim d[ENG_MAX_RANK];
    int nd = 0;
    for (int k = 0; k < rank; k++) {
        if (k == axis || desc->shape[k] == 1)
            continue;
        dim x = {desc->shape[k], is[k], os[k]};
        int i = nd++;
        while (i > 0
               && (d[i - 1].si < x.si
                   || (d[i - 1].si == x.si && d[i - 1].so < x.so))) {
            d[i] = d[i - 1];
            i--;
        }
        d[i] = x;
    }
    /* merge neighbours that are one dimension in both layouts; products
     * stay within the element count, which fits */
    int m = 0;
    for (int k = 0; k < nd; k++) {
        if (m > 0 && d[m - 1].si == d[k].size * d[k].si
            && d[m - 1].so == d[k].size * d[k].so) {
            d[m - 1].size *= d[k].size;
            d[m - 1].si = d[k].si;
            d[m - 1].so = d[k].so;
        } else {
            d[m++] = d[k];
        }
    }
    nd = m;

    uint64_t n = desc->shape[axis];
    v->ri = n > 1 ? is[axis] : 0;
    v->ro = n > 1 ? os[axis] : 0;
    if (as_packed(d, nd, n, v->ri, v->ro, &v->l))
        return ENG_E_OK;
    *packed = false;

    /* columns: the dimension nearest to contiguous in both layouts */
    int c = -1;
    for (int k = 0; k < nd; k++) {
        unsigned __int128 cost = (unsigned __int128)d[k].si + d[k].so;
        if (c < 0 || cost <= (unsigned __int128)d[c].si + d[c].so)
            c = k;
    }
    v->l.inner = c < 0 ? 1 : d[c].size;
    v->ci = c < 0 ? 0 : d[c].si;
    v->co = c < 0 ? 0 : d[c].so;
    v->l.outer = 1;
    for (int k = 0; k < nd; k++) {
        if (k == c)
            continue;
        v->osize[v->nouter] = d[k].size;
        v->oi[v->nouter] = d[k].si;
        v->oo[v->nouter] = d[k].so;
        v->nouter++;
        v->l.outer *= d[k].size;
    }
    return ENG_E_OK;
}

void eng_strided_outer(const eng_strided *v, uint64_t o, uint64_t *bi,
                       uint64_t *bo)
{
    uint64_t a = 0, b = 0;
    for (int k = v->nouter - 1; k >= 0; k--) {
        uint64_t i = o % v->osize[k];
        o /= v->osize[k];
        a += i * v->oi[k];
        b += i * v->oo[k];
    }
    *bi = a;
    *bo = b;
}
