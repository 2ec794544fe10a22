/*
 * grpc_floor.c - the smallest gRPC server that does a chunk's work for
 * perf_analyzer's sequence mode (-i grpc), in memory or through Redis:
 * what the machine allows a chunk over gRPC, beside tallyd's. store_floor
 * serve is the same over REST binary.
 *
 *   grpc_floor LISTEN_PORT REDIS_PORT SHA|-
 *      LISTEN_PORT: 0 for any (printed as "listening PORT" once it
 *      accepts); SHA: tally's write script's (loaded already: SCRIPT
 *      LOAD), or "-" for the state in memory.
 *
 * One epoll loop speaks h2c through nghttp2's server session, and just
 * enough of KServe v2's gRPC service (ModelMetadata, ModelConfig,
 * ModelStatistics, the readiness calls, ModelInfer) through protobuf-c's
 * code for proto/grpc_service.proto. A chunk (float32, its sequence's
 * running sum in a table here) is summed in place as it arrives; a
 * request without a sequence id (in memory only: the small-request
 * bench, bench_small.py) is summed alone. In
 * memory it is answered at once. Through Redis its new state is first
 * written by tally's script on the loop's own connection, a turn's
 * commands in one write, and it is answered when Redis says 1: no thread
 * hop, no copy beyond the socket's and the messages'.
 *
 * Threading: main() accepts and adds each connection to the loop's epoll
 * set; loop_run() is the one other thread and owns every connection, the
 * sequence table and the Redis connection. Nothing here is checked
 * beyond what perf_analyzer sends: a bench tool, not a server.
 */
#define _GNU_SOURCE /* accept4, memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"
#include "grpc_service.pb-c.h"

#define SEQ_MAX (1u << 20)
#define MSG_MAX (64u << 20)
#define SVC "/inference.GRPCInferenceService/"

struct seq {
    uint64_t version; /* Redis's, 0 for none */
    float carry;
    int busy; /* a chunk of it is at Redis */
};

struct conn;

struct strm { /* one call */
    struct conn *c;
    int32_t id;
    char path[96];
    uint8_t *in, *resp;
    size_t inlen, incap, rlen, roff;
    struct strm *next_parked;
    struct strm *prev, *next; /* its connection's open calls */
};

struct conn {
    int fd;
    nghttp2_session *h2;
    char *out;
    size_t outlen, outcap;
    int closing, at_redis; /* calls of it waiting for Redis */
    struct strm *streams;  /* open: freed by on_close, or with it */
};

struct pend { /* a chunk whose state is at Redis, in Redis's order */
    struct conn *c;
    int32_t stream;
    uint32_t sid;
    float carry;
    int end;
};

static struct {
    int ep, rfd;
    char *rout, rin[4096];
    size_t routlen, routcap, rinlen;
    struct pend *fifo;
    size_t head, count, cap;
    struct strm *parked, *parked_tail; /* their sequence has one at Redis */
} L;

static struct seq *seqs;
static const char *sha;
static char prefix[64];
static unsigned long long answered;

static void fail(const char *what)
{
    fprintf(stderr, "grpc_floor: %s\n", what);
    exit(1);
}

/* ------------------------------------------------------------ answers */

static ssize_t read_resp(nghttp2_session *h2, int32_t id, uint8_t *buf,
                         size_t len, uint32_t *flags, nghttp2_data_source *src,
                         void *user)
{
    (void)user;
    struct strm *s = src->ptr;
    size_t n = s->rlen - s->roff < len ? s->rlen - s->roff : len;
    memcpy(buf, s->resp + s->roff, n);
    s->roff += n;
    if (s->roff == s->rlen) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv t[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1,
                           NGHTTP2_NV_FLAG_NONE}};
        if (nghttp2_submit_trailer(h2, id, t, 1) != 0)
            fail("nghttp2_submit_trailer");
    }
    return (ssize_t)n;
}

/* m packed behind gRPC's 5-byte prefix into s's answer. */
static void pack(struct strm *s, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if ((s->resp = malloc(5 + n)) == NULL)
        floor_die("malloc");
    s->resp[0] = 0;
    s->resp[1] = (uint8_t)(n >> 24);
    s->resp[2] = (uint8_t)(n >> 16);
    s->resp[3] = (uint8_t)(n >> 8);
    s->resp[4] = (uint8_t)n;
    protobuf_c_message_pack(m, s->resp + 5);
    s->rlen = 5 + n;
}

