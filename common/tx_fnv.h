/*
 * tx_fnv.h - FNV-1a, the one hash of the client and the server: the
 * replica a sequence's id goes to (libtally and the CLI; the Python
 * package computes the same), what makes a chunk the same chunk
 * (libtally's batches), and the daemon's key maps (core/keymap.h) and
 * its records' checksums (seq/sequence_file.h, store/kv_log.h).
 *
 * Threading: pure functions; any thread.
 */
#ifndef TALLY_TX_FNV_H
#define TALLY_TX_FNV_H

#include <stddef.h>
#include <stdint.h>

#define TX_FNV1A64_START 0xcbf29ce484222325u

/* FNV-1a (64 bits) of p[0..n), continued from h (TX_FNV1A64_START for a
 * hash of p alone). */
static inline uint64_t tx_fnv1a64_from(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static inline uint64_t tx_fnv1a64(const void *p, size_t n)
{
    return tx_fnv1a64_from(TX_FNV1A64_START, p, n);
}

/* FNV-1a (32 bits) of p[0..n). */
static inline uint32_t tx_fnv1a32(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x01000193u;
    }
    return h;
}

#endif
