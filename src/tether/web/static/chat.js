// Chat: the session list, the conversation (history and the streamed turn), the
// composer, and the per-session approval level. Tool calls render through toolcalls.js.

import { api, postStream } from "./api.js";
import { clearApprovals, refreshApprovals } from "./approvals.js";
import { act, enc, h, randomId, Runs, showStatus } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { revealed, revealedString } from "./reveal.js";
import { callCard, callModel, liveModels, pollCalls, refreshInfo } from "./toolcalls.js";

const NOTE_PREFIX = /^\[tether notification\]\s*/;

const state = {
  sessionId: null,
  sessions: [],
  streaming: false,
  taskId: null,
  bgBusy: false,
  updatedAt: null,
  panelIds: new Set(),
  shownHistory: null, // the history the conversation shows as drawn, or null once changed
  busy: 0, // loads and turns under way that will redraw the conversation
};

const $ = (id) => document.getElementById(id);

function currentSession() {
  return state.sessions.find((s) => s.id === state.sessionId) || null;
}

// ---------------------------------------------------------------- sessions

function renderSessions() {
  const list = $("session-list");
  list.replaceChildren(
    ...state.sessions.map((s) => {
      const title = s.name || s.id;
      return h(
        "li",
        { class: s.status === "running" ? "busy" : "" },
        h(
          "button",
          {
            type: "button",
            class: "session-open",
            "aria-current": s.id === state.sessionId ? "true" : null,
            onclick: act(() => selectSession(s.id)),
          },
          revealed(title),
        ),
        h(
          "button",
          {
            type: "button",
            class: "session-delete small",
            "aria-label": `Delete session ${revealedString(title)}`,
            title: "Delete",
            onclick: act(() => deleteSession(s.id, title)),
          },
          "✕",
        ),
      );
    }),
  );
}

function showTitle(title) {
  $("conv-title").replaceChildren(revealed(title));
}

async function loadSessions() {
  const sessions = await api("GET", "/api/chats");
  const changed = JSON.stringify(sessions) !== JSON.stringify(state.sessions);
  state.sessions = sessions;
  // Re-rendering only on change keeps keyboard focus on the list between polls.
  if (changed) renderSessions();
}

async function deleteSession(sessionId, title) {
  await api("DELETE", `/api/chats/${enc(sessionId)}`);
  showStatus(`Deleted “${revealedString(title)}”.`);
  await loadSessions();
  if (sessionId === state.sessionId) newSession();
}

function resetSide() {
  state.panelIds = new Set();
  $("calls-in-flight").replaceChildren(h("p", { class: "muted empty" }, "No tool call is running."));
  clearApprovals($("approvals"));
}

/** The session the conversation pane shows. */
export function currentSessionId() {
  return state.sessionId;
}

export function newSession() {
  state.sessionId = `console:${randomId()}`;
  state.updatedAt = null;
  state.bgBusy = false;
  showTitle("New chat");
  $("approval-level").value = "";
  $("messages").replaceChildren(h("li", { class: "muted empty" }, "Say something to start."));
  state.shownHistory = null;
  resetSide();
  renderSessions();
  $("message-input").focus();
}

export async function selectSession(sessionId) {
  state.sessionId = sessionId;
  const session = currentSession();
  state.updatedAt = session ? session.updated_at : null;
  state.bgBusy = Boolean(session && session.status === "running");
  showTitle(session?.name || sessionId);
  $("approval-level").value = session?.approval_level || "";
  resetSide();
  renderSessions();
  await loadHistory();
  await refreshSide();
}

// ---------------------------------------------------------------- messages

function bubble(kind, label, body) {
  return h("li", { class: `msg ${kind}` }, h("div", { class: "msg-who" }, label), body);
}

function attachCall(slot, model) {
  slot.dataset.callId = model.id;
  slot.replaceChildren(callCard(model, { open: model.live }));
}

function callSlot(call) {
  let args = {};
  try {
    args = JSON.parse(call.function.arguments || "{}");
  } catch {
    args = { raw: call.function.arguments };
  }
  // Tether's own id names the call in every route; the model's id is only for the model.
  const callId = call.x_tether_call_id || call.id;
  const slot = h(
    "div",
    { class: "call-slot", "data-model-call-id": callId, "data-tool": call.function.name },
    h("p", { class: "muted" }, `${call.function.name} requested…`),
  );
  slot.requested = { tool_name: call.function.name, extra: { arguments: args } };
  return slot;
}

/** The model's reasoning, folded: there to read, out of the way of the answer. */
function reasoningBox(text) {
  const box = h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"));
  const body = h("div", { class: "reasoning-text" });
  body.runs = new Runs(body);
  body.runs.text(String(text ?? ""));
  box.append(body);
  return box;
}

function assistantBubble(message) {
  const body = h("div", { class: "msg-body" });
  if (message.x_reasoning) body.append(reasoningBox(message.x_reasoning));
  if (message.content) body.append(renderMarkdown(message.content));
  for (const call of message.tool_calls || []) body.append(callSlot(call));
  return bubble("assistant", "Tether", body);
}

