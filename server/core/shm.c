/*
 * shm.c - the shared-memory registry and its SIGBUS guard (shm.h).
 *
 * Every mapping of a region has a slot in a process-wide table that the
 * SIGBUS handler reads: its base, length and a broken flag, as atomics, so
 * that the handler (which may run on any thread, PoCL's included, at any
 * moment) reads them without a lock. A slot is filled before the region
 * can be used and emptied only once its mapping is gone.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, SA_NODEFER */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "mutex.h"
#include "shm.h"
#include "tx_utf8.h"

/* ----------------------------------------------------------- the guard */

#define GUARD_SLOTS 4096

typedef struct {
    _Atomic uintptr_t base; /* 0: free */
    _Atomic size_t len;
    atomic_int broken;
} guard_slot;

static guard_slot guard[GUARD_SLOTS];
static struct sigaction previous;
static uv_once_t guard_once = UV_ONCE_INIT;
static uv_mutex_t guard_mu; /* taking and freeing slots */

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (size_t i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t base = atomic_load(&guard[i].base);
        size_t len = atomic_load(&guard[i].len);
        if (base == 0 || a < base || a - base >= len)
            continue;
        /* One of the regions: its object shrank under it. Fresh pages in
         * its place let the access complete; the job's check fails it.
         * The system call itself, not libc's mmap(): a sanitizer's mmap
         * interceptor is not async-signal-safe, and ThreadSanitizer's
         * takes the remap for a write to the whole region, racing every
         * other thread still reading it (a host pool's helpers scanning
         * the same tensor), which is this guard's design, not a race:
         * each of those reads faults here as well or sees the zeros. */
        int saved = errno;
        long p = syscall(SYS_mmap, (void *)base, len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0L);
        errno = saved;
        if (p == -1)
            break; /* cannot mend it: die as we would have */
        atomic_store(&guard[i].broken, 1);
        return;
    }
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction != NULL) {
            previous.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL
               && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* the default action: returning re-runs the access, which faults
     * again and now kills the process */
    signal(SIGBUS, SIG_DFL);
}

static void guard_install(void)
{
    uv_mutex_init(&guard_mu);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

static int guard_take(void *base, size_t len)
{
    uv_mutex_lock(&guard_mu);
    int slot = -1;
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (atomic_load(&guard[i].base) == 0) {
            atomic_store(&guard[i].broken, 0);
            atomic_store(&guard[i].len, len);
            atomic_store(&guard[i].base, (uintptr_t)base);
            slot = i;
            break;
        }
    uv_mutex_unlock(&guard_mu);
    return slot;
}

static void guard_free(int slot)
{
    uv_mutex_lock(&guard_mu);
    atomic_store(&guard[slot].base, 0);
    atomic_store(&guard[slot].len, 0);
    uv_mutex_unlock(&guard_mu);
}

/* -------------------------------------------------------- the registry */

struct shm_region {
    shm_registry *reg;
    char name[SHM_NAME_MAX + 1];
    char key[SHM_KEY_MAX + 1];
    char *owner; /* the token, or "" */
    size_t owner_len;
    uint64_t offset, byte_size;
    int fd;
    void *map; /* page-aligned; map_len bytes */
    size_t map_len;
    uint8_t *bytes; /* the region's first byte: map + (offset % page) */
    dev_t dev;
    ino_t ino;
    int slot;
    unsigned uses;   /* jobs holding it; under reg->mu */
    bool registered; /* in the table */
};

struct shm_registry {
    mutex mu;
    shm_region **regions; /* registered, in order */
    unsigned n, max;
    uint64_t bytes, max_bytes; /* mapped, held ones included */
};

shm_registry *shm_registry_new(unsigned max_regions, uint64_t max_bytes)
{
    uv_once(&guard_once, guard_install);
    shm_registry *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    if (max_regions > GUARD_SLOTS / 2)
        max_regions = GUARD_SLOTS / 2;
    r->regions = calloc(max_regions ? max_regions : 1, sizeof *r->regions);
    if (r->regions == NULL || mutex_init(&r->mu) != 0) {
        free(r->regions);
        free(r);
        return NULL;
    }
    r->max = max_regions;
    r->max_bytes = max_bytes;
    return r;
}

/* Unmaps a region no job holds. Its guard slot goes first: once the
 * address range is unmapped, another mapping may take it, and a fault
 * there must not be taken for this region's. */
static void region_unmap(shm_region *g)
{
    guard_free(g->slot);
    munmap(g->map, g->map_len);
    close(g->fd);
    free(g->owner);
    free(g);
}

void shm_registry_free(shm_registry *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->n; i++)
        region_unmap(r->regions[i]);
    mutex_destroy(&r->mu);
    free(r->regions);
    free(r);
}

