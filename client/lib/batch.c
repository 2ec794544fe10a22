/*
 * batch.c - the calls that run requests: batches, tally_cumsum() (a batch
 * of one) and tally_http().
 *
 * A batch is a list of jobs (job.c). Running it gathers the transfers of
 * every job not yet run into one list, hands the list to tc_run(), which
 * keeps TALLYOPT_MAX_CONNECTIONS of them in flight, and then lets each job
 * stitch its answers into its output.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tx_fnv.h"

typedef struct {
    tc_job *job;
    bool ran;
    tally_code code;
    long status;
    char *msg; /* NULL for "" */
} item;

struct tally_batch {
    tally_client *c;
    item *items;
    size_t n, cap;
};

TALLY_API tally_batch *tally_batch_new(tally_client *c)
{
    if (c == NULL)
        return NULL;
    tally_batch *b = calloc(1, sizeof *b);
    if (b != NULL)
        b->c = c;
    return b;
}

static void batch_clear(tally_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        tc_job_free(b->items[i].job);
        free(b->items[i].msg);
    }
    free(b->items);
}

TALLY_API void tally_batch_free(tally_batch *b)
{
    if (b == NULL)
        return;
    batch_clear(b);
    free(b);
}

TALLY_API tally_code tally_batch_add(tally_batch *b, tally_dt dtype, int rank,
                                     const int64_t *shape, int axis,
                                     unsigned flags, const void *in, void *out)
{
    if (b == NULL)
        return TALLYE_ARGUMENT;
    tally_client *c = b->c;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        item *p = realloc(b->items, cap * sizeof *p);
        if (p == NULL)
            return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
        b->items = p;
        b->cap = cap;
    }
    tc_job *job;
    char msg[TC_MSG];
    tally_code code = tc_job_new(c, dtype, rank, shape, axis, flags, in, out,
                                 &job, msg, sizeof msg);
    if (code != TALLYE_OK)
        return tc_set_error(c, code, 0, "%s", msg);
    b->items[b->n++] = (item){.job = job};
    return tc_ok(c, 0);
}

static void set_item(item *it, tally_code code, long status, const char *msg)
{
    it->ran = true;
    it->code = code;
    it->status = status;
    free(it->msg);
    it->msg = msg[0] ? strdup(msg) : NULL;
}

TALLY_API tally_code tally_batch_run(tally_batch *b)
{
    if (b == NULL)
        return TALLYE_ARGUMENT;
    tally_client *c = b->c;
    char msg[TC_MSG];

    /* every transfer of every item not yet run */
    size_t total = 0;
    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->ran)
            continue;
        tc_transfer **t;
        size_t n;
        tally_code code = tc_job_transfers(it->job, &t, &n, msg, sizeof msg);
        if (code != TALLYE_OK)
            set_item(it, code, 0, msg);
        else
            total += n;
    }
    tc_transfer **all = total ? malloc(total * sizeof *all) : NULL;
    if (total > 0 && all == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        tc_transfer **t;
        size_t n;
        if (b->items[i].ran
            || tc_job_transfers(b->items[i].job, &t, &n, msg, sizeof msg)
                   != TALLYE_OK)
            continue;
        if (n > 0)
            memcpy(all + k, t, n * sizeof *t);
        k += n;
    }
    tc_run(c, all, total);
    free(all);

    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->ran)
            continue;
        long status;
        tally_code code = tc_job_finish(it->job, &status, msg, sizeof msg);
        set_item(it, code, status, msg);
        /* the answers are in the output now; the job's memory can go */
        tc_job_free(it->job);
        it->job = NULL;
    }

    for (size_t i = 0; i < b->n; i++) {
        item *it = &b->items[i];
        if (it->code != TALLYE_OK)
            return tc_set_error(c, it->code, it->status, "%s",
                                it->msg ? it->msg : "");
    }
    return tc_ok(c, b->n ? b->items[b->n - 1].status : 0);
}

TALLY_API size_t tally_batch_count(const tally_batch *b)
{
    return b ? b->n : 0;
}

TALLY_API tally_code tally_batch_code(const tally_batch *b, size_t i)
{
    return b && i < b->n ? b->items[i].code : TALLYE_ARGUMENT;
}

TALLY_API long tally_batch_status(const tally_batch *b, size_t i)
{
    return b && i < b->n ? b->items[i].status : 0;
}

TALLY_API const char *tally_batch_message(const tally_batch *b, size_t i)
{
    return b && i < b->n && b->items[i].msg ? b->items[i].msg : "";
}

TALLY_API tally_code tally_cumsum(tally_client *c, tally_dt dtype, int rank,
                                  const int64_t *shape, int axis,
                                  unsigned flags, const void *in, void *out)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    tally_batch one = {.c = c};
    tally_code code =
        tally_batch_add(&one, dtype, rank, shape, axis, flags, in, out);
    if (code == TALLYE_OK)
        code = tally_batch_run(&one);
    batch_clear(&one);
    return code;
}

/* ------------------------------------------------------------------------
 * Sequences: a chunk that failed with an unknown outcome is the only one
 * its sequence may send next (tally.h; pending.c keeps them).
 */
/* FNV-1a over what makes a chunk the same chunk: its number, flags,
 * dtype, shape, axis and bytes. */
