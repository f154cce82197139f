"""``python -m quietwatt``: the ``quietwatt`` command."""

from ._cli import main

main()
