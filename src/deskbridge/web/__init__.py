"""The HTTP side: one Starlette app with the MCP endpoint, the browser UI, its JSON API and server-sent events."""
