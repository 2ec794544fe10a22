/*
 * seq_log.h - the sequences' append-only log in a directory
 * (--state-dir), as Redis's append-only file: what makes the memory
 * backend durable (seq_logged.h). DIR/sequences.log holds, for each
 * applied chunk, the whole state of its sequence after it (a record of
 * sequence_file.h's format: id, attributes, whether it is live, ended or
 * gone, carries, and for a numbered sequence the chunk number, the
 * input's SHA-256 and the carries before it). Replaying the log in order
 * gives back every live sequence, and the ended numbered ones still kept
 * for a repeat of their end chunk. One thread, the log writer, appends with
 * group commit: the records that come while a flush runs share the next one.
 * With SEQ_FSYNC_ALWAYS a record's completion comes after fdatasync (it
 * survives a power loss); with SEQ_FSYNC_EVERYSEC after write(2) (it
 * survives a crash of the process), and the file is flushed once a
 * second; a failed flush is logged and counted, and the records after it
 * are flushed before their completions (and fail when the flush fails)
 * until a flush succeeds again, as Redis refuses writes after its AOF's
 * fsync failed. When the log passes its bound (64 MiB, or twice what the
 * live sequences' latest records take), it is rewritten with one record
 * per live sequence, as Redis rewrites its AOF: a thread of its own
 * writes a snapshot of them to a temporary file while the writer goes on
 * appending to the log, and keeps a copy of what it appends meanwhile;
 * then the writer adds that copy after the snapshot, flushes the file
 * and renames it over the log. No answer waits for the snapshot's
 * write.
 *
 * The log file, little-endian: records, each
 *   u32 'TSLR'  u32 payload length  u32 0 (older logs: the record's state,
 *   which their payload lacked)
 *   u32 FNV-1a (32 bit) of the 12 bytes before it
 *   payload: sequence_file.h's file for this one sequence (its own
 *   checksum at its end)
 * The file is allocated ahead of its records (seq_log.c), so while
 * tallyd runs, and after a crash, zeros follow the last record: a record
 * boundary with nothing but zeros after it is the log's end. A torn last
 * record (a crash in the middle of its write: its header or its payload
 * cut short, or its payload's checksum wrong, with nothing but zeros
 * after it) was never acknowledged, and is dropped; any other damage
 * stops the load, naming the file and the byte offset.
 *
 * Ownership: the log owns the records appended to it.
 * Threading: seq_log_append() from any thread; done() is called on the
 * log writer, with no lock of the log's held, in append order.
 * seq_log_open() and seq_log_close() on one thread (tallyd's main).
 * The decoding functions are pure; any thread.
 */
#ifndef TALLY_SEQ_LOG_H
#define TALLY_SEQ_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequence_file.h"

typedef enum { SEQ_FSYNC_ALWAYS, SEQ_FSYNC_EVERYSEC } seq_fsync;

/* Parses "always" or "everysec"; false for anything else. */
bool seq_fsync_parse(const char *text, seq_fsync *out);

typedef struct seq_log seq_log;

/* A record's end: ok, it is durable as the fsync mode says; otherwise
 * why names the failure (the write, the flush) and the record is not in
 * the log's live tail (a later record of its sequence replaces it). */
typedef void (*seq_log_done)(void *ctx, bool ok, const char *why);

/* Opens DIR/sequences.log for appending, having first written the given
 * sequences (e[0..n), borrowed; an entry with `ended` is an ended numbered
 * one) to it as a fresh log (temporary
 * file, fsync, rename, directory fsync), and starts the log writer.
 * NULL with a message naming the file. */
seq_log *seq_log_open(const char *dir, seq_fsync mode, const seq_file_entry *e,
                      size_t n, char *msg, size_t msglen);

/* Takes DIR's lock (DIR/tallyd.lock, flock'd, holding the taker's pid):
 * one tallyd per directory, as PostgreSQL's postmaster.pid keeps one
 * postmaster on a data directory; a second would write over the first's
 * log. The lock's descriptor (held until seq_log_unlock(), or the
 * process ends, however it ends), or -1 with a message that names the
 * pid holding it. Before the log is read. */
int seq_log_lock(const char *dir, char *msg, size_t msglen);
void seq_log_unlock(int fd);

/* Appends the state of sequence x after a chunk (x->state: live, ended
 * by it, or gone), encoded now; done(ctx, ...) comes once it is durable
 * or failed. False (done is not called) when memory runs out encoding
 * it. */
bool seq_log_append(seq_log *s, const seq_file_entry *x, seq_log_done done,
                    void *ctx);

/* Flushes and closes the log and stops the writer; every pending done()
 * has been called when it returns. NULL is a no-op. The file stays: the
 * caller removes it once a snapshot has replaced it. */
void seq_log_close(seq_log *s);

/* Testing: once `after` records have been written, every write of a
 * record fails with errno err (ENOSPC, EIO), and every flush with
 * sync_err; 0 for none. Any thread. */
void seq_log_fail_writes(seq_log *s, int err, int sync_err, uint64_t after);

/* Testing: a rewrite from min_bytes on (not 64 MiB); with hold, the
 * rewriter waits before its snapshot's write until called again
 * without. Any thread. */
void seq_log_test_rewrites(seq_log *s, uint64_t min_bytes, bool hold);

/* The log's counters, for /metrics: bytes in the file now, flushes and
 * their total time, records, failed writes, rewrites, failed flushes. */
typedef struct {
    uint64_t bytes, flushes, flush_ns, records, failures, rewrites,
        flush_failures;
    bool rewriting; /* a rewrite is in flight */
} seq_log_stats;
void seq_log_get_stats(seq_log *s, seq_log_stats *out);

/* Reads the log at b[0..len) (max_entries and max_bytes as
 * seq_file_decode's, per record), calling each(user, entry) for
 * each record in order (the entry's carries are the callee's to take or
 * leave: seq_file_free() frees what is left). *torn: bytes of a torn last
 * record that were dropped (0: none). False with a message naming the
 * byte offset for damage before the end, or when each() returns false. */
bool seq_log_decode(const uint8_t *b, size_t len, size_t max_entries,
                    size_t max_bytes,
                    bool (*each)(void *user, seq_file_entry *e), void *user,
                    size_t *torn, char *msg, size_t msglen);

#endif
