#!/usr/bin/env python3
"""Print what each channel receives for the drill and the 412-Deployment case, in en and zh-CN.

The real notifier (create_app, its worker, its templates) with the Argo CD and receiver stand-ins,
fed the webhook bodies the shipped argocd-notifications-cm templates render:

1. the drill: kubectl patch GPU 2 -> 4, read while it stands;
2. the drill reverted by self-heal before the read, with the admission witness;
3. the same without the admission webhook;
4. the 412-Deployment refusal (ComparisonError, every live resource requiresPruning).

Usage: scripts/show_messages.py [--locale en|zh-CN] [--case drill|reverted|reverted-bare|refused]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from driftguard.argocd import ArgoCDSettings  # noqa: E402
from notifier.app import create_app  # noqa: E402
from notifier.config import parse_config  # noqa: E402
from notifier.settings import NotifierSettings  # noqa: E402
from standins import argo_api, receivers  # noqa: E402
from standins.apiserver import admission_review  # noqa: E402
from standins.drill import inference_live, serve_drill  # noqa: E402

PATCH = ROOT / "manifests" / "components" / "argocd" / "argocd-notifications-cm-patch.yaml"
REVISION = "0123456789abcdef0123456789abcdef01234567"
WRAP = (
    "Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown"
    " desc = plugin sidecar failed. error generating manifests in cmp: rpc error: code = Unknown desc ="
    " `driftguard-cmp generate` failed exit status 3: "
)
REFUSAL = (
    "driftguard: refused by shrink: the render would prune 1638 of 1638 resources (412 Deployment,"
    " 1140 Service, 86 PersistentVolumeClaim)\n"
    "driftguard: gating key `enabled` relies on the chart default (templates/deployment.yaml:1)"
)
AUDIT = "audit-token-0123456789abcdef"


def body(trigger: str, app: dict[str, Any]) -> bytes:
    """The shipped template's body (the two Go-template forms it uses)."""
    import re

    data = yaml.safe_load(PATCH.read_text())["data"]
    [cond] = yaml.safe_load(data[f"trigger.driftguard-{trigger}"])
    text = yaml.safe_load(data[f"template.{cond['send'][0]}"])["webhook"]["driftguard"]["body"]

    def look(path: str, root: Any) -> Any:
        for part in path.strip(".").split("."):
            root = root.get(part) if isinstance(root, dict) else None
        return root

    text = re.sub(
        r"\{\{with (\.[\w.]+)\}\}\{\{toJson (\.[\w.]+)\}\}\{\{else\}\}(\w+)\{\{end\}\}",
        lambda m: json.dumps(look(m.group(2), s)) if (s := look(m.group(1), {"app": app})) else m.group(3),
        text,
    )
    text = re.sub(r"\{\{toJson (\.[\w.]+)\}\}", lambda m: json.dumps(look(m.group(1), {"app": app})), text)
    return text.encode()


def outofsync_app() -> dict[str, Any]:
    app = argo_api.application(
        "deepseek-inference",
        resources=[
            ("apps", "Deployment", "ai-serving", "deepseek-inference"),
            ("", "Secret", "ai-serving", "inference-db"),
        ],
        sync="OutOfSync",
        dest_namespace="ai-serving",
    )
    app["status"]["resources"][1]["status"] = "Synced"
    app["status"]["operationState"] = {
        "phase": "Succeeded",
        "startedAt": "2026-11-29T13:54:50Z",
        "finishedAt": "2026-11-29T13:55:00Z",
        "operation": {"sync": {"revision": REVISION}, "initiatedBy": {"automated": True}},
    }
    return app


def healed(argo: argo_api.FakeArgo) -> None:
    serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
    argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"] = {
        "phase": "Succeeded",
        "message": "successfully synced (all tasks run)",
        "startedAt": "2026-11-29T06:02:08Z",
        "finishedAt": "2026-11-29T06:02:09Z",
        "operation": {"sync": {"revision": REVISION}, "initiatedBy": {"automated": True}},
        "syncResult": {
            "revision": REVISION,
            "resources": [
                {
                    "group": "apps",
                    "version": "v1",
                    "kind": "Deployment",
                    "namespace": "ai-serving",
                    "name": "deepseek-inference",
                    "status": "Synced",
                    "message": "deployment.apps/deepseek-inference configured",
                }
            ],
        },
    }


