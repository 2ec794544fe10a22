/*
 * tally.h - libtally, the C client of the tally cumulative-sum service.
 *
 * libtally sends tensors to one or more tallyd servers and returns their
 * cumulative sums (prefix scans) along an axis, with the semantics of
 * DirectML's DML_CUMULATIVE_SUMMATION_OPERATOR_DESC and OpenVINO's CumSum-3.
 * It is built on libcurl and shaped like it: an opaque handle, setters, calls
 * that run requests, and a free function.
 *
 *     tally_client *c = tally_client_new();
 *     tally_add_url(c, "http://127.0.0.1:8080");
 *     int64_t shape[2] = {2, 3};
 *     float x[6] = {1, 2, 3, 4, 5, 6};
 *     if (tally_cumsum(c, TALLY_DT_FLOAT32, 2, shape, 1, 0, x, x) != TALLY_OK)
 *         fprintf(stderr, "cumsum: %s\n", tally_last_message(c));
 *     tally_client_free(c);        // x is now {1, 3, 6, 4, 9, 15}
 *
 * Tensors are flat, row-major (C order), little-endian buffers of one
 * dtype, described by a rank and a shape. Integers wrap modulo 2^bits;
 * float16 and bfloat16 accumulate in float32 on the server.
 *
 * Memory: the library copies every string it is given and keeps no pointer
 * to a caller's buffer past the call that received it, except the tensors
 * added to a batch (borrowed until tally_batch_run() returns). Everything
 * the library allocates for the caller is freed with tally_free(), or with
 * the _free() function paired with its _new().
 *
 * Threads: a tally_client, and the batches made from it, may be used by one
 * thread at a time. Separate clients on separate threads are independent;
 * give each thread its own. tally_client_new() may be called from any
 * thread at any time (libcurl is initialised once, safely). The functions
 * that take no client (tally_strerror, tally_dt_*, tally_version,
 * tally_npy_*) are safe from any thread.
 *
 * Errors: functions return a tally_code. After a failed call on a client,
 * tally_last_message() says what went wrong (the server's own message when
 * it sent one) and tally_last_status() gives the HTTP status (0 when no
 * answer arrived). A call that fails writes nothing to its output.
 */
#ifndef TALLY_H
#define TALLY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(TALLY_BUILDING)
#define TALLY_API __attribute__((visibility("default")))
#else
#define TALLY_API
#endif

#define TALLY_VERSION_MAJOR 0
#define TALLY_VERSION_MINOR 1
#define TALLY_VERSION_PATCH 0
#define TALLY_VERSION "0.1.0"
/* 0xMMmmpp, for comparisons: TALLY_VERSION_NUM >= 0x000100 */
#define TALLY_VERSION_NUM                                                      \
    ((TALLY_VERSION_MAJOR << 16) | (TALLY_VERSION_MINOR << 8)                  \
     | TALLY_VERSION_PATCH)

/* The version of the library the program runs with, "0.1.0"; static. */
TALLY_API const char *tally_version(void);

/* ------------------------------------------------------------------------
 * Result codes. Codes are only ever appended; their numbers are stable.
 * X(NAME, number, description)
 */
#define TALLY_CODES(X)                                                         \
    X(OK, 0, "no error")                                                       \
    X(ARGUMENT, 1, "bad argument")                                             \
    X(NOMEM, 2, "out of memory")                                               \
    X(URL, 3, "malformed server URL")                                          \
    X(CONNECT, 4, "could not connect to the server")                           \
    X(TIMEOUT, 5, "timed out")                                                 \
    X(NETWORK, 6, "the connection failed during the request")                  \
    X(BUSY, 7, "the server stayed busy (503) through every retry")             \
    X(REJECTED, 8, "the server rejected the request")                          \
    X(TOO_LARGE, 9, "the request is larger than the server accepts")           \
    X(NOT_FOUND, 10, "no such resource on the server")                         \
    X(SERVER, 11, "the server failed")                                         \
    X(PROTOCOL, 12, "the server's answer is not what tally sends")             \
    X(IO, 13, "a file could not be read or written")                           \
    X(FORMAT, 14, "not a valid .npy file")                                     \
    X(UNAUTHORIZED, 15, "the server wants a bearer token, or another one")     \
    X(TLS, 16, "the server's certificate could not be verified")

