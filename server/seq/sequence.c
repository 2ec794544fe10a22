/*
 * sequence.c - the sequences' engine (sequence.h): the table over its
 * store, a chunk's admission and its slot, the limits of a shared store,
 * the cache of its states, and /metrics. A chunk's line is seq_line.c's,
 * its decision seq_decide.c's.
 *
 * The cache: a shared store's last word on each sequence this tallyd
 * served (its version and record), in a map from key and a list from
 * the least recently used, under the mutex. A decision taken on it is
 * only a guess (seq_decide.c). A local store needs none: its answer is
 * the truth, and comes at once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "seq_int.h"
#include "seq_rules.h"
#include "sequence_file.h"
#include "tx_dtype.h"

uint64_t seq_now(const seq_table *t)
{
    return t->o.clock != NULL ? t->o.clock(t->o.clock_user) : now_ns();
}

void seq_count(seq_table *t, uint64_t *counter)
{
    mutex_lock(&t->mu);
    (*counter)++;
    mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------ the table */

seq_table *seq_table_new(const seq_options *o, kv *store)
{
    seq_table *t = calloc(1, sizeof *t);
    if (t == NULL) {
        if (store != NULL)
            store->ops->close(store);
        return NULL;
    }
    t->o = *o;
    t->store = o->max_sequences > 0 ? store : NULL;
    if (t->store == NULL && store != NULL)
        store->ops->close(store);
    list_init(&t->lru);
    if (!keymap_init(&t->lines) || !keymap_init(&t->cache)
        || mutex_init(&t->mu) != 0) {
        keymap_free(&t->lines);
        keymap_free(&t->cache);
        if (t->store != NULL)
            t->store->ops->close(t->store);
        free(t);
        return NULL;
    }
    return t;
}

void seq_close(seq_table *t)
{
    if (t != NULL && t->store != NULL && t->store->ops->flush != NULL)
        t->store->ops->flush(t->store);
}

static void uncache(seq_table *t, seq_cached *e)
{
    keymap_remove(&t->cache, &e->node);
    list_remove(&e->lru);
    t->cached_bytes -= e->len;
    free(e->rec);
    free(e);
}

void seq_table_drop(seq_table *t)
{
    if (t == NULL)
        return;
    seq_line_drop_all(t);
    while (!list_empty(&t->lru))
        uncache(t, container_of(list_first(&t->lru), seq_cached, lru));
    keymap_free(&t->lines);
    keymap_free(&t->cache);
    free(t->near);
    mutex_destroy(&t->mu);
    free(t);
}

void seq_table_free(seq_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nnear; i++)
        if (t->near[i] != NULL)
            t->near[i]->ops->close(t->near[i]);
    /* the store last: a chunk still waiting for it (a drain that timed
     * out) fails with "the store is closing" */
    if (t->store != NULL)
        t->store->ops->close(t->store);
    seq_table_drop(t);
}

bool seq_enabled(const seq_table *t)
{
    return t != NULL && t->store != NULL;
}

uint64_t seq_idle_ms(const seq_table *t)
{
    return t->o.idle_ms;
}

/* ------------------------------------------------------------ the slot */

/* What a slot holds, let go. */
static void slot_drop(seq_slot *s)
{
    if (s->totals != &s->one)
        free(s->totals);
    s->totals = NULL;
    free(s->copy);
    s->copy = NULL;
    free(s->base);
    s->base = NULL;
}

/* Reads the chunk into s: its totals, a float16 or bfloat16 input's
 * copy, a numbered chunk's SHA-256; refuses a chunk whose carries alone
 * pass max_bytes (STATUS_TOO_LARGE: 8 bytes a line, 16 in a numbered
 * sequence), and fails when memory runs out (STATUS_NOMEM). */
static status_code slot_fill(const seq_params *p, const eng_scan_desc *d,
                             const eng_lines *l, const void *in,
                             size_t max_bytes, seq_slot *s, char *msg,
                             size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    uint64_t count;
    size_t per = sizeof(eng_carry) * (p->has_chunk ? 2 : 1);
    if (!eng_mul_u64(l->outer, l->inner, &count) || count > max_bytes / per)
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "sequence %s: a chunk of this shape keeps a carry for each "
            "of its lines, %zu bytes each%s, and they would take more "
            "than --sequence-max-bytes (%zu) alone",
            id, per, p->has_chunk ? " in a numbered sequence" : "", max_bytes);
    s->lines = *l;
    s->start = p->start;
    s->end = p->end;
    s->totals = &s->one;
    s->copy = NULL;
    s->base = NULL;
    if (count > 1) {
        s->totals = malloc(count * sizeof *s->totals);
        if (s->totals == NULL) {
            s->totals = &s->one;
            return msg_fail_as(STATUS_NOMEM, msg, msglen,
                               "out of memory for a chunk's totals");
        }
    }
    memset(s->totals, 0, (count ? count : 1) * sizeof *s->totals);
    eng_carry_totals(l, in, s->totals); /* before any lock: it reads it all */
    if (eng_carry_rescans(l->dtype) && l->bytes > 0) {
        s->copy = malloc(l->bytes);
        if (s->copy == NULL) {
            slot_drop(s);
            return msg_fail_as(STATUS_NOMEM, msg, msglen,
                               "out of memory keeping a chunk's input");
        }
        memcpy(s->copy, in, l->bytes);
    }
    s->numbered = p->has_chunk;
    s->chunk = p->chunk;
    if (p->has_chunk && !seq_rule_sha(d, in, l->bytes, s->sha)) {
        slot_drop(s);
        return msg_fail_as(STATUS_NOMEM, msg, msglen,
                           "out of memory hashing a chunk's input");
    }
    return STATUS_OK;
}

