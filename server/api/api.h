/*
 * api.h - the handlers, and the route table that names them.
 *
 *   GET  /                                    the landing page (or a JSON
 * index) GET  /openapi.yaml, /openapi.json         the API's description GET
 * /docs, /docs/swagger-ui*             the interactive API docs POST /v1/cumsum
 * native: JSON, .npy or raw GET  /v2                                  KServe
 * server metadata GET  /v2/health/live, /v2/health/ready    KServe health GET
 * /v2/models/cumsum[/versions/1]       model metadata GET
 * /v2/models/cumsum[/versions/1]/ready model readiness GET
 * /v2/models/cumsum/config             Triton-style model config GET
 * /v2/models[/cumsum[/versions/1]]/stats  Triton-style statistics POST
 * /v2/models/cumsum[/versions/1]/infer inference GET  /metrics Prometheus
 * metrics GET, POST /v2[/models/cumsum]/trace/setting  Triton's trace settings
 *   GET  /v2/systemsharedmemory[/region/{name}]/status    Triton's system
 *   POST /v2/systemsharedmemory/region/{name}/register    shared-memory
 *   POST /v2/systemsharedmemory[/region/{name}]/unregister extension
 *   ... /v2/cudasharedmemory/...              refused (none), but for
 *                                             unregistering everything
 *
 * HEAD is served wherever GET is. routes.c holds the table; native.c
 * (with dml.c for DirectML's operator description), kserve.c, shm.c,
 * landing.c, docs.c and ops.c the handlers; json_reply.c their JSON answers.
 * proto/openapi.yaml documents the same routes, and tests/integration checks
 * that the two agree.
 *
 * Every handler runs on an HTTP thread once the body is complete, and
 * answers through reply.h or hands a scan to the scheduler (submit.h).
 */
#ifndef TALLY_API_H
#define TALLY_API_H

#include "exporter.h"
#include "grpc.h"
#include "json.h"
#include "kserve_req.h"
#include "list.h"
#include "router.h"
#include "scheduler.h"
#include "sequence.h"
#include "shm.h"
#include "trace_settings.h"

typedef struct api_watch api_watch;

/* What /metrics labels requests with (route="..."), over HTTP and gRPC. */
enum { NATIVE, INFER, METADATA, HEALTH, METRICS, SHM, PAGE, OTHER, NLABELS };

/* The interactive docs' Swagger UI files (docs.c), read at start-up.
 * Read-only afterwards, so any thread may serve them. */
#define API_DOCS_FILES 2
typedef struct {
    bool loaded;                /* every file was read */
    char *dir;                  /* where they were looked for */
    char *data[API_DOCS_FILES]; /* malloc'd */
    size_t len[API_DOCS_FILES];
} api_docs;

/* Reads the files from dir, or, when dir is NULL or "", from
 * share/tally/docs beside the binary's bin/. A file missing from a dir
 * that was named is an error (false with msg); missing from the default
 * one it is not: d->loaded stays false and /docs answers 404 saying why.
 * Logs which. Before the transport starts (reading files is all it
 * does). */
bool api_docs_load(api_docs *d, const char *dir, char *msg, size_t msglen);

/* Frees the files; after the transport has stopped. */
void api_docs_free(api_docs *d);

/* The API layer's state: what tallyd.c builds, hangs on the server's
 * `app` before the transport starts, and frees after it stops. The
 * layers below see only the name (server.h). */
typedef struct api_state {
    sched *sched;
    sched_backend backend;     /* over the devices */
    grpc_door *grpc;           /* the gRPC door, for /metrics; NULL when off */
    shm_registry *shm;         /* with --allow-shared-memory; else NULL */
    seq_table *seqs;           /* the sequences (sequence.h), over their
                                * store: memory, the log, or Redis; off with
                                * --max-sequences 0 */
    list_node watches;         /* gRPC health Watches (health.c), of
                                * every gRPC loop: under watch_mu */
    uv_mutex_t watch_mu;
    const api_docs *docs;  /* tallyd.c's, borrowed; NULL: none */
    otlp_exporter *traces; /* tallyd.c's, borrowed; NULL: tracing off */
    /* /v2/trace/setting's: the settings now and at start-up (trace.c) */
    uv_mutex_t trace_mu;
    trace_setting trace, trace_default;
} api_state;

