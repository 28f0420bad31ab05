"""`episodic-lab bench-fairness`: how much one tenant's abuse slows another tenant on one
server with the default share settings, as ratios to a baseline measured in the same run.
It prints; it asserts nothing. Kept import-light: the CLI imports `options` on every start."""
