/*
 * trace.c - traceparent in and out (trace.h).
 */
#define _DEFAULT_SOURCE /* getrandom */
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "trace.h"

/* Ids come from a per-thread generator seeded once from the kernel
 * (splitmix64 over a counter): W3C asks ids to be random, not secret, and
 * a system call per request (glibc 2.36's arc4random is one) would cost
 * small requests a few percent. */
static _Thread_local uint64_t state;
static _Thread_local int seeded;

static uint64_t next64(void)
{
    if (!seeded) {
        if (getrandom(&state, sizeof state, 0) != (ssize_t)sizeof state) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            state = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u
                    ^ (uint64_t)(uintptr_t)&state;
        }
        seeded = 1;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void random_bytes(uint8_t *p, size_t n)
{
    while (n > 0) {
        uint64_t v = next64();
        size_t k = n < 8 ? n : 8;
        memcpy(p, &v, k);
        p += k;
        n -= k;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is not valid either */
}

/* n bytes of hex at s into out[n / 2]; false on a bad digit. */
static bool unhex(const char *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

bool trace_parse(const char *v, size_t n, trace_ctx *t)
{
    if (v == NULL || n < TRACE_PARENT_LEN)
        return false;
    uint8_t version, trace[16], parent[8], flags;
    if (!unhex(v, 2, &version) || version == 0xff || v[2] != '-'
        || v[35] != '-' || v[52] != '-')
        return false;
    if (version == 0 ? n != TRACE_PARENT_LEN
                     : n > TRACE_PARENT_LEN && v[TRACE_PARENT_LEN] != '-')
        return false;
    if (!unhex(v + 3, 32, trace) || !unhex(v + 36, 16, parent)
        || !unhex(v + 53, 2, &flags) || all_zero(trace, 16)
        || all_zero(parent, 8))
        return false;
    memcpy(t->trace_id, trace, 16);
    memcpy(t->parent_id, parent, 8);
    t->flags = flags;
    return true;
}

void trace_sampler_set(trace_sampler *s, double ratio)
{
    uint64_t t;
    if (!(ratio > 0)) /* NaN too */
        t = 0;
    else if (ratio >= 1)
        t = UINT64_MAX;
    else
        t = (uint64_t)(ratio * 18446744073709551616.0);
    atomic_store(&s->threshold, t);
}

double trace_sampler_ratio(trace_sampler *s)
{
    uint64_t t = atomic_load(&s->threshold);
    return t == UINT64_MAX ? 1.0 : (double)t / 18446744073709551616.0;
}

static bool sampled(trace_sampler *s, const uint8_t id[16])
{
    if (s == NULL)
        return false;
    uint64_t t = atomic_load_explicit(&s->threshold, memory_order_relaxed);
    uint64_t x = 0;
    for (int i = 8; i < 16; i++)
        x = x << 8 | id[i];
    return t == UINT64_MAX || x < t;
}

void trace_span_id(uint8_t out[8])
{
    do
        random_bytes(out, 8);
    while (all_zero(out, 8));
}

void trace_begin(trace_ctx *t, const char *traceparent, size_t n,
                 trace_sampler *s)
{
    memset(t, 0, sizeof *t);
    t->continued = trace_parse(traceparent, n, t);
    if (!t->continued) {
        do
            random_bytes(t->trace_id, sizeof t->trace_id);
        while (all_zero(t->trace_id, sizeof t->trace_id));
        t->flags = sampled(s, t->trace_id) ? TRACE_SAMPLED : 0;
    }
    trace_span_id(t->span_id);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
}

void trace_format(const trace_ctx *t, char out[TRACE_PARENT_LEN + 1])
{
    memcpy(out, "00-", 3);
    hex(t->trace_id, 16, out + 3);
    out[35] = '-';
    hex(t->span_id, 8, out + 36);
    out[52] = '-';
    hex(&t->flags, 1, out + 53);
    out[TRACE_PARENT_LEN] = '\0';
}

void trace_id_hex(const trace_ctx *t, char out[33])
{
    hex(t->trace_id, 16, out);
    out[32] = '\0';
}

void trace_state_copy(const char *v, size_t n, char out[TRACE_STATE_MAX + 1])
{
    out[0] = '\0';
    if (v == NULL || n > TRACE_STATE_MAX)
        return;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0x20 || v[i] > 0x7e)
            return;
    memcpy(out, v, n);
    out[n] = '\0';
}
