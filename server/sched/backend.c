/*
 * backend.c - the scheduler's backend over real engines: a stream per
 * worker on its device, the host backend opened once on need, a cold
 * device's kernels built (eng_engine_warmup), and the launches themselves
 * (eng_scan, eng_scan_strided, eng_scan_batch).
 */
#include <stdlib.h>
#include <uv.h>

#include "clock.h"
#include "scheduler.h"

typedef struct {
    eng_engine *devices[SCHED_MAX_DEVICES];
    unsigned n;
    uv_mutex_t mu; /* guards host */
    eng_engine *host;
    unsigned host_threads; /* each stream's on host */
} engines;

static eng_err open_stream(void *user, unsigned d, void **stream, char *msg,
                           size_t msglen)
{
    engines *e = user;
    eng_engine *on;
    if (d == SCHED_HOST) {
        eng_err err = ENG_E_OK;
        uv_mutex_lock(&e->mu);
        if (e->host == NULL) {
            eng_engine_options o;
            eng_engine_options_init(&o);
            o.device = "host";
            o.warmup = false;
            o.host_threads = e->host_threads;
            err = eng_engine_open(&o, &e->host, msg, msglen);
        }
        on = e->host;
        uv_mutex_unlock(&e->mu);
        if (err != ENG_E_OK)
            return err;
    } else if (d < e->n) {
        on = e->devices[d];
    } else {
        return eng_fail(msg, msglen, ENG_E_NO_DEVICE, "no device %u", d);
    }
    return eng_stream_open(on, (eng_stream **)stream, msg, msglen);
}

static void close_stream(void *user, void *stream)
{
    (void)user;
    eng_stream_close(stream);
}

static eng_err run(void *user, void *stream, job **jobs, size_t n,
                   eng_batch_times *t, char *msg, size_t msglen)
{
    (void)user;
    if (n > 1) {
        eng_part parts[SCHED_MAX_BATCH];
        for (size_t i = 0; i < n; i++) {
            parts[i].in = jobs[i]->in;
            parts[i].out = jobs[i]->out;
            parts[i].outer = jobs[i]->lines.outer;
        }
        return eng_scan_batch(stream, &jobs[0]->lines, parts, n, t, msg,
                              msglen);
    }
    job *j = jobs[0];
    uint64_t start = now_ns();
    eng_err e = j->iv != NULL
                    ? eng_scan_strided(stream, &j->desc, j->iv, j->in, j->ov,
                                       j->out, msg, msglen)
                    : eng_scan(stream, &j->desc, j->in, j->out, msg, msglen);
    t->scan_ns = now_ns() - start;
    return e;
}

static eng_err run_inline(void *user, job *j, char *msg, size_t msglen)
{
    (void)user;
    return j->iv != NULL
               ? eng_scan_strided_inline(&j->desc, j->iv, j->in, j->ov, j->out,
                                         msg, msglen)
               : eng_scan_inline(&j->desc, j->in, j->out, msg, msglen);
}

static eng_err prepare(void *user, unsigned d, const atomic_bool *cancel,
                       char *msg, size_t msglen)
{
    engines *e = user;
    if (d >= e->n)
        return eng_fail(msg, msglen, ENG_E_NO_DEVICE, "no device %u", d);
    return eng_engine_warmup(e->devices[d], cancel, msg, msglen);
}

bool sched_engines(sched_backend *b, eng_engine *const *devices, unsigned n,
                   unsigned host_threads)
{
    engines *e = calloc(1, sizeof *e);
    if (e == NULL)
        return false;
    e->n = n < SCHED_MAX_DEVICES ? n : SCHED_MAX_DEVICES;
    e->host_threads = host_threads;
    for (unsigned d = 0; d < e->n; d++)
        e->devices[d] = devices[d];
    uv_mutex_init(&e->mu);
    *b = (sched_backend){.stream_open = open_stream,
                         .stream_close = close_stream,
                         .run = run,
                         .run_inline = run_inline,
                         .prepare = prepare,
                         .user = e};
    return true;
}

void sched_engines_free(sched_backend *b)
{
    engines *e = b->user;
    if (e == NULL)
        return;
    eng_engine_close(e->host);
    uv_mutex_destroy(&e->mu);
    free(e);
    b->user = NULL;
}
