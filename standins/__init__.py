"""Stand-ins for what cannot run here (Argo CD, Prometheus, Feishu, Slack, PagerDuty) and the reference drill.

Shared by the tests and `make demo`. They speak the real APIs' shapes (tests/reference); they are
never patches of our own code.
"""
