/*
 * shm.c - tensors in system shared memory (tally.h): registering regions,
 * the cumulative sum of a tensor in one, and regions the library makes.
 *
 * Every call is a KServe request through tally_http(): region names are
 * percent-escaped into paths and JSON-escaped into bodies.
 */
#define _DEFAULT_SOURCE /* shm_open's flags, getpid */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

struct tally_shm {
    char key[64];
    char name[64];
    void *mem;
    size_t bytes;
};

/* Appends s to buf (of len, at *at) as JSON string contents; false when
 * it does not fit. */
static bool put_json(char *buf, size_t len, size_t *at, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char e[8];
        int n;
        if (ch == '"' || ch == '\\')
            n = snprintf(e, sizeof e, "\\%c", ch);
        else if (ch < 0x20)
            n = snprintf(e, sizeof e, "\\u%04x", ch);
        else
            n = snprintf(e, sizeof e, "%c", ch);
        if (*at + (size_t)n >= len)
            return false;
        memcpy(buf + *at, e, (size_t)n);
        *at += (size_t)n;
    }
    buf[*at] = '\0';
    return true;
}

static bool put(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *at)
        return false;
    *at += (size_t)n;
    return true;
}

/* A region's path: prefix, the escaped name, suffix. */
static tally_code region_path(tally_client *c, const char *name,
                              const char *suffix, char *path, size_t len)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > 128)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "a region's name has 1 to 128 bytes");
    char *esc = curl_easy_escape(NULL, name, 0);
    if (esc == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    int n =
        snprintf(path, len, "/v2/systemsharedmemory/region/%s/%s", esc, suffix);
    curl_free(esc);
    if (n < 0 || (size_t)n >= len)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "the region's name is too long");
    return TALLYE_OK;
}

static tally_code post(tally_client *c, const char *path, const char *body)
{
    char *resp = NULL;
    tally_code code = tally_http(c, "POST", path, "application/json", body,
                                 body ? strlen(body) : 0, &resp, NULL);
    tally_free(resp);
    return code;
}

TALLY_API tally_code tally_shm_register(tally_client *c, const char *name,
                                        const char *key, uint64_t offset,
                                        uint64_t byte_size)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (key == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "the key must not be NULL");
    char path[512], body[1024];
    tally_code code = region_path(c, name, "register", path, sizeof path);
    if (code != TALLYE_OK)
        return code;
    size_t at = 0;
    if (!put(body, sizeof body, &at, "{\"key\":\"")
        || !put_json(body, sizeof body, &at, key)
        || !put(body, sizeof body, &at,
                "\",\"offset\":%" PRIu64 ",\"byte_size\":%" PRIu64 "}", offset,
                byte_size))
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "the key is too long");
    return post(c, path, body);
}

TALLY_API tally_code tally_shm_unregister(tally_client *c, const char *name)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (name == NULL)
        return post(c, "/v2/systemsharedmemory/unregister", NULL);
    char path[512];
    tally_code code = region_path(c, name, "unregister", path, sizeof path);
    return code != TALLYE_OK ? code : post(c, path, NULL);
}

/* "parameters":{"shared_memory_region":...} of a place. */
static bool put_place(char *b, size_t len, size_t *at, const tally_shm_place *p)
{
    return put(b, len, at, "\"parameters\":{\"shared_memory_region\":\"")
           && put_json(b, len, at, p->region)
           && put(b, len, at,
                  "\",\"shared_memory_offset\":%" PRIu64
                  ",\"shared_memory_byte_size\":%" PRIu64 "}",
                  p->offset, p->byte_size);
}

