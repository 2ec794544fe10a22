/*
 * kv_log_file.c - the log's records and its file (kv_log_int.h): the
 * record format kv_log.h describes, encoded and decoded; writes at an
 * offset, the room allocated ahead, the directory's lock, and the whole
 * log read back at the start.
 */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/uio.h>
#include <unistd.h>

#include "errors.h"
#include "kv_log.h"
#include "kv_log_int.h"
#include "log.h"
#include "tx_file.h"
#include "tx_fnv.h"

#define REC_MAGIC 0x57564b54u    /* "TKVW" */
#define LEGACY_MAGIC 0x524c5354u /* "TSLR": an older tallyd's record */
#define REC_HEAD 16
#define REC_FIELDS 60
#define WRITE_IOVS 64

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
           | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ------------------------------------------------------------ records */

uint8_t *kv_log_encode(const kv_write *w, size_t *len)
{
    size_t vlen = 0;
    const uint8_t *v = w->op == KV_W_PUT ? kv_val_bytes(w->val, &vlen) : NULL;
    size_t plen = REC_FIELDS + w->keylen + vlen;
    if (plen > UINT32_MAX - REC_HEAD)
        return NULL;
    uint8_t *b = malloc(REC_HEAD + plen);
    if (b == NULL)
        return NULL;
    uint8_t *p = b + REC_HEAD;
    p[0] = w->op;
    p[1] = w->flags;
    p[2] = (uint8_t)w->keylen;
    p[3] = (uint8_t)(w->keylen >> 8);
    put64(p + 4, w->expect.hi);
    put64(p + 12, w->expect.lo);
    put64(p + 20, w->version.hi);
    put64(p + 28, w->version.lo);
    put64(p + 36, (uint64_t)w->deadline_ms);
    put64(p + 44, (uint64_t)w->at_ms);
    put64(p + 52, (uint64_t)w->weight);
    memcpy(p + REC_FIELDS, w->key, w->keylen);
    if (vlen > 0)
        memcpy(p + REC_FIELDS + w->keylen, v, vlen);
    put32(b, REC_MAGIC);
    put32(b + 4, (uint32_t)plen);
    put32(b + 8, tx_fnv1a32(p, plen));
    put32(b + 12, tx_fnv1a32(b, 12));
    *len = REC_HEAD + plen;
    return b;
}

/* A record's payload as a write; NULL with why. */
static kv_write *decode(const uint8_t *p, size_t plen, char *why, size_t len)
{
    if (plen < REC_FIELDS)
        return msg_fail_as(NULL, why, len,
                           "a record of %zu bytes, fewer than its fields",
                           plen);
    uint8_t op = p[0];
    size_t keylen = (size_t)p[2] | (size_t)p[3] << 8;
    if (op < KV_W_PUT || op > KV_W_TOUCH || keylen > plen - REC_FIELDS)
        return msg_fail_as(NULL, why, len,
                           "a record of no kind this tallyd knows (op %u)", op);
    size_t vlen = plen - REC_FIELDS - keylen;
    kv_write *w = kv_write_new(op, p + REC_FIELDS, keylen);
    if (w != NULL && op == KV_W_PUT
        && (w->val = kv_val_new(p + REC_FIELDS + keylen, vlen)) == NULL) {
        kv_write_free(w);
        w = NULL;
    }
    if (w == NULL)
        return msg_fail_as(NULL, why, len, "out of memory, or a key too long");
    w->flags = p[1];
    w->expect = (kv_version){get64(p + 4), get64(p + 12)};
    w->version = (kv_version){get64(p + 20), get64(p + 28)};
    w->deadline_ms = (int64_t)get64(p + 36);
    w->at_ms = (int64_t)get64(p + 44);
    w->weight = (size_t)get64(p + 52);
    return w;
}

/* Whether b[at..len) is all zeros: the room allocated ahead. */
static bool zeros(const uint8_t *b, size_t at, size_t len)
{
    for (; at < len; at++)
        if (b[at] != 0)
            return false;
    return true;
}

/* The bytes of b[0..len) up to the last one that is not zero. */
static size_t used(const uint8_t *b, size_t len)
{
    while (len > 0 && b[len - 1] == 0)
        len--;
    return len;
}

/* One record at b[at..len) (a header checked): its write (*w; *legacy
 * for an older tallyd's), and its length; 0 with *w NULL when it is cut
 * short, or damaged (why). */
static size_t record_at(const uint8_t *b, size_t at, size_t len, kv_write **w,
                        bool *legacy, char *why, size_t whylen)
{
    const uint8_t *h = b + at;
    uint32_t plen = get32(h + 4);
    *w = NULL;
    *legacy = get32(h) == LEGACY_MAGIC;
    if ((size_t)plen > len - at - REC_HEAD)
        return msg_fail_as(0, why, whylen, "a record cut short");
    const uint8_t *p = h + REC_HEAD;
    if (*legacy) { /* its payload carries its own checksum */
        *w = kv_write_new(0, NULL, 0);
        if (*w == NULL || ((*w)->val = kv_val_new(p, plen)) == NULL) {
            kv_write_free(*w);
            *w = NULL;
            return msg_fail_as(0, why, whylen, "out of memory");
        }
        return REC_HEAD + plen;
    }
    if (get32(h + 8) != tx_fnv1a32(p, plen))
        return msg_fail_as(0, why, whylen, "a record whose checksum is wrong");
    *w = decode(p, plen, why, whylen);
    return *w != NULL ? REC_HEAD + plen : 0;
}

