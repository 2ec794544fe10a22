/*
 * engine.c - choosing a backend and dispatching scans to it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_device.h"
#include "engine.h"
#include "scan_cl.h"
#include "scan_host.h"

struct tally_engine {
    bool host;
    unsigned host_threads;
    tally_cl_device dev;
    tally_cl_programs progs;
    char describe[320];
    tally_log_fn log;
    void *log_user;
};

struct tally_stream {
    tally_engine *e;
    tally_host *host;
    tally_cl_stream *cl;
};

void tally_engine_options_init(tally_engine_options *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = true;
}

static void log_stderr(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "engine: %s\n", line);
}

static void logf_(tally_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void logf_(tally_engine *e, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    e->log(e->log_user, line);
}

tally_err tally_engine_open(const tally_engine_options *o, tally_engine **out,
                            char *msg, size_t msglen)
{
    tally_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return tally_fail(msg, msglen, TALLY_E_NOMEM, "out of memory");
    e->log = o->log != NULL ? o->log : log_stderr;
    e->log_user = o->log_user;
    e->host_threads = o->host_threads;

    const char *spec = o->device;
    if (spec != NULL && strcmp(spec, "host") == 0) {
        e->host = true;
    } else {
        bool none_at_all = false;
        char why[256];
        tally_err err =
            tally_cl_device_open(spec, &e->dev, &none_at_all, why, sizeof why);
        bool automatic =
            spec == NULL || spec[0] == '\0' || strcmp(spec, "auto") == 0;
        if (err != TALLY_E_OK && automatic && none_at_all) {
            logf_(e, "%s; using the host backend", why);
            e->host = true;
        } else if (err != TALLY_E_OK) {
            free(e);
            return tally_fail(msg, msglen, err, "%s", why);
        }
    }

    if (e->host) {
        tally_host *probe = tally_host_new(o->host_threads);
        if (probe == NULL) {
            free(e);
            return tally_fail(msg, msglen, TALLY_E_NOMEM,
                              "cannot start host threads");
        }
        snprintf(e->describe, sizeof e->describe, "host (%u threads)",
                 tally_host_threads(probe));
        tally_host_free(probe);
    } else {
        tally_cl_layout layout;
        if (!tally_cl_layout_for(&e->dev, o->layout, &layout)) {
            tally_cl_device_close(&e->dev);
            free(e);
            return tally_fail(msg, msglen, TALLY_E_INVALID,
                              "bad kernel layout \"%s\" (expected auto, cpu "
                              "or gpu, optionally with ,key=value overrides)",
                              o->layout);
        }
        tally_cl_programs_init(&e->progs, &e->dev, &layout);
        snprintf(e->describe, sizeof e->describe, "%s (%s layout)", e->dev.name,
                 layout.name);
    }
    logf_(e, "device: %s", e->describe);

    if (o->warmup) {
        tally_err err = tally_engine_warmup(e, msg, msglen);
        if (err != TALLY_E_OK) {
            tally_engine_close(e);
            return err;
        }
    }
    *out = e;
    return TALLY_E_OK;
}

void tally_engine_close(tally_engine *e)
{
    if (e == NULL)
        return;
    if (!e->host) {
        tally_cl_programs_free(&e->progs);
        tally_cl_device_close(&e->dev);
    }
    free(e);
}

const char *tally_engine_describe(const tally_engine *e)
{
    return e->describe;
}

bool tally_engine_is_host(const tally_engine *e)
{
    return e->host;
}

tally_err tally_engine_warmup(tally_engine *e, char *msg, size_t msglen)
{
    if (e->host)
        return TALLY_E_OK;
    tally_stream *s;
    tally_err err = tally_stream_open(e, &s, msg, msglen);
    if (err != TALLY_E_OK)
        return err;
    err = tally_cl_warmup(s->cl, msg, msglen);
    tally_stream_close(s);
    return err;
}

tally_err tally_stream_open(tally_engine *e, tally_stream **out, char *msg,
                            size_t msglen)
{
    tally_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return tally_fail(msg, msglen, TALLY_E_NOMEM, "out of memory");
    s->e = e;
    if (e->host) {
        s->host = tally_host_new(e->host_threads);
        if (s->host == NULL) {
            free(s);
            return tally_fail(msg, msglen, TALLY_E_NOMEM,
                              "cannot start host threads");
        }
    } else {
        s->cl = tally_cl_stream_new(&e->progs, msg, msglen);
        if (s->cl == NULL) {
            free(s);
            return TALLY_E_DEVICE;
        }
    }
    *out = s;
    return TALLY_E_OK;
}

void tally_stream_close(tally_stream *s)
{
    if (s == NULL)
        return;
    tally_host_free(s->host);
    tally_cl_stream_free(s->cl);
    free(s);
}

tally_err tally_scan(tally_stream *s, const tally_scan_desc *d, const void *in,
                     void *out, char *msg, size_t msglen)
{
    tally_lines l;
    tally_err err = tally_lines_from_desc(d, &l, msg, msglen);
    if (err != TALLY_E_OK)
        return err;
    if (s->host != NULL)
        return tally_host_scan(s->host, &l, in, out, msg, msglen);
    return tally_cl_scan(s->cl, &l, in, out, msg, msglen);
}

tally_err tally_scan_inline(const tally_scan_desc *d, const void *in, void *out,
                            char *msg, size_t msglen)
{
    tally_lines l;
    tally_err err = tally_lines_from_desc(d, &l, msg, msglen);
    if (err != TALLY_E_OK)
        return err;
    return tally_host_scan_serial(&l, in, out, msg, msglen);
}

tally_err tally_copy(tally_stream *s, const void *in, void *out, size_t bytes,
                     bool streaming, char *msg, size_t msglen)
{
    if (s->host != NULL) {
        if (in != out)
            memcpy(out, in, bytes);
        return TALLY_E_OK;
    }
    return tally_cl_copy(s->cl, in, out, bytes, streaming, msg, msglen);
}

int tally_engine_list(FILE *f)
{
    return tally_cl_list(f);
}
