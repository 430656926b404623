// The first-run offer to connect AI clients, one copy for every page: the platform page (platform.js) and each
// kind's editor (the Markdown editor loads it from /platform-static/connect.js). The server decides whether to
// offer (GET /api/integrations/onboarding: a workspace is open, no client was set up, "Not now" was never
// chosen); a click writes each chosen host's user config (POST /api/integrations/setup/apply, audited as the
// person's) and, if ticked, the skill; "Not now" is remembered on this machine.

async function json(method, path, body) {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error?.message || res.statusText);
  return data;
}

/** English texts; a page passes its own translations under the same keys. */
export const OFFER_TEXT = {
  intro: "deskbridge can add itself to your AI clients' MCP settings and install a short skill that tells agents when and how to use these tools.",
  skill: 'also install the deskbridge skill (~/.agents/skills)',
  go: 'Enable AI access',
  notNow: 'Not now',
  pickOne: 'Pick at least one client.',
  added: 'added to',
  already: 'already in',
};

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value;
    else if (key in node) node[key] = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

/**
 * The offer as an element, or null when the server says not to offer.
 * `call(method, path, body)` is the page's own JSON request function; `onDone('dismissed' | 'written')`.
 */
export async function onboardingOffer({ call = json, text = {}, onDone = () => {} } = {}) {
  const say = { ...OFFER_TEXT, ...text };
  const state = await call('GET', '/api/integrations/onboarding');
  if (!state.show) return null;
  const { hosts } = await call('GET', '/api/integrations/hosts');
  const boxes = hosts.map((host) => el('input', { type: 'checkbox', class: 'onbhost', value: host.name }));
  const skill = el('input', { type: 'checkbox', id: 'onbskill', checked: true });
  const message = el('span', { id: 'onbmsg', class: 'muted' });
  const go = el('button', { id: 'onbgo', type: 'button', class: 'primary' }, say.go);
  const notNow = el('button', { id: 'onbnot', type: 'button' }, say.notNow);
  go.onclick = async () => {
    const chosen = boxes.filter((box) => box.checked).map((box) => box.value);
    if (!chosen.length) { message.textContent = say.pickOne; return; }
    const lines = [];
    for (const host of chosen) {
      try {
        const done = await call('POST', '/api/integrations/setup/apply', { host, scope: 'user' });
        lines.push(`${host}: ${done.written ? say.added : say.already} ${done.file}`);
      } catch (err) { lines.push(`${host}: ${err.message}`); }
    }
    if (skill.checked) {
      try { lines.push(`skill: ${(await call('POST', '/api/integrations/skill/install', { target: 'agents' })).path}`); }
      catch (err) { lines.push(`skill: ${err.message}`); }
    }
    message.textContent = lines.join(' · ');
    onDone('written');
  };
  notNow.onclick = async () => {
    await call('POST', '/api/integrations/onboarding', { dismissed: true });
    onDone('dismissed');
  };
  return el('div', { class: 'onboarding-offer' },
    el('p', {}, say.intro),
    el('p', { id: 'onbhosts' }, ...hosts.flatMap((host, i) => [el('label', {}, boxes[i], ` ${host.title}`), ' '])),
    el('p', {}, el('label', {}, skill, ` ${say.skill}`)),
    el('p', {}, go, ' ', notNow, ' ', message));
}
