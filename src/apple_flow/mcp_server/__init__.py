"""apple-flow as an MCP server: the daemon's model and agent as tools for other agents (``apple-flow mcp``)."""
