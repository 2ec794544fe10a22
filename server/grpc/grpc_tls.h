/*
 * grpc_tls.h - TLS for the gRPC door: OpenSSL over memory buffers, so that
 * libuv keeps the socket, with ALPN "h2" required.
 *
 * The same --tls-cert and --tls-key as HTTPS (PEM). A client that offers
 * ALPN without "h2" fails the handshake (no_application_protocol); one
 * that offers no ALPN at all is served HTTP/2, as gRPC clients expect.
 *
 * Ownership: a grpc_tls (the context) outlives its connections' sessions.
 * Threading: each transport has its own context (grpc_start_on), used
 * only on the thread that runs that transport's loop: the loop thread or
 * a gRPC loop thread.
 */
#ifndef TALLY_GRPC_TLS_H
#define TALLY_GRPC_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grpc_tls grpc_tls;
typedef struct grpc_tls_session grpc_tls_session;

/* The context over the certificate chain and key files; NULL with msg
 * when they cannot be read or do not match. */
grpc_tls *grpc_tls_new(const char *cert_file, const char *key_file, char *msg,
                       size_t msglen);
void grpc_tls_free(grpc_tls *t);

/* A server session for one connection; NULL when out of memory. */
grpc_tls_session *grpc_tls_accept(grpc_tls *t);
void grpc_tls_session_free(grpc_tls_session *s);

/* Ciphertext that came from the socket. */
bool grpc_tls_input(grpc_tls_session *s, const uint8_t *in, size_t n);

/* Plaintext decrypted so far, at most cap bytes: > 0 bytes, 0 when more
 * ciphertext is needed, -1 when the session failed (a bad handshake, a
 * bad record, the peer's close_notify). Runs the handshake first. */
long grpc_tls_read(grpc_tls_session *s, uint8_t *out, size_t cap);

/* Whether the handshake is done (plaintext may be written). */
bool grpc_tls_ready(grpc_tls_session *s);

/* Encrypts plaintext to send, once ready; false on failure. */
bool grpc_tls_write(grpc_tls_session *s, const uint8_t *in, size_t n);

/* Ciphertext waiting to go to the socket: a malloc'd buffer (the
 * caller's to free) and its length, or NULL when none. */
uint8_t *grpc_tls_output(grpc_tls_session *s, size_t *len);

#endif
