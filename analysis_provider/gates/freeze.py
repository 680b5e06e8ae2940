"""freeze: fail inside a deny window of the app's AppProject syncWindows, or one from our config.

Argo CD's ``CanSync`` (pkg/apis/application/v1alpha1/types.go) answers differently for a manual
sync (``manualSync: true`` windows let it through), so the gate takes ``manualSync=true|false``
(default false: a canary step is gated like an automated sync, the stricter answer).
"""

from __future__ import annotations

from typing import Any, ClassVar

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, Arg, GateContext, Verdict, a_string, an_object
from driftguard.errors import InputError, UpstreamUnavailable
from driftguard.windows import SyncWindow, frozen

__all__ = ["FreezeGate"]


def _bool(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise InputError(f"manualSync {value!r} must be true or false")
    return value.lower() == "true"


class FreezeGate:
    name = "freeze"
    summary = "Fail inside a deny window of the app's AppProject syncWindows, or of the freeze file."
    all_args = APP_ARGS
    """In ``all`` it is asked as for an automated sync (no ``manualSync``)."""
    all_when: tuple[str, ...] = ()
    args: ClassVar[dict[str, Arg]] = {
        **APP_ARGS,
        "manualSync": Arg(
            _bool,
            default="false",
            schema={"type": "string", "enum": ["true", "false"]},
            description="Ask as for a manual sync: windows with manualSync: true let it through (as Argo CD's CanSync)",
        ),
    }

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        spec = an_object(app.get("spec"), "an Application spec")
        dest = an_object(spec.get("destination"), "spec.destination")
        # an empty project is the default one (argo-cd types.go, ApplicationSpec.GetProject)
        project_name = a_string(spec.get("project"), "spec.project") or "default"
        project = ctx.project(project_name)
        windows = [
            _window(raw, f"AppProject {project_name} syncWindows[{i}]")
            for i, raw in enumerate(
                an_object(project.get("spec"), "an AppProject spec").get("syncWindows") or []
            )
        ]
        windows += ctx.windows
        now = ctx.now()
        manual = bool(args.get("manualSync", False))
        reasons = frozen(
            windows,
            app=args["app"],
            namespace=a_string(dest.get("namespace"), "spec.destination.namespace"),
            cluster=a_string(dest.get("name"), "spec.destination.name"),
            server=a_string(dest.get("server"), "spec.destination.server"),
            now=now,
            manual=manual,
        )
        observed = {"windows": len(windows), "now": now.isoformat(timespec="seconds"), "manualSync": manual}
        if reasons:
            return Verdict(self.name, FAIL, reasons, observed)
        return Verdict(
            self.name, PASS, ["no freeze: no deny window active, allowed by every allow window"], observed
        )


def _window(raw: Any, origin: str) -> SyncWindow:
    """One AppProject sync window in the shape Argo CD stores (SyncWindow in argo-cd types.go).

    A window Argo CD holds but we cannot read means we cannot say whether the app is frozen: that
    is an error, never a pass. Which windows match, and when, is ``driftguard.windows``' business.
    """
    if not isinstance(raw, dict):
        raise UpstreamUnavailable(f"cannot read {origin}: not an object")
    for key in ("kind", "schedule", "duration", "timeZone"):
        a_string(raw.get(key), f"{origin}.{key}")
    for key in ("applications", "namespaces", "clusters"):
        patterns = raw.get(key)
        if patterns is not None and not (
            isinstance(patterns, list) and all(isinstance(p, str) for p in patterns)
        ):
            raise UpstreamUnavailable(f"cannot read {origin}: {key} is not a list of strings")
    try:
        return SyncWindow.from_dict(raw, origin=origin)
    except Exception as exc:  # windows.py's parse errors, whatever their type: undecidable, never a pass
        raise UpstreamUnavailable(f"cannot read {origin}: {exc}") from exc
