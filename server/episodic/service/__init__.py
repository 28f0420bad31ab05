"""Use cases: one async method per RPC-sized operation, over the domain's ports."""
