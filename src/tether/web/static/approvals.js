// Pending approvals of the current session, as cards with approve / deny and the time
// left. The approvals API may be absent on an older server: then the panel says so.

import { api, features } from "./api.js";
import { act, enc, formatSeconds, h } from "./dom.js";
import { revealed, revealedString } from "./reveal.js";
import { describeArguments } from "./toolcalls.js";

let available = true;

function epochSeconds(value) {
  if (typeof value === "number") return value;
  const parsed = Date.parse(value);
  return Number.isNaN(parsed) ? null : parsed / 1000;
}

function finding(f) {
  return h(
    "li",
    { class: "finding" },
    h("span", { class: "severity badge", "data-severity": String(f.severity).toLowerCase() }, f.severity),
    " ",
    h("code", {}, f.rule_id),
    " ",
    revealed(f.description),
  );
}

// How long a decision holds: [value, label]; the value is "scope" or "scope:remember".
function scopeChoices(patterns) {
  const choices = [["once", "This call only"]];
  if (patterns?.exact) {
    choices.push(["exact:session", "This exact call, for this session"]);
    choices.push(["exact:always", "This exact call, always"]);
  }
  if (patterns?.similar) {
    // Option text cannot hold marks: hiding characters are written out instead.
    const shown = revealedString(patterns.similar);
    choices.push(["similar:session", `Similar calls (${shown}), for this session`]);
    choices.push(["similar:always", `Similar calls (${shown}), always`]);
  }
  return choices;
}

function scopeSelect(item) {
  return h(
    "select",
    { class: "approval-scope", "aria-label": "How long the decision holds" },
    scopeChoices(item.patterns).map(([value, label]) => h("option", { value }, label)),
  );
}

/** The card of one pending approval; `extra` nodes go under its header (the inbox adds
 * the session). */
export function card(item, onDecided, ...extra) {
  const scope = scopeSelect(item);
  const decide = (verb) =>
    act(async () => {
      for (const b of node.querySelectorAll("button")) b.disabled = true;
      const [chosen, remember] = scope.value.split(":");
      await api("POST", `/api/approval/${verb}`, {
        request_id: item.request_id,
        session_id: item.session_id,
        scope: chosen,
        ...(remember ? { remember } : {}),
      });
      node.remove();
      await onDecided();
    });
  const node = h(
    "article",
    {
      class: "approval",
      "data-request-id": item.request_id,
      "data-expires": String(epochSeconds(item.expires_at) ?? ""),
      "aria-label": `Approval for ${revealedString(item.tool_name)}`,
    },
    h("header", {}, h("strong", {}, revealed(item.tool_name)), h("span", { class: "time-left" })),
    ...extra,
    h("pre", { class: "approval-command" }, revealed(describeArguments(item.tool_name, item.arguments))),
    h("ul", { class: "findings" }, (item.findings || []).map(finding)),
    item.patterns?.similar
      ? h("p", { class: "approval-pattern" }, "Similar calls: ", h("code", {}, revealed(item.patterns.similar)))
      : h("p", { class: "approval-pattern muted" }, "Only this exact call can be remembered."),
    scope,
    h(
      "div",
      { class: "approval-actions" },
      h("button", { type: "button", class: "approve", onclick: decide("approve") }, "Approve"),
      h("button", { type: "button", class: "deny danger", onclick: decide("deny") }, "Deny"),
    ),
  );
  return node;
}

/** Re-read the pending approvals of `sessionId` into `container` (kept cards stay). */
export async function refreshApprovals(sessionId, container, onDecided) {
  if (available && !(await features()).approvals) available = false;
  if (!available) {
    container.replaceChildren(h("p", { class: "muted" }, "Approvals are not available on this server."));
    return 0;
  }
  const data = await api("GET", `/api/approval/list?session_id=${enc(sessionId)}`);
  const items = data.pending_approvals.filter((a) => a.session_id === sessionId);
  syncCards(container, items, (item) => card(item, onDecided), "Nothing waits for you.");
  tickApprovals(container);
  return items.length;
}

/** Show `items` in `container` as cards made by `make`; cards already shown stay, so a
 * scope the person is choosing is not reset by the next poll. */
export function syncCards(container, items, make, emptyText) {
  const ids = new Set(items.map((a) => a.request_id));
  for (const node of container.querySelectorAll(".approval")) {
    if (!ids.has(node.dataset.requestId)) node.remove();
  }
  container.querySelector(".empty")?.remove();
  for (const item of items) {
    if (!container.querySelector(`[data-request-id="${CSS.escape(item.request_id)}"]`)) {
      container.append(make(item));
    }
  }
  if (!items.length) container.replaceChildren(h("p", { class: "muted empty" }, emptyText));
}

export function clearApprovals(container) {
  if (available) container.replaceChildren(h("p", { class: "muted empty" }, "Nothing waits for you."));
}

export function tickApprovals(container) {
  const now = Date.now() / 1000;
  for (const node of container.querySelectorAll(".approval")) {
    const expires = Number(node.dataset.expires);
    const label = node.querySelector(".time-left");
    label.textContent = node.dataset.expires ? `${formatSeconds(expires - now)} left` : "";
  }
}
