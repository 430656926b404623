// The platform page: status, pending approvals (with their diff), MCP connection details and the audit log.
const $ = (id) => document.getElementById(id);
const api = async (path, opts = {}) => {
  const res = await fetch(path, { credentials: "same-origin", headers: { "content-type": "application/json" }, ...opts });
  if (!res.ok) throw new Error((await res.json()).error?.message || res.statusText);
  return res.json();
};
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
const diffHtml = (diff) => esc(diff).split("\n").map((l) => l.startsWith("+") ? `<span class="add">${l}</span>` : l.startsWith("-") ? `<span class="del">${l}</span>` : l).join("\n");

async function refreshStatus() {
  const st = await api("/api/status");
  $("ws").textContent = JSON.stringify(st.workspace, null, 2);
  $("state").textContent = st.mcpEnabled ? "MCP running" : "MCP off";
  $("state").className = st.mcpEnabled ? "pill" : "pill off";
}
async function refreshApprovals() {
  const { pending } = await api("/api/approvals");
  $("pending").innerHTML = pending.length ? "" : '<p class="muted">Nothing to approve.</p>';
  for (const p of pending) {
    const div = document.createElement("div");
    div.innerHTML = `<p><b>${esc(p.client)}</b> wants to run <code>${esc(p.tool)}</code> on <code>${esc(p.target)}</code>: ${esc(p.summary)}</p>
      <pre class="diff">${diffHtml(p.diff || "")}</pre>
      <button class="primary" data-ok="1">Approve</button> <button data-ok="0">Reject</button>`;
    div.querySelectorAll("button").forEach((b) => b.onclick = async () => {
      await api(`/api/approvals/${p.id}`, { method: "POST", body: JSON.stringify({ approved: b.dataset.ok === "1" }) });
      refreshApprovals();
    });
    $("pending").appendChild(div);
  }
}
async function refreshAudit() {
  const { records } = await api("/api/audit?limit=50");
  $("auditrows").innerHTML = records.slice().reverse().map((r) =>
    `<tr><td>${esc(r.timestamp ? new Date(r.timestamp * 1000).toLocaleTimeString() : "")}</td><td>${esc(r.client || r.caller)}</td><td>${esc(r.tool)}</td><td>${esc(r.target)}</td><td>${esc(r.outcome)}</td></tr>`).join("");
}
$("endpoint").textContent = `${location.origin}/mcp`;
$("show").onclick = async () => { $("token").textContent = (await api("/api/token")).token; };
$("copycfg").onclick = async () => {
  const { token } = await api("/api/token");
  const cfg = { mcpServers: { deskbridge: { type: "http", url: `${location.origin}/mcp`, headers: { Authorization: `Bearer ${token}` } } } };
  await navigator.clipboard.writeText(JSON.stringify(cfg, null, 2));
};
const events = new EventSource("/api/events");
events.addEventListener("approval", refreshApprovals);
events.addEventListener("audit", refreshAudit);
events.addEventListener("status", refreshStatus);
refreshStatus(); refreshApprovals(); refreshAudit();
setInterval(refreshAudit, 5000);
