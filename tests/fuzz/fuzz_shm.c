/*
 * fuzz_shm.c - Triton's system shared-memory extension: register bodies,
 * the registry behind them, status answers, and the shared-memory
 * parameters of KServe and gRPC inference requests resolved against the
 * registry.
 *
 * A real registry runs in the harness (at most 4 regions, 1 MiB), with one
 * real POSIX shared-memory object of 64 KiB that bodies reach through the
 * key "/F". Input: the first byte picks the operation, the second a
 * region name ("r0".."r3"); the rest is the body:
 *   0: a register body (shm_json_register), registered as that name;
 *   1: unregister that name, or every region (second byte >= 128);
 *   2: a KServe inference request (JSON), its regions acquired;
 *   3: a gRPC ModelInferRequest, its regions acquired;
 *   4: a status of every region, or of that name.
 * The registry's state carries over from input to input, as a server's
 * does.
 *
 * Properties: refusals have messages the server can send; the registry
 * never holds more regions or bytes than allowed; a status answer is JSON
 * that lists each registered region; an acquired tensor lies inside its
 * region (its first and last bytes are read and written, which ASan or a
 * fault would catch otherwise), input and output that overlap are the same
 * bytes; releases of regions left alone succeed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buffer.h"
#include "fuzzd.h"
#include "kserve_pb.h"
#include "kserve_json.h"
#include "shm.h"
#include "shm_json.h"

#define OBJECT_BYTES 65536
#define MAX_REGIONS 4
#define MAX_BYTES (1u << 20)

static shm_registry *reg;
static char object_key[64];
static const shm_owner owner = {"", 0};

static void remove_object(void)
{
    shm_unlink(object_key);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(object_key, sizeof object_key, "/tally-fuzz-shm-%ld",
             (long)getpid());
    int fd = shm_open(object_key, O_RDWR | O_CREAT | O_TRUNC, 0600);
    FUZZ_CHECK(fd >= 0 && ftruncate(fd, OBJECT_BYTES) == 0, "cannot make %s",
               object_key);
    close(fd);
    atexit(remove_object);
    reg = shm_registry_new(MAX_REGIONS, MAX_BYTES);
    FUZZ_CHECK(reg != NULL, "out of memory");
    return 0;
}

/* The registry's limits hold. */
static void check_counts(void)
{
    unsigned n;
    uint64_t bytes;
    shm_counts(reg, &n, &bytes);
    FUZZ_CHECK(n <= MAX_REGIONS && bytes <= MAX_BYTES,
               "%u regions of %llu bytes registered", n,
               (unsigned long long)bytes);
}

static void do_register(const char *name, const uint8_t *body, size_t len)
{
    char key[SHM_KEY_MAX + 1], msg[512];
    size_t klen;
    uint64_t offset, size;
    if (!shm_json_register(body, len, key, &klen, &offset, &size, msg,
                           sizeof msg)) {
        fuzz_refusal("shm_json_register's message", msg, sizeof msg);
        return;
    }
    if (klen == 2 && memcmp(key, "/F", 2) == 0) { /* the real object */
        klen = strlen(object_key);
        memcpy(key, object_key, klen + 1);
    }
    status_code st = shm_register(reg, owner, name, strlen(name), key, klen,
                                  offset, size, msg, sizeof msg);
    if (st != STATUS_OK)
        fuzz_refusal("shm_register's message", msg, sizeof msg);
    check_counts();
}

static void do_status(const char *name)
{
    shm_info *v;
    size_t n;
    char msg[512];
    status_code st = shm_status(reg, owner, name, name ? strlen(name) : 0, &v,
                                &n, msg, sizeof msg);
    if (st != STATUS_OK) {
        fuzz_refusal("shm_status's message", msg, sizeof msg);
        return;
    }
    FUZZ_CHECK(n <= MAX_REGIONS, "%zu regions", n);
    char *text = shm_json_status(v, n);
    FUZZ_CHECK(text != NULL, "out of memory");
    fuzz_json("the status answer", text, strlen(text), NULL);
    for (size_t i = 0; i < n; i++) {
        char want[SHM_NAME_MAX + 16];
        snprintf(want, sizeof want, "\"name\":\"%s\"", v[i].name);
        FUZZ_CHECK(strstr(text, want) != NULL, "%s missing from %s", v[i].name,
                   text);
    }
    free(text);
    free(v);
}

