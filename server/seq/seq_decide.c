/*
 * seq_decide.c - a chunk's decision at its turn (seq_int.h): its
 * sequence's state read, the rules of seq_rules.h applied to it, and the
 * new state written by compare-and-set, or its sequence's idle time
 * renewed, until the chunk ends (seq_line_end) or waits early
 * (seq_line_park).
 *
 * A local store's state is the truth, read at once. A shared store's is
 * read only when this tallyd's cache has none: a decision taken on the
 * cache is a guess, which a write's compare-and-set confirms (a version
 * never repeats: kv.h), and anything but a write is decided again on a
 * state just read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "seq_int.h"
#include "seq_rules.h"
#include "sequence_file.h"

#define MAX_ROUNDS 64 /* writes that found another version, at most */

static void decide(seq_chunk *c, kv_version version, const uint8_t *rec,
                   size_t len, bool fresh);

/* The chunk's end: the carries it was given go with a success only. */
static void end(seq_chunk *c, status_code st, const char *msg)
{
    if (st != STATUS_OK) {
        free(c->base);
        c->base = NULL;
    }
    seq_line_end(c, st, msg);
}

/* The chunk's end on a failure of the store's: 503 STORE, "sequence ID:
 * WHAT (WHY); THEN". */
static void end_store(seq_chunk *c, const char *what, const char *why,
                      const char *then)
{
    char id[SEQ_ID_MAX + 8], msg[512];
    seq_id_format(&c->id, id, sizeof id);
    snprintf(msg, sizeof msg, "sequence %s: %s (%s); %s", id, what,
             why != NULL ? why : "no reason given", then);
    end(c, STATUS_STORE, msg);
}

/* An op's deadline, sent delay_ms from now: the store's time from then,
 * or the request's own deadline when that comes first. */
static uint64_t op_deadline(const seq_chunk *c, uint64_t delay_ms)
{
    uint64_t now = now_ns();
    uint64_t d = now + (delay_ms + c->t->o.store_timeout_ms) * 1000000u;
    uint64_t req = c->s->deadline_ns;
    if (req != 0 && req < d)
        d = req > now ? req : now + 1;
    return d;
}

/* ------------------------------------------------------------ reading */

static void on_get(void *ctx, kv_result res, kv_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    seq_chunk *c = ctx;
    if (res != KV_OK) {
        end_store(c, "its state could not be read from the store", why,
                  "nothing was added: send the chunk again");
        return;
    }
    if (!c->store->local)
        seq_cache_copy(c->t, &c->key, version, rec, len);
    decide(c, version, rec, len, true);
}

/* Reads the sequence's state, then decides on it. */
static void read_state(seq_chunk *c)
{
    if (!c->store->ops->get(c->store, c->key.key, c->key.keylen, 0,
                            op_deadline(c, 0), on_get, c))
        end(c, STATUS_STORE,
            "the sequence's state could not be read: the store is closing "
            "or memory ran out");
}

void seq_decide_begin(seq_chunk *c)
{
    kv_version version = {0, 0};
    uint8_t *rec;
    size_t len;
    /* an early chunk's next look reads the truth: the cache is this
     * tallyd's own last word, which it has decided on already */
    if (c->store->local || c->polls > 0
        || !seq_cache_get(c->t, &c->key, &version, &rec, &len)) {
        read_state(c);
        return;
    }
    decide(c, version, rec, len, false);
    free(rec);
}

/* ------------------------------------------------------------ writing */

/* The words of a local store's refusal for room. */
static void full_words(seq_chunk *c, char *msg, size_t len)
{
    seq_table *t = c->t;
    kv_stats st;
    t->store->ops->stats(t->store, &st);
    char id[SEQ_ID_MAX + 8];
    seq_id_format(&c->id, id, sizeof id);
    if (st.records >= t->o.max_sequences)
        snprintf(msg, len,
                 "sequence %s: %zu sequences are live, as many as the "
                 "server keeps (--max-sequences); end one, or retry once "
                 "one has ended or expired",
                 id, st.records);
    else
        snprintf(msg, len,
                 "sequence %s: the live sequences' carries take %zu of the "
                 "%zu bytes the server allows (--sequence-max-bytes), and "
                 "this one needs %zu more; retry once one has ended or "
                 "expired",
                 id, st.bytes, t->o.max_bytes,
                 (size_t)c->count * sizeof(eng_carry)
                     * (c->id.has_chunk ? 2 : 1));
}

static void write_done(seq_chunk *c)
{
    seq_table *t = c->t;
    mutex_lock(&t->mu);
    t->writing--;
    mutex_unlock(&t->mu);
}

