// Tool calls: one model per call (info, output, deadlines), shown as cards inline in the
// conversation and in the side panel. Output comes from the call's SSE stream (for at most
// MAX_STREAMS calls in flight at once; the others fetch /output now and then until a
// stream is free) or, for finished calls, from /output.

import { api } from "./api.js";
import { act, enc, formatSeconds, h, Runs } from "./dom.js";
import { revealed } from "./reveal.js";

const LIVE = new Set(["awaiting_approval", "running", "offloaded"]);
const models = new Map();
const MAX_OUTPUT_CHARS = 200_000;
// A browser keeps at most six HTTP/1.1 connections to a host, all its tabs together. With
// an EventSource per call in flight, a model that started eight calls held every one, and
// Cancel, Stop or Approve waited in the queue until calls ended by themselves.
const MAX_STREAMS = 2;
const POLL_MS = 2000;
const streaming = new Set(); // models with an open EventSource
const waiting = new Set(); // live models fetching /output until a stream is free

function base(sessionId, callId) {
  return `/api/tool-calls/${enc(sessionId)}/${enc(callId)}`;
}

export function describeArguments(toolName, args) {
  if (args && typeof args === "object" && typeof args.command === "string") return args.command;
  return JSON.stringify(args ?? {}, null, 1);
}

class CallModel {
  constructor(sessionId, callId) {
    this.sessionId = sessionId;
    this.id = callId;
    this.info = { tool_call_id: callId, status: "unknown", extra: {} };
    this.seenAt = performance.now();
    this.output = "";
    this.outputState = "none"; // none | loading | streaming | polling | loaded
    this.source = null;
    this.cards = new Set();
  }

  get live() {
    return LIVE.has(this.info.status);
  }

  update(info) {
    this.info = { ...this.info, ...info };
    this.seenAt = performance.now();
    if (!this.live && this.source && this.outputState === "loaded") this.closeStream();
    this.render();
  }

  remaining(field) {
    const value = this.info[field];
    if (value === null || value === undefined) return null;
    if (!this.live) return value;
    return Math.max(0, value - (performance.now() - this.seenAt) / 1000);
  }

  elapsed() {
    const value = this.info.elapsed ?? 0;
    return this.live ? value + (performance.now() - this.seenAt) / 1000 : value;
  }

  /** Follow the live output (the stream replays what came before, then goes on), or,
   * with every stream taken, fetch it now and then until one is free. */
  follow() {
    if (this.source || this.outputState === "loaded") return;
    if (streaming.size >= MAX_STREAMS) {
      this.wait();
      return;
    }
    waiting.delete(this);
    streaming.add(this);
    this.output = "";
    this.outputState = "streaming";
    this.source = new EventSource(`${base(this.sessionId, this.id)}/stream`);
    this.source.onerror = () => {
      // Closed for good (the cookie expired, the call is gone): give the place back.
      if (this.source?.readyState === EventSource.CLOSED) {
        this.closeStream();
        this.outputState = "none";
      }
    };
    this.source.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.type === "chunk") this.appendOutput(data.text);
      else if (data.type === "done") {
        this.outputState = "loaded";
        this.closeStream();
        this.update({ status: data.status || "completed", end_state: data.end_state });
      }
    };
  }

  closeStream() {
    if (this.source) this.source.close();
    this.source = null;
    streaming.delete(this);
    const next = waiting.values().next().value;
    if (next) next.follow();
  }

  /** Whether this call is shown: a card of it is in the page, or none was made yet
   * (a call is followed before its first card is drawn). */
  onPage() {
    return this.cards.size === 0 || [...this.cards].some((card) => card.isConnected);
  }

  /** Show the output so far from /output every POLL_MS while no stream is free. */
  wait() {
    if (waiting.has(this)) return;
    waiting.add(this);
    this.outputState = "polling";
    const poll = async () => {
      if (!waiting.has(this)) return;
      if (!this.onPage()) {
        // Its cards left the page (another session is shown): fetched again if shown.
        waiting.delete(this);
        this.outputState = "none";
        return;
      }
      try {
        const data = await fetchTail(this);
        if (!waiting.has(this)) return; // a stream took over meanwhile
        this.output = shownTail(this, data);
        if (data.is_closed) {
          waiting.delete(this);
          this.outputState = "loaded";
        }
        this.render();
      } catch {
        // The next round tries again; the list's poll ends a call that went away.
      }
      if (waiting.has(this) && this.live) setTimeout(poll, POLL_MS);
      else waiting.delete(this);
    };
    poll();
  }

  /** Fetch the output's end once (a finished call). */
  async load() {
    if (this.outputState !== "none") return;
    this.outputState = "loading";
    this.output = shownTail(this, await fetchTail(this));
    this.outputState = "loaded";
    this.render();
  }

  appendOutput(text) {
    this.output += text;
    if (this.output.length > MAX_OUTPUT_CHARS) {
      this.output = shown(this, this.output);
      this.render();
      return;
    }
    for (const card of this.cards) {
      const pre = card.querySelector(".call-output");
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      pre.runs ??= new Runs(pre);
      pre.runs.text(text);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
  }

  render() {
    for (const card of [...this.cards]) {
      if (!card.isConnected && card.dataset.attached === "1") this.cards.delete(card);
      else renderCard(this, card);
    }
  }

  tick() {
    for (const card of this.cards) renderTimers(this, card);
  }
}

