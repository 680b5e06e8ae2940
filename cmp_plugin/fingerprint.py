"""The render fingerprint: a digest of everything a render reads, computed without running a tool.

Same fingerprint, same render: the sidecar serves a render from its cache by it
(cmp_plugin/render_cache.py) and the PR check renders only the environments whose fingerprint
differs between the two revisions (cmp_plugin/prcheck/envdiff.py). It covers

- every file the render reads, as the confinement walk enumerates them (cmp_plugin/confine.py:
  the chart with its subcharts and ``file://`` dependencies, the values and ``set-file`` files,
  each directory and file of the kustomization graph, the plain-manifest directory), by path
  relative to the checkout's root and content; whole directory trees, so a superset of what the
  tool reads;
- the renderer, every parameter (explicit or defaulted) and the plugin env, ``ARGOCD_APP_*``
  but the revision, ``KUBE_VERSION`` / ``KUBE_API_VERSIONS``, every ``DRIFTGUARD_*`` setting and
  what a tool's environment passes through;
- the tool binaries (path, size, mtime, inode: what cmp_plugin/tool_versions.py keys versions by)
  and the driftguard version.

Each file is read once: time linear in the bytes read. What the fingerprint cannot see makes the
render *not cacheable* (``Fingerprint.digest`` is None, ``why`` says why): a chart dependency
fetched over the network, a remote kustomize base, kustomize's helm inflation, a schema that
refers to another document, and templates that call a function whose result is not a function
of the inputs (``NONDETERMINISTIC``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cmp_plugin.argo_env import AppEnv
    from cmp_plugin.settings import CmpSettings

__all__ = ["NONDETERMINISTIC", "Fingerprint", "compute"]

FORMAT = "driftguard-render-fingerprint 1"
"""Part of every digest: a change to what a cached render holds changes it."""

NONDETERMINISTIC = (
    # helm: the cluster (helm pkg/engine/lookup_func.go)
    "lookup",
    # sprig v3 (functions.go genericMap): time. date.go dateInZone formats time.Now() for any
    # argument that is not a time or a Go integer (a string, or a number from values: float64),
    # and durationRound measures time.Since a time given to it
    "now",
    "ago",
    "date",
    "date_in_zone",
    "dateInZone",
    "htmlDate",
    "htmlDateInZone",
    "durationRound",
    # random strings, numbers, bytes, order, identifiers
    "randAlphaNum",
    "randAlpha",
    "randAscii",
    "randNumeric",
    "randBytes",
    "randInt",
    "shuffle",
    "uuidv4",
    # keys and certificates generated at render time
    "genPrivateKey",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
    # a random salt or IV
    "bcrypt",
    "htpasswd",
    "encryptAES",
    # DNS
    "getHostByName",
)
"""Template functions whose result is not a function of the render's inputs: never cached.

