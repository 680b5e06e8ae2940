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
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAGIC "driftguard-preload 2"         /* protocol.MAGIC */
#define SOCKET_NAME "preload.sock"           /* protocol.SOCKET_NAME */
#define KEY_NAME "preload.key"               /* protocol.KEY_NAME */
#define NONCE 32                             /* protocol.NONCE */
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

static int reaches(const char *cache);

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
    if (reaches(cache)) {
        return -1; /* a tool could plant a socket and a key there: Python renders in-process */
    }
    size_t len = strlen(cache); /* joined as os.path.join does: no second '/' after a trailing one */
    int n = snprintf(out, size, "%s%s%s", cache, cache[len - 1] == '/' ? "" : "/", SOCKET_NAME);
    return (n > 0 && (size_t)n < size && n < 100) ? 0 : -1; /* sun_path is 108 bytes */
}

/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): protocol.mac, with no library to link. */
typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} sha256_ctx;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx *c, const unsigned char *p) {
    uint32_t w[64], a, b, d, e, f, g, h, cc, t1, t2;
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
    c->used = 0;
}

static void sha256_update(sha256_ctx *c, const unsigned char *p, size_t n) {
    c->bytes += n;
    while (n > 0) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->block + c->used, p, take);
        c->used += take, p += take, n -= take;
        if (c->used == 64) {
            sha256_block(c, c->block);
            c->used = 0;
        }
    }
}

static void sha256_final(sha256_ctx *c, unsigned char out[32]) {
    uint64_t bits = c->bytes * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha256_update(c, &pad, 1);
    while (c->used != 56) {
        sha256_update(c, &zero, 1);
    }
    for (int i = 0; i < 8; i++) {
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    }
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24), out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8), out[4 * i + 3] = (unsigned char)c->h[i];
    }
}

/* HMAC-SHA256 with a 32-byte key (the server's, protocol.KEY_NAME). */
static void hmac_sha256(const unsigned char key[32], const unsigned char *msg, size_t n, unsigned char out[32]) {
    unsigned char pad[64], inner[32];
    sha256_ctx c;
    for (int i = 0; i < 64; i++) {
        pad[i] = (unsigned char)((i < 32 ? key[i] : 0) ^ 0x36);
    }
    sha256_init(&c);
    sha256_update(&c, pad, 64);
    sha256_update(&c, msg, n);
    sha256_final(&c, inner);
    for (int i = 0; i < 64; i++) {
        pad[i] = (unsigned char)((i < 32 ? key[i] : 0) ^ 0x5c);
    }
    sha256_init(&c);
    sha256_update(&c, pad, 64);
    sha256_update(&c, inner, 32);
    sha256_final(&c, out);
}

/* protocol.proof: HMAC(key, side NUL server_nonce client_nonce client_pid server_pid (big-endian)). */
static void proof(const unsigned char key[32], const char *side, const unsigned char *server_nonce,
                  const unsigned char *client_nonce, uint32_t client, uint32_t server, unsigned char out[32]) {
    unsigned char msg[8 + 2 * NONCE + 8];
    size_t n = strlen(side) + 1;
    memcpy(msg, side, n);
    memcpy(msg + n, server_nonce, NONCE);
    memcpy(msg + n + NONCE, client_nonce, NONCE);
    n += 2 * NONCE;
    for (int i = 0; i < 4; i++) {
        msg[n + (size_t)i] = (unsigned char)(client >> (24 - 8 * i));
        msg[n + 4 + (size_t)i] = (unsigned char)(server >> (24 - 8 * i));
    }
    hmac_sha256(key, msg, n + 8, out);
}

/* paths.open_private for the key: 0 when `dir`/preload.key is our private regular file of 32 bytes. */
static int read_key(const char *socket, unsigned char key[32]) {
    char path[PATH_MAX];
    const char *slash = strrchr(socket, '/');
    int n = snprintf(path, sizeof path, "%.*s/%s", (int)(slash - socket), socket, KEY_NAME);
    if (n <= 0 || (size_t)n >= sizeof path) {
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    struct stat info;
    unsigned char buf[64];
    ssize_t got = -1;
    if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == geteuid() &&
        (info.st_mode & 022) == 0) {
        got = read(fd, buf, sizeof buf);
    }
    close(fd);
    if (got != 32) {
        return -1;
    }
    memcpy(key, buf, 32);
    return 0;
}