void seq_answer(seq_slot *s)
{
    slot_drop(s);
}

/* The store's key of sequence p. */
static void key_of(const seq_params *p, keymap_node *k)
{
    uint8_t b[SEQ_KEY_MAX];
    keymap_key(k, b, seq_record_key(p, b));
}

/* ------------------------------------------------------------ the steps */

/* A shared store's limits on this tallyd's chunks in flight: STATUS_OK,
 * or a refusal with msg. Under the mutex. */
static status_code inflight_room(seq_table *t, const seq_params *p, size_t need,
                                 char *msg, size_t msglen)
{
    LOCK_HELD(&t->mu);
    char id[SEQ_ID_MAX + 8];
    if (t->inflight >= t->o.max_sequences) {
        seq_id_format(p, id, sizeof id);
        return msg_fail_as(
            STATUS_SEQUENCES_FULL, msg, msglen,
            "sequence %s: %zu chunks of sequences are in flight on this "
            "replica, as many as --max-sequences allows with "
            "--state-store; retry after a moment",
            id, t->inflight);
    }
    if (need > t->o.max_bytes - t->inflight_bytes) {
        seq_id_format(p, id, sizeof id);
        return msg_fail_as(
            STATUS_SEQUENCES_FULL, msg, msglen,
            "sequence %s: the carries of the chunks in flight on this "
            "replica take %zu of the %zu bytes it allows "
            "(--sequence-max-bytes), and this one needs %zu more; "
            "retry after a moment",
            id, t->inflight_bytes, t->o.max_bytes, need);
    }
    return STATUS_OK;
}

status_code seq_admit(seq_table *t, const seq_params *p, const eng_scan_desc *d,
                      const eng_lines *l, const void *in, seq_slot *s,
                      char *msg, size_t msglen)
{
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
    status_code st = slot_fill(p, d, l, in, t->o.max_bytes, s, msg, msglen);
    if (st != STATUS_OK)
        return st;
    seq_chunk *c = calloc(1, sizeof *c);
    if (c == NULL) {
        slot_drop(s);
        return msg_fail_as(STATUS_NOMEM, msg, msglen,
                           "out of memory for a chunk");
    }
    c->t = t;
    c->store = s->near != NULL ? s->near : t->store;
    c->s = s;
    c->id = *p;
    c->desc = *d;
    c->count = eng_carry_count(l);
    c->need = (size_t)c->count * sizeof(eng_carry) * (p->has_chunk ? 2 : 1);
    c->is_float = tx_dtype_kind(d->dtype) == TX_KIND_FLOAT;
    c->since_ns = seq_now(t);
    key_of(p, &c->key);
    mutex_lock(&t->mu);
    if (!t->store->local)
        st = inflight_room(t, p, c->need, msg, msglen);
    if (st == STATUS_OK && !seq_line_join(t, c)) {
        snprintf(msg, msglen, "out of memory for a chunk");
        st = STATUS_NOMEM;
    }
    if (st == STATUS_OK && !t->store->local) {
        t->inflight++;
        t->inflight_bytes += c->need;
    }
    if (st != STATUS_OK)
        t->c.refused++;
    mutex_unlock(&t->mu);
    if (st != STATUS_OK) {
        free(c);
        slot_drop(s);
        return st;
    }
    s->c = c;
    return STATUS_OK;
}

void seq_finish(seq_table *t, seq_slot *s, bool ok)
{
    (void)t;
    seq_chunk *c = s->c;
    if (ok)
        seq_line_ready(c);
    else
        seq_line_end(c, STATUS_OK, NULL); /* it did not run: no change */
}

void seq_sweep(seq_table *t)
{
    if (!seq_enabled(t))
        return;
    OWNER_CLAIM(&t->sweeper);
    if (t->store->ops->sweep != NULL)
        t->store->ops->sweep(t->store);
    seq_line_sweep(t);
}

