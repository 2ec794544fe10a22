/*
 * admit.c - admission by connection counts (admit.h).
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "admit.h"

typedef struct {
    uint8_t addr[16]; /* IPv4 in the first 4, the rest zero */
    uint8_t len;      /* 0: an empty slot */
    unsigned count;
} slot;

struct http_admit {
    uv_mutex_t mu;
    unsigned max_total, max_per_client, open;
    slot *slots;
    size_t mask; /* slots - 1, a power of two minus one */
};

http_admit *http_admit_new(unsigned max_total, unsigned max_per_client)
{
    http_admit *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    /* at most max_total addresses are in the table at once: twice that
     * many slots keeps probes short */
    size_t n = 64;
    while (n < (size_t)max_total * 2 && n < ((size_t)1 << 24))
        n *= 2;
    l->slots = calloc(n, sizeof *l->slots);
    if (l->slots == NULL) {
        free(l);
        return NULL;
    }
    l->mask = n - 1;
    l->max_total = max_total;
    l->max_per_client = max_per_client;
    uv_mutex_init(&l->mu);
    return l;
}

void http_admit_free(http_admit *l)
{
    if (l == NULL)
        return;
    uv_mutex_destroy(&l->mu);
    free(l->slots);
    free(l);
}

/* The address's bytes (no port); false for a family with none. */
static bool key_of(const struct sockaddr *a, socklen_t len, uint8_t key[16],
                   uint8_t *klen)
{
    memset(key, 0, 16);
    if (a != NULL && a->sa_family == AF_INET
        && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        memcpy(key, &((const struct sockaddr_in *)a)->sin_addr, 4);
        *klen = 4;
        return true;
    }
    if (a != NULL && a->sa_family == AF_INET6
        && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        memcpy(key, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        *klen = 16;
        return true;
    }
    return false;
}

static size_t hash(const uint8_t key[16])
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 1099511628211u;
    return (size_t)(h ^ (h >> 29));
}

/* The slot holding key, or the empty one where it would go. */
static slot *find(http_admit *l, const uint8_t key[16], uint8_t klen)
{
    for (size_t i = hash(key) & l->mask;; i = (i + 1) & l->mask) {
        slot *s = &l->slots[i];
        if (s->len == 0 || (s->len == klen && memcmp(s->addr, key, 16) == 0))
            return s;
    }
}

/* Empties s and moves later slots of its probe run back, so that every
 * key stays reachable from its home slot without tombstones. */
static void erase(http_admit *l, slot *s)
{
    size_t i = (size_t)(s - l->slots);
    s->len = 0;
    for (size_t j = (i + 1) & l->mask; l->slots[j].len != 0;
         j = (j + 1) & l->mask) {
        size_t home = hash(l->slots[j].addr) & l->mask;
        /* j's entry may fill the hole at i when home is not in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            l->slots[i] = l->slots[j];
            l->slots[j].len = 0;
            i = j;
        }
    }
}

bool http_admit_enter(http_admit *l, const struct sockaddr *addr, socklen_t len)
{
    uint8_t key[16], klen;
    bool keyed = l->max_per_client > 0 && key_of(addr, len, key, &klen);
    uv_mutex_lock(&l->mu);
    bool ok = l->open < l->max_total;
    slot *s = NULL;
    if (ok && keyed) {
        s = find(l, key, klen);
        ok = s->len == 0 || s->count < l->max_per_client;
    }
    if (ok) {
        l->open++;
        if (s != NULL) {
            if (s->len == 0) {
                memcpy(s->addr, key, 16);
                s->len = klen;
                s->count = 0;
            }
            s->count++;
        }
    }
    uv_mutex_unlock(&l->mu);
    return ok;
}

void http_admit_leave(http_admit *l, const struct sockaddr *addr, socklen_t len)
{
    uint8_t key[16], klen;
    bool keyed = l->max_per_client > 0 && key_of(addr, len, key, &klen);
    uv_mutex_lock(&l->mu);
    if (l->open > 0)
        l->open--;
    if (keyed) {
        slot *s = find(l, key, klen);
        if (s->len != 0 && --s->count == 0)
            erase(l, s);
    }
    uv_mutex_unlock(&l->mu);
}

unsigned http_admit_open(http_admit *l)
{
    uv_mutex_lock(&l->mu);
    unsigned n = l->open;
    uv_mutex_unlock(&l->mu);
    return n;
}