static uint64_t chunk_hash(uint64_t chunk, unsigned flags, tally_dt dtype,
                           int rank, const int64_t *shape, int axis,
                           const void *in)
{
    int64_t head[4] = {(int64_t)chunk, (int64_t)flags, (int64_t)dtype, axis};
    uint64_t h = tx_fnv1a64(head, sizeof head);
    h = tx_fnv1a64_from(h, shape, (size_t)rank * sizeof *shape);
    size_t n = tally_dt_size(dtype);
    for (int d = 0; d < rank; d++)
        n *= (size_t)shape[d]; /* checked by tally_batch_add() */
    return tx_fnv1a64_from(h, in, n);
}

/* Whether a code leaves the chunk's outcome unknown: it may have been
 * applied, or not, and only sending it again settles it. */
static bool unknown_outcome(tally_code code)
{
    switch (code) {
    case TALLYE_CONNECT:
    case TALLYE_TIMEOUT:
    case TALLYE_NETWORK:
    case TALLYE_BUSY:
    case TALLYE_SERVER:
    case TALLYE_PROTOCOL: return true;
    default: return false;
    }
}

TALLY_API tally_code tally_sequence_forget(tally_client *c,
                                           const char *sequence_id)
{
    if (c == NULL || sequence_id == NULL)
        return c == NULL ? TALLYE_ARGUMENT
                         : tc_set_error(c, TALLYE_ARGUMENT, 0,
                                        "the sequence id is NULL");
    tc_pending_drop(c, tc_pending_of(c, sequence_id));
    return tc_ok(c, 0);
}

TALLY_API tally_code tally_cumsum_chunk(tally_client *c,
                                        const char *sequence_id,
                                        uint64_t chunk, tally_dt dtype,
                                        int rank, const int64_t *shape,
                                        int axis, unsigned flags,
                                        const void *in, void *out)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    unsigned seq = flags & (TALLY_SEQUENCE_START | TALLY_SEQUENCE_END);
    tally_batch one = {.c = c};
    tally_code code =
        tally_batch_add(&one, dtype, rank, shape, axis, flags & ~seq, in, out);
    if (code == TALLYE_OK) {
        char msg[200];
        code = tc_job_sequence(one.items[0].job, sequence_id, seq, chunk,
                               msg, sizeof msg);
        if (code != TALLYE_OK)
            tc_set_error(c, code, 0, "%s", msg);
    }
    uint64_t h = 0;
    struct tc_pending *p = NULL;
    if (code == TALLYE_OK) {
        h = chunk_hash(chunk, flags, dtype, rank, shape, axis, in);
        p = tc_pending_of(c, sequence_id);
        if (p != NULL && p->hash != h) {
            code = tc_set_error(
                c, TALLYE_ARGUMENT, 0,
                "sequence %.128s: its chunk %llu failed (%s), and it may or "
                "may not have been added: send that chunk again (the same "
                "number, flags, shape and bytes) before any other, or call "
                "tally_sequence_forget() to give the sequence up",
                sequence_id, (unsigned long long)p->chunk,
                tally_code_name(p->code));
            batch_clear(&one);
            return code;
        }
    }
    if (code == TALLYE_OK)
        code = tally_batch_run(&one);
    batch_clear(&one);
    if (p == NULL && code != TALLYE_OK && unknown_outcome(code))
        tc_pending_add(c, sequence_id, chunk, h, code);
    else if (p != NULL && !unknown_outcome(code))
        tc_pending_drop(c, p); /* settled */
    return code;
}

/* ------------------------------------------------------------------------
 * Any request.
 */
TALLY_API tally_code tally_http(tally_client *c, const char *method,
                                const char *path, const char *content_type,
                                const void *body, size_t body_len,
                                char **response, size_t *response_len)
{
    if (response != NULL)
        *response = NULL;
    if (response_len != NULL)
        *response_len = 0;
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (method == NULL || path == NULL || response == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "method, path and response must not be NULL");
    if (path[0] != '/')
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "the path \"%.100s\" must start with /", path);
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0
        && strcmp(method, "PUT") != 0 && strcmp(method, "DELETE") != 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "method \"%.20s\" is not GET, POST, PUT or DELETE",
                            method);
    if (body == NULL && body_len > 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "the body is NULL but body_len is %zu", body_len);
    tc_transfer t = {
        .method = method,
        .path = strdup(path),
        .content_type = content_type,
        .body = body,
        .body_len = body_len,
        .recv_cap = (size_t)c->max_response_bytes,
    };
    if (t.path == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    tc_transfer *one = &t;
    tc_run(c, &one, 1);
    tally_code code = t.code;
    if (code == TALLYE_OK) {
        if (t.grown == NULL) /* an empty body */
            t.grown = calloc(1, 1);
        if (t.grown == NULL) {
            code = tc_set_error(c, TALLYE_NOMEM, t.status, "out of memory");
        } else {
            *response = t.grown;
            if (response_len != NULL)
                *response_len = t.recv_len;
            t.grown = NULL;
            tc_ok(c, t.status);
        }
    } else {
        tc_set_error(c, code, t.status, "%s", t.msg);
    }
    tc_transfer_clear(&t);
    return code;
}