bool kv_log_decode(const uint8_t *b, size_t len,
                   bool (*each)(void *user, kv_write *w, bool legacy),
                   void *user, size_t *end, size_t *torn, char *msg,
                   size_t msglen)
{
    size_t at = 0;
    *torn = 0;
    *end = 0;
    while ((*end = at) < len) {
        size_t left = len - at;
        const uint8_t *h = b + at;
        if (h[0] == 0 && zeros(b, at, len))
            return true;       /* the room allocated ahead: the end */
        if (left < REC_HEAD) { /* a header cut short: torn */
            *torn = used(b, len) - at;
            return true;
        }
        uint32_t magic = get32(h);
        if ((magic != REC_MAGIC && magic != LEGACY_MAGIC)
            || get32(h + 12) != tx_fnv1a32(h, 12)) {
            if (zeros(b, at + REC_HEAD, len)) { /* a header written in part */
                *torn = used(b, len) - at;
                return true;
            }
            return msg_fail(
                msg, msglen,
                "a damaged record header at byte %zu (%zu bytes follow)", at,
                left);
        }
        kv_write *w;
        bool legacy;
        char why[200];
        size_t n = record_at(b, at, len, &w, &legacy, why, sizeof why);
        size_t next = at + REC_HEAD + (size_t)get32(h + 4);
        if (n == 0 && (next > len || zeros(b, next, len))) {
            *torn = used(b, len) - at; /* the last, cut short or torn */
            return true;
        }
        if (n == 0)
            return msg_fail(msg, msglen, "%s at byte %zu", why, at);
        if (!each(user, w, legacy)) {
            if (zeros(b, at + n, len)) { /* an older log's last: torn */
                *torn = used(b, len) - at;
                return true;
            }
            return msg_fail(msg, msglen,
                            "the record at byte %zu cannot be taken", at);
        }
        at += n;
    }
    return true;
}

/* ------------------------------------------------------------ the file */

/* Writes the n buffers of v (changed on the way) at offset at, whole. */
static bool write_iovs(int fd, struct iovec *v, int n, uint64_t at)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, v, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        at += (uint64_t)w;
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (uint8_t *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return true;
}

bool kvl_write_all(int fd, const uint8_t *b, size_t n, uint64_t at)
{
    struct iovec v = {.iov_base = (void *)b, .iov_len = n};
    return write_iovs(fd, &v, n > 0, at);
}

void kvl_encoded_free(encoded *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->b[i]);
    free(e->b);
    free(e->len);
    memset(e, 0, sizeof *e);
}

bool kvl_encode_all(const kv_write *w, encoded *e)
{
    size_t n = 0;
    for (const kv_write *x = w; x != NULL; x = x->next)
        n++;
    e->b = calloc(n ? n : 1, sizeof *e->b);
    e->len = calloc(n ? n : 1, sizeof *e->len);
    e->n = e->bytes = 0;
    if (e->b == NULL || e->len == NULL)
        return false;
    for (const kv_write *x = w; x != NULL; x = x->next) {
        e->b[e->n] = kv_log_encode(x, &e->len[e->n]);
        if (e->b[e->n] == NULL)
            return false;
        e->bytes += e->len[e->n++];
    }
    return true;
}

bool kvl_write_encoded(int fd, const encoded *e, uint64_t at, int fail)
{
    if (fail) {
        errno = fail;
        return false;
    }
    for (size_t i = 0; i < e->n;) {
        struct iovec v[WRITE_IOVS];
        int n = 0;
        uint64_t bytes = 0;
        for (; i < e->n && n < WRITE_IOVS; i++) {
            v[n++] = (struct iovec){.iov_base = e->b[i], .iov_len = e->len[i]};
            bytes += e->len[i];
        }
        if (!write_iovs(fd, v, n, at))
            return false;
        at += bytes;
    }
    return true;
}

bool kvl_make_room(int fd, uint64_t size, uint64_t need, uint64_t *alloc,
                   uint64_t step)
{
    if (size + need <= *alloc)
        return true;
    uint64_t to = (size + need + step - 1) / step * step;
    if (fallocate(fd, 0, (off_t)*alloc, (off_t)(to - *alloc)) == 0) {
        *alloc = to;
        return true;
    }
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return false;
    static const uint8_t zero[65536];
    for (uint64_t at = *alloc; at < to; at += sizeof zero) {
        size_t n = to - at < sizeof zero ? (size_t)(to - at) : sizeof zero;
        if (!kvl_write_all(fd, zero, n, at))
            return false;
    }
    *alloc = to;
    return true;
}

bool kvl_fsync_dir(const char *dir)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return false;
    bool ok = fsync(d) == 0;
    close(d);
    return ok;
}

/* ------------------------------------------------------------ the lock */

int kvl_lock_dir(const char *dir, char *msg, size_t msglen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tallyd.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return msg_fail_as(-1, msg, msglen, "cannot open %.300s: %s", path,
                           strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[24] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            snprintf(msg, msglen,
                     "--state-dir %.300s is in use by another tallyd (pid "
                     "%s, holding %.300s): one tallyd per directory, or the "
                     "two would write over each other's log",
                     dir, pid[0] ? pid : "unknown", path);
        else
            snprintf(msg, msglen, "cannot lock %.300s: %s", path, strerror(e));
        return -1;
    }
    char pid[24];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        log_msg("sequences", "warn", "%s: cannot write tallyd's pid: %s", path,
                strerror(errno));
    return fd;
}

/* ------------------------------------------------------------ reading */

bool kvl_read_log(const char *path, uint8_t **buf, size_t *len, char *msg,
                  size_t msglen)
{
    char *b;
    int e = tx_read_file(path, SIZE_MAX, &b, len);
    *buf = (uint8_t *)b;
    if (e == ENOENT)
        return true; /* no log yet */
    if (e != 0)
        return msg_fail(msg, msglen, "cannot read %.300s: %s", path,
                        strerror(e));
    return true;
}
