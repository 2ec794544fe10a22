/*
 * pending.c - the sequences whose last chunk failed with an unknown
 * outcome (internal.h's tc_pending): the next call for one of them must
 * send that chunk again (tally.h, tally_cumsum_chunk()). A few at most,
 * in an array searched in turn.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tc_pending *tc_pending_of(tally_client *c, const char *id)
{
    for (size_t i = 0; i < c->npending; i++)
        if (strcmp(c->pending[i].id, id) == 0)
            return &c->pending[i];
    return NULL;
}

void tc_pending_add(tally_client *c, const char *id, uint64_t chunk,
                    uint64_t hash, tally_code code)
{
    if (c->npending == c->pending_cap) {
        size_t cap = c->pending_cap ? c->pending_cap * 2 : 8;
        struct tc_pending *v = realloc(c->pending, cap * sizeof *v);
        if (v != NULL) {
            c->pending = v;
            c->pending_cap = cap;
        }
    }
    char *copy = strdup(id);
    if (copy != NULL && c->npending < c->pending_cap)
        c->pending[c->npending++] = (struct tc_pending){copy, chunk, hash, code};
    else
        free(copy); /* out of memory: the guard is lost, not the chunk */
}

void tc_pending_drop(tally_client *c, struct tc_pending *p)
{
    if (p == NULL)
        return;
    free(p->id);
    *p = c->pending[--c->npending];
}

void tc_pending_free(tally_client *c)
{
    for (size_t i = 0; i < c->npending; i++)
        free(c->pending[i].id);
    free(c->pending);
    c->pending = NULL;
    c->npending = c->pending_cap = 0;
}
