"""``driftguard-cmp set-image``: bump an image in a kustomization without regular expressions.

CI pipelines that bump ``overlays/production/<svc>`` by ``sed`` break on the first comment, quote
or second image. This edits the kustomization's ``images:`` entry the way ``kustomize edit set
image`` would (``newName``, ``newTag``, ``digest``), but touches nothing else in the file: the
document is parsed with ruamel.yaml to find *where* each value is, and only those characters are
rewritten, so comments, key order, quoting and indentation stay as the author wrote them.

An image the kustomization does not list is refused: a typo in a pipeline must not add a new
``images:`` entry that silently matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError, DriftguardError

__all__ = ["ImageSpec", "parse_spec", "set_image"]

# kustomize's own file names, in the order it looks for them (api/konfig/builtinpluginconsts)
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# the OCI distribution reference grammar: tag and digest (distribution/reference/regexp.go)
TAG = re.compile(r"[\w][\w.-]{0,127}")
DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
NAME = re.compile(
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
)


@dataclass(frozen=True)
class ImageSpec:
    """What to set for the ``images:`` entry called ``name``; None leaves a field as it is."""

    name: str
    new_name: str | None = None
    new_tag: str | None = None
    digest: str | None = None


def _split_ref(ref: str) -> tuple[str, str | None, str | None]:
    """``registry:5000/app:1.2@sha256:...`` -> (name, tag, digest); a port is not a tag."""
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
        if not DIGEST.fullmatch(digest):
            raise ConfigError("set-image", f"{digest!r} is not an image digest (algorithm:hex)")
    tag = None
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        ref, tag = ref[:colon], ref[colon + 1 :]
        if not TAG.fullmatch(tag):
            raise ConfigError("set-image", f"{tag!r} is not an image tag")
    if not NAME.fullmatch(ref):
        raise ConfigError("set-image", f"{ref!r} is not an image name")
    return ref, tag, digest


def parse_spec(spec: str) -> ImageSpec:
    """``NAME=IMAGE:TAG``, ``NAME=IMAGE@DIGEST``, ``NAME:TAG`` or ``NAME@DIGEST`` (kustomize's forms)."""
    name, sep, target = spec.partition("=")
    if sep:
        if not NAME.fullmatch(name):
            raise ConfigError("set-image", f"{name!r} is not an image name")
        new_name, tag, digest = _split_ref(target)
        return ImageSpec(name, new_name=new_name if new_name != name else None, new_tag=tag, digest=digest)
    name, tag, digest = _split_ref(spec)
    if tag is None and digest is None:
        raise ConfigError("set-image", f"{spec!r} names no tag or digest: use NAME=IMAGE:TAG")
    return ImageSpec(name, new_tag=tag, digest=digest)


def find_kustomization(path: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        candidate = path / name
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    raise DriftguardError(f"{path}: no kustomization ({', '.join(KUSTOMIZATION_FILES)}) to edit")


def _scalar_end(line: str, col: int) -> int:
    """Where the scalar that starts at ``col`` ends: the closing quote, or a comment / line end."""
    quote = line[col] if col < len(line) else ""
    if quote in ("'", '"'):
        i = col + 1
        while i < len(line):
            if quote == "'" and line.startswith("''", i):
                i += 2
                continue
            if quote == '"' and line[i] == "\\":
                i += 2
                continue
            if line[i] == quote:
                return i + 1
            i += 1
        raise DriftguardError("set-image: a quoted value spans several lines; edit that entry by hand")
    end = line.find(" #", col)
    end = len(line) if end < 0 else end
    return len(line[:end].rstrip())


def _yaml_value(value: str, like: str) -> str:
    """``value`` written as YAML, quoted the way the old value was, or double-quoted when a plain
    scalar would read as something else (``1.10`` is a float to YAML, a tag to kustomize)."""
    if like.startswith("'"):
        return "'" + value.replace("'", "''") + "'"
    if like.startswith('"') or not re.fullmatch(r"[A-Za-z_][\w./@:-]*", value) or value in _NOT_STRINGS:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


# plain scalars YAML 1.1/1.2 read as booleans or null (the rest are caught by the pattern above)
_NOT_STRINGS = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE"}
_NOT_STRINGS |= {"false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL"}


def set_image(path: Path, spec: ImageSpec) -> tuple[Path, list[str]]:
    """Edit the kustomization in ``path``; return it and a line per field changed."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    file = find_kustomization(path)
    text = file.read_text()
    try:
        doc: Any = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise DriftguardError(f"{file}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    images = doc.get("images") if isinstance(doc, dict) else None
    entries = [e for e in images or [] if isinstance(e, dict) and e.get("name") == spec.name]
    if not entries:
        listed = sorted(str(e.get("name")) for e in images or [] if isinstance(e, dict))
        raise DriftguardError(
            f"{file}: no images: entry named {spec.name!r} (listed: {', '.join(listed) or 'none'}); "
            "add it by hand first, set-image only changes images the kustomization already lists"
        )
    if len(entries) > 1:
        raise DriftguardError(f"{file}: {len(entries)} images: entries are named {spec.name!r}")
    entry: Any = entries[0]  # a ruamel CommentedMap: .lc holds each key and value position
    lines = text.splitlines(keepends=True)
    changes: list[str] = []
    inserts: list[str] = []
    wanted = {"newName": spec.new_name, "newTag": spec.new_tag, "digest": spec.digest}
    for key, value in wanted.items():
        if value is None:
            continue
        if key in entry:
            old = str(entry[key])
            if old == value:
                continue
            row, col = entry.lc.value(key)
            line = lines[row]
            end = _scalar_end(line.rstrip("\n"), col)
            lines[row] = line[:col] + _yaml_value(value, line[col:end]) + line[end:]
            changes.append(f"{spec.name}: {key} {old} -> {value}")
        else:
            inserts.append(f"{key}: {_yaml_value(value, '')}")
            changes.append(f"{spec.name}: {key} set to {value}")
    if inserts:
        # new keys go under the entry's last key, at the indentation of its `name:` key
        indent = " " * entry.lc.key("name")[1]
        last_row = max(entry.lc.key(k)[0] for k in entry)
        if not lines[last_row].endswith("\n"):
            lines[last_row] += "\n"
        lines[last_row + 1 : last_row + 1] = [f"{indent}{item}\n" for item in inserts]
    if changes:
        new_text = "".join(lines)
        check: Any = YAML(typ="safe").load(new_text)
        # the edit must mean exactly what was asked: same document but for this entry's fields
        expected = YAML(typ="safe").load(text)
        for e in expected["images"]:
            if isinstance(e, dict) and e.get("name") == spec.name:
                e.update({k: v for k, v in wanted.items() if v is not None})
        if check != expected:
            raise DriftguardError(f"{file}: the edit would change more than {spec.name}; nothing written")
        file.write_text(new_text)
    return file, changes
