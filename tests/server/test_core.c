/*
 * test_core.c - server/core/ on its own, without a socket: the settings
 * (config), the metrics text and the one access-log path (metrics,
 * reqlog), the statistics (stats), the bearer tokens (auth), content
 * coding (content_coding) and the loops' mailbox and owners (mailbox,
 * loop_owner). http/'s admission, counters and router are test_http.c's,
 * api/'s route table test_api.c's.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "auth.h"
#include "check.h"
#include "config.h"
#include "content_coding.h"
#include "mailbox.h"
#include "reqlog.h"
#include "server.h"
#include "metrics.h"
#include "stats.h"
#include "textbuf.h"

/* ------------------------------------------------------------------------
 * Settings.
 */
enum { STR, UINT, SIZE, BOOL, ENUM };

/* config.h's kinds: the kind, its least and most (a number's), its words
 * (an ENUM's) */
#define T_STR STR, 0, 0, NULL
#define T_UINT UINT, 0, TALLYD_UINT_MAX, NULL
#define T_RANGE(l, h) UINT, l, h, NULL
#define T_SIZE SIZE, 0, 0, NULL
#define T_BOOL BOOL, 0, 0, NULL
#define T_ENUM(w) ENUM, 0, 0, w

static const struct {
    const char *flag, *env;
    int kind;
    unsigned lo, hi;
    const char *words;
    size_t offset;
} settings[] = {
#define ROW(field, flag, env, kind, def, help)                                 \
    {flag, env, T_##kind, offsetof(tallyd_config, field)},
    TALLYD_SETTINGS(ROW)
#undef ROW
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

/* A valid value for setting i other than its default, and whether the
 * loaded field holds it. */
static const char *other_value(size_t i, int variant)
{
    if (strcmp(settings[i].flag, "listen") == 0
        || strcmp(settings[i].flag, "grpc-listen") == 0)
        return variant ? "[::1]:9001" : "127.0.0.2:9000";
    if (strcmp(settings[i].flag, "access-log") == 0)
        return variant ? "off" : "all";
    if (strcmp(settings[i].flag, "state-fsync") == 0)
        return variant ? "everysec" : "always";
    if (strcmp(settings[i].flag, "fault-state") == 0)
        return variant ? "eio" : "fsync";
    if (strcmp(settings[i].flag, "placement") == 0)
        return variant ? "device" : "cost";
    switch (settings[i].kind) {
    case STR: return variant ? "gpu" : "host";
    case UINT: return variant ? "17" : "3"; /* within every range here */
    case SIZE: return variant ? "2k" : "3MiB";
    default: return variant ? "off" : "yes";
    }
}

/* The position of word w among an ENUM's words that are no alias. */
static unsigned word_at(const char *words, const char *w)
{
    unsigned pos = 0;
    for (const char *p = words;; pos++) {
        const char *end = strchr(p, '|');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (memchr(p, '=', n) != NULL)
            pos--;
        else if (n == strlen(w) && strncmp(p, w, n) == 0)
            return pos;
        if (end == NULL)
            return ~0u;
        p = end + 1;
    }
}

static bool holds(const tallyd_config *c, size_t i, int variant)
{
    const char *field = (const char *)c + settings[i].offset;
    switch (settings[i].kind) {
    case ENUM:
        return *(const unsigned *)field
               == word_at(settings[i].words, other_value(i, variant));
    case STR:
        return strcmp(*(char *const *)field, other_value(i, variant)) == 0;
    case UINT: return *(const unsigned *)field == (variant ? 17u : 3u);
    case SIZE:
        return *(const size_t *)field == (variant ? 2048u : (size_t)3 << 20);
    default: return *(const bool *)field == !variant;
    }
}

static void config_every_setting(void)
{
    char msg[512];
    for (size_t i = 0; i < NSETTINGS; i++) {
        tallyd_config c;
        /* the environment */
        setenv(settings[i].env, other_value(i, 0), 1);
        char *argv0[] = {"tallyd", NULL};
        bool ok = tallyd_config_load(&c, 1, argv0, msg, sizeof msg);
        CHECK(ok && holds(&c, i, 0), "%s=%s: %s", settings[i].env,
              other_value(i, 0), ok ? "not applied" : msg);
        tallyd_config_free(&c);
        /* a flag beats the environment, as --flag=value and --flag value */
        char arg[128];
        snprintf(arg, sizeof arg, "--%s=%s", settings[i].flag,
                 other_value(i, 1));
        char *argv1[] = {"tallyd", arg, NULL};
        ok = tallyd_config_load(&c, 2, argv1, msg, sizeof msg);
        CHECK(ok && holds(&c, i, 1), "%s: %s", arg, ok ? "not applied" : msg);
        tallyd_config_free(&c);
        if (settings[i].kind != BOOL) {
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", settings[i].flag);
            char *argv2[] = {"tallyd", flag, (char *)other_value(i, 1), NULL};
            ok = tallyd_config_load(&c, 3, argv2, msg, sizeof msg);
            CHECK(ok && holds(&c, i, 1), "%s %s: %s", flag, other_value(i, 1),
                  ok ? "not applied" : msg);
            tallyd_config_free(&c);
        } else {
            char flag[64];
            snprintf(flag, sizeof flag, "--no-%s", settings[i].flag);
            char *argv2[] = {"tallyd", flag, NULL};
            ok = tallyd_config_load(&c, 2, argv2, msg, sizeof msg);
            CHECK(ok && holds(&c, i, 1), "%s: %s", flag,
                  ok ? "not applied" : msg);
            tallyd_config_free(&c);
        }
        unsetenv(settings[i].env);
    }
}

/* --access-log's words, the switch's old true and false among them. */
static void config_access_log(void)
{
    static const struct {
        const char *word;
        tallyd_access_mode mode;
    } cases[] = {
        {NULL, TALLYD_ACCESS_ERRORS},   {"errors", TALLYD_ACCESS_ERRORS},
        {"all", TALLYD_ACCESS_ALL},     {"true", TALLYD_ACCESS_ALL},
        {"off", TALLYD_ACCESS_OFF},     {"false", TALLYD_ACCESS_OFF},
    };
    char msg[512], arg[64];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tallyd_config c;
        snprintf(arg, sizeof arg, "--access-log=%s", cases[k].word);
        char *argv[] = {"tallyd", arg, NULL};
        bool ok = tallyd_config_load(&c, cases[k].word ? 2 : 1, argv, msg,
                                     sizeof msg);
        CHECK(ok && c.access_log == cases[k].mode, "%s: mode %d, not %d (%s)",
              cases[k].word ? arg : "the default", ok ? (int)c.access_log : -1,
              (int)cases[k].mode, ok ? "" : msg);
        tallyd_config_free(&c);
    }
    tallyd_config c;
    char *argv[] = {"tallyd", "--access-log=errors\xff", NULL};
    CHECK(!tallyd_config_load(&c, 2, argv, msg, sizeof msg)
              && strstr(msg, "errors, all or off") != NULL,
          "a bad word is refused, and the message says which are good: %s",
          msg);
    tallyd_config_free(&c);
}

static void config_bad_values(void)
{
    static const struct {
        int kind;
        const char *value;
    } bad[] = {
        {UINT, "-1"},    {UINT, "1x"}, {UINT, ""},  {UINT, "999999999999"},
        {SIZE, "1TB"},   {SIZE, "-5"}, {SIZE, "k"}, {SIZE, "99999999999G"},
        {BOOL, "maybe"}, {BOOL, "2"},  {BOOL, ""},  {ENUM, "maybe"},
        {ENUM, "ALWAYS"},
    };
    char msg[512];
    for (size_t i = 0; i < NSETTINGS; i++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            if (bad[b].kind != settings[i].kind)
                continue;
            tallyd_config c;
            /* as a flag, and from the environment */
            char arg[128];
            snprintf(arg, sizeof arg, "--%s=%s", settings[i].flag,
                     bad[b].value);
            char *argv[] = {"tallyd", arg, NULL};
            msg[0] = '\0';
            CHECK(!tallyd_config_load(&c, 2, argv, msg, sizeof msg)
                      && strstr(msg, settings[i].flag) != NULL,
                  "%s accepted, or the message does not name it: %s", arg, msg);
            tallyd_config_free(&c);
            setenv(settings[i].env, bad[b].value, 1);
            char *argv0[] = {"tallyd", NULL};
            msg[0] = '\0';
            CHECK(!tallyd_config_load(&c, 1, argv0, msg, sizeof msg)
                      && strstr(msg, settings[i].env) != NULL,
                  "%s=%s accepted: %s", settings[i].env, bad[b].value, msg);
            tallyd_config_free(&c);
            unsetenv(settings[i].env);
        }
    /* a number out of its range: just below, just above */
    for (size_t i = 0; i < NSETTINGS; i++) {
        if (settings[i].kind != UINT)
            continue;
        for (int side = 0; side < 2; side++) {
            if (side == 0 && settings[i].lo == 0)
                continue;
            char arg[128];
            snprintf(arg, sizeof arg, "--%s=%u", settings[i].flag,
                     side == 0 ? settings[i].lo - 1 : settings[i].hi + 1);
            char *argv[] = {"tallyd", arg, NULL};
            tallyd_config c;
            msg[0] = '\0';
            CHECK(!tallyd_config_load(&c, 2, argv, msg, sizeof msg)
                      && strstr(msg, settings[i].flag) != NULL
                      && (strstr(msg, "at least") != NULL
                          || strstr(msg, " to ") != NULL),
                  "%s accepted, or the message does not say its range: %s",
                  arg, msg);
            tallyd_config_free(&c);
        }
    }
    /* the command line itself, and the cross-checks */
    static const char *const lines[][3] = {
        {"--nope", NULL, "unknown option"},
        {"stray", NULL, "unexpected argument"},
        {"--workers", NULL, "needs a value"},
        {"--no-warmup=1", NULL, "takes no value"},
        {"--workers=0", NULL, "at least 1"},
        {"--queue-depth=0", NULL, "at least 1"},
        {"--listen=nohost", NULL, "HOST:PORT"},
        {"--listen=1.2.3.4:99999", NULL, "HOST:PORT"},
        {"--state-fsync=sometimes", NULL, "always or everysec"},
        {"--placement=gpu", NULL, "cost or device"},
        {"--fault-state=full", NULL, "enospc, eio or fsync"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        tallyd_config c;
        char *argv[] = {"tallyd", (char *)lines[i][0], NULL};
        msg[0] = '\0';
        CHECK(!tallyd_config_load(&c, 2, argv, msg, sizeof msg)
                  && strstr(msg, lines[i][2]) != NULL,
              "%s: \"%s\"", lines[i][0], msg);
        tallyd_config_free(&c);
    }
    tallyd_config c;
    char *argv[] = {"tallyd",         "--help",       "--version",
                    "--list-devices", "--warm-cache", NULL};
    CHECK(tallyd_config_load(&c, 5, argv, msg, sizeof msg) && c.help
              && c.version && c.list_devices && c.warm_cache,
          "one-shot actions: %s", msg);
    tallyd_config_free(&c);
}

/* ------------------------------------------------------------------------
 * Metrics.
 */
static void metrics_text(void)
{
    metrics m;
    static const char *const labels[] = {"native", "infer", "health", "other"};
    metrics_init(&m, labels, 4);
    uint64_t ms = 1000000;
    metrics_request(&m, METRIC_HTTP, 0, 200, STATUS_OK, 3 * ms, 20);
    metrics_request(&m, METRIC_HTTP, 0, 200, STATUS_OK, 700 * ms, 20);
    metrics_request(&m, METRIC_HTTP, 1, 503, STATUS_QUEUE_FULL, ms, 30);
    metrics_request(&m, METRIC_HTTP, 1, 418, STATUS_INVALID, ms, 30);
    size_t len;
    textbuf o;
    textbuf_init(&o, 256);
    atomic_store(&m.access_log_dropped, 4);
    metrics_render(&m, "dev \"x\"\\y", "9.9.9", 7, &o);
    char *t = textbuf_take(&o, &len);
    CHECK(t != NULL && strlen(t) == len, "rendered");
    if (t == NULL)
        return;
    static const char *const want[] = {
        "tally_build_info{version=\"9.9.9\",device=\"dev \\\"x\\\"\\\\y\"} 1\n",
        "tally_requests_total{protocol=\"http\",route=\"native\",code=\"200\"} 2\n",
        "tally_requests_total{protocol=\"http\",route=\"infer\",code=\"503\"} 1\n",
        "tally_requests_total{protocol=\"http\",route=\"infer\",code=\"other\"} 1\n",
        "tally_request_failures_total{protocol=\"http\",route=\"infer\",reason=\"QUEUE_FULL\"} "
        "1\n",
        "tally_request_duration_seconds_count{protocol=\"http\",route=\"native\"} 2\n",
        "tally_inflight_requests 7\n",
        "tally_access_log_dropped_total 4\n",
        "tally_sent_bytes_total 100\n",
        "# TYPE tally_request_duration_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(t, want[i]) != NULL, "missing: %s", want[i]);
    CHECK(strstr(t, "route=\"health\"") == NULL, "unused routes are left out");
    /* histogram buckets are cumulative and end at +Inf with the count */
    const char *p = strstr(t, "tally_request_duration_seconds_bucket{protocol=\"http\",route="
                              "\"native\"");
    unsigned long long prev = 0;
    bool monotone = p != NULL, inf = false;
    while (p != NULL
           && strncmp(p,
                      "tally_request_duration_seconds_bucket{"
                      "protocol=\"http\",route=\"native\"",
                      66)
                  == 0) {
        const char *sp = strchr(p, '}');
        unsigned long long v = strtoull(sp + 2, NULL, 10);
        monotone = monotone && v >= prev;
        prev = v;
        inf = strstr(p, "le=\"+Inf\"") != NULL && strstr(p, "le=\"+Inf\"") < sp;
        p = strchr(p, '\n') + 1;
    }
    CHECK(monotone && inf && prev == 2, "native buckets: last %llu", prev);
    /* every line is a comment or "name{labels} value" */
    for (const char *l = t; *l != '\0'; l = strchr(l, '\n') + 1) {
        const char *nl = strchr(l, '\n');
        CHECK(nl != NULL, "the text ends with a newline");
        if (nl == NULL)
            break;
        if (*l != '#') {
            const char *sp = memchr(l, ' ', (size_t)(nl - l));
            CHECK(sp != NULL && strncmp(l, "tally_", 6) == 0, "line: %.*s",
                  (int)(nl - l), l);
        }
    }
    free(t);
}

/* ------------------------------------------------------------------------
 * Bearer tokens.
 */
static char token_path[64];

static void write_tokens(const char *text)
{
    FILE *f = fopen(token_path, "wb");
    CHECK(f != NULL, "cannot write %s", token_path);
    if (f == NULL)
        return;
    fputs(text, f);
    fclose(f);
}

static void make_token_path(void)
{
    snprintf(token_path, sizeof token_path, "/tmp/tally-tokens-%ld",
             (long)getpid());
}

static void auth_token_file(void)
{
    char msg[512];
    make_token_path();
    write_tokens("# tokens\n\n  tok-1 \t\r\nsecond.token/+==\n#x\n");
    auth_tokens *a = auth_load(token_path, msg, sizeof msg);
    CHECK(a != NULL, "load: %s", msg);
    if (a == NULL)
        return;
    CHECK(auth_count(a) == 2, "%zu tokens", auth_count(a));
    static const struct {
        const char *header;
        auth_result want;
    } cases[] = {
        {"Bearer tok-1", AUTH_OK},
        {"bearer   second.token/+==  ", AUTH_OK},
        {"\tBEARER\ttok-1", AUTH_OK},
        {"Bearer tok-", AUTH_INVALID},
        {"Bearer tok-12", AUTH_INVALID},
        {"Bearer TOK-1", AUTH_INVALID},
        {"Bearer second.token/+=", AUTH_INVALID},
        {"Bearer tok-1 tok-1", AUTH_INVALID},
        {"Bearer  ", AUTH_INVALID},
        {"Bearer", AUTH_MISSING},
        {"Bearertok-1", AUTH_MISSING},
        {"Basic dG9rLTE=", AUTH_MISSING},
        {"", AUTH_MISSING},
        {NULL, AUTH_MISSING},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(auth_check(a, cases[i].header, NULL) == cases[i].want,
              "\"%s\": %d, not %d",
              cases[i].header ? cases[i].header : "(none)",
              (int)auth_check(a, cases[i].header, NULL), (int)cases[i].want);
    char longer[700] = "Bearer ";
    memset(longer + 7, 'a', 600);
    CHECK(auth_check(a, longer, NULL) == AUTH_INVALID, "a long token");

    /* a bad file leaves the tokens as they were; a good one replaces them */
    write_tokens("tok 1\n");
    CHECK(auth_reload(a, token_path, msg, sizeof msg) == 0
              && strstr(msg, "line 1") != NULL,
          "a token with a space: \"%s\"", msg);
    CHECK(auth_check(a, "Bearer tok-1", NULL) == AUTH_OK,
          "the old tokens stay after a bad reload");
    write_tokens("new=\n");
    CHECK(auth_reload(a, token_path, msg, sizeof msg) == 1, "%s", msg);
    CHECK(auth_check(a, "Bearer new=", NULL) == AUTH_OK
              && auth_check(a, "Bearer tok-1", NULL) == AUTH_INVALID,
          "a reload replaces the tokens");
    /* the caller is the token, trimmed, borrowed from the header; a
     * refused check leaves it as it was */
    auth_caller who = AUTH_ANYONE;
    const char *hdr = "Bearer  new=  ";
    CHECK(auth_check(a, hdr, &who) == AUTH_OK && who.n == 4
              && who.p == hdr + 8 && memcmp(who.p, "new=", 4) == 0,
          "the caller: %zu bytes", who.n);
    CHECK(auth_check(a, "Bearer tok-1", &who) == AUTH_INVALID
              && who.p == hdr + 8,
          "a refused token names no caller");
    auth_free(a);
    auth_free(NULL);

    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "holds no token"},      {"# only a comment\n\n", "holds no token"},
        {"ok\n=bad\n", "line 2"},    {"ok\nb=ad\n", "line 2"},
        {"caf\xc3\xa9\n", "line 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_tokens(bad[i].text);
        a = auth_load(token_path, msg, sizeof msg);
        CHECK(a == NULL && strstr(msg, bad[i].says) != NULL, "file %zu: \"%s\"",
              i, msg);
        auth_free(a);
    }
    unlink(token_path);
    a = auth_load(token_path, msg, sizeof msg);
    CHECK(a == NULL && strstr(msg, "cannot open") != NULL, "missing: %s", msg);
}

/* Checks running while the tokens are reloaded see one set or the other
 * (ThreadSanitizer watches this one). */
static auth_tokens *racing;
static void check_loop(void *arg)
{
    unsigned *bad = arg;
    for (int i = 0; i < 20000; i++)
        *bad += auth_check(racing, "Bearer both", NULL) != AUTH_OK;
}

static void auth_reload_races(void)
{
    char msg[512];
    make_token_path();
    write_tokens("both\none\n");
    racing = auth_load(token_path, msg, sizeof msg);
    CHECK(racing != NULL, "%s", msg);
    if (racing == NULL)
        return;
    uv_thread_t t[2];
    unsigned bad[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        uv_thread_create(&t[i], check_loop, &bad[i]);
    for (int i = 0; i < 200; i++) {
        write_tokens(i % 2 ? "both\none\n" : "two\nboth\n");
        CHECK(auth_reload(racing, token_path, msg, sizeof msg) == 2, "%s",
              msg);
    }
    for (int i = 0; i < 2; i++)
        uv_thread_join(&t[i]);
    CHECK(bad[0] + bad[1] == 0, "%u checks failed during reloads",
          bad[0] + bad[1]);
    auth_free(racing);
    unlink(token_path);
}

/* One access-log cap over both doors: failed requests of REST and gRPC
 * in one second share --access-log-max-per-s, and the rest are counted;
 * successes are not logged unless slow; metrics count every one. */
static void reqlog_one_cap(void)
{
    static tallyd_server s;
    memset(&s, 0, sizeof s);
    static const char *const labels[] = {"infer", "other"};
    metrics_init(&s.metrics, labels, 2);
    s.cfg.access_log = TALLYD_ACCESS_ERRORS;
    s.cfg.access_log_max_per_s = 5;
    s.cfg.slow_request_ms = 0;
    reqlog_init(&s.reqlog, &s.cfg);
    stats_init(&s.stats);
    trace_ctx tc;
    memset(&tc, 0, sizeof tc);
    uint64_t t0 = now_ns();
    unsigned n = 0;
    /* all within one second of the clock, or the cap starts again */
    while (n < 20 && now_ns() / 1000000000u == t0 / 1000000000u) {
        bool grpc = n % 2;
        req_record rec = {
            .door = grpc ? METRIC_GRPC : METRIC_HTTP,
            .label = 0,
            .status = grpc ? 5 : 404,
            .err = STATUS_NOT_FOUND,
            .failed = true,
            .method = grpc ? "ModelInfer" : "POST",
            .path = "/x",
            .trace = &tc,
            .t0 = t0,
            .done = now_ns(),
        };
        req_end(&s, &rec);
        n++;
    }
    if (n < 20)
        return; /* a second ended mid-way: nothing to conclude */
    req_record ok = {.door = METRIC_HTTP, .status = 200, .trace = &tc,
                     .t0 = t0, .done = now_ns()};
    req_end(&s, &ok);
    CHECK(atomic_load(&s.metrics.access_log_dropped) == 15,
          "%llu left out, want 15 of 20 (cap 5)",
          (unsigned long long)atomic_load(&s.metrics.access_log_dropped));
    CHECK(atomic_load(&s.metrics.requests[METRIC_HTTP][0][0]) == 1,
          "the success is counted");
}

/* Triton's statistics while requests end on several threads: every
 * snapshot has as many compute_input, compute_infer and compute_output
 * counts as successes (perf_analyzer stops when they differ), and the
 * rendered JSON says the same. */
static model_stats racing_stats;
static atomic_bool stats_stop;
static void count_loop(void *arg)
{
    (void)arg;
    while (!atomic_load(&stats_stop)) {
        stats_request(&racing_stats, true, 10, 1, 2, 3, 4);
        stats_execution(&racing_stats, 1, 2, 3, 4);
    }
}

static void stats_snapshots_agree(void)
{
    stats_init(&racing_stats);
    atomic_store(&stats_stop, false);
    uv_thread_t t[3];
    for (int i = 0; i < 3; i++)
        uv_thread_create(&t[i], count_loop, NULL);
    unsigned bad = 0;
    stats_view *v = malloc(sizeof *v);
    CHECK(v != NULL, "malloc");
    /* until the counting threads have run (on a loaded machine they may
     * start late: the render below must see counts, and did not once
     * inside a container build beside the integration suite) */
    for (int tries = 0; tries < 10000; tries++) {
        stats_snapshot(&racing_stats, v);
        if (v->success.count > 0)
            break;
        uv_sleep(1);
    }
    for (int i = 0; i < 20000; i++) {
        stats_snapshot(&racing_stats, v);
        uint64_t n = v->success.count;
        bad += v->compute_input.count != n || v->compute_infer.count != n
               || v->compute_output.count != n || v->queue.count != n
               || v->inference_count != n
               || v->batch[1].compute_input.count != v->execution_count
               || v->batch[1].compute_output.count != v->execution_count
               || v->compute_infer.ns != 3 * n;
    }
    size_t len;
    char *json = stats_render(&racing_stats, "cumsum", "1", &len);
    atomic_store(&stats_stop, true);
    for (int i = 0; i < 3; i++)
        uv_thread_join(&t[i]);
    CHECK(bad == 0, "%u of 20000 snapshots mixed counts", bad);
    CHECK(json != NULL && strstr(json, "\"compute_infer\":{\"count\":") != NULL,
          "rendered");
    /* the JSON's three compute counts are one number */
    unsigned long long c[3];
    const char *names[3] = {"\"compute_input\"", "\"compute_infer\"",
                            "\"compute_output\""};
    for (int i = 0; i < 3; i++) {
        const char *p = strstr(json, names[i]);
        CHECK(p != NULL && sscanf(p + strlen(names[i]), ":{\"count\":%llu", &c[i]) == 1,
              "%s in %.200s", names[i], json);
    }
    CHECK(c[0] == c[1] && c[1] == c[2] && c[0] > 0, "%llu %llu %llu", c[0], c[1],
          c[2]);
    free(json);
    free(v);
}

/* ------------------------------------------------------------------------
 * Content coding (core/content_coding.h), both doors'.
 */

static void encodings(void)
{
    CHECK(encoding_parse(NULL) == 0 && encoding_parse("GZIP") == 1
              && encoding_parse("deflate") == 2 && encoding_parse("br") == -1,
          "coding names");
    CHECK(encoding_accepts_gzip("gzip, deflate"), "gzip, deflate");
    CHECK(encoding_accepts_gzip("br;q=1.0, gzip;q=0.5"), "q=0.5");
    CHECK(!encoding_accepts_gzip("gzip;q=0"), "q=0");
    CHECK(!encoding_accepts_gzip("identity"), "identity");
    CHECK(encoding_accepts_gzip("*"), "*");
    CHECK(!encoding_accepts_gzip(NULL), "none");
    /* RFC 9110: an explicit gzip;q=0 wins over "*"; a tab is whitespace */
    CHECK(!encoding_accepts_gzip("gzip;q=0, *"), "gzip;q=0, *");
    CHECK(!encoding_accepts_gzip("*, gzip;q=0"), "*, gzip;q=0");
    CHECK(!encoding_accepts_gzip("*;q=0"), "*;q=0");
    CHECK(encoding_accepts_gzip("identity,\t\t*"), "identity, tab tab *");
    CHECK(encoding_accepts_gzip("deflate,\tgzip"), "deflate, tab gzip");
    CHECK(encoding_accepts_gzip("gzip\t;\tq=0.5"), "tabs around the weight");
    CHECK(!encoding_accepts_gzip("gzipx, xgzip"), "not gzip");
    CHECK(encoding_accepts_gzip("br, *;q=0.1"), "* alone");

    /* compress with the stream, then decode with a cap */
    size_t n = 300000;
    uint8_t *in = malloc(n), *z = malloc(n + 1024);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i % 251 < 200 ? 7 : i);
    gzip_stream *g = gzip_stream_new();
    size_t zlen = 0, off = 0;
    bool done = false;
    while (!done) {
        size_t take = n - off < 7000 ? n - off : 7000, room = 4096;
        done = gzip_stream_run(g, in + off, &take, off + take == n, z + zlen,
                               &room);
        off += take;
        zlen += room;
    }
    gzip_stream_free(g);
    uint8_t *plain;
    size_t plen;
    char err[300];
    CHECK(encoding_decode(1, z, zlen, n, &plain, &plen, err, sizeof err)
                  == STATUS_OK
              && plen == n && memcmp(plain, in, n) == 0,
          "gzip round trip: %s", err);
    free(plain);
    CHECK(encoding_decode(1, z, zlen, n - 1, &plain, &plen, err, sizeof err)
              == STATUS_TOO_LARGE,
          "capped: %s", err);
    CHECK(encoding_decode(1, z, zlen / 2, n, &plain, &plen, err, sizeof err)
              == STATUS_ENCODING,
          "truncated: %s", err);
    CHECK(encoding_decode(2, in, 100, n, &plain, &plen, err, sizeof err)
              == STATUS_ENCODING,
          "not deflate: %s", err);
    /* the whole-buffer encoder (libdeflate): one gzip member, decoded by
     * zlib to the same bytes, and smaller */
    uint8_t *whole;
    size_t wlen;
    CHECK(gzip_whole(in, n, &whole, &wlen), "gzip_whole");
    CHECK(wlen < n / 2, "gzip_whole: %zu bytes from %zu", wlen, n);
    CHECK(encoding_decode(1, whole, wlen, n, &plain, &plen, err, sizeof err)
                  == STATUS_OK
              && plen == n && memcmp(plain, in, n) == 0,
          "gzip_whole round trip: %s", err);
    free(plain);
    free(whole);
    CHECK(gzip_whole(in, 0, &whole, &wlen)
              && encoding_decode(1, whole, wlen, n, &plain, &plen, err,
                                 sizeof err)
                     == STATUS_OK
              && plen == 0,
          "gzip_whole of nothing: %s", err);
    free(plain);
    free(whole);
    free(in);
    free(z);
}

/* ------------------------------------------------------------------------
 * The loops' mailbox (core/mailbox.h) and who owns what (loop_owner.h).
 */

static int mail_calls, mail_items, other_items;
static mailbox_item *other_last;

static void on_test_mail(mailbox_rx *rx, mailbox_item *items)
{
    (void)rx;
    mail_calls++;
    for (; items != NULL; items = items->next)
        mail_items++;
}

/* The other receiver: its items come in the order they were posted. */
static void on_other_mail(mailbox_rx *rx, mailbox_item *items)
{
    (void)rx;
    for (; items != NULL; items = items->next) {
        CHECK(other_last == NULL || items == other_last + 1,
              "the other's items in order");
        other_last = items;
        other_items++;
    }
}

typedef struct {
    mailbox_rx *rx;
    mailbox_item *items;
    int n;
    bool drain; /* drain instead of posting: the owner's work */
} poster;

static void post_from(void *arg)
{
    poster *p = arg;
    if (p->drain) {
        mailbox_drain(p->rx);
        return;
    }
    for (int i = 0; i < p->n; i++)
        CHECK(mailbox_post(p->rx, &p->items[i]), "posted %d", i);
}

/* Posts from another thread wake the loop; the loop's own thread's post
 * runs before the loop next waits; every item comes once, to its own
 * receiver, in order of posting; a full receiver, one that left and a
 * closed mailbox refuse, and so does a mailbox with no room for another
 * receiver; and, in builds with the owner asserts (DEBUG, the
 * sanitizers), another thread that drains a receiver aborts the
 * process. */
static void mailbox_and_owner(void)
{
    uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0, "a loop");
    mailbox m;
    mailbox_init(&m, &loop);
    mailbox_own(&m);
    CHECK(mailbox_on_loop(&m), "the owner");
    mailbox_rx rx, other, more[MAILBOX_RX_MAX];
    CHECK(mailbox_listen(&m, &rx, 64, on_test_mail, NULL)
              && mailbox_listen(&m, &other, 0, on_other_mail, NULL),
          "two receivers");
    int joined = 2;
    while (joined < MAILBOX_RX_MAX + 1
           && mailbox_listen(&m, &more[joined - 2], 0, on_test_mail, NULL))
        joined++;
    CHECK(joined == MAILBOX_RX_MAX, "%d receivers at most: %d joined",
          MAILBOX_RX_MAX, joined);
    for (int i = 2; i < joined; i++)
        CHECK(mailbox_leave(&more[i - 2]) == NULL, "an idle one leaves");
    mailbox_item items[65], others[100];
    poster p = {&rx, items, 64, false}, o = {&other, others, 100, false};
    uv_thread_t t, u;
    uv_thread_create(&t, post_from, &p);
    uv_thread_create(&u, post_from, &o);
    uv_thread_join(&t);
    uv_thread_join(&u);
    CHECK(!mailbox_post(&rx, &items[64]), "a 65th item refused");
    CHECK(mailbox_post(&rx, NULL), "a wake alone, past the limit");
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(mail_items == 64 && mail_calls >= 1 && other_items == 100,
          "%d items in %d calls; the other's %d", mail_items, mail_calls,
          other_items);
    int calls = mail_calls;
    CHECK(mailbox_post(&rx, &items[0]), "from the loop's own thread");
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(mail_items == 65 && mail_calls == calls + 1, "its own: %d, %d",
          mail_items, mail_calls);
    CHECK(mailbox_post(&other, &others[0]), "one more for the other");
    CHECK(mailbox_leave(&other) == &others[0] && !mailbox_post(&other, NULL),
          "the other leaves with what waited for it, and takes no more");

    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        poster q = {&rx, NULL, 0, true};
        uv_thread_t v;
        uv_thread_create(&v, post_from, &q);
        uv_thread_join(&v);
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "the child");
    if (OWNER_ASSERTS)
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
              "another thread's drain aborts: status %d", st);
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "without the asserts, it runs: status %d", st);

    CHECK(mailbox_leave(&rx) == NULL, "nothing left");
    mailbox_close(&m);
    CHECK(!mailbox_post(&rx, &items[1]) && !mailbox_post(&rx, NULL),
          "closed: refused");
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0, "every handle closed");
}

static const check_case cases[] = {
    {"config_every_setting", config_every_setting},
    {"config_bad_values", config_bad_values},
    {"config_access_log", config_access_log},
    {"metrics_text", metrics_text},
    {"auth_tokens", auth_token_file},
    {"auth_reload_races", auth_reload_races},
    {"reqlog_one_cap", reqlog_one_cap},
    {"stats_snapshots_agree", stats_snapshots_agree},
    {"mailbox_and_owner", mailbox_and_owner},
    {"encodings", encodings},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
