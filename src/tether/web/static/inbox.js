// Approvals waiting in every session: an inbox beside the current session's cards, and a
// browser notification for each new one while the tab is hidden (if the person allowed
// notifications with the button).

import { api, features } from "./api.js";
import { card, syncCards, tickApprovals } from "./approvals.js";
import { selectSession } from "./chat.js";
import { act, h } from "./dom.js";
import { revealed } from "./reveal.js";

const seen = new Set();
let primed = false;

function notifyHidden(item) {
  if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
  const what = item.patterns?.exact || item.tool_name;
  const note = new Notification("Tether: approval needed", { body: `${item.session_id}: ${what}`, tag: item.request_id });
  note.onclick = () => {
    window.focus();
    act(() => selectSession(item.session_id))();
  };
}

/** Re-read every pending approval; the inbox shows those of sessions other than `current`. */
export async function refreshInbox(current, onDecided) {
  if (!(await features()).approvals) return;
  const data = await api("GET", "/api/approval/list");
  for (const item of data.pending_approvals) {
    // The first read only learns what already waits: no burst of old notifications.
    if (primed && !seen.has(item.request_id)) notifyHidden(item);
    seen.add(item.request_id);
  }
  primed = true;
  render(data.pending_approvals.filter((a) => a.session_id !== current), onDecided);
}

function sessionLine(sessionId) {
  const open = h("button", { type: "button", class: "open-session", onclick: act(() => selectSession(sessionId)) }, "Open");
  return h("p", { class: "approval-session" }, h("code", {}, revealed(sessionId)), " ", open);
}

function render(items, onDecided) {
  const container = document.getElementById("approvals-inbox");
  const make = (item) => card(item, onDecided, sessionLine(item.session_id));
  syncCards(container, items, make, "Nothing waits in other chats.");
  tickApprovals(container);
}

export function initInbox() {
  const button = document.getElementById("notify-enable");
  if (!("Notification" in window)) {
    button.hidden = true;
    return;
  }
  const label = () => {
    button.textContent = Notification.permission === "granted" ? "Notifications on" : "Notify me";
    button.disabled = Notification.permission !== "default";
  };
  label();
  button.addEventListener(
    "click",
    act(async () => {
      await Notification.requestPermission();
      label();
    }),
  );
}
