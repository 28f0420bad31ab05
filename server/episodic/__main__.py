"""`python -m episodic` is the `episodic` command."""

import sys

from episodic.cli.main import main

sys.exit(main())
