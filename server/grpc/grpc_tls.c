/*
 * grpc_tls.c - OpenSSL over memory BIOs for the gRPC door (grpc_tls.h).
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_tls.h"

struct grpc_tls {
    SSL_CTX *ctx;
};

struct grpc_tls_session {
    SSL *ssl;
    BIO *in, *out; /* the socket's side: ciphertext in, ciphertext out */
};

/* ALPN: "h2" or nothing. */
static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                     const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned i = 0; i < inlen && i + 1 + in[i] <= inlen; i += 1u + in[i])
        if (in[i] == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static void openssl_error(char *msg, size_t msglen, const char *what,
                          const char *file)
{
    char why[256] = "";
    unsigned long e = ERR_get_error();
    if (e != 0)
        ERR_error_string_n(e, why, sizeof why);
    snprintf(msg, msglen, "gRPC TLS: %s %s: %s", what, file, why);
    ERR_clear_error();
}

grpc_tls *grpc_tls_new(const char *cert_file, const char *key_file, char *msg,
                       size_t msglen)
{
    grpc_tls *t = calloc(1, sizeof *t);
    if (t == NULL || (t->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
        snprintf(msg, msglen, "gRPC TLS: out of memory");
        free(t);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* RFC 7540 9.2: no renegotiation, no compression */
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
        openssl_error(msg, msglen, "cannot use the certificate", cert_file);
    } else if (SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM)
               != 1) {
        openssl_error(msg, msglen, "cannot use the key", key_file);
    } else if (SSL_CTX_check_private_key(t->ctx) != 1) {
        openssl_error(msg, msglen, "the key does not match the certificate",
                      cert_file);
    } else {
        SSL_CTX_set_alpn_select_cb(t->ctx, select_h2, NULL);
        return t;
    }
    grpc_tls_free(t);
    return NULL;
}

void grpc_tls_free(grpc_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

grpc_tls_session *grpc_tls_accept(grpc_tls *t)
{
    grpc_tls_session *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->ssl = SSL_new(t->ctx);
    s->in = BIO_new(BIO_s_mem());
    s->out = BIO_new(BIO_s_mem());
    if (s->ssl == NULL || s->in == NULL || s->out == NULL) {
        BIO_free(s->in);
        BIO_free(s->out);
        SSL_free(s->ssl);
        free(s);
        return NULL;
    }
    BIO_set_mem_eof_return(s->in, -1); /* empty: "want more", not EOF */
    SSL_set_bio(s->ssl, s->in, s->out); /* the SSL owns them now */
    SSL_set_accept_state(s->ssl);
    return s;
}

void grpc_tls_session_free(grpc_tls_session *s)
{
    if (s == NULL)
        return;
    SSL_free(s->ssl);
    free(s);
}

bool grpc_tls_input(grpc_tls_session *s, const uint8_t *in, size_t n)
{
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int w = BIO_write(s->in, in, chunk);
        if (w <= 0)
            return false;
        in += w;
        n -= (size_t)w;
    }
    return true;
}

long grpc_tls_read(grpc_tls_session *s, uint8_t *out, size_t cap)
{
    int r = SSL_read(s->ssl, out, cap > (1u << 30) ? 1 << 30 : (int)cap);
    if (r > 0)
        return r;
    int e = SSL_get_error(s->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    return -1;
}

bool grpc_tls_ready(grpc_tls_session *s)
{
    return SSL_is_init_finished(s->ssl);
}

bool grpc_tls_write(grpc_tls_session *s, const uint8_t *in, size_t n)
{
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int w = SSL_write(s->ssl, in, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return false;
        }
        in += w;
        n -= (size_t)w;
    }
    return true;
}

uint8_t *grpc_tls_output(grpc_tls_session *s, size_t *len)
{
    size_t n = (size_t)BIO_ctrl_pending(s->out);
    if (n == 0)
        return NULL;
    uint8_t *b = malloc(n);
    if (b == NULL)
        return NULL;
    int r = BIO_read(s->out, b, (int)n);
    if (r <= 0) {
        free(b);
        return NULL;
    }
    *len = (size_t)r;
    return b;
}
