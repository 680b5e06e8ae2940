"""Template rendering as the ApplicationSet controller does it, fasttemplate mode.

Argo CD (applicationset/utils/utils.go, ``Render.Replace`` and ``deeplyReplace``) walks the
template and replaces ``{{ name }}`` in every string *and map key*; a tag that names no string
parameter is left as written. Go templates (``goTemplate: true``) are refused with a clear error
go to gotemplate.py (the real helm evaluates them); ``render_each`` picks the engine.
"""

from __future__ import annotations

import re
from typing import Any

from cmp_plugin.prcheck.appset.base import Context, Params

__all__ = ["render", "render_each", "replace", "sanitize_name"]

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TEMPLATED = re.compile(r"\{\{.*\}\}")
_INVALID_DNS = re.compile(r"[^-a-z0-9.]")


def replace(text: str, params: Params) -> str:
    """One string, as fasttemplate's ExecuteFuncString with Argo's tag function.

    ValueError for a ``{{`` without its ``}}`` once the string holds a template at all
    (fasttemplate: "cannot find end tag"; Argo checks ``.*{{.*}}.*`` first).
    """
    if "{{" not in text or not _TEMPLATED.search(text):
        return text
    ends = [m.end() for m in _TAG.finditer(text)]
    if "{{" in text[ends[-1] if ends else 0 :]:
        raise ValueError(f"invalid template {text!r}: cannot find end tag '}}}}'")

    def one(match: re.Match[str]) -> str:
        tag = match.group(1).strip()
        value = params.get(tag)
        if not tag or not isinstance(value, str):
            return match.group(0)
        return value

    return _TAG.sub(one, text)


def render(obj: Any, params: Params) -> Any:
    """Every string and map key of ``obj`` rendered (utils.go ``deeplyReplace``)."""
    if isinstance(obj, str):
        return replace(obj, params)
    if isinstance(obj, list):
        return [render(v, params) for v in obj]
    if isinstance(obj, dict):
        return {replace(k, params) if isinstance(k, str) else k: render(v, params) for k, v in obj.items()}
    return obj


def render_each(obj: Any, param_sets: list[Params], ctx: Context) -> list[Any]:
    """``obj`` rendered once per parameter set, by the ApplicationSet's template engine."""
    if ctx.go is None:
        return [render(obj, p) for p in param_sets]
    texts: list[str] = []
    _collect(obj, texts)
    unique = list(dict.fromkeys(texts))
    live = [p for p in param_sets if p]  # no parameters: the template as written (RenderTemplateParams)
    rendered = iter(ctx.go.render_many([(t, p) for p in live for t in unique]))
    out = []
    for p in param_sets:
        out.append(_rebuild(obj, {t: next(rendered) for t in unique}) if p else obj)
    return out


def _collect(obj: Any, into: list[str]) -> None:
    if isinstance(obj, str):
        if "{{" in obj:
            into.append(obj)
    elif isinstance(obj, list):
        for v in obj:
            _collect(v, into)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _collect(k, into)
            _collect(v, into)


def _rebuild(obj: Any, table: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return table.get(obj, obj)
    if isinstance(obj, list):
        return [_rebuild(v, table) for v in obj]
    if isinstance(obj, dict):
        return {_rebuild(k, table): _rebuild(v, table) for k, v in obj.items()}
    return obj


def sanitize_name(name: str) -> str:
    """Argo's SanitizeName (applicationset/utils/template_functions.go): the ``*Normalized`` params."""
    out = _INVALID_DNS.sub("-", name.lower())[:253]
    return out.strip("-.")
