/*
 * kv_log_int.h - what kv_log.c (the writer, the rewrite, the start) and
 * kv_log_file.c (the records and the file) share; nothing else includes
 * it.
 *
 * Ownership: encoded owns its buffers (kvl_encoded_free). Threading: any
 * thread; each call works on what it is given (a file descriptor is the
 * caller's to share or not).
 */
#ifndef TALLY_KV_LOG_INT_H
#define TALLY_KV_LOG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* Encoded records, to write. */
typedef struct {
    uint8_t **b;
    size_t *len, n, bytes;
} encoded;

/* The writes of list w, encoded; false when memory runs out. */
bool kvl_encode_all(const kv_write *w, encoded *e);
void kvl_encoded_free(encoded *e);

/* Writes b[0..n) at offset at, whole; false with errno. */
bool kvl_write_all(int fd, const uint8_t *b, size_t n, uint64_t at);

/* Writes e's records one after another from offset at; false with
 * errno. fail: the errno a test asked for (0: none). */
bool kvl_write_encoded(int fd, const encoded *e, uint64_t at, int fail);

/* Room for `need` more bytes after the records' `size`, up to the next
 * multiple of step (fallocate; zeros where the filesystem has none):
 * *alloc becomes the file's new size. False when the disk has no room:
 * the records are then written as they are. */
bool kvl_make_room(int fd, uint64_t size, uint64_t need, uint64_t *alloc,
                   uint64_t step);

/* fsync of the directory dir (a rename in it made durable). */
bool kvl_fsync_dir(const char *dir);

/* DIR/tallyd.lock taken (flock, with this process's pid in it): its fd,
 * or -1 with a message that names the tallyd holding it. */
int kvl_lock_dir(const char *dir, char *msg, size_t msglen);

/* The file at path, whole, into *buf (malloc'd; NULL and *len 0 when
 * there is none); false with a message. */
bool kvl_read_log(const char *path, uint8_t **buf, size_t *len, char *msg,
                  size_t msglen);

#endif
