/*
 * seq_decide.c - a chunk's steps in the shared store's backend
 * (seq_remote_int.h): decided on its sequence's state with the rules of
 * seq_rules.h (the memory backend's, word for word), then read again, or
 * written by compare-and-set, or its sequence's idle time renewed, until
 * it ends and its submitter hears.
 *
 * A decision taken on the cache is only a guess: a write's compare-and-
 * set confirms it (a version never repeats for a key: kv.h), and
 * anything but a write is decided again on a state just read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "seq_remote_int.h"
#include "seq_rules.h"
#include "sequence_file.h"

#define MAX_ROUNDS 64  /* writes that found another version, at most */
#define POLL_MAX_MS 16 /* an early chunk's reads, this far apart at most */

/* The chunk's end: told to its submitter (sync: still on the caller's
 * thread, where seq_remote_finish() returns it). */
static void end(rchunk *c, status_code st, const char *msg, bool sync)
{
    free(c->base);
    c->base = NULL;
    free(c->rec);
    c->rec = NULL;
    if (sync) {
        c->st = st;
        snprintf(c->sync_msg, c->sync_msglen, "%s", msg != NULL ? msg : "");
        return;
    }
    seq_slot *s = c->s;
    char m[512];
    snprintf(m, sizeof m, "%s", msg != NULL ? msg : "");
    rchunk *next = seq_remote_release(c);
    s->durable(s, st, m);
    seq_decide_run_next(next);
}

/* The chunk's end on a failure of the store's: 503 STORE, "sequence ID:
 * WHAT (WHY); THEN". */
static void end_store(rchunk *c, const char *what, const char *why,
                      const char *then, bool sync)
{
    char id[SEQ_ID_MAX + 8], msg[512];
    seq_id_format(&c->id, id, sizeof id);
    snprintf(msg, sizeof msg, "sequence %s: %s (%s); %s", id, what, why, then);
    end(c, STATUS_STORE, msg, sync);
}

/* ---------------------------------------------------------- the steps */

/* An op's deadline, sent delay_ms from now: the store's time from then,
 * or the request's own deadline when that comes first. */
static uint64_t op_deadline(const rchunk *c, uint64_t delay_ms)
{
    uint64_t now = now_ns();
    uint64_t d = now + (delay_ms + c->r->timeout_ms) * 1000000u;
    if (c->req_deadline_ns != 0 && c->req_deadline_ns < d)
        d = c->req_deadline_ns > now ? c->req_deadline_ns : now + 1;
    return d;
}

static void on_get(void *ctx, kv_result res, kv_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    if (res != KV_OK) {
        end_store(c, "its state could not be read from Redis", why,
                  "nothing was added: send the chunk again", false);
        return;
    }
    seq_remote_cache_copy(c->r, &c->idkey, version, rec, len);
    seq_decide(c, version, rec, len, true, false);
}

/* Submits a read of the sequence's state (after delay_ms), which then
 * decides again; false when the store would not take it. */
static bool submit_read(rchunk *c, uint64_t delay_ms)
{
    return c->store->ops->get(c->store, c->key, c->keylen, delay_ms,
                              op_deadline(c, delay_ms), on_get, c);
}

static const char not_read[] =
    "the sequence's state could not be read: the store is closing or "
    "memory ran out";

/* Reads the sequence's state (after delay_ms), then decides again. */
bool seq_decide_read(rchunk *c, uint64_t delay_ms, bool sync)
{
    bool sent = submit_read(c, delay_ms);
    if (!sent)
        end(c, STATUS_STORE, not_read, sync);
    return sent;
}

/* Starts chunks whose turn came while they waited (parked): each reads
 * its sequence's state afresh (the chunk before it may have changed it
 * on another loop), on its own store. */
void seq_decide_run_next(rchunk *c)
{
    while (c != NULL) {
        if (submit_read(c, 0))
            return;
        seq_slot *s = c->s;
        rchunk *next = seq_remote_release(c);
        s->durable(s, STATUS_STORE, not_read);
        c = next;
    }
}

