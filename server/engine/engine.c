/*
 * engine.c - choosing a backend and dispatching scans to it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer.h"
#include "cl_device.h"
#include "engine.h"
#include "scan_cl.h"
#include "scan_host.h"

struct eng_engine {
    bool host;
    unsigned host_threads;
    eng_cl_device dev;
    eng_cl_programs progs;
    char describe[320];
    eng_log_fn log;
    void *log_user;
    eng_cl_fault fault; /* testing: refused launches */
    bool fault_build;   /* testing: the warm-up fails */
    /* a CPU device sharing the host's memory that hands the host
     * backend's code the scans it does faster (side_packed(),
     * eng_host_strided_fast()): not with kernels_only or injected faults,
     * so that every scan is a launch those can reach */
    bool cpu_side;
};

struct eng_stream {
    eng_engine *e;
    eng_host *host;
    eng_cl_stream *cl;
    /* the host pool helpers for the scans a CPU device hands to it
     * (engine's cpu_side), started on first use */
    eng_host *cpu_side;
    void *stage; /* eng_scan_batch()'s stacked lines (eng_buffer_alloc) */
    size_t stage_cap;
};

void eng_engine_options_init(eng_engine_options *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = true;
}

static uint64_t clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void log_stderr(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "engine: %s\n", line);
}

static void logf_(eng_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void logf_(eng_engine *e, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    e->log(e->log_user, line);
}

/* The device spec names (NULL, "", "auto": the first OpenCL device, or
 * the host backend when the machine has none at all; "host"), opened
 * into e. */
static eng_err open_device(eng_engine *e, const char *spec, char *msg,
                           size_t msglen)
{
    if (spec != NULL && strcmp(spec, "host") == 0) {
        e->host = true;
        return ENG_E_OK;
    }
    bool none_at_all = false;
    char why[256];
    eng_err err =
        eng_cl_device_open(spec, &e->dev, &none_at_all, why, sizeof why);
    bool automatic =
        spec == NULL || spec[0] == '\0' || strcmp(spec, "auto") == 0;
    if (err != ENG_E_OK && automatic && none_at_all) {
        logf_(e, "%s; using the host backend", why);
        e->host = true;
        return ENG_E_OK;
    }
    if (err != ENG_E_OK)
        return eng_fail(msg, msglen, err, "%s", why);
    return ENG_E_OK;
}

eng_err eng_engine_open(const eng_engine_options *o, eng_engine **out,
                        char *msg, size_t msglen)
{
    eng_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    e->log = o->log != NULL ? o->log : log_stderr;
    e->log_user = o->log_user;
    e->host_threads = o->host_threads;
    e->fault_build = o->fault_build;

    eng_err err = open_device(e, o->device, msg, msglen);
    if (err != ENG_E_OK) {
        free(e);
        return err;
    }
    if (e->host) {
        eng_host *probe = eng_host_new(o->host_threads);
        if (probe == NULL) {
            free(e);
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "cannot start host threads");
        }
        snprintf(e->describe, sizeof e->describe, "host (%u threads)",
                 eng_host_threads(probe));
        eng_host_free(probe);
    } else {
        eng_cl_layout layout;
        if (!eng_cl_layout_for(&e->dev, o->layout, &layout)) {
            eng_cl_device_close(&e->dev);
            free(e);
            return eng_fail(msg, msglen, ENG_E_INVALID,
                            "bad kernel layout \"%s\" (expected auto, cpu "
                            "or gpu, optionally with ,key=value overrides)",
                            o->layout);
        }
        eng_cl_programs_init(&e->progs, &e->dev, &layout);
        snprintf(e->describe, sizeof e->describe, "%s (%s layout)", e->dev.name,
                 layout.name);
    }
    logf_(e, "device: %s", e->describe);

    if (o->warmup) {
        err = eng_engine_warmup(e, NULL, msg, msglen);
        if (err != ENG_E_OK) {
            eng_engine_close(e);
            return err;
        }
    }
    e->cpu_side = !e->host && e->dev.unified
                  && (e->dev.type & CL_DEVICE_TYPE_CPU) && !o->kernels_only
                  && o->fault_every == 0;
    if (!e->host && o->fault_every > 0) {
        e->fault.start_ns = clock_ns();
        e->fault.after_ns = (uint64_t)o->fault_after_ms * 1000000u;
        e->fault.every = o->fault_every;
        e->fault.late = o->fault_late;
        logf_(e,
              "testing: 1 launch in %u %s, from %u ms after the device's "
              "kernels are built",
              o->fault_every,
              o->fault_late ? "fails after running" : "is refused",
              o->fault_after_ms);
    }
    *out = e;
    return ENG_E_OK;
}

void eng_engine_close(eng_engine *e)
{
    if (e == NULL)
        return;
    if (!e->host) {
        eng_cl_programs_free(&e->progs);
        eng_cl_device_close(&e->dev);
    }
    free(e);
}

const char *eng_engine_describe(const eng_engine *e)
{
    return e->describe;
}

bool eng_engine_is_host(const eng_engine *e)
{
    return e->host;
}

