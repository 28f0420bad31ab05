"""Ports the domain needs from the outside world, one module per capability. Adapters live in
store/, index/, embed/, summarize/ and tokens/; fakes for tests live in tests/fakes.py; tests/contracts/
holds each port to one behaviour on the fake and the real adapters.

Sweeps take no tenant and serve the whole cluster (one leader runs them, see
`changes.Leadership`): `idle_episodes`, `claim_due`, the `stale` and `count_stale` methods,
`soft_delete_due`, `purge_due` and `MemoryStore.expired`. Each judges a tenant's rows by that
tenant's own agents and caps, and never takes a row of one tenant for another's of the same ids."""
