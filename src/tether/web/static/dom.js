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