bool seq_freeze(seq_table *t, uint64_t wait_ms)
{
    if (!seq_enabled(t))
        return true;
    mutex_lock(&t->mu);
    t->frozen = true;
    for (uint64_t waited = 0; t->writing > 0 && waited < wait_ms; waited++) {
        mutex_unlock(&t->mu);
        uv_sleep(1);
        mutex_lock(&t->mu);
    }
    bool still = t->writing == 0;
    mutex_unlock(&t->mu);
    return still;
}

/* ------------------------------------------------------------ the cache */

bool seq_cache_get(seq_table *t, const keymap_node *k, kv_version *version,
                   uint8_t **rec, size_t *len)
{
    *rec = NULL;
    *len = 0;
    mutex_lock(&t->mu);
    keymap_node *n = keymap_find(&t->cache, k);
    seq_cached *e = n != NULL ? container_of(n, seq_cached, node) : NULL;
    bool hit = e != NULL;
    if (hit && e->rec != NULL) {
        *rec = malloc(e->len);
        if (*rec == NULL)
            hit = false;
        else
            memcpy(*rec, e->rec, e->len);
        *len = e->len;
    }
    if (hit) {
        *version = e->version;
        list_remove(&e->lru);
        list_push_back(&t->lru, &e->lru);
    }
    mutex_unlock(&t->mu);
    return hit;
}

void seq_cache_put(seq_table *t, const keymap_node *k, kv_version version,
                   uint8_t *rec, size_t len, bool forget)
{
    bool keep = !forget && len <= t->o.max_bytes;
    mutex_lock(&t->mu);
    keymap_node *n = keymap_find(&t->cache, k);
    seq_cached *e = n != NULL ? container_of(n, seq_cached, node) : NULL;
    if (e != NULL && !keep) {
        uncache(t, e);
        e = NULL;
    } else if (e != NULL) {
        list_remove(&e->lru);
        t->cached_bytes -= e->len;
        free(e->rec);
        e->rec = NULL;
        e->len = 0;
    } else if (keep && (e = calloc(1, sizeof *e)) != NULL) {
        e->node = *k;
        keymap_add(&t->cache, &e->node);
    }
    if (e != NULL) {
        e->version = version;
        e->rec = rec;
        e->len = rec != NULL ? len : 0;
        list_push_back(&t->lru, &e->lru);
        t->cached_bytes += e->len;
        rec = NULL;
        while (t->cache.n > t->o.max_sequences
               || t->cached_bytes > t->o.max_bytes)
            uncache(t, container_of(list_first(&t->lru), seq_cached, lru));
    }
    mutex_unlock(&t->mu);
    free(rec);
}

void seq_cache_copy(seq_table *t, const keymap_node *k, kv_version version,
                    const uint8_t *rec, size_t len)
{
    uint8_t *copy = NULL;
    if (rec != NULL && (copy = malloc(len ? len : 1)) != NULL)
        memcpy(copy, rec, len);
    seq_cache_put(t, k, version, copy, len, rec != NULL && copy == NULL);
}

/* ------------------------------------------------------------ the loops */

void *seq_loop_open(seq_table *t, struct mailbox *mb)
{
    if (!seq_enabled(t) || t->store->ops->open_on == NULL)
        return NULL;
    char msg[256];
    mutex_lock(&t->mu);
    if (t->nnear == t->near_cap) {
        size_t cap = t->near_cap ? t->near_cap * 2 : 8;
        kv **v = realloc(t->near, cap * sizeof *v);
        if (v != NULL) {
            t->near = v;
            t->near_cap = cap;
        }
    }
    size_t i = t->nnear; /* its place, kept: NULL until it is open */
    bool room = i < t->near_cap;
    if (room)
        t->near[t->nnear++] = NULL;
    mutex_unlock(&t->mu);
    kv *st =
        room ? t->store->ops->open_on(t->store, mb, msg, sizeof msg) : NULL;
    if (st == NULL) {
        log_msg("sequences", "warn",
                "no connection to the state store on a door's loop (%s): "
                "the store's own thread serves its chunks",
                room ? msg : "out of memory");
        return NULL;
    }
    mutex_lock(&t->mu);
    t->near[i] = st;
    mutex_unlock(&t->mu);
    return st;
}

void seq_loop_close(seq_table *t, void *near)
{
    (void)t;
    kv *k = near;
    if (k != NULL && k->ops->stop != NULL)
        k->ops->stop(k); /* closed with the table, once no thread uses it */
}

/* ------------------------------------------------------------ /metrics */

size_t seq_live(seq_table *t)
{
    if (!seq_enabled(t))
        return 0;
    if (t->store->local) {
        kv_stats st;
        t->store->ops->stats(t->store, &st);
        return st.records;
    }
    mutex_lock(&t->mu);
    size_t n = t->cache.n;
    mutex_unlock(&t->mu);
    return n;
}