typedef enum {
#define TALLY_CODE_ENUM(name, num, text) TALLYE_##name = num,
    TALLY_CODES(TALLY_CODE_ENUM)
#undef TALLY_CODE_ENUM
} tally_code;

#define TALLY_OK TALLYE_OK

/* A sentence describing the code; static storage, never NULL (an unknown
 * code gives "unknown error"). */
TALLY_API const char *tally_strerror(tally_code code);

/* The code's name, "TALLYE_BUSY"; static storage, "TALLYE_UNKNOWN" for a
 * code that is not in the table. */
TALLY_API const char *tally_code_name(tally_code code);

/* ------------------------------------------------------------------------
 * Element types, with the server's names ("float32") and sizes.
 */
typedef enum {
    TALLY_DT_FLOAT16,
    TALLY_DT_BFLOAT16,
    TALLY_DT_FLOAT32,
    TALLY_DT_FLOAT64,
    TALLY_DT_INT8,
    TALLY_DT_INT16,
    TALLY_DT_INT32,
    TALLY_DT_INT64,
    TALLY_DT_UINT8,
    TALLY_DT_UINT16,
    TALLY_DT_UINT32,
    TALLY_DT_UINT64,
} tally_dt;

#define TALLY_NDT 12

/* "float32"; static storage; NULL for a value that is not a tally_dt. */
TALLY_API const char *tally_dt_name(tally_dt dtype);

/* KServe's name of the type, as the Open Inference Protocol writes it
 * ("FP32", "BF16"); static storage; NULL for a value that is not a
 * tally_dt. */
TALLY_API const char *tally_dt_kserve(tally_dt dtype);

/* The size of one element in bytes; 0 for a value that is not a tally_dt. */
TALLY_API size_t tally_dt_size(tally_dt dtype);

/* Looks up a dtype by name: "float32" or the KServe name "FP32". Returns
 * the tally_dt, or -1 when the name is unknown or NULL. */
TALLY_API int tally_dt_parse(const char *name);

/* ------------------------------------------------------------------------
 * Clients.
 */
typedef struct tally_client tally_client;

/* A new client with no server URL and default options. Returns NULL only
 * when memory runs out. Free it with tally_client_free(). */
TALLY_API tally_client *tally_client_new(void);

/* Frees the client, closing its connections. NULL is a no-op. */
TALLY_API void tally_client_free(tally_client *c);

/* Adds a server: "http://host:port" or "https://host:port/prefix", the URL
 * under which /v1/cumsum and /v2/... are found. The string is copied. A
 * client with several URLs spreads its requests over them in turn, splits
 * large tensors across them (TALLYOPT_CHUNK_BYTES), and on a refused
 * connection tries the next one. Returns TALLYE_URL for a URL that is not
 * http(s)://host[:port][/path] (no query, no fragment), TALLYE_ARGUMENT
 * for NULL arguments, TALLYE_NOMEM. */
TALLY_API tally_code tally_add_url(tally_client *c, const char *url);