/** Output as the page shows it: past MAX_OUTPUT_CHARS only its tail (a call may store
 * 16 MiB; drawing all of it froze the page for seconds), and where the rest is. */
function shown(model, output) {
  if (output.length <= MAX_OUTPUT_CHARS) return output;
  return withNote(model, output.slice(-MAX_OUTPUT_CHARS / 2));
}

function withNote(model, tail) {
  return `[… earlier output not shown here: ${base(model.sessionId, model.id)}/output]\n${tail}`;
}

/** The end of a call's output, as much as the page would show: a call polled every
 * POLL_MS fetched all of its output (up to 16 MiB) each time. */
function fetchTail(model) {
  return api("GET", `${base(model.sessionId, model.id)}/output?tail=${MAX_OUTPUT_CHARS / 2}`);
}

function shownTail(model, data) {
  const tail = data.content.map((part) => part.text).join("");
  return data.omitted_chars > 0 ? withNote(model, tail) : tail;
}

/** The model of a call (created on first sight). */
export function callModel(sessionId, callId, info) {
  const key = `${sessionId}\n${callId}`;
  let model = models.get(key);
  if (!model) {
    model = new CallModel(sessionId, callId);
    models.set(key, model);
  }
  if (info) model.update(info);
  return model;
}

export function liveModels(sessionId) {
  return [...models.values()].filter((m) => m.sessionId === sessionId && m.live);
}

/** Refresh the in-flight list; calls that left it are fetched once more for their end. */
export async function pollCalls(sessionId) {
  const data = await api("GET", `/api/tool-calls/${enc(sessionId)}`);
  const seen = new Set();
  for (const info of data.items) {
    seen.add(info.tool_call_id);
    const model = callModel(sessionId, info.tool_call_id, info);
    model.follow();
  }
  for (const model of liveModels(sessionId)) {
    if (!seen.has(model.id)) await refreshInfo(model);
  }
  return data.items;
}

export async function refreshInfo(model) {
  model.update(await api("GET", base(model.sessionId, model.id)));
}

export function tickAll() {
  for (const model of models.values()) if (model.live) model.tick();
  // A stream whose cards left the page (another session is shown) gives its place up.
  for (const model of [...streaming]) {
    if (!model.onPage()) {
      model.closeStream();
      model.outputState = "none";
    }
  }
}

function button(label, title, cls, handler) {
  return h("button", { type: "button", class: `small ${cls}`, title, onclick: act(handler) }, label);
}

function actions(model) {
  const path = base(model.sessionId, model.id);
  return h(
    "div",
    { class: "call-actions" },
    button("Cancel", "Stop the command (SIGTERM, then SIGKILL)", "cancel", async () => {
      await api("POST", `${path}/cancel`, { force: false });
    }),
    button("Force kill", "SIGKILL the whole process tree now", "force-kill", async () => {
      await api("POST", `${path}/cancel`, { force: true });
    }),
    button("Background", "Let the agent go on; the result arrives later", "offload", async () => {
      await api("POST", `${path}/offload`);
      await refreshInfo(model);
    }),
    button("+60 s", "Give the command another minute", "extend", async () => {
      const data = await api("POST", `${path}/extend-deadline`, { seconds: 60 });
      model.update({ kill_remaining: data.kill_remaining, offload_remaining: data.offload_remaining });
    }),
  );
}

