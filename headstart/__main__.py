"""`python -m headstart ...` is the `headstart` command."""

import sys

from headstart.cli import main

sys.exit(main())
