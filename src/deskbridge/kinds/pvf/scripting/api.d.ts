// The `.pvf.js` script API (deskbridge). Served by pvf_script_help topic "types"; a test keeps it and the
// runtime (prelude.js) consistent: every member declared here exists, every member exposed is declared.

/** A value of a script section, with its token type kept exactly. */
type PvfValue =
  | number // an int (a bare number written into a float slot stays a float)
  | string // a plain string
  | { type: "int"; value: number }
  | { type: "float"; value: number }
  | { type: "string" | "quoted"; value: string }
  | { type: "link"; id: number; key: string; text?: string }
  | { type: "typed"; code: number; value: number | string }
  | { type: "word"; value: string };

interface PvfSetOptions {
  occurrence?: number;
  valueIndex?: number;
  create?: boolean;
  endTag?: boolean;
}

interface PvfFile {
  readonly path: string;
  readonly index: number;
  readonly type: number;
  readonly size: number;
  text(): string;
  setText(text: string): void;
  parse(): PvfDocument;
  write(doc: PvfDocument): void;
}

interface PvfDocument {
  sections(path: string): PvfSection[];
  section(path: string, occurrence?: number): PvfSection | null;
  get(path: string, occurrence?: number, valueIndex?: number): PvfValue | null;
  getValue(path: string, occurrence?: number, valueIndex?: number): number | string | null;
  getOriStrValue(path: string, occurrence?: number, valueIndex?: number): string | number | null;
  set(path: string, value: PvfValue, options?: PvfSetOptions): void;
  setStrValue(path: string, text: string, options?: PvfSetOptions): void;
  delete(path: string, occurrence?: number): boolean;
  appendSection(name: string, values?: PvfValue[], options?: { endTag?: boolean }): PvfSection;
  warnings(): string[];
}

interface PvfSection {
  readonly name: string;
  readonly hasEndTag: boolean;
  readonly path: string;
  readonly occurrence: number;
  values(): PvfValue[];
  children(): PvfSection[];
  removeChildren(name?: string): number;
  get(index?: number): PvfValue | null;
  getValue(index?: number): number | string | null;
  getOriStrValue(index?: number): string | number | null;
  set(value: PvfValue, index?: number): void;
  setStrValue(text: string, index?: number): void;
  setValues(values: PvfValue[]): void;
  append(value: PvfValue): void;
  appendSection(name: string, values?: PvfValue[], options?: { endTag?: boolean }): PvfSection;
  delete(): void;
}

interface PvfList {
  readonly path: string;
  get(): { [id: number]: string };
  forEach(callback: (id: number, path: string) => void): void;
  set(id: number, path: string): void;
  mset(entries: { [id: number]: string }): void;
  unset(id: number): boolean;
  getId(path: string): number | null;
}

interface PvfFileset {
  readonly name: string;
  getAll(): string[];
  setAll(paths: string[]): void;
}

interface PvfApi {
  files(): PvfFile[];
  find(path: string): PvfFile | null;
  glob(pattern: string): PvfFile[];
  createFile(path: string, type?: number, text?: string): PvfFile;
  copyFile(from: string, to: string, overwrite?: boolean): PvfFile;
  deleteFile(path: string): boolean;
  lst(path: string): PvfList;
  fileset(name: string): PvfFileset | null;
  createFileset(name: string, paths?: string[]): PvfFileset;
  getOriStrValue(ref: string | { type: "link"; id: number; key: string }): string | null;
  log(...values: unknown[]): void;
  progress(done: number, total: number, message?: string): void;
  readonly types: { readonly script: 1; readonly unicode: 3 };
  readonly modifiedCount: number;
  readonly scannedCount: number;
}

interface PvfConsole {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
}

declare const pvf: PvfApi;
declare const console: PvfConsole;
