/*
 * internal.h - what libtally's modules share and its users never see.
 *
 * The pieces, from the bottom up:
 *   dtype.c     element types, and loading and storing elements as double
 *               or as uint64 (the arithmetic of split tensors);
 *   client.c    the handle: URLs, options, the last error, result codes;
 *   transfer.c  one HTTP exchange on a curl easy handle, and the loop that
 *               runs many at once on the client's curl multi handle, with
 *               retries and backoff;
 *   job.c       a cumulative sum as a set of transfers: planning the
 *               chunks, gathering them, stitching the answers with carries;
 *   pending.c   the sequences whose last chunk failed (tally_cumsum_chunk);
 *   batch.c     the public batch and tally_cumsum(), tally_http();
 *   npy.c       .npy files.
 *
 * Nothing here is thread-safe beyond what tally.h promises: a client and
 * everything hanging off it belong to one thread at a time.
 */
#ifndef TALLY_INTERNAL_H
#define TALLY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "tally.h"

#define TC_MSG 512

/* ---------------------------------------------------------------- dtype.c */

typedef enum { TC_FLOAT, TC_SIGNED, TC_UNSIGNED } tc_kind;

tc_kind tc_dt_kind(tally_dt t);

/* Element i of buf (of dtype t) as a double (floats, exactly) or as its
 * bits widened to 64 (integers; sign-extended for signed types). */
double tc_get_f(tally_dt t, const void *buf, size_t i);
uint64_t tc_get_u(tally_dt t, const void *buf, size_t i);

/* Stores v into element i: floats rounded once to nearest-even (float16 and
 * bfloat16 directly from double, with no double rounding), integers
 * truncated to the width (addition modulo 2^bits). */
void tc_set_f(tally_dt t, void *buf, size_t i, double v);
void tc_set_u(tally_dt t, void *buf, size_t i, uint64_t v);

/* ---------------------------------------------------------------- client.c */

struct tally_client {
    char **urls;
    size_t nurls;
    size_t next_url; /* round robin */

    long timeout_ms, connect_timeout_ms, retries, backoff_ms, backoff_max_ms;
    long chunk_bytes, max_connections, max_response_bytes, verbose, insecure;
    long shared_state; /* TALLYOPT_SHARED_STATE */
    /* the sequences whose last chunk failed with an unknown outcome: the
     * next call for one must send that chunk again (batch.c) */
    struct tc_pending *pending;
    size_t npending, pending_cap;
    char *token_header; /* "Authorization: Bearer ...", or NULL */
    char *user_agent;   /* or NULL for the default */
    char *cainfo;       /* a CA bundle's path, or NULL for the system's */

    CURLM *multi;  /* its connection cache keeps connections alive */
    CURL **easies; /* idle easy handles, for reuse */
    size_t neasies, easies_cap;
    uint64_t rng; /* backoff jitter */

    tally_code code;
    long status;
    char msg[TC_MSG];
};

