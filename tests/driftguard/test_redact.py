"""redact.py: planted secret values never appear in any output, raw or base64-encoded."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.drift import DriftEngine
from driftguard.manifests import resource_key
from driftguard.redact import Redactor
from tests.helpers import examples

planted = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_", min_size=8, max_size=24).map(
    lambda s: "PLANT" + s
)


def leaks(output: Any, secret: str) -> bool:
    text = json.dumps(output, default=str)
    encoded = base64.b64encode(secret.encode()).decode()
    return secret in text or encoded in text


@settings(max_examples=examples(150), deadline=None)
@given(old=planted, new=planted, as_string_data=st.booleans())
def test_secret_values_never_leave(old: str, new: str, as_string_data: bool) -> None:
    desired: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "x"},
    }
    if as_string_data:
        desired["stringData"] = {"password": old, "user": "app"}
    else:
        desired["data"] = {"password": base64.b64encode(old.encode()).decode()}
    live = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db",
            "namespace": "x",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(desired)},
        },
        "data": {
            "password": base64.b64encode(new.encode()).decode(),
            "extra": base64.b64encode(new.encode()).decode(),
        },
    }
    engine = DriftEngine()
    for d, lv in ((desired, live), (desired, None), (None, live)):
        drift = engine.resource(resource_key(desired), d, lv)
        out = [c.to_json() for c in drift.changes]
        assert not leaks(out, old) and not leaks(out, new)
        if d is not None and lv is not None and old != new:
            assert any(c["path"] == "/data/password" and c["old"] != c["new"] for c in out)


@settings(max_examples=examples(150), deadline=None)
@given(
    value=planted,
    key=st.sampled_from(
        ["password", "DB_PASSWORD", "apiKey", "api-token", "clientSecret", "credentials", "privateKey"]
    ),
)
def test_sensitive_keys_in_any_kind_are_masked(value: str, key: str) -> None:
    desired = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "a", "namespace": "x"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "env": [{"name": "MODE", "value": "x"}]}]}}
        },
        "config": {"nested": {"k": "v"}},
    }
    live = json.loads(json.dumps(desired))
    live["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": key.upper(), "value": value})
    live["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = value if key == "password" else "y"
    live["config"]["nested"][key] = value
    live["config"]["whole"] = {"inner": {key: value}}
    out = [c.to_json() for c in DriftEngine().resource(resource_key(desired), desired, live).changes]
    assert not leaks([o for o in out if o["path"] != "/spec/template/spec/containers/0/env/0/value"], value)
    assert out  # the changes are still reported


def test_mask_is_stable_per_salt_and_shows_change() -> None:
    r = Redactor(salt=b"fixed")
    assert r.mask("a") == r.mask("a") != r.mask("b")
    assert r.mask("a").startswith("***(sha256:")
    assert Redactor(salt=b"other").mask("a") != r.mask("a")
    assert r.mask(None) is None
    assert r.mask("++++++++") == "++++++++"  # Argo CD's own mask carries nothing


def test_references_to_secrets_are_not_masked() -> None:
    r = Redactor()
    assert not r.is_sensitive_key("secretName")
    assert not r.is_sensitive_key("secretKeyRef")
    assert r.is_sensitive_key("password")
    masked = r.value({"volumes": [{"name": "tls", "secret": {"secretName": "tls-cert"}}], "token": "abc"})
    assert masked["volumes"][0]["secret"]["secretName"] == "tls-cert"
    assert masked["token"].startswith("***")


CARRIERS = {
    "url-password": lambda s: f"postgres://admin:{s}@db.example.com:5432/app?sslmode=require",
    "url-user-token": lambda s: f"https://{s}@git.example.com/org/repo.git",
    "url-query": lambda s: f"https://api.example.com/v1/x?region=eu&access_token={s}&page=2",
    "url-signature": lambda s: f"https://bucket.example.com/o?X-Amz-Signature={s}",
    "slack-hook": lambda s: f"https://hooks.slack.example.com/services/T000/B000/{s}",
    "feishu-hook": lambda s: f"https://open.feishu.example.com/open-apis/bot/v2/hook/{s}",
    "json": lambda s: json.dumps({"db": {"host": "db", "password": s}}),
    "json-list": lambda s: json.dumps([{"name": "x", "apiKey": s}]),
    "yaml": lambda s: f"db:\n  host: db\n  password: {s}\n",
    "yaml-nested": lambda s: f"credentials:\n  user: bob\n  pass: {s}\n",
    "properties": lambda s: f"a=1\nspring.datasource.password={s}\n",
    "env-file": lambda s: f"export API_TOKEN={s}\nDEBUG=1\n",
}


@settings(max_examples=examples(200), deadline=None)
@given(
    secret=planted,
    carrier=st.sampled_from(sorted(CARRIERS)),
    where=st.sampled_from(["configmap", "annotation", "env"]),
)
def test_secrets_carried_inside_string_values_are_masked(secret: str, carrier: str, where: str) -> None:
    text = CARRIERS[carrier](secret)
    if where == "configmap":
        obj: dict[str, Any] = {"kind": "ConfigMap", "data": {"settings": text}}
    elif where == "annotation":
        obj = {"kind": "Deployment", "metadata": {"annotations": {"example.com/config": text}}}
    else:
        obj = {"kind": "Deployment", "env": [{"name": "SETTINGS", "value": text}]}
    out = Redactor(salt=b"s").value(obj)
    assert not leaks(out, secret), out
    assert "***" in json.dumps(out)


@settings(max_examples=examples(100), deadline=None)
@given(
    secret=planted,
    carrier=st.sampled_from(
        [k for k in CARRIERS if k.startswith(("url", "slack", "feishu", "properties", "env"))]
    ),
)
def test_free_text_is_scrubbed(secret: str, carrier: str) -> None:
    from driftguard.redact import scrub_text

    text = f"send failed: {CARRIERS[carrier](secret)} answered 500"
    assert secret not in scrub_text(text)


def test_plain_values_are_left_alone() -> None:
    r = Redactor(salt=b"s")
    for value in (
        "registry.example.com/ai/deepseek-inference:1.8.2",
        "https://argocd.example.com/applications/argocd/shop",
        "key: value",
        "log-level=debug",
        '{"replicas": 3, "image": "nginx:1.27"}',
    ):
        assert r.value({"data": {"x": value}}) == {"data": {"x": value}}, value
