/*
 * log.c - JSON log lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static void stamp(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void log_obj(const char *module, const char *level, json_t *obj)
{
    char ts[40];
    stamp(ts, sizeof ts);
    json_t *line = json_pack("{s:s, s:s, s:s}", "ts", ts, "module", module,
                             "level", level);
    if (line != NULL && obj != NULL)
        json_object_update(line, obj);
    char *text = line != NULL
                     ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER)
                     : NULL;
    if (text != NULL) {
        size_t n = strlen(text);
        text[n] = '\n'; /* json_dumps' NUL becomes the newline */
        ssize_t w = write(STDERR_FILENO, text, n + 1);
        (void)w;
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