function notificationBubble(message) {
  const text = String(message.content || "").replace(NOTE_PREFIX, "");
  return bubble(
    "notification",
    "Background result",
    h("div", { class: "msg-body" }, h("pre", { class: "note-text" }, text)),
  );
}

function userBubble(message) {
  const text = typeof message.content === "string" ? message.content : "";
  return bubble("user", "You", h("div", { class: "msg-body" }, renderMarkdown(text)));
}

function findSlot(callId, toolName) {
  const list = $("messages");
  const exact = list.querySelector(`.call-slot[data-model-call-id="${CSS.escape(callId)}"]`);
  if (exact) return exact;
  return [...list.querySelectorAll(".call-slot:not([data-call-id])")].find(
    (slot) => slot.dataset.tool === toolName,
  );
}

/** Bind a tool message (it names the call's id in Tether) to its slot. */
function bindToolMessage(message) {
  const callId = message.x_tether_call_id || message.tool_call_id;
  const slot = findSlot(callId, null) || findSlot(message.tool_call_id, null);
  if (!slot || slot.dataset.callId) return;
  const model = callModel(state.sessionId, callId);
  if (model.info.tool_name === undefined) model.update(slot.requested);
  attachCall(slot, model);
  if (model.info.status === "unknown") act(() => refreshInfo(model))();
}

function appendMessage(kind, message) {
  const list = $("messages");
  list.querySelector(".empty")?.remove();
  if (kind === "user") list.append(userBubble(message));
  else if (kind === "assistant") list.append(assistantBubble(message));
  else if (kind === "notification") list.append(notificationBubble(message));
  else if (kind === "tool") bindToolMessage(message);
}

/** Draw the conversation from the server's history. One that has not changed since it
 * was drawn is left as it is: a redraw would drop the reader's selection, scroll and
 * opened call cards for nothing. */
async function loadHistory() {
  const sessionId = state.sessionId;
  markBusy(1);
  try {
    let history = [];
    if (currentSession()) history = await api("GET", `/api/chats/${enc(sessionId)}/messages`);
    if (sessionId !== state.sessionId) return;
    const drawn = JSON.stringify([sessionId, history]);
    if (drawn === state.shownHistory) return;
    $("messages").replaceChildren();
    for (const entry of history) appendMessage(entry.kind, entry.message);
    if (!history.length) {
      $("messages").append(h("li", { class: "muted empty" }, "Say something to start."));
    }
    state.shownHistory = drawn;
    // Calls still in flight (their turn goes on elsewhere) get live cards too.
    for (const model of liveModels(sessionId)) {
      const slot = findSlot(model.id, model.info.tool_name);
      if (slot && !slot.dataset.callId) attachCall(slot, model);
    }
    scrollToEnd();
  } finally {
    markBusy(-1);
  }
}

/** aria-busy on the conversation while a turn streams or a load will redraw it: assistive
 * technology (and the console's tests) wait for the drawing to settle. */
function markBusy(delta) {
  state.busy += delta;
  if (state.busy) $("messages").setAttribute("aria-busy", "true");
  else $("messages").removeAttribute("aria-busy");
}

function scrollToEnd() {
  const list = $("messages");
  list.scrollTop = list.scrollHeight;
}

// ---------------------------------------------------------------- side panel

function showInPanel(model) {
  if (state.panelIds.has(model.id)) return;
  state.panelIds.add(model.id);
  const panel = $("calls-in-flight");
  panel.querySelector(".empty")?.remove();
  panel.prepend(callCard(model));
}

async function refreshSide() {
  const sessionId = state.sessionId;
  if (!currentSession()) return;
  const items = await pollCalls(sessionId);
  if (sessionId !== state.sessionId) return;
  for (const info of items) {
    const model = callModel(sessionId, info.tool_call_id);
    showInPanel(model);
    const slot = findSlot(model.id, model.info.tool_name);
    if (slot && !slot.dataset.callId) attachCall(slot, model);
  }
  await refreshApprovals(sessionId, $("approvals"), refreshSide);
}

// ---------------------------------------------------------------- the turn

/** Streamed text goes in once per frame, appended: setting the whole text on every
 * delta would cost the square of the answer's length. */
function showDelta(turn, text) {
  turn.pending += text;
  if (turn.frame) return;
  turn.frame = requestAnimationFrame(() => {
    turn.frame = 0;
    if (!turn.pending) return;
    const text = turn.live.querySelector(".live-text");
    text.runs ??= new Runs(text);
    text.runs.text(turn.pending);
    turn.pending = "";
    scrollToEnd();
  });
}

