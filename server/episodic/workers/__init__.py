"""Background loops that run beside the RPCs: the digester, the idle reaper, retention and
LLM compaction. Use cases live in service/; loops call them or the stores, never the reverse."""
