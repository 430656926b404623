// The platform page: status, pending approvals (with their diff), MCP connection details, settings and the audit log.
// The MCP panel (connection, token, client set-up, approvals setting) is the shared module every kind page mounts.
import { diffHtml, esc, mountMcpPanel } from "/platform-static/mcp-panel.js";
import { onboardingOffer } from "/platform-static/connect.js";
import { TOO_SOON, answerable } from "/platform-static/approval-guard.js";

const $ = (id) => document.getElementById(id);
const api = async (path, opts = {}) => {
  const res = await fetch(path, { credentials: "same-origin", headers: { "content-type": "application/json" }, ...opts });
  if (res.status === 401) $("signin").hidden = false;
  if (!res.ok) throw new Error((await res.json()).error?.message || res.statusText);
  return res.json();
};
const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body ?? {}) });
const panel = mountMcpPanel($("mcp-panel"));

async function refreshStatus() {
  const st = await api("/api/status");
  $("ws").textContent = JSON.stringify(st.workspace, null, 2);
  $("state").textContent = st.mcpEnabled ? "MCP running" : "MCP off";
  $("state").className = st.mcpEnabled ? "pill" : "pill off";
}
const shownAt = new Map(); // approval id → performance.now() when this page first showed it
async function refreshApprovals() {
  const { pending } = await api("/api/approvals");
  $("pending").innerHTML = pending.length ? "" : '<p class="muted">Nothing to approve.</p>';
  const now = performance.now();
  for (const id of [...shownAt.keys()]) if (!pending.some((p) => p.id === id)) shownAt.delete(id);
  for (const p of pending) {
    if (!shownAt.has(p.id)) shownAt.set(p.id, now);
    const div = document.createElement("div");
    div.className = "approval";
    div.innerHTML = `<p><b>${esc(p.client)}</b> wants to run <code>${esc(p.tool)}</code> on <code>${esc(p.target)}</code>: ${esc(p.summary)}</p>
      <pre class="diff">${diffHtml(p.diff || "")}</pre>
      <button class="primary" data-ok="1">Approve</button> <button data-ok="0">Reject</button>
      <p class="too-soon muted" hidden>${esc(TOO_SOON)}</p>`;
    div.querySelectorAll("button").forEach((b) => b.onclick = async () => {
      if (!answerable(shownAt.get(p.id))) { div.querySelector(".too-soon").hidden = false; return; }
      await post(`/api/approvals/${p.id}`, { approved: b.dataset.ok === "1" });
      refreshApprovals();
    });
    $("pending").appendChild(div);
  }
}
async function refreshAudit() {
  const { records } = await api("/api/audit?limit=50");
  $("auditrows").innerHTML = records.slice().reverse().map((r) =>
    `<tr><td>${esc(r.timestamp ? new Date(r.timestamp * 1000).toLocaleTimeString() : "")}</td><td>${esc(r.client || r.caller)}</td><td>${esc(r.tool)}</td><td>${esc(r.target)}</td><td>${esc(r.outcome)}</td><td>${esc(r.approval === "none" ? "" : r.approval + (r.approved_via ? ` (${r.approved_via})` : ""))}</td></tr>`).join("");
}
// First run: offer once to connect clients (and the skill); "Not now" is remembered (connect.js, shared with the
// kinds' editors).
async function onboarding() {
  const offer = await onboardingOffer({
    call: (method, path, body) => api(path, { method, body: body === undefined ? undefined : JSON.stringify(body) }),
    onDone: (how) => { if (how === "dismissed") $("onboarding").hidden = true; },
  });
  if (!offer) return;
  $("onboardingbody").replaceChildren(offer);
  $("onboarding").hidden = false;
}
onboarding();
const events = new EventSource("/api/events");
events.addEventListener("approval", refreshApprovals);
events.addEventListener("audit", refreshAudit);
events.addEventListener("status", refreshStatus);
events.addEventListener("settings", () => { panel.refreshSettings(); refreshAudit(); });
refreshStatus(); refreshApprovals(); refreshAudit();
setInterval(refreshAudit, 5000);