/* The shared store's lines: its connections' stats, summed. */
static void render_store(seq_table *t, textbuf *o, uint64_t races)
{
    kv_stats st;
    t->store->ops->stats(t->store, &st);
    mutex_lock(&t->mu);
    for (size_t i = 0; i < t->nnear; i++) {
        if (t->near[i] == NULL)
            continue;
        kv_stats n;
        t->near[i]->ops->stats(t->near[i], &n);
        st.up = st.up && n.up;
        st.answered += n.answered;
        st.rtt_ns += n.rtt_ns;
        st.failures += n.failures;
        st.reconnects += n.reconnects;
    }
    mutex_unlock(&t->mu);
    metrics_one(o, "tally_state_store_up", "gauge",
                "Whether the connection to the sequences' shared store "
                "(--state-store) is up.",
                "%d", st.up ? 1 : 0);
    metrics_one(o, "tally_state_store_commands_total", "counter",
                "Reads and writes the store answered.", "%" PRIu64,
                st.answered);
    metrics_one(o, "tally_state_store_round_trip_seconds_total", "counter",
                "Time from sending those commands to their answers.", "%.9f",
                (double)st.rtt_ns / 1e9);
    metrics_one(o, "tally_state_store_failures_total", "counter",
                "Reads and writes that failed: the connection lost, no answer "
                "within the chunk's time, or an error from Redis (their "
                "chunks answered 503).",
                "%" PRIu64, st.failures);
    metrics_one(o, "tally_state_store_reconnects_total", "counter",
                "Connections to the store made again after one was lost.",
                "%" PRIu64, st.reconnects);
    metrics_one(o, "tally_state_store_races_total", "counter",
                "Writes that found another version of their sequence "
                "(another replica's chunk came first), decided again.",
                "%" PRIu64, races);
    metrics_one(o, "tally_state_store_durability", "gauge",
                "What Redis's configuration says its acknowledged writes "
                "survive: 2 a power loss (appendfsync always), 1 a restart of "
                "Redis (an append-only file), 0 nothing since its last "
                "snapshot (appendonly no), -1 unknown (CONFIG refused, or not "
                "asked yet).",
                "%d", st.durability);
}

void seq_render_metrics(seq_table *t, textbuf *o)
{
    seq_counts c = {0};
    size_t live = 0, bytes = 0;
    uint64_t expired = 0;
    if (seq_enabled(t)) {
        kv_stats st;
        t->store->ops->stats(t->store, &st);
        mutex_lock(&t->mu);
        c = t->c;
        live = t->store->local ? st.records : t->cache.n;
        bytes =
            t->store->local ? st.bytes : t->cached_bytes + t->inflight_bytes;
        mutex_unlock(&t->mu);
        expired = st.expired;
    }
    uint64_t refused =
        c.refused + (t != NULL ? atomic_load(&t->refused_off) : 0);
    metrics_one(o, "tally_sequences_live", "gauge",
                "Sequences live now (Triton's sequence extension).", "%zu",
                live);
    metrics_one(o, "tally_sequence_carry_bytes", "gauge",
                "Bytes the live sequences' carries take (--sequence-max-bytes "
                "bounds them).",
                "%zu", bytes);
    metrics_family(o, "tally_sequences_total", "counter",
                   "Sequences started, ended by their last chunk, or expired "
                   "after --sequence-idle-ms.");
    textbuf_put(o,
                "tally_sequences_total{event=\"started\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"ended\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"expired\"} %" PRIu64 "\n",
                c.started, c.ended, expired);
    metrics_one(o, "tally_sequence_refusals_total", "counter",
                "Chunks refused for their sequence: not live, unlike its "
                "first chunk, or no room for another.",
                "%" PRIu64, refused);
    metrics_one(o, "tally_sequence_late_chunks_total", "counter",
                "Chunks that arrived after their sequence's last one (sent "
                "before it, on another connection), taken within "
                "--sequence-linger-ms.",
                "%" PRIu64, c.late);
    metrics_family(o, "tally_sequence_numbered_chunks_total", "counter",
                   "Numbered chunks (sequence_chunk) by outcome: applied, "
                   "repeat (answered again, not added), conflict (409: a "
                   "number taken by another input, or overtaken) or gap "
                   "(409: the chunks before it did not come within "
                   "--sequence-reorder-ms).");
    textbuf_put(o,
                "tally_sequence_numbered_chunks_total{outcome=\"applied\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"repeat\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"conflict\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"gap\"} "
                "%" PRIu64 "\n",
                c.applied, c.repeats, c.conflicts, c.gaps);
    if (!seq_enabled(t))
        return;
    if (!t->store->local)
        render_store(t, o, c.races);
    else if (t->store->ops->render_metrics != NULL)
        t->store->ops->render_metrics(t->store, o);
}
