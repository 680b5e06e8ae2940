/*
 * driftguard-cmp's native front: `generate` handed to the preload server without starting Python.
 *
 * On this project's benchmark machine a Python interpreter takes ~25 ms to start before it runs a
 * line (~10 ms in the image's optimised build), and with the preload server on (cmp_plugin/
 * preload/) that start-up was the largest part of what driftguard adds to a small chart's render.
 * This program is the client half of the preload protocol and nothing else: it is
 * cmp_plugin.preload.client.run_preloaded written without an interpreter, byte for byte the same request,
 * the same checks in the same order. (One difference: the environment is exactly the one Argo CD
 * gave; a Python caller sends LC_CTYPE=C.UTF-8 too where the locale was C, its own PEP 538
 * coercion, which no render reads: cmp_plugin/process.py passes tools a fixed set of variables.) Whatever it does not handle it hands to the Python command,
 * by execv, with the same arguments and environment:
 *
 *   - any command but `generate`, or DRIFTGUARD_CMP_PRELOAD not on: exec at once;
 *   - no server listening (nothing at the socket, a stale socket), a missing or unsafe cache
 *     directory, a server of another session, an environment Python would read differently
 *     (an entry without '=', a name given twice): exec, and the Python caller decides as before
 *     (it starts the server where it should);
 *   - a server there that cannot take this render (busy, another uid, no HELLO, no READY, any
 *     error before GO): exec with DRIFTGUARD_CMP_PRELOAD removed, so Python renders in-process at
 *     once instead of asking the same server again.
 *
 * After GO the render is the server's child's (it joined this process group, which
 * argocd-cmp-server kills on timeout, cmpserver/plugin/plugin.go runCommand upstream); this
 * process waits for its exit code and exits with it.
 *
 * What reaches the server is what the platform controls (this process's uid, group, descriptors)
 * and the environment, which the child reads after the fork. Nothing here parses what a tenant
 * wrote. No shell, no PATH search: the Python command is the file beside this one.
 *
 * Build: scripts/build_front.py (cc -O2, warnings as errors); installed as driftguard-cmp in
 * place of pip's script, which stays as driftguard-cmp-py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAGIC "driftguard-preload 1"         /* protocol.MAGIC */
#define SOCKET_NAME "preload.sock"           /* protocol.SOCKET_NAME */
#define HANDSHAKE_TIMEOUT_S 2                /* protocol.HANDSHAKE_TIMEOUT */
#define MAX_REQUEST (4u << 20)               /* protocol.MAX_REQUEST */
#define FIRST_CHUNK 65536                    /* the part of the request sent with the descriptors */
#define PYTHON_COMMAND "driftguard-cmp-py"   /* pip's console script for cmp_plugin.__main__:main */
#ifndef PYTHON_COMMAND_PATH                  /* its absolute path, given by scripts/build_front.py */
#define PYTHON_COMMAND_PATH ""
#endif

static char **g_argv;

/* Exit 2 with a message; SIGPIPE ignored first: a stderr nobody reads must not kill us by signal. */
static void fail(const char *what, const char *detail) {
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "driftguard: error: %s%s\n", what, detail);
    _exit(2);
}

/* The Python command: the path built in, else the file beside /proc/self/exe; never a binary (a loop). */
static void python_command(char *out, size_t size) {
    if (PYTHON_COMMAND_PATH[0] == '/' && access(PYTHON_COMMAND_PATH, X_OK) == 0 &&
        strlen(PYTHON_COMMAND_PATH) < size) {
        strcpy(out, PYTHON_COMMAND_PATH);
    } else {
        ssize_t n = readlink("/proc/self/exe", out, size - 1);
        if (n <= 0) {
            fail("cannot find the driftguard-cmp-py command (/proc/self/exe): ", strerror(errno));
        }
        out[n] = '\0';
        char *slash = strrchr(out, '/');
        if (slash == NULL || (size_t)(slash - out) + 1 + sizeof PYTHON_COMMAND > size) {
            fail("cannot find the driftguard-cmp-py command beside ", out);
        }
        strcpy(slash + 1, PYTHON_COMMAND);
    }
    char head[2] = {0, 0};
    int fd = open(out, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, head, sizeof head) : -1;
    if (fd >= 0) {
        close(fd);
    }
    if (got != 2 || head[0] != '#' || head[1] != '!') {
        fail("driftguard-cmp-py is not pip's Python script: ", out); /* this program again: a loop */
    }
}

