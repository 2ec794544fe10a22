/*
 * tallyd.c - the daemon: startup, the event loop, shutdown.
 *
 * Threading model. Twelve kinds of threads, and the only calls that cross
 * between them. This list names them once: a comment anywhere in server/
 * names only these (tests/check_threads.py, in make check); what each
 * does is said in its file, and all together in docs/design.md
 * ("Threads").
 *
 *   the loop thread (main)  the libuv loop: signals, the drain, the sweep
 *                           of slow connections, and the gRPC door's
 *                           first loop (grpc/, api/grpc_service.c).
 *   gRPC loop threads       grpc/loops.c (--grpc-threads): a loop each,
 *                           serving the connections the first one deals.
 *   HTTP threads            http/loops.c (--http-threads): a libuv loop
 *                           each, driving one libmicrohttpd daemon; the
 *                           handlers (api/) run there and never wait on a
 *                           device.
 *   the tick thread         tallyd.c's run_ticker: every 5 ms sched_tick()
 *                           and seq_sweep(), apart from the loops so that
 *                           no loop's work delays a deadline.
 *   device workers          sched/scheduler.c (--workers): one engine
 *                           stream each; run batches and complete jobs.
 *   kernel builders         sched/scheduler.c: one a cold OpenCL device,
 *                           building its kernels while the host answers.
 *   fanout helpers          format/fanout.c: share a large JSON tensor's
 *                           parse and render with the thread that asked.
 *   host pool helpers       engine/pool.c: a host stream's own, splitting
 *                           one scan with its worker.
 *   the log writer          store/kv_log.c (--state-dir): appends records
 *                           with group commit, then ends their chunks and
 *                           resumes their requests; nothing else waits on
 *                           the disk.
 *   the log rewriter        store/kv_log.c: writes the live sequences'
 *                           snapshot while the log is rewritten.
 *   the store's thread      redis/redis_conn.c (--state-store): a
 *                           connection for the chunks of no door's loop
 *                           (each door's loop has its own, whose replies
 *                           end chunks on the thread that answers them).
 *   the span exporter       telemetry/exporter.c (--otlp-endpoint):
 *                           encodes and POSTs the spans the doors queue.
 *
 * A queued job is completed exactly once, by a worker or (when it expires
 * or its client leaves while it waits) by the tick thread, through the
 * job's done callback (api/submit.c's on_job_done; a chunk's request is
 * resumed by whatever thread ends it in its sequence instead: the log
 * writer once its record is written, a store's loop): that calls
 * http_resume() and so MHD_resume_connection(), which libmicrohttpd
 * documents as safe from any thread, then wakes the request's HTTP
 * thread through its loop's mailbox (core/mailbox.h); a gRPC job's
 * (api/grpc_service.c) calls grpc_call_resume(), which posts the call to
 * its loop's mailbox. Beyond that, threads share only what a lock or an
 * atomic guards, each named where it is declared:
 *   - the requests: the job queue (sched/queue.h), each request's
 *     suspend/resume mutex (http/request.h), HTTP's admission and
 *     connection lists (http/admit.c, http/conns.c), the loops' mailboxes
 *     (core/mailbox.h), the gRPC health watches and the trace settings
 *     (api/api.h);
 *   - the sequences: the engine's lines, cache and counts (seq/
 *     seq_int.h), the memory store's records (store/kv_mem.c), the log's
 *     queue (store/kv_log.c), the Redis store's opening (redis/
 *     redis_int.h);
 *   - the engine: the host backend opened on first need (sched/
 *     backend.c), the thread pools' hand-offs (engine/pool.c,
 *     format/fanout.c), the kernel programs and the buffer pool
 *     (engine/cl_program.h, engine/buffer.c);
 *   - the rest: the shared-memory registry and its SIGBUS guard
 *     (core/shm.c), the tokens (core/auth.c, a read-write lock), the
 *     statistics (core/stats.h), the log's lines (core/log.c), the span
 *     exporter's queue (telemetry/exporter.c), and atomic counters.
 * No thread calls libuv or libmicrohttpd on another's objects.
 *
 * Shutdown (SIGTERM or SIGINT): readiness turns 503, the listening sockets
 * close (MHD_quiesce_daemon; gRPC's listener, and GOAWAY on its
 * connections) so no new connection is accepted, and every
 * request already in flight, read or queued or running, is answered, with
 * Connection: close. A keep-alive connection that was idle may still send
 * one more request, answered the same way, until it has been quiet for
 * --drain-idle-ms. When nothing is in flight and no connection is left (or
 * the rest are quiet), or after --drain-timeout seconds, the workers and
 * the daemon stop and the process exits 0 (1 if it had to give up on
 * requests).
 */
