#!/usr/bin/env python3
"""`make demo`: the whole suite end to end on one machine, no cluster needed.

Real processes and real HTTP on loopback: driftguard-cmp renders the example GitOps repository
with the real helm; the notifier and the analysis provider run under gunicorn. The only stand-ins
are a local server answering like the Argo CD API (replaying the scenario) and a local receiver
standing in for Feishu, Slack and PagerDuty, which prints what each would show.

1. The prune that did not happen   (examples/gitops: the chart default flips, production relies on it)
2. The drill                       (kubectl patch: GPU 2 -> 4; the HPA and a webhook also touch it)
3. The gate                        (the canary holds while the drift stands; self-heal; resolve)
"""

from __future__ import annotations

import base64
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from standins import argo_api, processes, receivers  # noqa: E402
from standins.drill import serve_drill  # noqa: E402
from standins.processes import free_port, stop  # noqa: E402
from standins.processes import start_gunicorn as gunicorn  # noqa: E402

EXAMPLES = ROOT / "examples" / "gitops"
TOOLS = ROOT / ".tools" / "bin"
NOTIFIER_TOKEN = "demo-notifier-token-" + os.urandom(8).hex()
ANALYSIS_TOKEN = "demo-analysis-token-" + os.urandom(8).hex()
PD_KEY = "0123456789abcdef0123456789abcdef"
WIDTH = 100
results: list[tuple[str, bool]] = []


def title(text: str) -> None:
    print(f"\n{'=' * WIDTH}\n{text}\n{'=' * WIDTH}")


def step(text: str) -> None:
    print(f"\n--- {text}")


def show(text: str, indent: str = "    ") -> None:
    for line in text.rstrip().splitlines():
        print(indent + line)


def check(what: str, ok: bool) -> None:
    results.append((what, ok))
    print(f"  [{'ok' if ok else 'FAILED'}] {what}")


def base_env() -> dict[str, str]:
    return {
        "PATH": f"{TOOLS}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": tempfile.gettempdir(),
        "DRIFTGUARD_HELM": os.environ.get("DRIFTGUARD_HELM", str(TOOLS / "helm")),
        "DRIFTGUARD_KUSTOMIZE": os.environ.get("DRIFTGUARD_KUSTOMIZE", str(TOOLS / "kubectl")),
    }


