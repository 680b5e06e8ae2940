"""What every ApplicationSet generator shares: parameter sets, where each came from, one Protocol.

A generator turns its spec into parameter sets (``Generated``), each carrying the ``Origin`` of the
thing it was made from (a directory, a file, a list element, a cluster). The diff compares origins
between base and head to say *why* an Application disappeared; a generator also records what it
saw and left out (``Dropped``: excluded, selector) for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from driftguard.errors import InputError

if TYPE_CHECKING:
    from cmp_plugin.prcheck.appset.gotemplate import GoTemplates

__all__ = [
    "AppSetError",
    "Cluster",
    "Context",
    "Dropped",
    "Generated",
    "Generator",
    "Nested",
    "Origin",
    "Params",
]

Params = dict[str, Any]


class AppSetError(InputError):
    """An ApplicationSet driftguard cannot expand; the message names the ApplicationSet and the feature."""


@dataclass(frozen=True)
class Origin:
    """The thing a parameter set was generated from."""

    generator: str
    """list, git, clusters (matrix and merge combine their children's origins)."""
    key: str
    """Stable identity at both revisions: a path, a cluster name, a list element's JSON."""
    what: str
    """For people: ``directory clusters/a/payment/x``, ``list element {...}``, ``cluster prod-1``."""
    path: str = ""
    """The repository path it came from (git generators), for the stray-artifact check."""


@dataclass
class Generated:
    params: Params
    origins: tuple[Origin, ...]


@dataclass(frozen=True)
class Dropped:
    """Something a generator saw at this revision and left out, with the reason."""

    origins: tuple[Origin, ...]
    reason: str


@dataclass(frozen=True)
class Cluster:
    """One entry of ``--clusters FILE``: what Argo CD's cluster Secret would say."""

    name: str
    server: str
    project: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


MAX_PARAMETER_SETS = 100_000
"""Parameter sets one generator entry may produce (a matrix: its product), checked as they are built.

Argo CD has no such limit, but a PR check must end: YAML aliases make a 100 KB ApplicationSet a
matrix of two 25,000-element lists, 625 million sets, and the CI runner would run out of memory
before ``--max-apps`` (counted after expansion) could say so.
"""


@dataclass
class Context:
    """One ApplicationSet at one revision."""

    appset: str
    tree: Path
    """The repository checked out at the revision being diffed."""
    repo_urls: frozenset[str]
    """Normalised URLs that mean this repository (``--repo-url`` and the remotes)."""
    clusters: list[Cluster] | None
    """``--clusters FILE``; None when it was not given (a clusters generator is then an error)."""
    helm: str = ""
    """The helm binary, for ``goTemplate: true``."""
    timeout: float = 45.0
    """Seconds one helm run may take."""
    go: GoTemplates | None = None
    """The Go template engine when the ApplicationSet sets ``goTemplate: true``; None: fasttemplate."""
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def go_template(self) -> bool:
        return self.go is not None

    def fail(self, message: str) -> AppSetError:
        return AppSetError(f"ApplicationSet {self.appset}: {message}")

    def check_sets(self, count: int, generator: str) -> None:
        """Refuse a generator whose parameter sets pass MAX_PARAMETER_SETS."""
        if count > MAX_PARAMETER_SETS:
            raise self.fail(
                f"the {generator} generator produces more than {MAX_PARAMETER_SETS} parameter sets; "
                "driftguard refuses to expand it"
            )


Nested = Callable[[Any], list[Generated]]
"""Expands one child generator entry (matrix and merge): transform.py passes it in."""


class Generator(Protocol):
    """One generator kind (the key under ``spec.generators[]``), registered in generators.py."""

    name: str
    takes_values: bool
    """Whether the generator has a ``values`` field merged into each parameter set (Argo CD's
    cluster, git, scmProvider, pullRequest, clusterDecisionResource and plugin generators do;
    list, matrix and merge do not: applicationset/utils ``appendTemplatedValues``' callers)."""

    def generate(self, spec: dict[str, Any], ctx: Context, *, nested: Nested) -> list[Generated]:
        """Parameter sets for ``spec`` (the value under this generator's key), before selector;
        ``nested`` expands a child generator entry (only matrix and merge have children)."""
        ...
