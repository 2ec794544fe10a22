/*
 * fake_replicas.c - replicas of the sequences' engine
 * (server/seq/sequence.h) on one fake store (tests/server/fake_kv.h),
 * for the model checker (driver.py --setup fake): the backend's own
 * decisions, under faults that a real Redis gives rarely or never on
 * demand. The store's answers come in an order this program draws
 * (connections interleaved at random, each connection's in order, as
 * Redis answers them); a write is lost on its way (not applied) or its
 * answer lost (applied); a replica is killed and comes back with a cold
 * cache, its chunks in flight lost either way.
 *
 *   model_fake --seed N --replicas R --idle-ms I --linger-ms L
 *              --reorder-ms O [--lost-permille P]
 *
 * Standard input, a line each:
 *   C ID REPLICA SEQ FLAGS CHUNK DTYPE N V1 .. VN
 *       a chunk: SEQ is n:NUMBER or s:STRING, FLAGS s (start), e (end),
 *       both or -, CHUNK its number (0: none), DTYPE int32 or int64;
 *   K REPLICA   the replica killed, and started again;
 *   Q           the counts, then exit.
 * Standard output, a line each:
 *   A ID 200 Y1 .. YN       the chunk's answer;
 *   A ID STATUS WORDS       its refusal (HTTP's status, tallyd's words);
 *   S delivered=.. conflicts=.. lost_before=.. lost_after=.. kills=..
 * Each chunk is answered exactly once; a lost one with 503.
 *
 * One thread: the chunks are admitted, scanned (here: the prefix sums of
 * the chunk alone, as the engine would give them) and finished as they
 * come; the store's requests are delivered between reads of the input.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "fake_kv.h"
#include "list.h"
#include "sequence.h"

#define MAX_REPLICAS 8
#define MAX_N 64

typedef struct {
    seq_slot s;
    list_node live; /* in its replica's chunks in flight */
    uint64_t id;
    int replica;
    tx_dtype dtype;
    size_t n;
    int64_t x[MAX_N], y[MAX_N];
} chunk;

static fake_kv *store;
static seq_options opts;
static seq_table *replicas[MAX_REPLICAS];
static kv *conns[MAX_REPLICAS]; /* each replica's, owned by its backend */
static list_node inflight[MAX_REPLICAS]; /* chunk's */
static uint64_t rng;
static unsigned lost_permille = 20;
static uint64_t lost_before, lost_after, kills;