``dateModify``, ``toDate`` and ``unixEpoch`` are only nondeterministic when given ``now`` (listed);
``derivePassword`` and the hashes are deterministic.
"""

# a function name as a word, not a field (``.Values.now``) or a variable (``$now``); alternation of
# literals with a look-behind of one character: linear in the text
_CALLS_B = re.compile(
    rb"(?<![\w.$])(" + "|".join(sorted(NONDETERMINISTIC, key=len, reverse=True)).encode() + rb")(?!\w)"
)
_TPL_B = re.compile(rb"(?<![\w.$])tpl(?!\w)")
# sprig's keys and values walk a Go map: their order differs from render to render (measured with
# the real helm) unless sorted in the same action; a comment action calls nothing
_MAP_ORDER_B = re.compile(rb"(?<![\w.$])(keys|values)(?!\w)")
_ACTION_B = re.compile(rb"\{\{(.*?)\}\}", re.S)
_SORTED_B = re.compile(rb"(?<![\w.$])sortAlpha(?!\w)")


def _map_order(data: bytes) -> str:
    """``keys`` or ``values`` when an action calls one without ``sortAlpha`` in that action, else ''."""
    if not _MAP_ORDER_B.search(data):
        return ""
    for action in _ACTION_B.finditer(data):
        body = action.group(1).lstrip(b"- \t\r\n")
        if body.startswith(b"/*"):
            continue
        found = _MAP_ORDER_B.search(body)
        if found and not _SORTED_B.search(body):
            return found.group(1).decode()
    return ""


_SCHEMA_REF_B = re.compile(rb'"\$(?:ref|dynamicRef|recursiveRef)"[ \t\r\n]*+:[ \t\r\n]*+"(?!#)')

# the revision changes on every commit and no render output depends on it (the shrink guard's
# approval, which does, is re-checked on every render: cmp_plugin/render_cache.py)
_ENV_SKIPPED = frozenset(
    (
        "ARGOCD_APP_REVISION",
        "ARGOCD_APP_REVISION_SHORT",
        "ARGOCD_APP_REVISION_SHORT_8",
        # how the plugin runs and where the shrink baseline comes from, never what is rendered
        "DRIFTGUARD_CMP_PRELOAD",
        "DRIFTGUARD_CMP_CACHE_DIR",
        "DRIFTGUARD_CMP_RENDER_CACHE_BYTES",
        "DRIFTGUARD_CMP_RENDER_LOG",
        "DRIFTGUARD_CMP_BASELINE_REQUIRED",
        "DRIFTGUARD_CMP_BASELINE_TIMEOUT",
        "DRIFTGUARD_CMP_SERVICE_ACCOUNT_DIR",
        "DRIFTGUARD_KUBECONFIG",
        "DRIFTGUARD_ARGOCD_URL",
        "DRIFTGUARD_ARGOCD_TOKEN",
        "DRIFTGUARD_ARGOCD_TOKEN_FILE",
        "DRIFTGUARD_ARGOCD_CA_FILE",
        "DRIFTGUARD_ARGOCD_INSECURE",
        "DRIFTGUARD_ARGOCD_NAMESPACE",
    )
)
_ENV_PREFIXES = ("ARGOCD_", "PARAM_", "DRIFTGUARD_", "KUBE_VERSION", "KUBE_API_VERSIONS")

MAX_ARCHIVE_DEPTH = 4
"""Subchart archives inside subchart archives scanned at most this deep (cmp_plugin/helmchart/schema_refs.py)."""
MAX_ARCHIVE_BYTES = 100 << 20
"""Bytes the subchart archives of one render may unpack to in all and still be scanned."""

MAX_ENTRIES = 200_000
"""Directory entries hashed for one render (confine.MAX_ENTRIES refuses more before this)."""


class Fingerprint(NamedTuple):
    digest: str | None
    """Hex digest of the inputs; None when the render is not cacheable."""
    why: str = ""
    """Why not cacheable."""
    files: int = 0
    bytes: int = 0
    """Files and bytes hashed (the work done: tests count it instead of timing it)."""


def compute(
    app_dir: Path,
    repo_root: Path,
    env: AppEnv,
    settings: CmpSettings,
    renderer: str,
    environ: Mapping[str, str],
) -> Fingerprint:
    """The fingerprint of rendering ``app_dir`` with ``renderer``; InputError as the render would raise it.

    ``env`` is the Application's environment after the platform policy (``policy.apply``).
    """
    from cmp_plugin import confine
    from cmp_plugin.content_cache import hasher

    app_dir = Path(os.path.realpath(app_dir))
    root = os.path.realpath(repo_root)
    inputs = confine.Inputs()
    confine.check_render_inputs(app_dir, Path(root), renderer, inputs)
    h = hasher(FORMAT.encode())
    _feed(h, "renderer", renderer)
    _feed(h, "app", _relative(str(app_dir), root))
    from driftguard import __version__

    _feed(h, "driftguard", __version__)
    _feed(h, "code", code_stamp())
    # the Application as the render sees it (also when it comes from a manifest, not the environment)
    for field in ("app_name", "app_namespace", "project", "source_path", "repo_url", "kube_version"):
        _feed(h, field, str(getattr(env, field)))
    _feed(h, "api-versions", repr(tuple(env.api_versions)))
    for name, value in sorted(env.env.items()):
        _feed(h, "plugin-env", f"{name}={value}")
    for name, value in sorted(env.params.items()):
        _feed(h, "param", f"{name}={value!r}")
    _feed(h, "explicit", repr(sorted(env.explicit)))
    for key in sorted(environ):
        if key.startswith(_ENV_PREFIXES) and key not in _ENV_SKIPPED:
            _feed(h, "env", f"{key}={environ[key]}")
    from cmp_plugin.process import _PASS_ENV

    for key in _PASS_ENV:
        _feed(h, "tool-env", f"{key}={environ.get(key)}")
    for name, stamp in _tool_stamps(settings):
        _feed(h, "tool", f"{name}={stamp}")
    why = ""
    if renderer == "helm":
        why = _helm_inputs(app_dir, root, env, settings, inputs)
    if not why and inputs.unseen:
        why = inputs.unseen[0]
    if why:
        return Fingerprint(None, why)
    walk = _Walk(h, root, templates=renderer == "helm")
    # a plain directory without `recurse` reads its top level only (cmp_plugin/dirsource.py)
    shallow = renderer == "directory" and not env.param("recurse")
    for tree in inputs.trees:
        walk.tree(tree, shallow=shallow)
    for file in inputs.files:
        walk.file(file, _relative(file, root))
    if walk.entries > MAX_ENTRIES:
        return Fingerprint(None, f"more than {MAX_ENTRIES} files", walk.files, walk.bytes)
    if walk.unreadable:
        return Fingerprint(None, walk.unreadable, walk.files, walk.bytes)
    if walk.schema_ref:
        return Fingerprint(None, f"{walk.schema_ref} refers to another schema", walk.files, walk.bytes)
    found = walk.nondeterministic(env)
    if found:
        return Fingerprint(None, found, walk.files, walk.bytes)
    return Fingerprint(str(h.hexdigest()), "", walk.files, walk.bytes)


_CODE: list[str] = []


def code_stamp() -> str:
    """Every source file of the plugin and the library by path, size and mtime (once per process:
    the preload server computes it as it warms up, and stops when a file changes on disk), so that
    a changed plugin without a new version number never serves an older plugin's render."""
    if not _CODE:
        import driftguard

        parts = []
        for package in (Path(__file__).parent, Path(driftguard.__file__).parent):
            for path in sorted(package.rglob("*.py")):
                try:
                    st = path.stat()
                except OSError:
                    continue
                parts.append(f"{path.relative_to(package.parent)} {st.st_size} {st.st_mtime_ns}")
        _CODE.append("\n".join(parts))
    return _CODE[0]


