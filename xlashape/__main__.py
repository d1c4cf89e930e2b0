"""``python -m xlashape``: the same as the ``xlashape`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
