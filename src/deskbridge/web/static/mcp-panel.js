// The platform's MCP settings panel as one module, mounted by the platform page and by kind pages (the PVF UI):
// the endpoint, the token (shown only after the person confirms in the page), "Copy client config", regenerate,
// "Set up a client" (preview the exact change first, write it only on a click), and where approvals are asked.
// Served at /platform-static/mcp-panel.js whatever the kind (web/app.py), so every page imports the same file.

export const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
export const diffHtml = (diff) => esc(diff).split("\n").map((l) => l.startsWith("+") ? `<span class="add">${l}</span>` : l.startsWith("-") ? `<span class="del">${l}</span>` : l).join("\n");

async function call(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", headers: { "content-type": "application/json" }, ...opts });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    const err = new Error(body.error?.message || res.statusText);
    err.status = res.status;
    throw err;
  }
  return res.json();
}
const post = (path, body) => call(path, { method: "POST", body: JSON.stringify(body ?? {}) });

const HTML = `
<section id="connect"><h2>Connect an AI client</h2>
  <p>MCP endpoint: <code id="endpoint"></code></p>
  <p>Token: <code id="token" class="secret">••••••••</code> <button id="show">Show</button> <button id="copycfg">Copy client config</button> <button id="rotate">Regenerate</button></p>
  <p class="muted">The token is shown only after you confirm here; every time it is shown is recorded under “Recent operations”.</p>
  <p><button id="setupbtn" class="primary">Set up a client…</button> <span id="setupmsg" class="muted"></span></p>
  <div id="setup" hidden>
    <p>Client: <select id="setuphost"></select> Scope: <select id="setupscope"><option value="user">your user config</option><option value="project">this workspace's folder</option></select>
      <label><input type="checkbox" id="setuphttp"> over HTTP (this server; token from $DESKBRIDGE_TOKEN)</label>
      <button id="setuppreview">Preview</button></p>
    <pre id="setupdiff" class="diff" hidden></pre>
    <p id="setupactions" hidden><button id="setupapply" class="primary">Write this change</button> <button id="setupcancel">Cancel</button></p>
  </div>
</section>
<section id="settings"><h2>Approvals</h2>
  <p class="muted">Changes an AI asks for are shown to you with their diff before they happen. When this page (or the editor) is open, you answer here.
    When no deskbridge page is open, the AI client can ask you instead, in its own window (MCP “elicitation”). A client run by a script could answer that question itself.</p>
  <label><input type="radio" name="approvals-via" id="via-client" value="client"> Ask in the browser, or through the AI client when no deskbridge page is open</label><br>
  <label><input type="radio" name="approvals-via" id="via-browser" value="browser"> Require the browser: with no deskbridge page open, changes that need approval are declined</label>
  <p><small id="settings-saved" class="muted" hidden>Saved.</small></p>
</section>`;

/** Render the panel into `root`; returns `{ refreshSettings, hosts }` (hosts: a promise of the client list). */
export function mountMcpPanel(root) {
  root.innerHTML = HTML;
  const $ = (id) => root.querySelector(`#${id}`);

  // The MCP token is never fetched silently: the page asks the server for a one-time request, the person
  // confirms here, and only then is that request redeemed for the token (see docs/security.md).
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

  async function refreshSettings() {
    const settings = await call("/api/settings");
    $(settings.approvals_via_client === false ? "via-browser" : "via-client").checked = true;
  }
  for (const radio of root.querySelectorAll('input[name="approvals-via"]')) {
    radio.onchange = async () => {
      await post("/api/settings", { approvals_via_client: $("via-client").checked });
      $("settings-saved").hidden = false;
    };
  }

  // "Set up a client": preview the exact change first; only the person's click on "Write this change" writes it.
  const setupBody = () => ({ host: $("setuphost").value, scope: $("setupscope").value, http: $("setuphttp").checked });
  const hosts = call("/api/integrations/hosts").then(({ hosts }) => {
    $("setuphost").innerHTML = hosts.map((h) => `<option value="${esc(h.name)}">${esc(h.title)}</option>`).join("");
    return hosts;
  });
  $("setupbtn").onclick = () => { $("setup").hidden = !$("setup").hidden; };
  $("setuppreview").onclick = async () => {
    try {
      const plan = await post("/api/integrations/setup/plan", setupBody());
      $("setupdiff").hidden = false;
      $("setupdiff").innerHTML = plan.diff ? diffHtml(plan.diff) : esc(`${plan.file}: already set up, nothing to change.`);
      $("setupactions").hidden = !plan.diff;
      $("setupmsg").textContent = [plan.file, ...plan.notes].join(" — ");
    } catch (e) { $("setupmsg").textContent = e.message; }
  };
  $("setupcancel").onclick = () => { $("setupdiff").hidden = true; $("setupactions").hidden = true; };
  $("setupapply").onclick = async () => {
    try {
      const done = await post("/api/integrations/setup/apply", setupBody());
      $("setupmsg").textContent = `Written to ${done.file}. ${done.restart}`;
      $("setupactions").hidden = true;
    } catch (e) { $("setupmsg").textContent = e.message; }
  };
  refreshSettings().catch(() => {});
  root.dataset.ready = "1";
  return { refreshSettings, hosts };
}
