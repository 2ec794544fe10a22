/*
 * fnv.h - FNV-1a, the one hash of the sequences and their stores: the
 * key maps' (keymap.h), a sequence's record's checksum
 * (seq/sequence_file.h) and the log's (store/kv_log.h).
 *
 * Threading: pure functions; any thread.
 */
#ifndef TALLY_FNV_H
#define TALLY_FNV_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t fnv1a64(const uint8_t *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static inline uint32_t fnv1a32(const uint8_t *b, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x01000193u;
    }
    return h;
}

#endif
