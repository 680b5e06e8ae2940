"""driftguard shared library: manifests, diff, ignore rules, drift classification, redaction.

No Flask, no CLI framework, no globals: the three apps build on it, it builds on none of them.
"""

__version__ = "0.1.0"
