/*
 * keymap.c - the one byte-keyed map (keymap.h).
 */
#include <stdlib.h>
#include <string.h>

#include "keymap.h"
#include "tx_fnv.h"

bool keymap_key(keymap_node *node, const uint8_t *key, size_t len)
{
    if (len > KEYMAP_KEY_MAX)
        return false;
    memcpy(node->key, key, len);
    node->keylen = len;
    node->hash = tx_fnv1a64(key, len);
    return true;
}

bool keymap_init(keymap *m)
{
    m->nb = 64;
    m->n = 0;
    m->b = calloc(m->nb, sizeof *m->b);
    return m->b != NULL;
}

void keymap_free(keymap *m)
{
    free(m->b);
    m->b = NULL;
    m->nb = m->n = 0;
}

static keymap_node **slot(const keymap *m, const keymap_node *k)
{
    keymap_node **p = &m->b[k->hash & (m->nb - 1)];
    while (*p != NULL
           && ((*p)->hash != k->hash || (*p)->keylen != k->keylen
               || memcmp((*p)->key, k->key, k->keylen) != 0))
        p = &(*p)->next;
    return p;
}

keymap_node *keymap_find(const keymap *m, const keymap_node *k)
{
    return *slot(m, k);
}

/* Doubles the buckets once they are as many as the nodes. */
static void grow(keymap *m)
{
    if (m->n < m->nb)
        return;
    size_t nb = 2 * m->nb;
    keymap_node **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return; /* longer chains, no harm */
    for (size_t i = 0; i < m->nb; i++)
        for (keymap_node *x = m->b[i], *next; x != NULL; x = next) {
            next = x->next;
            keymap_node **at = &b[x->hash & (nb - 1)];
            x->next = *at;
            *at = x;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

void keymap_add(keymap *m, keymap_node *x)
{
    grow(m);
    keymap_node **at = &m->b[x->hash & (m->nb - 1)];
    x->next = *at;
    *at = x;
    m->n++;
}

void keymap_remove(keymap *m, keymap_node *x)
{
    keymap_node **p = &m->b[x->hash & (m->nb - 1)];
    while (*p != x)
        p = &(*p)->next;
    *p = x->next;
    x->next = NULL;
    m->n--;
}

void keymap_each(const keymap *m, void (*each)(keymap_node *x, void *user),
                 void *user)
{
    for (size_t i = 0; i < m->nb; i++)
        for (keymap_node *x = m->b[i], *next; x != NULL; x = next) {
            next = x->next;
            each(x, user);
        }
}
