/*
 * keymap.h - the one map from a byte key to a record of the caller's:
 * the sequences' store keys, in the memory store (store/kv_mem.c) and
 * in the engine's lines and cache (seq/).
 *
 * Intrusive: the caller's record embeds a keymap_node, which holds the
 * key (at most KEYMAP_KEY_MAX bytes), its hash (FNV-1a, common/tx_fnv.h) and
 * the chain's link. Chained buckets, a power of two, doubled as the map fills.
 *
 * Ownership: the map owns its buckets, never the nodes, which the caller
 * frees after taking them out. Threading: none of its own; the caller's
 * lock guards the map and its nodes.
 */
#ifndef TALLY_KEYMAP_H
#define TALLY_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A key's bytes at most: a sequence's store key, "{s:" + 128 bytes + "}",
 * with room. */
#define KEYMAP_KEY_MAX 160

typedef struct keymap_node keymap_node;
struct keymap_node {
    keymap_node *next; /* in its bucket */
    uint64_t hash;
    size_t keylen;
    uint8_t key[KEYMAP_KEY_MAX];
};

typedef struct {
    keymap_node **b;
    size_t nb, n; /* buckets (a power of two), nodes */
} keymap;

/* Sets node's key to key[0..len) and its hash; false when len is over
 * KEYMAP_KEY_MAX. */
bool keymap_key(keymap_node *node, const uint8_t *key, size_t len);

/* An empty map; false when memory runs out. */
bool keymap_init(keymap *m);
/* Its buckets, freed; the nodes are the caller's. */
void keymap_free(keymap *m);

/* The node with k's key (k: keymap_key's), or NULL. */
keymap_node *keymap_find(const keymap *m, const keymap_node *k);

/* Adds x (keyed), whose key is not in the map yet. (When memory runs out
 * growing the buckets, the chains grow longer.) */
void keymap_add(keymap *m, keymap_node *x);

/* Takes x, which is in the map, out of it. */
void keymap_remove(keymap *m, keymap_node *x);

/* Calls each(node, user) for every node; each may take that node out of
 * the map, and change nothing else of it. */
void keymap_each(const keymap *m, void (*each)(keymap_node *x, void *user),
                 void *user);

#endif