def _feed(h: object, tag: str, value: str) -> None:
    data = value.encode(errors="surrogateescape")
    h.update(b"%s %d\0" % (tag.encode(), len(data)) + data)  # type: ignore[attr-defined]


def _relative(path: str, root: str) -> str:
    return os.path.relpath(path, root) if path == root or path.startswith(root + "/") else path


def _tool_stamps(settings: CmpSettings) -> list[tuple[str, str]]:
    """Each tool binary by path, size, mtime and inode, and its version if already known (no tool runs)."""
    import json

    from cmp_plugin import tool_versions

    out = []
    for name, binary in sorted(tool_versions._binaries(settings).items()):
        out.append((name, f"{binary} {tool_versions._stamp(binary)}"))
    try:
        kept = json.loads((settings.cache_dir / tool_versions.CACHE_FILE).read_text(encoding="utf-8"))
        out.append(("versions", json.dumps(kept, sort_keys=True)))
    except (OSError, ValueError):
        pass
    return out


def _helm_inputs(app_dir: Path, root: str, env: AppEnv, settings: CmpSettings, inputs: object) -> str:
    """Add the values and set-file files to ``inputs``; why not cacheable, or ''."""
    from cmp_plugin.renderers.base import RenderJob, confined
    from cmp_plugin.renderers.helm import existing_values_files, missing_dependencies

    if missing_dependencies(app_dir):
        # `helm dependency build` runs first: from the checkout (file://, walked by confine) only
        from cmp_plugin.confine import locked_dependencies

        remote = sorted(
            str(dep.get("name"))
            for dep in locked_dependencies(app_dir)
            if str(dep.get("repository") or "") and not str(dep.get("repository")).startswith("file://")
        )
        if remote:
            return f"chart dependencies {', '.join(remote)} may be fetched at render time"
    job = RenderJob(app_dir, Path(root), env, settings, Path(os.devnull))
    files = inputs.files  # type: ignore[attr-defined]
    for _, path in existing_values_files(job):
        files.append(str(path))
    for key, path in sorted(env.param("set-file").items()):
        files.append(str(confined(job, path, what=f"set-file {key}")))
    return ""


