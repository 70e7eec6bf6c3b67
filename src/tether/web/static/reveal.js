// Text a person must read as it is (commands, arguments, titles, findings) shown with its
// hiding characters made visible: bidi controls and invisible characters become a marked
// ⟦U+XXXX⟧ (so they can no longer reorder or hide anything), and look-alikes (a Greek
// or Cyrillic letter beside Latin ones, fullwidth forms, unusual spaces) are marked in
// place. The same classes of characters as governance's text rules (builtin_rules.toml).

import { Runs } from "./dom.js";

const NAMES = {
  0x061c: "ALM", 0x200b: "ZWSP", 0x200c: "ZWNJ", 0x200d: "ZWJ", 0x200e: "LRM", 0x200f: "RLM",
  0x202a: "LRE", 0x202b: "RLE", 0x202c: "PDF", 0x202d: "LRO", 0x202e: "RLO", 0x2060: "WJ",
  0x2066: "LRI", 0x2067: "RLI", 0x2068: "FSI", 0x2069: "PDI", 0xfeff: "BOM",
};

// Each pattern matches one code point; none can backtrack.
const HIDDEN =
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0\ufff9-\ufffb\u{e0000}-\u{e007f}\u{e0100}-\u{e01ef}]/u;
const ODD_SPACE_OR_WIDE = /[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\uff01-\uff5e]/u;
const GREEK_OR_CYRILLIC = /[\u0370-\u03ff\u0400-\u052f]/u;
const LATIN = /[A-Za-z]/;
const PLAIN = /^[\t\n\r\u0020-\u007e]*$/;

function codePoint(ch) {
  const cp = ch.codePointAt(0);
  const hex = cp.toString(16).toUpperCase().padStart(4, "0");
  return NAMES[cp] ? `U+${hex} ${NAMES[cp]}` : `U+${hex}`;
}

function lookalike(chars, i) {
  const ch = chars[i];
  if (ODD_SPACE_OR_WIDE.test(ch)) return true;
  if (!GREEK_OR_CYRILLIC.test(ch)) return false;
  return LATIN.test(chars[i - 1] ?? "") || LATIN.test(chars[i + 1] ?? "");
}

/** Call onText(run) and onMark(kind, ch) over `text` in order (one pass). */
function scan(text, onText, onMark) {
  if (PLAIN.test(text)) {
    onText(text);
    return;
  }
  const chars = Array.from(text);
  let run = "";
  chars.forEach((ch, i) => {
    const kind = HIDDEN.test(ch) ? "hidden-char" : lookalike(chars, i) ? "lookalike" : null;
    if (!kind) {
      run += ch;
      return;
    }
    if (run) onText(run);
    run = "";
    onMark(kind, ch);
  });
  if (run) onText(run);
}

/** Append `text` to `parent` with its hiding characters marked. */
export function appendRevealed(parent, text) {
  const runs = new Runs(parent);
  scan(
    String(text ?? ""),
    (run) => runs.text(run),
    (kind, ch) => {
      const mark = document.createElement("mark");
      mark.className = kind;
      mark.title = codePoint(ch);
      mark.textContent = kind === "hidden-char" ? `⟦${codePoint(ch)}⟧` : ch;
      runs.node(mark, mark.textContent.length);
    },
  );
}

/** `text` with its hiding characters marked, as a fragment to append. */
export function revealed(text) {
  const fragment = document.createDocumentFragment();
  appendRevealed(fragment, text);
  return fragment;
}

/** `text` with hiding characters written out, for attributes (aria-label, title). */
export function revealedString(text) {
  const parts = [];
  scan(
    String(text ?? ""),
    (run) => parts.push(run),
    (kind, ch) => parts.push(kind === "hidden-char" ? `⟦${codePoint(ch)}⟧` : `${ch}⟦${codePoint(ch)}⟧`),
  );
  return parts.join("");
}
