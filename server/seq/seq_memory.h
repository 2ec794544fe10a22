/*
 * seq_memory.h - the sequences' states in this tallyd's memory: the
 * first of the table's backends (seq_backend.h). sequence.h has the
 * rules in prose; here each sequence is an entry whose chunks take turns,
 * in admission order (a numbered sequence's in its numbers' order).
 *
 * With a journal (seq_memory_set_journal: the log's, seq_logged.h),
 * every applied chunk's new state is handed to it before the chunk ends,
 * and the chunk ends (its carries move, the turn passes on, its answer
 * may leave) only once the journal says it is durable; so is an expired
 * sequence's end, which nothing waits for. Without one, a chunk ends at
 * once.
 *
 * Threading: every function may be called from any thread; the
 * backend's mutex guards the map and the entries' bookkeeping. An
 * entry's carries are touched only by the chunk that holds its turn,
 * outside the mutex. A slot's ready() and durable() are called with no
 * lock held; the journal's append is called with none held either.
 */
#ifndef TALLY_SEQ_MEMORY_H
#define TALLY_SEQ_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

#include "seq_backend.h"
#include "sequence.h"
#include "sequence_file.h"

/* A memory backend with o's settings; NULL when memory runs out. */
seq_backend *seq_memory_new(const seq_options *o);

/* Where a durable backend's records go: append() takes a record (which
 * it encodes before it returns) and calls done(ctx, ok, why) once it is
 * durable or failed; false (done is not called) when memory runs out. */
typedef void (*seq_journal_done)(void *ctx, bool ok, const char *why);
typedef struct {
    bool (*append)(void *self, const seq_file_entry *x, seq_journal_done done,
                   void *ctx);
    void *self;
} seq_journal;

/* Gives b a journal (borrowed; it outlives b's last chunk). Before any
 * chunk is admitted. */
void seq_memory_set_journal(seq_backend *b, const seq_journal *j);

/* Takes one record of the log into b, replacing the sequence of that id:
 * live, it goes on; ended, a numbered one is kept (closed) for a repeat
 * of its end chunk, an unnumbered one removed; gone, or past its idle
 * deadline already, removed (and counted expired). x's carries are
 * taken. At the start, before any chunk. False with a message when b's
 * limits do not hold it. */
bool seq_memory_restore(seq_backend *b, seq_file_entry *x, char *msg,
                        size_t msglen);

/* How many records seq_memory_restore() did not take because they had
 * passed their idle deadline while tallyd was down (counted expired);
 * the count starts again. */
size_t seq_memory_expire_loaded(seq_backend *b);

/* Every live sequence, and every ended numbered one still kept for a
 * repeat of its end, as records whose carries are borrowed from b (free
 * the array only): a malloc'd array of *n. Once nothing runs (at the
 * start). NULL with *n 0 when there is none or memory ran out (*oom
 * then). */
seq_file_entry *seq_memory_export(seq_backend *b, size_t *n, bool *oom);

#endif