/* Options. The type each one takes is in brackets; defaults in parens. */
typedef enum {
    /* [long] Milliseconds one attempt at a request may take, from connect
     * to the last byte (0: no limit). Sent to the server as X-Timeout-Ms, so
     * that it drops work whose client has given up. (0) */
    TALLYOPT_TIMEOUT_MS = 1,
    /* [long] Milliseconds to wait for a connection. (10000) */
    TALLYOPT_CONNECT_TIMEOUT_MS = 2,
    /* [long] How many times a request is tried again after a 503 or 429
     * (server busy), a refused connection or a connection that broke, each
     * time after a backoff; 0 tries once. An unnumbered chunk of a
     * sequence is tried again after a refused connection only (see
     * tally_cumsum_chunk()). (4) */
    TALLYOPT_RETRIES = 3,
    /* [long] The first backoff in milliseconds; each retry doubles it, with
     * jitter, and waits at least as long as the server's Retry-After. (100) */
    TALLYOPT_BACKOFF_MS = 4,
    /* [long] The longest single backoff, Retry-After included. (10000) */
    TALLYOPT_BACKOFF_MAX_MS = 5,
    /* [long] Tensors larger than this many bytes are split into chunks of
     * at most about this size, scanned concurrently (over every URL) and
     * stitched together on the client; 0 never splits. See the README for
     * what splitting costs. (67108864, 64 MiB; tallyd accepts 256 MiB) */
    TALLYOPT_CHUNK_BYTES = 6,
    /* [long] How many requests a client keeps in flight at once, in
     * batches and in split tensors (1 to 1024). (8) */
    TALLYOPT_MAX_CONNECTIONS = 7,
    /* [long] The largest response tally_http() accepts, in bytes. (1 GiB) */
    TALLYOPT_MAX_RESPONSE_BYTES = 8,
    /* [long] 1 prints libcurl's trace of every request to stderr. (0) */
    TALLYOPT_VERBOSE = 9,
    /* [long] 1 accepts any certificate from an https:// server, and any
     * name in it: for tests only, since anyone on the path can then read
     * and change the tensors. (0: verified against the system's CAs, or
     * TALLYOPT_CAINFO's) */
    TALLYOPT_INSECURE = 10,
    /* [long] 1 says the servers share their sequences' state (tallyd
     * --state-store): a chunk of a sequence may go to any URL, starting
     * with the one its id hashes to, and goes to the next one when a URL
     * refuses the connection or fails. 0: each sequence lives on the
     * server its id hashes to, and its chunks go there only (a refused
     * connection is TALLYE_CONNECT, to be tried again). (0) */
    TALLYOPT_SHARED_STATE = 11,
    /* [string] A bearer token sent as "Authorization: Bearer <token>", for
     * tallyd's --auth-token-file or a proxy in front of it; NULL removes
     * it. (none) */
    TALLYOPT_TOKEN = 100,
    /* [string] The User-Agent header; NULL restores the default.
     * ("libtally/" TALLY_VERSION) */
    TALLYOPT_USER_AGENT = 101,
    /* [string] A PEM file of CA certificates that https:// servers'
     * certificates are verified against, instead of the system's; NULL
     * restores the system's. (none) */
    TALLYOPT_CAINFO = 102,
} tally_option;

/* Sets a [long] option. Returns TALLYE_ARGUMENT for a string option or a
 * value out of range (the message says which), else TALLY_OK. */
TALLY_API tally_code tally_setopt_long(tally_client *c, tally_option opt,
                                       long value);

/* Sets a [string] option; the string is copied. Returns TALLYE_ARGUMENT
 * for a [long] option, TALLYE_NOMEM, else TALLY_OK. */
TALLY_API tally_code tally_setopt_str(tally_client *c, tally_option opt,
                                      const char *value);

/* After a call on c: the HTTP status of the last answer (200 after a
 * success; 0 when no answer arrived or none was needed). */
TALLY_API long tally_last_status(const tally_client *c);

/* After a call on c: what went wrong, in a sentence; the server's own
 * message when it sent one; "" after a success. Borrowed: valid until the
 * next call on c. */
TALLY_API const char *tally_last_message(const tally_client *c);

/* ------------------------------------------------------------------------
 * The cumulative sum.
 */

/* The largest rank the server accepts. */
#define TALLY_MAX_RANK 64

/* Flags for tally_cumsum() and tally_batch_add(). */
#define TALLY_EXCLUSIVE 1u /* each element gets the sum of those before it */
#define TALLY_REVERSE 2u   /* scan from the end of the axis to its start */