/* Whether `real` is `top` or beneath it (both resolved; `top` as given when it cannot be). */
static int beneath(const char *real, const char *top) {
    char resolved[PATH_MAX];
    if (top == NULL || top[0] != '/') {
        return 0;
    }
    if (realpath(top, resolved) != NULL) {
        top = resolved;
    }
    size_t n = strlen(top);
    while (n > 1 && top[n - 1] == '/') {
        n--;
    }
    if (n == 1) {
        return 1; /* "/" */
    }
    return strncmp(real, top, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

/* Whether a directory of a colon-separated list holds `real`. */
static int beneath_any(const char *real, const char *list) {
    if (list == NULL) {
        return 0;
    }
    char copy[PATH_MAX * 4];
    if (strlen(list) >= sizeof copy) {
        return 1; /* too long to look through: treated as reachable, Python decides */
    }
    strcpy(copy, list);
    char *save = NULL;
    for (char *p = strtok_r(copy, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save)) {
        if (beneath(real, p)) {
            return 1;
        }
    }
    return 0;
}

/* sandbox.reaches: whether a render's tool may read or write `cache` (then no preloading). */
static int reaches(const char *cache) {
    static const char *const system_dirs[] = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
                                              "/etc", "/opt", "/dev", "/proc"};
    char real[PATH_MAX];
    if (realpath(cache, real) == NULL) {
        return 1;
    }
    for (size_t i = 0; i < sizeof system_dirs / sizeof *system_dirs; i++) {
        if (beneath(real, system_dirs[i])) {
            return 1;
        }
    }
    static const char *const tools[] = {"DRIFTGUARD_HELM", "DRIFTGUARD_KUSTOMIZE"};
    for (size_t i = 0; i < 2; i++) {
        const char *tool = getenv(tools[i]);
        char dir[PATH_MAX];
        if (tool != NULL && *tool != '\0') {
            if (realpath(tool, dir) == NULL) {
                if (strlen(tool) >= sizeof dir) {
                    return 1;
                }
                strcpy(dir, tool);
            }
            char *slash = strrchr(dir, '/');
            if (slash == NULL) {
                return 1; /* relative: Python resolves it against the working directory */
            }
            slash[slash == dir ? 1 : 0] = '\0';
            if (beneath(real, dir)) {
                return 1;
            }
        }
    }
    static const char *const single[] = {"SSL_CERT_FILE", "SSL_CERT_DIR", "DRIFTGUARD_CMP_HELM_REGISTRY_CONFIG",
                                         "DRIFTGUARD_CMP_HELM_REPOSITORIES"};
    for (size_t i = 0; i < sizeof single / sizeof *single; i++) {
        if (beneath(real, getenv(single[i]))) {
            return 1;
        }
    }
    return beneath_any(real, getenv("DRIFTGUARD_CMP_TOOL_READ_PATHS")) ||
           beneath_any(real, getenv("DRIFTGUARD_CMP_TOOL_WRITE_PATHS")) || beneath_any(real, getenv("PATH"));
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

/* Exactly `n` bytes from the socket: 0, or -1 on EOF, timeout or error. */
static int recv_exact(int sock, unsigned char *out, size_t n) {
    while (n > 0) {
        ssize_t got = recv(sock, out, n, 0);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return -1;
        }
        out += got, n -= (size_t)got;
    }
    return 0;
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
    /* the render's environment is in this process: no /proc/<pid>/environ or mem for the same uid
       (an exec into Python makes it dumpable again; Python's plugin does the same before a tool) */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
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
    unsigned char hello[1 + NONCE];
    if (recv_exact(sock, hello, sizeof hello) != 0 || hello[0] != 'H') {
        to_python(1); /* no child took the connection: the descriptors are not sent */
    }
    /* both sides prove they hold the server's key before anything that matters is sent */
    unsigned char key[32], answer[NONCE + 32], expected[32], got[32];
    if (read_key(path, key) != 0 || getrandom(answer, NONCE, 0) != NONCE) {
        to_python(1);
    }
    proof(key, "client", hello + 1, answer, (uint32_t)getpid(), (uint32_t)cred.pid, answer + NONCE);
    proof(key, "server", hello + 1, answer, (uint32_t)getpid(), (uint32_t)cred.pid, expected);
    memset(key, 0, sizeof key);
    if (send_all(sock, (const char *)answer, sizeof answer, HANDSHAKE_TIMEOUT_S) != 0 ||
        recv_exact(sock, got, sizeof got) != 0) {
        to_python(1);
    }
    unsigned char diff = 0;
    for (size_t i = 0; i < sizeof got; i++) {
        diff |= (unsigned char)(got[i] ^ expected[i]);
    }
    if (diff != 0) {
        to_python(1); /* not the server the plugin started: it gets nothing */
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
