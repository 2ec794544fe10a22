/*
 * sequence_file.h - a sequence's record, the one form its state takes
 * in whatever store keeps it (core/kv.h: memory, the log, Redis), written
 * and read from memory, so that a fuzzer can feed the reader any bytes;
 * the one place such a record is made from a sequence's fields
 * (seq_record_init), and the key it is kept under (seq_record_key).
 *
 * Little-endian throughout:
 *   "TALLYSEQ"  u32 version (3; 1 and 2 are read too)  u32 0  u64 count
 *   count records:
 *     u8 kind (0: number id, 1: string id)  u8 dtype  u8 flags (1:
 *     exclusive, 2: reverse, 4: numbered, version 2 on; 8: ended, 16:
 *     gone, version 3 on)  u8 rank
 *     kind 0: u64 id;  kind 1: u16 length, then the id's bytes
 *     i64 axis  u64 shape[rank] (the axis's own entry is 0)
 *     i64 idle deadline (wall clock, ms since 1970)
 *     u64 carries, then that many u64 (a double's bits for float dtypes)
 *     numbered: u64 the last applied chunk's number, u8 1 when it was
 *     the end (else 0), its input's SHA-256 (32 bytes), and the carries
 *     before it (as many u64 again)
 *   u64 FNV-1a of every byte before it
 * The reader checks everything it is given (the checksum first, then
 * every field against its range, the carries against the shape and the
 * limits, nothing left over) and gives back all of it or nothing.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_SEQUENCE_FILE_H
#define TALLY_SEQUENCE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "carry.h"
#include "sequence_id.h"
#include "tensor.h"

#define SEQ_FILE_VERSION 3u

/* What a record says of its sequence: the one encoding of "live or
 * ended" (ended: its end was applied; gone: dropped, expired). */
enum { SEQ_LIVE, SEQ_ENDED, SEQ_GONE };

/* One sequence as the file holds it. */
typedef struct {
    seq_params id;
    eng_scan_desc desc;       /* axis in [0, rank); shape[axis] is 0 */
    int64_t idle_deadline_ms; /* wall clock */
    uint64_t count;           /* carries */
    eng_carry *carry;         /* count of them; see below for who owns */
    bool numbered;            /* then the four below */
    bool last_end;
    uint64_t applied;
    unsigned char sha[32];
    eng_carry *prev; /* count of them, owned as carry is */
    int state;       /* SEQ_LIVE, SEQ_ENDED, SEQ_GONE */
} seq_file_entry;

/* The one builder of a record, from a sequence's fields (borrowed: the
 * record points at carry): the id without a chunk's flags and number, the
 * attributes with the axis in [0, rank) and its own dimension 0. Then,
 * for a numbered sequence, seq_record_numbered() with its last applied
 * chunk. */
void seq_record_init(seq_file_entry *x, const seq_params *id,
                     const eng_scan_desc *desc, int state,
                     int64_t idle_deadline_ms, uint64_t count,
                     eng_carry *carry);
void seq_record_numbered(seq_file_entry *x, uint64_t applied, bool last_end,
                         const unsigned char sha[32], eng_carry *prev);

/* The file for entries e[0..n) (borrowed): a malloc'd buffer, its length
 * in *len; NULL when out of memory. */
uint8_t *seq_file_encode(const seq_file_entry *e, size_t n, size_t *len);

/* Reads len bytes at b. At most max_entries sequences, whose carries take
 * at most max_bytes (8 a carry, 16 for a numbered one) in all. True: *out is a
 * malloc'd array of *n entries, each carry malloc'd; free them with
 * seq_file_free(). False with a message (the byte offset where it went wrong);
 * nothing to free. */
bool seq_file_decode(const uint8_t *b, size_t len, size_t max_entries,
                     size_t max_bytes, seq_file_entry **out, size_t *n,
                     char *msg, size_t msglen);

/* A sequence's key in its store: "{s:ID}" or "{n:NUM}" (the braces:
 * Redis Cluster's hash tag), into key (SEQ_KEY_MAX bytes at most): its
 * length. */
#define SEQ_KEY_MAX (SEQ_ID_MAX + 8)
size_t seq_record_key(const seq_params *id, uint8_t *key);

/* What a record says (b[0..len): one sequence's, in this format): its
 * store key (key, SEQ_KEY_MAX bytes), whether it is live, ended or gone,
 * numbered, its carries, and its idle deadline. False when it is not such a
 * record: the upgrade of an older tallyd's log, whose records were whole
 * states. */
bool seq_record_info(const uint8_t *b, size_t len, uint8_t *key, size_t *keylen,
                     int *state, bool *numbered, uint64_t *count,
                     int64_t *deadline_ms);

/* Frees a decoded array and the carries still in it (an entry whose
 * carry or prev was taken has it NULL); NULL is a no-op. */
void seq_file_free(seq_file_entry *e, size_t n);

#endif
