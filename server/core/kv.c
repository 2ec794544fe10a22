/*
 * kv.c - the versions of kv.h's records: drawn, never repeated.
 */
#define _GNU_SOURCE /* getrandom */
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#include "kv.h"

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

kv_version kv_version_draw(uint64_t *state)
{
    kv_version v = {0, 0};
    while (kv_version_none(v))
        v = (kv_version){splitmix(state), splitmix(state)};
    return v;
}

uint64_t kv_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s && s != 0)
        return s;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    s = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    return splitmix(&s) ^ (uint64_t)(uintptr_t)&s;
}

kv_version kv_version_new(void)
{
    static _Thread_local uint64_t state;
    if (state == 0)
        state = kv_seed();
    return kv_version_draw(&state);
}
