/*
 * sequence_id.h - which sequence a request belongs to, in the words of
 * Triton's sequence extension: the parameters sequence_id (a uint64 other
 * than 0, or a string of 1 to SEQ_ID_MAX bytes of UTF-8 without control
 * characters), sequence_start and sequence_end (booleans); and tally's
 * own sequence_chunk (a uint64 from 1, the chunk that carries
 * sequence_start: exactly once, in order; seq/sequence.h).
 *
 * Every protocol reads them into a seq_params through these functions
 * (KServe's JSON and protobuf; the native API's JSON members and query
 * string), so a refusal reads the same through every door; the
 * scheduler's sequence table (seq/sequence.h) keys its sequences by
 * the id. A string id and a number are different ids even when the
 * string is the number's digits, as in Triton.
 *
 * Threading: plain values and pure functions; any thread.
 */
#ifndef TALLY_SEQUENCE_ID_H
#define TALLY_SEQUENCE_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest string id, in bytes. */
#define SEQ_ID_MAX 128

typedef struct {
    bool has_id;    /* sequence_id was given: the request is a chunk */
    bool is_string; /* str[0..len), NUL-terminated; else num */
    uint64_t num;   /* never 0 */
    size_t len;
    char str[SEQ_ID_MAX + 1];
    bool start, end;
    bool has_flags; /* sequence_start or sequence_end was given */
    bool has_chunk; /* sequence_chunk was given */
    uint64_t chunk; /* from 1 */
} seq_params;

/* Sets p's id to the number v; false with a message when v is 0. */
bool seq_id_number(seq_params *p, uint64_t v, char *msg, size_t msglen);

/* Sets p's id to the string s[0..n) (copied); false with a message when
 * it is empty, longer than SEQ_ID_MAX, not UTF-8 or holds a control
 * character. */
bool seq_id_string(seq_params *p, const char *s, size_t n, char *msg,
                   size_t msglen);

/* A query string's sequence_id: all decimal digits is a number (as
 * tritonclient sends them), anything else a string. */
bool seq_id_text(seq_params *p, const char *v, char *msg, size_t msglen);

/* Sets p's chunk number to v; false with a message when v is 0. */
bool seq_chunk_number(seq_params *p, uint64_t v, char *msg, size_t msglen);

/* A query string's sequence_chunk: decimal digits, 1 to 2^64 - 1. */
bool seq_chunk_text(seq_params *p, const char *v, char *msg, size_t msglen);

/* After every parameter is read: sequence_start, sequence_end or
 * sequence_chunk without a sequence_id is refused, and so is a
 * sequence_start whose sequence_chunk is not 1. */
bool seq_params_check(const seq_params *p, char *msg, size_t msglen);

/* The id for messages and logs: 42, or "abc" in double quotes (an id
 * holds no quote-breaking control characters; a '"' or '\' in it is
 * written as is). Valid UTF-8; cut to len - 1 bytes. */
void seq_id_format(const seq_params *p, char *buf, size_t len);

/* Whether a and b name the same sequence. */
bool seq_id_equal(const seq_params *a, const seq_params *b);

#endif