#define _DEFAULT_SOURCE /* syscall */
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "cors.h"
#include "exporter.h"
#include "http.h"
#include "log.h"
#include "numtext.h"
#include "scheduler.h"

#define TICK_MS 5

/* The most devices one daemon drives. */
#define TALLYD_MAX_DEVICES SCHED_MAX_DEVICES

/* The compute devices, opened before anything else and closed last. */
typedef struct {
    eng_engine *engine[TALLYD_MAX_DEVICES];
    /* "P:D platform / device (layout)": unique, the metrics' label */
    char name[TALLYD_MAX_DEVICES][400];
    const char *names[TALLYD_MAX_DEVICES];
    unsigned n;
} devices;

/* The daemon's parts, each owned by its layer, composed here. */
static tallyd_server server;
static http_transport transport;
static grpc_door grpc;
static devices pool;
static api_state app;

/* The loop thread's own. */
static uv_loop_t *loop;
static uv_signal_t sigterm, sigint, sighup;
static uv_timer_t tick;
static unsigned ticks;

/* The scheduler's tick thread (above), and its stop flag. */
static uv_thread_t ticker;
static atomic_bool ticker_stop;

static void run_ticker(void *arg)
{
    api_state *a = arg;
    while (!atomic_load(&ticker_stop)) {
        uv_sleep(TICK_MS);
        sched_tick(a->sched);
        seq_sweep(a->seqs);
    }
}
static uint64_t drain_started_ns;
static int exit_code;

/* Until the loop's signal handlers take over, SIGTERM and SIGINT end the
 * process at once: nothing is in flight yet (compiling kernels can take a
 * minute), and as PID 1 in a container tallyd would otherwise ignore
 * them. */
static void on_early_signal(int sig)
{
    static const char line[] =
        "{\"module\":\"tallyd\",\"level\":\"info\",\"msg\":\"stopped "
        "during startup\"}\n";
    (void)sig;
    ssize_t n = write(2, line, sizeof line - 1);
    (void)n;
    /* the exit_group system call itself: a sanitizer's _exit() would run
     * its leak check here, in a signal handler, and deadlock on an
     * allocator lock the interrupted thread (a kernel compile) holds:
     * test_sigterm_during_startup hung 30 s once under ASan */
    syscall(SYS_exit_group, 0);
}

static void engine_log(void *user, const char *line)
{
    (void)user;
    log_msg("engine", "info", "%s", line);
}

static void stop_everything(void)
{
    grpc_door_stop(&grpc);
    uv_timer_stop(&tick);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sighup, NULL);
}

/* While draining: true once nothing is in flight and every connection is
 * gone, or the ones left have sent nothing for --drain-idle-ms (a client
 * may have sent a request on its keep-alive connection just as the signal
 * came; closing that connection at once would lose the request). */
static bool drain_done(tallyd_server *s, uint64_t now)
{
    if (atomic_load(&s->inflight) > 0)
        return false;
    if (http_open_connections(&transport) <= 0
        && grpc_door_open_connections(&grpc) <= 0)
        return true;
    uint64_t last = atomic_load(&s->last_done_ns);
    if (last < drain_started_ns)
        last = drain_started_ns;
    return now - last >= (uint64_t)s->cfg.drain_idle_ms * 1000000u;
}

static void on_tick(uv_timer_t *t)
{
    tallyd_server *s = t->data;
    if (++ticks % (100 / TICK_MS) == 0) {
        http_sweep(&transport);
        grpc_door_sweep(&grpc);
        api_health_tick(&app, s);
        reqlog_tick(&s->reqlog, now_ns());
    }
    log_flush();
    if (!atomic_load(&s->draining))
        return;
    uint64_t now = now_ns();
    bool done = drain_done(s, now);
    long long inflight = atomic_load(&s->inflight);
    uint64_t waited = now - drain_started_ns;
    if (!done && waited < (uint64_t)s->cfg.drain_timeout_s * 1000000000u)
        return;
    if (inflight > 0) {
        log_msg("tallyd", "error",
                "drain timeout: %lld requests still in flight after %u s; "
                "exiting without them",
                inflight, s->cfg.drain_timeout_s);
        exit_code = 1;
        /* the running sums as they stand: a chunk still running adds to
         * nothing, and its client may send it again */
        api_sequences_close_now(&app, s);
        log_flush();
        _exit(1); /* suspended connections cannot be stopped cleanly */
    }
    log_msg("tallyd", "info",
            "drained; closing %lld idle connections and "
            "stopping",
            (long long)(http_open_connections(&transport)
                        + grpc_door_open_connections(&grpc)));
    stop_everything();
}

