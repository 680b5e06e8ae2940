"""Repository tools: commands that edit or check a GitOps repository, not renders for Argo CD.

``set_image`` (``driftguard-cmp set-image``), ``hooks`` (the pre-commit hooks), ``codify*``
(``driftguard-cmp codify``: a live change turned into the Git edit that reproduces it).
"""