/* s's answer, packed already, submitted on its stream. */
static void respond(struct strm *s)
{
    nghttp2_nv h[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16,
         NGHTTP2_NV_FLAG_NONE}};
    nghttp2_data_provider p = {.source.ptr = s, .read_callback = read_resp};
    if (nghttp2_submit_response(s->c->h2, s->id, h, 2, &p) != 0)
        fail("nghttp2_submit_response");
}

static void reply(struct strm *s, const ProtobufCMessage *m)
{
    pack(s, m);
    respond(s);
}

static void unimplemented(struct strm *s)
{
    nghttp2_nv h[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16,
         NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"grpc-status", (uint8_t *)"12", 11, 2,
         NGHTTP2_NV_FLAG_NONE}};
    if (nghttp2_submit_response(s->c->h2, s->id, h, 3, NULL) != 0)
        fail("nghttp2_submit_response");
}

static void flush_conn(struct conn *c)
{
    if (nghttp2_session_send(c->h2) != 0)
        c->closing = 1;
    for (size_t off = 0; off < c->outlen;) {
        ssize_t w = write(c->fd, c->out + off, c->outlen - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) { /* a floor's answers are small */
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                                     .data.ptr = c};
            epoll_ctl(L.ep, EPOLL_CTL_MOD, c->fd, &ev);
            memmove(c->out, c->out + off, c->outlen - off);
            c->outlen -= off;
            return;
        }
        if (w <= 0) {
            c->closing = 1;
            break;
        }
        off += (size_t)w;
    }
    c->outlen = 0;
}

/* ------------------------------------------------------------ the calls */

static void metadata(struct strm *s)
{
    int64_t dims[] = {-1};
    Inference__ModelMetadataResponse__TensorMetadata x =
        INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
    Inference__ModelMetadataResponse__TensorMetadata y = x;
    x.name = "x", x.datatype = "FP32", x.n_shape = 1, x.shape = dims;
    y.name = "y", y.datatype = "FP32", y.n_shape = 1, y.shape = dims;
    Inference__ModelMetadataResponse__TensorMetadata *xs[] = {&x}, *ys[] = {&y};
    char *versions[] = {"1"};
    Inference__ModelMetadataResponse m =
        INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    m.name = "cumsum", m.n_versions = 1, m.versions = versions;
    m.platform = "floor";
    m.n_inputs = 1, m.inputs = xs, m.n_outputs = 1, m.outputs = ys;
    reply(s, &m.base);
}

static void config(struct strm *s)
{
    int64_t dims[] = {-1};
    Inference__ModelInput x = INFERENCE__MODEL_INPUT__INIT;
    x.name = "x", x.data_type = INFERENCE__DATA_TYPE__TYPE_FP32;
    x.n_dims = 1, x.dims = dims;
    Inference__ModelOutput y = INFERENCE__MODEL_OUTPUT__INIT;
    y.name = "y", y.data_type = INFERENCE__DATA_TYPE__TYPE_FP32;
    y.n_dims = 1, y.dims = dims;
    Inference__ModelInput *xs[] = {&x};
    Inference__ModelOutput *ys[] = {&y};
    Inference__ModelSequenceBatching sb =
        INFERENCE__MODEL_SEQUENCE_BATCHING__INIT;
    sb.max_sequence_idle_microseconds = 60000000;
    Inference__ModelConfig mc = INFERENCE__MODEL_CONFIG__INIT;
    mc.name = "cumsum", mc.platform = "floor", mc.backend = "floor";
    mc.n_input = 1, mc.input = xs, mc.n_output = 1, mc.output = ys;
    mc.sequence_batching = &sb;
    Inference__ModelConfigResponse m = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    m.config = &mc;
    reply(s, &m.base);
}

/* perf_analyzer takes the model's version from the statistics whose
 * counts grew over a window */
static void statistics(struct strm *s)
{
    Inference__StatisticDuration k = INFERENCE__STATISTIC_DURATION__INIT,
                                 zero = k;
    k.count = answered;
    Inference__InferStatistics is = INFERENCE__INFER_STATISTICS__INIT;
    is.success = is.queue = is.compute_input = is.compute_infer =
        is.compute_output = &k;
    is.fail = is.cache_hit = is.cache_miss = &zero;
    Inference__ModelStatistics ms = INFERENCE__MODEL_STATISTICS__INIT;
    ms.name = "cumsum", ms.version = "1";
    ms.inference_count = ms.execution_count = answered;
    ms.inference_stats = &is;
    Inference__ModelStatistics *all[] = {&ms};
    Inference__ModelStatisticsResponse m =
        INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    m.n_model_stats = 1, m.model_stats = all;
    reply(s, &m.base);
}