/* x and y of a parsed request, placed as the API layer places them. */
static void resolve(const shm_ref *xs, const shm_ref *ys, size_t bytes)
{
    shm_use x = {0}, y = {0};
    char msg[512];
    if (xs->set
        && shm_acquire(reg, owner, xs, bytes, false, "input \"x\"", &x, msg,
                       sizeof msg)
               != STATUS_OK) {
        fuzz_refusal("shm_acquire's message", msg, sizeof msg);
        return;
    }
    if (ys->set
        && shm_acquire(reg, owner, ys, bytes, true, "output \"y\"", &y, msg,
                       sizeof msg)
               != STATUS_OK) {
        fuzz_refusal("shm_acquire's message", msg, sizeof msg);
        shm_drop(&x);
        return;
    }
    for (shm_use *u = &x; u != NULL; u = u == &x ? &y : NULL) {
        if (u->region == NULL || u->bytes == 0)
            continue;
        volatile uint8_t *p = u->p;
        p[0] = p[0];
        p[u->bytes - 1] = p[u->bytes - 1];
    }
    bool same;
    if (shm_overlap(&x, &y, &same))
        FUZZ_CHECK(x.p != y.p || same, "the same bytes not seen as such");
    FUZZ_CHECK(shm_release(&x, msg, sizeof msg) == STATUS_OK, "%s", msg);
    FUZZ_CHECK(shm_release(&y, msg, sizeof msg) == STATUS_OK, "%s", msg);
}

static void do_kserve(const uint8_t *data, size_t len)
{
    uint8_t *body = eng_buffer_alloc(len ? len : 1);
    FUZZ_CHECK(body != NULL, "out of memory");
    memcpy(body, data, len);
    kserve_request r;
    char msg[512];
    if (kserve_parse(body, len, SIZE_MAX, MAX_BYTES, &r, msg, sizeof msg)
        != ENG_E_OK) {
        fuzz_refusal("kserve_parse's message", msg, sizeof msg);
    } else {
        resolve(&r.x_shm, &r.y_shm, r.bytes);
        kserve_request_free(&r);
    }
    eng_buffer_free(body);
}

static void do_grpc(const uint8_t *data, size_t len)
{
    uint8_t *msgbuf = eng_buffer_alloc(len ? len : 1);
    FUZZ_CHECK(msgbuf != NULL, "out of memory");
    memcpy(msgbuf, data, len);
    kserve_request q;
    bool not_found;
    char msg[512];
    if (kserve_pb_parse(msgbuf, len, MAX_BYTES, &q, &not_found, msg, sizeof msg)
        != ENG_E_OK) {
        fuzz_refusal("kserve_pb_parse's message", msg, sizeof msg);
    } else {
        size_t n;
        uint8_t *h = kserve_pb_head(&q, &n);
        FUZZ_CHECK(h != NULL, "out of memory");
        free(h);
        resolve(&q.x_shm, &q.y_shm, q.bytes);
        kserve_request_free(&q);
    }
    eng_buffer_free(msgbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char name[4] = {'r', (char)('0' + data[1] % 4), 0, 0};
    bool all = data[1] >= 128;
    const uint8_t *body = data + 2;
    size_t len = size - 2;
    char msg[512];
    switch (data[0] % 5) {
    case 0: do_register(name, body, len); break;
    case 1:
        if (shm_unregister(reg, owner, all ? NULL : name, strlen(name), msg,
                           sizeof msg)
            != STATUS_OK)
            fuzz_refusal("shm_unregister's message", msg, sizeof msg);
        check_counts();
        break;
    case 2: do_kserve(body, len); break;
    case 3: do_grpc(body, len); break;
    default: do_status(all ? NULL : name); break;
    }
    return 0;
}
