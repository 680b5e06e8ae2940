"""Template rendering as the ApplicationSet controller does it, fasttemplate mode.

Argo CD (applicationset/utils/utils.go, ``Render.Replace`` and ``deeplyReplace``) walks the
template and replaces ``{{ name }}`` in every string *and map key*; a tag that names no string
parameter is left as written. Go templates (``goTemplate: true``) are refused with a clear error
(see ``GO_TEMPLATE_UNSUPPORTED``): they need Go's text/template with Argo's sprig set.
"""

from __future__ import annotations

import re
from typing import Any

from cmp_plugin.appset.base import Params

__all__ = ["GO_TEMPLATE_UNSUPPORTED", "render", "replace", "sanitize_name"]

GO_TEMPLATE_UNSUPPORTED = (
    "goTemplate: true is not supported by driftguard yet (Go text/template with sprig); "
    "use the default fasttemplate syntax ({{path}}, {{path.basename}}, {{name}} ...) or check this "
    "ApplicationSet with the ApplicationSet controller's dry run"
)

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


def sanitize_name(name: str) -> str:
    """Argo's SanitizeName (applicationset/utils/template_functions.go): the ``*Normalized`` params."""
    out = _INVALID_DNS.sub("-", name.lower())[:253]
    return out.strip("-.")
