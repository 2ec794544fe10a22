/*
 * fake_sched.c - the scheduler's fake backend and clock (fake_sched.h).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_sched.h"

atomic_ullong fake_now;

uint64_t fake_clock(void *user)
{
    (void)user;
    return atomic_load(&fake_now);
}

typedef struct {
    int device; /* FAKE_HOST_DEV for the host backend */
} fake_stream;

static eng_err fake_open(void *user, unsigned d, void **stream, char *msg,
                         size_t msglen)
{
    fake *f = user;
    fake_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "no memory");
    s->device = d == SCHED_HOST ? FAKE_HOST_DEV : (int)d;
    atomic_fetch_add(&f->streams_open, 1);
    *stream = s;
    return ENG_E_OK;
}

static void fake_close(void *user, void *stream)
{
    fake *f = user;
    atomic_fetch_sub(&f->streams_open, 1);
    free(stream);
}

static eng_err fake_run(void *user, void *stream, job **jobs, size_t n,
                        eng_batch_times *t, char *msg, size_t msglen)
{
    fake *f = user;
    fake_stream *s = stream;
    (void)t;
    if (atomic_load(&f->gate)
        && (f->gate_device == 0 || f->gate_device == s->device + 1)) {
        atomic_store(&f->holding, true);
        while (!atomic_load(&f->open))
            uv_sleep(1);
    }
    unsigned long long cost = atomic_load(
        &f->cost_ns[s->device == FAKE_HOST_DEV ? 4 : s->device]);
    if (cost != 0)
        atomic_fetch_add(&fake_now, cost);
    uv_mutex_lock(&f->mu);
    if (f->nlaunches < FAKE_MAX_LAUNCHES) {
        f->launch_device[f->nlaunches] = s->device;
        f->launch_jobs[f->nlaunches++] = n;
    }
    uv_mutex_unlock(&f->mu);
    bool broke = s->device != FAKE_HOST_DEV && f->fail[s->device] != ENG_E_OK;
    for (size_t i = 0; i < n && f->on_run != NULL; i++)
        f->on_run(jobs[i], broke ? -1 : s->device);
    if (broke)
        return eng_fail(msg, msglen, f->fail[s->device], "device %d broke",
                        s->device);
    return ENG_E_OK;
}

static eng_err fake_inline(void *user, job *j, char *msg, size_t msglen)
{
    fake *f = user;
    (void)msg;
    (void)msglen;
    atomic_fetch_add(&f->inline_runs, 1);
    if (f->on_run != NULL)
        f->on_run(j, -2);
    return ENG_E_OK;
}

static eng_err fake_prepare(void *user, unsigned d, const atomic_bool *cancel,
                            char *msg, size_t msglen)
{
    fake *f = user;
    atomic_fetch_add(&f->builds, 1);
    while (!atomic_load(&f->build_open)) {
        if (atomic_load(cancel)) {
            atomic_fetch_add(&f->builds_cancelled, 1);
            return eng_fail(msg, msglen, ENG_E_DEVICE, "cancelled");
        }
        uv_sleep(1);
    }
    if (f->build_fail[d] != ENG_E_OK)
        return eng_fail(msg, msglen, f->build_fail[d], "device %u's build broke",
                        d);
    return ENG_E_OK;
}

void fake_init(fake *f)
{
    memset(f, 0, sizeof *f);
    uv_mutex_init(&f->mu);
}

sched_backend fake_backend(fake *f)
{
    return (sched_backend){.stream_open = fake_open,
                           .stream_close = fake_close,
                           .run = fake_run,
                           .run_inline = fake_inline,
                           .prepare = fake_prepare,
                           .user = f};
}

void fake_wait_holding(fake *f)
{
    for (int tries = 0; tries < 5000 && !atomic_load(&f->holding); tries++)
        uv_sleep(1);
    CHECK(atomic_load(&f->holding), "the launch began");
}
