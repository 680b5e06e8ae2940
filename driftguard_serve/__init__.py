"""How both services are served: gunicorn's worker with read deadlines (``driftguard_serve.worker``).

Apart from ``driftguard`` because it imports gunicorn, which the shared library never does (its
CMP hot path stays light); nothing imports it but gunicorn itself, by the dotted name
``driftguard/service.py`` passes as ``--worker-class``.
"""
