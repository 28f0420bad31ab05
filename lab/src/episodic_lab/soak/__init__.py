"""`episodic-lab soak`: concurrent BuildContext streams and appends against one server for a
minute or more; then errors by status code, RSS over time, and whether every acknowledged
append is stored. Kept import-light: the CLI imports `options` to build its parser."""
