"""The PR check, ``driftguard-cmp diff``: every environment rendered at two revisions and compared.

``diffcmd`` (flags, exit codes), ``envdiff`` (the environments and their renders), ``envlive``
(``--live``), ``envcause`` (the key behind a removal), ``fieldchanges``, ``diffreport`` and
``mdtext`` (the report), ``appset/`` (ApplicationSets expanded as the controller would).
"""
