/*
 * cli.h - what the `tally` command's subcommands share: option parsing,
 * the options every subcommand takes (servers, timeouts, retries), exit
 * codes and error reports (common.c). The CLI uses libtally's public
 * header, and of the code the client and the server share (common/) only
 * the atomic file write.
 *
 * Threading: one thread, the command's; libtally keeps a call's
 * concurrent requests on that thread too (a curl multi handle).
 */
#ifndef TALLY_CLI_H
#define TALLY_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "tally.h"

/* Exit codes, for scripts (listed in `tally --help`). */
enum {
    EXIT_OK = 0,
    EXIT_SERVER = 1,  /* the server answered with an error, or not ready */
    EXIT_USAGE = 2,   /* bad command line */
    EXIT_NETWORK = 3, /* no answer: refused, unreachable, timed out */
    EXIT_FILE = 4,    /* a local file could not be read or written */
};

/* One option of a subcommand. */
typedef enum { OPT_FLAG, OPT_STRING, OPT_LONG } opt_kind;

typedef struct {
    const char *name; /* without the dashes: "axis" */
    opt_kind kind;
    void *value;      /* bool *, const char **, long * */
    bool negative_ok; /* OPT_LONG: may be below zero */
} cli_opt;

/* The options every subcommand that talks to a server takes. */
typedef struct {
    const char *urls[32];
    int nurls;
    long timeout_ms, connect_timeout_ms, retries, chunk_bytes, connections;
    const char *token, *cacert;
    bool verbose, insecure;
} cli_common;

/* Defaults: no URL yet (TALLY_URL or http://127.0.0.1:8080 later), every
 * number -1 meaning "the library's default". */
void cli_common_init(cli_common *o);

/*
 * Parses argv[first..argc) against `opts` and the common options (when
 * common is not NULL), both "--name value" and "--name=value"; "--" ends
 * options. Positional arguments are stored in pos (at most max_pos; "-"
 * counts as one). Returns EXIT_OK, EXIT_USAGE after printing what is wrong
 * and how to get help, or -1 when --help was asked for.
 */
int cli_parse(const char *cmd, const cli_opt *opts, cli_common *common,
              int argc, char **argv, int first, const char **pos, int max_pos,
              int *npos);

/* The start of every subcommand: initialises *common (when not NULL),
 * parses the command line with cli_parse, prints `help` to stdout for
 * --help. Returns -1 when the command should go on, else the exit code to
 * return at once. */
int cli_begin(const char *cmd, const char *help, const cli_opt *opts,
              cli_common *common, int argc, char **argv, const char **pos,
              int max_pos, int *npos);

/* A client with the common options applied; prints why and returns NULL
 * when that fails (*exit_code set). url_index >= 0 makes a client of that
 * one URL only. */
tally_client *cli_client(const char *cmd, const cli_common *o, int url_index,
                         int *exit_code);

/* The URLs to use: the --url options, else TALLY_URL (comma-separated),
 * else http://127.0.0.1:8080. Fills o->urls. */
void cli_resolve_urls(cli_common *o);

/* The exit code for a library result. */
int cli_exit_code(tally_code code);

/* Prints "tally CMD: MESSAGE" and a hint for the kind of failure to
 * stderr; returns the exit code. */
int cli_fail(const char *cmd, tally_code code, const char *message);

/* Prints "tally CMD: " and the formatted text to stderr. */
void cli_say(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses "3,4,5" into shape; false (after printing why) when malformed. */
bool cli_parse_shape(const char *cmd, const char *text, int *rank,
                     int64_t *shape);

/* The same for option opt ("--strides"), which messages name. */
bool cli_parse_sizes(const char *cmd, const char *opt, const char *text,
                     int *rank, int64_t *shape);

/* Reads a whole file ("-": standard input) into a new buffer (free()),
 * with a NUL after it; false (after printing why) on failure. */
bool cli_read_file(const char *cmd, const char *path, char **data, size_t *len);

/* Writes a whole file ("-": standard output), through a temporary file
 * renamed into place; false (after printing why) on failure. */
bool cli_write_file(const char *cmd, const char *path, const void *data,
                    size_t len);

/* Subcommands: each returns its exit code. */
int cmd_cumsum(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
