"""``goTemplate: true``: Go text/template with sprig, evaluated by the real helm binary.

Argo CD (applicationset/utils/utils.go) parses each string as a Go template with sprig's generic
functions (minus env, expandenv, getHostByName) plus normalize, slugify, toYaml, fromYaml,
fromYamlArray, and executes it on the parameter map. ``helm template`` of a scratch chart is the
same Go text/template with sprig, so driftguard hands every string of one ApplicationSet to one
helm run: each string becomes a ``define``, each (string, parameter set) pair one ``include``
with the parameter set as its data, so ``.`` and ``$`` are the parameters as in Argo CD.

The differences are refused or stated, never guessed:

- ``normalize`` and ``slugify`` (Argo's own) and helm's extras (include, tpl, required, lookup,
  toToml, fromToml, .Files ...) are refused with an error naming the function;
- ``define``, ``template`` and ``block`` actions are refused (a string could close our define);
- ``missingkey=error`` is checked before the run for plain field chains (``.a.b``) outside
  ``range``/``with`` (helm's engine runs with missingkey=zero); a missing key otherwise prints
  ``<no value>``, as in Argo CD's default.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from cmp_plugin.prcheck.appset.base import AppSetError, Params
from cmp_plugin.process import run_tool, tool_env
from driftguard.errors import DriftguardError
from driftguard.manifests import load_stream

__all__ = ["GoTemplates"]

_ACTION = re.compile(r"\{\{-?(.*?)-?\}\}", re.DOTALL)
_REFUSED_KEYWORDS = ("define", "template", "block")
_ARGO_ONLY = ("normalize", "slugify")
_HELM_ONLY = ("include", "tpl", "required", "lookup", "toToml", "fromToml", "mustToToml", "fromJsonArray")
_WORD = re.compile(r"(?<![\w.$])([A-Za-z_]\w*)")
_CHAIN = re.compile(r"(?<![\w)\]$])\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')
MAX_STRINGS = 20000


class GoTemplates:
    """Renders Go templates in batches with helm; one instance per ApplicationSet and revision."""

    def __init__(self, *, helm: str, timeout: float, options: tuple[str, ...], appset: str) -> None:
        self.helm = helm
        self.timeout = timeout
        self.appset = appset
        self.missingkey_error = "missingkey=error" in options
        for opt in options:
            if opt not in ("missingkey=error", "missingkey=default", "missingkey=invalid", "missingkey=zero"):
                raise self._fail(f"goTemplateOptions {opt!r} is not a Go template option driftguard knows")

    def _fail(self, message: str) -> AppSetError:
        return AppSetError(f"ApplicationSet {self.appset}: {message}")

    def check(self, text: str) -> None:
        """Refuse what helm would evaluate differently from Argo CD, or what could leave our define."""
        actions = [_STRING.sub('""', a).strip() for a in _ACTION.findall(text)]
        opens = sum(1 for a in actions if a.split()[:1] in (["if"], ["range"], ["with"]))
        if opens != sum(1 for a in actions if a == "end"):
            raise self._fail(f"goTemplate: unbalanced if/range/with and end in {text!r}")
        for action in _ACTION.findall(text):
            bare = _STRING.sub('""', action)
            words = set(_WORD.findall(bare))
            for kw in _REFUSED_KEYWORDS:
                if kw in words:
                    raise self._fail(
                        f"goTemplate: the `{kw}` action is not supported by driftguard ({text!r})"
                    )
            for fn in _ARGO_ONLY:
                if fn in words:
                    raise self._fail(
                        f"goTemplate: the function `{fn}` is not supported by driftguard (helm's sprig has no such "
                        f"function); use a generator's *Normalized parameter or lower/replace ({text!r})"
                    )
            for fn in _HELM_ONLY:
                if fn in words:
                    raise self._fail(
                        f"goTemplate: `{fn}` is a helm function, not one Argo CD provides ({text!r})"
                    )

    def _missing(self, text: str, params: Params) -> str:
        if not self.missingkey_error or re.search(r"\b(range|with)\b", text):
            return ""
        for action in _ACTION.findall(text):
            for chain in _CHAIN.findall(_STRING.sub('""', action)):
                node: Any = params
                for part in chain.split("."):
                    if not isinstance(node, dict) or part not in node:
                        return f'map has no entry for key "{part}" (in {{{{.{chain}}}}})'
                    node = node[part]
        return ""

    def render_many(self, requests: list[tuple[str, Params]]) -> list[str]:
        """Each (template, parameters) rendered; one helm run for all of them."""
        if not requests:
            return []
        if len(requests) > MAX_STRINGS:
            raise self._fail(f"goTemplate: more than {MAX_STRINGS} strings to render")
        texts: dict[str, int] = {}
        sets: dict[str, int] = {}
        plan = []
        for text, params in requests:
            self.check(text)
            missing = self._missing(text, params)
            if missing:
                shown = text if "\n" not in text else repr(text)
                raise self._fail(f"failed to execute go template {shown}: {missing}")
            t = texts.setdefault(text, len(texts))
            key = json.dumps(params, sort_keys=True, default=str)
            s = sets.setdefault(key, len(sets))
            plan.append((t, s))
        with tempfile.TemporaryDirectory(prefix="driftguard-gotemplate-") as tmp:
            chart = Path(tmp) / "chart"
            (chart / "templates").mkdir(parents=True)
            (chart / "Chart.yaml").write_text("apiVersion: v2\nname: appset-templates\nversion: 0.0.0\n")
            (chart / "values.json").write_text(json.dumps({"s": [json.loads(k) for k in sets]}))
            (chart / "templates" / "_t.tpl").write_text(
                "".join(f'{{{{- define "t{i}" -}}}}{text}{{{{- end -}}}}\n' for text, i in texts.items())
            )
            lines = [
                f'  r{n}: {{{{ include "t{t}" (index .Values.s {s}) | toJson }}}}'
                for n, (t, s) in enumerate(plan)
            ]
            (chart / "templates" / "out.yaml").write_text(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out\ndata:\n" + "\n".join(lines) + "\n"
            )
            argv = [self.helm, "template", "x", str(chart), "--values", str(chart / "values.json")]
            try:
                out = run_tool(
                    argv,
                    env=tool_env(Path(tmp)),
                    timeout=self.timeout,
                    max_output=64 << 20,
                    name="helm (goTemplate)",
                )
            except DriftguardError as exc:
                lines = (getattr(exc, "stderr", "") or "").strip().splitlines()
                errors = _error_blocks(lines) or lines or [str(exc)]
                which = re.search(r'"t(\d+)"|_t\.tpl:(\d+)', errors[0])
                named = ""
                if which:
                    n = int(which.group(1)) if which.group(1) else int(which.group(2)) - 1
                    named = next((f" in {text!r}" for text, i in texts.items() if i == n), "")
                raise self._fail(f"goTemplate: {_clean(errors[0])}{named}") from exc
        [doc] = [d.obj for d in load_stream(out, source="goTemplate")]
        data = doc.get("data") or {}
        return [str(data.get(f"r{n}", "")) for n in range(len(plan))]


def _error_blocks(lines: list[str]) -> list[str]:
    """Each ``Error:`` of helm's stderr as one line.

    helm 3 printed a template error on one line; helm 4 breaks it into indented lines (the
    template's position, then ``executing ... at <...>:``, then the cause), ending at a blank line.
    """
    blocks: list[str] = []
    current: list[str] | None = None
    for line in lines:
        if line.startswith("Error:"):
            current = [line.strip()]
            blocks.append("")
        elif current is not None and line.strip() and not line.startswith("Use --debug"):
            current.append(line.strip())
        else:
            current = None
            continue
        blocks[-1] = " ".join(current)
    return blocks


def _clean(line: str) -> str:
    """helm's message without the scratch chart's names and paths."""
    line = line.removeprefix("Error: ")
    if "error calling include: " in line:
        line = line.rsplit("error calling include: ", 1)[1]
    line = re.sub(r"execution error at \(appset-templates/templates/out\.yaml:\d+:\d+\): ", "", line)
    line = re.sub(r"\(?appset-templates/templates/_t\.tpl:\d+(:\d+)?\)?:? ?", "", line)
    line = re.sub(r"template: (t\d+|appset-templates/templates/out\.yaml)(:\d+)*: ", "", line)
    return re.sub(r'executing "(t\d+|appset-templates/templates/out\.yaml)" at ', "at ", line)
