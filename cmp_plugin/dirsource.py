"""A plain-manifest directory read as Argo CD reads a directory source.

Argo CD v3.5.1, reposerver/repository/repository.go: ``getPotentiallyValidManifests`` walks the
app directory (``filepath.Walk``: names in byte order, symlinks not descended) and keeps files whose
name ends in ``.yaml``, ``.yml``, ``.json`` or ``.jsonnet``; sub-directories only with
``directory.recurse``; ``directory.exclude`` and ``directory.include`` are gobwas globs (no
separators: ``*`` crosses ``/``) matched against the path relative to the app directory; a file
holding ``+argocd:skip-file-rendering`` is skipped; a symlink that leads outside the repository
is an error, one to nowhere or to a non-regular file is skipped with a warning; the kept files'
sizes add up under a limit. ``getObjsFromYAMLOrJSON`` then reads each file:

- ``.json``: one JSON value, a Kubernetes object (a ``kind``); anything after it is an error
  ("Found multiple objects"); a file that is no Kubernetes object but reads as an OCI image
  manifest is let through (upstream appends what it decoded; here it is skipped with a warning);
- YAML: the documents in order (a file starting with ``{`` is a stream of JSON values); empty
  documents are skipped; at the first document that is not a Kubernetes object, the file is an
  error if an object came before it, or if the file holds ``apiVersion:``, ``kind:`` and
  ``metadata:`` anywhere; otherwise the file is not a manifest and is skipped (Argo CD skips it
  silently; here with a warning line).

Files are decoded as ``utfutil`` does (a UTF-16 or UTF-8 byte-order mark decides, else UTF-8).
``.jsonnet`` is refused by name: driftguard does not evaluate jsonnet. Never copied from upstream:
written from its rules and checked against its test data (tests/cmp_plugin/test_directory.py).
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from driftguard.errors import InputError, LimitExceeded

__all__ = ["SKIP_MARKER", "DirFile", "DirObject", "find_manifests", "read_file", "select_files"]

SKIP_MARKER = b"+argocd:skip-file-rendering"
MAX_ENTRIES = 200_000
"""Directory entries walked: beyond this the directory is refused, not walked for ever."""

# repository.go manifestFile: `^.*\.(yaml|yml|json|jsonnet)$` (Go's `.` stops at a newline)
_MANIFEST_NAME = re.compile(r"[^\n]*\.(?:yaml|yml|json|jsonnet)")


class DirObject(NamedTuple):
    """One object read from a manifest file: the object, its file (relative), its document's line."""

    obj: dict[str, Any]
    source: str
    line: int


def select_files(
    app_dir: Path, repo_root: Path, *, recurse: bool, include: str, exclude: str, max_bytes: int
) -> tuple[list[Path], list[str]]:
    """The files ``getPotentiallyValidManifests`` keeps, in its order, and the warnings it logs."""
    from driftguard.globs import match

    root = os.path.realpath(repo_root)
    top = str(app_dir)
    found: list[Path] = []
    warnings: list[str] = []
    total = 0
    for path, st in _walk(top, recurse=recurse):
        kept = _potential_manifest(
            path, st, top, root, include=include, exclude=exclude, match=match, max_bytes=max_bytes
        )
        if isinstance(kept, str):
            warnings.append(f"driftguard: warning: skipping manifest file {_rel(path, top)}: {kept}")
            continue
        if kept is None:
            continue
        if not path.endswith(".jsonnet"):  # upstream leaves jsonnet's memory to jsonnet
            total += kept.st_size
            if total > max_bytes:
                raise LimitExceeded(
                    f"the manifest files add up to more than {max_bytes} bytes", source=_rel(path, top)
                )
        found.append(Path(path))
    return found, warnings


