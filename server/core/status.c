/*
 * status.c - names, descriptions, HTTP statuses and gRPC codes of the
 * daemon's statuses. Each lookup is a switch over the table with no
 * default, so that -Wswitch flags a status one of them forgets.
 */
#include <stdbool.h>

#include "status.h"

/* The engine's codes are the table's first rows, in the same order. */
#define STATUS_SAME_AS_ENGINE(name, text)                                      \
    _Static_assert((int)ENG_E_##name == (int)STATUS_##name,                    \
                   "status.h's first rows are engine/errors.h's codes");
ENG_ERRORS(STATUS_SAME_AS_ENGINE)
#undef STATUS_SAME_AS_ENGINE

status_code status_from_eng(eng_err e)
{
    return (unsigned)e < (unsigned)ENG_NERRORS ? (status_code)e : STATUS_DEVICE;
}

const char *status_name(status_code s)
{
    switch (s) {
#define STATUS_NAME(name, http, grpc, text)                                    \
    case STATUS_##name: return #name;
        TALLY_STATUSES(STATUS_NAME)
#undef STATUS_NAME
    }
    return "UNKNOWN";
}

const char *status_text(status_code s)
{
    switch (s) {
#define STATUS_TEXT(name, http, grpc, text)                                    \
    case STATUS_##name: return text;
        TALLY_STATUSES(STATUS_TEXT)
#undef STATUS_TEXT
    }
    return "unknown error";
}

int status_http(status_code s)
{
    switch (s) {
#define STATUS_HTTP(name, http, grpc, text)                                    \
    case STATUS_##name: return http;
        TALLY_STATUSES(STATUS_HTTP)
#undef STATUS_HTTP
    }
    return 500;
}

int status_grpc(status_code s)
{
    switch (s) {
#define STATUS_GRPC(name, http, grpc, text)                                    \
    case STATUS_##name: return grpc;
        TALLY_STATUSES(STATUS_GRPC)
#undef STATUS_GRPC
    }
    return GRPC_INTERNAL;
}

bool status_retry_later(status_code s)
{
    return s == STATUS_QUEUE_FULL || s == STATUS_DRAINING || s == STATUS_NOMEM
           || s == STATUS_SEQUENCES_FULL || s == STATUS_STORE;
}
