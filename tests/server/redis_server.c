/*
 * redis_server.c - Debian's redis-server, started by a test on a free
 * port (redis_server.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "redis_server.h"

#define REDIS_SERVER "/usr/bin/redis-server"


unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0
        || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* A sync connection of the test's own, for what the store does not say
 * (a key's time to live); NULL until the server answers PING. */
redisContext *sync_conn(unsigned port, const char *password)
{
    redisContext *c = redisConnect("127.0.0.1", (int)port);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    if (password != NULL) {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        if (r != NULL)
            freeReplyObject(r);
    }
    redisReply *r = redisCommand(c, "PING");
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Starts redis-server on port (nothing kept on disk), with `extra`
 * arguments (NULL-terminated; NULL: none); its pid, once it answers, or
 * 0. */
pid_t start_redis_with(unsigned port, const char *password,
                              const char *const *extra)
{
    if (access(REDIS_SERVER, X_OK) != 0) {
        CHECK(0, "no %s: `make deps-test` installs Debian's redis-server",
              REDIS_SERVER);
        return 0;
    }
    char portarg[16];
    snprintf(portarg, sizeof portarg, "%u", port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *argv[24] = {REDIS_SERVER, "--port",      portarg,
                                "--bind",     "127.0.0.1",  "--save",
                                "",           "--appendonly", "no",
                                "--dir",      "/tmp"};
        int n = 11;
        if (password != NULL) {
            argv[n++] = "--requirepass";
            argv[n++] = password;
        }
        for (int i = 0; extra != NULL && extra[i] != NULL && n < 23; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(REDIS_SERVER, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        redisContext *c = sync_conn(port, password);
        if (c != NULL) {
            redisFree(c);
            return pid;
        }
        uv_sleep(25);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK(0, "redis-server did not answer on port %u in 5 s", port);
    return 0;
}

pid_t start_redis(unsigned port, const char *password)
{
    return start_redis_with(port, password, NULL);
}

void stop_redis(pid_t pid, int sig)
{
    if (pid <= 0)
        return;
    kill(pid, SIGCONT);
    kill(pid, sig);
    waitpid(pid, NULL, 0);
}