static bool owns(const shm_region *g, shm_owner o)
{
    /* constant-time in the bytes, as token checks are */
    unsigned d = g->owner_len != o.n;
    for (size_t i = 0; i < g->owner_len; i++)
        d |= (unsigned char)g->owner[i] ^ (unsigned char)(i < o.n ? o.p[i] : 0);
    return d == 0;
}

static bool name_is(const shm_region *g, const char *name, size_t n)
{
    return strlen(g->name) == n && memcmp(g->name, name, n) == 0;
}

/* The owner's region `name`, under r->mu; its index in *at. */
static shm_region *find(shm_registry *r, shm_owner o, const char *name,
                        size_t n, unsigned *at)
{
    LOCK_HELD(&r->mu);
    for (unsigned i = 0; i < r->n; i++)
        if (name_is(r->regions[i], name, n) && owns(r->regions[i], o)) {
            if (at != NULL)
                *at = i;
            return r->regions[i];
        }
    return NULL;
}

/* Opens the object behind KEY ("/name", checked by key_ok) for reading
 * and writing, as shm_open(3) does: open(2) on /dev/shm/name, not
 * following a link.  Called directly rather than through shm_open
 * because glibc's shm_open opens with an internal call that
 * ThreadSanitizer does not see: the descriptor it returns then still
 * reads as whatever socket last held that number, and closing it on
 * another thread was reported as a race.  -1 and errno on failure. */
static int object_open(const char *key)
{
    char path[sizeof "/dev/shm" + SHM_KEY_MAX];
    snprintf(path, sizeof path, "/dev/shm%s", key);
    return open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
}

/* What shm_open takes, and nothing that leaves /dev/shm. */
static bool key_ok(const char *key, size_t n, char *msg, size_t msglen)
{
    if (n < 2 || n > SHM_KEY_MAX || key[0] != '/')
        return msg_fail(
            msg, msglen,
            "a shared-memory key must be '/' and then 1 to %d bytes, "
            "as shm_open takes it (\"/my_region\")",
            SHM_KEY_MAX - 1);
    if (memchr(key + 1, '/', n - 1) != NULL || memchr(key, '\0', n) != NULL)
        return msg_fail(msg, msglen,
                        "a shared-memory key has one '/', at its start, and no "
                        "other (nor a NUL byte): \"/my_region\", not a path");
    if ((n == 2 && key[1] == '.') || (n == 3 && key[1] == '.' && key[2] == '.'))
        return msg_fail(msg, msglen,
                        "a shared-memory key cannot be \"/.\" or \"/..\"");
    if (tx_utf8_valid(key, n) != n)
        return msg_fail(msg, msglen, "a shared-memory key must be valid UTF-8");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return msg_fail(
                msg, msglen,
                "a shared-memory key cannot hold control characters");
    return true;
}

/* Whether [offset, offset + byte_size) can be a region: *end, and *lead
 * (offset's distance from its page's start). */
static bool span_ok(uint64_t offset, uint64_t byte_size, uint64_t *end,
                    uint64_t *lead, char *msg, size_t msglen)
{
    if (byte_size == 0)
        return msg_fail(msg, msglen, "byte_size must be at least 1");
    if (__builtin_add_overflow(offset, byte_size, end)
        || *end > (uint64_t)INT64_MAX)
        return msg_fail(msg, msglen,
                        "offset %" PRIu64 " plus byte_size %" PRIu64
                        " overflows",
                        offset, byte_size);
    *lead = offset % (uint64_t)sysconf(_SC_PAGESIZE);
    if (byte_size > SIZE_MAX - *lead)
        return msg_fail(msg, msglen, "byte_size %" PRIu64 " is too large",
                        byte_size);
    return true;
}