/* Builds the API layer's state over the opened devices (borrowed: they
 * must outlive it; names label them in logs and metrics): the scheduler,
 * with s->cfg's settings and its workers started, and hangs it on
 * s->app. False with msg when it cannot. The loop thread, before the
 * transport starts. */
bool api_start(api_state *a, tallyd_server *s, eng_engine *const *devices,
               const char *const *names, unsigned n, char *msg, size_t msglen);

/* Stops the scheduler (every queued job runs first) and frees it. After
 * the transport has stopped taking requests. */
void api_stop(api_state *a);

/* The sequences at the start, over the store the settings name: with
 * --state-store, the connection to Redis, opened and checked
 * (redis/redis_store.h); with --state-dir, the log, its lock taken and
 * read back (store/kv_log.h); else memory (store/kv_mem.h). False with a
 * message naming the file, or the URL without its password, when it
 * cannot be taken: tallyd does not start. After api_start(), before the
 * transports. */
bool api_sequences_load(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen);

/* Both doors' per-loop hooks (router.h's and grpc.h's loop_open and
 * loop_close): the sequences' state on a door's loop (sequence.h's
 * seq_loop_open: a shared store's connection there). On that loop's
 * thread. */
void *api_loop_open(tallyd_server *s, mailbox *mb);
void api_loop_close(tallyd_server *s, void *data);

/* The sequences at the end of a drain, once nothing runs (after
 * api_stop()): the log (--state-dir), which holds every applied chunk
 * already, flushed and closed; without a log or a store, how many were
 * dropped, logged. On the loop thread. */
void api_sequences_close(api_state *a, tallyd_server *s);

/* The same while requests are still in flight (a drain that timed out,
 * just before tallyd exits without them): freezes the sequences first
 * (seq_freeze: a chunk that would write is answered 503 and added to
 * nothing), then closes them. On the loop thread. */
void api_sequences_close_now(api_state *a, tallyd_server *s);

/* Frees the rest: the sequences, the shared-memory registry, whose regions
 * requests hold until they are freed. After api_stop() and after the transports
 * have stopped (and freed every request and call). */
void api_free(api_state *a);

/* Tracing is on, with exporter e (tallyd.c's): the trace settings start
 * from the sampler's ratio. Before the transports start. */
void api_trace_start(api_state *a, tallyd_server *s, otlp_exporter *e);

/* The scheduler a request's scans go to. */
static inline sched *api_sched(request *r)
{
    return r->s->app->sched;
}

/* The API layer's state, for a gRPC method's handler. */
static inline api_state *api_of(grpc_call *c)
{
    return grpc_call_server(c)->app;
}

/* The model config's max_sequence_idle_microseconds: --sequence-idle-ms
 * in microseconds, or 0 for no sequence_batching: sequences off, or on
 * without --model-sequence-batching (perf_analyzer runs its sequence
 * mode against a config that has it: docs/kserve.md). */
static inline uint64_t api_sequence_idle_us(tallyd_server *s)
{
    api_state *a = s->app;
    if (!s->cfg.model_sequence_batching || !seq_enabled(a->seqs))
        return 0;
    return seq_idle_ms(a->seqs) * 1000u;
}

/* The table tallyd hands to http_start(). */
extern const http_routes api_routes;

/* The inference routes' and methods' end, through every door: Triton's
 * statistics (stats.h) count every request of theirs, with its steps when
 * it succeeded. routes.c. */
void api_inference_ended(tallyd_server *s, const req_record *rec,
                         uint64_t total_ns);

