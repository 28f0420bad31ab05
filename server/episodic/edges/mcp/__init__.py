"""`episodic mcp`: the Model Context Protocol adapter. It translates MCP tool calls to the
same service-layer use cases the gRPC servicers call, over stdio or streamable HTTP, with
the same configuration, composition root and API keys as `episodic serve`."""