static void on_put(void *ctx, kv_result res, kv_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    seq_chunk *c = ctx;
    seq_table *t = c->t;
    write_done(c);
    if (res == KV_OK) {
        if (!c->store->local) {
            uint8_t *kept = c->del ? NULL : c->rec; /* the cache's now */
            if (!c->del)
                c->rec = NULL;
            seq_cache_put(t, &c->key, version, kept, c->reclen, false);
        }
        mutex_lock(&t->mu);
        t->c.started += c->starts;
        t->c.ended += c->s->end && (c->starts || !c->was_closed);
        t->c.late += c->late;
        t->c.applied += c->id.has_chunk;
        mutex_unlock(&t->mu);
        c->started = c->starts || c->started;
        end(c, STATUS_OK, NULL);
        return;
    }
    free(c->base);
    c->base = NULL;
    free(c->rec);
    c->rec = NULL;
    if (res == KV_FULL) {
        char msg[512];
        full_words(c, msg, sizeof msg);
        seq_count(t, &t->c.refused);
        end(c, STATUS_SEQUENCES_FULL, msg);
    } else if (res == KV_FAILED && c->store->local) {
        end_store(c, "its new state could not be written to the log", why,
                  "nothing was added: send the chunk again");
    } else if (res == KV_FAILED) {
        /* it may have been applied: what this tallyd knows is no more */
        seq_cache_put(t, &c->key, (kv_version){0, 0}, NULL, 0, true);
        end_store(c, "its new state could not be written to Redis", why,
                  "the chunk may or may not have been added: send it again "
                  "(a numbered chunk sent again is answered once)");
    } else if (++c->rounds > MAX_ROUNDS) {
        char first[64];
        snprintf(first, sizeof first, "%d writes of other chunks came first",
                 MAX_ROUNDS);
        end_store(c, "its state kept changing under its write", first,
                  "nothing was added: send the chunk again");
    } else { /* another version is there: another chunk came first */
        seq_count(t, &t->c.races);
        if (!c->store->local)
            seq_cache_copy(t, &c->key, version, rec, len);
        decide(c, version, rec, len, true);
    }
}

/* Whether the table still takes writes (a drain that timed out stops
 * them), counting this one; else the chunk ends. */
static bool start_write(seq_chunk *c)
{
    seq_table *t = c->t;
    mutex_lock(&t->mu);
    bool frozen = t->frozen;
    if (!frozen)
        t->writing++;
    mutex_unlock(&t->mu);
    if (frozen)
        end(c, STATUS_DRAINING,
            "the server is shutting down (its drain timed out); the chunk "
            "was not added: send it again");
    return !frozen;
}

/* The sequence's new state after the chunk, on cur (NULL: a start),
 * written if its version is still `version`. */
static void write_state(seq_chunk *c, kv_version version,
                        const seq_file_entry *cur)
{
    seq_table *t = c->t;
    seq_slot *s = c->s;
    size_t n = c->count ? c->count : 1;
    eng_carry few[16]; /* the new carries, until they are encoded */
    eng_carry *base = calloc(n, sizeof *base);
    eng_carry *next = n <= 16 ? few : malloc(n * sizeof *next);
    if (base == NULL || next == NULL) {
        free(base);
        if (next != few)
            free(next);
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries");
        return;
    }
    if (cur != NULL)
        memcpy(base, cur->carry, c->count * sizeof *base);
    memcpy(next, base, c->count * sizeof *next);
    eng_carry_add(next, s->totals, c->count, c->is_float);
    /* ended by this chunk, or still ended (a late chunk after the end) */
    bool late = cur != NULL && c->was_closed;
    bool closed = s->end || late;
    seq_file_entry x;
    seq_record_init(&x, &c->id, &c->desc, closed ? SEQ_ENDED : SEQ_LIVE,
                    wall_ms() + (int64_t)t->o.idle_ms, c->count, next);
    if (c->id.has_chunk)
        seq_record_numbered(&x, c->id.chunk, s->end, s->sha, base);
    size_t reclen = 0;
    uint8_t *rec = seq_file_encode(&x, 1, &reclen);
    if (next != few)
        free(next);
    if (rec == NULL) {
        free(base);
        end(c, STATUS_NOMEM, "out of memory writing a sequence's state");
        return;
    }
    free(c->base);
    free(c->rec);
    c->base = base;
    c->rec = rec;
    c->reclen = reclen;
    c->del = closed && !c->id.has_chunk && t->o.linger_ms == 0;
    /* a live sequence lives idle_ms from its last applied chunk; an ended
     * one from its end: linger_ms (unnumbered) or idle_ms (numbered, for
     * a repeat of its end), which a late chunk does not renew */
    uint64_t ttl = late                         ? KV_KEEP_TTL
                   : closed && !c->id.has_chunk ? t->o.linger_ms
                                                : t->o.idle_ms;
    if (!start_write(c))
        return;
    /* the bound of bytes counts the carries: 8 a line, 16 numbered */
    size_t weight = (size_t)n * sizeof(eng_carry) * (c->id.has_chunk ? 2 : 1);
    if (!c->store->ops->put(c->store, c->key.key, c->key.keylen, version,
                            c->del ? NULL : rec, reclen, ttl,
                            closed ? 0 : KV_COUNTED, weight, op_deadline(c, 0),
                            on_put, c)) {
        write_done(c);
        end(c, STATUS_STORE,
            "the sequence's state could not be written: the store is "
            "closing or memory ran out");
    }
    /* c may have ended already: not touched */
}