/*
 * Computes the cumulative sum of `in` along `axis` into `out`.
 *
 * dtype, rank (1 to TALLY_MAX_RANK) and shape (rank sizes, each >= 0)
 * describe both tensors; axis counts from the front, or from the back when
 * negative (-1 is the last axis). flags: 0 or TALLY_EXCLUSIVE and/or
 * TALLY_REVERSE. `in` and `out` hold the product of the shape elements of
 * dtype each, aligned to the element size (as arrays of the element type
 * are); `out` may be `in` (in place) but must not overlap it otherwise. A
 * tensor with a zero-sized dimension succeeds at once.
 *
 * Tensors up to TALLYOPT_CHUNK_BYTES go in one request; larger ones are
 * split (see TALLYOPT_CHUNK_BYTES). Integers come back exactly as one
 * request computes them; floats within the README's error bound, whose
 * first term doubles when a tensor is split.
 *
 * Returns TALLY_OK, or: TALLYE_ARGUMENT (a bad argument, said in the
 * message), TALLYE_NOMEM, TALLYE_CONNECT, TALLYE_TIMEOUT, TALLYE_NETWORK,
 * TALLYE_BUSY, TALLYE_REJECTED, TALLYE_TOO_LARGE, TALLYE_NOT_FOUND,
 * TALLYE_SERVER, TALLYE_PROTOCOL, TALLYE_UNAUTHORIZED (401 or 403),
 * TALLYE_TLS. On failure `out` is untouched.
 * Needs memory for one more copy of the tensor while it runs (answers are
 * gathered before any byte of `out` is written).
 */
TALLY_API tally_code tally_cumsum(tally_client *c, tally_dt dtype, int rank,
                                  const int64_t *shape, int axis,
                                  unsigned flags, const void *in, void *out);

/* ------------------------------------------------------------------------
 * Sequences: running sums that outlive a request.
 */

/* Flags for tally_cumsum_chunk(), beside TALLY_EXCLUSIVE and
 * TALLY_REVERSE. */
#define TALLY_SEQUENCE_START 4u /* the sequence's first chunk */
#define TALLY_SEQUENCE_END 8u   /* its last: the server frees it */

/*
 * Computes the cumulative sum of one chunk of a sequence (Triton's
 * sequence extension): a tensor cut along `axis` into chunks, one call
 * each, in order (from the last to the first with TALLY_REVERSE). The
 * server keeps the running sum, so that the answers put back together are
 * the cumulative sum of the whole tensor. Arguments as tally_cumsum()'s,
 * plus sequence_id: 1 to 128 bytes of UTF-8 (copied; an id of decimal
 * digits alone names the number, as Triton's numeric ids), and in flags
 * TALLY_SEQUENCE_START on the first chunk (on a live id it starts again
 * from zero) and TALLY_SEQUENCE_END on the last. Every chunk keeps the
 * first one's dtype, axis, flags and shape off the axis; its length along
 * the axis may differ, 0 included (an empty chunk with
 * TALLY_SEQUENCE_END ends a sequence without data).
 *
 * chunk: the chunk's number (sequence_chunk), 1 for the chunk with
 * TALLY_SEQUENCE_START and one more for each after it; or 0 for none (an
 * unnumbered sequence: its chunks are applied in the order they arrive).
 * With numbers the server adds each chunk exactly once, in its number's
 * order: after TALLYE_TIMEOUT, TALLYE_NETWORK or TALLYE_BUSY, call again
 * with the same chunk and number, and a chunk the server had already
 * applied is answered again, not added (docs/sequences.md, "Numbered
 * chunks"); the client's own retries (TALLYOPT_RETRIES) send it again so.
 * An unnumbered chunk is not sent again by the client after a 503 or a
 * connection that broke, either of which may have come after it was
 * added: the failure comes back, and the caller decides.
 *
 * Where a chunk goes, and what follows a failure (the one rule of every
 * tally client: docs/sequences.md, "Clients"):
 *   - A chunk goes whole in one request, never split. Without
 *     TALLYOPT_SHARED_STATE it goes to the URL the id hashes to and to
 *     no other, so that all of a sequence's chunks reach the one server
 *     that keeps it: a server that refuses the connection is retried
 *     there, and then TALLYE_CONNECT says to call again later, never
 *     that the chunk was rejected. With TALLYOPT_SHARED_STATE (the
 *     servers share one store), a retry goes to the next URL.
 *   - After a failure whose outcome the client cannot know (TALLYE_CONNECT,
 *     TALLYE_TIMEOUT, TALLYE_NETWORK, TALLYE_BUSY, TALLYE_SERVER,
 *     TALLYE_PROTOCOL), the next call for that sequence must send the
 *     same chunk again: the same number, flags, shape and bytes. Any
 *     other chunk is refused with TALLYE_ARGUMENT, before anything is
 *     sent, so that a chunk the server never had cannot silently leave
 *     the sum (a numbered chunk sent again is answered once; an
 *     unnumbered one may be added twice). tally_sequence_forget() gives
 *     such a sequence up.
 * Returns tally_cumsum()'s codes; TALLYE_REJECTED when the server refuses
 * the chunk (a sequence that is not live, a chunk unlike its first, a
 * number taken by another chunk or older than the last applied one, a
 * chunk that waited too long for the one before it), and TALLYE_BUSY when
 * it keeps as many sequences as it may.
 */