static void begin_drain(tallyd_server *s, const char *why)
{
    if (atomic_exchange(&s->draining, true))
        return;
    drain_started_ns = now_ns();
    log_msg("tallyd", "info",
            "%s: no longer accepting connections; finishing %lld in-flight "
            "requests",
            why, (long long)atomic_load(&s->inflight));
    http_quiesce(&transport);
    grpc_door_quiesce(&grpc);
    api_health_tick(&app, s); /* every Watch hears NOT_SERVING */
}

/* Opens every device the --device option names (a list, or all of a kind:
 * eng_engine_expand), each its own engine with its own programs, and
 * names them for logs and metrics. */
static bool open_devices(tallyd_server *s, devices *p,
                         const eng_engine_options *base, char *msg,
                         size_t msglen)
{
    char specs[TALLYD_MAX_DEVICES][ENG_DEVICE_SPEC];
    int n = eng_engine_expand(s->cfg.device, specs, TALLYD_MAX_DEVICES, msg,
                              msglen);
    if (n <= 0)
        return false;
    size_t at = 0;
    for (int d = 0; d < n; d++) {
        eng_engine_options o = *base;
        o.device = specs[d];
        if (s->cfg.fault_device == (unsigned)d + 1) { /* testing */
            o.fault_every = s->cfg.fault_every ? s->cfg.fault_every : 1;
            o.fault_after_ms = s->cfg.fault_after_ms;
            o.fault_late = s->cfg.fault_late;
            o.fault_build = s->cfg.fault_build;
        }
        if (eng_engine_open(&o, &p->engine[d], msg, msglen) != ENG_E_OK)
            return false;
        p->n = (unsigned)d + 1;
        const char *what = eng_engine_describe(p->engine[d]);
        /* the spec first when it says which of several like devices */
        bool indexed = n > 1 && strchr(specs[d], ':') != NULL;
        snprintf(p->name[d], sizeof p->name[d], "%.63s%s%.320s",
                 indexed ? specs[d] : "", indexed ? " " : "", what);
        p->names[d] = p->name[d];
        if (at + 2 + strlen(p->name[d]) < sizeof s->device)
            at += (size_t)snprintf(s->device + at, sizeof s->device - at,
                                   "%s%.399s", d ? "; " : "", p->name[d]);
    }
    return true;
}

static void close_devices(devices *p)
{
    for (unsigned d = 0; d < p->n; d++)
        eng_engine_close(p->engine[d]);
    p->n = 0;
}

/* SIGHUP: the token file is read again; a file that is now bad leaves
 * the tokens as they were. Other settings are read at startup only. */
static void reload(tallyd_server *s)
{
    if (transport.auth == NULL) {
        log_msg("tallyd", "info",
                "SIGHUP: nothing to reload (settings are read at startup; "
                "only --auth-token-file is reread)");
        return;
    }
    char msg[512];
    size_t n =
        auth_reload(transport.auth, s->cfg.auth_token_file, msg, sizeof msg);
    if (n == 0)
        log_msg("tallyd", "error",
                "SIGHUP: %s; the %zu tokens read before stay in force", msg,
                auth_count(transport.auth));
    else
        log_msg("tallyd", "info", "SIGHUP: %zu bearer tokens read from %s", n,
                s->cfg.auth_token_file);
}

/* Tracing: an exporter when an OTLP endpoint is set (the flag, or
 * OpenTelemetry's standard variables), and the sampler's ratio. *e stays
 * NULL when tracing is off. False with msg for a bad setting. */