static void on_put(void *ctx, kv_result res, kv_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    seq_remote *r = c->r;
    if (res == KV_OK) {
        seq_slot_add_carries(c->s, c->out, c->base);
        uint8_t *kept = c->del ? NULL : c->rec; /* the cache's now */
        if (!c->del)
            c->rec = NULL;
        seq_remote_cache_put(r, &c->idkey, version, kept, c->reclen, false);
        uv_mutex_lock(&r->mu);
        if (c->starts)
            r->c.started++;
        if (c->s->end && (c->starts || !c->was_closed))
            r->c.ended++;
        if (c->late)
            r->c.late++;
        if (c->id.has_chunk)
            r->c.applied++;
        uv_mutex_unlock(&r->mu);
        end(c, STATUS_OK, NULL, false);
        return;
    }
    if (res == KV_FAILED) {
        /* it may have been applied: what this replica knows is no more */
        seq_remote_cache_put(r, &c->idkey, (kv_version){0, 0}, NULL, 0, true);
        end_store(c, "its new state could not be written to Redis", why,
                  "the chunk may or may not have been added: send it again "
                  "(a numbered chunk sent again is answered once)",
                  false);
        return;
    }
    /* another version is there: another chunk came first */
    seq_remote_count(r, &r->races);
    seq_remote_cache_copy(r, &c->idkey, version, rec, len);
    free(c->base);
    c->base = NULL;
    free(c->rec);
    c->rec = NULL;
    if (++c->rounds > MAX_ROUNDS) {
        char first[64];
        snprintf(first, sizeof first, "%d writes of other chunks came first",
                 MAX_ROUNDS);
        end_store(c, "its state kept changing under its write", first,
                  "nothing was added: send the chunk again", false);
        return;
    }
    seq_decide(c, version, rec, len, true, false);
}

/* The sequence's new state after the chunk, on cur (NULL: a start),
 * written if its version is still `version`: a start begins a new
 * incarnation of the key, so that no version of an older sequence of
 * the same id can ever match its own. */
static bool write_state(rchunk *c, kv_version version,
                        const seq_file_entry *cur, bool sync)
{
    seq_remote *r = c->r;
    seq_slot *s = c->s;
    size_t n = c->count ? c->count : 1;
    eng_carry few[16]; /* the new carries, until they are encoded */
    eng_carry *base = calloc(n, sizeof *base);
    eng_carry *next = n <= 16 ? few : malloc(n * sizeof *next);
    if (base == NULL || next == NULL) {
        free(base);
        if (next != few)
            free(next);
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries", sync);
        return false;
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
                    wall_ms() + (int64_t)r->o.idle_ms, c->count, next);
    if (c->id.has_chunk)
        seq_record_numbered(&x, c->id.chunk, s->end, s->sha, base);
    size_t reclen = 0;
    uint8_t *rec = seq_file_encode(&x, 1, &reclen);
    if (next != few)
        free(next);
    if (rec == NULL) {
        free(base);
        end(c, STATUS_NOMEM, "out of memory writing a sequence's state", sync);
        return false;
    }
    c->base = base;
    c->rec = rec;
    c->reclen = reclen;
    c->del = closed && !c->id.has_chunk && r->o.linger_ms == 0;
    /* a live sequence lives idle_ms from its last applied chunk; an ended
     * one from its end: linger_ms (unnumbered) or idle_ms (numbered, for
     * a repeat of its end), which a late chunk does not renew */
    uint64_t ttl = late                         ? KV_KEEP_TTL
                   : closed && !c->id.has_chunk ? r->o.linger_ms
                                                : r->o.idle_ms;
    if (!c->store->ops->put(c->store, c->key, c->keylen, version, cur == NULL,
                            c->del ? NULL : rec, c->reclen, ttl,
                            op_deadline(c, 0), on_put, c)) {
        end(c, STATUS_STORE,
            "the sequence's state could not be written: the store is "
            "closing or memory ran out",
            sync);
        return false;
    }
    return true;
}

/* A repeat's answer goes once its sequence's idle time is renewed, as an
 * answered chunk renews it in memory; whatever Redis says (a newer
 * version, written meanwhile, renewed it too; a failure only shortens
 * its life), the repeat was decided on the state just read. */