eng_err eng_engine_warmup(eng_engine *e, const atomic_bool *cancel, char *msg,
                          size_t msglen)
{
    if (e->host)
        return ENG_E_OK;
    if (e->fault_build)
        return eng_fail(msg, msglen, ENG_E_DEVICE,
                        "testing: the kernels were made to fail to build "
                        "(--fault-build)");
    eng_stream *s;
    eng_err err = eng_stream_open(e, &s, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    eng_cl_stream_set_fault(s->cl, NULL); /* warm-up launches never fail */
    err = eng_cl_warmup(s->cl, cancel, msg, msglen);
    eng_stream_close(s);
    /* testing: --fault-after-ms counts from here, the kernels built (a
     * cold build can take longer than the wait a test chose). No launch
     * reads it yet: the device joins the pool after this returns. */
    if (err == ENG_E_OK && e->fault.every > 0)
        e->fault.start_ns = clock_ns();
    return err;
}

eng_err eng_stream_open(eng_engine *e, eng_stream **out, char *msg,
                        size_t msglen)
{
    eng_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    s->e = e;
    if (e->host) {
        s->host = eng_host_new(e->host_threads);
        if (s->host == NULL) {
            free(s);
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "cannot start host threads");
        }
    } else {
        s->cl = eng_cl_stream_new(&e->progs, msg, msglen);
        if (s->cl == NULL) {
            free(s);
            return ENG_E_DEVICE;
        }
        eng_cl_stream_set_fault(s->cl, &e->fault);
    }
    *out = s;
    return ENG_E_OK;
}

void eng_stream_close(eng_stream *s)
{
    if (s == NULL)
        return;
    eng_host_free(s->host);
    eng_host_free(s->cpu_side);
    eng_cl_stream_free(s->cl);
    eng_buffer_free(s->stage);
    free(s);
}

/* The stream's host pool helpers for the scans its CPU device hands to
 * them, one per compute unit, started on first use; NULL where the device
 * keeps every scan, or when threads cannot start (its kernels then run
 * the scan). */
static eng_host *side_pool(eng_stream *s)
{
    if (!s->e->cpu_side)
        return NULL;
    if (s->cpu_side == NULL)
        s->cpu_side = eng_host_new(s->e->dev.compute_units);
    return s->cpu_side;
}

/* Whether a CPU device hands a packed scan to the host backend's code:
 * float32 tensors whose input and output fit together in the cache its
 * cores count on (eng_cl_cache_share()). There a PoCL launch's fixed cost
 * is a large part of the scan, and the host's vector
 * loops, which start in microseconds, are faster in all three layouts;
 * measured in BENCHMARKS.md, issue 27. */
static bool side_packed(const eng_engine *e, const eng_lines *l)
{
    return e->cpu_side && l->dtype == TX_FLOAT32
           && l->bytes <= eng_cl_cache_share(&e->dev) / 2;
}

static eng_err scan_packed(eng_stream *s, const eng_lines *l, const void *in,
                           void *out, char *msg, size_t msglen)
{
    if (s->host != NULL)
        return eng_host_scan(s->host, l, in, out, msg, msglen);
    eng_host *side = side_packed(s->e, l) ? side_pool(s) : NULL;
    if (side != NULL)
        return eng_host_scan(side, l, in, out, msg, msglen);
    return eng_cl_scan(s->cl, l, in, out, msg, msglen);
}

eng_err eng_scan(eng_stream *s, const eng_scan_desc *d, const void *in,
                 void *out, char *msg, size_t msglen)
{
    eng_lines l;
    eng_err err = eng_lines_from_desc(d, &l, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    return scan_packed(s, &l, in, out, msg, msglen);
}

eng_err eng_scan_batch(eng_stream *s, const eng_lines *shape,
                       const eng_part *parts, size_t count, eng_batch_times *t,
                       char *msg, size_t msglen)
{
    memset(t, 0, sizeof *t);
    eng_lines l = *shape;
    size_t line = (size_t)(l.n * l.inner) * tx_dtype_size(l.dtype);
    uint64_t outer = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < count; i++) {
        size_t b;
        if (__builtin_add_overflow(outer, parts[i].outer, &outer)
            || __builtin_mul_overflow((size_t)parts[i].outer, line, &b)
            || __builtin_add_overflow(bytes, b, &bytes))
            return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                            "a batch of %zu tensors is too large", count);
    }
    l.outer = outer;
    l.elements = outer * l.n * l.inner;
    l.bytes = bytes;
    if (bytes == 0) /* every tensor empty: nothing to move or scan */
        return ENG_E_OK;
    /* A batch a CPU device hands to the host code has no launch to share:
     * each part is scanned where it lies, without the stage and its two
     * copies (which made it slower than its parts one by one). */
    eng_host *side =
        s->host == NULL && side_packed(s->e, &l) ? side_pool(s) : NULL;
    if (side != NULL) {
        uint64_t t0 = clock_ns();
        for (size_t i = 0; i < count; i++) {
            if (parts[i].outer == 0) /* its pointers may be NULL */
                continue;
            eng_lines p = l;
            p.outer = parts[i].outer;
            p.elements = p.outer * p.n * p.inner;
            p.bytes = (size_t)p.outer * line;
            eng_err e =
                eng_host_scan(side, &p, parts[i].in, parts[i].out, msg, msglen);
            if (e != ENG_E_OK)
                return e;
        }
        t->scan_ns = clock_ns() - t0;
        return ENG_E_OK;
    }
    if (bytes > s->stage_cap) {
        void *b = eng_buffer_alloc(bytes);
        if (b == NULL)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "out of memory for a batch of %zu bytes", bytes);
        eng_buffer_free(s->stage);
        s->stage = b;
        s->stage_cap = bytes;
    }
    uint64_t t0 = clock_ns();
    char *at = s->stage;
    for (size_t i = 0; i < count; i++) {
        size_t b = (size_t)parts[i].outer * line;
        if (b > 0) /* an empty tensor's pointer may be NULL */
            memcpy(at, parts[i].in, b);
        at += b;
    }
    uint64_t t1 = clock_ns();
    eng_err e = scan_packed(s, &l, s->stage, s->stage, msg, msglen);
    uint64_t t2 = clock_ns();
    if (e == ENG_E_OK) {
        at = s->stage;
        for (size_t i = 0; i < count; i++) {
            size_t b = (size_t)parts[i].outer * line;
            if (b > 0)
                memcpy(parts[i].out, at, b);
            at += b;
        }
    }
    t->gather_ns = t1 - t0;
    t->scan_ns = t2 - t1;
    t->scatter_ns = clock_ns() - t2;
    return e;
}

