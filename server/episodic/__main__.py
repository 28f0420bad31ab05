"""`python -m episodic` is the `episodic` command."""

import sys

from episodic.cli import main

sys.exit(main())
