/*
 * routes.c - the route table: every method and path tallyd serves.
 *
 * Adding a route is adding a row (and a handler). Rows that do not name
 * who may call them need a token whenever the server requires tokens. KServe's
 * model paths carry the model name and version as parameters, so that a request
 * for another model or version gets a 404 that says what this server has.
 */

#include "api.h"

static const char *const labels[NLABELS] = {
    [NATIVE] = "native",   [INFER] = "infer",     [METADATA] = "metadata",
    [HEALTH] = "health",   [METRICS] = "metrics", [SHM] = "shared_memory",
    [PAGE] = "page",       [OTHER] = "other"};

void api_inference_ended(tallyd_server *s, const req_record *rec,
                         uint64_t total_ns)
{
    stats_request(&s->stats, !rec->failed, total_ns, rec->queue_ns,
                  rec->decode_ns + rec->parse_ns, rec->compute_ns,
                  rec->render_ns + rec->gzip_ns);
}

static const http_route rows[] = {
    /* the page and the API's description are as open as the probes: a
     * browser sends no bearer token when it opens a page */
    {"GET", "/", api_landing, PAGE, HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/openapi.yaml", api_openapi, PAGE, HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/openapi.json", api_openapi_json, PAGE, HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/docs", api_docs_page, PAGE, HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/docs/swagger-ui-bundle.js", api_docs_file, PAGE,
     HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/docs/swagger-ui.css", api_docs_file, PAGE, HTTP_ACCESS_HEALTH,
     NULL},
    {"POST", "/v1/cumsum", api_native, NATIVE, HTTP_ACCESS_TOKEN, api_inference_ended},
    {"GET", "/metrics", api_metrics, METRICS, HTTP_ACCESS_METRICS, NULL},
    /* the trace settings are as closed as /metrics */
    {"GET", "/v2/trace/setting", api_trace_setting, METADATA,
     HTTP_ACCESS_METRICS, NULL},
    {"POST", "/v2/trace/setting", api_trace_setting, METADATA,
     HTTP_ACCESS_METRICS, NULL},
    {"GET", "/v2/models/{model}/trace/setting", api_trace_setting, METADATA,
     HTTP_ACCESS_METRICS, NULL},
    {"POST", "/v2/models/{model}/trace/setting", api_trace_setting, METADATA,
     HTTP_ACCESS_METRICS, NULL},
    {"GET", "/v2", api_server_metadata, METADATA, HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/health/live", api_health_live, HEALTH,
     HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/v2/health/ready", api_health_ready, HEALTH,
     HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/v2/models/{model}", api_model_metadata, METADATA,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/models/{model}/versions/{version}", api_model_metadata,
     METADATA, HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/models/{model}/ready", api_model_ready, HEALTH,
     HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/v2/models/{model}/versions/{version}/ready", api_model_ready,
     HEALTH, HTTP_ACCESS_HEALTH, NULL},
    {"GET", "/v2/models/{model}/config", api_model_config, METADATA,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/models/stats", api_model_stats, METADATA,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/models/{model}/stats", api_model_stats, METADATA,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/models/{model}/versions/{version}/stats", api_model_stats,
     METADATA, HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/systemsharedmemory/status", api_shm_status, SHM,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/systemsharedmemory/region/{region}/status", api_shm_status,
     SHM, HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/systemsharedmemory/region/{region}/register",
     api_shm_register, SHM, HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/systemsharedmemory/unregister", api_shm_unregister, SHM,
     HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/systemsharedmemory/region/{region}/unregister",
     api_shm_unregister, SHM, HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/cudasharedmemory/status", api_cuda_shm_status, SHM,
     HTTP_ACCESS_TOKEN, NULL},
    {"GET", "/v2/cudasharedmemory/region/{region}/status", api_cuda_shm_status, SHM,
     HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/cudasharedmemory/region/{region}/register", api_cuda_shm_register,
     SHM, HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/cudasharedmemory/unregister", api_cuda_shm_unregister, SHM,
     HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/cudasharedmemory/region/{region}/unregister", api_cuda_shm_unregister,
     SHM, HTTP_ACCESS_TOKEN, NULL},
    {"POST", "/v2/models/{model}/infer", api_infer, INFER, HTTP_ACCESS_TOKEN,
     api_inference_ended},
    {"POST", "/v2/models/{model}/versions/{version}/infer", api_infer,
     INFER, HTTP_ACCESS_TOKEN, api_inference_ended},
};

static bool check_param(const char *name, size_t nlen, const char *value,
                        size_t vlen, char *msg, size_t msglen)
{
    if (json_eq(name, nlen, "model") && !json_eq(value, vlen, KSERVE_MODEL))
        return msg_fail(msg, msglen,
                        "unknown model \"%.*s\" (this server serves \"%s\")",
                        vlen > 64 ? 64 : (int)vlen, value, KSERVE_MODEL);
    if (json_eq(name, nlen, "version") && !json_eq(value, vlen, KSERVE_VERSION))
        return msg_fail(
            msg, msglen, "model \"%s\" has no version \"%.*s\" (it has \"%s\")",
            KSERVE_MODEL, vlen > 32 ? 32 : (int)vlen, value, KSERVE_VERSION);
    return true;
}

const http_routes api_routes = {
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
    .check_param = check_param,
    .labels = labels,
    .nlabels = NLABELS,
    .unmatched = OTHER,
    .loop_open = api_loop_open, /* a shared store's connection there */
    .loop_close = api_loop_close,
};
