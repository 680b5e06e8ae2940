#!/usr/bin/env python3
"""Generate driftguard/k8s_fields.py from Kubernetes' Go API types (k8s.io/api types.go files).

Argo CD re-marshals every built-in object through its Go struct before diffing (gitops-engine
pkg/diff/diff.go: remarshal), which drops fields whose Go zero value is tagged ``omitempty`` on a
non-pointer field (``readOnly: false`` on a volumeMount, ``hostNetwork: false``, ``subPath: ""``).
A pointer field keeps its zero (``automountServiceAccountToken: false``). Python has no Go structs,
so this script reads the structs once and writes the (parent field, field) pairs whose zero is
dropped in *every* struct that can sit under that parent field name.

    scripts/gen_k8s_fields.py TYPES_GO... > driftguard/k8s_fields.py

The inputs used are listed in the generated module's docstring (k8s.io/api v0.34.2, the version
Argo CD v3.5.1's gitops-engine builds with).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
FIELD = re.compile(
    r'^\s+(\w+)?\s*(\*?)((?:\[\])?)(\*?)((?:map\[\w+\])?)(\*?)([\w.]+)\s+`json:"([^",]*)((?:,[^"]*)?)"', re.M
)
# a strategic-merge list: `json:"ports,omitempty" patchStrategy:"merge" patchMergeKey:"containerPort"`
MERGE = re.compile(r'json:"(\w+)[^"]*"[^`\n]*patchStrategy:"([^"]*)"(?:[^`\n]*patchMergeKey:"([^"]*)")?')
ALIAS = re.compile(r"^type (\w+) (string|bool|int32|int64)\b", re.M)
SCALARS = {
    "string": "string",
    "bool": "bool",
    "int32": "int",
    "int64": "int",
    "int": "int",
    "float64": "int",
    "types.UID": "string",
}


def main(paths: list[str]) -> int:
    src = "\n".join(Path(p).read_text() for p in paths)
    scalar = dict(SCALARS)
    for name, base in ALIAS.findall(src):
        scalar[name] = SCALARS[base]
    structs: dict[str, list[tuple[str, bool, bool, bool, str, bool]]] = {}
    merges: dict[str, dict[str, str]] = {}  # struct -> list field -> merge key ("" for a list of scalars)
    for name, body in STRUCT.findall(src):
        merges[name] = {
            f: key or "" for f, strategy, key in MERGE.findall(body) if "merge" in strategy.split(",")
        }
        fields = []
        for m in FIELD.finditer(body):
            _gname, p1, sl, p2, mp, p3, typ, json_name, opts = m.groups()
            pointer = bool(p1 or p2 or p3)
            fields.append(
                (
                    json_name,
                    pointer,
                    bool(sl),
                    bool(mp),
                    typ.split(".")[-1] if "." in typ and typ.split(".")[0] != "types" else typ,
                    "omitempty" in opts,
                )
            )
        structs[name] = fields

    def expand(
        name: str, seen: frozenset[str] = frozenset()
    ) -> list[tuple[str, bool, bool, bool, str, bool]]:
        out = []
        for f in structs.get(name, []):
            if f[0] == "" and f[4] in structs and f[4] not in seen:  # inline embedded struct
                out.extend(expand(f[4], seen | {name}))
            elif f[0]:
                out.append(f)
        return out

    def merge_of(name: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
        out = dict(merges.get(name, {}))
        for f in structs.get(name, []):
            if f[0] == "" and f[4] in structs and f[4] not in seen:
                out.update(merge_of(f[4], seen | {name}))
        return out

    # parent json name -> structs that can sit under it
    under: dict[str, set[str]] = defaultdict(set)
    for name in structs:
        for json_name, _p, _sl, _mp, typ, _o in expand(name):
            if typ in structs:
                under[json_name].add(typ)
    for name in structs:  # argocd-cm knownTypeFields name a struct: parent "@Struct"
        under["@" + name].add(name)
    for name, fields in structs.items():  # a kind's own struct sits at the top: parent "^Kind"
        if any(f[0] == "" and f[4] == "TypeMeta" for f in fields):
            under["^" + name].add(name)
    verdict: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for parent, names in under.items():
        for s in names:
            for json_name, pointer, sl, mp, typ, omit in expand(s):
                if sl or mp:  # an empty list or map is dropped when omitempty, kept otherwise
                    verdict[(parent, f"{json_name}:{'list' if sl else 'map'}")].add(omit)
                elif typ in scalar:
                    verdict[(parent, f"{json_name}:{scalar[typ]}")].add(omit and not pointer)
    pairs = sorted(k for k, v in verdict.items() if v == {True})
    merge_verdict: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    for parent, names in under.items():
        for s in names:
            keyed = merge_of(s)
            for json_name, _p, sl, _mp, _typ, _o in expand(s):
                if sl:
                    merge_verdict[(parent, json_name)].add(keyed.get(json_name))
    quantity_verdict: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    for parent, names in under.items():
        for s in names:
            for json_name, _p, sl, mp, typ, _o in expand(s):
                shape = None
                if typ == "Quantity" and not sl:
                    shape = "map" if mp else "value"
                elif typ == "ResourceList" and not sl and not mp:
                    shape = "map"
                quantity_verdict[(parent, json_name)].add(shape)
    quantities = sorted(
        (k, next(iter(v))) for k, v in quantity_verdict.items() if len(v) == 1 and next(iter(v)) is not None
    )
    merged = sorted(
        (k, next(iter(v))) for k, v in merge_verdict.items() if len(v) == 1 and next(iter(v)) is not None
    )
    print(
        '"""Generated by scripts/gen_k8s_fields.py from k8s.io/api v0.34.2 (Apache-2.0): '
        + ", ".join(sorted({Path(p).parent.parent.name + "/" + Path(p).parent.name for p in paths}))
        + ".\n"
    )
    print("(parent field, field:type) pairs whose Go zero value (false, 0, , [] or {}) remarshal drops: an")
    print(
        '``omitempty`` field, not a pointer, in every struct that sits under that parent field name. Do not edit by hand."""\n'
    )
    print("from __future__ import annotations\n")
    print("OMITEMPTY_ZERO: frozenset[tuple[str, str]] = frozenset(")
    print("    {")
    for parent, f in pairs:
        print(f"        ({parent!r}, {f!r}),")
    print("    }")
    print(")\n")
    print('# (parent field, list field) -> patchMergeKey of lists strategic merge patches merge ("" for a')
    print("# list of scalars such as finalizers); every other built-in list is replaced whole.")
    print("MERGE_LISTS: dict[tuple[str, str], str] = {")
    for k, key in merged:
        print(f"    {k!r}: {key!r},")
    print("}\n")
    print('# (parent field, field) -> resource.Quantity fields: "value" (one quantity) or "map"')
    print("# (a ResourceList); remarshal writes them in Quantity's canonical form.")
    print("QUANTITIES: dict[tuple[str, str], str] = {")
    for k, shape in quantities:
        print(f"    {k!r}: {shape!r},")
    print("}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