static bool start_tracing(tallyd_server *s, otlp_exporter **e, char *msg,
                          size_t msglen)
{
    *e = NULL;
    char url[1024];
    const char *base = s->cfg.otlp_endpoint;
    const char *full = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    if (base[0] != '\0' || full == NULL || full[0] == '\0') {
        if (base[0] == '\0')
            base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
        if (base == NULL || base[0] == '\0')
            return true; /* no tracing: no trace is marked sampled */
        size_t n = strlen(base);
        while (n > 0 && base[n - 1] == '/')
            n--;
        const char *tail = "/v1/traces";
        bool has = n >= strlen(tail)
                   && memcmp(base + n - strlen(tail), tail, strlen(tail)) == 0;
        snprintf(url, sizeof url, "%.*s%s", (int)n, base, has ? "" : tail);
    } else {
        snprintf(url, sizeof url, "%s", full);
    }
    const char *ratio = s->cfg.trace_ratio;
    if (ratio[0] == '\0')
        ratio = getenv("OTEL_TRACES_SAMPLER_ARG");
    double r = 1.0;
    if (ratio != NULL && ratio[0] != '\0') {
        char *end;
        r = strtod(ratio, &end);
        if (*end != '\0' || !(r >= 0 && r <= 1))
            return msg_fail(
                msg, msglen,
                "--trace-ratio: \"%.64s\" is not a number from 0 to 1", ratio);
    }
    /* OpenTelemetry's exporter timeout, in milliseconds: one POST's limit,
     * and the most the exit waits on a collector */
    unsigned timeout_ms = 10000;
    const char *tmo = getenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
    if (tmo == NULL || tmo[0] == '\0')
        tmo = getenv("OTEL_EXPORTER_OTLP_TIMEOUT");
    if (tmo != NULL && tmo[0] != '\0') {
        char *end;
        errno = 0;
        unsigned long v = strtoul(tmo, &end, 10);
        if (*end != '\0' || errno != 0 || tmo[0] == '-' || v < 1 || v > 600000)
            return msg_fail(
                msg, msglen,
                "OTEL_EXPORTER_OTLP_TIMEOUT: \"%.64s\" is not a number "
                "of milliseconds from 1 to 600000",
                tmo);
        timeout_ms = (unsigned)v;
    }
    const char *service = getenv("OTEL_SERVICE_NAME");
    otlp_options o = {
        .url = url,
        .service = service != NULL && service[0] ? service : "tally",
        .version = TALLYD_VERSION,
        .queue_max = s->cfg.otlp_max_queue ? s->cfg.otlp_max_queue : 1,
        .batch_max = 512,
        .interval_ms = 1000,
        .timeout_ms = timeout_ms,
    };
    *e = otlp_exporter_start(&o, msg, msglen);
    if (*e == NULL)
        return false;
    trace_sampler_set(&s->sampler, r);
    s->traces = otlp_exporter_sink(*e);
    log_msg("tallyd", "info",
            "tracing: %g%% of new traces sampled (and callers' sampled "
            "ones), spans to %s as service \"%s\"",
            r * 100, url, o.service);
    return true;
}

/* --auth-token-file: the tokens, before any connection is accepted. */
static bool load_tokens(tallyd_server *s, char *msg, size_t msglen)
{
    if (s->cfg.auth_token_file[0] == '\0')
        return true;
    transport.auth = auth_load(s->cfg.auth_token_file, msg, msglen);
    if (transport.auth == NULL)
        return false;
    log_msg("tallyd", "info",
            "bearer tokens required: %zu read from %s; health routes %s, "
            "/metrics %s",
            auth_count(transport.auth), s->cfg.auth_token_file,
            s->cfg.auth_health ? "need one" : "open",
            s->cfg.auth_metrics ? "needs one" : "open");
    return true;
}

/* Every connection is a descriptor: take all the hard limit allows, and
 * say so when that is too few for --max-connections. */
static void raise_fd_limit(const tallyd_server *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY
        && rl.rlim_cur < (rlim_t)s->cfg.max_connections + 64)
        log_msg("tallyd", "warn",
                "only %llu files may be open, too few for --max-connections "
                "%u; raise the limit (ulimit -n, LimitNOFILE=) or lower "
                "--max-connections",
                (unsigned long long)rl.rlim_cur, s->cfg.max_connections);
}

