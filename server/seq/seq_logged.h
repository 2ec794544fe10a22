/*
 * seq_logged.h - the sequences in memory with the log (--state-dir): the
 * second of the table's backends (seq_backend.h). The memory backend
 * (seq_memory.h) keeps them and takes their turns; every applied chunk's
 * new state goes to the log (seq_log.h) before its answer, and the next
 * start takes every live sequence back from it.
 *
 * Opening it takes the directory's lock (one tallyd a directory), replays
 * DIR/sequences.log into memory (dropping what idled out while tallyd was
 * down), writes a fresh log with one record per live sequence, and starts
 * the log's writer. Its close flushes and closes the log; its free lets
 * the lock go. /metrics shows the log's counters beside the sequences'.
 *
 * Threading: seq_logged_open() on the loop thread, before any chunk;
 * the backend's ops as seq_backend.h says.
 */
#ifndef TALLY_SEQ_LOGGED_H
#define TALLY_SEQ_LOGGED_H

#include <stddef.h>
#include <stdint.h>

#include "seq_backend.h"
#include "seq_log.h"
#include "sequence.h"

/* Testing: once `after` records have been written, every write of a
 * record fails with errno `err` (ENOSPC, EIO), or every flush (`sync`);
 * 0 for none. */
typedef struct {
    int err;
    bool sync;
    uint64_t after;
} seq_log_faults;

/* The backend over DIR (its lock taken, its log replayed and rewritten,
 * its writer started), with o's settings, flushing as mode says. NULL
 * with a message naming the file (and the offset where a damaged log
 * went wrong, or the pid that holds the lock): tallyd does not start. */
seq_backend *seq_logged_open(const char *dir, seq_fsync mode,
                             const seq_options *o, const seq_log_faults *f,
                             char *msg, size_t msglen);

#endif
