/*
 * seq_backend.h - the one interface behind the sequence table
 * (sequence.h): where the sequences' states live and how a chunk is
 * decided on them. Three implementations:
 *   - memory (seq_memory.h): the states in this tallyd's memory, each
 *     sequence's chunks taking turns;
 *   - memory with the log (seq_logged.h, --state-dir): the same, every
 *     applied chunk's state appended to the log before its answer;
 *   - a shared store (seq_remote.h, --state-store): the states in Redis,
 *     decided by compare-and-set, any replica answering any chunk.
 * The table calls the interface and never asks which one it has.
 *
 * A backend embeds a seq_backend first, whose ops are its own; every op
 * but loop_open, loop_close and close may be called from any thread.
 * admit(), arm(), finish() and sweep() follow sequence.h's steps, which
 * the table passes on as they are; counts() gives what /metrics shows of
 * every backend, render_metrics() what is a backend's own.
 */
#ifndef TALLY_SEQ_BACKEND_H
#define TALLY_SEQ_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "carry.h"
#include "sequence_id.h"
#include "status.h"
#include "tensor.h"
#include "textbuf.h"

typedef struct seq_slot seq_slot;
typedef struct seq_backend seq_backend;

/* The sequences' counters, as /metrics shows them (the table renders
 * them, whichever backend counted). */
typedef struct {
    size_t live, bytes;
    uint64_t started, ended, expired, refused, late, applied, repeats,
        conflicts, gaps;
} seq_counts;

typedef struct {
    status_code (*admit)(seq_backend *b, const seq_params *p,
                         const eng_scan_desc *d, const eng_lines *l,
                         const void *in, seq_slot *s, bool *wait, char *msg,
                         size_t msglen);
    bool (*arm)(seq_backend *b, seq_slot *s);
    status_code (*finish)(seq_backend *b, seq_slot *s, bool ok, void *out,
                          bool *later, char *msg, size_t msglen);
    void (*sweep)(seq_backend *b);
    bool (*freeze)(seq_backend *b, uint64_t wait_ms);
    void (*counts)(seq_backend *b, seq_counts *out);
    /* Optional (NULL: none). */
    void (*render_metrics)(seq_backend *b, textbuf *o);
    void *(*loop_open)(seq_backend *b, uv_loop_t *loop);
    void (*loop_close)(seq_backend *b, void *near);
    /* Once no chunk is admitted: what the backend must finish before the
     * process ends (the log flushed and closed). */
    void (*close)(seq_backend *b);
    void (*free)(seq_backend *b);
} seq_backend_ops;

struct seq_backend {
    const seq_backend_ops *ops;
    /* Whether a chunk may end after finish() returns (*later): its
     * state goes to a log or a store first. Set before any chunk. */
    bool durable;
};

/* For the backends: the part of admission that reads the chunk into s
 * (its totals, a float16 or bfloat16 input's copy, a numbered chunk's
 * SHA-256), refusing a chunk whose carries alone pass max_bytes
 * (STATUS_TOO_LARGE: 8 bytes a line, 16 in a numbered sequence, times
 * the copies the backend keeps of them) and
 * failing when memory runs out (STATUS_NOMEM); and what lets it go
 * again. */
status_code seq_slot_fill(const seq_params *p, const eng_scan_desc *d,
                          const eng_lines *l, const void *in, size_t max_bytes,
                          unsigned copies, seq_slot *s, char *msg,
                          size_t msglen);
void seq_slot_drop(seq_slot *s);

/* Adds carries c (one per line of s's chunk) to out, s's scanned answer:
 * float16 and bfloat16 are scanned again from their copy (carry.h). */
void seq_slot_add_carries(const seq_slot *s, void *out, const eng_carry *c);

#endif