/* A repeat's answer goes once its sequence's idle time is renewed, as
 * an answered chunk renews it. A renewal that found another version (a
 * chunk written meanwhile, or the sequence gone) decides again on it. A
 * renewal that failed (the log's disk full, Redis gone) leaves the idle
 * time as it was, and the repeat is answered all the same: it was
 * decided on the state just read, and its answer is what its client
 * lost. */
static void on_touch(void *ctx, kv_result res, kv_version version,
                     const uint8_t *rec, size_t len, const char *why)
{
    seq_chunk *c = ctx;
    seq_table *t = c->t;
    (void)why;
    if (res == KV_CONFLICT && ++c->rounds > MAX_ROUNDS) {
        end_store(c, "its state kept changing under its renewal",
                  "other chunks came first", "send the chunk again");
    } else if (res == KV_CONFLICT) {
        seq_count(t, &t->c.races);
        if (!c->store->local)
            seq_cache_copy(t, &c->key, version, rec, len);
        free(c->base);
        c->base = NULL;
        decide(c, version, rec, len, true);
    } else {
        seq_count(t, &t->c.repeats);
        end(c, STATUS_OK, NULL);
    }
}

/* A numbered chunk that is the last applied one again (cur: its state,
 * just read at version): answered from the carries before it. A live
 * sequence's idle time is renewed first; an ended one keeps its own. */
static void repeat(seq_chunk *c, kv_version version, const seq_file_entry *cur,
                   bool closed)
{
    seq_table *t = c->t;
    size_t n = c->count ? c->count : 1;
    free(c->base);
    c->base = malloc(n * sizeof *c->base);
    if (c->base == NULL) {
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries");
        return;
    }
    memcpy(c->base, cur->prev, c->count * sizeof *c->base);
    if (closed) {
        seq_count(t, &t->c.repeats);
        end(c, STATUS_OK, NULL);
        return;
    }
    if (!c->store->ops->touch(c->store, c->key.key, c->key.keylen, version,
                              t->o.idle_ms, op_deadline(c, 0), on_touch, c))
        end(c, STATUS_STORE,
            "the sequence's state could not be renewed: the store is "
            "closing or memory ran out");
}

/* ------------------------------------------------------------ deciding */

/* A chunk that waits for chunk `next`: refused once it has waited
 * reorder_ms from its arrival and its line lacks a chunk it waits for;
 * else parked until its line moves, its wait runs out, or (a shared
 * store) its next read. */
static void early(seq_chunk *c, uint64_t next)
{
    seq_table *t = c->t;
    bool past = seq_now(t) - c->since_ns >= t->o.reorder_ms * 1000000u;
    if (past && !seq_line_holds(c, next)) {
        char msg[512];
        seq_rule_gap(&c->id, c->id.chunk, next, t->o.reorder_ms, msg,
                     sizeof msg);
        seq_count(t, &t->c.gaps);
        end(c, STATUS_CHUNK_GAP, msg);
        return;
    }
    seq_line_park(c, past);
}

/* The state a decision is taken on: rec decoded into *cur (NULL: none)
 * and seen as the rules see it (*v). False when rec holds no state of
 * this sequence: a guess is read again, a fresh one ends the chunk (503). */
static bool state_of(seq_chunk *c, const uint8_t *rec, size_t len, bool fresh,
                     seq_file_entry **cur, size_t *n, seq_view *v)
{
    seq_table *t = c->t;
    *cur = NULL;
    *n = 0;
    if (rec != NULL) {
        char err[256];
        size_t most =
            t->o.max_bytes > SIZE_MAX / 2 ? SIZE_MAX : t->o.max_bytes * 2;
        bool ok = seq_file_decode(rec, len, 1, most, cur, n, err, sizeof err);
        if (ok
            && (*n != 1 || !seq_id_equal(&(*cur)->id, &c->id)
                || (*cur)->state == SEQ_GONE)) {
            snprintf(err, sizeof err, "it holds another sequence");
            ok = false;
        }
        if (!ok) {
            seq_file_free(*cur, *n);
            *cur = NULL;
            *n = 0;
            if (!fresh)
                read_state(c);
            else
                end_store(c, "its state in the store cannot be read", err,
                          "nothing was added");
            return false;
        }
    }
    const seq_file_entry *e = *cur;
    *v = (seq_view){
        .exists = e != NULL,
        .numbered = e != NULL && e->numbered,
        .closed = e != NULL && e->state == SEQ_ENDED,
        .last_end = e != NULL && e->last_end,
        .applied = e != NULL ? e->applied : 0,
        .last_sha = e != NULL ? e->sha : NULL,
        .desc = e != NULL ? &e->desc : NULL,
    };
    return true;
}