/* Hand the command to Python; `in_process` drops DRIFTGUARD_CMP_PRELOAD so it renders at once. */
static void to_python(int in_process) {
    char command[PATH_MAX];
    python_command(command, sizeof command);
    if (in_process) {
        unsetenv("DRIFTGUARD_CMP_PRELOAD");
    }
    execv(command, g_argv);
    fail("cannot run driftguard-cmp-py: ", strerror(errno));
}

/* protocol.enabled: the words settings.boolean reads as true, surrounding whitespace ignored. */
static int enabled(void) {
    const char *v = getenv("DRIFTGUARD_CMP_PRELOAD");
    if (v == NULL) {
        return 0;
    }
    while (*v == ' ' || (*v >= '\t' && *v <= '\r')) {
        v++;
    }
    size_t len = strlen(v);
    while (len > 0 && (v[len - 1] == ' ' || (v[len - 1] >= '\t' && v[len - 1] <= '\r'))) {
        len--;
    }
    static const char *const words[] = {"1", "true", "yes", "on"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        if (len == strlen(words[i]) && strncasecmp(v, words[i], len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* paths.cache_dir + protocol.socket_path: 0 and the path when the directory is ours and private. */
static int socket_path(char *out, size_t size) {
    const char *cache = getenv("DRIFTGUARD_CMP_CACHE_DIR");
    char buf[PATH_MAX];
    if (cache == NULL || *cache == '\0') {
        const char *tmp = getenv("TMPDIR");
        if (tmp == NULL || *tmp == '\0') {
            tmp = "/tmp";
        }
        if ((size_t)snprintf(buf, sizeof buf, "%s/driftguard", tmp) >= sizeof buf) {
            return -1;
        }
        cache = buf;
    }
    if (cache[0] != '/') {
        return -1; /* relative: inside the checkout; Python refuses it with a clear error */
    }
    struct stat info;
    if (lstat(cache, &info) != 0) {
        return -1; /* missing: Python creates it (and starts the server) */
    }
    if (!S_ISDIR(info.st_mode) || info.st_uid != geteuid() || (info.st_mode & 022) != 0) {
        return -1;
    }
    size_t len = strlen(cache); /* joined as os.path.join does: no second '/' after a trailing one */
    int n = snprintf(out, size, "%s%s%s", cache, cache[len - 1] == '/' ? "" : "/", SOCKET_NAME);
    return (n > 0 && (size_t)n < size && n < 100) ? 0 : -1; /* sun_path is 108 bytes */
}

static int cmp_key(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t lx = strcspn(x, "="), ly = strcspn(y, "=");
    int c = memcmp(x, y, lx < ly ? lx : ly);
    return c != 0 ? c : (lx > ly) - (lx < ly);
}

/* Whether Python's os.environ holds exactly environ[]: every entry has a name and '=', no name twice. */
static int plain_environment(size_t count) {
    const char **sorted = malloc((count + 1) * sizeof *sorted);
    if (sorted == NULL) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        const char *eq = strchr(environ[i], '=');
        if (eq == NULL || eq == environ[i]) {
            free(sorted);
            return 0;
        }
        sorted[i] = environ[i];
    }
    qsort(sorted, count, sizeof *sorted, cmp_key);
    int ok = 1;
    for (size_t i = 1; i < count && ok; i++) {
        ok = cmp_key(&sorted[i - 1], &sorted[i]) != 0;
    }
    free(sorted);
    return ok;
}

/* protocol.encode_request: a 4-byte big-endian length, then MAGIC, umask, pgid, K=V..., NUL-separated. */
static char *encode_request(size_t count, size_t *length) {
    mode_t mask = umask(0);
    umask(mask);
    char head[96];
    int n = snprintf(head, sizeof head, "%s%c%u%c%ld", MAGIC, '\0', (unsigned)mask, '\0', (long)getpgrp());
    if (n <= 0 || (size_t)n >= sizeof head) {
        return NULL;
    }
    size_t body = (size_t)n;
    for (size_t i = 0; i < count; i++) {
        body += 1 + strlen(environ[i]);
        if (body > MAX_REQUEST) {
            return NULL; /* Python refuses it too, and renders in-process */
        }
    }
    char *data = malloc(4 + body);
    if (data == NULL) {
        return NULL;
    }
    data[0] = (char)(body >> 24);
    data[1] = (char)(body >> 16);
    data[2] = (char)(body >> 8);
    data[3] = (char)body;
    char *p = data + 4;
    memcpy(p, head, (size_t)n);
    p += n;
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(environ[i]);
        *p++ = '\0';
        memcpy(p, environ[i], len);
        p += len;
    }
    *length = 4 + body;
    return data;
}

static void set_timeout(int sock, int seconds) {
    struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* One byte from the socket: the byte, or -1 on EOF, timeout or error. */
static int recv_byte(int sock) {
    unsigned char c;
    for (;;) {
        ssize_t n = recv(sock, &c, 1, 0);
        if (n == 1) {
            return c;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return -1;
    }
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Python's sendall with a timeout: the whole of `data` within `timeout_s` (0: no deadline). */
static int send_all(int sock, const char *data, size_t length, int timeout_s) {
    long long deadline = now_ms() + (long long)timeout_s * 1000;
    while (length > 0) {
        if (timeout_s > 0) {
            long long left = deadline - now_ms();
            struct pollfd p = {.fd = sock, .events = POLLOUT};
            int ready = left > 0 ? poll(&p, 1, (int)left) : 0;
            if (ready < 0 && errno == EINTR) {
                continue;
            }
            if (ready <= 0) {
                return -1;
            }
        }
        ssize_t n = send(sock, data, length, MSG_NOSIGNAL | (timeout_s > 0 ? MSG_DONTWAIT : 0));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            return -1;
        }
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    g_argv = argv;
    if (argc != 2 || strcmp(argv[1], "generate") != 0 || !enabled()) {
        to_python(0);
    }
    char path[PATH_MAX];
    if (socket_path(path, sizeof path) != 0) {
        to_python(0);
    }
    size_t count = 0;
    while (environ[count] != NULL) {
        count++;
    }
    if (!plain_environment(count)) {
        to_python(0);
    }
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0) {
            /* closed: the socket would take its number and be sent as the render's stdio */
            to_python(1);
        }
    }
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0) {
        to_python(0);
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, path, strlen(path) + 1);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        /* a full backlog (EAGAIN): busy, not gone; anything else: no server, Python starts one */
        to_python(errno == EAGAIN);
    }
    int flags = fcntl(sock, F_GETFL);
    if (flags < 0 || fcntl(sock, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        to_python(1);
    }
    set_timeout(sock, HANDSHAKE_TIMEOUT_S);
    struct ucred cred;
    socklen_t cred_len = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 || cred.uid != geteuid() ||
        cred.pid <= 0) {
        to_python(1); /* someone else's socket, or a server in another PID namespace */
    }
    pid_t server_sid = getsid(cred.pid);
    if (server_sid < 0) {
        to_python(1); /* it is gone, or not ours to ask */
    }
    if (server_sid != getsid(0)) {
        to_python(0); /* a server of another session: Python starts one of this session */
    }
    if (recv_byte(sock) != 'H') {
        to_python(1); /* no child took the connection: the descriptors are not sent */
    }
    int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) {
        to_python(1);
    }
    size_t length = 0;
    char *request = encode_request(count, &length);
    if (request == NULL) {
        to_python(1);
    }
    int fds[4] = {0, 1, 2, cwd};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    size_t first = length < FIRST_CHUNK ? length : FIRST_CHUNK;
    struct iovec iov = {.iov_base = request, .iov_len = first};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    ssize_t sent;
    do {
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0 || send_all(sock, request + sent, length - (size_t)sent, HANDSHAKE_TIMEOUT_S) != 0) {
        to_python(1);
    }
    free(request);
    close(cwd);
    if (recv_byte(sock) != 'R') {
        to_python(1); /* the child could not take the render over: nothing has run */
    }
    if (send_all(sock, "G", 1, HANDSHAKE_TIMEOUT_S) != 0) {
        to_python(1);
    }
    /* from here the render is the child's; argocd-cmp-server times it */
    set_timeout(sock, 0);
    int code = recv_byte(sock);
    if (code >= 0) {
        _exit(code);
    }
    fail("the preloaded render process ended without an exit code", "");
}
