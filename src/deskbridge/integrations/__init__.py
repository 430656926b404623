"""Connecting MCP clients: config snippets for Claude Desktop, Claude Code, Cursor, VS Code and Codex."""
