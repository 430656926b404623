// The platform page: status, pending approvals (with their diff), MCP connection details, settings and the audit log.
import { onboardingOffer } from './connect.js';

const $ = (id) => document.getElementById(id);
const api = async (path, opts = {}) => {
  const res = await fetch(path, { credentials: "same-origin", headers: { "content-type": "application/json" }, ...opts });
  if (res.status === 401) $("signin").hidden = false;
  if (!res.ok) throw new Error((await res.json()).error?.message || res.statusText);
  return res.json();
};
const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body ?? {}) });
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
async function refreshSettings() {
  const settings = await api("/api/settings");
  $(settings.approvals_via_client === false ? "via-browser" : "via-client").checked = true;
}

// The MCP token is never fetched silently: the page asks the server for a one-time request, the person confirms
// here, and only then is that request redeemed for the token (see docs/security.md).
let token = null;
async function revealToken() {
  if (token) return token;
  const ask = await post("/api/token/reveal");
  if (!confirm(ask.question)) return null;
  token = (await post(`/api/token/reveal/${encodeURIComponent(ask.requestId)}`, { confirmed: true })).token;
  return token;
}
$("endpoint").textContent = `${location.origin}/mcp`;
$("show").onclick = async () => {
  const t = await revealToken();
  if (t) $("token").textContent = t;
};
$("copycfg").onclick = async () => {
  const t = await revealToken();
  if (!t) return;
  const cfg = { mcpServers: { deskbridge: { type: "http", url: `${location.origin}/mcp`, headers: { Authorization: `Bearer ${t}` } } } };
  await navigator.clipboard.writeText(JSON.stringify(cfg, null, 2));
};
$("rotate").onclick = async () => {
  if (!confirm("Regenerate the token? Connected AI clients must be given the new one.")) return;
  await post("/api/token/rotate");
  token = null;
  $("token").textContent = "••••••••";
};
for (const radio of document.querySelectorAll('input[name="approvals-via"]')) {
  radio.onchange = async () => {
    await post("/api/settings", { approvals_via_client: $("via-client").checked });
    $("settings-saved").hidden = false;
  };
}
// "Set up a client": preview the exact change first; only the person's click on "Write this change" writes it.
const setupBody = () => ({ host: $("setuphost").value, scope: $("setupscope").value, http: $("setuphttp").checked });
async function loadHosts() {
  const { hosts } = await api("/api/integrations/hosts");
  $("setuphost").innerHTML = hosts.map((h) => `<option value="${esc(h.name)}">${esc(h.title)}</option>`).join("");
}
$("setupbtn").onclick = () => { $("setup").hidden = !$("setup").hidden; };
$("setuppreview").onclick = async () => {
  try {
    const plan = await api("/api/integrations/setup/plan", { method: "POST", body: JSON.stringify(setupBody()) });
    $("setupdiff").hidden = false;
    $("setupdiff").innerHTML = plan.diff ? diffHtml(plan.diff) : esc(`${plan.file}: already set up, nothing to change.`);
    $("setupactions").hidden = !plan.diff;
    $("setupmsg").textContent = [plan.file, ...plan.notes].join(" — ");
  } catch (e) { $("setupmsg").textContent = e.message; }
};
$("setupcancel").onclick = () => { $("setupdiff").hidden = true; $("setupactions").hidden = true; };
$("setupapply").onclick = async () => {
  try {
    const done = await api("/api/integrations/setup/apply", { method: "POST", body: JSON.stringify(setupBody()) });
    $("setupmsg").textContent = `Written to ${done.file}. ${done.restart}`;
    $("setupactions").hidden = true;
  } catch (e) { $("setupmsg").textContent = e.message; }
};
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
loadHosts().then(onboarding);
const events = new EventSource("/api/events");
events.addEventListener("approval", refreshApprovals);
events.addEventListener("audit", refreshAudit);
events.addEventListener("status", refreshStatus);
events.addEventListener("settings", () => { refreshSettings(); refreshAudit(); });
refreshStatus(); refreshApprovals(); refreshAudit(); refreshSettings();
setInterval(refreshAudit, 5000);
