/*
 * api.h - the routes: which handler serves a method and path.
 *
 *   POST /v1/cumsum                           native: JSON, .npy or raw
 *   GET  /v2                                  KServe server metadata
 *   GET  /v2/health/live, /v2/health/ready    KServe health
 *   GET  /v2/models/cumsum[/versions/1]       model metadata
 *   GET  /v2/models/cumsum[/versions/1]/ready model readiness
 *   GET  /v2/models/cumsum/config             Triton-style model config
 *   POST /v2/models/cumsum[/versions/1]/infer inference
 *   GET  /metrics                             Prometheus metrics
 *
 * HEAD is served wherever GET is. proto/openapi.yaml documents the same
 * routes; tests/integration checks that the two agree.
 */
#ifndef TALLY_API_H
#define TALLY_API_H

#include "http.h"

/* The handler for method and path, and the metrics route it counts
 * under. NULL when there is none: *status is then 404 or 405 (with the
 * methods allowed in `allow`) and msg says why. */
handler_fn api_route(tally_server *s, const char *method, const char *path,
                     route_id *metric, int *status, char *msg, size_t msglen,
                     char *allow, size_t allowlen);

#endif