def refused_app() -> dict[str, Any]:
    resources = (
        [("apps", "Deployment", f"ns-{i % 64}", f"svc-{i}") for i in range(412)]
        + [("", "Service", f"ns-{i % 64}", f"svc-{i}") for i in range(1140)]
        + [("", "PersistentVolumeClaim", f"ns-{i % 64}", f"data-{i}") for i in range(86)]
    )
    app = argo_api.application(
        "payments-prod", resources=resources, sync="Unknown", dest_namespace="payments"
    )
    for r in app["status"]["resources"]:
        r["requiresPruning"] = True
    app["status"]["conditions"] = [{"type": "ComparisonError", "message": WRAP + REFUSAL}]
    return app


def show(rx: receivers.Receivers) -> None:
    for c in rx.captured:
        msg = json.loads(c.body)
        print(f"--- {c.path[1:]}")
        if c.path == "/feishu":
            card = msg["card"]
            print(card["header"]["title"]["content"])
            for e in card["body"]["elements"]:
                if e["tag"] == "markdown":
                    print(e["content"])
                elif e["tag"] == "button":
                    print(f"[{e['text']['content']}] {e['behaviors'][0]['default_url']}")
        elif c.path == "/slack":
            for b in msg["blocks"]:
                if b["type"] in ("header", "section"):
                    print(b["text"]["text"])
                elif b["type"] == "actions":
                    print(" ".join(f"[{e['text']['text']}] {e['url']}" for e in b["elements"]))
        else:
            print(json.dumps({k: msg[k] for k in ("event_action", "dedup_key")}, ensure_ascii=False))
            if "payload" in msg:
                print(msg["payload"]["summary"])
                print("links:", [link["href"] for link in msg.get("links", [])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locale", choices=("en", "zh-CN"), default="en")
    parser.add_argument("--case", choices=("drill", "reverted", "reverted-bare", "refused"), default="drill")
    args = parser.parse_args()
    with argo_api.serve() as argo, receivers.serve() as rx, tempfile.TemporaryDirectory() as tmp:
        channels = rx.channels(feishu_secret="x", routing_key="0123456789abcdef0123456789abcdef")
        for ch in channels.values():
            ch["locale"] = args.locale
        config = parse_config(
            {
                "locale": args.locale,
                "timeZone": "Asia/Shanghai",
                "argocdUrl": "https://argocd.example.com",
                "channels": channels,
            }
        )
        identity = args.case == "reverted"
        settings = NotifierSettings(
            token="t" * 32,
            outbox=Path(tmp) / "outbox.sqlite3",
            worker=False,
            argocd=ArgoCDSettings(url=argo.url, token=argo.token, timeout=2.0, retries=0),
            audit_token=AUDIT if identity else "",
        )
        app = create_app(settings, config=config)
        client = app.test_client()
        headers = {"Authorization": f"Bearer {'t' * 32}"}
        if args.case == "drill":
            serve_drill(argo, secret_changed=False)
            sent = body("on-drift-detected", argo.apps[("argocd", "deepseek-inference")])
        elif args.case in ("reverted", "reverted-bare"):
            if identity:
                live = inference_live(gpu="4")
                old = inference_live(patched=False, gpu="2")
                for obj in (live, old):
                    obj["metadata"].setdefault("labels", {})["app.kubernetes.io/instance"] = (
                        "deepseek-inference"
                    )
                review = admission_review(copy.deepcopy(live), old=old)
                client.post(
                    "/v1/admission", data=json.dumps(review), headers={"Authorization": f"Bearer {AUDIT}"}
                )
                app.extensions["driftguard"].recorder.flush()
            healed(argo)
            sent = body("on-drift-detected", outofsync_app())
        else:
            refused = refused_app()
            argo.put(refused)
            argo.managed[("argocd", "payments-prod")] = {"items": []}
            sent = body("on-render-refused", refused)
        client.post("/v1/notifications", data=sent, headers=headers)
        state = app.extensions["driftguard"]
        state.worker.drain()
        show(rx)
        state.worker.stop()
        state.worker.expander.close()
        state.outbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