class _Walk:
    """Hash trees and files by relative path and content, each file once; note what templates call."""

    def __init__(self, h: object, root: str, *, templates: bool) -> None:
        self.h = h
        self.root = root
        self.templates = templates
        self.seen: set[str] = set()
        self.entries = 0
        self.files = 0
        self.bytes = 0
        self.schema_ref = ""
        self.unreadable = ""
        self.unpacked = 0
        """Bytes unpacked from subchart archives so far (MAX_ARCHIVE_BYTES in all)."""
        """Why an archive's content could not be scanned: the render is not cacheable."""
        self.calls: list[str] = []
        self.uses_tpl = False
        self.texts: list[tuple[str, bytes]] = []
        """Every other file's content, read again for calls only when a template uses ``tpl``."""

    def tree(self, top: str, *, shallow: bool = False) -> None:
        """Every file below ``top`` (symlinks followed inside the checkout); its top level only
        with ``shallow``."""
        real = os.path.realpath(top)
        if real in self.seen:
            return
        self.seen.add(real)
        stack = [(real, _relative(real, self.root))]
        while stack:
            here, rel = stack.pop()
            _feed(self.h, "dir", rel)
            try:
                listing = sorted(os.scandir(here), key=lambda e: e.name)
            except OSError as exc:
                _feed(self.h, "unreadable", f"{rel} {exc.errno}")
                continue
            for entry in reversed(listing):
                self.entries += 1
                if self.entries > MAX_ENTRIES:
                    return
                if entry.name == ".git" and not self.templates and here == self.root:
                    continue  # the checkout's own git directory (helm would load one in a chart)
                path = entry.path
                name = f"{rel}/{entry.name}"
                if entry.is_symlink():
                    path = os.path.realpath(path)
                    if path != self.root and not path.startswith(self.root.rstrip("/") + "/"):
                        # never followed out of the checkout (a device, the whole file system): the
                        # directory renderer refuses it as it reads, after this walk
                        self.unreadable = (
                            self.unreadable or f"{name} is a symlink that leads outside the checkout"
                        )
                        continue
                    _feed(self.h, "link", f"{name} {_relative(path, self.root)}")
                if os.path.isdir(path):
                    if shallow:
                        _feed(self.h, "dir-entry", name)
                        if not entry.is_symlink():
                            self.names(path, name)
                    elif path not in self.seen:
                        self.seen.add(path)
                        stack.append((path, name))
                    else:
                        _feed(self.h, "seen-dir", name)
                else:
                    self.file(path, name)

    def names(self, top: str, rel: str) -> None:
        """The name of every entry below a directory the render does not read: the stray-artifacts
        guard walks the whole app directory by name (os.walk, symlinks not followed, no .git)."""
        stack = [(top, rel)]
        while stack:
            here, rel = stack.pop()
            try:
                listing = sorted(os.scandir(here), key=lambda e: e.name)
            except OSError as exc:
                _feed(self.h, "unreadable", f"{rel} {exc.errno}")
                continue
            for entry in listing:
                self.entries += 1
                if self.entries > MAX_ENTRIES or entry.name == ".git":
                    continue
                name = f"{rel}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    _feed(self.h, "name-dir", name)
                    stack.append((entry.path, name))
                else:
                    _feed(self.h, "name", name)

    def file(self, path: str, name: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            _feed(self.h, "unreadable", f"{name} {exc.errno}")
            return
        self.files += 1
        self.bytes += len(data)
        raw = name.encode(errors="surrogateescape")  # git stores any bytes as a name
        self.h.update(b"file %d %d\0" % (len(raw), len(data)) + raw + b"\0")  # type: ignore[attr-defined]
        self.h.update(data)  # type: ignore[attr-defined]
        if not self.templates:
            return
        self._scan(name, data)
        if name.endswith(".tgz") and os.path.basename(os.path.dirname(name)) == "charts":
            self._archive(name, data, depth=1)

    def _scan(self, name: str, data: bytes) -> None:
        """Note the calls of a template, and keep every other file for ``tpl``."""
        base = os.path.basename(name)
        if "/templates/" in f"/{name}" or base.endswith(".tpl"):
            match = _CALLS_B.search(data)
            if match:
                self.calls.append(f"{name} calls {match.group(1).decode()}")
            elif order := _map_order(data):
                self.calls.append(f"{name} calls {order} without sortAlpha (a map's order)")
            if not self.uses_tpl and _TPL_B.search(data):
                self.uses_tpl = True
        else:
            if base == "values.schema.json" and not self.schema_ref and _SCHEMA_REF_B.search(data):
                self.schema_ref = name
            self.texts.append((name, data))

    def _archive(self, name: str, data: bytes, *, depth: int) -> None:
        """A subchart archive: helm renders the templates inside it (pkg/chart/loader/load.go loads a
        ``.tgz`` under ``charts/`` with LoadArchive, and so on inside it), so they are scanned as
        files on disk are; its bytes are already hashed. One that cannot be read whole, nested too
        deep or larger than helm loads is not cacheable."""
        import io
        import tarfile

        if depth > MAX_ARCHIVE_DEPTH:
            self.unreadable = (
                self.unreadable or f"{name}: subchart archives nested more than {MAX_ARCHIVE_DEPTH} deep"
            )
            return
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for member in tar:
                    self.entries += 1  # members count as directory entries do (MAX_ENTRIES)
                    if self.entries > MAX_ENTRIES:
                        return
                    if not member.isfile():
                        continue
                    self.unpacked += member.size  # all archives together: no bomb of many bombs
                    if self.unpacked > MAX_ARCHIVE_BYTES:
                        self.unreadable = (
                            self.unreadable
                            or f"{name}: subchart archives unpack to more than {MAX_ARCHIVE_BYTES} bytes"
                        )
                        return
                    f = tar.extractfile(member)
                    if f is None:
                        continue
                    inner = f.read()
                    where = f"{name}:{member.name}"
                    self._scan(f"{name}/{member.name}", inner)
                    parent = member.name.rsplit("/", 2)[-2] if "/" in member.name else ""
                    if member.name.endswith(".tgz") and parent == "charts":
                        self._archive(where, inner, depth=depth + 1)
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            self.unreadable = (
                self.unreadable or f"{name} is not a readable chart archive ({type(exc).__name__})"
            )

    def nondeterministic(self, env: AppEnv) -> str:
        """Why the render is not a function of its inputs, or ''."""
        if self.calls:
            return f"{self.calls[0]}, whose result differs from render to render"
        if not self.uses_tpl:
            return ""
        # ``tpl`` renders text from values or files as a template: those may call them too
        for name, data in self.texts:
            match = _CALLS_B.search(data)
            if match:
                return f"{name} holds {match.group(1).decode()}, and a template renders it with tpl"
            order = _map_order(data)
            if order:
                return f"{name} holds {order} without sortAlpha, and a template renders it with tpl"
        for value in env.params.values():
            match = _CALLS_B.search(repr(value).encode(errors="replace"))
            if match:
                return f"a parameter holds {match.group(1).decode()}, and a template renders it with tpl"
        return ""