def cmp(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cmp_plugin", *args],
        cwd=cwd,
        env={**base_env(), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def git(repo: Path, *args: str) -> str:
    return processes.git(repo, *args, env=base_env())


# --- 1. the prune that did not happen ---------------------------------------------------------------


def part_one(work: Path, argo: argo_api.FakeArgo) -> None:
    title("1. The prune that did not happen")
    repo = work / "gitops"
    for part in ("charts", "clusters", "apps"):
        shutil.copytree(EXAMPLES / part, repo / part)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "payment chart 1.4.0: enabled defaults to true")
    base = git(repo, "rev-parse", "HEAD")
    values = repo / "charts/payment/values.yaml"
    values.write_text(values.read_text().replace("\nenabled: true\n", "\nenabled: false\n"))
    git(repo, "commit", "-q", "-am", "payment chart 1.5.0: enabled defaults to false")
    head = git(repo, "rev-parse", "HEAD")
    print("A PR flips the payment chart's default `enabled: true` -> `false`. Staging sets `enabled` itself;")
    print("production relies on the chart default.")

    step(
        "The PR check renders every environment at both revisions: driftguard-cmp diff --base BASE --head HEAD apps/ --fail-on-removal '*-production'"
    )
    proc = cmp(
        ["diff", "--base", base, "--head", head, "apps/", "--fail-on-removal", "*-production"], cwd=repo
    )
    show(proc.stdout)
    show(proc.stderr)
    check(
        "the PR check shows production losing the payment Deployment, caused by the chart default, and blocks it (exit 1)",
        proc.returncode == 1 and "chart default of `enabled` changed from true to false" in proc.stdout,
    )

    app_env = {
        "ARGOCD_APP_NAME": "payment-production",
        "ARGOCD_APP_NAMESPACE": "payment-production",
        "ARGOCD_APP_REVISION": head,
        "ARGOCD_APP_SOURCE_PATH": "charts/payment",
        "ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/platform/gitops.git",
        "DRIFTGUARD_CMP_CACHE_DIR": str(work / "cmp-cache"),
    }

    def params(
        mode: str, values_file: str = "../../clusters/production/payment-values.yaml", **extra: str
    ) -> dict[str, str]:
        plist: list[dict[str, Any]] = [
            {"name": "values-files", "array": [values_file]},
            {"name": "implicit-defaults", "string": mode},
        ]
        plist += [{"name": k, "string": v} for k, v in extra.items()]
        return {**app_env, "ARGOCD_APP_PARAMETERS": json.dumps(plist)}

    step(
        "Before the PR, Argo CD renders production through the sidecar (implicit-defaults: refuse): driftguard-cmp generate"
    )
    git(repo, "checkout", "-q", base)
    proc = cmp(["generate"], cwd=repo / "charts/payment", env=params("refuse"))
    git(repo, "checkout", "-q", "main")
    show(proc.stderr)
    check(
        "generate refuses: `enabled` (chart default true) decides whether the Deployment renders and production does not set it",
        proc.returncode != 0 and "refused by implicit-defaults" in proc.stderr,
    )

    step(
        "Even in warn mode, the shrink guard compares with what the Application manages now (read from the Argo CD API)"
    )
    held = [
        ("apps", "Deployment", "payment-production", "payment-production"),
        ("", "Service", "payment-production", "payment-production"),
    ]
    argo.put(argo_api.application("payment-production", resources=held, dest_namespace="payment-production"))
    proc = cmp(
        ["generate"],
        cwd=repo / "charts/payment",
        env={**params("warn"), "DRIFTGUARD_ARGOCD_URL": argo.url, "DRIFTGUARD_ARGOCD_TOKEN": argo.token},
    )
    show(proc.stderr)
    check(
        "generate refuses: the render would prune the Deployment (50% of what the app manages)",
        proc.returncode != 0 and "refused by shrink" in proc.stderr,
    )

    step("A rebase reverted .gitignore and committed stale helm-rendered/ output")
    stray = repo / "charts/payment/helm-rendered"
    stray.mkdir()
    (stray / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: stale}\n")
    proc = cmp(
        ["generate"],
        cwd=repo / "charts/payment",
        env=params("warn", values_file="../../clusters/staging/payment-values.yaml"),
    )
    show(proc.stderr)
    check(
        "generate refuses the committed render output",
        proc.returncode != 0 and "refused by stray-artifacts" in proc.stderr,
    )
    shutil.rmtree(stray)

    step("A values change that renders nothing at all")
    empty = {
        **params("off", values_file="../../clusters/staging/payment-values.yaml"),
        "ARGOCD_APP_PARAMETERS": json.dumps(
            [
                {"name": "values-files", "array": ["../../clusters/staging/payment-values.yaml"]},
                {"name": "values", "string": "enabled: false\nservice:\n  enabled: false\n"},
            ]
        ),
    }
    proc = cmp(["generate"], cwd=repo / "charts/payment", env=empty)
    show(proc.stderr)
    check(
        "generate refuses the empty render (Argo CD would have pruned everything)",
        proc.returncode != 0 and "refused by empty" in proc.stderr,
    )


# --- 2 and 3: the drill and the gate -----------------------------------------------------------------------


def scenario(argo: argo_api.FakeArgo, *, healed: bool) -> None:
    serve_drill(
        argo,
        patched=not healed,
        secret_changed=not healed,
        sync="Synced" if healed else "OutOfSync",
        secret=("db-password-from-vault", "rotated-by-hand-0451"),
        ignore_replicas=True,
    )


def notify(port: int, trigger: str, sync: str) -> float:
    body = {
        "trigger": trigger,
        "app": {
            "metadata": {"name": "deepseek-inference", "namespace": "argocd"},
            "status": {"sync": {"status": sync}},
        },
    }
    sent = time.time()
    resp = requests.post(
        f"http://127.0.0.1:{port}/v1/notifications",
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {NOTIFIER_TOKEN}", "Content-Type": "application/json"},
        timeout=5,
    )
    resp.raise_for_status()
    return sent


def wait_for(rx: receivers.Receivers, count: int, timeout: float = 60) -> None:
    """Until ``count`` messages came, or ``timeout`` passed (the checks after it then say what is
    missing): generous, as the first notification of just-started workers on a loaded machine
    can take many seconds; the wait ends as soon as they are there."""
    deadline = time.monotonic() + timeout
    while len(rx.captured) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def show_feishu(card: dict[str, Any]) -> None:
    c = card["card"]
    print(f"    ┌ Feishu card [{c['header']['template']}] {c['header']['title']['content']}")
    for e in c["body"]["elements"]:  # card JSON 2.0
        if e["tag"] == "markdown":
            for line in html.unescape(e["content"]).splitlines():
                print(f"    │ {line}")
        elif e["tag"] == "hr":
            print("    │ " + "─" * 40)
        elif e["tag"] == "button":
            print(f"    │ [{e['text']['content']}] -> {e['behaviors'][0]['default_url']}")
    print(f"    └ signed: sign={card.get('sign', '-')[:12]}… timestamp={card.get('timestamp', '-')}")


def show_slack(msg: dict[str, Any]) -> None:
    print(f"    ┌ Slack (fallback text): {msg['text']}")
    for b in msg["blocks"]:
        if b["type"] == "actions":
            text = " ".join(f"[{e['text']['text']}] -> {e['url']}" for e in b["elements"])
        else:
            text = b.get("text", {}).get("text") or " ".join(e.get("text", "") for e in b.get("elements", []))
        lines = (
            ["─" * 40]
            if b["type"] == "divider"
            else [w for raw in text.splitlines() for w in textwrap.wrap(raw, WIDTH - 8) or [""]]
        )
        for line in lines:
            print(f"    │ {line}")
    print("    └")


def show_pd(event: dict[str, Any]) -> None:
    print(f"    ┌ PagerDuty Events API v2: {event['event_action']} dedup_key={event['dedup_key']}")
    if "payload" in event:
        p = event["payload"]
        print(f"    │ severity={p['severity']} source={p['source']} component={p['component']}")
        for line in textwrap.wrap(p["summary"], WIDTH - 8):
            print(f"    │ {line}")
        print(f"    │ suppressed: {p['custom_details']['suppressed']}")
    print("    └")


def ask_gate(port: int) -> requests.Response:
    """What the canary's AnalysisRun asks the analysis provider, shown as it answers."""
    gate = requests.get(
        f"http://127.0.0.1:{port}/v1/gates/drift?app=deepseek-inference",
        headers={"Authorization": f"Bearer {ANALYSIS_TOKEN}"},
        timeout=10,
    )
    show(json.dumps(gate.json(), indent=2, ensure_ascii=False))
    return gate


def part_two_and_three(work: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers) -> None:
    title("2. The drill")
    config = work / "notifier.yaml"
    config.write_text(
        json.dumps(
            {
                "locale": "zh-CN",
                "argocdUrl": "https://argocd.example.com",
                "channels": rx.channels(
                    feishu_secret="demo-signing-secret", routing_key=PD_KEY, slack_locale="en"
                ),
            }
        )
    )
    argo_env = {**base_env(), "DRIFTGUARD_ARGOCD_URL": argo.url, "DRIFTGUARD_ARGOCD_TOKEN": argo.token}
    n_port, a_port = free_port(), free_port()
    notifier = gunicorn(
        "notifier.app:create_app()",
        n_port,
        {
            **argo_env,
            "DRIFTGUARD_REDACT_KEY": "redact-key-for-bench-0123456789abcdef",
            "DRIFTGUARD_NOTIFIER_TOKEN": NOTIFIER_TOKEN,
            "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
            "DRIFTGUARD_NOTIFIER_OUTBOX": str(work / "outbox.sqlite3"),
        },
        work / "notifier.log",
    )
    analysis = None
    try:
        analysis = gunicorn(
            "analysis_provider.app:create_app()",
            a_port,
            {
                **argo_env,
                "DRIFTGUARD_REDACT_KEY": "redact-key-for-bench-0123456789abcdef",
                "DRIFTGUARD_ANALYSIS_TOKEN": ANALYSIS_TOKEN,
                "DRIFTGUARD_ANALYSIS_CACHE_TTL": "0",
            },
            work / "analysis.log",
        )
        print(
            f"notifier (gunicorn, 2 workers) on :{n_port}; analysis provider (gunicorn, 2 workers) on :{a_port}"
        )
        print("On-call runs: kubectl patch deployment deepseek-inference -n ai-serving --type=json \\")
        print(
            """  -p '[{"op":"replace","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu","value":"4"}]'"""
        )
        print(
            "Meanwhile the HPA scaled replicas 3 -> 5, the API server defaulted imagePullPolicy, and someone edited a Secret."
        )
        scenario(argo, healed=False)
        step("Argo CD Notifications posts on-drift-detected to the notifier")
        sent = notify(n_port, "on-drift-detected", "OutOfSync")
        wait_for(rx, 3)
        by_path = {c.path: c for c in rx.captured}
        for path, shower in (("/feishu", show_feishu), ("/slack", show_slack), ("/pagerduty", show_pd)):
            if path in by_path:
                shower(by_path[path].json())
                print(f"    delivered {1000 * (by_path[path].at - sent):.0f} ms after the webhook")
        # one notification into workers that just started: their first request pays for first use
        # (imports, connections); docs/performance.md has the steady-state figures and their commands
        print("    (the first notification of just-started workers; steady state: bench/notifier_latency.py)")
        everything = "\n".join(c.body.decode() for c in rx.captured)
        gpu = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"
        check(
            "one alert per channel, naming the GPU path, 2 -> 4 and kubectl-patch",
            sorted(by_path) == ["/feishu", "/pagerduty", "/slack"]
            and gpu in everything
            and "kubectl-patch" in everything,
        )
        secrets = [b"db-password-from-vault", b"rotated-by-hand-0451"]
        leaked = any(v.decode() in everything or base64.b64encode(v).decode() in everything for v in secrets)
        check(
            "the Secret edit is reported masked; nothing about replicas, the defaulted imagePullPolicy, or any Secret value",
            "/spec/replicas" not in everything
            and "imagePullPolicy" not in everything
            and not leaked
            and "/data/password" in everything,
        )

        title("3. The gate")
        step("The canary's AnalysisRun asks: GET /v1/gates/drift?app=deepseek-inference")
        gate = ask_gate(a_port)
        check(
            "the drift gate answers fail while the drift stands (HTTP 200, ok: false)",
            gate.status_code == 200 and gate.json()["verdict"] == "fail",
        )
        step("Self-heal puts Git back; Argo CD posts on-drift-resolved")
        scenario(argo, healed=True)
        before = len(rx.captured)
        notify(n_port, "on-drift-resolved", "Synced")
        wait_for(rx, before + 3)
        resolved = [c for c in rx.captured[before:] if c.path == "/pagerduty"]
        if resolved:
            show_pd(resolved[0].json())
        gate = ask_gate(a_port)
        check(
            "the gate answers pass and PagerDuty gets its resolve with the same dedup_key",
            gate.json()["verdict"] == "pass"
            and bool(resolved)
            and resolved[0].json()["event_action"] == "resolve",
        )
    except BaseException:
        # The services' own words are the fastest way to the cause; the temp dir goes with us.
        for log in ("notifier.log", "analysis.log"):
            if (work / log).is_file():
                print(f"\n--- last lines of {log} ---\n" + (work / log).read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        stop(notifier)
        if analysis is not None:
            stop(analysis)


def main() -> int:
    started = time.monotonic()
    for tool in ("helm", "kubectl"):
        if not (TOOLS / tool).is_file() and not os.environ.get(
            f"DRIFTGUARD_{'HELM' if tool == 'helm' else 'KUSTOMIZE'}"
        ):
            raise SystemExit(
                f"demo: {TOOLS / tool} is missing; run `make demo` (it installs the tools first)"
            )
    with (
        tempfile.TemporaryDirectory(prefix="driftguard-demo-") as tmp,
        argo_api.serve() as argo,
        receivers.serve() as rx,
    ):
        work = Path(tmp)
        part_one(work, argo)
        part_two_and_three(work, argo, rx)
    title("Summary")
    for what, ok in results:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
    failed = [w for w, ok in results if not ok]
    print(
        f"\ndemo: {len(results) - len(failed)} of {len(results)} checks passed in {time.monotonic() - started:.1f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
