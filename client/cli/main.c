/*
 * main.c - the `tally` command: the usage text, and dispatch to a
 * subcommand (cumsum.c, info.c, bench.c). The helpers the subcommands
 * share are in common.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: tally <command> [options] [arguments]\n"
    "\n"
    "The command-line client of tally, a cumulative-sum service.\n"
    "\n"
    "Commands:\n"
    "  cumsum IN OUT   the cumulative sum of an .npy (or JSON, or raw) tensor\n"
    "  health          whether servers are live and ready\n"
    "  info            server and model metadata\n"
    "  bench           load a server and report requests/s, MB/s, latency\n"
    "  version         the version of tally and libtally\n"
    "\n"
    "`tally <command> --help` describes a command and its options.\n"
    "\n"
    "Servers: --url URL (repeatable), else $TALLY_URL (comma-separated),\n"
    "else http://127.0.0.1:8080. Start one with `make run` or `tallyd`.\n"
    "\n"
    "Exit codes: 0 success; 1 the server answered with an error (or is not\n"
    "ready); 2 bad command line; 3 no answer (refused, unreachable, timed\n"
    "out); 4 a local file could not be read or written.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "cumsum") == 0)
        return cmd_cumsum(argc, argv);
    if (strcmp(cmd, "health") == 0)
        return cmd_health(argc, argv);
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc, argv);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("tally %s (libtally %s)\n", TALLY_VERSION, tally_version());
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0
        || strcmp(cmd, "-h") == 0) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            char *help[] = {argv[0], argv[2], "--help", NULL};
            return main(3, help);
        }
        fputs(usage, stdout);
        return EXIT_OK;
    }
    fprintf(stderr,
            "tally: unknown command \"%s\"; the commands are cumsum, health, "
            "info, bench and version (see tally --help)\n",
            cmd);
    return EXIT_USAGE;
}
