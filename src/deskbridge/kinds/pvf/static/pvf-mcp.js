// The platform's MCP settings panel (the same module the platform page mounts), in the PVF page's side column.
import { mountMcpPanel } from "/platform-static/mcp-panel.js";

const panel = mountMcpPanel(document.getElementById("mcp-panel"));
document.addEventListener("pvf-settings", () => panel.refreshSettings().catch(() => {}));
