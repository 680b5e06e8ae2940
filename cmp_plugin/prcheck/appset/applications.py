"""An ApplicationSet manifest, at one revision, into the Applications the controller would create.

Follows applicationset/controllers/template/template.go ``GenerateApplications``: for each
generator entry, its parameter sets rendered into the template (the entry's own ``template``
merged over ``spec.template``), ``templatePatch`` applied, the namespace set to the
ApplicationSet's; ``resources-finalizer.argocd.argoproj.io`` added when the template sets no
finalizers and ``preserveResourcesOnDeletion`` is off (utils.go ``RenderTemplateParams``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from cmp_plugin.prcheck.appset import template
from cmp_plugin.prcheck.appset.base import Context, Dropped, Origin
from cmp_plugin.prcheck.appset.gotemplate import GoTemplates
from cmp_plugin.prcheck.appset.transform import transform
from driftguard.errors import DriftguardError
from driftguard.manifests import safe_load

__all__ = ["Expansion", "GeneratedApp", "expand", "is_appset"]

RESOURCES_FINALIZER = "resources-finalizer.argocd.argoproj.io"


@dataclass
class GeneratedApp:
    name: str
    app: dict[str, Any]
    """The Application manifest, as the controller would create it."""
    origins: tuple[Origin, ...]
    generator: str
    """``spec.generators[i]`` and its kind, for people."""


@dataclass
class Expansion:
    """One ApplicationSet at one revision."""

    name: str
    apps: list[GeneratedApp] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    preserve: bool = False
    """``syncPolicy.preserveResourcesOnDeletion``."""
    applications_sync: str = ""
    """``syncPolicy.applicationsSync`` as written (create-only, create-update, create-delete, sync)."""
    source: str = ""

    @property
    def origin_keys(self) -> set[str]:
        return {o.key for a in self.apps for o in a.origins}


def is_appset(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("kind") == "ApplicationSet"
        and str(obj.get("apiVersion", "")).startswith("argoproj.io/")
    )


def expand(obj: dict[str, Any], ctx: Context, *, source: str = "") -> Expansion:
    """Every Application ``obj`` generates at ``ctx.tree``; AppSetError names what cannot be expanded."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    if obj.get("apiVersion") != "argoproj.io/v1alpha1":
        raise ctx.fail(f"apiVersion {obj.get('apiVersion')} is not argoproj.io/v1alpha1")
    if not isinstance(spec, dict):
        raise ctx.fail("spec is missing")
    if spec.get("goTemplate"):
        options = spec.get("goTemplateOptions") or []
        if not isinstance(options, list):
            raise ctx.fail("goTemplateOptions must be a list")
        if not ctx.helm:
            raise ctx.fail("goTemplate: true needs helm (DRIFTGUARD_HELM) to evaluate Go templates")
        ctx.go = GoTemplates(
            helm=ctx.helm, timeout=ctx.timeout, options=tuple(str(o) for o in options), appset=ctx.appset
        )
    generators = spec.get("generators")
    if not isinstance(generators, list) or not generators:
        raise ctx.fail("spec.generators must be a non-empty list")
    tmpl = spec.get("template")
    if not isinstance(tmpl, dict) or not isinstance(tmpl.get("spec"), dict):
        raise ctx.fail("spec.template with metadata and spec is required")
    policy = spec.get("syncPolicy") or {}
    out = Expansion(
        name=str(meta.get("name") or ""),
        preserve=bool(policy.get("preserveResourcesOnDeletion")),
        applications_sync=str(policy.get("applicationsSync") or ""),
        source=source,
    )
    patch = spec.get("templatePatch")
    for i, entry in enumerate(generators):
        sets = transform(entry, ctx)
        merged = _merge_template(entry.get("template"), tmpl)
        kind = next(k for k in entry if k not in ("selector", "template", "values"))
        try:
            apps = [
                _finish(tree, g.params, out.preserve)
                for tree, g in zip(
                    template.render_each(_tree(merged), [g.params for g in sets], ctx), sets, strict=True
                )
            ]
            if patch:
                patches = template.render_each(str(patch), [g.params for g in sets], ctx)
                apps = [_apply_patch(app, str(text), ctx) for app, text in zip(apps, patches, strict=True)]
        except ValueError as exc:
            raise ctx.fail(f"spec.generators[{i}] ({kind}): {exc}") from exc
        for app, g in zip(apps, sets, strict=True):
            app["metadata"]["namespace"] = meta.get("namespace") or "argocd"
            name = str(app["metadata"].get("name") or "")
            if not name or "{{" in name:
                raise ctx.fail(
                    f"spec.generators[{i}] ({kind}) renders an Application without a valid name ({name!r}): "
                    "a template parameter the generator does not provide"
                )
            out.apps.append(GeneratedApp(name, app, g.origins, f"spec.generators[{i}] ({kind})"))
    seen: set[str] = set()
    for a in out.apps:
        if a.name in seen:
            raise ctx.fail(f"contains applications with duplicate name: {a.name}")
        seen.add(a.name)
    out.dropped = list(ctx.dropped)
    return out


def _merge_template(own: Any, base: dict[str, Any]) -> dict[str, Any]:
    """mergo.Merge(dest=own, src=base): the entry's fields win, empty ones come from the ApplicationSet's."""
    if not isinstance(own, dict) or not own:
        return base
    merged: dict[str, Any] = _fill(copy.deepcopy(own), base)
    return merged


def _fill(dest: Any, src: Any) -> Any:
    if isinstance(dest, dict) and isinstance(src, dict):
        for k, v in src.items():
            dest[k] = _fill(dest[k], v) if dest.get(k) not in (None, "", {}, []) else copy.deepcopy(v)
        return dest
    return dest


def _tree(tmpl: dict[str, Any]) -> dict[str, Any]:
    """What the controller renders (template.go ``GetTempApplication``): metadata's name, labels,
    annotations and finalizers, and the spec."""
    meta = tmpl.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "labels", "annotations", "finalizers") if k in meta},
        "spec": tmpl["spec"],
    }


def _finish(tree: dict[str, Any], params: dict[str, Any], preserve: bool) -> dict[str, Any]:
    app: dict[str, Any] = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", **tree}
    app["metadata"] = dict(app["metadata"])
    if params and not preserve and not app["metadata"].get("finalizers"):
        app["metadata"]["finalizers"] = [RESOURCES_FINALIZER]
    return app


def _render_app(tmpl: dict[str, Any], params: dict[str, Any], preserve: bool) -> dict[str, Any]:
    """One Application in fasttemplate mode (the finalizer rule's Argo cases call this)."""
    return _finish(template.render(_tree(tmpl), params), params, preserve)


def _apply_patch(app: dict[str, Any], text: str, ctx: Context) -> dict[str, Any]:
    """templatePatch: YAML merged into the Application (maps merged, lists and scalars replaced)."""
    try:
        patch = safe_load(text)
    except (DriftguardError, ValueError) as exc:
        raise ctx.fail(
            f"templatePatch is not valid YAML after rendering: {str(exc).splitlines()[0]}"
        ) from exc
    if not isinstance(patch, dict):
        raise ctx.fail("templatePatch must render to a map")
    patched: dict[str, Any] = _deep_merge(app, patch)
    return patched


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _deep_merge(base.get(k), v) if k in base else v
        return out
    return patch