function onEvent(event, turn) {
  switch (event.type) {
    case "task":
      state.taskId = event.task_id;
      $("stop").hidden = false;
      act(() => afterSessionCreated())();
      break;
    case "text_delta":
      showDelta(turn, event.text);
      break;
    case "reasoning_delta": {
      const box = turn.live.querySelector(".reasoning");
      box.hidden = false;
      const text = box.querySelector(".reasoning-text");
      text.runs ??= new Runs(text);
      text.runs.text(event.text);
      break;
    }
    case "message":
      if (event.kind === "assistant") {
        turn.live.replaceWith(assistantBubble(event.message));
        turn.pending = "";
        turn.live = liveBubble();
        $("messages").append(turn.live);
      } else if (event.kind !== "user") {
        if (event.kind === "notification") turn.live.before(notificationBubble(event.message));
        else appendMessage(event.kind, event.message);
      }
      scrollToEnd();
      break;
    case "tool_call_started": {
      const model = callModel(state.sessionId, event.tool_call.tool_call_id, event.tool_call);
      model.follow();
      showInPanel(model);
      const slot = findSlot(model.id, model.info.tool_name);
      if (slot && !slot.dataset.callId) attachCall(slot, model);
      break;
    }
    case "tool_call_ended":
      callModel(state.sessionId, event.tool_call.tool_call_id, event.tool_call);
      break;
    case "approval_requested":
    case "approval_resolved":
      act(() => refreshApprovals(state.sessionId, $("approvals"), refreshSide))();
      break;
    case "final":
      if (event.result?.status && event.result.status !== "completed") {
        turn.error = event.result.error || event.result.status;
      }
      break;
    case "server_exiting": // the stream ends before the turn: say why
      turn.error = event.message;
      break;
    default:
      break;
  }
}

function liveBubble() {
  const reasoning = reasoningBox("");
  reasoning.hidden = true;
  const body = h("div", { class: "msg-body" }, reasoning, h("div", { class: "live-text" }));
  return bubble("assistant streaming", "Tether", body);
}

async function afterSessionCreated() {
  const pending = state.pendingLevel;
  await loadSessions();
  const session = currentSession();
  if (session) showTitle(session.name || session.id);
  if (pending && session && session.approval_level !== pending) await saveLevel(pending);
  state.pendingLevel = undefined;
}

async function send(text) {
  if (state.streaming || !text.trim()) return;
  state.streaming = true;
  $("send").disabled = true;
  markBusy(1);
  state.shownHistory = null; // the turn draws into the conversation
  const list = $("messages");
  list.querySelector(".empty")?.remove();
  list.append(userBubble({ content: text }));
  const turn = { pending: "", frame: 0, live: liveBubble(), error: null };
  list.append(turn.live);
  scrollToEnd();
  const level = $("approval-level").value;
  if (!currentSession() && level) state.pendingLevel = level;
  const body = {
    session_id: state.sessionId,
    input: [{ role: "user", type: "message", content: [{ type: "text", text }] }],
    request_context: level ? { approval_level: level } : {},
  };
  try {
    await postStream("/api/console/chat?events=tether", body, (event) => onEvent(event, turn));
  } catch (err) {
    turn.error = err.message || String(err);
  } finally {
    state.streaming = false;
    state.taskId = null;
    $("send").disabled = false;
    $("stop").hidden = true;
  }
  try {
    await loadSessions();
    state.updatedAt = currentSession()?.updated_at ?? null;
    await loadHistory();
  } finally {
    markBusy(-1);
  }
  if (turn.error) {
    list.append(bubble("error", "Error", h("div", { class: "msg-body" }, turn.error)));
    state.shownHistory = null;
    scrollToEnd();
    showStatus(turn.error, "error");
  }
}

async function saveLevel(level) {
  await api("PUT", `/api/chats/${enc(state.sessionId)}/settings`, {
    approval_level: level || null,
  });
  showStatus(`Approval level: ${level || "server default"}.`);
  await loadSessions();
}

// ---------------------------------------------------------------- polling

/** Once a second: notice background work in the current session (a woken turn, an
 * offloaded call's late result) and keep the side panel fresh while anything runs. */
export async function poll() {
  if (document.hidden) return;
  await loadSessions();
  const session = currentSession();
  if (!session) return;
  const active = state.streaming || session.status === "running" || liveModels(state.sessionId).length > 0;
  if (active) await refreshSide();
  if (state.streaming) return;
  if (session.status === "running") {
    state.bgBusy = true;
  } else if (state.bgBusy || session.updated_at !== state.updatedAt) {
    state.bgBusy = false;
    state.updatedAt = session.updated_at;
    await loadHistory();
  }
}

export function initChat() {
  const input = $("message-input");
  $("composer").addEventListener(
    "submit",
    act(async (event) => {
      event.preventDefault();
      const text = input.value;
      input.value = "";
      await send(text);
    }),
  );
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-session").addEventListener("click", () => newSession());
  $("stop").addEventListener(
    "click",
    act(async () => {
      if (state.taskId) await api("POST", `/api/console/chat/task/${enc(state.taskId)}/stop`);
    }),
  );
  $("approval-level").addEventListener(
    "change",
    act(async (event) => {
      if (currentSession()) await saveLevel(event.target.value);
      else state.pendingLevel = event.target.value;
    }),
  );
  return loadSessions().then(() => {
    if (state.sessionId) return undefined; // the person already chose
    if (state.sessions.length) return selectSession(state.sessions[0].id);
    newSession();
    return undefined;
  });
}