static void yes(struct strm *s, const char *what)
{
    if (strcmp(what, "ServerLive") == 0) {
        Inference__ServerLiveResponse m = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
        m.live = 1;
        reply(s, &m.base);
    } else if (strcmp(what, "ServerReady") == 0) {
        Inference__ServerReadyResponse m =
            INFERENCE__SERVER_READY_RESPONSE__INIT;
        m.ready = 1;
        reply(s, &m.base);
    } else {
        Inference__ModelReadyResponse m = INFERENCE__MODEL_READY_RESPONSE__INIT;
        m.ready = 1;
        reply(s, &m.base);
    }
}

static const Inference__InferParameter *
param(const Inference__ModelInferRequest *r, const char *name)
{
    for (size_t i = 0; i < r->n_parameters; i++)
        if (strcmp(r->parameters[i]->key, name) == 0)
            return r->parameters[i]->value;
    return NULL;
}

/* The chunk on s, summed and answered (now, or once its state is at
 * Redis); 0 if another chunk of its sequence is at Redis: it waits. */
static int infer(struct strm *s)
{
    if (s->inlen < 5 || s->in[0] != 0)
        fail("a message that is not one uncompressed gRPC message");
    Inference__ModelInferRequest *r =
        inference__model_infer_request__unpack(NULL, s->inlen - 5, s->in + 5);
    if (r == NULL || r->n_raw_input_contents != 1
        || r->raw_input_contents[0].len % 4 != 0)
        fail("a request that is not one raw float32 tensor");
    const Inference__InferParameter *p = param(r, "sequence_id");
    uint64_t sid =
        p == NULL ? 0
        : p->parameter_choice_case
                == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM
            ? (uint64_t)p->int64_param
            : p->uint64_param;
    if (p != NULL && (sid < 1 || sid >= SEQ_MAX))
        fail("a chunk whose sequence id is not below 2^20");
    if (p == NULL && sha != NULL)
        fail("a plain request through Redis: no state to keep");
    static struct seq plain; /* a request without an id: summed from 0 */
    p = param(r, "sequence_start");
    int start = p != NULL && p->bool_param;
    p = param(r, "sequence_end");
    int end = p != NULL && p->bool_param;
    struct seq *q = p != NULL ? &seqs[sid] : &plain;
    if (q->busy) {
        inference__model_infer_request__free_unpacked(r, NULL);
        return 0;
    }
    size_t n = r->raw_input_contents[0].len / 4;
    uint8_t *x = r->raw_input_contents[0].data; /* in place: ours */
    float acc = start || q == &plain ? 0.0f : q->carry;
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, x + 4 * i, 4);
        acc += v;
        memcpy(x + 4 * i, &acc, 4);
    }
    int64_t shape[] = {(int64_t)n};
    Inference__ModelInferResponse__InferOutputTensor y =
        INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    y.name = "y", y.datatype = "FP32", y.n_shape = 1, y.shape = shape;
    Inference__ModelInferResponse__InferOutputTensor *ys[] = {&y};
    Inference__ModelInferResponse m = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    m.model_name = "cumsum", m.model_version = "1", m.id = r->id;
    m.n_outputs = 1, m.outputs = ys;
    m.n_raw_output_contents = 1;
    m.raw_output_contents = r->raw_input_contents;
    if (sha == NULL) {
        reply(s, &m.base);
        inference__model_infer_request__free_unpacked(r, NULL);
        q->carry = end ? 0.0f : acc;
        answered++;
        return 1;
    }
    /* the answer waits, packed, for the new state: EVALSHA SHA 1 key
     * expect ttl put|del value, as tallyd sends it */
    pack(s, &m.base);
    inference__model_infer_request__free_unpacked(r, NULL);
    q->busy = 1;
    char cmd[512], skey[96];
    snprintf(skey, sizeof skey, "%s:%llu", prefix, (unsigned long long)sid);
    size_t k = floor_evalsha(cmd, sizeof cmd, sha, skey, q->version, &acc,
                             sizeof acc, end);
    floor_grow(&L.rout, &L.routcap, L.routlen + k);
    memcpy(L.rout + L.routlen, cmd, k);
    L.routlen += k;
    if (L.count == L.cap) {
        size_t cap = L.cap ? 2 * L.cap : 64;
        struct pend *f = malloc(cap * sizeof *f);
        if (f == NULL)
            floor_die("malloc");
        for (size_t i = 0; i < L.count; i++)
            f[i] = L.fifo[(L.head + i) % L.cap];
        free(L.fifo);
        L.fifo = f;
        L.head = 0;
        L.cap = cap;
    }
    L.fifo[(L.head + L.count++) % L.cap] =
        (struct pend){s->c, s->id, (uint32_t)sid, acc, end};
    s->c->at_redis++;
    return 1;
}

