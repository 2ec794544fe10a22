/*
 * sequence.c - the sequence table (sequence.h): the one front of the
 * sequences, over one backend (seq_backend.h), and what every backend
 * shares: a chunk's slot, read and let go, and the carries added to an
 * answer.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "seq_backend.h"
#include "seq_rules.h"
#include "sequence.h"
#include "tx_dtype.h"

struct seq_table {
    seq_options o;
    seq_backend *b;            /* NULL: sequences off */
    atomic_ullong refused_off; /* chunks refused: sequences off */
};

seq_table *seq_table_new(const seq_options *o, seq_backend *b)
{
    seq_table *t = calloc(1, sizeof *t);
    if (t == NULL) {
        if (b != NULL)
            b->ops->free(b);
        return NULL;
    }
    t->o = *o;
    t->b = o->max_sequences > 0 ? b : NULL;
    if (t->b == NULL && b != NULL)
        b->ops->free(b);
    return t;
}

void seq_close(seq_table *t)
{
    if (t != NULL && t->b != NULL && t->b->ops->close != NULL)
        t->b->ops->close(t->b);
}

void seq_table_free(seq_table *t)
{
    if (t == NULL)
        return;
    if (t->b != NULL)
        t->b->ops->free(t->b);
    free(t);
}

bool seq_enabled(const seq_table *t)
{
    return t != NULL && t->b != NULL;
}

uint64_t seq_idle_ms(const seq_table *t)
{
    return t->o.idle_ms;
}

bool seq_durable(const seq_table *t)
{
    return seq_enabled(t) && t->b->durable;
}

/* ------------------------------------------------------------ the slot */

/* What a slot holds, let go. */
void seq_slot_drop(seq_slot *s)
{
    if (s->totals != &s->one)
        free(s->totals);
    s->totals = NULL;
    free(s->copy);
    s->copy = NULL;
}

status_code seq_slot_fill(const seq_params *p, const eng_scan_desc *d,
                          const eng_lines *l, const void *in, size_t max_bytes,
                          unsigned copies, seq_slot *s, char *msg,
                          size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    uint64_t count;
    size_t per = sizeof(eng_carry) * (p->has_chunk ? 2 : 1) * copies;
    if (!eng_mul_u64(l->outer, l->inner, &count) || count > max_bytes / per) {
        snprintf(msg, msglen,
                 "sequence %s: a chunk of this shape keeps a carry for each "
                 "of its lines, %zu bytes each%s%s, and they would take "
                 "more than --sequence-max-bytes (%zu) alone",
                 id, per, p->has_chunk ? " in a numbered sequence" : "",
                 copies > 1 ? " with the log's copy" : "", max_bytes);
        return STATUS_TOO_LARGE;
    }
    s->lines = *l;
    s->start = p->start;
    s->end = p->end;
    s->totals = &s->one;
    s->copy = NULL;
    if (count > 1) {
        s->totals = malloc(count * sizeof *s->totals);
        if (s->totals == NULL) {
            s->totals = &s->one;
            snprintf(msg, msglen, "out of memory for a chunk's totals");
            return STATUS_NOMEM;
        }
    }
    memset(s->totals, 0, (count ? count : 1) * sizeof *s->totals);
    eng_carry_totals(l, in, s->totals); /* before any lock: it reads it all */
    if (eng_carry_rescans(l->dtype) && l->bytes > 0) {
        s->copy = malloc(l->bytes);
        if (s->copy == NULL) {
            seq_slot_drop(s);
            snprintf(msg, msglen, "out of memory keeping a chunk's input");
            return STATUS_NOMEM;
        }
        memcpy(s->copy, in, l->bytes);
    }
    s->numbered = p->has_chunk;
    s->chunk = p->chunk;
    if (p->has_chunk && !seq_rule_sha(d, in, l->bytes, s->sha)) {
        seq_slot_drop(s);
        snprintf(msg, msglen, "out of memory hashing a chunk's input");
        return STATUS_NOMEM;
    }
    return STATUS_OK;
}

void seq_slot_add_carries(const seq_slot *s, void *out, const eng_carry *c)
{
    if (s->copy != NULL)
        eng_carry_scan(&s->lines, s->copy, out, c);
    else if (!eng_carry_zero(c, eng_carry_count(&s->lines)))
        eng_carry_apply(&s->lines, out, c);
}

/* ------------------------------------------------------------ the steps */

