/*
 * textbuf.c - the growing text buffer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "textbuf.h"

void textbuf_init(textbuf *t, size_t cap)
{
    t->cap = cap > 0 ? cap : 64;
    t->len = 0;
    t->buf = malloc(t->cap);
    t->oom = t->buf == NULL;
    if (!t->oom)
        t->buf[0] = '\0';
}

void textbuf_put(textbuf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    textbuf_vput(t, fmt, ap);
    va_end(ap);
}

void textbuf_vput(textbuf *t, const char *fmt, va_list ap)
{
    if (t->oom)
        return;
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, aq);
        va_end(aq);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t ncap = t->cap * 2 + (size_t)n;
        char *nb = realloc(t->buf, ncap);
        if (nb == NULL) {
            t->oom = true;
            return;
        }
        t->buf = nb;
        t->cap = ncap;
    }
}

char *textbuf_take(textbuf *t, size_t *len)
{
    if (t->oom) {
        free(t->buf);
        t->buf = NULL;
        return NULL;
    }
    *len = t->len;
    char *b = t->buf;
    t->buf = NULL;
    return b;
}
