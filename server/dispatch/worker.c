/*
 * worker.c - the device worker loop: pop, run, repeat.
 */
#include <stdio.h>
#include <stdlib.h>

#include "worker.h"

static void worker_main(void *arg)
{
    worker *w = arg;
    tallyd_server *s = w->s;
    job *batch[WORKER_MAX_BATCH];
    queue_take how = {
        .max = s->cfg.max_batch < 1                  ? 1
               : s->cfg.max_batch < WORKER_MAX_BATCH ? s->cfg.max_batch
                                                     : WORKER_MAX_BATCH,
        .batch_bytes = WORKER_BATCH_BYTES,
        .delay_ns = (uint64_t)s->cfg.max_queue_delay_us * 1000u,
    };
    for (;;) {
        size_t n = queue_pop(&s->queue, batch, &how);
        if (n == 0)
            return;
        atomic_fetch_add(&s->metrics.running, (long long)n);
        bool more = w->run(w, batch, n);
        atomic_fetch_sub(&s->metrics.running, (long long)n);
        if (!more)
            return;
    }
}

eng_err workers_start(tallyd_server *s, worker_run_fn run, char *msg,
                      size_t msglen)
{
    s->workers = calloc(s->cfg.workers, sizeof *s->workers);
    if (s->workers == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    s->nworkers = s->cfg.workers;
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->id = i;
        w->device = i % s->ndevices;
        w->run = run;
        eng_err e = eng_stream_open(s->devices[w->device].engine, &w->stream,
                                    msg, msglen);
        if (e != ENG_E_OK)
            return e;
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (uv_thread_create(&w->thread, worker_main, w) != 0)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "cannot start worker thread %u", i);
        w->started = true;
    }
    return ENG_E_OK;
}

void workers_stop(tallyd_server *s)
{
    queue_close(&s->queue);
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (w->started)
            uv_thread_join(&w->thread);
        eng_stream_close(w->stream);
        eng_stream_close(w->host);
    }
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
}
