/*
 * health_pb.h - gRPC's health checking protocol (grpc.health.v1, as
 * grpc/health/v1/health.proto describes it), in protobuf's wire format:
 *   message HealthCheckRequest  { string service = 1; }
 *   message HealthCheckResponse { ServingStatus status = 1; }
 *   enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2;
 *                        SERVICE_UNKNOWN = 3; }
 * Two fields: read and written with pbwire.h rather than generated code.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_HEALTH_PB_H
#define TALLY_HEALTH_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    HEALTH_UNKNOWN = 0,
    HEALTH_SERVING = 1,
    HEALTH_NOT_SERVING = 2,
    HEALTH_SERVICE_UNKNOWN = 3
};

/* The longest service name taken. */
#define HEALTH_SERVICE_MAX 200

/* Reads a HealthCheckRequest of len bytes: its service into svc
 * (NUL-terminated, cap bytes at least HEALTH_SERVICE_MAX + 1). False with
 * a message when the bytes are no such message, or the name is longer
 * than HEALTH_SERVICE_MAX or holds a NUL. Unknown fields are skipped. */
bool health_pb_request(const uint8_t *msg, size_t len, char *svc, size_t cap,
                       char *err, size_t errlen);

/* Writes a HealthCheckResponse with status into out (2 bytes at most);
 * returns its length. */
size_t health_pb_response(int status, uint8_t out[2]);

#endif
