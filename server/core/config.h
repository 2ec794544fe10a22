/*
 * config.h - tallyd's settings, from flags and environment variables.
 *
 * One table lists every setting with its flag, environment variable,
 * default and help text; parsing and --help are both generated from it.
 * A flag beats its environment variable, which beats the default.
 *
 * Threading: tallyd_config_load() once, on the loop thread (main), before any
 * other starts; the settings are read-only afterwards.
 */
#ifndef TALLY_CONFIG_H
#define TALLY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* X(field, flag, env, kind, default, help); kind, checked once at load
 * (a bad value is refused with the setting's name and what it takes):
 *   STR           text;
 *   UINT          a number, 0 to TALLYD_UINT_MAX;
 *   RANGE(lo, hi) a number from lo to hi;
 *   SIZE          bytes: 256MiB, 64M or 1000000;
 *   BOOL          a switch: true, 1, yes, on; false, 0, no, off;
 *   ENUM(words)   one of "a|b|c", the field the position of its word (the
 *                 field's enum below); "x=a" takes the word x for a. */
#define TALLYD_SETTINGS(X)                                                     \
    X(listen, "listen", "TALLY_LISTEN", STR, "127.0.0.1:8080",                 \
      "address and port to serve on, HOST:PORT ([::1]:8080 for IPv6)")         \
    X(grpc_listen, "grpc-listen", "TALLY_GRPC_LISTEN", STR, "127.0.0.1:8001",  \
      "address and port of the gRPC front door (KServe v2 / Triton's "         \
      "GRPCInferenceService), HOST:PORT; empty turns it off")                  \
    X(grpc_max_streams, "grpc-max-streams", "TALLY_GRPC_MAX_STREAMS",          \
      RANGE(1, 65536), "128",                                                  \
      "concurrent gRPC calls (HTTP/2 streams) one connection may open")       \
    X(allow_shared_memory, "allow-shared-memory", "TALLY_ALLOW_SHARED_MEMORY", \
      BOOL, "false",                                                           \
      "take tensors in clients' POSIX shared-memory regions (Triton's "        \
      "system shared-memory extension): lets clients make the daemon open "    \
      "and map objects under /dev/shm")                                        \
    X(shm_max_regions, "shm-max-regions", "TALLY_SHM_MAX_REGIONS",             \
      RANGE(1, 2048), "64",                                                    \
      "shared-memory regions registered at once, in all")                     \
    X(shm_max_bytes, "shm-max-bytes", "TALLY_SHM_MAX_BYTES", SIZE, "4GiB",     \
      "bytes of shared-memory regions registered at once, in all")             \
    X(max_sequences, "max-sequences", "TALLY_MAX_SEQUENCES", UINT, "1024",     \
      "live sequences (Triton's sequence extension) at most; another start "   \
      "gets 503 with Retry-After; 0 turns sequences off")                      \
    X(model_sequence_batching, "model-sequence-batching",                      \
      "TALLY_MODEL_SEQUENCE_BATCHING", BOOL, "false",                          \
      "put sequence_batching in the model's configuration, as Triton does "    \
      "for a stateful model, so that perf_analyzer runs its sequence mode; "   \
      "chunks of sequences are taken either way")                              \
    X(sequence_idle_ms, "sequence-idle-ms", "TALLY_SEQUENCE_IDLE_MS", UINT,    \
      "60000",                                                                 \
      "a sequence with no answered chunk (applied, or a repeat) for this "     \
      "long is dropped")                                                       \
    X(sequence_linger_ms, "sequence-linger-ms", "TALLY_SEQUENCE_LINGER_MS",    \
      UINT, "1000",                                                            \
      "an ended sequence still takes, this long, a chunk sent before its "     \
      "last one that arrived after it (on another connection); 0: none")      \
    X(sequence_reorder_ms, "sequence-reorder-ms", "TALLY_SEQUENCE_REORDER_MS", \
      UINT, "1000",                                                            \
      "a numbered chunk (sequence_chunk) that arrives before the chunks "     \
      "ahead of it waits for them this long, then is refused")                \
    X(sequence_max_bytes, "sequence-max-bytes", "TALLY_SEQUENCE_MAX_BYTES",    \
      SIZE, "64MiB",                                                           \
      "bytes the live sequences' carries may take, in all (8 per line of a "   \
      "chunk, 16 in a numbered sequence; twice that with --state-dir, whose "  \
      "log writer keeps a copy)")                                              \
    X(state_dir, "state-dir", "TALLY_STATE_DIR", STR, "",                      \
      "a directory where every applied chunk's sequence state is logged "      \
      "before its answer leaves, and the next start reads them back; "         \
      "empty: sequences live in memory only")                                  \
    X(state_fsync, "state-fsync", "TALLY_STATE_FSYNC",                         \
      ENUM("always|everysec"), "always",                                       \
      "with --state-dir: always (fdatasync before each answer, shared by "     \
      "the chunks that finish together: an answered chunk survives a power "   \
      "loss) or everysec (written before the answer, flushed once a second: "  \
      "it survives a crash of tallyd)")                                        \
    X(state_store, "state-store", "TALLY_STATE_STORE", STR, "",                \
      "redis://[[user]:password@]host[:port][/db]: keep every sequence's "    \
      "state in this Redis, shared by every replica that names it, so that "  \
      "any replica answers any chunk (not with --state-dir); empty: none")    \
    X(state_store_prefix, "state-store-prefix", "TALLY_STATE_STORE_PREFIX",    \
      STR, "tally:seq:",                                                       \
      "with --state-store: the start of every sequence's key")                \
    X(state_store_timeout_ms, "state-store-timeout-ms",                        \
      "TALLY_STATE_STORE_TIMEOUT_MS", UINT, "2000",                            \
      "with --state-store: a chunk waits this long at most for Redis (less "  \
      "when its request's deadline comes first), then gets 503; also the "    \
      "start's wait for the first connection")                                \
    X(state_store_wait, "state-store-wait", "TALLY_STATE_STORE_WAIT", UINT,    \
      "0",                                                                     \
      "with --state-store: a chunk's answer waits until this many of "        \
      "Redis's replicas have its write (WAIT), so that a failover to one of "  \
      "them keeps it; 0: once the primary has it")                             \
    X(device, "device", "TALLY_DEVICE", STR, "auto",                           \
      "compute devices: auto, host, gpu, cpu, P:D or a name substring, a "     \
      "comma-separated list of those, or all, gpu:all, cpu:all")               \
    X(layout, "layout", "TALLY_LAYOUT", STR, "auto",                           \
      "kernel layout: auto, cpu or gpu (with ,key=value overrides)")           \
    X(placement, "placement", "TALLY_PLACEMENT", ENUM("cost|device"), "cost", \
      "where a device worker runs a job while its device is in the pool: "    \
      "cost (on the device or the host's cores, whichever has been faster "   \
      "for launches of that size) or device (always on the device)")          \
    X(workers, "workers", "TALLY_WORKERS", RANGE(1, TALLYD_UINT_MAX), "2",     \
      "device workers, one command queue each")                                \
    X(http_threads, "http-threads", "TALLY_HTTP_THREADS",                      \
      RANGE(1, TALLYD_UINT_MAX), "2",                                          \
      "threads serving HTTP connections")                                      \
    X(grpc_threads, "grpc-threads", "TALLY_GRPC_THREADS",                      \
      RANGE(0, TALLYD_GRPC_THREADS_MAX), "0",                                  \
      "event loops serving gRPC connections, each its own connections end "   \
      "to end (one listener deals them out in turn); 0: as many as "          \
      "--http-threads")                                                        \
    X(queue_depth, "queue-depth", "TALLY_QUEUE_DEPTH",                         \
      RANGE(1, TALLYD_UINT_MAX), "1024",                                       \
      "jobs that may wait for a worker; more get 503 with Retry-After")        \
    X(max_body_bytes, "max-body-bytes", "TALLY_MAX_BODY_BYTES", SIZE,          \
      "256MiB", "largest request body (and tensor) accepted; larger gets 413") \
    X(max_buffered_bytes, "max-buffered-bytes", "TALLY_MAX_BUFFERED_BYTES",    \
      SIZE, "2GiB",                                                            \
      "request bodies held in memory at once, in all; past it a request "      \
      "gets 503 with Retry-After")                                             \
    X(timeout_ms, "timeout-ms", "TALLY_TIMEOUT_MS", UINT, "0",                 \
      "default request deadline in milliseconds, 0 for none")                  \
    X(idle_timeout_s, "idle-timeout", "TALLY_IDLE_TIMEOUT", UINT, "60",        \
      "seconds a connection may take to send a request's first line: an "      \
      "idle keep-alive connection is closed after this, even one that "        \
      "trickles bytes")                                                        \
    X(request_timeout_s, "request-timeout", "TALLY_REQUEST_TIMEOUT", UINT,     \
      "60",                                                                    \
      "seconds from a request's first line to the last byte of its body; a "   \
      "connection still sending then is closed (0: no limit)")                 \
    X(drain_timeout_s, "drain-timeout", "TALLY_DRAIN_TIMEOUT", UINT, "30",     \
      "seconds SIGTERM waits for in-flight requests before giving up")         \
    X(drain_idle_ms, "drain-idle-ms", "TALLY_DRAIN_IDLE_MS", UINT, "1000",     \
      "after SIGTERM, how long an idle keep-alive connection may still send "  \
      "a request (answered, with Connection: close) before it is closed")      \
    X(max_connections, "max-connections", "TALLY_MAX_CONNECTIONS", UINT,       \
      "4096", "open connections allowed at once")                              \
    X(max_client_connections, "max-client-connections",                        \
      "TALLY_MAX_CLIENT_CONNECTIONS", UINT, "1024",                            \
      "open connections allowed from one client address; more are closed "     \
      "at once (0: no limit)")                                                 \
    X(max_batch, "max-batch", "TALLY_MAX_BATCH", RANGE(1, TALLYD_MAX_BATCH),   \
      "8",                                                                     \
      "compatible queued jobs (up to 1 MiB each) a worker runs as one "        \
      "launch")                                                                \
    X(max_queue_delay_us, "max-queue-delay-us", "TALLY_MAX_QUEUE_DELAY_US",    \
      UINT, "0",                                                               \
      "how long a job may wait for others to share its launch, when no "       \
      "worker is idle (0: not at all)")                                        \
    X(inline_max, "inline-max-elements", "TALLY_INLINE_MAX_ELEMENTS", UINT,    \
      "4096",                                                                  \
      "tensors this small are summed at once on the thread that received "     \
      "them (an HTTP thread, or gRPC's loop), on the host (a device launch "   \
      "costs more); 0: never")                                                 \
    X(json_inline_max, "json-inline-max-elements",                             \
      "TALLY_JSON_INLINE_MAX_ELEMENTS", UINT, "65536",                         \
      "tensors that came as JSON text are summed on the HTTP thread up to "    \
      "this size (their text costs several times the sum); 0: never")          \
    X(fault_delay_ms, "fault-delay-ms", "TALLY_FAULT_DELAY_MS", UINT, "0",     \
      "testing: workers wait this long before each job (a slow device)")       \
    X(fault_device, "fault-device", "TALLY_FAULT_DEVICE", UINT, "0",           \
      "testing: the Nth device (1 is the first) refuses launches, as a "       \
      "broken device would (see --fault-every, --fault-after-ms); 0: none")    \
    X(fault_every, "fault-every", "TALLY_FAULT_EVERY", UINT, "1",              \
      "testing: with --fault-device, 1 launch in this many is refused")        \
    X(fault_after_ms, "fault-after-ms", "TALLY_FAULT_AFTER_MS", UINT, "0",     \
      "testing: with --fault-device, launches are refused only from this "     \
      "many ms after the device's kernels are built")                          \
    X(fault_late, "fault-late", "TALLY_FAULT_LATE", BOOL, "false",             \
      "testing: with --fault-device, a faulty launch runs and then fails, as " \
      "a kernel that faults half-way (an in-place tensor cannot be rerun)")    \
    X(fault_build, "fault-build", "TALLY_FAULT_BUILD", BOOL, "false",          \
      "testing: with --fault-device, the device's kernels fail to build")      \
    X(fault_state, "fault-state", "TALLY_FAULT_STATE",                         \
      ENUM("|enospc|eio|fsync"), "",                                           \
      "testing: after --fault-state-after records, every write to the "        \
      "sequence log fails: enospc or eio (the write), fsync (the flush)")      \
    X(fault_state_after, "fault-state-after", "TALLY_FAULT_STATE_AFTER",       \
      UINT, "0", "testing: records written before --fault-state begins")      \
    X(fault_build_ms, "fault-build-ms", "TALLY_FAULT_BUILD_MS", UINT, "0",     \
      "testing: without --warmup, each device starts building its kernels "    \
      "this many ms late (a slow build)")                                      \
    X(device_max_failures, "device-max-failures", "TALLY_DEVICE_MAX_FAILURES", \
      UINT, "3",                                                               \
      "a device whose launches fail this many times in a row leaves the "      \
      "pool; failed jobs are run again on the host backend")                   \
    X(warmup, "warmup", "TALLY_WARMUP", BOOL, "false",                         \
      "build every device's kernels before listening, and report ready "      \
      "only then, for those who would rather wait for the kernels; false: "   \
      "listen at once, the host backend answering while each device builds "  \
      "its kernels in the background and joins the pool when they are built") \
    X(access_log, "access-log", "TALLY_ACCESS_LOG",                            \
      ENUM("errors|all|off|true=all|yes=all|on=all|1=all|false=off|no=off|"   \
           "0=off"),                                                           \
      "errors",                                                                \
      "access lines (JSON, standard error): errors (failed and slow "          \
      "requests, at most --access-log-max-per-s a second), all (every "        \
      "request), or off")                                                      \
    X(slow_request_ms, "slow-request-ms", "TALLY_SLOW_REQUEST_MS", UINT,       \
      "1000", "with --access-log=errors, a request that took this long is "    \
      "logged whatever its status (0: none is slow)")                          \
    X(access_log_max_per_s, "access-log-max-per-s",                            \
      "TALLY_ACCESS_LOG_MAX_PER_S", UINT, "100",                               \
      "with --access-log=errors, lines a second beyond which they are "        \
      "counted, not written (0: no cap)")                                      \
    X(auth_token_file, "auth-token-file", "TALLY_AUTH_TOKEN_FILE", STR, "",    \
      "bearer tokens, one a line, that inference, metadata and statistics "    \
      "require (reread on SIGHUP); empty: no tokens")                          \
    X(auth_health, "auth-health", "TALLY_AUTH_HEALTH", BOOL, "false",          \
      "with tokens: the health and readiness routes require one too")          \
    X(auth_metrics, "auth-metrics", "TALLY_AUTH_METRICS", BOOL, "true",        \
      "with tokens: GET /metrics requires one too")                            \
    X(cors_origins, "cors-origins", "TALLY_CORS_ORIGINS", STR, "",             \
      "web pages that may call the API from another origin: a comma-"         \
      "separated list (https://app.example.com,http://localhost:3000) or *; " \
      "empty: none (CORS off)")                                                \
    X(otlp_endpoint, "otlp-endpoint", "TALLY_OTLP_ENDPOINT", STR, "",          \
      "send sampled requests' spans to this OpenTelemetry collector (OTLP/"   \
      "HTTP, protobuf): http://host:4318, to which /v1/traces is added; "     \
      "empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "                         \
      "OTEL_EXPORTER_OTLP_ENDPOINT, else no tracing")                         \
    X(trace_ratio, "trace-ratio", "TALLY_TRACE_RATIO", STR, "",                \
      "with an OTLP endpoint, the share of new traces sampled, 0 to 1 "       \
      "(a caller's traceparent decides for its own); empty: "                 \
      "OTEL_TRACES_SAMPLER_ARG, else 1; /v2/trace/setting changes it")        \
    X(otlp_max_queue, "otlp-max-queue", "TALLY_OTLP_MAX_QUEUE", UINT, "4096",  \
      "sampled requests waiting to be exported, at most; beyond it their "    \
      "spans are dropped and counted, and requests never wait")               \
    X(docs_dir, "docs-dir", "TALLY_DOCS_DIR", STR, "",                         \
      "Swagger UI's files for the API docs at /docs (swagger-ui-bundle.js, "   \
      "swagger-ui.css); empty: share/tally/docs beside the binary's bin/, "    \
      "where make and make install put them")                                 \
    X(tls_cert, "tls-cert", "TALLY_TLS_CERT", STR, "",                         \
      "serve HTTPS with this certificate (a PEM file, the chain after it); "   \
      "needs --tls-key")                                                       \
    X(tls_key, "tls-key", "TALLY_TLS_KEY", STR, "",                            \
      "the PEM file of --tls-cert's private key")                              \
    X(tls_priorities, "tls-priorities", "TALLY_TLS_PRIORITIES", STR,           \
      "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",                            \
      "GnuTLS priority string: protocol versions and ciphers offered")

/* UINT's most */
#define TALLYD_UINT_MAX 100000000
/* --grpc-threads' most: the gRPC door's loops (grpc.h) */
#define TALLYD_GRPC_THREADS_MAX 64
/* --max-batch's most: the scheduler's batch (SCHED_MAX_BATCH) and the
 * statistics' sizes (STATS_MAX_BATCH) are this one */
#define TALLYD_MAX_BATCH 64

/* The ENUM settings' values, in their words' order. */
typedef enum {
    TALLYD_ACCESS_ERRORS,
    TALLYD_ACCESS_ALL,
    TALLYD_ACCESS_OFF
} tallyd_access_mode; /* --access-log */
typedef enum { TALLYD_FSYNC_ALWAYS, TALLYD_FSYNC_EVERYSEC } tallyd_fsync;
typedef enum { TALLYD_PLACE_COST, TALLYD_PLACE_DEVICE } tallyd_placement;
typedef enum {
    TALLYD_FAULT_NONE,
    TALLYD_FAULT_ENOSPC,
    TALLYD_FAULT_EIO,
    TALLYD_FAULT_FSYNC
} tallyd_fault_state; /* --fault-state */

typedef struct {
    char *listen, *grpc_listen, *device, *layout, *auth_token_file, *tls_cert,
        *cors_origins, *docs_dir, *otlp_endpoint, *trace_ratio,
        *tls_key, *tls_priorities, *state_dir, *state_store,
        *state_store_prefix;
    unsigned workers, http_threads, grpc_threads, queue_depth, timeout_ms,
        idle_timeout_s,
        request_timeout_s, drain_timeout_s, drain_idle_ms, max_connections,
        max_client_connections, max_batch, max_queue_delay_us, inline_max,
        json_inline_max, fault_delay_ms, fault_device, fault_every,
        fault_after_ms, fault_build_ms, device_max_failures, slow_request_ms,
        access_log_max_per_s, grpc_max_streams, shm_max_regions,
        otlp_max_queue, max_sequences, sequence_idle_ms, sequence_linger_ms,
        sequence_reorder_ms, fault_state_after, state_store_timeout_ms,
        state_store_wait;
    size_t max_body_bytes, max_buffered_bytes, shm_max_bytes,
        sequence_max_bytes;
    bool warmup, auth_health, auth_metrics, fault_late, fault_build,
        allow_shared_memory, model_sequence_batching;
    tallyd_access_mode access_log;
    tallyd_fsync state_fsync;
    tallyd_placement placement;
    tallyd_fault_state fault_state;
    /* one-shot actions */
    bool help, version, list_devices, warm_cache;
} tallyd_config;

/* Fills c from the defaults, the environment and argv. Returns false with
 * a message for a bad flag or value. Free with tallyd_config_free(). */
bool tallyd_config_load(tallyd_config *c, int argc, char **argv, char *msg,
                        size_t msglen);
void tallyd_config_free(tallyd_config *c);

/* Threads for each worker's host backend: the cores this process may
 * run on (eng_host_cores(): its CPU affinity's) shared out among
 * --workers, at least one. tallyd's engines on `--device host` and the
 * host streams the scheduler places jobs on (placement by cost) both. */
unsigned tallyd_config_host_threads(const tallyd_config *c);

/* Writes the --help text. */
void tallyd_config_usage(FILE *f, const char *prog);

/* Splits "host:port" / "[v6]:port"; false when it is not one. */
bool tallyd_config_split_listen(const char *listen, char *host, size_t hostlen,
                                unsigned *port);

#endif