TALLY_API tally_code tally_cumsum_chunk(tally_client *c,
                                        const char *sequence_id,
                                        uint64_t chunk,
                                        tally_dt dtype, int rank,
                                        const int64_t *shape, int axis,
                                        unsigned flags, const void *in,
                                        void *out);

/* Forgets the failed chunk the client holds for sequence_id (see
 * tally_cumsum_chunk()), so that another chunk may be sent: for a caller
 * that gives the sequence up, or starts it again. TALLY_OK whether or not
 * one was held; TALLYE_ARGUMENT for NULL arguments. */
TALLY_API tally_code tally_sequence_forget(tally_client *c,
                                           const char *sequence_id);

/* ------------------------------------------------------------------------
 * Strided tensors, as DirectML describes buffers (DML_BUFFER_TENSOR_DESC).
 */

/* A tensor in a buffer. Element (i0, ..., i[rank-1]) lies at element
 * sum(i_k * strides[k]) of the buffer; a stride of 0 repeats one element
 * along its dimension (inputs only). */
typedef struct {
    tally_dt dtype;          /* DataType */
    int rank;                /* DimensionCount: 1 to TALLY_MAX_RANK */
    const uint64_t *sizes;   /* Sizes: rank entries, each 1 or more */
    const uint64_t *strides; /* Strides, in elements; NULL: packed */
    /* TotalTensorSizeInBytes: the buffer's size, at least
     * tally_buffer_bytes(); 0 for that minimum. */
    uint64_t total_bytes;
} tally_tensor_desc;

/* DMLCalcBufferTensorSize: the smallest buffer that holds d's elements,
 * (last addressed element + 1) * element size, rounded up to a multiple
 * of 4 bytes. Returns TALLYE_ARGUMENT (for NULL, a bad rank or dtype, a
 * size of 0, or a size over 2^64), else TALLY_OK. */
TALLY_API tally_code tally_buffer_bytes(const tally_tensor_desc *d,
                                        uint64_t *bytes);

/*
 * tally_cumsum() for strided tensors: DirectML's
 * DML_CUMULATIVE_SUMMATION_OPERATOR_DESC with these buffer tensors. The
 * two descriptors must have the same dtype and sizes; out_desc's strides
 * choose the layout of the answer and must not let two elements share an
 * address (a broadcast output is refused). `in` is read from element 0 to
 * the last element in_desc addresses (in_desc->total_bytes bytes when it
 * is not 0); only the elements out_desc addresses are written, no other
 * byte of `out`. `out` may be `in` when the two descriptors are the same
 * (in place); otherwise they must not overlap. axis counts from the back
 * when negative. One request, never split: the input must fit the server's
 * body limit. Returns tally_cumsum()'s codes; on failure `out` is
 * untouched.
 */
TALLY_API tally_code tally_cumsum_strided(tally_client *c,
                                          const tally_tensor_desc *in_desc,
                                          const void *in,
                                          const tally_tensor_desc *out_desc,
                                          void *out, int axis, unsigned flags);

/* ------------------------------------------------------------------------
 * Batches: many independent cumulative sums, run concurrently over a few
 * connections (TALLYOPT_MAX_CONNECTIONS) from one thread.
 */
typedef struct tally_batch tally_batch;