def _names(directory: str, top: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise InputError(f"{_rel(directory, top) or '.'}: cannot be read ({exc.strerror})") from exc
    return sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape"))  # Go sorts the bytes


def _walk(top: str, *, recurse: bool) -> Iterator[tuple[str, os.stat_result]]:
    """filepath.Walk's files (lstat: a symlinked directory is a file here), in its order.

    Files and sub-directories interleave by name; a sub-directory is entered only with ``recurse``.
    ``.git`` is never entered (a checkout's own metadata: no manifests, and many files).
    """
    stack = [iter(_names(top, top))]
    dirs = [top]
    entries = 0
    while stack:
        name = next(stack[-1], None)
        if name is None:
            stack.pop()
            dirs.pop()
            continue
        entries += 1
        if entries > MAX_ENTRIES:
            raise InputError(f"the manifest directory holds more than {MAX_ENTRIES} entries")
        path = os.path.join(dirs[-1], name)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            if recurse and name != ".git":
                stack.append(iter(_names(path, top)))
                dirs.append(path)
            continue
        yield path, st


def _potential_manifest(
    path: str,
    st: os.stat_result,
    top: str,
    root: str,
    *,
    include: str,
    exclude: str,
    match: Any,
    max_bytes: int,
) -> os.stat_result | str | None:
    """getPotentiallyValidManifestFile: the real file's stat, a warning (skipped), or None (skipped)."""
    name = os.path.basename(path)
    rel = _rel(path, top)
    if not _MANIFEST_NAME.fullmatch(name):
        return None
    real_st = st
    if stat.S_ISLNK(st.st_mode):
        try:
            real = _eval_symlinks(path)
        except FileNotFoundError:
            return f"destination of symlink {rel!r} is missing"
        except OSError as exc:
            raise InputError(
                f"invalid manifest file {rel}: failed to evaluate symlink: {exc.strerror}"
            ) from exc
        if not (real == root or real.startswith(root.rstrip("/") + "/")):
            raise InputError(
                f"invalid manifest file {rel}: illegal filepath in symlink (it leads outside the repository)"
            )
        real_st = os.stat(real)
        if not stat.S_ISREG(real_st.st_mode):
            return f"ignoring symlink at {rel!r} to non-regular file {os.path.relpath(real, root)!r}"
    elif not stat.S_ISREG(st.st_mode):
        return f"ignoring {rel!r}: not a regular file"
    if exclude and match(exclude, rel):
        return None
    if include and not match(include, rel):
        return None
    if real_st.st_size > max_bytes:  # refused unread: upstream would read it whole for the marker
        raise LimitExceeded(f"the manifest file is larger than {max_bytes} bytes", source=rel)
    try:
        with open(path, "rb") as f:
            data = f.read(real_st.st_size + 1)
    except OSError as exc:
        raise InputError(f"{rel}: cannot be read ({exc.strerror})") from exc
    if SKIP_MARKER in data:
        return None
    return real_st


def _eval_symlinks(path: str) -> str:
    """filepath.EvalSymlinks: the real path; FileNotFoundError when it leads nowhere, OSError on a loop."""
    return os.path.realpath(path, strict=True)


def _rel(path: str, top: str) -> str:
    return os.path.relpath(path, top) if path != top else ""


# --- reading one file --------------------------------------------------------------------------


def decode_text(data: bytes, rel: str) -> str:
    """utfutil's reading: a UTF-16 (either order) or UTF-8 byte-order mark decides, else UTF-8."""
    try:
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{rel}: not UTF-8 or UTF-16 text (byte {exc.start})") from exc


def _json_number_int(text: str) -> Any:
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else float(value)


def _json_number_float(text: str) -> Any:
    value = float(text)
    return int(value) if value.is_integer() and -(1 << 63) <= value < 1 << 63 else value


def _json_values(text: str, rel: str) -> list[tuple[Any, int]]:
    """Every JSON value in a stream (Go's json.Decoder), with the line each starts on."""
    decoder = json.JSONDecoder(parse_int=_json_number_int, parse_float=_json_number_float)
    out: list[tuple[Any, int]] = []
    i = 0
    ws = re.compile(r"[ \t\r\n]*")
    while True:
        m = ws.match(text, i)
        i = m.end() if m else i
        if i >= len(text):
            return out
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:
            raise _Unmarshal(str(exc), text.count("\n", 0, i) + 1) from exc
        out.append((value, text.count("\n", 0, i) + 1))
        i = end


class _Unmarshal(Exception):
    """A document that is not a Kubernetes object (the reason, as the decoder says it, and its line)."""

    def __init__(self, reason: str, line: int = 0) -> None:
        super().__init__(reason)
        self.line = line


def _as_object(value: Any) -> dict[str, Any] | None:
    """Unstructured's decoding: None for an empty document, the object, or _Unmarshal."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Unmarshal(f"cannot unmarshal {type(value).__name__} into a Kubernetes object")
    kind = value.get("kind")
    if not isinstance(kind, str) or not kind:
        raise _Unmarshal("Object 'Kind' is missing")
    return value


def _yaml_documents(text: str) -> Iterator[tuple[str, int]]:
    """k8s.io/apimachinery's YAMLReader: documents split at lines starting with ``---``."""
    buf: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if line.startswith("---"):
            rest = line[3:].strip()
            if rest and not rest.startswith("#"):
                raise _Unmarshal(f"invalid Yaml document separator: {rest[:40]}", number)
            if buf:
                yield "".join(buf), start
            buf = []
            start = number + 1
            continue
        buf.append(line)
    if buf:
        yield "".join(buf), start


def _yaml_value(doc: str, line: int) -> Any:
    import yaml

    from driftguard.manifests import safe_load

    try:
        return safe_load(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = line + mark.line if mark is not None else line
        raise _Unmarshal(f"invalid YAML: {exc.problem or exc.context or 'invalid YAML'}", at) from exc
    except yaml.YAMLError as exc:
        raise _Unmarshal(f"invalid YAML: {str(exc).splitlines()[0]}", line) from exc
    except RecursionError as exc:
        raise _Unmarshal("nesting too deep", line) from exc


def _values(text: str, rel: str) -> Iterator[tuple[Any, int]]:
    """YAMLOrJSONDecoder: a stream that starts with ``{`` is JSON values, anything else YAML documents."""
    if text.lstrip(" \t\r\n").startswith("{"):
        yield from _json_values(text, rel)
        return
    for doc, line in _yaml_documents(text):
        yield _yaml_value(doc, line), line


class DirFile(NamedTuple):
    """One manifest file as read: its path (relative to the app directory), objects, and the text to emit."""

    rel: str
    objs: list[DirObject]
    text: str
    """The file's own text for YAML (every document of a kept YAML file is kept), else the objects as JSON."""


def read_file(path: Path, rel: str) -> tuple[DirFile, str]:
    """One manifest file, and a warning when it is skipped as no manifest (then it holds no object)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"Failed to open {rel!r}: {exc.strerror}") from exc
    text = decode_text(data, rel)
    if rel.endswith(".json"):
        objs = _read_json(text, rel)
        return DirFile(rel, objs, _as_json(objs)), ""
    objs = []
    json_mode = text.lstrip(" \t\r\n").startswith("{")
    line = 1
    try:
        for value, line in _values(text, rel):
            obj = _as_object(value)
            if obj is not None:
                objs.append(DirObject(obj, rel, line))
    except _Unmarshal as exc:
        if objs or ("apiVersion:" in text and "kind:" in text and "metadata:" in text):
            raise InputError(f"Failed to unmarshal {rel}:{exc.line or line}: {exc}") from None
        warning = (
            f"driftguard: warning: {rel}: not a Kubernetes manifest ({exc}); skipped, as Argo CD skips it"
        )
        return DirFile(rel, [], ""), warning
    if json_mode:
        return DirFile(rel, objs, _as_json(objs)), ""
    return DirFile(rel, objs, text if objs else ""), ""


def _as_json(objs: list[DirObject]) -> str:
    # one document each; the caller starts every document with "---", so no JSON sniffing of the stream
    return "---\n".join(json.dumps(o.obj, ensure_ascii=True) + "\n" for o in objs)


def _read_json(text: str, rel: str) -> list[DirObject]:
    decoder = json.JSONDecoder(parse_int=_json_number_int, parse_float=_json_number_float)
    start = len(text) - len(text.lstrip(" \t\r\n"))
    try:
        value, end = decoder.raw_decode(text, start)
        obj = _as_object(value)
    except (ValueError, RecursionError, _Unmarshal) as exc:
        if isinstance(exc, _Unmarshal) and _reads_as_oci_manifest(value):
            return []  # an OCI image manifest beside the manifests: no Kubernetes object
        raise InputError(f"Failed to unmarshal {rel!r}: {exc}") from None
    if text[end:].strip(" \t\r\n"):
        raise InputError(f"Found multiple objects in {rel!r}. Only single objects are allowed in JSON files.")
    return [] if obj is None else [DirObject(obj, rel, text.count("\n", 0, start) + 1)]


_DESCRIPTOR_STRINGS = ("mediaType", "digest", "artifactType", "data")


def _reads_as_oci_manifest(value: Any) -> bool:
    """Whether Go decodes ``value`` into an OCI image-spec ``v1.Manifest`` without a type error."""

    def descriptor(d: Any) -> bool:
        if d is None:
            return True
        if not isinstance(d, dict):
            return False
        ok = all(d.get(k) is None or isinstance(d[k], str) for k in _DESCRIPTOR_STRINGS)
        ok = ok and (
            d.get("size") is None or (isinstance(d["size"], int) and not isinstance(d["size"], bool))
        )
        ok = ok and _strings(d.get("urls"), list) and _strings(d.get("annotations"), dict)
        return ok and (d.get("platform") is None or isinstance(d["platform"], dict))

    if not isinstance(value, dict):
        return False
    version = value.get("schemaVersion")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        return False
    if any(value.get(k) is not None and not isinstance(value[k], str) for k in ("mediaType", "artifactType")):
        return False
    layers = value.get("layers")
    if layers is not None and (not isinstance(layers, list) or not all(descriptor(x) for x in layers)):
        return False
    return (
        descriptor(value.get("config"))
        and descriptor(value.get("subject"))
        and _strings(value.get("annotations"), dict)
    )


def _strings(value: Any, container: type[list[Any]] | type[dict[str, Any]]) -> bool:
    """None, or a list (dict) of strings: what Go decodes into []string (map[string]string)."""
    if value is None:
        return True
    if isinstance(value, dict) and container is dict:
        return all(isinstance(v, str) for v in value.values())
    if isinstance(value, list) and container is list:
        return all(isinstance(v, str) for v in value)
    return False


def find_manifests(
    app_dir: Path, repo_root: Path, *, recurse: bool, include: str, exclude: str, max_bytes: int
) -> tuple[list[DirFile], list[str]]:
    """findManifests: every manifest file of the directory source, read, and the warning lines to print."""
    paths, warnings = select_files(
        app_dir, repo_root, recurse=recurse, include=include, exclude=exclude, max_bytes=max_bytes
    )
    files: list[DirFile] = []
    for path in paths:
        rel = os.path.relpath(path, app_dir)
        if rel.endswith(".jsonnet"):
            raise InputError(
                f"{rel}: jsonnet is not supported by driftguard (Argo CD would evaluate it); render it to "
                "YAML or JSON, or leave it out with the exclude parameter"
            )
        read, warning = read_file(path, rel)
        files.append(read)
        if warning:
            warnings.append(warning)
    return files, warnings
