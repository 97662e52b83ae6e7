"""``python -m tui_lab.cli``: the same command as the installed ``tfx-lab`` (serve's tabs run it)."""

import sys

from tui_lab.cli import main

sys.exit(main())