static void on_signal(uv_signal_t *h, int signum)
{
    tallyd_server *s = h->data;
    if (signum == SIGHUP) {
        reload(s);
        return;
    }
    begin_drain(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* What tallyd reads before the devices, which are slow to open: the
 * tokens, the --cors-origins (http_start parses them again, for itself)
 * and the --docs-dir, any of which stops tallyd at once. */
static bool check_files(tallyd_server *s, api_docs *docs, char *msg,
                        size_t msglen)
{
    http_cors *origins = NULL;
    bool ok = load_tokens(s, msg, msglen)
              && http_cors_parse(s->cfg.cors_origins, &origins, msg, msglen)
              && api_docs_load(docs, s->cfg.docs_dir, msg, msglen);
    http_cors_free(origins);
    return ok;
}

/* The loop thread's handles: the signals and the 5 ms tick. */
static void loop_handles(tallyd_server *s)
{
    uv_signal_init(loop, &sigterm);
    uv_signal_init(loop, &sigint);
    uv_signal_init(loop, &sighup);
    sigterm.data = sigint.data = sighup.data = s;
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_signal_start(&sighup, on_signal, SIGHUP);
    uv_timer_init(loop, &tick);
    tick.data = s;
    uv_timer_start(&tick, on_tick, TICK_MS, TICK_MS);
}

/* The flags that answer and stop (--help, --version, --list-devices):
 * the exit status; -1 for none of them. */
static int answer_flags(tallyd_server *s, const char *argv0)
{
    if (s->cfg.help) {
        tallyd_config_usage(stdout, argv0);
        return 0;
    }
    if (s->cfg.version) {
        printf("tallyd %s\n", TALLYD_VERSION);
        return 0;
    }
    if (s->cfg.list_devices) {
        int n = eng_engine_list(stdout);
        printf("host  the C backend on this machine's cores (--device host)\n");
        return n >= 0 ? 0 : 1;
    }
    return -1;
}

/* The engine: warming up builds every kernel (slow once per CPU model
 * with PoCL, cached afterwards) so that no request pays for it. With
 * --warmup it happens here, before the listeners open; without, the
 * scheduler builds each device's kernels on a thread of its own while
 * the host backend answers, and the device joins the pool when done
 * (sched_options.cold). False when no device opens (logged). */
static bool open_engine(tallyd_server *s)
{
    char msg[1024];
    eng_engine_options o;
    eng_engine_options_init(&o);
    o.device = s->cfg.device;
    o.layout = s->cfg.layout;
    o.warmup = s->cfg.warmup || s->cfg.warm_cache;
    o.log = engine_log;
    o.host_threads = tallyd_config_host_threads(&s->cfg);
    uint64_t t0 = now_ns();
    numtext_init(); /* float16 text, so that no request pays for it */
    if (!open_devices(s, &pool, &o, msg, sizeof msg)) {
        log_msg("tallyd", "error", "cannot open the compute device: %s", msg);
        close_devices(&pool);
        return false;
    }
    bool cold = false;
    for (unsigned d = 0; d < pool.n; d++)
        cold = cold || (!o.warmup && !eng_engine_is_host(pool.engine[d]));
    if (!cold)
        log_msg("tallyd", "info", "device%s ready in %.1f s: %s",
                pool.n > 1 ? "s" : "", (double)(now_ns() - t0) * 1e-9,
                s->device);
    else
        log_msg("tallyd", "info",
                "device%s opened in %.1f s: %s; OpenCL kernels build in the "
                "background, the host backend answering until each device "
                "joins the pool",
                pool.n > 1 ? "s" : "", (double)(now_ns() - t0) * 1e-9,
                s->device);
    return true;
}

/* The doors: gRPC first (app.grpc is set before any HTTP thread can
 * read it, /metrics, and gRPC's connections are served only once the
 * loop runs), then HTTP, then the ready lines. False when one cannot
 * start (logged; what started is stopped). */
static bool start_doors(tallyd_server *s)
{
    char msg[1024];
    if (s->cfg.grpc_listen[0] != '\0') {
        unsigned loops =
            s->cfg.grpc_threads ? s->cfg.grpc_threads : s->cfg.http_threads;
        if (!grpc_door_start(&grpc, s, loop, loops, &api_grpc_service,
                             transport.auth, msg, sizeof msg)) {
            log_msg("tallyd", "error", "%s", msg);
            return false;
        }
        app.grpc = &grpc;
    }
    if (!http_start(&transport, s, &api_routes, msg, sizeof msg)) {
        log_msg("tallyd", "error", "%s", msg);
        grpc_door_stop(&grpc);
        return false;
    }
    /* gRPC's line first: "tallyd ... listening" is the last start line,
     * written once both doors are bound (the tests read the ports from
     * these lines, and stop reading at that one) */
    if (grpc.n > 0 && grpc.t[0].started)
        log_msg("tallyd", "info",
                "gRPC listening on %s (port %u, %s, %u loop%s)",
                s->cfg.grpc_listen, grpc.t[0].port,
                grpc.t[0].tls != NULL ? "TLS, ALPN h2" : "h2c", grpc.n,
                grpc.n > 1 ? "s" : "");
    log_msg("tallyd", "info",
            "tallyd %s listening on %s (port %u, %s): %u workers, %u HTTP "
            "threads, queue depth %u, max body %zu bytes",
            TALLYD_VERSION, s->cfg.listen, transport.port,
            transport.tls ? "HTTPS" : "HTTP", s->cfg.workers,
            s->cfg.http_threads, s->cfg.queue_depth, s->cfg.max_body_bytes);

    return true;
}

/* Once the loop has ended (the drain is done): everything stops, in
 * the order that loses nothing. */
static void stop_all(tallyd_server *s, otlp_exporter *exporter, api_docs *docs)
{
    atomic_store(&ticker_stop, true);
    uv_thread_join(&ticker);
    api_stop(&app); /* every queued job runs first */
    http_stop(&transport);
    api_sequences_close(&app, s);
    api_free(&app);               /* no request holds a region now */
    otlp_exporter_stop(exporter); /* the last spans go out */
    api_docs_free(docs);
    uv_loop_close(loop);
    close_devices(&pool);
    auth_free(transport.auth);
    tallyd_config_free(&s->cfg);
    log_msg("tallyd", "info", "stopped");
    log_flush();
}

int main(int argc, char **argv)
{
    tallyd_server *s = &server;
    loop_owner_set(&s->main_loop); /* main is the loop thread */
    char msg[1024];
    s->version = TALLYD_VERSION;
    if (!tallyd_config_load(&s->cfg, argc, argv, msg, sizeof msg)) {
        fprintf(stderr, "tallyd: %s\n", msg);
        return 2;
    }
    int answered = answer_flags(s, argv[0]);
    if (answered >= 0)
        return answered;
    static api_docs docs;
    if (!s->cfg.warm_cache && !check_files(s, &docs, msg, sizeof msg)) {
        fprintf(stderr, "tallyd: %s\n", msg);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction early = {.sa_handler = on_early_signal};
    sigemptyset(&early.sa_mask);
    sigaction(SIGTERM, &early, NULL);
    sigaction(SIGINT, &early, NULL);

    if (!open_engine(s))
        return 1;
    if (s->cfg.warm_cache) { /* --warm-cache: for images and installers */
        close_devices(&pool);
        tallyd_config_free(&s->cfg);
        log_flush();
        return 0;
    }
    /* at least one worker per device */
    if (s->cfg.workers < pool.n)
        s->cfg.workers = pool.n;

    metrics_init(&s->metrics, api_routes.labels, api_routes.nlabels);
    reqlog_init(&s->reqlog, &s->cfg);
    stats_init(&s->stats);
    if (!api_start(&app, s, pool.engine, pool.names, pool.n, msg, sizeof msg)) {
        log_msg("tallyd", "error", "cannot start workers: %s", msg);
        return 1;
    }

    app.docs = &docs;
    if (!api_sequences_load(&app, s, msg, sizeof msg)) {
        log_msg("tallyd", "error", "%s", msg);
        api_stop(&app);
        api_free(&app);
        return 1;
    }
    otlp_exporter *exporter = NULL;
    if (!start_tracing(s, &exporter, msg, sizeof msg)) {
        log_msg("tallyd", "error", "%s", msg);
        api_stop(&app);
        api_free(&app);
        return 1;
    }
    if (exporter != NULL)
        api_trace_start(&app, s, exporter);

    loop = uv_default_loop();
    loop_handles(s);

    raise_fd_limit(s);
    if (!start_doors(s)) {
        api_stop(&app);
        api_free(&app);
        otlp_exporter_stop(exporter);
        return 1;
    }

    if (uv_thread_create(&ticker, run_ticker, &app) != 0) {
        log_msg("tallyd", "error", "cannot start the scheduler's tick thread");
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    stop_all(s, exporter, &docs);
    return exit_code;
}
