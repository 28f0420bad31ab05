"""`python -m episodic_lab`: the same as the `episodic-lab` command."""

import sys

from episodic_lab.cli import main

sys.exit(main())
