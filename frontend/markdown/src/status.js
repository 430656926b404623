// What the MCP server is doing, read from the platform's /api/status and settings, in the four words the UI shows.

/** running / stopped / portBusy / tokenMissing (the platform may spell its state in either style). */
export function mcpState(status, settings) {
  const raw = String(status?.mcp?.state ?? status?.mcpState ?? '').toLowerCase().replace(/[\s-]/g, '_');
  if (raw.includes('port')) return 'portBusy';
  if (raw.includes('token')) return 'tokenMissing';
  if (raw === 'running') return 'running';
  const enabled = status?.mcpEnabled ?? settings?.mcp_enabled;
  if (enabled === false || raw === 'stopped' || raw === 'disabled') return 'stopped';
  return 'running';
}