eng_err eng_scan_inline(const eng_scan_desc *d, const void *in, void *out,
                        char *msg, size_t msglen)
{
    eng_lines l;
    eng_err err = eng_lines_from_desc(d, &l, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    return eng_host_scan_serial(&l, in, out, msg, msglen);
}

/* Validates a strided request; *packed when it is a packed one. */
static eng_err strided_prepare(const eng_scan_desc *d, const eng_view *iv,
                               const void *in, const eng_view *ov,
                               const void *out, eng_strided *v, bool *packed,
                               char *msg, size_t msglen)
{
    eng_err err = eng_strided_from_desc(d, iv, ov, v, packed, msg, msglen);
    if (err != ENG_E_OK || in != out)
        return err;
    bool same = (iv->strides == NULL) == (ov->strides == NULL);
    for (int k = 0; same && iv->strides != NULL && k < d->rank; k++)
        same = d->shape[k] == 1 || iv->strides[k] == ov->strides[k];
    if (!same)
        return eng_fail(msg, msglen, ENG_E_SHAPE,
                        "in place, the input and output layouts must be "
                        "the same");
    return ENG_E_OK;
}

eng_err eng_scan_strided(eng_stream *s, const eng_scan_desc *d,
                         const eng_view *iv, const void *in, const eng_view *ov,
                         void *out, char *msg, size_t msglen)
{
    eng_strided v;
    bool packed;
    eng_err err = strided_prepare(d, iv, in, ov, out, &v, &packed, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    if (packed)
        return scan_packed(s, &v.l, in, out, msg, msglen);
    if (s->host != NULL)
        return eng_host_scan_strided(s->host, &v, in, out, msg, msglen);
    /* On an OpenCL CPU device that works in the host's memory, the
     * layouts that transpose and the lines contiguous on both sides run
     * faster in the host backend's code than in PoCL's kernels
     * (BENCHMARKS.md, issue 27): the same memory, the same cores. */
    eng_host *side =
        s->e->cpu_side && eng_host_strided_fast(&v, s->e->dev.compute_units)
            ? side_pool(s)
            : NULL;
    if (side != NULL)
        return eng_host_scan_strided(side, &v, in, out, msg, msglen);
    return eng_cl_scan_strided(s->cl, &v, in, out, msg, msglen);
}

eng_err eng_scan_strided_inline(const eng_scan_desc *d, const eng_view *iv,
                                const void *in, const eng_view *ov, void *out,
                                char *msg, size_t msglen)
{
    eng_strided v;
    bool packed;
    eng_err err = strided_prepare(d, iv, in, ov, out, &v, &packed, msg, msglen);
    if (err != ENG_E_OK)
        return err;
    if (packed)
        return eng_host_scan_serial(&v.l, in, out, msg, msglen);
    return eng_host_scan_strided_serial(&v, in, out, msg, msglen);
}

eng_err eng_copy(eng_stream *s, const void *in, void *out, size_t bytes,
                 bool streaming, char *msg, size_t msglen)
{
    if (s->host != NULL) {
        if (in != out)
            memcpy(out, in, bytes);
        return ENG_E_OK;
    }
    return eng_cl_copy(s->cl, in, out, bytes, streaming, msg, msglen);
}

_Static_assert(ENG_DEVICE_SPEC == ENG_SPEC_LEN, "one spec length");

int eng_engine_expand(const char *spec, char (*out)[ENG_DEVICE_SPEC], int max,
                      char *msg, size_t msglen)
{
    return eng_cl_expand(spec, out, max, msg, msglen);
}

int eng_engine_list(FILE *f)
{
    return eng_cl_list(f);
}