static void on_touch(void *ctx, kv_result res, kv_version version,
                     const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    (void)res, (void)version, (void)rec, (void)len, (void)why;
    seq_slot_add_carries(c->s, c->out, c->base);
    seq_remote_count(c->r, &c->r->c.repeats);
    end(c, STATUS_OK, NULL, false);
}

/* A numbered chunk that is the last applied one again (cur: its state,
 * just read at version): answered from the carries before it. A live
 * sequence's idle time is renewed first; an ended one keeps its own. */
static bool repeat(rchunk *c, kv_version version, const seq_file_entry *cur,
                   bool closed, bool sync)
{
    seq_remote *r = c->r;
    if (closed) {
        seq_slot_add_carries(c->s, c->out, cur->prev);
        seq_remote_count(r, &r->c.repeats);
        end(c, STATUS_OK, NULL, sync);
        return false;
    }
    size_t n = c->count ? c->count : 1;
    c->base = malloc(n * sizeof *c->base);
    if (c->base == NULL) {
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries", sync);
        return false;
    }
    memcpy(c->base, cur->prev, c->count * sizeof *c->base);
    if (!c->store->ops->touch(c->store, c->key, c->keylen, version,
                              r->o.idle_ms, op_deadline(c, 0), on_touch, c)) {
        end(c, STATUS_STORE,
            "the sequence's state could not be renewed: the store is "
            "closing or memory ran out",
            sync);
        return false;
    }
    return true;
}

/* An early chunk: reads again a little later, until reorder_ms from its
 * arrival; then refused as the table refuses it: chunk `next` never came
 * (absent: its sequence, whose start was admitted here before it, never
 * appeared: chunk 1). While this replica holds every chunk it waits for
 * (admitted, on their way to the store), it waits on, as memory's line
 * does: their writes may land after reorder_ms (a slow scan, or a store
 * that came back with its reads queued before their writes). */
static bool early(rchunk *c, bool absent, uint64_t next, bool sync)
{
    seq_remote *r = c->r;
    uint64_t now = now_ns(), until = c->since_ns + r->o.reorder_ms * 1000000u;
    bool past = now >= until;
    if (past && !seq_remote_line_holds(r, c, absent ? 1 : next)) {
        char msg[512];
        /* absent: its start never landed; it waited for chunk 1, as it
         * waits in memory behind a start that failed */
        seq_rule_gap(&c->id, c->id.chunk, absent ? 1 : next, r->o.reorder_ms,
                     msg, sizeof msg);
        seq_remote_count(r, &r->c.gaps);
        end(c, STATUS_CHUNK_GAP, msg, sync);
        return false;
    }
    uint64_t ms = (uint64_t)1 << (c->polls < 4 ? c->polls : 4);
    if (ms > POLL_MAX_MS)
        ms = POLL_MAX_MS;
    uint64_t left = past ? ms : (until - now + 999999) / 1000000;
    if (ms > left)
        ms = left;
    c->polls++;
    return seq_decide_read(c, ms, sync);
}

/* The state a decision is taken on: rec decoded into *cur (NULL: none)
 * and seen as the rules see it (*v). False when rec holds no state of
 * this sequence: a guess is read again, a fresh one ends the chunk (503);
 * *sent then says whether a read went out. */
static bool state_of(rchunk *c, const uint8_t *rec, size_t len, bool fresh,
                     bool sync, seq_file_entry **cur, size_t *n, seq_view *v,
                     bool *sent)
{
    seq_remote *r = c->r;
    *cur = NULL;
    *n = 0;
    if (rec != NULL) {
        char err[256];
        size_t most =
            r->o.max_bytes > SIZE_MAX / 2 ? SIZE_MAX : r->o.max_bytes * 2;
        bool ok = seq_file_decode(rec, len, 1, most, cur, n, err, sizeof err);
        if (ok
            && (*n != 1 || !seq_id_equal(&(*cur)->id, &c->id)
                || (*cur)->state == SEQ_GONE)) {
            snprintf(err, sizeof err, "it holds another sequence");
            ok = false;
        }
        if (!ok) {
            seq_file_free(*cur, *n);
            if (!fresh) {
                *sent = seq_decide_read(c, 0, sync);
                return false;
            }
            end_store(c, "its state in Redis cannot be read", err,
                      "nothing was added", sync);
            *sent = false;
            return false;
        }
    }
    const seq_file_entry *e = *cur;
    *v = (seq_view){
        .exists = e != NULL,
        .numbered = e != NULL && e->numbered,
        .closed = e != NULL && e->state == SEQ_ENDED,
        .applied = e != NULL ? e->applied : 0,
        .last_sha = e != NULL ? e->sha : NULL,
        .desc = e != NULL ? &e->desc : NULL,
    };
    return true;
}

