"""``python -m cmp_plugin``: the same as the ``driftguard-cmp`` console script."""

from cmp_plugin.launch import main

main()
