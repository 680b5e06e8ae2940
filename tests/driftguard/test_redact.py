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

planted = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_", min_size=8, max_size=24).map(
    lambda s: "PLANT" + s
)


def leaks(output: Any, secret: str) -> bool:
    text = json.dumps(output, default=str)
    encoded = base64.b64encode(secret.encode()).decode()
    return secret in text or encoded in text


@settings(max_examples=150, deadline=None)
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


@settings(max_examples=150, deadline=None)
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
