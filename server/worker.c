/*
 * worker.c - the device worker loop.
 */
#include <stdio.h>
#include <stdlib.h>

#include "worker.h"

#define MAX_BATCH 64

static void run(worker *w, job *j)
{
    tally_server *s = w->s;
    if (s->cfg.fault_delay_ms > 0) /* --fault-delay-ms: a slow device */
        uv_sleep(s->cfg.fault_delay_ms);
    uint64_t start = now_ns();
    j->worker = w->id;
    if (j->deadline_ns != 0 && start >= j->deadline_ns) {
        j->err = TALLY_E_DEADLINE;
        j->finished_ns = start;
        j->done(j);
        return;
    }
    j->started_ns = start;
    j->err =
        tally_scan(w->stream, &j->desc, j->in, j->out, j->msg, sizeof j->msg);
    j->finished_ns = now_ns();
    if (j->err == TALLY_E_OK && j->deadline_ns != 0
        && j->finished_ns > j->deadline_ns)
        j->err = TALLY_E_DEADLINE;
    if (w->id < METRIC_MAX_WORKERS)
        atomic_fetch_add_explicit(&s->metrics.busy_ns[w->id],
                                  j->finished_ns - j->started_ns,
                                  memory_order_relaxed);
    j->done(j);
}

static void worker_main(void *arg)
{
    worker *w = arg;
    tally_server *s = w->s;
    job *batch[MAX_BATCH];
    size_t max = s->cfg.max_batch < MAX_BATCH ? s->cfg.max_batch : MAX_BATCH;
    for (;;) {
        size_t n = queue_pop(&s->queue, batch, max);
        if (n == 0)
            return;
        /* Compatible jobs run one after another for now; merging them
         * into one launch (dynamic batching) slots in here. */
        for (size_t i = 0; i < n; i++)
            run(w, batch[i]);
    }
}

tally_err workers_start(tally_server *s, char *msg, size_t msglen)
{
    s->workers = calloc(s->cfg.workers, sizeof *s->workers);
    if (s->workers == NULL)
        return tally_fail(msg, msglen, TALLY_E_NOMEM, "out of memory");
    s->nworkers = s->cfg.workers;
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        w->s = s;
        w->id = i;
        tally_err e = tally_stream_open(s->engine, &w->stream, msg, msglen);
        if (e != TALLY_E_OK)
            return e;
    }
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (uv_thread_create(&w->thread, worker_main, w) != 0)
            return tally_fail(msg, msglen, TALLY_E_NOMEM,
                              "cannot start worker thread %u", i);
        w->started = true;
    }
    return TALLY_E_OK;
}

void workers_stop(tally_server *s)
{
    queue_close(&s->queue);
    for (unsigned i = 0; i < s->nworkers; i++) {
        worker *w = &s->workers[i];
        if (w->started)
            uv_thread_join(&w->thread);
        tally_stream_close(w->stream);
    }
    free(s->workers);
    s->workers = NULL;
    s->nworkers = 0;
}
