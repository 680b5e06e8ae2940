#!/usr/bin/env python3
"""Argo CD fidelity: Argo CD v3.5.1's own test cases, extracted as data, against driftguard.

The project's copy of ../shared/corpus/argo-cases/run.py (`make corpus` runs it there; pytest runs
tests/driftguard/test_argo_cases.py over the copies in tests/data/argo-cases). Differences from
the shared runner: sync-window questions pass the destination's name *and* server and say whether
the sync is manual (Argo's Matches and CanSync take both); pair cases pass the Application's
destination namespace to the pairing, as Argo CD's controller does.

    .venv/bin/python scripts/argo_cases.py [CASES_DIR]      (default: tests/data/argo-cases)

Cases (one JSON file per area, each case names the Go test it came from; names starting with
"derived:" come from Argo's code rather than from a Go test table):
  diff_cases.json     gitops-engine/pkg/diff/diff_test.go (+ knowntypes_normalizer_test.go): Argo's
                      Modified == false  ->  driftguard reports no alerting change (human, pending-sync,
                      missing, prune-candidate); Modified == true -> at least one of those on each path.
  ignore_cases.json   util/argo/normalizers/diff_normalizer_test.go, util/argo/diff/*_test.go: the
                      same paths removed/ignored, the same rules matching a resource.
  windows_cases.json  pkg/apis/application/v1alpha1/types_test.go: the same active / inactive-allow /
                      matches / can-sync answers at the same instants (errors where Argo errors).
  cmp_cases.json      Helm release names, the CMP environment, plugin.yaml, discovery.
Prints HOLDS name / SHORT name -- detail per case, then one line of per-area tallies; exits 1 if
any case falls short, 2 if the cases or driftguard cannot be loaded.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

CASES = Path(
    sys.argv[1]
    if len(sys.argv) > 1 and __name__ == "__main__"
    else Path(__file__).resolve().parents[1] / "tests" / "data" / "argo-cases"
)
LOUD = {"human", "pending-sync", "missing", "prune-candidate"}

try:
    from cmp_plugin.argo_env import AppEnv, parse_parameters
    from cmp_plugin.plugin_yaml import plugin_config
    from cmp_plugin.renderers import choose
    from driftguard.argocd_cm import rules_from_argocd_cm
    from driftguard.drift import DriftEngine
    from driftguard.errors import DriftguardError
    from driftguard.ignore import IgnoreRules, rules_from_application
    from driftguard.manifests import resource_key
    from driftguard.windows import SyncWindow, frozen
except ImportError as exc:  # pragma: no cover
    print(f"argo_cases: cannot import driftguard with {sys.executable}: {exc}", file=sys.stderr)
    sys.exit(2)

tally: dict[str, list[int]] = {}
derived: dict[str, int] = {}
RESULTS: list[tuple[str, bool, str]] = []  # (label, holds, detail), for tests that call run_* directly
QUIET = False


def report(area: str, case: dict[str, Any], ok: bool, detail: str = "") -> None:
    RESULTS.append((f"{area}: {case['name']}", ok, detail))
    if QUIET:
        return
    t = tally.setdefault(area, [0, 0])
    t[0] += ok
    t[1] += 1
    if case.get("derived"):
        derived[area] = derived.get(area, 0) + 1
    label = f"{area}: {case['name']}"
    print(("HOLDS " if ok else "SHORT ") + label + ("" if ok or not detail else f" -- {detail}"), flush=True)


def load(name: str) -> list[dict[str, Any]]:
    try:
        return json.loads((CASES / name).read_text())
    except (OSError, ValueError) as exc:
        print(f"argo_cases: cannot read {CASES / name}: {exc}", file=sys.stderr)
        sys.exit(2)


def short(v: Any, n: int = 160) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= n else s[: n - 1] + "…"


def on_path(change_path: str, p: str) -> bool:
    """A change concerns expected path p when it is p, below p, or a non-root ancestor of p."""
    return (
        change_path == p
        or change_path.startswith(p + "/")
        or (change_path != "" and p.startswith(change_path + "/"))
    )


def engine_for(
    app_rules: list[dict[str, Any]] | None = None,
    app: dict[str, Any] | None = None,
    argocd_cm: dict[str, Any] | None = None,
) -> DriftEngine:
    rules = []
    if app is not None:
        rules += rules_from_application(app)
    if app_rules:
        rules += rules_from_application(
            {"metadata": {"name": "fidelity"}, "spec": {"ignoreDifferences": app_rules}}
        )
    if argocd_cm is not None:
        rules += rules_from_argocd_cm(argocd_cm)
    return DriftEngine(IgnoreRules(rules))


def drift_of(engine: DriftEngine, desired: Any, live: Any) -> list[dict[str, Any]]:
    obj = live if live is not None else desired
    key = resource_key(obj)
    try:
        d = engine.resource(key, copy.deepcopy(desired), copy.deepcopy(live))
    finally:
        engine.rules.close()
    return [c.to_json() for c in d.changes]


def summary(changes: list[dict[str, Any]]) -> str:
    return short([f"{c['class']} {c['op']} {c['path'] or '/'}" for c in changes], 300)


# --- diff / normalization --------------------------------------------------------------------------


def run_diff(c: dict[str, Any]) -> None:
    try:
        if c.get("pairs"):  # whole resources: Argo's CompareAppState over the app's resources
            engine = engine_for(app=c.get("app"), argocd_cm=c.get("argocd_cm"))
            try:
                dest = (((c.get("app") or {}).get("spec") or {}).get("destination") or {}).get(
                    "namespace"
                ) or ""
                drifts = engine.pairs(
                    copy.deepcopy(c["pairs"]["desired"]),
                    copy.deepcopy(c["pairs"]["live"]),
                    default_namespace=dest,
                )
            finally:
                engine.rules.close()
            changes = [x.to_json() for d in drifts for x in d.changes]
        else:
            changes = drift_of(
                engine_for(app=c.get("app"), argocd_cm=c.get("argocd_cm")), c["desired"], c["live"]
            )
    except DriftguardError as exc:
        report("diff", c, False, f"driftguard refused the input: {exc}")
        return
    exp = c["expect"]
    if not exp["modified"]:
        loud = [x for x in changes if x["class"] in LOUD]
        report("diff", c, not loud, f"Argo: not modified; driftguard: {summary(loud)}")
        return
    missing = []
    for p in exp["paths"]:
        if not any(x["class"] in LOUD and on_path(x["path"], p) for x in changes):
            found = [x for x in changes if on_path(x["path"], p)]
            missing.append(f"{p or '/'} ({'only ' + summary(found) if found else 'no change reported'})")
    report(
        "diff",
        c,
        not missing,
        "Argo: modified at " + "; ".join(missing) + f"; all driftguard changes: {summary(changes)}",
    )


# --- ignore rules ----------------------------------------------------------------------------------


def pointer_get(obj: Any, ptr: str) -> tuple[bool, Any]:
    if ptr == "":
        return True, obj
    node = obj
    for tok in ptr.split("/")[1:]:
        tok = tok.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            return False, None
    return True, node


def run_ignore(c: dict[str, Any]) -> None:
    kind = c["kind"]
    exp = c["expect"]
    try:
        rules = rules_from_application(
            {"metadata": {"name": "fidelity"}, "spec": {"ignoreDifferences": c.get("app_rules") or []}}
        )
        if c.get("argocd_cm"):
            rules += rules_from_argocd_cm(c["argocd_cm"])
        ir = IgnoreRules(rules)
    except DriftguardError as exc:
        if kind == "normalize" and exp.get("error"):
            report("ignore", c, True)
        else:
            report("ignore", c, False, f"driftguard refused the rules: {exc}")
        return
    if kind == "normalize" and exp.get("error"):
        ir.close()
        report("ignore", c, False, "Argo refuses the rule when it is built; driftguard accepted it")
        return
    try:
        if kind == "normalize":
            obj = c["object"]
            key = resource_key(obj)
            t0 = time.monotonic()
            out = ir.normalize(copy.deepcopy(obj), ir.matching(key.group, key.kind, key.name, key.namespace))
            took = time.monotonic() - t0
            bad = [f"{p} still present" for p in exp["removed"] if pointer_get(out, p)[0]]
            bad += [f"{p} removed" for p in exp["kept"] if not pointer_get(out, p)[0]]
            for p, v in exp["equals"].items():
                found, got = pointer_get(out, p)
                if not found or got != v:
                    bad.append(f"{p or '/'} is {short(got) if found else 'absent'}, Argo leaves {short(v)}")
            if took > 10:
                bad.append(f"normalization took {took:.1f}s")
            report("ignore", c, not bad, "; ".join(bad))
        elif kind == "diff":
            engine = DriftEngine(ir)
            changes = drift_of(engine, c["desired"], c["live"])
            bad = []
            for p in exp["ignored"]:
                at = [x for x in changes if on_path(x["path"], p)]
                if not at or any(x["class"] != "ignored" for x in at):
                    bad.append(f"Argo ignores {p}; driftguard: {summary(at) if at else 'no change at all'}")
            for p in exp["reported"]:
                at = [x for x in changes if on_path(x["path"], p) and x["class"] != "ignored"]
                if not at:
                    bad.append(
                        f"Argo keeps {p} in the diff; driftguard: {summary([x for x in changes if on_path(x['path'], p)])}"
                    )
            report("ignore", c, not bad, "; ".join(bad))
        else:  # match
            r = c["resource"]
            matching = ir.matching(r["group"], r["kind"], r["name"], r["namespace"])
            bad = []
            if bool(matching) != exp["match"]:
                bad.append(f"Argo match={exp['match']}, driftguard matched {len(matching)} rule(s)")
            if exp.get("union") and matching:
                got = {
                    "managers": sorted(ir.trusted_managers(r["group"], r["kind"], r["name"], r["namespace"])),
                    "pointers": sorted({p for m in matching for p in m.json_pointers}),
                    "jq": sorted({q for m in matching for q in m.jq_path_expressions}),
                }
                for k, v in exp["union"].items():
                    if sorted(v) != got[k]:
                        bad.append(f"{k}: Argo {v}, driftguard {got[k]}")
            report("ignore", c, not bad, "; ".join(bad))
    except DriftguardError as exc:
        report("ignore", c, False, f"driftguard error: {exc}")
    finally:
        ir.close()


# --- sync windows ----------------------------------------------------------------------------------


def run_window(c: dict[str, Any]) -> None:
    exp = c["expect"]
    now = datetime.fromisoformat(c["now"].replace("Z", "+00:00"))
    q = c["query"]
    try:
        ws = [SyncWindow.from_dict(w, origin=f"window[{i}]") for i, w in enumerate(c["windows"])]
    except DriftguardError as exc:
        if exp == "error":
            report("windows", c, True)
        else:
            report("windows", c, False, f"driftguard refused a window Argo accepts: {exc}")
        return
    if exp == "error":
        report(
            "windows",
            c,
            False,
            "Argo: error ("
            + ", ".join(sorted({w["schedule"] + " / " + w["duration"] for w in c["windows"]}))
            + "); driftguard accepted every window",
        )
        return
    if q == "active":
        got: Any = [i for i, w in enumerate(ws) if w.active(now)]
        report("windows", c, got == exp, f"at {c['now']} Argo active {exp}, driftguard {got}")
    elif q == "inactive_allows":
        got = [i for i, w in enumerate(ws) if w.kind == "allow" and not w.active(now)]
        report("windows", c, got == exp, f"at {c['now']} Argo inactive allows {exp}, driftguard {got}")
    elif q == "window_active":
        got = ws[0].active(now)
        report("windows", c, got == exp, f"at {c['now']} Argo active={exp}, driftguard {got}")
    elif q == "matches":
        app = c["app"]
        got = ws[0].applies_to(
            app["name"], app["namespace"], app.get("clusterName") or "", server=app.get("server") or ""
        )
        report("windows", c, got == exp, f"Argo matches={exp}, driftguard applies_to={got}")
    elif q == "can_sync":
        app = c["app"]
        started = c.get("operation_started")
        reasons = frozen(
            ws,
            app=app["name"],
            namespace=app["namespace"],
            cluster=app.get("clusterName") or "",
            server=app.get("server") or "",
            now=now,
            manual=bool(c["manual"]),
            operation_started=datetime.fromisoformat(started.replace("Z", "+00:00")) if started else None,
        )
        got = not reasons
        mode = "manual" if c["manual"] else "automatic"
        report(
            "windows",
            c,
            got == exp,
            f"{mode} sync at {c['now']}: Argo CanSync={exp}, driftguard not frozen={got}",
        )


# --- CMP -------------------------------------------------------------------------------------------

CMP_BIN = Path(sys.executable).with_name("driftguard-cmp")
CMP_CMD = [str(CMP_BIN)] if CMP_BIN.exists() else [sys.executable, "-m", "cmp_plugin"]
SPEC_FIELDS = {"version", "init", "generate", "discover", "parameters", "preserveFileMode", "provideGitCreds"}
ANN_FIELDS = {"name", "title", "tooltip", "required", "itemType", "collectionType", "string", "array", "map"}


def cmp(args: list[str], cwd: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TMPDIR": tempfile.gettempdir(),
    }
    return subprocess.run(
        CMP_CMD + args, cwd=cwd, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def write_tree(root: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = Path(root) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def run_cmp(c: dict[str, Any]) -> None:
    k = c["kind"]
    try:
        if k == "release_name":
            got = AppEnv.from_environ(c["env"]).release_name
            report(
                "cmp",
                c,
                got == c["expect"],
                f"ARGOCD_APP_NAME={c['env']['ARGOCD_APP_NAME']!r}: Argo release {c['expect']!r}, driftguard {got!r}",
            )
        elif k == "env_fields":
            env = AppEnv.from_environ(c["env"])
            bad = []
            for f, v in c["expect"].items():
                g = getattr(env, f)
                g = list(g) if isinstance(g, tuple) else g
                if g != v:
                    bad.append(f"{f}: Argo sends {v!r}, driftguard reads {g!r}")
            report("cmp", c, not bad, "; ".join(bad))
        elif k == "params":
            params, _ = parse_parameters(c["env"])
            bad = [
                f"{n}: Argo sent {v!r}, driftguard reads {params.get(n)!r}"
                for n, v in c["expect"].items()
                if params.get(n) != v
            ]
            report("cmp", c, not bad, "; ".join(bad))
        elif k == "plugin_yaml":
            cfg = plugin_config()
            spec = cfg.get("spec") or {}
            chk = c["check"]
            if chk == "name":
                ok, d = bool((cfg.get("metadata") or {}).get("name")), "metadata.name is empty"
            elif chk == "kind":
                ok, d = cfg.get("kind") == "ConfigManagementPlugin", f"kind is {cfg.get('kind')!r}"
            elif chk == "generate":
                ok, d = bool((spec.get("generate") or {}).get("command")), "spec.generate.command is empty"
            elif chk == "discover":
                disc = spec.get("discover") or {}
                find = disc.get("find") or {}
                ok = bool(disc.get("fileName")) or bool(find.get("glob")) or bool(find.get("command"))
                d = f"discover {disc!r} is not defined for Argo"
            elif chk == "address":
                name, version = cfg["metadata"]["name"], spec.get("version") or ""
                sock = f"{name}-{version}" if version else name
                ok, d = (
                    sock == "driftguard",
                    f"argocd-cmp-server listens on {sock}.sock; Applications name plugin 'driftguard'",
                )
            else:
                extra = sorted(set(spec) - SPEC_FIELDS)
                for sub, allowed in (
                    ("generate", {"command", "args"}),
                    ("discover", {"find", "fileName"}),
                    ("parameters", {"static", "dynamic"}),
                ):
                    extra += [f"{sub}.{x}" for x in sorted(set(spec.get(sub) or {}) - allowed)]
                extra += [
                    f"discover.find.{x}"
                    for x in sorted(
                        set((spec.get("discover") or {}).get("find") or {}) - {"command", "args", "glob"}
                    )
                ]
                ok, d = not extra, f"fields argocd-cmp-server does not read (silently dropped): {extra}"
            report("cmp", c, ok, d)
        elif k == "announcement":
            with tempfile.TemporaryDirectory() as t:
                p = cmp(["parameters"], t, c["env"])
            bad = []
            if p.returncode != 0:
                bad.append(f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
            else:
                try:
                    items = json.loads(p.stdout)
                except ValueError as exc:
                    items = None
                    bad.append(f"stdout is not JSON: {exc}")
                if items is not None and not isinstance(items, list):
                    bad.append("stdout is not a JSON array")
                for it in items if isinstance(items, list) else []:
                    if not isinstance(it, dict) or not it.get("name"):
                        bad.append(f"announcement without name: {short(it)}")
                        continue
                    if set(it) - ANN_FIELDS:
                        bad.append(f"{it['name']}: unknown fields {sorted(set(it) - ANN_FIELDS)}")
                    if "string" in it and not isinstance(it["string"], str):
                        bad.append(f"{it['name']}: string is not a string")
                    if "array" in it and not (
                        isinstance(it["array"], list) and all(isinstance(v, str) for v in it["array"])
                    ):
                        bad.append(f"{it['name']}: array is not a list of strings")
                    if "map" in it and not (
                        isinstance(it["map"], dict) and all(isinstance(v, str) for v in it["map"].values())
                    ):
                        bad.append(f"{it['name']}: map is not a map of strings")
            report("cmp", c, not bad, "; ".join(bad))
        elif k == "discover":
            with tempfile.TemporaryDirectory() as t:
                write_tree(t, c["files"])
                p = cmp(["discover"], t, {})
            match = p.returncode == 0 and p.stdout.removesuffix("\n") != ""
            report(
                "cmp",
                c,
                match == c["expect"],
                f"Argo expects match={c['expect']}; driftguard-cmp discover exit {p.returncode}, stdout {p.stdout!r}",
            )
        elif k == "app_type":
            with tempfile.TemporaryDirectory() as t:
                write_tree(t, c["files"])
                got = choose(Path(t) / c["path"]).name
            report(
                "cmp", c, got == c["expect"], f"Argo picks {c['expect']}, driftguard's auto renderer is {got}"
            )
    except DriftguardError as exc:
        report("cmp", c, False, f"driftguard error: {exc}")


RUNNERS = {"diff": run_diff, "ignore": run_ignore, "windows": run_window, "cmp": run_cmp}


def main() -> int:
    for c in load("diff_cases.json"):
        run_diff(c)
    for c in load("ignore_cases.json"):
        run_ignore(c)
    for c in load("windows_cases.json"):
        run_window(c)
    if (CASES / "cmp_cases.json").exists():  # the project's copy holds no CMP cases (issue 15's)
        for c in load("cmp_cases.json"):
            run_cmp(c)
    parts = []
    for area, (ok, n) in tally.items():
        extra = f" ({derived[area]} derived)" if derived.get(area) else ""
        parts.append(f"{area} {ok}/{n}{extra}")
    total_ok, total = sum(t[0] for t in tally.values()), sum(t[1] for t in tally.values())
    print(f"TALLY holds: {', '.join(parts)}; all {total_ok}/{total}")
    return 0 if total_ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
