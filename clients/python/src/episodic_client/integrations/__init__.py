"""Adapters to agent frameworks' storage contracts, each an optional extra (its framework is
imported only by its module): `episodic_client.integrations.langchain` (`[langchain]`),
`.langgraph` (`[langgraph]`), `.adk` (`[adk]`) and `.openai_agents` (`[openai-agents]`)."""