/* A new, empty batch that runs on c. c must outlive the batch and must not
 * be used for anything else while the batch runs. Returns NULL when memory
 * runs out. Free it with tally_batch_free(). */
TALLY_API tally_batch *tally_batch_new(tally_client *c);

/* Frees the batch. NULL is a no-op. */
TALLY_API void tally_batch_free(tally_batch *b);

/* Adds one cumulative sum, with tally_cumsum()'s arguments. The shape is
 * copied; `in` and `out` are borrowed until tally_batch_run() returns. An
 * item's output may be its own input, but must not overlap another item's
 * tensors. Returns TALLYE_ARGUMENT (the item is not added; the client's
 * last message says why), TALLYE_NOMEM, or TALLY_OK; its index is
 * tally_batch_count() - 1. */
TALLY_API tally_code tally_batch_add(tally_batch *b, tally_dt dtype, int rank,
                                     const int64_t *shape, int axis,
                                     unsigned flags, const void *in, void *out);

/* Runs every item added since the last run, concurrently, and returns when
 * all have finished. Each item that succeeds writes its output; one that
 * fails writes nothing and keeps its code, status and message. Returns
 * TALLY_OK when every item succeeded, else the code of the first item (by
 * index) that failed; the client's last status and message are that
 * item's. */
TALLY_API tally_code tally_batch_run(tally_batch *b);

/* The number of items added. */
TALLY_API size_t tally_batch_count(const tally_batch *b);

/* Item i's outcome after a run: its code (TALLYE_ARGUMENT for an index out
 * of range), the HTTP status of its last answer, and its message (borrowed;
 * valid until the batch is freed; "" for a success or a bad index). */
TALLY_API tally_code tally_batch_code(const tally_batch *b, size_t i);
TALLY_API long tally_batch_status(const tally_batch *b, size_t i);
TALLY_API const char *tally_batch_message(const tally_batch *b, size_t i);

/* ------------------------------------------------------------------------
 * Tensors in shared memory, on the server's machine (Triton's system
 * shared-memory extension; the server needs --allow-shared-memory).
 *
 * A region is bytes of a POSIX shared-memory object (shm_open's key, such
 * as "/my_tensors") that the server maps once registered under a name;
 * requests then send only the region's name, an offset and a size, and
 * the server reads the input from it and writes the output into it, no
 * tensor byte crossing the socket. With bearer tokens, a region belongs to
 * the token that registered it.
 */

/* Registers bytes [offset, offset + byte_size) of the object `key` as
 * region `name` (1 to 128 bytes of UTF-8). TALLYE_UNAUTHORIZED when the
 * server refuses shared memory (403: it runs without
 * --allow-shared-memory) or the token; TALLYE_REJECTED (a bad key or
 * range, or the name is taken: 409), TALLYE_NOT_FOUND (no such object),
 * TALLYE_TOO_LARGE (past the server's budget); tally_last_message() says
 * which. */
TALLY_API tally_code tally_shm_register(tally_client *c, const char *name,
                                        const char *key, uint64_t offset,
                                        uint64_t byte_size);

/* Unregisters region `name`, or every region of the caller's when name is
 * NULL. TALLYE_NOT_FOUND for a name that is not registered. */
TALLY_API tally_code tally_shm_unregister(tally_client *c, const char *name);

/* Where a tensor lies: byte_size bytes at offset in a registered region. */
typedef struct {
    const char *region;
    uint64_t offset;
    uint64_t byte_size; /* the input's size exactly; for an output, room */
} tally_shm_place;

/* tally_cumsum() with the input read from *in and the output written to
 * *out, both in registered regions (the same place for in place; places
 * that overlap otherwise are refused). One request, whatever the size. On
 * failure the output's bytes may have been written in part. Returns
 * tally_cumsum()'s codes. */
TALLY_API tally_code tally_cumsum_shm(tally_client *c, tally_dt dtype,
                                      int rank, const int64_t *shape,
                                      int axis, unsigned flags,
                                      const tally_shm_place *in,
                                      const tally_shm_place *out);

