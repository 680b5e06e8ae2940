"""A notification becomes a DriftReport: the Application and its managed resources from Argo CD, through the drift engine."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftguard.argocd import ArgoCDClient
from driftguard.drift import Policy
from driftguard.ignore import IgnoreRule, JqRunner
from driftguard.redact import Redactor
from driftguard.report import DriftReport, build_report
from notifier.identity import IdentityStore, attribute

__all__ = ["Expander"]


class Expander:
    """Looks an Application up in Argo CD and runs the drift engine over it."""

    def __init__(
        self,
        client: ArgoCDClient,
        *,
        system_rules: list[IgnoreRule],
        redactor: Redactor,
        policy: Policy | None = None,
        identities: IdentityStore | None = None,
    ) -> None:
        self.client = client
        self.system_rules = system_rules
        self.redactor = redactor
        self.policy = policy
        self.identities = identities
        self.jq = JqRunner()
        self._fetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftguard-argocd")

    def report(self, name: str, app_namespace: str) -> tuple[dict[str, Any], DriftReport]:
        """(Application, DriftReport); NotFound or UpstreamUnavailable from the API.

        The two reads are independent, so they are asked at the same time: a notification waits
        for one Argo CD round trip, not two. The Application's error wins (it says "not found").
        """
        managed = self._fetch.submit(self.client.managed_resources, name, app_namespace)
        try:
            app = self.client.application(name, app_namespace)
        except BaseException:
            if not managed.cancel():
                managed.exception()  # waited for, so no read outlives the notification
            raise
        items = managed.result()
        report = build_report(
            app, items, system_rules=self.system_rules, policy=self.policy, redactor=self.redactor, jq=self.jq
        )
        if self.identities is not None:
            attribute(report, items, self.identities)  # the join hook: the person behind each human change
        return app, report

    def close(self) -> None:
        self._fetch.shutdown(wait=True)
        self.jq.close()
        self.client.close()
