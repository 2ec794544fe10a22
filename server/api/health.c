/*
 * health.c - gRPC's health checking protocol, grpc.health.v1.Health, on
 * the gRPC door: what Kubernetes' gRPC probes (1.24 and later), Envoy,
 * Istio and grpc-health-probe ask. Check and Watch, for the server ("")
 * and for the service tally serves ("inference.GRPCInferenceService", or
 * the model's name, "cumsum").
 *
 * The status is REST's readiness (/v2/health/ready): SERVING while the
 * server takes work, NOT_SERVING once it drains. (A server whose devices
 * have all failed still serves, on the host backend, as REST says.) A
 * Check of any other service fails NOT_FOUND, as the protocol asks; a
 * Watch of one answers SERVICE_UNKNOWN and goes on watching.
 *
 * Watch answers at once, then again whenever the status changes: each
 * later answer is a call that follows the first on its stream
 * (grpc_call_follow), suspended until api_health_tick() (the loop's tick,
 * and the start of a drain) finds the status changed, or the client gone,
 * and resumes it. A drain answers every Watch NOT_SERVING and lets its
 * stream end, so that the drain is not held up.
 *
 * Both methods are open without a token, as REST's health routes are,
 * unless --auth-health (the transport checks it).
 *
 * Threading: a Watch's calls run on its connection's gRPC loop (one of
 * several with --grpc-threads); api_health_tick() on the main loop. The
 * list of watches is under a->watch_mu, which is held only to list,
 * unlist and walk it (and to resume a call, which takes its loop's lock
 * after it: watch_mu first, always).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "health_pb.h"
#include "kserve_model.h"
#include "list.h"

/* A Watch's next answer: the suspended call that will carry it. Owned by
 * that call (its work), in the list until it is resumed. */
struct api_watch {
    list_node link; /* in a->watches while listed */
    api_state *a;
    grpc_call *c;
    bool resuming;
    int last; /* the status last sent */
    char svc[HEALTH_SERVICE_MAX + 1];
};

/* The status of service svc now. */
static int status_of(tallyd_server *s, const char *svc)
{
    if (svc[0] != '\0' && strcmp(svc, API_INFERENCE_SERVICE) != 0
        && strcmp(svc, KSERVE_MODEL) != 0)
        return HEALTH_SERVICE_UNKNOWN;
    return atomic_load(&s->draining) ? HEALTH_NOT_SERVING : HEALTH_SERVING;
}

static void answer(grpc_call *c, int status)
{
    uint8_t *b = malloc(2);
    if (b == NULL) {
        grpc_call_fail(c, STATUS_NOMEM, "out of memory");
        return;
    }
    size_t n = health_pb_response(status, b);
    grpc_call_reply(c, b, n, NULL, 0); /* takes b */
}

/* The request's service, or false (answered INVALID_ARGUMENT). */
static bool read_service(grpc_call *c, char *svc)
{
    size_t len;
    uint8_t *msg = grpc_call_message(c, &len);
    char err[200];
    if (!health_pb_request(msg, len, svc, HEALTH_SERVICE_MAX + 1, err,
                           sizeof err)) {
        grpc_call_fail(c, STATUS_INVALID, "%s", err);
        return false;
    }
    return true;
}

static void check(grpc_call *c)
{
    char svc[HEALTH_SERVICE_MAX + 1];
    if (!read_service(c, svc))
        return;
    int st = status_of(grpc_call_server(c), svc);
    if (st == HEALTH_SERVICE_UNKNOWN) {
        grpc_call_fail(c, STATUS_NOT_FOUND,
                       "unknown service \"%s\": this server answers for \"\", "
                       "\"%s\" and \"%s\"",
                       svc, API_INFERENCE_SERVICE, KSERVE_MODEL);
        return;
    }
    answer(c, st);
}

static void unlist(api_watch *w)
{
    uv_mutex_lock(&w->a->watch_mu);
    if (list_linked(&w->link))
        list_remove(&w->link);
    uv_mutex_unlock(&w->a->watch_mu);
}

static void watch_free(void *p)
{
    api_watch *w = p;
    unlist(w);
    free(w);
}

static void watch_resumed(grpc_call *c);

/* The next answer of the Watch that c answered with `last`: a call that
 * follows c, listed. Nothing when the stream has gone or memory ran out
 * (the stream then ends after c's answer). */
static void follow(grpc_call *c, const char *svc, int last)
{
    api_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return;
    grpc_call *f = grpc_call_follow(c, watch_resumed);
    if (f == NULL) {
        free(w);
        return;
    }
    api_state *a = api_of(c);
    w->a = a;
    w->c = f;
    w->last = last;
    snprintf(w->svc, sizeof w->svc, "%s", svc);
    grpc_call_set_work(f, w, watch_free);
    uv_mutex_lock(&a->watch_mu);
    list_push_front(&a->watches, &w->link);
    uv_mutex_unlock(&a->watch_mu);
}

static void watch(grpc_call *c)
{
    char svc[HEALTH_SERVICE_MAX + 1];
    if (!read_service(c, svc))
        return;
    tallyd_server *s = grpc_call_server(c);
    int st = status_of(s, svc);
    answer(c, st);
    if (!atomic_load(&s->draining))
        follow(c, svc, st);
}

/* A watch's next answer is due: the status changed, the server drains,
 * or the client has gone (then it is answered to nobody, and freed). */
static void watch_resumed(grpc_call *c)
{
    api_watch *w = grpc_call_work(c);
    unlist(w);
    if (grpc_call_gone(c)) {
        grpc_call_fail(c, STATUS_CANCELLED, "the client has gone");
        return;
    }
    tallyd_server *s = grpc_call_server(c);
    int st = status_of(s, w->svc);
    answer(c, st);
    if (!atomic_load(&s->draining))
        follow(c, w->svc, st);
}

void api_health_tick(api_state *a, tallyd_server *s)
{
    bool draining = atomic_load(&s->draining);
    uv_mutex_lock(&a->watch_mu);
    for (list_node *n = list_first(&a->watches); n != NULL;
         n = list_next(&a->watches, n)) {
        api_watch *w = container_of(n, api_watch, link);
        if (w->resuming)
            continue;
        if (draining || grpc_call_gone(w->c)
            || status_of(s, w->svc) != w->last) {
            /* resumed once: its loop unlists it (watch_resumed) before
             * the call can be freed, so w lives while listed */
            w->resuming = true;
            grpc_call_resume(w->c);
        }
    }
    uv_mutex_unlock(&a->watch_mu);
}

static const grpc_method methods[] = {
    {"Check", check, false, true, HEALTH, NULL, NULL},
    {"Watch", watch, true, true, HEALTH, NULL, NULL},
};

const grpc_service api_health_service = {
    .service = "grpc.health.v1.Health",
    .methods = methods,
    .n = sizeof methods / sizeof methods[0],
    .other_label = OTHER,
};
