"""The speed path: ``generate`` forked from a process that has already imported the plugin.

A small chart renders with helm in ~70 ms; before this, ``driftguard-cmp generate`` spent about as
long again starting Python and importing the plugin (~20 ms interpreter, ~70 ms of imports: CPU
time on the render's critical path, measured with bench/real_charts.py). With
``DRIFTGUARD_CMP_PRELOAD=on`` (the shipped sidecar manifests set it) the first ``generate`` starts a
*preload server* beside the cache (``$DRIFTGUARD_CMP_CACHE_DIR/preload.sock``) and renders as usual;
every later ``generate`` connects to a child the server has forked ahead (it waits in accept(),
every module loaded; the server forks the next as soon as one takes a connection, so the fork is
never on a render's path). The child then becomes this render completely:

- it joins the calling command's process group, so argocd-cmp-server's kill of that group on
  timeout or after the command (``cmpserver/plugin/plugin.go``, runCommand) reaches it and its
  tools as before;
- it takes the caller's stdin/stdout/stderr and working directory as file descriptors
  (SCM_RIGHTS), its umask and its whole environment, and sets its own resource limits;
- it runs the same code as an in-process render (launch plan, guards, everything) and sends back
  the exit code, which the caller exits with.

What a tenant controls never reaches the server: it only forks the children that accept. The request
(environment, file descriptors) is read by the child, after the fork, so no tenant's bytes are ever
in the state the next render starts from. The server starts with the sidecar's environment minus
Argo CD's per-app variables, from ``/``, with ``-P`` (no checkout on ``sys.path``). Both ends check
the peer's uid (SO_PEERCRED); the socket lives in the cache directory, which must be a directory
of this uid that nobody else can write and that no render's tool may read or write
(``sandbox.reaches``). Same uid is not enough: a tool a render runs is the same uid, and may run
code. So each server writes a fresh random key beside its socket (``preload.key``, 0600, before
the socket appears), and every connection starts with a challenge-response both ways: the child
sends HELLO and a nonce, the caller answers with its nonce and an HMAC-SHA256 of both nonces and
both pids (its own, the listening server's, as SO_PEERCRED names them) under the key, and the
child answers with its own HMAC. The caller sends its environment and descriptors only to a
child that proved it holds the key; a child serves only a caller that did. Tools never hold the
key: Landlock keeps them out of the cache directory and refuses them ptrace attach (a plugin
process's /proc/<pid>/mem); the plugin's processes are not dumpable and tools hold no
capability, so their /proc/<pid>/environ (ptrace read, which Landlock allows) is closed too
(sandbox.py). The key is never in an argv or an environment.

Anything unexpected before the child has said it runs the render (no server, a stale socket, a
server of another uid, a server whose code changed on disk, a child that cannot join the group, a
slow answer, a full backlog) makes the caller render in-process, as without preloading; so
preloading can make a render faster, never fail. A new server is started only when nobody listens
on the socket (a busy one is left alone) or when the one there is of another session (started by
a ``generate`` run by hand, in a ``kubectl exec``): no child of it could join argocd-cmp-server's
process groups, so it would serve nothing. An exception the render does not catch ends the child
as it ends the interpreter: the traceback, then exit 1. The caller imports only ``os``, ``sys``
and ``_socket``.

The parts: ``protocol.py`` (the socket, the framing, the handshake: what both ends share),
``client.py`` (the Python caller), ``front.c`` (the same caller in C, installed as the image's
``driftguard-cmp`` by scripts/build_front.py; it execs pip's ``driftguard-cmp-py`` for anything
else and on any doubt), ``server.py`` (the server and the child that takes a render over).

The protocol, step by step (protocol.py names every constant; front.c mirrors them):

1. The caller connects to ``$DRIFTGUARD_CMP_CACHE_DIR/preload.sock`` (the directory ours, mode
   0700, out of every tool's reach, the path shorter than sun_path) and checks the peer with
   SO_PEERCRED: our uid, a pid in our PID namespace, our session; else it sends nothing.
2. A child forked ahead sends ``HELLO`` (``H``) and a nonce of ``NONCE`` bytes within
   ``HANDSHAKE_TIMEOUT``.
3. The caller reads the server's key (``KEY_NAME`` beside the socket) and sends its own nonce and
   its ``proof`` (HMAC-SHA256 under the key of both nonces and both pids); the child checks it
   and answers with its own proof, which the caller checks. Either side stops at a wrong proof.
4. The caller sends the request: its stdin, stdout, stderr and working directory as SCM_RIGHTS,
   then a 4-byte big-endian length and ``MAGIC``, umask, process group and ``K=V`` entries of
   its environment, NUL-separated (``encode_request``; at most ``MAX_REQUEST`` bytes).
5. The child checks the request (the sidecar's environment equal to its own but for the
   per-app variables, ``PER_APP``; the group joinable) and answers ``READY`` (``R``) or
   ``NOT_READY`` (``N``, and the caller renders in-process).
6. The caller sends ``GO`` (``G``); from here the render is the child's.
7. The child sends the exit code as one byte; the caller exits with it.
"""