static uint64_t draw(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void answer(chunk *c, status_code st, const char *msg)
{
    if (st == STATUS_OK) {
        printf("A %" PRIu64 " 200", c->id);
        for (size_t i = 0; i < c->n; i++)
            printf(" %" PRId64, c->dtype == TX_INT32
                                    ? (int64_t)((int32_t *)c->y)[i]
                                    : c->y[i]);
        printf("\n");
    } else {
        printf("A %" PRIu64 " %d %s\n", c->id, status_http(st),
               msg != NULL && msg[0] ? msg : status_name(st));
    }
    fflush(stdout);
    if (list_linked(&c->live))
        list_remove(&c->live);
    free(c);
}

static void on_done(seq_slot *s, status_code st, const char *msg)
{
    chunk *c = container_of(s, chunk, s);
    seq_answer(s);
    answer(c, st, msg);
}

static void new_replica(int i)
{
    conns[i] = fake_kv_connect(store);
    replicas[i] = seq_table_new(&opts, conns[i]);
    if (replicas[i] == NULL) {
        fprintf(stderr, "model_fake: out of memory\n");
        exit(2);
    }
}

/* The chunk's sequence parameters from its words; false: bad input. */
static bool params(const char *seq, const char *flags, uint64_t number,
                   seq_params *p)
{
    char msg[256];
    memset(p, 0, sizeof *p);
    bool ok =
        strncmp(seq, "n:", 2) == 0
            ? seq_id_number(p, strtoull(seq + 2, NULL, 10), msg, sizeof msg)
            : seq_id_string(p, seq + 2, strlen(seq + 2), msg, sizeof msg);
    p->start = strchr(flags, 's') != NULL;
    p->end = strchr(flags, 'e') != NULL;
    return ok && (number == 0 || seq_chunk_number(p, number, msg, sizeof msg));
}

static void on_chunk(char *line)
{
    uint64_t id = 0, number = 0;
    int replica = 0, n = 0, used = 0;
    char seq[200], flags[8], dtype[8];
    if (sscanf(line, "C %" SCNu64 " %d %199s %7s %" SCNu64 " %7s %d%n", &id,
               &replica, seq, flags, &number, dtype, &n, &used)
            != 7
        || replica < 0 || replica >= MAX_REPLICAS || replicas[replica] == NULL
        || n < 1 || n > MAX_N) {
        fprintf(stderr, "model_fake: a bad line: %s\n", line);
        exit(2);
    }
    chunk *c = calloc(1, sizeof *c);
    c->id = id;
    c->replica = replica;
    c->n = (size_t)n;
    c->dtype = strcmp(dtype, "int32") == 0 ? TX_INT32 : TX_INT64;
    char *at = line + used;
    int64_t acc = 0;
    for (int i = 0; i < n; i++) {
        int64_t v = strtoll(at, &at, 10);
        acc += v;
        if (c->dtype == TX_INT32) {
            ((int32_t *)c->x)[i] = (int32_t)v;
            ((int32_t *)c->y)[i] = (int32_t)acc;
        } else {
            c->x[i] = v;
            c->y[i] = acc;
        }
    }
    list_push_back(&inflight[replica], &c->live);
    seq_params p;
    if (!params(seq, flags, number, &p)) {
        answer(c, STATUS_INVALID, "bad sequence parameters");
        return;
    }
    eng_scan_desc d = {.dtype = c->dtype, .rank = 1, .shape = {c->n}};
    eng_lines l;
    char msg[512];
    if (eng_lines_from_desc(&d, &l, msg, sizeof msg) != ENG_E_OK) {
        answer(c, STATUS_INVALID, msg);
        return;
    }
    seq_table *t = replicas[replica];
    c->s.done = on_done;
    c->s.out = c->y;
    status_code st = seq_admit(t, &p, &d, &l, c->x, &c->s, msg, sizeof msg);
    if (st != STATUS_OK) {
        answer(c, st, msg);
        return;
    }
    seq_finish(t, &c->s, true);
}

/* A delivery's fate, as drawn. */
static fake_fate fate(void)
{
    uint64_t r = draw() % 1000;
    if (r < lost_permille / 2)
        return lost_before++, FAKE_LOST_BEFORE;
    if (r < lost_permille)
        return lost_after++, FAKE_LOST_AFTER;
    return FAKE_APPLY;
}

/* Delivers the store's requests in a drawn order, a few at a time, so
 * that the chunks that arrive meanwhile overtake some of them. */
static void deliver_some(void)
{
    for (int k = 0; k < 8; k++) {
        size_t due = fake_kv_pending(store);
        if (due == 0)
            return;
        fake_kv_deliver(store, draw() % due, fate());
    }
}

/* The replica killed: what it had sent may or may not have reached the
 * store; its chunks end (503), and it starts again with a cold cache. */
static void kill_replica(int i)
{
    kills++;
    while (fake_kv_queued(store, conns[i]) > 0)
        if (!fake_kv_deliver_from(store, conns[i],
                                  draw() % 2 ? FAKE_LOST_BEFORE
                                             : FAKE_LOST_AFTER))
            break;               /* an early chunk's later read, not yet due */
    seq_table_free(replicas[i]); /* what still waited: no word from it */
    while (!list_empty(&inflight[i]))
        answer(container_of(list_first(&inflight[i]), chunk, live),
               STATUS_STORE, "the replica was killed");
    new_replica(i);
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    int nrep = 3;
    opts = (seq_options){.max_sequences = 1024,
                         .max_bytes = 1 << 24,
                         .idle_ms = 900,
                         .linger_ms = 400,
                         .reorder_ms = 250,
                         .store_timeout_ms = 1000};
    for (int i = 1; i + 1 < argc; i += 2) {
        uint64_t v = strtoull(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--seed") == 0)
            seed = v;
        else if (strcmp(argv[i], "--replicas") == 0)
            nrep = (int)v;
        else if (strcmp(argv[i], "--idle-ms") == 0)
            opts.idle_ms = v;
        else if (strcmp(argv[i], "--linger-ms") == 0)
            opts.linger_ms = v;
        else if (strcmp(argv[i], "--reorder-ms") == 0)
            opts.reorder_ms = v;
        else if (strcmp(argv[i], "--lost-permille") == 0)
            lost_permille = (unsigned)v;
    }
    if (nrep < 1 || nrep > MAX_REPLICAS) {
        fprintf(stderr, "model_fake: 1 to %d replicas\n", MAX_REPLICAS);
        return 2;
    }
    rng = seed;
    store = fake_kv_new(seed, NULL, NULL);
    for (int i = 0; i < MAX_REPLICAS; i++)
        list_init(&inflight[i]);
    for (int i = 0; i < nrep; i++)
        new_replica(i);
    char buf[8192];
    size_t have = 0;
    uint64_t last_sweep = 0;
    for (;;) {
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        int ready = poll(&pf, 1, fake_kv_pending(store) > 0 ? 0 : 1);
        if (ready > 0) {
            ssize_t got = read(0, buf + have, sizeof buf - 1 - have);
            if (got <= 0)
                break;
            have += (size_t)got;
            buf[have] = '\0';
            char *line = buf, *nl;
            while ((nl = strchr(line, '\n')) != NULL) {
                *nl = '\0';
                if (line[0] == 'C')
                    on_chunk(line);
                else if (line[0] == 'K')
                    kill_replica(atoi(line + 2) % nrep);
                else if (line[0] == 'Q')
                    goto done;
                line = nl + 1;
            }
            have = strlen(line);
            memmove(buf, line, have);
        }
        deliver_some();
        uint64_t now = uv_hrtime() / 1000000u;
        if (now - last_sweep >= 5) {
            for (int i = 0; i < nrep; i++)
                seq_sweep(replicas[i]);
            last_sweep = now;
        }
    }
done:
    for (;;) { /* every chunk answered */
        bool any = false;
        for (int i = 0; i < nrep; i++)
            any = any || !list_empty(&inflight[i]);
        if (!any)
            break;
        fake_kv_settle(store);
        for (int i = 0; i < nrep; i++)
            seq_sweep(replicas[i]);
        uv_sleep(1);
    }
    uint64_t delivered, conflicts;
    fake_kv_counts(store, &delivered, &conflicts);
    printf("S delivered=%" PRIu64 " conflicts=%" PRIu64 " lost_before=%" PRIu64
           " lost_after=%" PRIu64 " kills=%" PRIu64 "\n",
           delivered, conflicts, lost_before, lost_after, kills);
    fflush(stdout);
    for (int i = 0; i < nrep; i++)
        seq_table_free(replicas[i]);
    fake_kv_free(store);
    return 0;
}
