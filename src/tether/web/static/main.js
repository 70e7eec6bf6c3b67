// The console's entry point: view switching, start-up and the shared timers.

import { api } from "./api.js";
import { tickApprovals } from "./approvals.js";
import { currentSessionId, initChat, poll } from "./chat.js";
import { act, copyRunsAsText } from "./dom.js";
import { initInbox, refreshInbox } from "./inbox.js";
import { initSettings, showSettings } from "./settings.js";
import { tickAll } from "./toolcalls.js";

const views = { chat: "view-chat", settings: "view-settings" };

function show(view) {
  for (const [name, id] of Object.entries(views)) {
    document.getElementById(id).hidden = name !== view;
    document.getElementById(`nav-${name}`).setAttribute("aria-pressed", String(name === view));
  }
  if (view === "settings") act(showSettings)();
}

// The inbox is read even while the tab is hidden: that is when a notification matters.
async function readInbox() {
  await refreshInbox(currentSessionId(), readInbox);
}
const inboxLoop = act(readInbox);

function schedulePolling() {
  const loop = act(async () => {
    await inboxLoop();
    await poll();
  });
  const again = async () => {
    await loop();
    setTimeout(again, 1000);
  };
  setTimeout(again, 1000);
}

// Shell calls without a sandbox must not look like shell calls with one.
async function showSandbox() {
  const health = await api("GET", "/api/healthz");
  const badge = document.getElementById("sandbox-badge");
  if (health.sandbox === "unavailable") {
    badge.textContent = "Sandbox unavailable";
    badge.title = "Shell calls run without bubblewrap. Install it (apt-get install bubblewrap) and restart.";
  } else if (health.sandbox === "off") {
    badge.textContent = "Sandbox off";
    badge.title = "TETHER_SANDBOX=off: shell calls run without bubblewrap.";
  }
  badge.hidden = !["unavailable", "off"].includes(health.sandbox);
}

async function start() {
  for (const name of Object.keys(views)) {
    document.getElementById(`nav-${name}`).addEventListener("click", () => show(name));
  }
  document.addEventListener("copy", copyRunsAsText);
  initSettings();
  initInbox();
  act(showSandbox)();
  await act(initChat)();
  document.body.dataset.ready = "1";
  // Countdowns tick locally between polls.
  setInterval(() => {
    tickAll();
    tickApprovals(document.getElementById("approvals"));
  }, 250);
  schedulePolling();
}

start();
