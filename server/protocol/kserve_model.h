/*
 * kserve_model.h - what tally says of itself in KServe's terms: the
 * server (name, extensions) and its one model (name, versions, platform,
 * inputs, outputs, configuration). Written once here; rendered as JSON
 * for REST (kserve_json.c) and as protobuf for gRPC (api/grpc_service.c), so
 * both doors describe the same model.
 *
 * Threading: constant data; any thread.
 */
#ifndef TALLY_KSERVE_MODEL_H
#define TALLY_KSERVE_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#define KSERVE_MODEL "cumsum"
#define KSERVE_VERSION "1"

typedef struct {
    const char *name;     /* "x" */
    const char *datatype; /* KServe's name, "FP32"; the configuration's
                           * data type is "TYPE_" and this */
    long long dim;        /* one dimension, -1: any length */
} kserve_tensor_info;

typedef struct {
    const char *server;     /* "tally" */
    const char *name;       /* KSERVE_MODEL */
    const char *version;    /* KSERVE_VERSION, its one version */
    const char *platform;   /* "tally" */
    const char *backend;    /* "tally" */
    int max_batch_size;     /* 0: the model batches nothing itself */
    kserve_tensor_info input, output;
} kserve_model_info;

extern const kserve_model_info kserve_model;

/* The protocol extensions the server supports, into list (room for
 * KSERVE_MAX_EXTENSIONS; static strings); returns how many:
 * system_shared_memory only when `shm` is on, sequence and
 * sequence(string_id) only when `seq` is (--max-sequences above 0). */
#define KSERVE_MAX_EXTENSIONS 8
size_t kserve_extensions(bool shm, bool seq, const char **list);

#endif
