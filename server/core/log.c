/*
 * log.c - JSON log lines through one buffer.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "tx_utf8.h"

#define LOG_BUFFER (64 * 1024)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char buffer[LOG_BUFFER];
static size_t used;
static int out_fd = STDERR_FILENO;

void log_to(int fd)
{
    pthread_mutex_lock(&mu);
    out_fd = fd;
    pthread_mutex_unlock(&mu);
}

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(out_fd, p, n);
        if (w <= 0)
            return; /* nowhere to report a failing stderr */
        p += w;
        n -= (size_t)w;
    }
}

/* Called with mu held. */
static void flush_locked(void)
{
    write_all(buffer, used);
    used = 0;
}

void log_flush(void)
{
    pthread_mutex_lock(&mu);
    flush_locked();
    pthread_mutex_unlock(&mu);
}

void log_access(const char *line, size_t len)
{
    pthread_mutex_lock(&mu);
    if (used + len + 1 > LOG_BUFFER)
        flush_locked();
    if (len + 1 > LOG_BUFFER) {
        write_all(line, len);
        write_all("\n", 1);
    } else {
        memcpy(buffer + used, line, len);
        buffer[used + len] = '\n';
        used += len + 1;
    }
    pthread_mutex_unlock(&mu);
}

void log_stamp(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

size_t log_escape(const char *s, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *s != '\0' && n + 7 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80) {
            /* a whole valid UTF-8 sequence, else '?': the line must stay
             * JSON whatever bytes a client sent */
            size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            if (strnlen(s, k) < k || tx_utf8_valid(s, k) != k) {
                out[n++] = '?';
                continue;
            }
            if (n + k + 7 >= outlen)
                break;
            for (size_t i = 0; i < k; i++)
                out[n++] = s[i];
            s += k - 1;
        } else if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, outlen - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return n;
}

/* Logs the members of obj (a JSON object; this takes its reference) with
 * "ts", "module" and "level" added in front. */
static void log_obj(const char *module, const char *level, json_t *obj)
{
    char ts[40];
    log_stamp(ts, sizeof ts);
    json_t *line = json_pack("{s:s, s:s, s:s}", "ts", ts, "module", module,
                             "level", level);
    if (line != NULL && obj != NULL)
        json_object_update(line, obj);
    char *text = line != NULL
                     ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER)
                     : NULL;
    if (text != NULL) {
        pthread_mutex_lock(&mu);
        flush_locked(); /* keep the order of lines */
        size_t n = strlen(text);
        text[n] = '\n'; /* json_dumps' NUL becomes the newline */
        write_all(text, n + 1);
        pthread_mutex_unlock(&mu);
        free(text);
    }
    json_decref(line);
    json_decref(obj);
}

void log_msg(const char *module, const char *level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_obj(module, level, json_pack("{s:s}", "msg", msg));
}
