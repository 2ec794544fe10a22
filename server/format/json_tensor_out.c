/*
 * json_tensor_out.c - tensor text out: streamed in chunks as the transport
 * asks for it, or rendered at once in parts that the cores share
 * (fanout.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "fanout.h"
#include "json.h"
#include "numtext.h"

size_t json_writer_read(json_writer *w, char *out, size_t max)
{
    size_t n = 0, per = numtext_max_len(w->dtype) + 1;
    while (n < max && w->stage < 3) {
        if (w->stage == 0 || w->stage == 2) {
            const char *s = w->stage == 0 ? w->prefix : w->suffix;
            size_t len = w->stage == 0 ? w->prefix_len : w->suffix_len;
            size_t take = len - w->pos < max - n ? len - w->pos : max - n;
            if (take > 0)
                memcpy(out + n, s + w->pos, take);
            n += take;
            w->pos += take;
            if (w->pos == len) {
                w->stage++;
                w->pos = 0;
            }
            continue;
        }
        /* elements: flush what is pending, then format the next ones */
        if (w->pend_pos < w->pend_len) {
            size_t take = w->pend_len - w->pend_pos;
            if (take > max - n)
                take = max - n;
            memcpy(out + n, w->pending + w->pend_pos, take);
            n += take;
            w->pend_pos += take;
            continue;
        }
        if (w->next == w->count) {
            w->stage = 2;
            continue;
        }
        uint64_t k = (max - n) / per, left = w->count - w->next;
        if (k > 0) { /* as many as surely fit, straight into out */
            if (k > left)
                k = left;
            n += numtext_print_list(w->dtype, w->data, (size_t)w->next,
                                   (size_t)(w->next + k), out + n);
            w->next += k;
            continue;
        }
        /* the room left is less than one element may take */
        w->pend_len = numtext_print_list(w->dtype, w->data, (size_t)w->next,
                                        (size_t)w->next + 1, w->pending);
        w->pend_pos = 0;
        w->next++;
    }
    return n;
}

/* One thread's share of json_writer_render(): elements [a, b) at dst. */
typedef struct {
    const json_writer *w;
    uint64_t a, b;
    char *dst;
    size_t n;
} render_part;

static void render_part_run(void *arg)
{
    render_part *p = arg;
    p->n = numtext_print_list(p->w->dtype, p->w->data, (size_t)p->a,
                             (size_t)p->b, p->dst);
}

bool json_writer_render(json_writer *w, unsigned parts_n, json_text *out)
{
    const size_t per = numtext_max_len(w->dtype) + 1; /* and its comma */
    unsigned threads = parts_n < 1 ? 1 : parts_n;
    if (threads > JSON_MAX_PIECES)
        threads = JSON_MAX_PIECES;
    size_t fixed = w->prefix_len + w->suffix_len;
    if (w->count > (SIZE_MAX - fixed) / per)
        return false;
    /* [prefix][part 0's room][part 1's room]...[suffix's room]: each part
     * is written where its room starts, and sent from there, so the text
     * is never moved */
    char *buf = eng_buffer_alloc(fixed + (size_t)w->count * per);
    if (buf == NULL)
        return false;
    render_part parts[JSON_MAX_PIECES];
    for (unsigned k = 0; k < threads; k++) {
        parts[k].w = w;
        parts[k].a = w->count * k / threads;
        parts[k].b = w->count * (k + 1) / threads;
        parts[k].dst = buf + w->prefix_len + (size_t)parts[k].a * per;
        parts[k].n = 0;
    }
    fanout_run(render_part_run, parts, sizeof parts[0], threads);
    memcpy(buf, w->prefix, w->prefix_len);
    render_part *last = &parts[threads - 1];
    memcpy(last->dst + last->n, w->suffix, w->suffix_len);
    out->buf = buf;
    out->n = 0;
    for (unsigned k = 0; k < threads; k++) {
        size_t off = (size_t)(parts[k].dst - buf), len = parts[k].n;
        if (k == 0) {
            off = 0;
            len += w->prefix_len;
        }
        if (k == threads - 1)
            len += w->suffix_len;
        if (len == 0)
            continue;
        out->piece[out->n].off = off;
        out->piece[out->n].len = len;
        out->n++;
    }
    json_writer_free(w);
    return true;
}

bool json_writer_init(json_writer *w, bool ok, char *prefix, size_t prefix_len,
                      char *suffix, size_t suffix_len,
                      const eng_scan_desc *desc, const void *data)
{
    memset(w, 0, sizeof *w);
    if (!ok) {
        free(prefix);
        free(suffix);
        return false;
    }
    uint64_t count = 1;
    for (int d = 0; d < desc->rank; d++)
        count *= desc->shape[d];
    w->prefix = prefix;
    w->prefix_len = prefix_len;
    w->suffix = suffix;
    w->suffix_len = suffix_len;
    w->dtype = desc->dtype;
    w->data = data;
    w->count = count;
    return true;
}

void json_writer_free(json_writer *w)
{
    free(w->prefix);
    free(w->suffix);
    w->prefix = w->suffix = NULL;
}
