/*
 * seq_rules.h - what a chunk may do to its sequence: the rules the
 * engine (seq_decide.c) applies to a sequence's state at a chunk's turn,
 * whatever store keeps it (docs/sequences.md has them in prose).
 *
 * A sequence is seen through a seq_view: whether it exists, its
 * attributes, and for a numbered one its last applied chunk.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_SEQ_RULES_H
#define TALLY_SEQ_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequence_id.h"
#include "tensor.h"

/* A sequence as the rules see it. */
typedef struct {
    bool exists;      /* live, or ended and still kept */
    bool numbered;    /* its chunks carry sequence_chunk */
    bool closed;      /* its end was applied (it lingers, or is kept for a
                       * repeat of its end) */
    bool last_end;    /* numbered: the last applied chunk was the end */
    uint64_t applied; /* numbered: the last applied chunk */
    const unsigned char *last_sha; /* numbered: that chunk's input */
    const eng_scan_desc *desc;     /* its attributes; axis in [0, rank) */
} seq_view;

/* A chunk's admission against its sequence v (p: the chunk's parameters,
 * d: its scan, sha: its input's SHA-256 when numbered):
 *   SEQ_RULE_START     it starts the sequence (anew, when v exists);
 *   SEQ_RULE_TAKE      it goes on v (*late: it is an unnumbered chunk
 *                      that came after v's end, within its linger);
 *   SEQ_RULE_INVALID   refused, with msg (STATUS_INVALID);
 *   SEQ_RULE_CONFLICT  refused, with msg (STATUS_CHUNK_CONFLICT).
 * idle_ms: the table's, for the words. */
enum { SEQ_RULE_START, SEQ_RULE_TAKE, SEQ_RULE_INVALID, SEQ_RULE_CONFLICT };
int seq_rule_admit(const seq_view *v, const seq_params *p,
                   const eng_scan_desc *d, const unsigned char sha[32],
                   uint64_t idle_ms, bool *late, char *msg, size_t msglen);

/* What numbered chunk p (its input's SHA-256: sha), taken by v, does:
 *   SEQ_OUT_APPLY     the next chunk: added;
 *   SEQ_OUT_REPEAT    the last applied one again, with the same input and
 *                     sequence_end as it was: answered from the carries
 *                     before it, nothing moves;
 *   SEQ_OUT_EARLY     a chunk before it has not been applied yet;
 *   SEQ_OUT_CONFLICT  anything else, with msg. */
enum { SEQ_OUT_APPLY, SEQ_OUT_REPEAT, SEQ_OUT_EARLY, SEQ_OUT_CONFLICT };
int seq_rule_outcome(const seq_view *v, const seq_params *p,
                     const unsigned char sha[32], char *msg, size_t msglen);

/* The refusal of a numbered chunk that waited reorder_ms for chunk
 * `next` (STATUS_CHUNK_GAP). */
void seq_rule_gap(const seq_params *id, uint64_t chunk, uint64_t next,
                  uint64_t reorder_ms, char *msg, size_t msglen);

/* The SHA-256 of a chunk's input: its dtype, rank, shape and bytes.
 * False when memory runs out. */
bool seq_rule_sha(const eng_scan_desc *d, const void *in, size_t bytes,
                  unsigned char out[32]);

#endif
