/*
 * shm.c - Triton's system shared-memory extension over REST, and the
 * placing of a request's tensors in regions for both front doors
 * (api.h's api_shm_*).
 *
 *   GET  /v2/systemsharedmemory[/region/{name}]/status
 *   POST /v2/systemsharedmemory/region/{name}/register   {key, offset,
 *                                                         byte_size}
 *   POST /v2/systemsharedmemory[/region/{name}]/unregister
 *   and the same under /v2/cudasharedmemory, which tally refuses (it has
 *   no CUDA memory) except for unregistering everything, which succeeds:
 *   perf_analyzer calls it when it ends.
 *
 * Off unless tallyd runs with --allow-shared-memory: then registering
 * answers 403, a status lists nothing and unregistering everything
 * succeeds, as for a server with no region.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "auth.h"
#include "buffer.h"
#include "reply.h"
#include "shm_json.h"

const char api_shm_off[] =
    "system shared memory is turned off on this server (start tallyd with "
    "--allow-shared-memory to take tensors in shared-memory regions)";

status_code api_shm_check(const shm_registry *reg, const char *name,
                          size_t n, char *msg, size_t msglen)
{
    if (name != NULL && !shm_name_ok(name, n, msg, msglen))
        return STATUS_INVALID;
    if (reg == NULL && name != NULL)
        return msg_fail_as(
            STATUS_NOT_FOUND, msg, msglen,
            "no shared-memory region named \"%.*s\" is registered (%s)", (int)n,
            name, api_shm_off);
    return STATUS_OK;
}

/* An output of the server's own, of the tensor's bytes: NULL, with msg
 * and *st, past max_bytes or when memory runs out. */
static void *own_output(size_t bytes, size_t max_bytes, const char *why,
                        status_code *st, char *msg, size_t msglen)
{
    if (bytes > max_bytes) {
        snprintf(msg, msglen,
                 "%s would take %zu bytes, more than the %zu this server "
                 "keeps for an output of its own (--max-body-bytes)",
                 why, bytes, max_bytes);
        *st = STATUS_TOO_LARGE;
        return NULL;
    }
    void *y = eng_buffer_alloc(bytes);
    if (y == NULL) {
        snprintf(msg, msglen, "out of memory for a %zu-byte output", bytes);
        *st = STATUS_NOMEM;
    }
    return y;
}

status_code api_shm_place(kserve_request *q, shm_registry *reg,
                          shm_owner owner, size_t max_bytes, const void **in,
                          void **out, api_shm_hold *h, char *msg,
                          size_t msglen)
{
    memset(h, 0, sizeof *h);
    *in = q->data;
    *out = q->data;
    if (!q->x_shm.set && !q->y_shm.set)
        return STATUS_OK;
    if (reg == NULL)
        return msg_fail_as(STATUS_FORBIDDEN, msg, msglen, "%s", api_shm_off);
    status_code st;
    if (q->x_shm.set) {
        st = shm_acquire(reg, owner, &q->x_shm, q->bytes, false,
                         "input \"x\"", &h->x, msg, msglen);
        if (st != STATUS_OK)
            return st;
        *in = h->x.p;
    }
    if (q->y_shm.set) {
        st = shm_acquire(reg, owner, &q->y_shm, q->bytes, true,
                         "output \"y\"", &h->y, msg, msglen);
        if (st != STATUS_OK) {
            shm_drop(&h->x);
            return st;
        }
        bool same;
        if (shm_overlap(&h->x, &h->y, &same) && !same) {
            snprintf(msg, msglen,
                     "input \"x\" and output \"y\" overlap in shared memory "
                     "without being the same bytes: place y exactly on x "
                     "(in place) or apart from it");
            api_shm_free(h);
            return STATUS_INVALID;
        }
        *out = h->y.p;
        if (q->seq.has_id && q->x_shm.set && same) {
            h->scratch = own_output(q->bytes, max_bytes,
                                    "a chunk of a sequence in place in shared "
                                    "memory is scanned apart from its input "
                                    "until it is answered: its scan",
                                    &st, msg, msglen);
            if (h->scratch == NULL) {
                api_shm_free(h);
                return st;
            }
            h->bytes = q->bytes;
            *out = h->scratch;
        }
    } else {
        /* x lies in a region and y does not: y needs memory of its own,
         * since x's region is the client's input */
        void *y = own_output(q->bytes, max_bytes,
                             "output \"y\" (place it in shared memory too)",
                             &st, msg, msglen);
        if (y == NULL) {
            api_shm_free(h);
            return st;
        }
        /* answered and freed as the request's own tensor (x has none) */
        q->data = y;
        q->data_owned = true;
        *out = y;
    }
    return STATUS_OK;
}

