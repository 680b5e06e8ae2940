"""driftguard's Argo CD Config Management Plugin: render, guard, refuse."""
