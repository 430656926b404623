// The browser side of the collab authority (md-contract.md "Collab authority"): push local changes, pull everyone
// else's (the person's other tabs, and AI edits from MCP clients), rebase on conflict, count unsynced drafts.
//
// AI edits (clientID "mcp:<caller>") are received one update per transaction so each is one undo step, and are
// highlighted for a moment. @codemirror/collab's receiveUpdates marks every remote transaction
// `addToHistory: false`; for AI updates we let it build the transaction through a state whose `update` swaps that
// annotation for our `aiEdit` annotation plus `isolateHistory`, so the history records the edit on its own.

import { collab, receiveUpdates, sendableUpdates, getSyncedVersion } from '@codemirror/collab';
import { Annotation, ChangeSet, StateEffect, StateField, Transaction } from '@codemirror/state';
import { Decoration, EditorView } from '@codemirror/view';
import { isolateHistory } from '@codemirror/commands';
import { api } from './api.js';

/** Annotation on a transaction that applies one AI update: `{client, id}`. */
export const aiEdit = Annotation.define();

const AI_HIGHLIGHT_MS = 1600;
const clearAiMark = StateEffect.define();

/** Marks over the text an AI update inserted; each set fades (CSS) and is removed after AI_HIGHLIGHT_MS. */
export const aiMarks = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const effect of tr.effects) {
      if (effect.is(clearAiMark)) deco = deco.update({ filter: (_f, _t, value) => value.spec.id !== effect.value });
    }
    const ai = tr.annotation(aiEdit);
    if (ai) {
      const ranges = [];
      tr.changes.iterChangedRanges((_fa, _ta, fromB, toB) => {
        if (toB > fromB) {
          ranges.push(Decoration.mark({ class: 'cm-ai-edit', id: ai.id, attributes: { title: ai.client } }).range(fromB, toB));
        }
      });
      if (ranges.length) deco = deco.update({ add: ranges, sort: true });
    }
    return deco;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/**
 * The AI changes this editor applied, as inverse change sets mapped through everything since (issue 8): an AI's
 * `undo` / `redo` editor command undoes or redoes the last AI change only, never the person's keystrokes.
 * `{undo: [ChangeSet], redo: [ChangeSet]}`; the top of each stack applies to the current document.
 */
export const aiSteps = StateField.define({
  create: () => ({ undo: [], redo: [] }),
  update(value, tr) {
    if (!tr.docChanged) return value;
    const map = (stack) => stack.map((inverse) => inverse.map(tr.changes));
    let undo = map(value.undo);
    let redo = map(value.redo);
    const ai = tr.annotation(aiEdit);
    if (ai) {
      const inverse = tr.changes.invert(tr.startState.doc);
      if (ai.echo === 'undo') { undo = undo.slice(0, -1); redo = [...redo, inverse]; }
      else if (ai.echo === 'redo') { redo = redo.slice(0, -1); undo = [...undo, inverse]; }
      else { undo = [...undo, inverse].slice(-100); redo = []; }
    }
    return { undo, redo };
  },
});

/** The change an AI's undo/redo would make now (null when there is none). */
export function aiStep(state, which) {
  const stack = state.field(aiSteps, false)?.[which === 'redo' ? 'redo' : 'undo'] || [];
  const top = stack[stack.length - 1];
  return top && !top.empty ? top : null;
}

/** Change sets (JSON) of AI undo/redo steps this editor prepared, to recognise them when they come back. */
const expectedEchoes = [];
export function expectEcho(changes, which) {
  expectedEchoes.push({ json: JSON.stringify(changes.toJSON()), which });
  if (expectedEchoes.length > 20) expectedEchoes.shift();
}

const isAi = (clientID) => typeof clientID === 'string' && clientID.startsWith('mcp:');
let markSeq = 0;