/* A region this library makes: a new object under a key of its own
 * ("/tally-PID-N"), mapped here and registered with the server. */
typedef struct tally_shm tally_shm;

/* Makes a region of `bytes` (at least 1) and registers it; *mem is its
 * memory here, *region its name for tally_shm_place. Returns
 * tally_shm_register()'s codes, or TALLYE_IO when the object cannot be
 * made; nothing is left behind on failure. Free with tally_shm_free(). */
TALLY_API tally_code tally_shm_new(tally_client *c, size_t bytes,
                                   tally_shm **out, void **mem,
                                   const char **region);

/* Unregisters the region (when c is not NULL: this sets c's last status
 * and message), unmaps it and removes its object. NULL is a no-op. */
TALLY_API void tally_shm_free(tally_client *c, tally_shm *s);

/* ------------------------------------------------------------------------
 * Any other request: health checks, metadata, JSON tensors.
 */

/*
 * Sends `method` ("GET", "POST") to `path` ("/v2/health/ready", may carry a
 * query string) under the client's first URL (the next ones are tried when
 * it refuses connections), with `body_len` bytes of `body` (NULL and 0 for
 * none) of type `content_type` (NULL for none). Retries like tally_cumsum.
 *
 * On success (a 2xx answer) stores the response body in *response, with a
 * terminating NUL not counted in *response_len (which may be NULL); the
 * caller frees it with tally_free(). On failure *response is NULL, the
 * code says what kind of failure (TALLYE_REJECTED, TALLYE_NOT_FOUND,
 * TALLYE_BUSY, TALLYE_SERVER for answers; TALLYE_CONNECT and the like for
 * none) and tally_last_message() gives the server's error message.
 * Responses above TALLYOPT_MAX_RESPONSE_BYTES fail with TALLYE_TOO_LARGE.
 */
TALLY_API tally_code tally_http(tally_client *c, const char *method,
                                const char *path, const char *content_type,
                                const void *body, size_t body_len,
                                char **response, size_t *response_len);

/* Frees memory the library allocated for the caller. NULL is a no-op. */
TALLY_API void tally_free(void *p);

/* ------------------------------------------------------------------------
 * .npy files (NumPy's format), for programs that keep tensors in them.
 */

/* Read 2-byte arrays ('<u2', '<i2', '<f2', '|V2') as bfloat16. */
#define TALLY_NPY_BFLOAT16 1u

/*
 * Reads an .npy file (format 1.0, 2.0 or 3.0; either byte order; C or
 * Fortran order) from `path`, or standard input when path is "-". Stores
 * its dtype, rank, shape (room for TALLY_MAX_RANK) and data: little-endian,
 * C order, in *data (caller frees with tally_free(); NULL for an empty
 * array) of *bytes bytes. flags: 0 or TALLY_NPY_BFLOAT16.
 *
 * Returns TALLY_OK, TALLYE_IO (the file could not be read; errno is kept),
 * TALLYE_FORMAT (not an .npy file tally can use), TALLYE_NOMEM or
 * TALLYE_ARGUMENT. On failure, when msg is not NULL, a sentence saying why
 * is written to msg (msg_len bytes, NUL-terminated), and nothing is
 * allocated.
 */
TALLY_API tally_code tally_npy_read(const char *path, unsigned flags,
                                    tally_dt *dtype, int *rank, int64_t *shape,
                                    void **data, size_t *bytes, char *msg,
                                    size_t msg_len);

/*
 * Writes an .npy file (format 1.0; 2.0 when the header needs it) holding a
 * little-endian, C-order tensor to `path`, or to standard output when path
 * is "-". A file is written under a temporary name and renamed, so `path`
 * either keeps its old contents or gets the whole new file. bfloat16 is
 * stored as '<u2', since NumPy has no bfloat16.
 *
 * Returns TALLY_OK, TALLYE_IO, TALLYE_ARGUMENT or TALLYE_NOMEM; msg as in
 * tally_npy_read().
 */
TALLY_API tally_code tally_npy_write(const char *path, tally_dt dtype, int rank,
                                     const int64_t *shape, const void *data,
                                     char *msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif
