"""The speed path: the preload server and its native front (protocol documented in a later commit)."""
