"""In-RAM state derived from SQL: working sets, remembered recall answers, cached token
counts and episode facts, and the one owner that keeps them (and the vector index) in step
with what was committed (`visibility.Visibility`)."""
