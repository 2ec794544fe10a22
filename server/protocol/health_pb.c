/*
 * health_pb.c - grpc.health.v1's two messages (health_pb.h).
 */
#include <string.h>

#include "errors.h"
#include "health_pb.h"
#include "pbwire.h"

bool health_pb_request(const uint8_t *msg, size_t len, char *svc, size_t cap,
                       char *err, size_t errlen)
{
    pb_reader r = {msg, msg + len};
    pb_field f;
    int k;
    svc[0] = '\0';
    while ((k = pb_next(&r, &f)) == 1) {
        if (f.number != 1)
            continue;
        if (f.type != PB_LEN)
            return msg_fail(err, errlen,
                            "HealthCheckRequest.service is not a "
                            "string");
        if (f.span.len > HEALTH_SERVICE_MAX || f.span.len >= cap
            || memchr(f.span.p, 0, f.span.len) != NULL)
            return msg_fail(
                err, errlen,
                "HealthCheckRequest.service is longer than %d bytes or "
                "holds a NUL",
                HEALTH_SERVICE_MAX);
        memcpy(svc, f.span.p, f.span.len);
        svc[f.span.len] = '\0';
    }
    if (k < 0)
        return msg_fail(err, errlen,
                        "the message is not a valid HealthCheckRequest "
                        "(bad protobuf wire format)");
    return true;
}

size_t health_pb_response(int status, uint8_t out[2])
{
    if (status == HEALTH_UNKNOWN)
        return 0;  /* proto3 leaves a default out */
    out[0] = 0x08; /* field 1, varint */
    out[1] = (uint8_t)status;
    return 2;
}
