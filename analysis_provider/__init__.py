"""driftguard analysis_provider."""