status_code api_shm_done(api_shm_hold *h, char *msg, size_t msglen)
{
    if (h->scratch != NULL) { /* the chunk is answered: its output lands */
        memcpy(h->y.p, h->scratch, h->bytes);
        eng_buffer_free(h->scratch);
        h->scratch = NULL;
    }
    status_code st = shm_release(&h->x, msg, msglen);
    if (st == STATUS_OK)
        return shm_release(&h->y, msg, msglen);
    shm_drop(&h->y); /* the request fails for x already */
    return st;
}

void api_shm_free(api_shm_hold *h)
{
    shm_drop(&h->x);
    shm_drop(&h->y);
    eng_buffer_free(h->scratch);
    h->scratch = NULL;
}

/* ------------------------------------------------------------ REST */

static shm_registry *registry(request *r)
{
    return r->s->app->shm;
}

static shm_owner owner(request *r)
{
    return r->caller;
}

/* The {name} of /v2/.../region/{name}/...: a span of r->path (already
 * percent-decoded); false when the path has no region. */
static bool region_of(request *r, const char **name, size_t *n)
{
    const char *p = strstr(r->path, "/region/");
    if (p == NULL)
        return false;
    p += 8;
    const char *e = strchr(p, '/');
    *name = p;
    *n = e ? (size_t)(e - p) : strlen(p);
    return true;
}

static void reply_text(request *r, char *text)
{
    if (text == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    http_reply_buffer(r, 200, "application/json", text, strlen(text));
}

static void reply_empty(request *r)
{
    reply_text(r, strdup("{}"));
}

void api_shm_status(request *r)
{
    const char *name = NULL;
    size_t n = 0;
    char msg[512];
    region_of(r, &name, &n);
    shm_info *v = NULL;
    size_t count = 0;
    shm_registry *reg = registry(r);
    status_code st = api_shm_check(reg, name, n, msg, sizeof msg);
    if (st == STATUS_OK && reg != NULL)
        st = shm_status(reg, owner(r), name, n, &v, &count, msg, sizeof msg);
    if (st != STATUS_OK) {
        http_error(r, st, "%s", msg);
        return;
    }
    char *text = shm_json_status(v, count);
    free(v);
    reply_text(r, text);
}

void api_shm_register(request *r)
{
    const char *name;
    size_t n;
    char msg[512];
    shm_registry *reg = registry(r);
    if (reg == NULL) {
        http_error(r, STATUS_FORBIDDEN, "%s", api_shm_off);
        return;
    }
    if (!region_of(r, &name, &n) || !shm_name_ok(name, n, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s",
                   region_of(r, &name, &n) ? msg : "no region name");
        return;
    }
    char key[SHM_KEY_MAX + 1];
    size_t klen;
    uint64_t offset, byte_size;
    if (!shm_json_register(http_body(r), r->body_len, key, &klen, &offset,
                           &byte_size, msg, sizeof msg)) {
        http_error(r,
                   r->body_len > SHM_JSON_BODY_MAX ? STATUS_TOO_LARGE
                                                   : STATUS_INVALID,
                   "%s", msg);
        return;
    }
    status_code st = shm_register(reg, owner(r), name, n, key, klen, offset,
                                  byte_size, msg, sizeof msg);
    if (st == STATUS_OK)
        reply_empty(r);
    else
        http_error(r, st, "%s", msg);
}

void api_shm_unregister(request *r)
{
    const char *name = NULL;
    size_t n = 0;
    char msg[512];
    region_of(r, &name, &n);
    shm_registry *reg = registry(r);
    status_code st = api_shm_check(reg, name, n, msg, sizeof msg);
    if (st == STATUS_OK && reg != NULL)
        st = shm_unregister(reg, owner(r), name, n, msg, sizeof msg);
    if (st == STATUS_OK)
        reply_empty(r);
    else
        http_error(r, st, "%s", msg);
}

/* CUDA shared memory: none here. Listing every region lists none and
 * unregistering every one succeeds (perf_analyzer does both); a named
 * region is not found, and registering one is refused. */
static void no_cuda(request *r, status_code st)
{
    http_error(r, st,
               "tally has no CUDA shared memory: it computes on OpenCL "
               "devices; use system shared memory "
               "(/v2/systemsharedmemory) instead");
}

void api_cuda_shm_status(request *r)
{
    const char *name;
    size_t n;
    if (region_of(r, &name, &n))
        no_cuda(r, STATUS_NOT_FOUND);
    else
        reply_text(r, strdup("[]"));
}

void api_cuda_shm_register(request *r)
{
    no_cuda(r, STATUS_FORBIDDEN);
}

void api_cuda_shm_unregister(request *r)
{
    const char *name;
    size_t n;
    if (region_of(r, &name, &n))
        no_cuda(r, STATUS_NOT_FOUND);
    else
        reply_empty(r);
}
