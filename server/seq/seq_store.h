/*
 * seq_store.h - where the sequences' running sums persist between
 * answers: the one interface the sequence table (sequence.h) writes
 * through, so that another backend (a store shared by replicas, whose
 * completions come back from the network) can stand in for this one.
 *
 * This backend is an append-only log in a directory (--state-dir), as
 * Redis's append-only file: DIR/sequences.log holds, for each applied
 * chunk, the whole state of its sequence after it (a record of
 * sequence_file.h's format: id, attributes, carries, and for a numbered
 * sequence the chunk number, the input's SHA-256 and the carries before
 * it), marked when that chunk ended the sequence, or that the sequence
 * is gone (expired). Replaying the log in order gives back every live
 * sequence, and the ended numbered ones still kept for a repeat of their
 * end chunk. One writer thread appends with group commit: the
 * records that come while a flush runs share the next one. With
 * SEQ_FSYNC_ALWAYS a record's completion comes after fdatasync (it
 * survives a power loss); with SEQ_FSYNC_EVERYSEC after write(2) (it
 * survives a crash of the process), and the file is flushed once a
 * second; a failed flush is logged and counted, and the records after it
 * are flushed before their completions (and fail when the flush fails)
 * until a flush succeeds again, as Redis refuses writes after its AOF's
 * fsync failed. When the log passes its bound (64 MiB, or twice what the live
 * sequences' latest records take), the writer rewrites it with one record
 * per live sequence (a temporary file, fsync'd and renamed over it).
 *
 * The log file, little-endian: records, each
 *   u32 'TSLR'  u32 payload length  u32 how (0: live, 1: ended by this
 *   chunk, 2: gone)
 *   u32 FNV-1a (32 bit) of the 12 bytes before it
 *   payload: sequence_file.h's file for this one sequence (its own
 *   checksum at its end)
 * The file is allocated ahead of its records (seq_store.c), so while
 * tallyd runs, and after a crash, zeros follow the last record: a record
 * boundary with nothing but zeros after it is the log's end. A torn last
 * record (a crash in the middle of its write: its header or its payload
 * cut short, or its payload's checksum wrong, with nothing but zeros
 * after it) was never acknowledged, and is dropped; any other damage
 * stops the load, naming the file and the byte offset.
 *
 * Ownership: the store owns the records appended to it.
 * Threading: seq_store_append() from any thread; done() is called on the
 * writer thread, with no lock of the store's held, in append order.
 * seq_store_open() and seq_store_close() on one thread (tallyd's main).
 * The decoding functions are pure; any thread.
 */
#ifndef TALLY_SEQ_STORE_H
#define TALLY_SEQ_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequence_file.h"

typedef enum { SEQ_FSYNC_ALWAYS, SEQ_FSYNC_EVERYSEC } seq_fsync;

/* Parses "always" or "everysec"; false for anything else. */
bool seq_fsync_parse(const char *text, seq_fsync *out);

typedef struct seq_store seq_store;

/* What a record says of its sequence. */
enum { SEQ_REC_LIVE, SEQ_REC_ENDED, SEQ_REC_GONE };

/* A record's end: ok, it is durable as the fsync mode says; otherwise
 * why names the failure (the write, the flush) and the record is not in
 * the log's live tail (a later record of its sequence replaces it). */
typedef void (*seq_store_done)(void *ctx, bool ok, const char *why);

/* Opens DIR/sequences.log for appending, having first written the given
 * sequences (e[0..n), borrowed; an entry with `ended` is an ended numbered
 * one) to it as a fresh log (temporary
 * file, fsync, rename, directory fsync), and starts the writer thread.
 * NULL with a message naming the file. */
seq_store *seq_store_open(const char *dir, seq_fsync mode,
                          const seq_file_entry *e, size_t n, char *msg,
                          size_t msglen);

/* Takes DIR's lock (DIR/tallyd.lock, flock'd, holding the taker's pid):
 * one tallyd per directory, as PostgreSQL's postmaster.pid keeps one
 * postmaster on a data directory; a second would write over the first's
 * log. The lock's descriptor (held until seq_store_unlock(), or the
 * process ends, however it ends), or -1 with a message that names the
 * pid holding it. Before the log is read. */
int seq_store_lock(const char *dir, char *msg, size_t msglen);
void seq_store_unlock(int fd);

/* Appends the state of sequence x after a chunk (how: SEQ_REC_ENDED when
 * the chunk was its end), or that it is gone (SEQ_REC_GONE), encoded now;
 * done(ctx, ...) comes once it is durable or failed. False (done is not
 * called) when memory runs out encoding it. */
bool seq_store_append(seq_store *s, const seq_file_entry *x, int how,
                      seq_store_done done, void *ctx);

/* Flushes and closes the log and stops the writer; every pending done()
 * has been called when it returns. NULL is a no-op. The file stays: the
 * caller removes it once a snapshot has replaced it. */
void seq_store_close(seq_store *s);

/* Testing: once `after` records have been written, every write of a
 * record fails with errno err (ENOSPC, EIO), and every flush with
 * sync_err; 0 for none. Any thread. */
void seq_store_fail_writes(seq_store *s, int err, int sync_err,
                           uint64_t after);

/* The log's counters, for /metrics: bytes in the file now, flushes and
 * their total time, records, failed writes, rewrites, failed flushes. */
typedef struct {
    uint64_t bytes, flushes, flush_ns, records, failures, rewrites,
        flush_failures;
} seq_store_stats;
void seq_store_get_stats(seq_store *s, seq_store_stats *out);

/* Reads the log at b[0..len) (max_entries and max_bytes as
 * seq_file_decode's, per record), calling each(user, entry, how) for
 * each record in order (the entry's carries are the callee's to take or
 * leave: seq_file_free() frees what is left). *torn: bytes of a torn last
 * record that were dropped (0: none). False with a message naming the
 * byte offset for damage before the end, or when each() returns false. */
bool seq_log_decode(const uint8_t *b, size_t len, size_t max_entries,
                    size_t max_bytes,
                    bool (*each)(void *user, seq_file_entry *e, int how),
                    void *user, size_t *torn, char *msg, size_t msglen);

#endif