void api_native(request *r);   /* native.c */
void api_dml_json(request *r); /* dml.c, from api_native */
void api_dml_binary(request *r, const char *header);
void api_infer(request *r);           /* kserve.c */
void api_server_metadata(request *r); /* ops.c */
void api_health_live(request *r);
void api_health_ready(request *r);
void api_model_metadata(request *r);
void api_model_ready(request *r);
void api_model_config(request *r);
void api_model_stats(request *r);
void api_metrics(request *r);
void api_landing(request *r); /* landing.c */
void api_openapi(request *r);
void api_docs_page(request *r); /* docs.c */
void api_docs_file(request *r);
void api_openapi_json(request *r);
void api_shm_status(request *r); /* shm.c */
void api_shm_register(request *r);
void api_shm_unregister(request *r);
void api_trace_setting(request *r); /* trace.c */
void api_cuda_shm_status(request *r);
void api_cuda_shm_register(request *r);
void api_cuda_shm_unregister(request *r);

/*
 * Tensors in shared memory, for both front doors (shm.c). A parsed
 * request names where x and y lie (shm_ref; unset: x in the request's own
 * bytes, y answered in the reply). Threading: the request's thread; the
 * hold is released on the thread that answers, after the job is done.
 */

/* Why a request that needs shared memory is refused while it is off. */
extern const char api_shm_off[];

/* What the status and unregister calls of both doors check first, for
 * region `name` (n bytes; NULL: every region): the name, and, with shared
 * memory off (reg NULL), that no named region can exist. STATUS_OK: go on
 * to the registry, or, with reg NULL, answer that there is none;
 * otherwise INVALID or NOT_FOUND with a message. */
status_code api_shm_check(const shm_registry *reg, const char *name, size_t n,
                          char *msg, size_t msglen);

/* The regions a job holds, and a chunk's scratch output (below). */
typedef struct {
    shm_use x, y;
    void *scratch; /* y's bytes until the answer: eng_buffer_alloc'd */
    size_t bytes;
} api_shm_hold;

/* Places a KServe request's scan, for both its doors, by q's x_shm and
 * y_shm (unset: in the request, in the answer), in the regions of reg
 * (NULL: shared memory is off) that owner may use: *in is x's region or
 * q->data (the request's own bytes); *out is y's region, or q->data when
 * x came in the request (in place), or, when x lies in a region and y
 * does not, a new buffer (eng_buffer_alloc'd, at most max_bytes) that
 * becomes q->data, owned, so that it is answered and freed as the
 * request's own tensor would be; or, for a chunk of a sequence in place
 * in a region, h's scratch buffer (at most max_bytes), copied onto x's
 * bytes only when the answer goes (api_shm_done), so that a refused chunk
 * leaves the client's input as it was, and "send the chunk again" is
 * true. STATUS_OK with *h holding the regions until api_shm_done() or
 * api_shm_free(); otherwise FORBIDDEN (shared memory is off), NOT_FOUND,
 * INVALID, TOO_LARGE or NOMEM with a message, and nothing held. */
status_code api_shm_place(kserve_request *q, shm_registry *reg,
                          shm_owner owner, size_t max_bytes, const void **in,
                          void **out, api_shm_hold *h, char *msg,
                          size_t msglen);

/* After the job, as its answer goes: copies a chunk's scratch output
 * into its region, checks that no region was disturbed (shm_release)
 * and releases them. STATUS_OK, or INVALID with a message. */
status_code api_shm_done(api_shm_hold *h, char *msg, size_t msglen);

/* Releases what is still held, unchecked, and frees a scratch output
 * (a chunk refused: its region is as it was); safe after
 * api_shm_done. */
void api_shm_free(api_shm_hold *h);

/* The gRPC services: inference.GRPCInferenceService (grpc_service.c),
 * and after it in its chain grpc.health.v1.Health (health.c), which
 * answers for the first by its name. */
#define API_INFERENCE_SERVICE "inference.GRPCInferenceService"
extern const grpc_service api_grpc_service;
extern const grpc_service api_health_service;

/* The health Watches' next answers, when the status has changed, the
 * server drains or their client has gone (health.c). The main loop
 * thread: its tick, and the start of a drain; each Watch is answered on
 * its own gRPC loop. */
void api_health_tick(api_state *a, tallyd_server *s);

/* Replies with the text of a JSON writer (taken; its data borrowed from
 * r->body or r->ctx, which the reply takes over): rendered at once when
 * small, streamed when large (json_reply.c). */
void api_reply_json(request *r, int status, json_writer *w);

#endif