static void call(struct strm *s)
{
    if (strncmp(s->path, SVC, strlen(SVC)) != 0) {
        unimplemented(s);
        return;
    }
    const char *m = s->path + strlen(SVC);
    if (strcmp(m, "ModelInfer") == 0) {
        if (!infer(s)) {
            s->next_parked = NULL;
            if (L.parked_tail != NULL)
                L.parked_tail->next_parked = s;
            else
                L.parked = s;
            L.parked_tail = s;
        }
    } else if (strcmp(m, "ModelMetadata") == 0)
        metadata(s);
    else if (strcmp(m, "ModelConfig") == 0)
        config(s);
    else if (strcmp(m, "ModelStatistics") == 0)
        statistics(s);
    else if (strcmp(m, "ServerLive") == 0 || strcmp(m, "ServerReady") == 0
             || strcmp(m, "ModelReady") == 0)
        yes(s, m);
    else
        unimplemented(s);
}

/* ------------------------------------------------------------ nghttp2 */

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len,
                       int flags, void *user)
{
    (void)h2, (void)flags;
    struct conn *c = user;
    floor_grow(&c->out, &c->outcap, c->outlen + len);
    memcpy(c->out + c->outlen, data, len);
    c->outlen += len;
    return (ssize_t)len;
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f,
                            void *user)
{
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct strm *s = calloc(1, sizeof *s);
    if (s == NULL)
        floor_die("calloc");
    s->c = user;
    s->id = f->hd.stream_id;
    s->next = s->c->streams;
    if (s->next != NULL)
        s->next->prev = s;
    s->c->streams = s;
    nghttp2_session_set_stream_user_data(h2, s->id, s);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    struct strm *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (s != NULL && namelen == 5 && memcmp(name, ":path", 5) == 0) {
        size_t k =
            valuelen < sizeof s->path - 1 ? valuelen : sizeof s->path - 1;
        memcpy(s->path, value, k);
        s->path[k] = '\0';
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id,
                   const uint8_t *data, size_t len, void *user)
{
    (void)flags, (void)user;
    struct strm *s = nghttp2_session_get_stream_user_data(h2, id);
    if (s == NULL)
        return 0;
    if (s->inlen + len > MSG_MAX)
        fail("a message over 64 MiB");
    floor_grow(&s->in, &s->incap, s->inlen + len);
    memcpy(s->in + s->inlen, data, len);
    s->inlen += len;
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
    (void)user;
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS)
        && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct strm *s =
            nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (s != NULL)
            call(s);
    }
    return 0;
}

/* The parked calls of c taken off the list: s alone, or (NULL) all. */
static void unpark(const struct conn *c, const struct strm *s)
{
    struct strm **p = &L.parked;
    L.parked_tail = NULL;
    while (*p != NULL) {
        if ((*p)->c == c && (s == NULL || *p == s))
            *p = (*p)->next_parked;
        else {
            L.parked_tail = *p;
            p = &(*p)->next_parked;
        }
    }
}

static void strm_free(struct strm *s)
{
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        s->c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s->in);
    free(s->resp);
    free(s);
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
    (void)code, (void)user;
    struct strm *s = nghttp2_session_get_stream_user_data(h2, id);
    if (s == NULL)
        return 0;
    unpark(s->c, s);
    strm_free(s);
    return 0;
}

static nghttp2_session_callbacks *callbacks;

static void conn_open(int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        floor_die("calloc");
    c->fd = fd;
    if (nghttp2_session_server_new(&c->h2, callbacks, c) != 0)
        fail("nghttp2_session_server_new");
    nghttp2_settings_entry st[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1024},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 30}};
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, st, 2);
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 1 << 30);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(L.ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        floor_die("epoll_ctl");
}

