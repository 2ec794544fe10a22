/*
 * pb_json.h - a protobuf message from its JSON form (proto3's JSON
 * mapping: a field by its name, an enum by its value's name, a 64-bit
 * number as a JSON number or string), so that the gRPC door answers with
 * the documents REST answers with (the metadata, the configuration, the
 * statistics), built once (kserve_json.h, core/stats.h).
 *
 * Ownership: the message is protobuf-c's, freed with
 * protobuf_c_message_free_unpacked(m, NULL). Threading: a pure function;
 * any thread.
 */
#ifndef TALLY_PB_JSON_H
#define TALLY_PB_JSON_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* The message of type d that text[0..len) describes; fields it does not
 * know are left out. NULL when the text is not such a message (a field's
 * value of the wrong kind, an enum name it lacks) or memory runs out. */
ProtobufCMessage *pb_from_json(const ProtobufCMessageDescriptor *d,
                               const char *text, size_t len);

#endif
