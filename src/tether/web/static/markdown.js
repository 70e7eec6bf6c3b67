// A small markdown subset rendered straight to DOM nodes. Text only ever goes in through
// text nodes, so nothing the model or a tool writes can become markup.
//
// An answer is hostile input: rendering must stay linear in its length (a scanner that
// never searches the same stretch twice, no backtracking patterns), and a long answer is
// drawn in slices between which the page stays responsive.

import { RUN_CHARS, Runs } from "./dom.js";
import { appendRevealed } from "./reveal.js";

const FIRST_SLICE_MS = 12; // drawn at once, shared by all answers drawn in one task
const SLICE_MS = 8; // then a slice per task, leaving the page time for input
const YIELD_EVERY_CHARS = 4096;
// ... and within a paragraph or a list, every so many lines.
const YIELD_EVERY_LINES = 64;

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

function safeHref(url) {
  try {
    const parsed = new URL(url, window.location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

/** Where the next `what` is at or after `from` in one line, remembered per kind.
 * Searches move forward as the line is read, so each kind scans the line once. */
class Scanner {
  constructor(text) {
    this.text = text;
    this.memo = new Map();
    this.space = /\s/g;
  }

  next(what, from) {
    const known = this.memo.get(what);
    if (known && from >= known.from && (known.at === -1 || from <= known.at)) return known.at;
    let at;
    if (what === "space") {
      this.space.lastIndex = from;
      at = this.space.exec(this.text)?.index ?? -1;
    } else {
      at = this.text.indexOf(what, from);
    }
    this.memo.set(what, { from, at });
    return at;
  }
}

/** The token starting at `i` as [empty node, end, its text, whether code], or null
 * when the character there is plain text. */
function tokenAt(line, i, scan) {
  const ch = line[i];
  if (ch === "`") {
    const close = scan.next("`", i + 1);
    return close > i + 1 ? [el("code"), close + 1, line.slice(i + 1, close), true] : null;
  }
  if (ch === "*" && line[i + 1] === "*") {
    const close = scan.next("*", i + 2);
    if (close > i + 2 && line[close + 1] === "*") {
      return [el("strong"), close + 2, line.slice(i + 2, close), false];
    }
    return null;
  }
  if (ch === "*") {
    if (/\s/.test(line[i + 1] ?? " ")) return null;
    const close = scan.next("*", i + 1);
    return close > i + 1 ? [el("em"), close + 1, line.slice(i + 1, close), false] : null;
  }
  return linkAt(line, i, scan);
}

/** [label](http...) at `i`: a label without "]", a target without ")" or spaces. */
function linkAt(line, i, scan) {
  const labelEnd = scan.next("]", i + 1);
  if (labelEnd <= i + 1 || line[labelEnd + 1] !== "(") return null;
  const targetEnd = scan.next(")", labelEnd + 2);
  if (targetEnd <= labelEnd + 2) return null;
  const space = scan.next("space", labelEnd + 2);
  if (space !== -1 && space < targetEnd) return null;
  const href = safeHref(line.slice(labelEnd + 2, targetEnd));
  if (!href) return null;
  const a = el("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  return [a, targetEnd + 1, line.slice(i + 1, labelEnd), false];
}

/** Append `line` to `runs`, with `code`, **bold**, *em* and [links](http://...). */
function* appendInline(runs, line) {
  const scan = new Scanner(line);
  const special = /[`*[]/g;
  let textStart = 0;
  let yieldedAt = 0;
  for (let match = special.exec(line); match; match = special.exec(line)) {
    const i = match.index;
    const token = tokenAt(line, i, scan);
    if (token) {
      const [node, end, content, isCode] = token;
      if (isCode) appendRevealed(node, content);
      else new Runs(node).text(content);
      if (i > textStart) runs.text(line.slice(textStart, i));
      runs.node(node, Math.min(end - i, RUN_CHARS));
      textStart = end;
      special.lastIndex = end;
    }
    if (i - yieldedAt > YIELD_EVERY_CHARS) {
      yieldedAt = i;
      yield;
    }
  }
  if (textStart < line.length) runs.text(line.slice(textStart));
}

function headingLevel(line) {
  let n = 0;
  while (n < 5 && line[n] === "#") n += 1;
  return n >= 1 && n <= 4 && /\s/.test(line[n] ?? "") ? n : 0;
}

/** ["ul" | "ol", content] for a list item line, else null. */
function listItem(line) {
  const rest = line.trimStart();
  let kind = "ul";
  let i = 1;
  if (!"-*+".includes(rest[0] || "x")) {
    kind = "ol";
    i = 0;
    while (rest[i] >= "0" && rest[i] <= "9") i += 1;
    if (i === 0 || (rest[i] !== "." && rest[i] !== ")")) return null;
    i += 1;
  }
  return /\s/.test(rest[i] || "") ? [kind, rest.slice(i).trimStart()] : null;
}

function startsBlock(line) {
  return line.startsWith("```") || headingLevel(line) > 0 || listItem(line) !== null;
}

function* codeBlock(root, lines, i) {
  const code = [];
  let j = i + 1;
  while (j < lines.length && !lines[j].startsWith("```")) code.push(lines[j++]);
  const pre = el("pre");
  const codeNode = el("code");
  pre.append(codeNode);
  root.append(pre);
  appendRevealed(codeNode, code.join("\n"));
  yield;
  return j + 1;
}

function* list(root, lines, i, kind) {
  const node = el(kind);
  root.append(node);
  let j = i;
  for (let item = listItem(lines[j]); item?.[0] === kind; item = listItem(lines[j] ?? "")) {
    const li = el("li");
    node.append(li);
    yield* appendInline(new Runs(li), item[1]);
    j += 1;
    if ((j - i) % YIELD_EVERY_LINES === 0) yield; // a list of short items is long too
    if (j >= lines.length) break;
  }
  return j;
}

function* paragraph(root, lines, i) {
  const p = el("p");
  root.append(p);
  const runs = new Runs(p); // shared by the lines: a <br> does not end a bidi run
  let j = i;
  while (j < lines.length && lines[j].trim() && (j === i || !startsBlock(lines[j]))) {
    if (j > i) runs.node(el("br"));
    yield* appendInline(runs, lines[j]);
    j += 1;
    if ((j - i) % YIELD_EVERY_LINES === 0) yield; // so is a paragraph of short lines
  }
  return j;
}

function* blocks(root, source) {
  const lines = source.replace(/\r\n/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const level = headingLevel(line);
    const item = listItem(line);
    if (line.startsWith("```")) i = yield* codeBlock(root, lines, i);
    else if (level) {
      const h = el(`h${Math.min(level + 2, 6)}`);
      root.append(h);
      yield* appendInline(new Runs(h), line.slice(level).trimStart());
      i += 1;
    } else if (item) i = yield* list(root, lines, i, item[0]);
    else if (!line.trim()) i += 1;
    else i = yield* paragraph(root, lines, i);
    yield;
  }
}

/** Run `work` until `deadline` (performance.now()); true once it is done. */
function runUntil(work, deadline) {
  while (performance.now() < deadline) {
    if (work.next().done) return true;
  }
  return false;
}

let firstSliceEnd = 0;

/** When the synchronous first slice of this task ends. A history reload draws every
 * answer of the session in one task; they share one slice, not one each. */
function firstSliceDeadline() {
  if (!firstSliceEnd) {
    firstSliceEnd = performance.now() + FIRST_SLICE_MS;
    setTimeout(() => {
      firstSliceEnd = 0;
    }, 0);
  }
  return firstSliceEnd;
}

function continueLater(root, work) {
  setTimeout(() => {
    // A reload of the conversation replaced this answer: stop drawing it.
    if (!root.isConnected) return;
    if (runUntil(work, performance.now() + SLICE_MS)) delete root.dataset.rendering;
    else continueLater(root, work);
  }, 0);
}

/** Render markdown `source` into a new element (a div of blocks). A long source is
 * finished in later slices; the element has data-rendering until it is whole. */
export function renderMarkdown(source) {
  const root = el("div");
  root.className = "md";
  const work = blocks(root, String(source ?? ""));
  if (!runUntil(work, firstSliceDeadline())) {
    root.dataset.rendering = "1";
    continueLater(root, work);
  }
  return root;
}