static void conn_close(struct conn *c)
{
    /* its parked calls go with it, and its open calls (nghttp2_session_del
     * calls no on_close) */
    unpark(c, NULL);
    epoll_ctl(L.ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    nghttp2_session_del(c->h2);
    while (c->streams != NULL)
        strm_free(c->streams);
    free(c->out);
    free(c);
}

/* ------------------------------------------------------------ the loop */

/* Redis's replies, in order: each a chunk's state written. */
static void replies(void)
{
    ssize_t n = read(L.rfd, L.rin + L.rinlen, sizeof L.rin - L.rinlen);
    if (n <= 0)
        fail("Redis closed the connection");
    L.rinlen += (size_t)n;
    size_t off = 0;
    struct conn *last = NULL;
    for (;;) {
        char *nl = memmem(L.rin + off, L.rinlen - off, "\r\n", 2);
        if (nl == NULL)
            break;
        if (nl - (L.rin + off) != 2 || memcmp(L.rin + off, ":1", 2) != 0) {
            fprintf(stderr, "grpc_floor: Redis answered %.*s\n",
                    (int)(nl - (L.rin + off)), L.rin + off);
            exit(1);
        }
        off = (size_t)(nl - L.rin) + 2;
        if (L.count == 0)
            fail("a reply with no command");
        struct pend p = L.fifo[L.head];
        L.head = (L.head + 1) % L.cap;
        L.count--;
        struct seq *q = &seqs[p.sid];
        q->version = p.end ? 0 : q->version + 1;
        q->carry = p.end ? 0.0f : p.carry;
        q->busy = 0;
        answered++;
        struct conn *c = p.c;
        c->at_redis--;
        if (c->closing) {
            if (c->at_redis == 0)
                conn_close(c);
            continue;
        }
        struct strm *s = nghttp2_session_get_stream_user_data(c->h2, p.stream);
        if (s == NULL)
            continue; /* the client reset it */
        respond(s);
        if (last != c && last != NULL)
            flush_conn(last);
        last = c;
    }
    if (last != NULL)
        flush_conn(last); /* the answers a read finished, in one write */
    memmove(L.rin, L.rin + off, L.rinlen - off);
    L.rinlen -= off;
}

static void *loop_run(void *arg)
{
    (void)arg;
    struct epoll_event e[64];
    uint8_t buf[65536];
    for (;;) {
        int k = epoll_wait(L.ep, e, 64, L.parked != NULL ? 0 : -1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            floor_die("epoll_wait");
        for (int i = 0; i < k; i++) {
            if (e[i].data.ptr == NULL) {
                replies();
                continue;
            }
            struct conn *c = e[i].data.ptr;
            if (e[i].events & EPOLLOUT) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(L.ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
            for (;;) {
                ssize_t n = read(c->fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0 && errno == EAGAIN)
                    break;
                if (n <= 0
                    || nghttp2_session_mem_recv(c->h2, buf, (size_t)n) != n) {
                    c->closing = 1;
                    break;
                }
                if ((size_t)n < sizeof buf)
                    break;
            }
            if (!c->closing)
                flush_conn(c);
            if (c->closing && c->at_redis == 0)
                conn_close(c);
            else if (c->closing)
                epoll_ctl(L.ep, EPOLL_CTL_DEL, c->fd, NULL);
        }
        /* chunks whose sequence had one at Redis, tried again each turn
         * (the loop spins while one waits: at a window's end) */
        struct strm *p = L.parked;
        L.parked = L.parked_tail = NULL;
        while (p != NULL) {
            struct strm *next = p->next_parked;
            call(p);
            if (!p->c->closing)
                flush_conn(p->c);
            p = next;
        }
        if (L.routlen > 0) { /* this turn's commands, in one write */
            floor_write_all(L.rfd, L.rout, L.routlen);
            L.routlen = 0;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char *e;
    long port = argc > 1 ? strtol(argv[1], &e, 10) : -1;
    long rport = argc > 2 ? strtol(argv[2], &e, 10) : -1;
    if (argc != 4 || port < 0 || port > 65535 || rport < 0 || rport > 65535
        || (strcmp(argv[3], "-") != 0 && strlen(argv[3]) != 40)) {
        fprintf(stderr, "usage: grpc_floor LISTEN_PORT REDIS_PORT SHA|-\n");
        return 2;
    }
    sha = strcmp(argv[3], "-") == 0 ? NULL : argv[3];
    snprintf(prefix, sizeof prefix, "tally-grpc-floor:%ld:%lld", (long)getpid(),
             (long long)time(NULL));
    if ((seqs = calloc(SEQ_MAX, sizeof *seqs)) == NULL)
        floor_die("calloc");
    if (nghttp2_session_callbacks_new(&callbacks) != 0)
        fail("nghttp2_session_callbacks_new");
    nghttp2_session_callbacks_set_send_callback(callbacks, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                              on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
    int bound, lfd = floor_listen((int)port, &bound), one = 1;
    if ((L.ep = epoll_create1(0)) < 0)
        floor_die("epoll_create1");
    L.rfd = -1;
    if (sha != NULL) {
        L.rfd = floor_connect((int)rport);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(L.ep, EPOLL_CTL_ADD, L.rfd, &ev);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, loop_run, NULL) != 0)
        fail("pthread_create");
    printf("listening %d\n", bound);
    fflush(stdout);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0)
            floor_die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn_open(fd); /* epoll_ctl is safe beside the loop's wait */
    }
}