/* A refusal of the rules (STATUS_INVALID, or a conflict), counted. */
static void refuse(rchunk *c, int rule, const char *msg, bool sync)
{
    seq_remote *r = c->r;
    uv_mutex_lock(&r->mu);
    r->c.refused++;
    if (rule == SEQ_RULE_CONFLICT)
        r->c.conflicts++;
    uv_mutex_unlock(&r->mu);
    end(c, rule == SEQ_RULE_CONFLICT ? STATUS_CHUNK_CONFLICT : STATUS_INVALID,
        msg, sync);
}

/* A numbered chunk the rules take, decided on a state just read: applied,
 * a repeat, early, or a conflict. */
static bool numbered_step(rchunk *c, kv_version version, seq_file_entry *cur,
                          const seq_view *v, bool sync)
{
    char msg[512];
    switch (
        seq_rule_outcome(v, &c->id, c->id.chunk, c->s->sha, msg, sizeof msg)) {
    case SEQ_OUT_APPLY:
        c->starts = false;
        c->late = false;
        return write_state(c, version, cur, sync);
    case SEQ_OUT_REPEAT: return repeat(c, version, cur, v->closed, sync);
    case SEQ_OUT_EARLY: return early(c, false, cur->applied + 1, sync);
    default:
        seq_remote_count(c->r, &c->r->c.conflicts);
        end(c, STATUS_CHUNK_CONFLICT, msg, sync);
        return false;
    }
}

/* Decides what the chunk does to its sequence's state (version and
 * record; NULL: none), which is either just read (fresh) or this
 * replica's cached guess. True: a read or a write was submitted, and c
 * is the store's thread's now; false: the chunk ended (end()). */
bool seq_decide(rchunk *c, kv_version version, const uint8_t *rec, size_t len,
                bool fresh, bool sync)
{
    seq_remote *r = c->r;
    char msg[512];
    seq_file_entry *cur;
    size_t n;
    seq_view v;
    bool late = false, sent = false;
    if (!state_of(c, rec, len, fresh, sync, &cur, &n, &v, &sent))
        return sent;
    c->was_closed = v.closed;
    int rule = seq_rule_admit(&v, &c->id, &c->desc, c->s->sha, r->o.linger_ms,
                              r->o.idle_ms, &late, msg, sizeof msg);
    if (rule == SEQ_RULE_START) {
        c->starts = true;
        c->late = false;
        sent = write_state(c, version, NULL, sync);
    } else if (!fresh) {
        /* anything but a write is decided on the truth */
        if (rule == SEQ_RULE_TAKE
            && (!c->id.has_chunk
                || seq_rule_outcome(&v, &c->id, c->id.chunk, c->s->sha, msg,
                                    sizeof msg)
                       == SEQ_OUT_APPLY)) {
            c->starts = false;
            c->late = late;
            sent = write_state(c, version, cur, sync);
        } else {
            sent = seq_decide_read(c, 0, sync);
        }
    } else if (rule == SEQ_RULE_INVALID && !v.exists && c->id.has_chunk
               && c->after_start) {
        /* its start, admitted here before it, is on its way to Redis: it
         * waits for it, as it waits in memory behind its start's turn */
        sent = early(c, true, 1, sync);
    } else if (rule != SEQ_RULE_TAKE) {
        refuse(c, rule, msg, sync);
    } else if (!c->id.has_chunk) {
        c->starts = false;
        c->late = late;
        sent = write_state(c, version, cur, sync);
    } else {
        sent = numbered_step(c, version, cur, &v, sync);
    }
    seq_file_free(cur, n);
    return sent;
}