function statusText(info) {
  if (info.status === "completed") return info.end_state || "completed";
  if (info.status === "awaiting_approval") return "awaiting approval";
  return info.status;
}

const KILLED_BY = {
  memory: "memory limit",
  processes: "process limit",
  cpu: "CPU limit",
  deadline: "deadline",
  cancel: "cancel",
};

/** What a finished call used, in one line ("" when it was not measured). */
export function describeResources(resources) {
  if (!resources) return "";
  const parts = [];
  if (resources.peak_memory_bytes != null) {
    parts.push(`peak ${(resources.peak_memory_bytes / 1048576).toFixed(1)} MB`);
  }
  if (resources.cpu_seconds != null) parts.push(`CPU ${resources.cpu_seconds.toFixed(2)} s`);
  if (resources.processes_peak != null) parts.push(`${resources.processes_peak} processes`);
  if (resources.killed_by) parts.push(`stopped by ${KILLED_BY[resources.killed_by] || resources.killed_by}`);
  return parts.join(" · ");
}

function renderTimers(model, card) {
  card.querySelector(".call-elapsed").textContent = formatSeconds(model.elapsed());
  card.querySelector(".kill-remaining").textContent = formatSeconds(model.remaining("kill_remaining"));
  card.querySelector(".offload-remaining").textContent = formatSeconds(
    model.remaining("offload_remaining"),
  );
}

/** Show `text` in `node` with hiding characters marked (redrawn only when it changed). */
function showRevealed(node, text) {
  if (node.shownText === text) return;
  node.shownText = text;
  node.replaceChildren(revealed(text));
}

function renderCard(model, card) {
  const { info } = model;
  card.dataset.status = info.status;
  card.dataset.endState = info.end_state || "";
  showRevealed(card.querySelector(".call-tool"), info.tool_name || "tool");
  card.querySelector(".call-state").textContent = statusText(info);
  const args = info.extra?.arguments;
  if (args !== undefined) {
    showRevealed(card.querySelector(".call-args"), describeArguments(info.tool_name, args));
  }
  const used = card.querySelector(".call-resources");
  used.textContent = describeResources(info.resources);
  used.hidden = !used.textContent;
  used.dataset.killedBy = info.resources?.killed_by || "";
  card.querySelector(".call-deadlines").hidden = !model.live;
  card.querySelector(".call-actions").hidden = !model.live;
  const offloadButton = card.querySelector(".call-actions .offload");
  offloadButton.disabled = info.status !== "running";
  // A call whose caller waits on it for the result (over /mcp) cannot go to the background.
  offloadButton.hidden = info.extra?.offloadable === false;
  const pre = card.querySelector(".call-output");
  if (["loaded", "streaming", "polling"].includes(model.outputState)) {
    if (pre.textContent !== model.output) {
      pre.replaceChildren();
      pre.runs = new Runs(pre);
      pre.runs.text(model.output);
    }
  }
  renderTimers(model, card);
}

/** A new card showing `model`; it stays up to date while it is in the page. */
export function callCard(model, { open = true } = {}) {
  const output = h("pre", { class: "call-output", tabindex: "0", "aria-label": "Output" });
  const details = h(
    "details",
    { class: "call-output-box", open: open || model.live },
    h("summary", {}, "Output"),
    output,
  );
  details.addEventListener(
    "toggle",
    act(async () => {
      if (details.open && !model.live) await model.load();
    }),
  );
  const card = h(
    "article",
    { class: "call", "data-call-id": model.id },
    h(
      "header",
      {},
      h("span", { class: "call-tool" }),
      h("span", { class: "call-state badge" }),
      h("span", { class: "call-elapsed", title: "Elapsed" }),
    ),
    h("pre", { class: "call-args" }),
    h("p", { class: "call-resources", title: "What the call used" }),
    h(
      "dl",
      { class: "call-deadlines" },
      h("div", {}, h("dt", {}, "Kill in"), h("dd", { class: "kill-remaining" })),
      h("div", {}, h("dt", {}, "Background in"), h("dd", { class: "offload-remaining" })),
    ),
    actions(model),
    details,
  );
  card.dataset.attached = "1";
  model.cards.add(card);
  renderCard(model, card);
  if (details.open && !model.live) act(() => model.load())();
  return card;
}