/* Records an outcome on the client; returns code. */
tally_code tc_set_error(tally_client *c, tally_code code, long status,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
tally_code tc_ok(tally_client *c, long status);

/* An idle easy handle (reset), or a new one; NULL when memory runs out. */
CURL *tc_easy_get(tally_client *c);
/* Keeps the handle for reuse (or frees it when the pool is full). */
void tc_easy_put(tally_client *c, CURL *e);

/* The next URL index, in turn. */
size_t tc_next_url(tally_client *c);

/* ---------------------------------------------------------------- transfer.c
 */

typedef struct tc_transfer tc_transfer;

/* Called when a transfer has finished for good (success or final failure),
 * on the thread running tc_run(). */
typedef void (*tc_done_fn)(tc_transfer *t);

struct tc_transfer {
    /* set by the caller */
    const char *method;       /* "GET", "POST" */
    char *path;               /* owned: path and query after the base URL */
    const char *content_type; /* or NULL */
    const char *header;       /* one more "Name: value" line, or NULL */
    const void *body;         /* borrowed; or NULL */
    size_t body_len;
    size_t url;          /* index of the first URL to try */
    bool pinned;         /* retries stay on that URL (a sequence's home) */
    bool once; /* retried only when its connection was refused (nothing of
                * it reached a server): an unnumbered chunk of a sequence,
                * which a 503 or a broken connection may have added */
    void *recv;          /* a fixed buffer for a 200 answer, or NULL: grow */
    size_t recv_cap;     /* its size, or the limit on a grown buffer */
    size_t expect_bytes; /* a binary answer must be exactly this long */
    tally_dt expect_dtype;
    bool check_tensor;               /* check Tensor-Dtype and the length */
    bool (*prepare)(tc_transfer *t); /* before the first attempt, or NULL;
                                      * false fails it with t->code */
    tc_done_fn done;
    void *user;
    bool skip; /* set before it starts: finish unsent (a sibling failed) */

    /* results */
    tally_code code;
    long status;
    char msg[TC_MSG];
    char *grown; /* the body of a 2xx answer when recv was NULL; owned */
    size_t recv_len;

    /* private to transfer.c */
    CURL *easy;
    struct curl_slist *headers;
    int attempts;
    uint64_t not_before_ms;
    long retry_after_ms;
    char *err_body;
    size_t err_len;
    char got_dtype[24];
    bool overflow;
    char curl_err[CURL_ERROR_SIZE];
    int state;
};

/* Runs the n transfers on c's connections, at most TALLYOPT_MAX_CONNECTIONS
 * at once, retrying as the options say, until every one is done; each
 * one's done callback fires exactly once. A transfer whose `skip` is set
 * (by a done callback, say) before it starts finishes unsent, with the
 * code it already holds. */
void tc_run(tally_client *c, tc_transfer **t, size_t n);

/* Frees what a finished transfer still holds (its path, a grown body). */
void tc_transfer_clear(tc_transfer *t);

/* Monotonic milliseconds. */
uint64_t tc_now_ms(void);

/* ---------------------------------------------------------------- pending.c */

/* A sequence whose last chunk failed with an unknown outcome: its id
 * (owned), and what the chunk was. */
struct tc_pending {
    char *id;
    uint64_t chunk, hash;
    tally_code code;
};

/* The entry of sequence id, or NULL. */
struct tc_pending *tc_pending_of(tally_client *c, const char *id);
/* Remembers a failed chunk (out of memory: forgets it). */
void tc_pending_add(tally_client *c, const char *id, uint64_t chunk,
                    uint64_t hash, tally_code code);
/* Forgets p (NULL: a no-op); pointers into the set are stale after. */
void tc_pending_drop(tally_client *c, struct tc_pending *p);
/* Frees them all (tally_client_free). */
void tc_pending_free(tally_client *c);

/* ---------------------------------------------------------------- job.c */

typedef struct tc_job tc_job;

/* Checks the arguments of a cumulative sum and describes it; on a bad
 * argument returns TALLYE_ARGUMENT with msg set. */
tally_code tc_job_new(tally_client *c, tally_dt dtype, int rank,
                      const int64_t *shape, int axis, unsigned flags,
                      const void *in, void *out, tc_job **job, char *msg,
                      size_t msg_len);

/* Makes the job one chunk of sequence `id` (flags: TALLY_SEQUENCE_START
 * and _END; chunk: its sequence_chunk, 0 for none): sent whole, to the
 * URL the id hashes to, even when empty. TALLYE_ARGUMENT or TALLYE_NOMEM
 * with msg set. */
tally_code tc_job_sequence(tc_job *job, const char *id, unsigned flags,
                           uint64_t chunk, char *msg, size_t msg_len);

/* The job's transfers, made on first call (NULL, 0 for an empty tensor);
 * TALLYE_NOMEM or TALLYE_ARGUMENT with msg set when they cannot be. */
tally_code tc_job_transfers(tc_job *job, tc_transfer ***t, size_t *n, char *msg,
                            size_t msg_len);

/* After tc_run: stitches the answers into the output if every transfer
 * succeeded; returns the job's outcome, with its status and message. */
tally_code tc_job_finish(tc_job *job, long *status, char *msg, size_t msg_len);

void tc_job_free(tc_job *job);

/* ---------------------------------------------------------------- helpers */

/* snprintf that never overflows and returns the string. */
char *tc_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies s into buf of len bytes, truncating. */
void tc_copy(char *buf, size_t len, const char *s);

#endif
