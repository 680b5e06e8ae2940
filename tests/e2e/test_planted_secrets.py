"""Secrets stay masked in every output: distinctive values planted in every place a secret hides,
then every output (the three channels, the notifier's log and metrics, the gate's answer and log,
the CLI) grepped for the raw, base64 and URL-encoded forms."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import requests

from standins.argo_api import FakeArgo, application, serve
from standins.drill import inference_desired, inference_live, managed_item
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import serve as serve_receivers
from tests.helpers import outbox_idle, wait_until

pytestmark = pytest.mark.slow  # both services under gunicorn, every output read

PLANTED = {
    "url-password": "PlantedUrlPass1q",
    "url-query-token": "PlantedQueryTok2w",
    "url-query-sig": "PlantedQuerySig3e",
    "webhook-path": "PlantedHookTok4r",
    "json-password": "PlantedJsonPass5t",
    "yaml-password": "PlantedYamlPass6y",
    "properties-password": "PlantedPropPass7u",
    "secret-data": "PlantedSecret8i",
    "missing-json": "PlantedMissingTok9o",
    "prune-userinfo": "PlantedPruneUser0p",
}
TOKEN = "notifier-test-token-0123456789"
GATE_TOKEN = "analysis-token-0123456789"


def forms(value: str) -> set[str]:
    raw = value.encode()
    return {
        value,
        quote(value),
        quote_plus(value),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }


def _configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ai-serving"},
        "data": data,
    }


def _kubectl(obj: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    live["metadata"]["managedFields"] = [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "time": "2026-11-29T13:55:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        },
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "time": "2026-11-29T14:02:07Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        },
    ]
    return live


def planted_app(fake: FakeArgo) -> None:
    p = PLANTED
    app = application(
        "planted",
        resources=[("apps", "Deployment", "ai-serving", "deepseek-inference")],
        sync="OutOfSync",
        dest_namespace="ai-serving",
    )
    fake.put(app)
    desired = inference_desired()
    live = inference_live(patched=False, gpu="2")
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["env"].append(
        {
            "name": "DATABASE_URL",
            "value": f"postgres://admin:{p['url-password']}@db.example.com/x?token={p['url-query-token']}&sig={p['url-query-sig']}",
        }
    )
    live["metadata"]["annotations"]["notify.example.com/webhook"] = (
        f"https://hooks.slack.example.com/services/T0AAAA/B0BBBB/{p['webhook-path']}"
    )
    live["metadata"]["managedFields"].append(
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": "2026-11-29T14:02:07Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {"f:notify.example.com/webhook": {}}},
                "f:spec": {
                    "f:template": {
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"server"}': {
                                    "f:env": {
                                        'k:{"name":"DATABASE_URL"}': {".": {}, "f:name": {}, "f:value": {}}
                                    }
                                }
                            }
                        }
                    }
                },
            },
        }
    )
    cm_desired = _configmap(
        "inference-config", {"config.json": "{}", "app.yaml": "db: {}\n", "app.properties": "a=1"}
    )
    cm_live = _kubectl(
        _configmap(
            "inference-config",
            {
                "config.json": json.dumps({"db": {"host": "db", "password": p["json-password"]}}),
                "app.yaml": f"db:\n  host: db\n  password: {p['yaml-password']}\n",
                "app.properties": f"a=1\nspring.datasource.password={p['properties-password']}\n",
            },
        ),
        {"f:data": {"f:config.json": {}, "f:app.yaml": {}, "f:app.properties": {}}},
    )
    secret_desired = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "ai-serving"},
        "type": "Opaque",
        "data": {"password": base64.b64encode(b"old-one").decode()},
    }
    secret_live = _kubectl(secret_desired, {"f:data": {"f:password": {}}})
    secret_live["data"] = {"password": base64.b64encode(p["secret-data"].encode()).decode()}
    missing = _configmap("settings", {"settings.json": json.dumps({"apiKey": p["missing-json"]})})
    orphan = _configmap(
        "old-endpoints", {"endpoint": f"https://{p['prune-userinfo']}@git.example.com/org/repo.git"}
    )
    orphan["metadata"]["managedFields"] = [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "time": "2026-11-29T14:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {}},
        }
    ]
    fake.managed[("argocd", "planted")] = {
        "items": [
            managed_item(desired, live),
            managed_item(cm_desired, cm_live),
            managed_item(secret_desired, secret_live),
            managed_item(missing, None),
            managed_item(None, orphan),
        ]
    }


def test_planted_secrets_leave_through_no_output(tmp_path: Path) -> None:
    outputs: dict[str, str] = {}
    with serve() as argo, serve_receivers() as rx:
        planted_app(argo)
        config = tmp_path / "notifier.yaml"
        config.write_text(
            json.dumps(
                {
                    "argocdUrl": "https://argocd.example.com",
                    "channels": rx.channels(
                        feishu_secret="feishu-secret", routing_key="0123456789abcdef0123456789abcdef"
                    ),
                }
            )
        )
        base = {
            "PATH": os.environ["PATH"],
            "DRIFTGUARD_ARGOCD_URL": argo.url,
            "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
            "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
        }
        notifier_env = {
            **base,
            "DRIFTGUARD_NOTIFIER_TOKEN": TOKEN,
            "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
            "DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp_path / "outbox.sqlite3"),
        }
        gate_env = {**base, "DRIFTGUARD_ANALYSIS_TOKEN": GATE_TOKEN}
        nport, gport = free_port(), free_port()
        notifier = start_gunicorn("notifier.app:create_app()", nport, notifier_env, tmp_path / "notifier.log")
        gate = start_gunicorn("analysis_provider.app:create_app()", gport, gate_env, tmp_path / "gate.log")
        try:
            body = {
                "trigger": "on-drift-detected",
                "app": {"metadata": {"name": "planted", "namespace": "argocd"}},
            }
            resp = requests.post(
                f"http://127.0.0.1:{nport}/v1/notifications",
                data=json.dumps(body),
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=10,
            )
            assert resp.status_code == 202
            wait_until(lambda: len({c.path for c in rx.captured}) >= 3, "a message on each channel")
            wait_until(lambda: outbox_idle(f"http://127.0.0.1:{nport}", TOKEN), "the notifier's outbox idle")
            outputs["metrics"] = requests.get(
                f"http://127.0.0.1:{nport}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
            ).text
            verdict = requests.get(
                f"http://127.0.0.1:{gport}/v1/gates/drift?app=planted",
                headers={"Authorization": f"Bearer {GATE_TOKEN}"},
                timeout=10,
            )
            outputs["gate"] = verdict.text
        finally:
            stop(notifier)
            stop(gate)
        for c in rx.captured:
            outputs[f"channel {c.path}"] = outputs.get(f"channel {c.path}", "") + c.body.decode()
        answer = tmp_path / "managed.json"
        answer.write_text(json.dumps(argo.managed[("argocd", "planted")]))
    assert {"channel /feishu", "channel /slack", "channel /pagerduty"} <= set(outputs)
    assert json.loads(outputs["gate"])["ok"] is False
    outputs["notifier log"] = (tmp_path / "notifier.log").read_text()
    outputs["gate log"] = (tmp_path / "gate.log").read_text()
    for fmt in ("text", "json"):
        cli = subprocess.run(
            [sys.executable, "-m", "driftguard", "diff", "--managed-resources", str(answer), "--format", fmt],
            capture_output=True,
            text=True,
            check=False,
        )
        assert cli.returncode == 1, cli.stderr
        outputs[f"cli {fmt}"] = cli.stdout + cli.stderr
    # the alerts still say what changed (so the masking did not simply drop everything)
    slack = outputs["channel /slack"]
    for shown in ("DATABASE_URL", "inference-config", "old-endpoints", "settings", "db.example.com"):
        assert shown in outputs["channel /pagerduty"] or shown in slack, shown
    leaks = [
        (where, name)
        for where, text in outputs.items()
        for name, value in PLANTED.items()
        if any(form in text for form in forms(value))
    ]
    assert leaks == []
    # issue 31: one key (DRIFTGUARD_REDACT_KEY) for both services, so the gate's answer masks the
    # same Secret change exactly as the alerts do (before, each service derived its own from a token)
    import re

    gate_masks = set(re.findall(r"sha256:([0-9a-f]{8})", outputs["gate"]))
    alert_masks = set(re.findall(r"sha256:([0-9a-f]{8})", slack + outputs["channel /pagerduty"]))
    assert gate_masks and gate_masks <= alert_masks, (gate_masks, alert_masks)
