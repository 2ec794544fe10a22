/*
 * seq_map.c - the sequences' one id-keyed map (seq_map.h).
 */
#include <stdlib.h>
#include <string.h>

#include "seq_map.h"
#include "sequence_file.h"

void seq_key_of(const seq_params *id, seq_map_node *node)
{
    node->key[0] = id->is_string;
    if (id->is_string) {
        memcpy(node->key + 1, id->str, id->len);
        node->keylen = 1 + id->len;
    } else {
        for (int i = 0; i < 8; i++) /* little-endian, whatever the host */
            node->key[1 + i] = (uint8_t)(id->num >> (8 * i));
        node->keylen = 9;
    }
    node->hash = seq_fnv1a(node->key, node->keylen);
}

bool seq_map_init(seq_map *m)
{
    m->nb = 64;
    m->n = 0;
    m->b = calloc(m->nb, sizeof *m->b);
    return m->b != NULL;
}

void seq_map_free(seq_map *m)
{
    free(m->b);
    m->b = NULL;
    m->nb = m->n = 0;
}

static seq_map_node **slot(const seq_map *m, const seq_map_node *k)
{
    seq_map_node **p = &m->b[k->hash & (m->nb - 1)];
    while (*p != NULL
           && ((*p)->hash != k->hash || (*p)->keylen != k->keylen
               || memcmp((*p)->key, k->key, k->keylen) != 0))
        p = &(*p)->next;
    return p;
}

seq_map_node *seq_map_find_key(const seq_map *m, const seq_map_node *k)
{
    return *slot(m, k);
}

seq_map_node *seq_map_find(const seq_map *m, const seq_params *id)
{
    seq_map_node k;
    seq_key_of(id, &k);
    return *slot(m, &k);
}

/* Doubles the buckets once they are as many as the nodes. */
static void grow(seq_map *m)
{
    if (m->n < m->nb)
        return;
    size_t nb = 2 * m->nb;
    seq_map_node **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return; /* longer chains, no harm */
    for (size_t i = 0; i < m->nb; i++)
        for (seq_map_node *x = m->b[i], *next; x != NULL; x = next) {
            next = x->next;
            seq_map_node **at = &b[x->hash & (nb - 1)];
            x->next = *at;
            *at = x;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

void seq_map_add(seq_map *m, seq_map_node *x)
{
    grow(m);
    seq_map_node **at = &m->b[x->hash & (m->nb - 1)];
    x->next = *at;
    *at = x;
    m->n++;
}

void seq_map_remove(seq_map *m, seq_map_node *x)
{
    seq_map_node **p = &m->b[x->hash & (m->nb - 1)];
    while (*p != x)
        p = &(*p)->next;
    *p = x->next;
    x->next = NULL;
    m->n--;
}

void seq_map_each(const seq_map *m, void (*each)(seq_map_node *x, void *user),
                  void *user)
{
    for (size_t i = 0; i < m->nb; i++)
        for (seq_map_node *x = m->b[i], *next; x != NULL; x = next) {
            next = x->next;
            each(x, user);
        }
}
