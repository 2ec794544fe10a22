/*
 * invariant.c - a broken invariant, said and aborted (invariant.h). It
 * writes its one JSON log line itself, so that the codecs, which link
 * without the log, can assert too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "invariant.h"

/* s as a JSON string's contents, on stderr. */
static void put_escaped(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c < 0x20)
            fprintf(stderr, "\\u%04x", c);
        else
            fputc(c, stderr);
    }
}

_Noreturn void invariant_failed(const char *file, int line, const char *what)
{
    fprintf(stderr, "{\"module\":\"tallyd\",\"level\":\"error\",\"msg\":"
                    "\"invariant broken at ");
    put_escaped(file);
    fprintf(stderr, ":%d: ", line);
    put_escaped(what);
    fprintf(stderr, "\"}\n");
    fflush(stderr);
    abort();
}
