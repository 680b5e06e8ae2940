"""driftguard-cmp set-image: the kustomization changes in exactly the asked fields, nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cmp_plugin.repotools.set_image import ImageSpec, parse_spec, set_image
from driftguard.errors import DriftguardError
from tests.helpers import examples, run_cmp
from tests.manifests.reference import kustomize

OVERLAY = """\
# production overlay: bumped by CI (driftguard-cmp set-image), reviewed by people
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base   # the shared base
images:
  # the API server
  - name: registry.example.com/payment/api
    newTag: "1.4.2"   # pinned after INC-2291
  - name: nginx
    newName: registry.example.com/mirror/nginx
    newTag: '1.25'
  - name: worker
    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000
"""

BASE_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - {name: api, image: registry.example.com/payment/api:1.0.0}
        - {name: proxy, image: nginx:1.0}
        - {name: worker, image: worker}
"""


def overlay(tmp_path: Path, text: str = OVERLAY) -> Path:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [deployment.yaml]\n")
    (tmp_path / "base" / "deployment.yaml").write_text(BASE_DEPLOYMENT)
    prod = tmp_path / "overlays" / "production"
    prod.mkdir(parents=True)
    (prod / "kustomization.yaml").write_text(text)
    return prod


def images(path: Path) -> list[str]:
    [deployment] = kustomize(path)
    return [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]


def test_a_tag_bump_changes_one_value_and_keeps_every_comment(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    _, changes = set_image(
        prod, parse_spec("registry.example.com/payment/api=registry.example.com/payment/api:1.5.0")
    )
    assert changes == ["registry.example.com/payment/api: newTag 1.4.2 -> 1.5.0"]
    after = (prod / "kustomization.yaml").read_text()
    assert after == OVERLAY.replace('newTag: "1.4.2"', 'newTag: "1.5.0"')
    # what kustomize itself builds from the edited file
    assert images(prod)[0] == "registry.example.com/payment/api:1.5.0"


def test_single_quotes_stay_single_and_a_float_looking_tag_stays_a_string(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    set_image(prod, parse_spec("nginx=registry.example.com/mirror/nginx:1.10"))
    assert "newTag: '1.10'" in (prod / "kustomization.yaml").read_text()
    assert images(prod)[1] == "registry.example.com/mirror/nginx:1.10"


def test_a_missing_field_is_added_under_the_entry_at_its_indentation(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    set_image(prod, parse_spec("worker:2.0.1"))
    text = (prod / "kustomization.yaml").read_text()
    assert "    digest: sha256:" + "0" * 64 + '\n    newTag: "2.0.1"\n' in text
    # what kustomize builds from a tag and a digest together
    assert images(prod)[2] == "worker:2.0.1@sha256:" + "0" * 64


def test_a_new_name_and_a_digest(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    digest = "sha256:" + "ab" * 32
    set_image(prod, parse_spec(f"nginx=registry.example.com/other/nginx@{digest}"))
    assert images(prod)[1] == f"registry.example.com/other/nginx:1.25@{digest}"


def test_an_image_the_kustomization_does_not_list_is_refused_and_nothing_written(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    with pytest.raises(DriftguardError, match=r"no images: entry named 'ngnix' \(listed: nginx, "):
        set_image(prod, parse_spec("ngnix:1.26"))
    assert (prod / "kustomization.yaml").read_text() == OVERLAY


@pytest.mark.parametrize(
    "spec",
    ["nginx", "nginx=", "nginx:bad tag", "nginx:-x", "NGINX:1", "nginx@md5", "a=b:c:d", "nginx@sha256:xyz"],
)
def test_malformed_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(DriftguardError):
        parse_spec(spec)


def test_a_registry_port_is_not_a_tag() -> None:
    assert parse_spec("api=registry.example.com:5000/api") == ImageSpec(
        "api", new_name="registry.example.com:5000/api"
    )
    assert parse_spec("registry.example.com:5000/api:2") == ImageSpec(
        "registry.example.com:5000/api", new_tag="2"
    )


def test_the_command_line(tmp_path: Path) -> None:
    prod = overlay(tmp_path)
    args = ["set-image", "nginx:1.27", "--path", str(prod)]
    out = run_cmp(None, None, *args)
    assert out.returncode == 0, out.stderr
    assert "nginx: newTag 1.25 -> 1.27" in out.stdout
    again = run_cmp(None, None, *args)
    assert "already set; nothing changed" in again.stdout
    bad = run_cmp(None, None, "set-image", "nope:1", *args[2:])
    assert bad.returncode == 2
    assert bad.stderr.startswith("driftguard: error: ") and "no images: entry named 'nope'" in bad.stderr


LAYOUTS = st.sampled_from(["  - ", "- "])  # sequence indented under images:, or not
QUOTES = st.sampled_from(["", "'", '"'])
TAGS = st.from_regex(r"[\w][\w.-]{0,20}", fullmatch=True)


@settings(max_examples=examples(60), deadline=None)
@given(dash=LAYOUTS, quote=QUOTES, old=TAGS, new=TAGS, comment=st.booleans())
def test_any_layout_reads_back_as_exactly_the_asked_change(
    tmp_path_factory: pytest.TempPathFactory, dash: str, quote: str, old: str, new: str, comment: bool
) -> None:
    pad = " " * len(dash)
    tail = "  # keep me" if comment else ""
    q_old = f"{quote}{old}{quote}" if quote else f'"{old}"'
    text = f"images:\n{dash}name: app{tail}\n{pad}newTag: {q_old}{tail}\n{dash}name: other\n{pad}newTag: x\n"
    path = tmp_path_factory.mktemp("k")
    (path / "kustomization.yaml").write_text(text)
    set_image(path, parse_spec(f"app:{new}"))
    after = (path / "kustomization.yaml").read_text()
    assert yaml.safe_load(after) == {
        "images": [{"name": "app", "newTag": new}, {"name": "other", "newTag": "x"}]
    }
    assert after.count("# keep me") == (2 if comment else 0)
    untouched = [n for n in range(5) if n != 2]
    assert [after.splitlines()[n] for n in untouched] == [text.splitlines()[n] for n in untouched]