/** receiveUpdates for one AI update, recorded in the undo history as its own step. */
function receiveAiUpdate(state, update, id) {
  const json = JSON.stringify(update.changes.toJSON());
  const at = expectedEchoes.findIndex((e) => e.json === json);
  const echo = at >= 0 ? expectedEchoes.splice(at, 1)[0].which : null;
  const proxy = Object.create(state);
  proxy.update = (spec) => state.update({
    ...spec,
    annotations: [
      ...[].concat(spec.annotations || []).filter((a) => a.type !== Transaction.addToHistory),
      aiEdit.of({ client: update.clientID, id, echo }),
      isolateHistory.of('full'),
      Transaction.userEvent.of('input.ai'),
    ],
  });
  return receiveUpdates(proxy, [update]);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One push carries at most this many updates (the server's collab.py PUSH_MAX_UPDATES): after a time offline a
// tab holds one update per keystroke, and sending them all at once was refused again and again, so they never
// arrived. The rest follow in the next pushes (the server confirms updates in order, so a prefix is a valid push).
const PUSH_MAX_UPDATES = 1000;
// And about this many bytes of JSON (estimated at 3 bytes a UTF-16 unit, the most UTF-8 needs), well under the
// server's request limit; one larger update still goes alone (the push route takes one as large as a document).
const PUSH_BATCH_MAX_BYTES = 2 * 1024 * 1024;

/** The first updates of `updates` that fit in one push (at least one), as wire objects. */
export function pushBatch(updates) {
  const batch = [];
  let bytes = 0;
  for (const u of updates) {
    const wire = { clientID: u.clientID, changes: u.changes.toJSON() };
    const size = 3 * JSON.stringify(wire).length;
    if (batch.length && (batch.length >= PUSH_MAX_UPDATES || bytes + size > PUSH_BATCH_MAX_BYTES)) break;
    batch.push(wire);
    bytes += size;
  }
  return batch;
}

/**
 * The person's unsynced changes `{base, changes}` (see DocSync.unsynced) as a change set for `doc`, the document
 * as the server has it after a resync, and whether the server changed text they touch. The server's changes
 * since `base` are not in its update log any more (that is why it asked for a resync), so they are taken as one
 * replacement of the span between the longest common head and tail of `base` and `doc`; the person's changes
 * are mapped over it (ChangeSet.map: what they typed is kept — typing inside that span lands at its edge).
 */
export function rebaseUnsynced({ base, changes }, doc) {
  const a = base.toString();
  const b = doc.toString();
  const max = Math.min(a.length, b.length);
  let head = 0;
  while (head < max && a.charCodeAt(head) === b.charCodeAt(head)) head += 1;
  let tail = 0;
  while (tail < max - head && a.charCodeAt(a.length - 1 - tail) === b.charCodeAt(b.length - 1 - tail)) tail += 1;
  const from = head;
  const to = a.length - tail;
  const server = ChangeSet.of(from === to && b.length === a.length ? [] : [{ from, to, insert: b.slice(head, b.length - tail) }], a.length);
  return { changes: changes.map(server), conflict: from < to || b.length !== a.length ? Boolean(changes.touchesRange(from, to)) : false };
}

/** Extensions for a document opened at `version`, with this tab's `clientID`. */
export function collabExtensions(version, clientID) {
  return [collab({ startVersion: version, clientID }), aiMarks, aiSteps];
}

/** One document's sync loop with the server. Create after the view has the document's state; `close()` on switch. */
export class DocSync {
  constructor(view, docId, { onChange, onError, onResync, onSynced, onGone } = {}) {
    this.view = view;
    this.docId = docId;
    this.closed = false;
    this.pushing = false;
    this.awaitingPull = false;
    this.abort = new AbortController();
    this.onChange = onChange || (() => {});
    this.onError = onError || (() => {});
    this.onResync = onResync || (() => {});
    this.onSynced = onSynced || (() => {});
    this.onGone = onGone || (() => {});
    // The document as the server had it at the synced version: what the unsynced changes apply to (kept so
    // they can be carried over a resync, see `unsynced`). Text is a persistent tree: updates share its nodes.
    this.base = view.state.doc;
    this.pullLoop();
  }

  close() {
    this.closed = true;
    this.abort.abort();
  }

  /** Local changes not yet accepted by the server (the draft count the barrier asks for). */
  pending() {
    return sendableUpdates(this.view.state).length;
  }

  version() {
    return getSyncedVersion(this.view.state);
  }

  /** The local changes not yet accepted, as `{base, changes}` (one change set over `base`), or null. */
  unsynced() {
    const updates = sendableUpdates(this.view.state);
    if (!updates.length) return null;
    const changes = updates.map((u) => u.changes).reduce((all, next) => all.compose(next));
    return { base: this.base, changes };
  }

  /** Call on every local document change. */
  async push() {
    if (this.pushing || this.awaitingPull || this.closed) return;
    const updates = sendableUpdates(this.view.state);
    if (!updates.length) return;
    this.pushing = true;
    const version = getSyncedVersion(this.view.state);
    try {
      const result = await api.push(this.docId, version, pushBatch(updates));
      // Our updates come back through the pull loop, which confirms them; it may already have (the pull can
      // answer before the push does), so wait only when the server's version is still ahead of ours.
      this.awaitingPull = getSyncedVersion(this.view.state) < result.version;
    } catch (err) {
      if (err.status === 409) {
        // Behind: the pull loop brings what we missed, then we push again (rebased) — unless it already did.
        const serverVersion = err.body?.version ?? Infinity;
        this.awaitingPull = getSyncedVersion(this.view.state) < serverVersion;
      } else if (!this.closed) {
        this.onError(err);
        await sleep(1000);
      }
    } finally {
      this.pushing = false;
    }
    if (!this.awaitingPull && this.pending()) setTimeout(() => this.push(), 200);
  }

  /** Try to get every local change accepted within `timeoutMs`; returns what is still pending. */
  async flush(timeoutMs = 1500) {
    const until = Date.now() + timeoutMs;
    while (this.pending() && Date.now() < until && !this.closed) {
      this.push();
      await sleep(50);
    }
    return this.pending();
  }

  async pullLoop() {
    while (!this.closed) {
      const version = getSyncedVersion(this.view.state);
      let result;
      try {
        result = await api.pull(this.docId, version, this.abort.signal);
      } catch (err) {
        if (this.closed) return;
        if (err.body?.error?.data?.resync) { this.onResync(err); return; }
        if (err.status === 404) { this.closed = true; this.onGone(err); return; } // the document was closed
        this.onError(err);
        await sleep(1000);
        continue;
      }
      if (this.closed) return;
      if (getSyncedVersion(this.view.state) !== version) continue;
      this.receive(result.updates || []);
      this.awaitingPull = false;
      if (this.pending()) this.push();
      else this.onSynced();
    }
  }

  /** Apply pulled wire updates: the person's own and other tabs' in batches, each AI update on its own. */
  receive(wire) {
    if (!wire.length) return;
    const updates = wire.map((u) => ({ clientID: u.clientID, changes: ChangeSet.fromJSON(u.changes) }));
    for (const u of updates) this.base = u.changes.apply(this.base);
    let remote = false;
    for (let i = 0; i < updates.length;) {
      if (isAi(updates[i].clientID)) {
        const id = ++markSeq;
        this.view.dispatch(receiveAiUpdate(this.view.state, updates[i], id));
        // For page scripts and measurements (tests/e2e/markdown_browser_bench.py): an AI edit is on screen.
        window.dispatchEvent(new CustomEvent('deskbridge:ai-edit', { detail: { client: updates[i].clientID, docId: this.docId } }));
        setTimeout(() => { if (!this.closed) this.view.dispatch({ effects: clearAiMark.of(id) }); }, AI_HIGHLIGHT_MS);
        remote = true;
        i += 1;
      } else {
        let j = i;
        while (j < updates.length && !isAi(updates[j].clientID)) j += 1;
        const tr = receiveUpdates(this.view.state, updates.slice(i, j));
        if (!tr.changes.empty) remote = true;
        this.view.dispatch(tr);
        i = j;
      }
    }
    this.onChange({ remote });
  }
}
