// The script API of `.pvf.js` programs, built inside the sandbox over one host function.
//
// The host function takes an operation name and a JSON array of arguments and answers JSON
// ({v: value} or {e: {code, message}}): only data crosses the bridge, never a host object, so a script
// that pollutes prototypes or replaces JSON changes nothing on the host side (the references used here
// are taken before the script runs). The host function itself is removed from the global object.
//
// The hot operations (parse, sections, getValue, set of a number, write, progress) also have a primitive
// form: `fast(op, a, b, c, d)` takes and returns strings, numbers or null — no JSON on either side. It answers
// `nonce` (a random string the host chose, kept only in this closure) for an error, which `fast.error` then
// describes, and `nonce + ":json"` for a result it cannot hand over as a primitive (the JSON form is asked).
(function (host, fastHost, nonce, docsLive) {
  "use strict";
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const keys = Object.keys;
  const isArray = Array.isArray;
  const hasOwn = Object.hasOwn;
  const ErrorCtor = Error;
  const StringCtor = String;
  const isInteger = Number.isInteger;
  const isFinite = Number.isFinite;
  const is = Object.is;
  const split = String.prototype.split;
  const apply = Reflect.apply;
  const indexOf = String.prototype.indexOf;
  const retry = nonce + ":json";
  // The binding cuts a string argument at a NUL: such strings take the JSON form.
  const plainString = (s) => apply(indexOf, s, ["\0"]) < 0;
  // A price raise asks every document for the same section, and most files have none: the primitive parse
  // is told the name last asked for (`lastName`) and answers a negative id when the file has no tag record
  // of that name at all (so `sections(lastName)` is [] until the document is changed); the host builds such
  // a document only if another method uses it. A document's id is its parse number and the host keeps the
  // last `docsLive` parsed: `parsed` is the newest id seen, so an evicted one still asks the host (and gets
  // its "not a live document" error).
  let lastName = null;
  let parsed = 0;
  // `doc.sections(name)` answers each section with its first value where that is a number; the last such
  // answer is kept here (section ids, their first values, the document, `changes` then) so `getValue(0)` of
  // one of those sections asks the host nothing while `changes` is unchanged (every JSON operation and every
  // primitive `set` counts as a change) and the document is still live.
  let changes = 0;
  let firstIds = [];
  let firstValues = [];
  let firstDoc = 0;
  let firstAt = -1;
  // The primitive parse of a file that has a tag of `lastName` answers `sections(lastName)` too ("id:" +
  // the answer): kept here for that document (`ansDoc`) while `changes` is unchanged (`ansAt`).
  let ansDoc = 0;
  let ansName = null;
  let ansAt = -1;
  let ans = "";

  function call(op, args) {
    changes++;
    const answer = parse(host(op, stringify(args)));
    if (hasOwn(answer, "e")) {
      const err = new ErrorCtor(answer.e.code + ": " + answer.e.message);
      err.code = answer.e.code;
      throw err;
    }
    return answer.v;
  }

  function fail(e) {
    const err = new ErrorCtor(e.code + ": " + e.message);
    err.code = e.code;
    throw err;
  }

  // `args` for the JSON form when the primitive one cannot take them (a string the binding cannot convert).
  function fast(op, a, b, c, d, args) {
    let v;
    try {
      v = fastHost(op, a, b, c, d);
    } catch (e) {
      return call(op, args);
    }
    if (v === nonce) fail(call("fast.error", []));
    if (v === retry) return call(op, args);
    return v;
  }

  const slice = String.prototype.slice;
  // The primitive `doc.sections` answer: "id" or "id=first value" per section, comma-separated.
  function sectionsOf(s, doc) {
    const out = [];
    if (s === "") return out;
    const parts = apply(split, s, [","]);
    const ids = [];
    const values = [];
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      const eq = apply(indexOf, part, ["="]);
      const id = eq < 0 ? +part : +apply(slice, part, [0, eq]);
      if (eq >= 0) {
        ids.push(id);
        values.push(+apply(slice, part, [eq + 1]));
      }
      out.push(new PvfSection(id));
    }
    firstIds = ids;
    firstValues = values;
    firstDoc = doc;
    firstAt = changes;
    return out;
  }

  const isNumberValue = (v) => typeof v === "number" && isFinite(v) && !is(v, -0);

  function text(args) {
    let out = "";
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      let s;
      if (typeof a === "string") s = a;
      else {
        try {
          s = typeof a === "object" && a !== null ? stringify(a) : StringCtor(a);
        } catch (e) {
          s = StringCtor(a);
        }
      }
      out += (i ? " " : "") + s;
    }
    return out;
  }

  function opts(o) {
    return o === undefined || o === null ? {} : o;
  }

  class PvfFile {
    // `_g`, `_i`: the host's listing number and position of the file (see `listed`), or -1.
    constructor(path, g, i) {
      defineProperty(this, "path", { value: path, enumerable: true });
      defineProperty(this, "_g", { value: g === undefined ? -1 : g });
      defineProperty(this, "_i", { value: i === undefined ? -1 : i });
    }
    get index() { return call("file.info", [this.path]).index; }
    get type() { return call("file.info", [this.path]).type; }
    get size() { return call("file.info", [this.path]).size; }
    text() { return call("file.text", [this.path]); }
    setText(t) { call("file.setText", [this.path, StringCtor(t)]); }
    parse() {
      const p = this.path;
      if (!plainString(p)) return new PvfDocument(call("file.parse", [p]));
      const name = lastName;
      const id = fast("file.parse", p, this._g, this._i, name, [p]);
      if (typeof id === "string") {
        const c = apply(indexOf, id, [":"]);
        const doc = new PvfDocument(+apply(slice, id, [0, c]));
        ansDoc = doc._id;
        ansName = name;
        ansAt = changes;
        ans = apply(slice, id, [c + 1]);
        return doc;
      }
      return id < 0 ? new PvfDocument(-id, name) : new PvfDocument(id);
    }
    write(doc) {
      if (!(doc instanceof PvfDocument)) throw new ErrorCtor("INVALID_ARGUMENT: write() takes a parsed document");
      const p = this.path;
      if (plainString(p)) fast("file.write", p, doc._id, null, null, [p, doc._id]);
      else call("file.write", [p, doc._id]);
    }
  }

  class PvfSection {
    constructor(id) { defineProperty(this, "_id", { value: id }); }
    get name() { return call("sec.info", [this._id]).name; }
    get hasEndTag() { return call("sec.info", [this._id]).hasEndTag; }
    get path() { return call("sec.info", [this._id]).path; }
    get occurrence() { return call("sec.info", [this._id]).occurrence; }
    values() { return call("sec.values", [this._id]); }
    children() { return call("sec.children", [this._id]).map((i) => new PvfSection(i)); }
    removeChildren(name) { return call("sec.removeChildren", [this._id, name === undefined ? null : StringCtor(name)]); }
    get(i) { return call("sec.get", [this._id, i === undefined ? 0 : i, "raw"]); }
    getValue(i) {
      if (i === undefined) i = 0;
      if (i === 0 && firstAt === changes && parsed - firstDoc < docsLive) {
        const id = this._id;
        for (let k = 0; k < firstIds.length; k++) if (firstIds[k] === id) return firstValues[k];
      }
      if (!isInteger(i)) return call("sec.get", [this._id, i, "plain"]);
      return fast("sec.get", this._id, i, "plain", null, [this._id, i, "plain"]);
    }
    getOriStrValue(i) { return call("sec.get", [this._id, i === undefined ? 0 : i, "ori"]); }
    set(value, i) {
      if (i === undefined) i = 0;
      if (!isNumberValue(value) || !isInteger(i)) call("sec.set", [this._id, value, i, false]);
      else {
        changes++;
        fast("sec.set", this._id, value, i, false, [this._id, value, i, false]);
      }
    }
    setStrValue(t, i) { call("sec.set", [this._id, StringCtor(t), i === undefined ? 0 : i, true]); }
    setValues(vs) {
      if (!isArray(vs)) throw new ErrorCtor("INVALID_ARGUMENT: setValues() takes an array");
      call("sec.setValues", [this._id, vs]);
    }
    append(v) { call("sec.append", [this._id, v]); }
    appendSection(name, values, o) {
      return new PvfSection(call("sec.appendSection", [this._id, StringCtor(name), values === undefined ? [] : values, !!opts(o).endTag]));
    }
    delete() { call("sec.delete", [this._id]); }
  }

  class PvfDocument {
    // `_miss`: a section name this document has no tag of (see `lastName`), or null; `_id` is its parse
    // number (the host numbers documents as it parses them).
    constructor(id, miss) {
      if (id > parsed) parsed = id;
      defineProperty(this, "_id", { value: id });
      defineProperty(this, "_miss", { value: miss === undefined ? null : miss, writable: true });
    }
    sections(path) {
      const p = StringCtor(path);
      if (p === this._miss && parsed - this._id < docsLive) return [];
      let found;
      if (plainString(p)) {
        lastName = p;
        if (this._id === ansDoc && p === ansName && ansAt === changes && parsed - ansDoc < docsLive) {
          return sectionsOf(ans, ansDoc);
        }
        const got = fast("doc.sections", this._id, p, null, null, [this._id, p]);
        if (typeof got === "string") return sectionsOf(got, this._id);
        found = got;  // the JSON form's answer (a retry)
      } else found = call("doc.sections", [this._id, p]);
      const out = [];
      for (let i = 0; i < found.length; i++) out.push(new PvfSection(found[i]));
      return out;
    }
    section(path, occurrence) {
      const id = call("doc.section", [this._id, StringCtor(path), occurrence === undefined ? null : occurrence]);
      return id === null ? null : new PvfSection(id);
    }
    get(path, occurrence, valueIndex) { return call("doc.get", [this._id, StringCtor(path), occurrence === undefined ? null : occurrence, valueIndex === undefined ? 0 : valueIndex, "raw"]); }
    getValue(path, occurrence, valueIndex) { return call("doc.get", [this._id, StringCtor(path), occurrence === undefined ? null : occurrence, valueIndex === undefined ? 0 : valueIndex, "plain"]); }
    getOriStrValue(path, occurrence, valueIndex) { return call("doc.get", [this._id, StringCtor(path), occurrence === undefined ? null : occurrence, valueIndex === undefined ? 0 : valueIndex, "ori"]); }
    set(path, value, o) { this._miss = null; call("doc.set", [this._id, StringCtor(path), value, opts(o), false]); }
    setStrValue(path, t, o) { this._miss = null; call("doc.set", [this._id, StringCtor(path), StringCtor(t), opts(o), true]); }
    delete(path, occurrence) { this._miss = null; return call("doc.delete", [this._id, StringCtor(path), occurrence === undefined ? null : occurrence]); }
    appendSection(name, values, o) {
      this._miss = null;
      return new PvfSection(call("doc.appendSection", [this._id, StringCtor(name), values === undefined ? [] : values, !!opts(o).endTag]));
    }
    warnings() { return call("doc.warnings", [this._id]); }
  }

  class PvfList {
    constructor(path) { defineProperty(this, "path", { value: path, enumerable: true }); }
    get() {
      const out = {};
      const entries = call("lst.entries", [this.path]);
      for (let i = 0; i < entries.length; i++) out[entries[i][0]] = entries[i][1];
      return out;
    }
    forEach(cb) {
      const entries = call("lst.entries", [this.path]);
      for (let i = 0; i < entries.length; i++) cb(entries[i][0], entries[i][1]);
    }
    set(id, path) { call("lst.set", [this.path, [[id, StringCtor(path)]]]); }
    mset(map) {
      const pairs = [];
      const ks = keys(map);
      for (let i = 0; i < ks.length; i++) pairs.push([Number(ks[i]), StringCtor(map[ks[i]])]);
      call("lst.set", [this.path, pairs]);
    }
    unset(id) { return call("lst.unset", [this.path, id]); }
    getId(path) { return call("lst.getId", [this.path, StringCtor(path)]); }
  }

  class PvfFileset {
    constructor(name) { defineProperty(this, "name", { value: name, enumerable: true }); }
    getAll() { return call("fs.get", [this.name]); }
    setAll(paths) {
      if (!isArray(paths)) throw new ErrorCtor("INVALID_ARGUMENT: setAll() takes an array of paths");
      call("fs.set", [this.name, paths.map((p) => StringCtor(p))]);
    }
  }

  // A listing from the host: {p: paths, g: its number, n: how many leading paths it may name by position}.
  function listed(r) {
    const ps = r.p, g = r.g, n = r.n;
    const out = [];
    for (let i = 0; i < ps.length; i++) out.push(i < n ? new PvfFile(ps[i], g, i) : new PvfFile(ps[i]));
    return out;
  }
  const types = freeze({ script: 1, unicode: 3 });
  const pvf = {
    files() { return listed(call("pvf.files", [])); },
    find(path) { const p = call("pvf.find", [StringCtor(path)]); return p === null ? null : new PvfFile(p); },
    glob(pattern) { return listed(call("pvf.glob", [StringCtor(pattern)])); },
    createFile(path, type, t) {
      return new PvfFile(call("pvf.createFile", [StringCtor(path), type === undefined ? 1 : type, t === undefined ? null : StringCtor(t)]));
    },
    copyFile(from, to, overwrite) { return new PvfFile(call("pvf.copyFile", [StringCtor(from), StringCtor(to), !!overwrite])); },
    deleteFile(path) { return call("pvf.deleteFile", [StringCtor(path)]); },
    lst(path) { return new PvfList(call("pvf.lst", [StringCtor(path)])); },
    fileset(name) { const n = call("fs.find", [StringCtor(name)]); return n === null ? null : new PvfFileset(n); },
    createFileset(name, paths) {
      return new PvfFileset(call("fs.create", [StringCtor(name), paths === undefined ? [] : paths.map((p) => StringCtor(p))]));
    },
    getOriStrValue(ref) { return call("pvf.getOriStrValue", [ref]); },
    log() { call("log", ["info", text(arguments)]); },
    progress(done, total, message) {
      const args = [Number(done), Number(total), message === undefined ? null : StringCtor(message)];
      if (isFinite(args[0]) && isFinite(args[1]) && (args[2] === null || plainString(args[2]))) {
        fast("progress", args[0], args[1], args[2], null, args);
      } else call("progress", args);
    },
    types: types,
    get modifiedCount() { return call("pvf.counts", []).modified; },
    get scannedCount() { return call("pvf.counts", []).scanned; },
  };
  const console = {
    log() { call("log", ["info", text(arguments)]); },
    info() { call("log", ["info", text(arguments)]); },
    warn() { call("log", ["warn", text(arguments)]); },
    error() { call("log", ["error", text(arguments)]); },
  };
  for (const C of [PvfFile, PvfSection, PvfDocument, PvfList, PvfFileset]) {
    freeze(C.prototype);
    freeze(C);
  }
  defineProperty(globalThis, "pvf", { value: freeze(pvf), enumerable: false });
  defineProperty(globalThis, "console", { value: freeze(console), enumerable: false });
})(globalThis.__host, globalThis.__hostp, globalThis.__nonce, globalThis.__docsLive);
delete globalThis.__host;
delete globalThis.__hostp;
delete globalThis.__nonce;
delete globalThis.__docsLive;