/* A refusal of the rules (STATUS_INVALID, or a conflict), counted. */
static void refuse(seq_chunk *c, int rule, const char *msg)
{
    seq_table *t = c->t;
    mutex_lock(&t->mu);
    t->c.refused++;
    t->c.conflicts += rule == SEQ_RULE_CONFLICT;
    mutex_unlock(&t->mu);
    end(c, rule == SEQ_RULE_CONFLICT ? STATUS_CHUNK_CONFLICT : STATUS_INVALID,
        msg);
}

/* A numbered chunk the rules take, decided on a state just read: applied,
 * a repeat, early, or a conflict. */
static void numbered_step(seq_chunk *c, kv_version version,
                          const seq_file_entry *cur, const seq_view *v)
{
    char msg[512];
    switch (seq_rule_outcome(v, &c->id, c->s->sha, msg, sizeof msg)) {
    case SEQ_OUT_APPLY: write_state(c, version, cur); return;
    case SEQ_OUT_REPEAT: repeat(c, version, cur, v->closed); return;
    case SEQ_OUT_EARLY: early(c, cur->applied + 1); return;
    default:
        seq_count(c->t, &c->t->c.conflicts);
        end(c, STATUS_CHUNK_CONFLICT, msg);
        return;
    }
}

/* An orphan (behind a start that did not start its sequence): an
 * unnumbered one is refused; a numbered one goes on only where the
 * state it finds takes it (a retry of chunk 1 came), and else waits for
 * chunk 1. True when it was dealt with here. */
static bool orphan(seq_chunk *c, int rule, const seq_view *v)
{
    if (!c->orphan || c->id.start)
        return false;
    char msg[512];
    if (!c->id.has_chunk) {
        char id[SEQ_ID_MAX + 8];
        seq_id_format(&c->id, id, sizeof id);
        snprintf(msg, sizeof msg,
                 "sequence %s: the sequence_start sent before this chunk "
                 "did not start the sequence, so there is none to add it "
                 "to; nothing changed: start it again",
                 id);
        refuse(c, SEQ_RULE_INVALID, msg);
        return true;
    }
    int x = rule == SEQ_RULE_TAKE
                ? seq_rule_outcome(v, &c->id, c->s->sha, msg, sizeof msg)
                : SEQ_OUT_CONFLICT;
    if (x == SEQ_OUT_APPLY || x == SEQ_OUT_REPEAT)
        return false;
    early(c, 1);
    return true;
}

/* Decides what the chunk does to its sequence's state (version and
 * record; NULL: none), either just read (fresh) or this tallyd's cached
 * guess. c may have ended, or be another thread's, when this returns. */
static void decide(seq_chunk *c, kv_version version, const uint8_t *rec,
                   size_t len, bool fresh)
{
    seq_table *t = c->t;
    char msg[512];
    seq_file_entry *cur;
    size_t n;
    seq_view v;
    bool late = false;
    if (!state_of(c, rec, len, fresh, &cur, &n, &v))
        return;
    c->was_closed = v.closed;
    int rule = seq_rule_admit(&v, &c->id, &c->desc, c->s->sha, t->o.idle_ms,
                              &late, msg, sizeof msg);
    c->starts = rule == SEQ_RULE_START;
    c->late = late;
    if (rule == SEQ_RULE_START) {
        write_state(c, version, NULL);
    } else if (!fresh) {
        /* anything but a write is decided on the truth */
        if (rule == SEQ_RULE_TAKE && !c->orphan
            && (!c->id.has_chunk
                || seq_rule_outcome(&v, &c->id, c->s->sha, msg, sizeof msg)
                       == SEQ_OUT_APPLY))
            write_state(c, version, cur);
        else
            read_state(c);
    } else {
        /* a start the rules take as a retry of chunk 1 starts nothing,
         * and orphans nothing */
        c->started = c->id.start && rule != SEQ_RULE_INVALID;
        if (orphan(c, rule, &v)) {
        } else if (rule != SEQ_RULE_TAKE) {
            refuse(c, rule, msg);
        } else if (!c->id.has_chunk) {
            write_state(c, version, cur);
        } else {
            numbered_step(c, version, cur, &v);
        }
    }
    seq_file_free(cur, n);
}
