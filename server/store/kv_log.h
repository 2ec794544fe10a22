/*
 * kv_log.h - the memory store (kv_mem.h) made durable by an append-only
 * log in a directory (--state-dir), DIR/sequences.log, as Redis's
 * append-only file: every write the store takes is a record of the log,
 * and is applied and answered once the record is durable (the fsync
 * mode says how).
 *
 * A record is the write itself: its key, the version it expects and the
 * one it makes, its deadline and the time it was made, and its value. So
 * the replay applies a record only onto the version it was written over,
 * as a compare-and-set: the log gives back exactly what was answered, in
 * whatever order its records lie, and an older record can never bring
 * back a value a later one replaced. An expiry is a record too (a delete
 * of the version that expired); one the disk had no room for is implied:
 * a record made after a key's deadline finds that key gone.
 *
 * One thread, the log writer, writes with group commit: the records that
 * come while a flush runs share the next one. SEQ_FSYNC_ALWAYS: a
 * record's write is answered after fdatasync (it survives a power loss);
 * EVERYSEC: after write(2) (it survives a crash of the process), and the
 * file is flushed once a second; a failed flush is logged and counted,
 * and the records after it are flushed before their answers (and fail
 * when the flush fails) until a flush succeeds, as Redis refuses writes
 * after its AOF's fsync failed. When the log passes its bound (64 MiB,
 * or twice what the store holds), it is rewritten with one record per key,
 * as Redis rewrites its AOF: a thread of its own writes the snapshot to
 * DIR/sequences.log.tmp while the writer goes on appending, keeping a copy of
 * what it appends; then the writer adds that copy, flushes the file and
 * renames it over the log. No answer waits for the snapshot's write.
 *
 * The start: the directory's lock (one tallyd a directory), the log read
 * back (a torn last record dropped and said; damage before the end stops
 * the start, naming the file and the offset), the records past their
 * deadline dropped, and a fresh log written with one record per key. A
 * full disk stops none of it: when the fresh log cannot be written, the
 * old one goes on, its torn end cut off, and each write's record is tried
 * as it comes, failing (KV_FAILED, nothing applied) until there is room.
 * The room ahead of the records (the file allocated 4 MiB at a time, so
 * that fdatasync writes data and not the file's size) is taken when the
 * disk has it. An older tallyd's records ('TSLR': whole states, the last
 * of each key its state) are read through the caller's upgrade hook, in
 * order, and the fresh log replaces them.
 *
 * The file, little-endian: records, each
 *   u32 'TKVW'  u32 payload length  u32 FNV-1a of the payload
 *   u32 FNV-1a of the 12 bytes before it
 *   payload: u8 op (1 put, 2 delete, 3 touch)  u8 flags (1 counted)
 *   u16 key length  u64 u64 expected version  u64 u64 version
 *   i64 deadline (wall ms, 0 none)  i64 made at (wall ms)  u64 weight
 *   key  value
 * followed by zeros (the room ahead), up to the file's end.
 *
 * Ownership: the store owns the log; close() flushes it, lets the lock
 * go and frees everything. Threading: kv.h's; the writer's records are
 * answered on the log writer; kv_log_open() on the loop thread.
 */
#ifndef TALLY_KV_LOG_H
#define TALLY_KV_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "kv_mem.h"

typedef enum { KV_FSYNC_ALWAYS, KV_FSYNC_EVERYSEC } kv_fsync;

/* Testing: once `after` records have been written, every write of a
 * record fails with errno `err` (ENOSPC, EIO), or every flush (`sync`);
 * at_start: the fresh log's write at the start fails with that errno;
 * 0 for none. */
typedef struct {
    int err;
    bool sync;
    uint64_t after;
    int at_start;
} kv_log_faults;

/* An older log's record (its payload, a whole state in the caller's
 * format) as a write: fills w's op, key, flags and deadline; the log sets
 * its value to the payload. False: the record is not one the hook takes. */
typedef bool (*kv_log_upgrade)(void *user, const uint8_t *payload, size_t len,
                               kv_write *w);

typedef struct {
    const char *dir;
    kv_fsync fsync;
    kv_mem_options mem;
    kv_log_faults faults;
    /* Testing (the simulation): the caller runs each batch itself, as the
     * log writer would (kv_log_step). */
    bool manual;
    uint64_t prealloc;      /* testing: the room's step (0: 4 MiB) */
    kv_log_upgrade upgrade; /* NULL: an older log stops the start */
    void *upgrade_user;
} kv_log_options;

/* The store over DIR: its lock taken, its log read back and written
 * fresh, its writer started. NULL with a message naming the file (and
 * the offset where a damaged log went wrong, or the pid that holds the
 * lock): tallyd does not start. */
kv *kv_log_open(const kv_log_options *o, char *msg, size_t msglen);

/* The records read back at the start that were past their deadline
 * (counted ones), and the bytes of a torn last record dropped. */
void kv_log_loaded(kv *k, size_t *expired, size_t *torn);

/* Testing: whether records wait for the writer (manual), one batch
 * written and answered; a crash that writes the first `keep` records
 * waiting (never answered) and frees the store without a word to anyone
 * (its lock let go); the faults; rewrites from min_bytes on, and a
 * rewriter held before its snapshot's write. */
bool kv_log_waiting(kv *k);
void kv_log_step(kv *k);
void kv_log_crash(kv *k, size_t keep);
void kv_log_fail_writes(kv *k, int err, int sync_err, uint64_t after);
void kv_log_test_rewrites(kv *k, uint64_t min_bytes, bool hold);

/* w as one whole record of the log, malloc'd (its length in *len); NULL
 * when out of memory. */
uint8_t *kv_log_encode(const kv_write *w, size_t *len);

/* Reads a log at b[0..len): each(user, w, legacy) for each record in
 * order (w is the callee's to free with kv_write_free(); a legacy one's
 * value is its payload, its key unset). *end: where the good records
 * end; *torn: bytes of a torn last record dropped. False with a message
 * naming the byte offset for damage before the end, or when each()
 * returns false. */
bool kv_log_decode(const uint8_t *b, size_t len,
                   bool (*each)(void *user, kv_write *w, bool legacy),
                   void *user, size_t *end, size_t *torn, char *msg,
                   size_t msglen);

#endif
