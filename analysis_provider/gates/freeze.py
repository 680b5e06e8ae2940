"""freeze: fail inside a deny window of the app's AppProject syncWindows, or one from our config.

Argo CD's ``CanSync`` (pkg/apis/application/v1alpha1/types.go) answers differently for a manual
sync (``manualSync: true`` windows let it through), so the gate takes ``manualSync=true|false``
(default false: a canary step is gated like an automated sync, the stricter answer).
"""

from __future__ import annotations

from typing import Any, ClassVar

from analysis_provider.gates.base import APP_ARGS, FAIL, PASS, Arg, GateContext, Verdict
from driftguard.errors import InputError, UpstreamUnavailable
from driftguard.windows import SyncWindow, frozen

__all__ = ["FreezeGate"]


def _bool(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise InputError(f"manualSync {value!r} must be true or false")
    return value.lower() == "true"


class FreezeGate:
    name = "freeze"
    args: ClassVar[dict[str, Arg]] = {**APP_ARGS, "manualSync": Arg(_bool, default="false")}

    def evaluate(self, args: dict[str, Any], ctx: GateContext) -> Verdict:
        app = ctx.application(args["app"], args["appNamespace"])
        spec = app.get("spec") or {}
        dest = spec.get("destination") or {}
        project_name = str(spec.get("project") or "default")
        project = ctx.cached(("project", project_name), lambda: ctx.argocd.project(project_name))
        windows: list[SyncWindow] = []
        for i, raw in enumerate((project.get("spec") or {}).get("syncWindows") or []):
            try:
                windows.append(
                    SyncWindow.from_dict(raw, origin=f"AppProject {project_name} syncWindows[{i}]")
                )
            except (
                Exception
            ) as exc:  # a window Argo CD accepted but we cannot read: say so, never pass silently
                raise UpstreamUnavailable(
                    f"cannot read AppProject {project_name} syncWindows[{i}]: {exc}"
                ) from exc
        windows += ctx.windows
        now = ctx.now()
        reasons = frozen(
            windows,
            app=args["app"],
            namespace=str(dest.get("namespace") or ""),
            cluster=str(dest.get("name") or ""),
            server=str(dest.get("server") or ""),
            now=now,
            manual=bool(args.get("manualSync", False)),
        )
        observed = {
            "windows": len(windows),
            "now": now.isoformat(timespec="seconds"),
            "manualSync": bool(args.get("manualSync", False)),
        }
        if reasons:
            return Verdict(self.name, FAIL, reasons, observed)
        return Verdict(
            self.name, PASS, ["no freeze: no deny window active, allowed by every allow window"], observed
        )