TALLY_API tally_code tally_cumsum_shm(tally_client *c, tally_dt dtype, int rank,
                                      const int64_t *shape, int axis,
                                      unsigned flags, const tally_shm_place *in,
                                      const tally_shm_place *out)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (in == NULL || out == NULL || in->region == NULL || out->region == NULL
        || strlen(in->region) > 128 || strlen(out->region) > 128)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "in and out must name regions (of at most 128 "
                            "bytes)");
    if (rank < 1 || rank > TALLY_MAX_RANK || shape == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "rank must be 1 to %d, with a shape",
                            TALLY_MAX_RANK);
    if ((int)dtype < 0 || tally_dt_size(dtype) == 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "unknown dtype");
    if (axis < -rank || axis >= rank)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "axis %d is out of range for rank %d", axis, rank);
    if (flags & ~(TALLY_EXCLUSIVE | TALLY_REVERSE))
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "unknown flags %#x", flags);
    size_t len = 2048 + (size_t)rank * 24;
    char *b = malloc(len);
    if (b == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    size_t at = 0;
    bool ok = put(b, len, &at,
                  "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"%s\","
                  "\"shape\":[",
                  tally_dt_name(dtype));
    for (int d = 0; ok && d < rank; d++) {
        if (shape[d] < 0) {
            free(b);
            return tc_set_error(c, TALLYE_ARGUMENT, 0, "shape[%d] is negative",
                                d);
        }
        ok = put(b, len, &at, "%s%" PRId64, d ? "," : "", shape[d]);
    }
    ok = ok && put(b, len, &at, "],") && put_place(b, len, &at, in)
         && put(b, len, &at, "}],\"outputs\":[{\"name\":\"y\",")
         && put_place(b, len, &at, out)
         && put(b, len, &at,
                "}],\"parameters\":{\"axis\":%d,\"exclusive\":%s,"
                "\"reverse\":%s}}",
                axis, flags & TALLY_EXCLUSIVE ? "true" : "false",
                flags & TALLY_REVERSE ? "true" : "false");
    tally_code code =
        ok ? post(c, "/v2/models/cumsum/infer", b)
           : tc_set_error(c, TALLYE_ARGUMENT, 0, "the request is too long");
    free(b);
    return code;
}

TALLY_API tally_code tally_shm_new(tally_client *c, size_t bytes,
                                   tally_shm **out, void **mem,
                                   const char **region)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (out == NULL || mem == NULL || region == NULL || bytes == 0)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "out, mem and region must not be NULL, and bytes "
                            "must be at least 1");
    *out = NULL;
    *mem = NULL;
    *region = NULL;
    tally_shm *s = calloc(1, sizeof *s);
    if (s == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    static unsigned counter;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(s->key, sizeof s->key, "/tally-%ld-%u-%u", (long)getpid(),
                 ++counter, (unsigned)rand());
        fd = shm_open(s->key, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        free(s);
        return tc_set_error(c, TALLYE_IO, 0,
                            "cannot make a shared-memory object: %s",
                            strerror(e));
    }
    if (ftruncate(fd, (off_t)bytes) != 0
        || (s->mem =
                mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
               == MAP_FAILED) {
        int e = errno;
        close(fd);
        shm_unlink(s->key);
        free(s);
        return tc_set_error(c, TALLYE_IO, 0,
                            "cannot size or map a shared-memory object of "
                            "%zu bytes: %s",
                            bytes, strerror(e));
    }
    close(fd);
    s->bytes = bytes;
    snprintf(s->name, sizeof s->name, "%s", s->key + 1);
    tally_code code = tally_shm_register(c, s->name, s->key, 0, bytes);
    if (code != TALLYE_OK) {
        munmap(s->mem, bytes);
        shm_unlink(s->key);
        free(s);
        return code;
    }
    *out = s;
    *mem = s->mem;
    *region = s->name;
    return TALLYE_OK;
}

TALLY_API void tally_shm_free(tally_client *c, tally_shm *s)
{
    if (s == NULL)
        return;
    if (c != NULL)
        tally_shm_unregister(c, s->name); /* sets c's last status */
    munmap(s->mem, s->bytes);
    shm_unlink(s->key);
    free(s);
}
