/*
 * mhd_floor.c - the smallest libmicrohttpd server: every request's body
 * read and answered with the same static bytes, on one internal epoll
 * thread. What libmicrohttpd alone costs a small request, beside tallyd's
 * cost for the same request (make bench-serve BENCH_ARGS="--only small").
 *
 *   mhd_floor PORT ANSWER_FILE CONTENT_TYPE [HEADER VALUE]
 *      PORT: 0 for any (printed as "listening PORT"); the answer's bytes
 *      from ANSWER_FILE, with CONTENT_TYPE and one more header if given
 *      (KServe binary's Inference-Header-Content-Length).
 *
 * Threading: main() starts the daemon and sleeps; libmicrohttpd's one
 * thread runs every callback. A bench tool, not a server.
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *answer;
static size_t answer_len;
static const char *content_type, *extra_name, *extra_value;

/* Reads the body (as a server must), then answers with the static bytes. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (*state == NULL) { /* the headers: the body follows */
        *state = conn;
        return MHD_YES;
    }
    if (*upload_size != 0) { /* a piece of the body, taken */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        answer_len, answer, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra_name != NULL)
        MHD_add_response_header(r, extra_name, extra_value);
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: mhd_floor PORT ANSWER_FILE CONTENT_TYPE "
                        "[HEADER VALUE]\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[2]);
        return 1;
    }
    answer_len = (size_t)ftell(f);
    rewind(f);
    answer = malloc(answer_len ? answer_len : 1);
    if (answer == NULL || fread(answer, 1, answer_len, f) != answer_len) {
        perror(argv[2]);
        return 1;
    }
    fclose(f);
    content_type = argv[3];
    if (argc == 6)
        extra_name = argv[4], extra_value = argv[5];
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD, (uint16_t)atoi(argv[1]), NULL, NULL,
        on_request, NULL, MHD_OPTION_CONNECTION_LIMIT, 4096u, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "mhd_floor: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    const union MHD_DaemonInfo *i =
        MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening %u\n", i != NULL ? (unsigned)i->port : 0u);
    fflush(stdout);
    for (;;)
        pause();
}
