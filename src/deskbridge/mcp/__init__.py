"""The MCP surface: tools from the open workspace served over Streamable HTTP and stdio."""
