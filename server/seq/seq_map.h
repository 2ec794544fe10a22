/*
 * seq_map.h - the one map from a sequence's id to a record of the
 * caller's: the live sequences in memory (seq_memory.c), the last
 * states a replica saw of the shared store's (seq_remote.c), each
 * sequence's chunks in flight there, and the log writer's latest record
 * of each sequence (seq_log.c).
 *
 * Intrusive: the caller's record embeds a seq_map_node, which holds the
 * id's key (seq_key_of: a kind byte, then the number's 8 bytes or the
 * string's bytes), its hash (FNV-1a, seq_fnv1a, the one hash of the
 * sequences) and the chain's link. Chained buckets, a power of two,
 * doubled as the map fills.
 *
 * Ownership: the map owns its buckets, never the nodes, which the caller
 * frees after taking them out. Threading: none of its own; the caller's
 * lock guards the map and its nodes.
 */
#ifndef TALLY_SEQ_MAP_H
#define TALLY_SEQ_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequence_id.h"

/* A key's bytes at most: the kind, then the longest string id. */
#define SEQ_KEY_MAX (1 + SEQ_ID_MAX)

typedef struct seq_map_node seq_map_node;
struct seq_map_node {
    seq_map_node *next; /* in its bucket */
    uint64_t hash;
    size_t keylen;
    uint8_t key[SEQ_KEY_MAX];
};

typedef struct {
    seq_map_node **b;
    size_t nb, n; /* buckets (a power of two), nodes */
} seq_map;

/* The key of id into node (its hash too). */
void seq_key_of(const seq_params *id, seq_map_node *node);

/* An empty map; false when memory runs out. */
bool seq_map_init(seq_map *m);
/* Its buckets, freed; the nodes are the caller's. */
void seq_map_free(seq_map *m);

/* The node with id's key, or NULL. */
seq_map_node *seq_map_find(const seq_map *m, const seq_params *id);
/* The same for a key already made (k: seq_key_of's). */
seq_map_node *seq_map_find_key(const seq_map *m, const seq_map_node *k);

/* Adds x (keyed: seq_key_of), whose key is not in the map yet. (When
 * memory runs out growing the buckets, the chains grow longer.) */
void seq_map_add(seq_map *m, seq_map_node *x);

/* Takes x, which is in the map, out of it. */
void seq_map_remove(seq_map *m, seq_map_node *x);

/* Calls each(node, user) for every node; each may take that node out of
 * the map, and change nothing else of it. */
void seq_map_each(const seq_map *m, void (*each)(seq_map_node *x, void *user),
                  void *user);

#endif