status_code seq_admit(seq_table *t, const seq_params *p, const eng_scan_desc *d,
                      const eng_lines *l, const void *in, seq_slot *s,
                      bool *wait, char *msg, size_t msglen)
{
    *wait = false;
    if (!seq_enabled(t)) {
        char id[SEQ_ID_MAX + 8];
        seq_id_format(p, id, sizeof id);
        snprintf(msg, msglen,
                 "sequence %s: this server keeps no sequences (it runs "
                 "with --max-sequences 0)",
                 id);
        if (t != NULL)
            atomic_fetch_add(&t->refused_off, 1);
        return STATUS_INVALID;
    }
    return t->b->ops->admit(t->b, p, d, l, in, s, wait, msg, msglen);
}

bool seq_arm(seq_table *t, seq_slot *s)
{
    return t->b->ops->arm(t->b, s);
}

status_code seq_finish(seq_table *t, seq_slot *s, bool ok, void *out, char *msg,
                       size_t msglen)
{
    bool later;
    return seq_finish_durable(t, s, ok, out, &later, msg, msglen);
}

status_code seq_finish_durable(seq_table *t, seq_slot *s, bool ok, void *out,
                               bool *later, char *msg, size_t msglen)
{
    return t->b->ops->finish(t->b, s, ok, out, later, msg, msglen);
}

void seq_sweep(seq_table *t)
{
    if (seq_enabled(t))
        t->b->ops->sweep(t->b);
}

bool seq_freeze(seq_table *t, uint64_t wait_ms)
{
    return !seq_enabled(t) || t->b->ops->freeze(t->b, wait_ms);
}

size_t seq_live(seq_table *t)
{
    if (!seq_enabled(t))
        return 0;
    seq_counts c;
    t->b->ops->counts(t->b, &c);
    return c.live;
}

void *seq_loop_open(seq_table *t, struct uv_loop_s *loop)
{
    if (!seq_enabled(t) || t->b->ops->loop_open == NULL)
        return NULL;
    return t->b->ops->loop_open(t->b, loop);
}

void seq_loop_close(seq_table *t, void *near)
{
    if (near != NULL && seq_enabled(t) && t->b->ops->loop_close != NULL)
        t->b->ops->loop_close(t->b, near);
}

/* ------------------------------------------------------------ /metrics */

void seq_render_metrics(seq_table *t, textbuf *o)
{
    seq_counts c = {0};
    if (seq_enabled(t))
        t->b->ops->counts(t->b, &c);
    size_t live = c.live, bytes = c.bytes;
    uint64_t started = c.started, ended = c.ended, expired = c.expired,
             refused = c.refused + atomic_load(&t->refused_off), late = c.late,
             applied = c.applied, repeats = c.repeats, conflicts = c.conflicts,
             gaps = c.gaps;
    textbuf_put(o,
                "# HELP tally_sequences_live Sequences live now (Triton's "
                "sequence extension).\n"
                "# TYPE tally_sequences_live gauge\n"
                "tally_sequences_live %zu\n"
                "# HELP tally_sequence_carry_bytes Bytes the live sequences' "
                "carries take (--sequence-max-bytes bounds them).\n"
                "# TYPE tally_sequence_carry_bytes gauge\n"
                "tally_sequence_carry_bytes %zu\n"
                "# HELP tally_sequences_total Sequences started, ended by "
                "their last chunk, or expired after --sequence-idle-ms.\n"
                "# TYPE tally_sequences_total counter\n"
                "tally_sequences_total{event=\"started\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"ended\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"expired\"} %" PRIu64 "\n"
                "# HELP tally_sequence_refusals_total Chunks refused for "
                "their sequence: not live, unlike its first chunk, or no "
                "room for another.\n"
                "# TYPE tally_sequence_refusals_total counter\n"
                "tally_sequence_refusals_total %" PRIu64 "\n"
                "# HELP tally_sequence_late_chunks_total Chunks that arrived "
                "after their sequence's last one (sent before it, on another "
                "connection), taken within --sequence-linger-ms.\n"
                "# TYPE tally_sequence_late_chunks_total counter\n"
                "tally_sequence_late_chunks_total %" PRIu64 "\n"
                "# HELP tally_sequence_numbered_chunks_total Numbered chunks "
                "(sequence_chunk) by outcome: applied, repeat (answered "
                "again, not added), conflict (409: a number taken by "
                "another input, or overtaken) or gap (409: the chunks "
                "before it did not come within --sequence-reorder-ms).\n"
                "# TYPE tally_sequence_numbered_chunks_total counter\n"
                "tally_sequence_numbered_chunks_total{outcome=\"applied\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"repeat\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"conflict\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"gap\"} "
                "%" PRIu64 "\n",
                live, bytes, started, ended, expired, refused, late, applied,
                repeats, conflicts, gaps);
    if (seq_enabled(t) && t->b->ops->render_metrics != NULL)
        t->b->ops->render_metrics(t->b, o);
}