/* Whether r has room for o's region name of byte_size bytes. Under mu. */
static status_code room_for(shm_registry *r, shm_owner o, const char *name,
                            size_t nlen, uint64_t byte_size, char *msg,
                            size_t msglen)
{
    LOCK_HELD(&r->mu);
    if (find(r, o, name, nlen, NULL) != NULL)
        return msg_fail_as(STATUS_ALREADY_EXISTS, msg, msglen,
                           "a shared-memory region named \"%.*s\" is already "
                           "registered; unregister it first",
                           (int)nlen, name);
    if (r->n >= r->max)
        return msg_fail_as(
            STATUS_TOO_LARGE, msg, msglen,
            "%u shared-memory regions are registered, as many as this "
            "server allows (--shm-max-regions); unregister one first",
            r->max);
    if (byte_size > r->max_bytes - r->bytes)
        return msg_fail_as(STATUS_TOO_LARGE, msg, msglen,
                           "registering %" PRIu64 " more bytes would pass this "
                           "server's budget of %" PRIu64
                           " bytes of shared memory "
                           "(--shm-max-bytes; %" PRIu64 " in use)",
                           byte_size, r->max_bytes, r->bytes);
    return STATUS_OK;
}

/* Opens key kz and maps [offset - lead, end) of it into g (its fd, map,
 * map_len, dev and ino). */
