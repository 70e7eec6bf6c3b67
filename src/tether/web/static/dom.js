// Small DOM helpers shared by the console's modules.

/** Create an element. attrs: class, text, dataset entries (data-*), on<event> handlers,
 * boolean and string attributes. Children are nodes or strings (added as text). */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

const statusLine = () => document.getElementById("status");

/** Say something in the status line (an ARIA live region). */
export function showStatus(text, kind = "info") {
  const line = statusLine();
  if (!line) return;
  line.textContent = text;
  line.dataset.kind = kind;
}

/** Wrap an async handler so a failure is shown to the person, never thrown away. */
export function act(fn) {
  return async (...args) => {
    try {
      return await fn(...args);
    } catch (err) {
      showStatus(err && err.message ? err.message : String(err), "error");
      return undefined;
    }
  };
}

/** "1m 05s", "42s", "0.4s" */
export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "none";
  const s = Math.max(0, seconds);
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 60) return `${Math.floor(s)}s`;
  const m = Math.floor(s / 60);
  return `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
}

/** A random id fragment (crypto.randomUUID needs a secure context; this does not). */
export function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export const enc = encodeURIComponent;

/** Characters per box of text (see Runs). */
export const RUN_CHARS = 1000;

/** Where to end a box taking text from `i` with `room` characters left: after the last
 * newline within the room, else after the next one if it comes soon, else after the
 * last space in the room, else at the room's end. */
function cutAt(text, i, room) {
  // Searches stay within windows: a long text without newlines must not be scanned
  // again for every box.
  const limit = i + room;
  const inRoom = text.slice(i, limit);
  const before = inRoom.lastIndexOf("\n");
  if (before >= 0) return i + before + 1;
  const after = text.slice(limit, limit + 3 * RUN_CHARS).indexOf("\n");
  if (after >= 0) return limit + after + 1;
  const space = inRoom.lastIndexOf(" ");
  if (space > room / 2) return i + space + 1;
  return limit;
}

const isHighSurrogate = (code) => code >= 0xd800 && code <= 0xdbff;

/** Appends text and small nodes to `parent`, moving on to a new box (`.run`, a block
 * of its own) every RUN_CHARS characters or so. Chromium's bidi layout costs the square
 * of a paragraph's length when it holds unmatched brackets and any right-to-left
 * character: one 500 kB answer line froze the page for over 20 s, and isolated inline
 * spans did not help (they stay one paragraph to the layout; 300 kB still took 10 s).
 * Each block is a paragraph of its own, so a box ends where a line does when one ends
 * near (a newline, a <br>), else at a space, so that the break a block makes falls where
 * the text breaks anyway. Short text goes straight into `parent`. */
export class Runs {
  constructor(parent) {
    this.parent = parent;
    this.box = parent;
    this.used = 0;
  }

  /** Append a node that stands for `size` characters (a <br> may end the box). */
  node(node, size = 1) {
    if (this.used > 0 && this.used + size > RUN_CHARS) this.newBox();
    this.box.append(node);
    this.used += size;
    if (node.nodeName === "BR" && this.used >= RUN_CHARS / 2) this.newBox();
  }

  /** Append text, cut into boxes at line ends where it can (never inside a surrogate
   * pair). */
  text(text) {
    let i = 0;
    while (i < text.length) {
      const room = RUN_CHARS - this.used;
      if (text.length - i <= room) {
        this.box.append(i ? text.slice(i) : text);
        this.used += text.length - i;
        return;
      }
      if (room <= 0) {
        this.newBox();
        continue;
      }
      let end = cutAt(text, i, room);
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
      if (end <= i) end = i + room;
      this.box.append(text.slice(i, end));
      this.used += end - i;
      i = end;
      if (i < text.length) this.newBox();
    }
  }

  newBox() {
    this.box = document.createElement("span");
    this.box.className = "run";
    this.parent.dataset.runs = "";
    this.parent.append(this.box);
    this.used = 0;
  }
}

/** A copy from within one element of boxes (see Runs) copies the text as it was: a
 * selection's own text gives every box a line of its own, which broke a long line in
 * two wherever a box ended. Anything wider is left to the browser. */
export function copyRunsAsText(event) {
  const selection = document.getSelection();
  if (!selection || selection.rangeCount !== 1 || selection.isCollapsed) return;
  const range = selection.getRangeAt(0);
  const within = range.commonAncestorContainer;
  const element = within.nodeType === Node.ELEMENT_NODE ? within : within.parentElement;
  if (!element?.closest("[data-runs]")) return;
  event.clipboardData.setData("text/plain", plainText(range.cloneContents()));
  event.preventDefault();
}

/** The text of boxes and what is inline in them; a <br> is a line end. */
function plainText(node) {
  let text = "";
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) text += child.data;
    else if (child.nodeName === "BR") text += "\n";
    else text += plainText(child);
  }
  return text;
}
