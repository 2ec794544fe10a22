/*
 * shm.h - Triton's system shared-memory regions: a client's POSIX
 * shared-memory objects, registered by name, mapped into the daemon, and
 * used by jobs in place of tensor bytes that would otherwise cross a
 * socket.
 *
 * A region is (name, key, offset, byte_size): the bytes [offset, offset +
 * byte_size) of the object shm_open(key) opens. Registering opens and maps
 * it (read and write: outputs are written there) and keeps its descriptor,
 * so that every use can ask the object's current size. A tensor names a
 * place in a region (shm_ref: region name, offset, byte size).
 *
 * Nothing about a region is trusted:
 *   - keys are what shm_open accepts, one leading '/' and no other, and
 *     not "/." or "/..", so that no path leaves /dev/shm; the object must
 *     be a regular file;
 *   - every use checks offset and size against the region, overflow-safe,
 *     and against the object's size at that moment (fstat);
 *   - a region's owner may truncate its object while a kernel reads it.
 *     Touching a mapped page past the end of a file raises SIGBUS, which
 *     would kill the daemon. A process-wide SIGBUS handler (installed by
 *     the first registry) looks the faulting address up among the mapped
 *     regions; when it is one of theirs, it maps anonymous memory over the
 *     whole region in place (MAP_FIXED), marks the region broken and
 *     returns, so that the faulting access is retried and succeeds on the
 *     new pages. The job finishes on memory nobody sees, and the check
 *     after it (shm_release) fails its request. A broken region refuses
 *     every later use until it is unregistered. A fault at any other
 *     address goes to the handler that was there before, or kills the
 *     process as it would have. This costs nothing on the path of a
 *     request that nobody disturbs (no copy, no page locking, no signal
 *     mask changes): only two fstat(2) calls per region used, one before
 *     the job and one after (BENCHMARKS.md, "Shared-memory tensors").
 *     The alternatives cost more: copying the region into private memory
 *     first is the copy this extension exists to avoid, and mlock or
 *     MAP_POPULATE does not stop a truncation from taking the pages away;
 *   - a region unlinked (its link count falling to 0) while a job used it
 *     also fails that job's request: the client can no longer see the
 *     answer;
 *   - a region stays mapped while any job holds it: unregistering takes
 *     its name away at once (new requests cannot find it), and the last
 *     job's release unmaps it, so memory is never unmapped under a kernel.
 * Regions count against a budget of bytes and a cap on their number. With
 * bearer tokens, a region belongs to the token that registered it: other
 * tokens neither see nor use nor unregister it (shm_owner).
 *
 * Threading: every function may be called from any thread; the registry's
 * mutex guards its table, and a region's use count keeps its mapping.
 */
#ifndef TALLY_SHM_H
#define TALLY_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"
#include "status.h"

typedef struct shm_registry shm_registry;
typedef struct shm_region shm_region;

#define SHM_NAME_MAX 128 /* bytes of a region's name */
#define SHM_KEY_MAX 255  /* bytes of a key, its '/' included (NAME_MAX) */

/* Who is asking: the request's caller, as its door decided (auth.h): the
 * bearer token the request carried, or "" when the server requires none.
 * Borrowed for the call. */
typedef auth_caller shm_owner;

/* Where a tensor lies, as a request's parameters shared_memory_region,
 * shared_memory_offset and shared_memory_byte_size say. */
typedef struct {
    bool set; /* the tensor names a region */
    char region[SHM_NAME_MAX + 1];
    uint64_t offset;
    bool has_byte_size;
    uint64_t byte_size;
} shm_ref;

/* A registered region, as status reports it. */
typedef struct {
    char name[SHM_NAME_MAX + 1];
    char key[SHM_KEY_MAX + 1];
    uint64_t offset, byte_size;
} shm_info;

/* A region in use by one tensor of one job: from shm_acquire() to
 * shm_release(). */
typedef struct {
    shm_region *region; /* NULL: none held */
    uint8_t *p;         /* the tensor's first byte */
    uint64_t bytes;
    uint64_t at;   /* its offset in the object */
    nlink_t nlink; /* the object's link count when acquired */
} shm_use;

/* A registry of at most max_regions regions of at most max_bytes in all;
 * NULL when memory runs out. Installs the SIGBUS handler (once per
 * process). */
shm_registry *shm_registry_new(unsigned max_regions, uint64_t max_bytes);

/* Unmaps every region and frees r; NULL is a no-op. No use may be held. */
void shm_registry_free(shm_registry *r);

/* Checks a region name: 1 to SHM_NAME_MAX bytes of UTF-8 with no control
 * characters. False with a message. */
bool shm_name_ok(const char *name, size_t n, char *msg, size_t msglen);

/* Sets ref's region name (checked as shm_name_ok does); false with a
 * message. */
bool shm_ref_region(shm_ref *ref, const char *name, size_t n, char *msg,
                    size_t msglen);

/* Registers key's bytes [offset, offset + byte_size) as `name` for owner.
 * STATUS_OK; INVALID (a bad name, key or range, or an object that is not
 * a regular file of that size), NOT_FOUND (no such object), ALREADY_EXISTS
 * (the owner has a region of that name), TOO_LARGE (past the budget or the
 * cap), NOMEM; with a message. */
status_code shm_register(shm_registry *r, shm_owner o, const char *name,
                         size_t nlen, const char *key, size_t klen,
                         uint64_t offset, uint64_t byte_size, char *msg,
                         size_t msglen);

/* Unregisters the owner's region `name`, or with name NULL every region
 * of the owner's. A region a job holds is unmapped when the job releases
 * it. STATUS_OK, or NOT_FOUND for a name the owner has not registered. */
status_code shm_unregister(shm_registry *r, shm_owner o, const char *name,
                           size_t nlen, char *msg, size_t msglen);

/* The owner's regions (with name: that one), in registration order, as a
 * malloc'd array of *n (NULL when *n is 0). STATUS_OK, NOT_FOUND for an
 * unknown name, or NOMEM. */
status_code shm_status(shm_registry *r, shm_owner o, const char *name,
                       size_t nlen, shm_info **out, size_t *n, char *msg,
                       size_t msglen);

/* Finds the owner's region ref->region and checks that a tensor of
 * `bytes` fits at ref->offset: for an input (output false) byte_size must
 * be that size, for an output at least that. On STATUS_OK *u holds the
 * region until shm_release(). Otherwise NOT_FOUND (no such region),
 * INVALID (no byte size, a size or range that does not fit, a region
 * truncated or broken) with a message that names the tensor `what`. */
status_code shm_acquire(shm_registry *r, shm_owner o, const shm_ref *ref,
                        uint64_t bytes, bool output, const char *what,
                        shm_use *u, char *msg, size_t msglen);

/* Whether two uses' bytes overlap in their objects (different regions of
 * the same object included); *same when they are the same bytes. */
bool shm_overlap(const shm_use *a, const shm_use *b, bool *same);

/* Checks that the region was left alone while the job used it (not
 * truncated below the tensor, not unlinked, not broken by a fault) and
 * releases it. STATUS_OK, or INVALID with a message; a no-op (STATUS_OK)
 * when u holds nothing. */
status_code shm_release(shm_use *u, char *msg, size_t msglen);

/* Releases without the check (a request that failed anyway). */
void shm_drop(shm_use *u);

/* For tests and metrics: how many regions are registered, and their bytes. */
void shm_counts(shm_registry *r, unsigned *regions, uint64_t *bytes);

#endif
