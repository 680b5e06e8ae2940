"""driftguard notifier."""