static status_code map_key(shm_region *g, const char *kz, uint64_t offset,
                           uint64_t byte_size, uint64_t lead, uint64_t end,
                           char *msg, size_t msglen)
{
    g->fd = object_open(kz);
    if (g->fd < 0) {
        int e = errno;
        snprintf(msg, msglen, "cannot open shared-memory key \"%s\": %s", kz,
                 strerror(e));
        return e == ENOENT ? STATUS_NOT_FOUND : STATUS_INVALID;
    }
    struct stat sb;
    if (fstat(g->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return msg_fail_as(STATUS_INVALID, msg, msglen,
                           "shared-memory key \"%s\" is not a regular object",
                           kz);
    if ((uint64_t)sb.st_size < end)
        return msg_fail_as(STATUS_INVALID, msg, msglen,
                           "shared-memory key \"%s\" has %" PRIu64
                           " bytes, fewer than "
                           "offset %" PRIu64 " plus byte_size %" PRIu64,
                           kz, (uint64_t)sb.st_size, offset, byte_size);
    g->map_len = (size_t)(lead + byte_size);
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd,
                  (off_t)(offset - lead));
    if (g->map == MAP_FAILED) {
        int e = errno;
        snprintf(msg, msglen, "cannot map shared-memory key \"%s\": %s", kz,
                 strerror(e));
        return e == ENOMEM ? STATUS_NOMEM : STATUS_INVALID;
    }
    g->dev = sb.st_dev;
    g->ino = sb.st_ino;
    return STATUS_OK;
}

status_code shm_register(shm_registry *r, shm_owner o, const char *name,
                         size_t nlen, const char *key, size_t klen,
                         uint64_t offset, uint64_t byte_size, char *msg,
                         size_t msglen)
{
    uint64_t end, lead;
    if (!shm_name_ok(name, nlen, msg, msglen)
        || !key_ok(key, klen, msg, msglen)
        || !span_ok(offset, byte_size, &end, &lead, msg, msglen))
        return STATUS_INVALID;
    char kz[SHM_KEY_MAX + 1];
    memcpy(kz, key, klen);
    kz[klen] = '\0';
    /* Under the lock throughout: registering is rare, and opening and
     * mapping take microseconds. */
    mutex_lock(&r->mu);
    shm_region *g = NULL;
    status_code st = room_for(r, o, name, nlen, byte_size, msg, msglen);
    if (st == STATUS_OK) {
        g = calloc(1, sizeof *g);
        if (g == NULL || (g->owner = malloc(o.n + 1)) == NULL) {
            snprintf(msg, msglen, "out of memory");
            st = STATUS_NOMEM;
        } else {
            g->fd = -1;
            g->map = MAP_FAILED;
            st = map_key(g, kz, offset, byte_size, lead, end, msg, msglen);
        }
    }
    if (st == STATUS_OK && (g->slot = guard_take(g->map, g->map_len)) < 0) {
        snprintf(msg, msglen, "too many shared-memory mappings at once");
        st = STATUS_TOO_LARGE;
    }
    if (st != STATUS_OK) {
        mutex_unlock(&r->mu);
        if (g != NULL && g->map != MAP_FAILED)
            munmap(g->map, g->map_len);
        if (g != NULL && g->fd >= 0)
            close(g->fd);
        if (g != NULL)
            free(g->owner);
        free(g);
        return st;
    }
    g->reg = r;
    memcpy(g->name, name, nlen);
    memcpy(g->key, key, klen);
    memcpy(g->owner, o.p, o.n);
    g->owner[o.n] = '\0';
    g->owner_len = o.n;
    g->offset = offset;
    g->byte_size = byte_size;
    g->bytes = (uint8_t *)g->map + lead;
    g->registered = true;
    r->regions[r->n++] = g;
    r->bytes += byte_size;
    mutex_unlock(&r->mu);
    return STATUS_OK;
}

/* Takes g out of the table, under r->mu; unmapped now when no job holds
 * it, else by the last release. */
static void take_out(shm_registry *r, unsigned at)
{
    LOCK_HELD(&r->mu);
    shm_region *g = r->regions[at];
    memmove(&r->regions[at], &r->regions[at + 1],
            (r->n - at - 1) * sizeof *r->regions);
    r->n--;
    g->registered = false;
    if (g->uses == 0) {
        r->bytes -= g->byte_size;
        region_unmap(g);
    }
}

status_code shm_unregister(shm_registry *r, shm_owner o, const char *name,
                           size_t nlen, char *msg, size_t msglen)
{
    mutex_lock(&r->mu);
    status_code st = STATUS_OK;
    if (name != NULL) {
        unsigned at;
        if (find(r, o, name, nlen, &at) != NULL) {
            take_out(r, at);
        } else {
            snprintf(msg, msglen,
                     "no shared-memory region named \"%.*s\" is registered",
                     (int)(nlen > SHM_NAME_MAX ? SHM_NAME_MAX : nlen), name);
            st = STATUS_NOT_FOUND;
        }
    } else {
        for (unsigned i = r->n; i-- > 0;)
            if (owns(r->regions[i], o))
                take_out(r, i);
    }
    mutex_unlock(&r->mu);
    return st;
}

status_code shm_status(shm_registry *r, shm_owner o, const char *name,
                       size_t nlen, shm_info **out, size_t *n, char *msg,
                       size_t msglen)
{
    *out = NULL;
    *n = 0;
    mutex_lock(&r->mu);
    status_code st = STATUS_OK;
    shm_info *v = calloc(r->n ? r->n : 1, sizeof *v);
    if (v == NULL) {
        snprintf(msg, msglen, "out of memory");
        st = STATUS_NOMEM;
        goto out;
    }
    size_t k = 0;
    for (unsigned i = 0; i < r->n; i++) {
        const shm_region *g = r->regions[i];
        if (!owns(g, o) || (name != NULL && !name_is(g, name, nlen)))
            continue;
        memcpy(v[k].name, g->name, sizeof g->name);
        memcpy(v[k].key, g->key, sizeof g->key);
        v[k].offset = g->offset;
        v[k].byte_size = g->byte_size;
        k++;
    }
    if (name != NULL && k == 0) {
        snprintf(msg, msglen,
                 "no shared-memory region named \"%.*s\" is registered",
                 (int)(nlen > SHM_NAME_MAX ? SHM_NAME_MAX : nlen), name);
        st = STATUS_NOT_FOUND;
        free(v);
        goto out;
    }
    if (k == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    *n = k;
out:
    mutex_unlock(&r->mu);
    return st;
}

static bool broken(const shm_region *g)
{
    return atomic_load(&guard[g->slot].broken) != 0;
}

status_code shm_acquire(shm_registry *r, shm_owner o, const shm_ref *ref,
                        uint64_t bytes, bool output, const char *what,
                        shm_use *u, char *msg, size_t msglen)
{
    memset(u, 0, sizeof *u);
    size_t nlen = strlen(ref->region);
    if (!ref->has_byte_size)
        return msg_fail_as(STATUS_INVALID, msg, msglen,
                           "%s names shared-memory region \"%s\" but not "
                           "shared_memory_byte_size",
                           what, ref->region);
    if (output ? ref->byte_size < bytes : ref->byte_size != bytes)
        return msg_fail_as(STATUS_INVALID, msg, msglen,
                           "%s: shared_memory_byte_size is %" PRIu64
                           ", but its shape "
                           "and datatype take %" PRIu64 " bytes",
                           what, ref->byte_size, bytes);
    mutex_lock(&r->mu);
    shm_region *g = find(r, o, ref->region, nlen, NULL);
    status_code st = STATUS_OK;
    uint64_t end;
    if (g == NULL) {
        snprintf(msg, msglen,
                 "%s: no shared-memory region named \"%s\" is registered", what,
                 ref->region);
        st = STATUS_NOT_FOUND;
    } else if (__builtin_add_overflow(ref->offset, ref->byte_size, &end)
               || end > g->byte_size) {
        snprintf(msg, msglen,
                 "%s: shared_memory_offset %" PRIu64
                 " plus shared_memory_byte_size %" PRIu64
                 " passes the end of region \"%s\" (%" PRIu64 " bytes)",
                 what, ref->offset, ref->byte_size, ref->region, g->byte_size);
        st = STATUS_INVALID;
    } else if (broken(g)) {
        snprintf(msg, msglen,
                 "%s: shared-memory region \"%s\" was truncated while in use "
                 "and is no longer usable; unregister it and register it "
                 "again",
                 what, ref->region);
        st = STATUS_INVALID;
    } else {
        g->uses++;
    }
    mutex_unlock(&r->mu);
    if (st != STATUS_OK)
        return st;
    u->region = g;
    u->p = g->bytes + ref->offset;
    u->bytes = bytes;
    u->at = g->offset + ref->offset;
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(g->fd, &sb) != 0 || (uint64_t)sb.st_size < u->at + bytes) {
        snprintf(msg, msglen,
                 "%s: shared-memory region \"%s\" has been truncated: its "
                 "object now has %" PRIu64 " bytes, fewer than the tensor's "
                 "end at byte %" PRIu64,
                 what, ref->region, (uint64_t)sb.st_size, u->at + bytes);
        shm_drop(u);
        return STATUS_INVALID;
    }
    u->nlink = sb.st_nlink;
    return STATUS_OK;
}

bool shm_overlap(const shm_use *a, const shm_use *b, bool *same)
{
    *same = false;
    if (a->region == NULL || b->region == NULL)
        return false;
    if (a->region->dev != b->region->dev || a->region->ino != b->region->ino)
        return false;
    if (a->bytes == 0 || b->bytes == 0)
        return false;
    if (a->at < b->at + b->bytes && b->at < a->at + a->bytes) {
        *same = a->at == b->at && a->bytes == b->bytes && a->p == b->p;
        return true;
    }
    return false;
}

void shm_drop(shm_use *u)
{
    shm_region *g = u->region;
    if (g == NULL)
        return;
    shm_registry *r = g->reg;
    mutex_lock(&r->mu);
    if (--g->uses == 0 && !g->registered) {
        r->bytes -= g->byte_size;
        region_unmap(g);
    }
    mutex_unlock(&r->mu);
    u->region = NULL;
}

status_code shm_release(shm_use *u, char *msg, size_t msglen)
{
    shm_region *g = u->region;
    if (g == NULL)
        return STATUS_OK;
    status_code st = STATUS_OK;
    struct stat sb;
    if (broken(g)) {
        snprintf(msg, msglen,
                 "shared-memory region \"%s\" was truncated while this "
                 "request used it; its data is lost",
                 g->name);
        st = STATUS_INVALID;
    } else if (fstat(g->fd, &sb) != 0
               || (uint64_t)sb.st_size < u->at + u->bytes) {
        snprintf(msg, msglen,
                 "shared-memory region \"%s\" was truncated while this "
                 "request used it",
                 g->name);
        st = STATUS_INVALID;
    } else if (u->nlink > 0 && sb.st_nlink == 0) {
        snprintf(msg, msglen,
                 "shared-memory region \"%s\" was unlinked while this "
                 "request used it",
                 g->name);
        st = STATUS_INVALID;
    }
    shm_drop(u);
    return st;
}

void shm_counts(shm_registry *r, unsigned *regions, uint64_t *bytes)
{
    mutex_lock(&r->mu);
    *regions = r->n;
    *bytes = r->bytes;
    mutex_unlock(&r->mu);
}
