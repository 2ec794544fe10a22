/*
 * grpc_service.c - inference.GRPCInferenceService on the gRPC transport:
 * the method table and its handlers (proto/grpc_service.proto).
 *
 * ModelInfer and ModelStreamInfer have REST's semantics: protocol/kserve_pb.h
 * parses, and the one adapter (submit.h) sums at once or queues, chooses
 * the deadline and words the failures, as for REST; this file is the
 * gRPC door's side of it (suspend, resume, answer). The answer's bytes
 * are the response's fields, then the tensor where it was scanned. On a
 * stream, a failed message is answered with a ModelStreamInferResponse
 * carrying error_message (Triton's way), and the stream goes on.
 *
 * The metadata and configuration are kserve_model.h's, in protobuf. The
 * system shared-memory RPCs register, list and unregister regions in the
 * registry REST's routes use (core/shm.h), per token; CUDA shared memory
 * does not exist here: a status lists none, unregistering every region
 * succeeds, and a named one is not found.
 *
 * Threading: the call's gRPC loop thread (the loop thread, or one of the
 * gRPC loop threads: grpc.h), except door_resume (a worker or the
 * scheduler's tick thread) and door_gone (workers and the tick).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "grpc_service.pb-c.h"
#include "kserve_pb.h"
#include "pb_json.h"
#include "kserve_json.h"
#include "submit.h"

static tallyd_server *server_of(grpc_call *c)
{
    return grpc_call_server(c);
}

/* Packs m and answers with it. */
static void reply_message(grpc_call *c, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(len ? len : 1);
    if (b == NULL) {
        grpc_call_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    protobuf_c_message_pack(m, b);
    grpc_call_reply(c, b, len, NULL, 0); /* takes b */
}

/* Unpacks the request as d, or fails the call. */
static ProtobufCMessage *request_of(grpc_call *c,
                                    const ProtobufCMessageDescriptor *d)
{
    size_t len;
    uint8_t *msg = grpc_call_message(c, &len);
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (m == NULL)
        grpc_call_fail(c, STATUS_INVALID, "the message is not a valid %s",
                       d->name);
    return m;
}

/* name and version name this server's model; otherwise fails the call
 * with NOT_FOUND. */
static bool is_model(grpc_call *c, const char *name, const char *version)
{
    if (strcmp(name, KSERVE_MODEL) != 0) {
        grpc_call_fail(c, STATUS_NOT_FOUND,
                       "unknown model \"%.64s\" (this server has one model, "
                       "\"" KSERVE_MODEL "\")",
                       name);
        return false;
    }
    if (version[0] != '\0' && strcmp(version, KSERVE_VERSION) != 0) {
        grpc_call_fail(c, STATUS_NOT_FOUND,
                       "model \"" KSERVE_MODEL "\" has no version \"%.32s\" "
                       "(it has version \"" KSERVE_VERSION "\")",
                       version);
        return false;
    }
    return true;
}

/* ------------------------------------------------------- health, meta */

static void server_live(grpc_call *c)
{
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = true;
    reply_message(c, &r.base);
}

/* Ready while not draining, as REST's /v2/health/ready. */
static void server_ready(grpc_call *c)
{
    Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
    r.ready = !atomic_load(&server_of(c)->draining);
    reply_message(c, &r.base);
}

static void model_ready(grpc_call *c)
{
    Inference__ModelReadyRequest *q = (Inference__ModelReadyRequest *)
        request_of(c, &inference__model_ready_request__descriptor);
    if (q == NULL)
        return;
    if (is_model(c, q->name, q->version)) {
        Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
        r.ready = !atomic_load(&server_of(c)->draining);
        reply_message(c, &r.base);
    }
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

/* Answers with REST's document for the same question (text, taken:
 * NULL when memory ran out), as the message d. */
static void reply_json(grpc_call *c, const ProtobufCMessageDescriptor *d,
                       char *text)
{
    ProtobufCMessage *m =
        text != NULL ? pb_from_json(d, text, strlen(text)) : NULL;
    free(text);
    if (m == NULL) {
        grpc_call_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    reply_message(c, m);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The metadata, the configuration and the statistics: REST's documents
 * (kserve_json.h, core/stats.h) as their protobuf messages. */
static void server_metadata(grpc_call *c)
{
    reply_json(c, &inference__server_metadata_response__descriptor,
               kserve_server_metadata(server_of(c)->version,
                                      api_of(c)->shm != NULL,
                                      seq_enabled(api_of(c)->seqs)));
}

/* The string field i of q, a message of d. */
static const char *string_field(const ProtobufCMessage *q,
                                const ProtobufCMessageDescriptor *d, unsigned i)
{
    return *(char *const *)((const char *)q + d->fields[i].offset);
}

/* A request of the model's, as d, named by its name and version (or,
 * for the statistics, any: an empty name); NULL when the call is
 * answered (failed) already. */
static ProtobufCMessage *model_request(grpc_call *c,
                                       const ProtobufCMessageDescriptor *d,
                                       bool any)
{
    ProtobufCMessage *q = request_of(c, d);
    if (q == NULL)
        return NULL;
    /* the three requests begin with name, then version */
    const char *name = string_field(q, d, 0);
    if ((any && name[0] == '\0') || is_model(c, name, string_field(q, d, 1)))
        return q;
    protobuf_c_message_free_unpacked(q, NULL);
    return NULL;
}

static void model_metadata(grpc_call *c)
{
    ProtobufCMessage *q = model_request(
        c, &inference__model_metadata_request__descriptor, false);
    if (q == NULL)
        return;
    protobuf_c_message_free_unpacked(q, NULL);
    reply_json(c, &inference__model_metadata_response__descriptor,
               kserve_model_metadata());
}

static void model_config(grpc_call *c)
{
    ProtobufCMessage *q = model_request(
        c, &inference__model_config_request__descriptor, false);
    if (q == NULL)
        return;
    protobuf_c_message_free_unpacked(q, NULL);
    char *config = kserve_model_config(api_sequence_idle_us(server_of(c)));
    ProtobufCMessage *m =
        config != NULL ? pb_from_json(&inference__model_config__descriptor,
                                      config, strlen(config))
                       : NULL;
    free(config);
    if (m == NULL) {
        grpc_call_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = (Inference__ModelConfig *)m;
    reply_message(c, &r.base);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void model_statistics(grpc_call *c)
{
    ProtobufCMessage *q = model_request(
        c, &inference__model_statistics_request__descriptor, true);
    if (q == NULL)
        return;
    protobuf_c_message_free_unpacked(q, NULL);
    size_t len;
    reply_json(c, &inference__model_statistics_response__descriptor,
               stats_render(&server_of(c)->stats, KSERVE_MODEL,
                            KSERVE_VERSION, &len));
}

/* --------------------------------------------------------- inference */

typedef struct {
    submit_work w; /* the adapter's: the job and the deadline */
    kserve_request q;
    grpc_call *c;
    api_shm_hold shm; /* x's and y's regions, when they lie in some */
} infer_work;

static void infer_work_free(void *p)
{
    infer_work *w = p;
    api_shm_free(&w->shm); /* after the job: the call outlives it */
    kserve_request_free(&w->q);
    free(w);
}

static bool streaming(grpc_call *c)
{
    return grpc_call_method(c)->streaming;
}

/* A failure: the call's status, or on a stream an error_message. */
static void infer_fail_msg(grpc_call *c, status_code st, const char *msg)
{
    if (!streaming(c)) {
        grpc_call_fail(c, st, "%s", msg);
        return;
    }
    size_t len;
    uint8_t *b = kserve_pb_stream_error(msg, &len);
    if (b == NULL) {
        grpc_call_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    grpc_call_reply(c, b, len, NULL, 0); /* takes b */
    grpc_call_set_status(c, st);
}

static void infer_fail(grpc_call *c, status_code st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void infer_fail(grpc_call *c, status_code st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    infer_fail_msg(c, st, msg);
}

/* ---- the gRPC door's side of the adapter (submit.h) ---- */

static void infer_resumed(grpc_call *c);

static bool door_suspend(void *req, bool (*push)(submit_work *w),
                         submit_work *w)
{
    grpc_call *c = req;
    grpc_call_suspend(c, infer_resumed);
    if (push(w))
        return true;
    grpc_call_unsuspend(c); /* refused: done will not run */
    return false;
}

static void door_resume(void *req)
{
    grpc_call_resume(req);
}

static bool door_gone(const submit_work *w)
{
    return grpc_call_gone(w->req);
}

static void door_fail(void *req, status_code st, const char *msg)
{
    infer_fail_msg(req, st, msg);
}

static void door_cancelled(void *req)
{
    grpc_call_set_status(req, STATUS_CANCELLED);
}

/* The scan is done: the response's fields, then the tensor where it was
 * scanned. */
static void door_answer(void *req)
{
    grpc_call *c = req;
    infer_work *w = grpc_call_work(c);
    char msg[512];
    status_code st = api_shm_done(&w->shm, msg, sizeof msg);
    if (st != STATUS_OK) {
        infer_fail_msg(c, st, msg);
        return;
    }
    size_t len;
    uint8_t *head = streaming(c) ? kserve_pb_stream_head(&w->q, &len)
                                 : kserve_pb_head(&w->q, &len);
    if (head == NULL) {
        infer_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    /* the call takes the head; y (unless it went to a region) is the
     * work's, which lives as long as the call */
    if (w->q.y_shm.set)
        grpc_call_reply(c, head, len, NULL, 0);
    else
        grpc_call_reply(c, head, len, w->q.data, w->q.bytes);
}

static const submit_door grpc_submit_door = {
    door_suspend, door_resume, door_gone,
    door_answer,  door_fail,   door_cancelled,
};

/* The call is back on the loop thread after its job. */
static void infer_resumed(grpc_call *c)
{
    OWNER_ASSERT(grpc_call_owner(c));
    infer_work *w = grpc_call_work(c);
    submit_finish(&w->w, false);
}

static void model_infer(grpc_call *c)
{
    tallyd_server *s = server_of(c);
    uint64_t t0 = now_ns();
    infer_work *w = calloc(1, sizeof *w);
    if (w == NULL) {
        infer_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    w->c = c;
    grpc_call_set_work(c, w, infer_work_free);
    size_t len;
    uint8_t *msg = grpc_call_message(c, &len);
    char err[512];
    bool not_found;
    eng_err e = kserve_pb_parse(msg, len, s->cfg.max_body_bytes, &w->q,
                               &not_found, err, sizeof err);
    if (e != ENG_E_OK) {
        infer_fail(c, not_found ? STATUS_NOT_FOUND : status_from_eng(e), "%s",
                   err);
        return;
    }
    submit_req q = {.desc = w->q.desc,
                     .in = w->q.data,
                     .out = w->q.data,
                     .seq = &w->q.seq,
                     .watch_fd = -1, /* its stream shares the socket */
                     .trace = grpc_call_trace(c),
                     .near = grpc_call_loop_data(c),
                     .rec = grpc_call_record(c),
                     .transport_ms = grpc_call_timeout_ms(c),
                     .protocol_ms = submit_protocol_ms(w->q.has_timeout,
                                                       w->q.timeout_us),
                     .from = SUBMIT_BYTES,
                     .handler_ns = t0};
    if (w->q.x_shm.set || w->q.y_shm.set) {
        status_code st = api_shm_place(&w->q, api_of(c)->shm,
                                       grpc_call_caller(c),
                                       s->cfg.max_body_bytes, &q.in, &q.out,
                                       &w->shm, err, sizeof err);
        if (st != STATUS_OK) {
            infer_fail(c, st, "%s", err);
            return;
        }
    }
    submit_start(&w->w, &grpc_submit_door, c, s, s->app->sched, s->app->seqs,
                 &q);
}

/* ----------------------------------------------------- shared memory */

static shm_owner owner_of(grpc_call *c)
{
    return grpc_call_caller(c);
}

static void rpc_shm_status(grpc_call *c)
{
    Inference__SystemSharedMemoryStatusRequest *q =
        (Inference__SystemSharedMemoryStatusRequest *)request_of(
            c, &inference__system_shared_memory_status_request__descriptor);
    if (q == NULL)
        return;
    shm_registry *reg = api_of(c)->shm;
    size_t nlen = strlen(q->name);
    char msg[512];
    shm_info *v = NULL;
    size_t n = 0;
    const char *name = nlen ? q->name : NULL;
    status_code st = api_shm_check(reg, name, nlen, msg, sizeof msg);
    if (st == STATUS_OK && reg != NULL)
        st = shm_status(reg, owner_of(c), name, nlen, &v, &n, msg, sizeof msg);
    typedef Inference__SystemSharedMemoryStatusResponse__RegionsEntry entry;
    typedef Inference__SystemSharedMemoryStatusResponse__RegionStatus region;
    entry *e = NULL, **ep = NULL;
    region *rs = NULL;
    if (st == STATUS_OK && n != 0) {
        e = calloc(n, sizeof *e);
        ep = calloc(n, sizeof *ep);
        rs = calloc(n, sizeof *rs);
        if (e == NULL || ep == NULL || rs == NULL) {
            st = STATUS_NOMEM;
            snprintf(msg, sizeof msg, "out of memory");
        }
    }
    if (st != STATUS_OK) {
        grpc_call_fail(c, st, "%s", msg);
    } else {
        for (size_t i = 0; i < n; i++) {
            entry ez =
                INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__REGIONS_ENTRY__INIT;
            region rz =
                INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__REGION_STATUS__INIT;
            e[i] = ez;
            rs[i] = rz;
            rs[i].name = v[i].name;
            rs[i].key = v[i].key;
            rs[i].offset = v[i].offset;
            rs[i].byte_size = v[i].byte_size;
            e[i].key = v[i].name;
            e[i].value = &rs[i];
            ep[i] = &e[i];
        }
        Inference__SystemSharedMemoryStatusResponse r =
            INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__INIT;
        r.n_regions = n;
        r.regions = ep;
        reply_message(c, &r.base);
    }
    free(e);
    free(ep);
    free(rs);
    free(v);
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static void rpc_shm_register(grpc_call *c)
{
    shm_registry *reg = api_of(c)->shm;
    if (reg == NULL) {
        grpc_call_fail(c, STATUS_FORBIDDEN, "%s", api_shm_off);
        return;
    }
    Inference__SystemSharedMemoryRegisterRequest *q =
        (Inference__SystemSharedMemoryRegisterRequest *)request_of(
            c, &inference__system_shared_memory_register_request__descriptor);
    if (q == NULL)
        return;
    char msg[512];
    status_code st =
        shm_register(reg, owner_of(c), q->name, strlen(q->name), q->key,
                     strlen(q->key), q->offset, q->byte_size, msg, sizeof msg);
    if (st != STATUS_OK) {
        grpc_call_fail(c, st, "%s", msg);
    } else {
        Inference__SystemSharedMemoryRegisterResponse r =
            INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
        reply_message(c, &r.base);
    }
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

/* An empty name unregisters every region of the caller's. */
static void rpc_shm_unregister(grpc_call *c)
{
    Inference__SystemSharedMemoryUnregisterRequest *q =
        (Inference__SystemSharedMemoryUnregisterRequest *)request_of(
            c, &inference__system_shared_memory_unregister_request__descriptor);
    if (q == NULL)
        return;
    shm_registry *reg = api_of(c)->shm;
    size_t nlen = strlen(q->name);
    char msg[512];
    const char *name = nlen ? q->name : NULL;
    status_code st = api_shm_check(reg, name, nlen, msg, sizeof msg);
    if (st == STATUS_OK && reg != NULL)
        st = shm_unregister(reg, owner_of(c), name, nlen, msg, sizeof msg);
    if (st != STATUS_OK) {
        grpc_call_fail(c, st, "%s", msg);
    } else {
        Inference__SystemSharedMemoryUnregisterResponse r =
            INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
        reply_message(c, &r.base);
    }
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static const char no_cuda[] =
    "tally has no CUDA shared memory: it computes on OpenCL devices; use "
    "system shared memory (SystemSharedMemoryRegister) instead";

/* No CUDA region exists: a status lists none, unregistering every one
 * succeeds (perf_analyzer does it as it ends), and a named one is not
 * found. Both requests begin with the region's name. */
static void cuda_call(grpc_call *c)
{
    bool status =
        strcmp(grpc_call_method(c)->name, "CudaSharedMemoryStatus") == 0;
    const ProtobufCMessageDescriptor *d =
        status ? &inference__cuda_shared_memory_status_request__descriptor
               : &inference__cuda_shared_memory_unregister_request__descriptor;
    ProtobufCMessage *q = request_of(c, d);
    if (q == NULL)
        return;
    Inference__CudaSharedMemoryStatusResponse sr =
        INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    Inference__CudaSharedMemoryUnregisterResponse ur =
        INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
    if (string_field(q, d, 0)[0] != '\0')
        grpc_call_fail(c, STATUS_NOT_FOUND, "%s", no_cuda);
    else
        reply_message(c, status ? &sr.base : &ur.base);
    protobuf_c_message_free_unpacked(q, NULL);
}

static const grpc_method methods[] = {
    {"ServerLive", server_live, false, true, HEALTH, NULL, NULL},
    {"ServerReady", server_ready, false, true, HEALTH, NULL, NULL},
    {"ModelReady", model_ready, false, true, HEALTH, NULL, NULL},
    {"ServerMetadata", server_metadata, false, false, METADATA, NULL, NULL},
    {"ModelMetadata", model_metadata, false, false, METADATA, NULL, NULL},
    {"ModelConfig", model_config, false, false, METADATA, NULL, NULL},
    {"ModelStatistics", model_statistics, false, false, METADATA, NULL, NULL},
    {"ModelInfer", model_infer, false, false, INFER, kserve_pb_bulk_offset,
     api_inference_ended},
    {"ModelStreamInfer", model_infer, true, false, INFER, kserve_pb_bulk_offset,
     api_inference_ended},
    {"SystemSharedMemoryStatus", rpc_shm_status, false, false, SHM, NULL, NULL},
    {"SystemSharedMemoryRegister", rpc_shm_register, false, false, SHM, NULL,
     NULL},
    {"SystemSharedMemoryUnregister", rpc_shm_unregister, false, false, SHM,
     NULL, NULL},
    {"CudaSharedMemoryStatus", cuda_call, false, false, SHM, NULL, NULL},
    {"CudaSharedMemoryUnregister", cuda_call, false, false, SHM, NULL, NULL},
    /* the protocol's others: UNIMPLEMENTED, with a message */
    {"CudaSharedMemoryRegister", NULL, false, false, OTHER, NULL, NULL},
    {"RepositoryIndex", NULL, false, false, OTHER, NULL, NULL},
    {"RepositoryModelLoad", NULL, false, false, OTHER, NULL, NULL},
    {"RepositoryModelUnload", NULL, false, false, OTHER, NULL, NULL},
    {"TraceSetting", NULL, false, false, OTHER, NULL, NULL},
    {"LogSettings", NULL, false, false, OTHER, NULL, NULL},
};

const grpc_service api_grpc_service = {
    .service = API_INFERENCE_SERVICE,
    .methods = methods,
    .n = sizeof methods / sizeof methods[0],
    .other_label = OTHER,
    .next = &api_health_service,
    .loop_open = api_loop_open, /* a shared store's connection there */
    .loop_close = api_loop_close,
};
