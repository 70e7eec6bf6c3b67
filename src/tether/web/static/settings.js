// Settings: model providers (add, key, connection test, active model), cron jobs, and
// MCP servers (mcp.js).
// The cron API may be absent on a server without the scheduler: the section says so.

import { api, features } from "./api.js";
import { act, enc, h, showStatus } from "./dom.js";
import { revealed, revealedString } from "./reveal.js";
import { initMcp, loadMcp } from "./mcp.js";

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- providers

function providerRow(p, active) {
  const isActive = active && active.provider_id === p.id;
  // QwenPaw's shape: built-in models in `models`, the ones a user added in `extra_models`.
  const models = [...p.models, ...p.extra_models];
  const keyId = `key-${p.id}`;
  const modelId = `model-${p.id}`;
  const keyInput = h("input", { id: keyId, type: "password", autocomplete: "off", placeholder: p.has_api_key ? "•••• (set)" : "not set" });
  const modelSelect = h(
    "select",
    { id: modelId },
    models.map((m) => h("option", { value: m.id, selected: isActive && active.model === m.id }, m.name || m.id)),
  );
  const result = h("span", { class: "test-result", role: "status" });
  return h(
    "article",
    { class: `provider${isActive ? " active" : ""}`, "data-provider-id": p.id },
    h(
      "header",
      {},
      h("strong", {}, p.name),
      " ",
      h("code", {}, p.id),
      isActive ? h("span", { class: "badge ok" }, `active: ${active.model}`) : null,
    ),
    h("p", { class: "muted" }, p.base_url),
    h(
      "form",
      {
        class: "inline",
        onsubmit: act(async (e) => {
          e.preventDefault();
          await api("PUT", `/api/models/${enc(p.id)}/config`, { api_key: keyInput.value });
          showStatus(`Key saved for ${p.name}.`);
          await loadProviders();
        }),
      },
      h("label", { for: keyId }, "API key"),
      keyInput,
      h("button", { type: "submit" }, "Save key"),
    ),
    h(
      "form",
      {
        class: "inline",
        onsubmit: act(async (e) => {
          e.preventDefault();
          await api("PUT", "/api/models/active", { provider_id: p.id, model: modelSelect.value, scope: "global" });
          showStatus(`Now using ${modelSelect.value} from ${p.name}.`);
          await loadProviders();
        }),
      },
      h("label", { for: modelId }, "Model"),
      modelSelect,
      h("button", { type: "submit", class: "use-model" }, "Use this model"),
      h(
        "button",
        {
          type: "button",
          class: "test-connection",
          onclick: act(async () => {
            result.textContent = "testing…";
            result.dataset.kind = "";
            const r = await api("POST", `/api/models/${enc(p.id)}/test`);
            result.textContent = r.ok ? `ok (${r.model}, ${r.latency_ms} ms)` : `error: ${r.error}`;
            result.dataset.kind = r.ok ? "ok" : "error";
          }),
        },
        "Test connection",
      ),
      result,
    ),
  );
}

async function loadProviders() {
  const [providers, active] = await Promise.all([
    api("GET", "/api/models"),
    api("GET", "/api/models/active"),
  ]);
  const list = $("provider-list");
  list.replaceChildren(...providers.map((p) => providerRow(p, active.active_llm)));
  if (!providers.length) list.append(h("p", { class: "muted" }, "No provider yet: add one below."));
}

async function addProvider(event) {
  event.preventDefault();
  const form = event.target;
  const v = (name) => form.elements[name].value.trim();
  const model = v("model");
  await api("POST", "/api/models/custom-providers", {
    id: v("id"),
    name: v("name") || v("id"),
    default_base_url: v("base_url"),
    models: [{ id: model, name: model }],
  });
  if (v("api_key")) await api("PUT", `/api/models/${enc(v("id"))}/config`, { api_key: v("api_key") });
  if (form.elements.make_active.checked) {
    await api("PUT", "/api/models/active", { provider_id: v("id"), model, scope: "global" });
  }
  showStatus(`Provider ${v("id")} added.`);
  form.reset();
  await loadProviders();
}

// ---------------------------------------------------------------- cron jobs

let cronAvailable = true;

function scheduleText(job) {
  const s = job.schedule || {};
  if (s.type === "cron") return `${s.cron} (${s.timezone || "UTC"})`;
  if (s.type === "once") return `once at ${s.run_at}`;
  return JSON.stringify(s);
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

async function showNextRun(job, row) {
  const state = await api("GET", `/api/cron/jobs/${enc(job.id)}/state`);
  const parts = [];
  if (state.next_run_at) parts.push(`next ${when(state.next_run_at)}`);
  if (state.last_status) parts.push(`last ${state.last_status}`);
  row.querySelector(".job-next").textContent = parts.length ? ` · ${parts.join(" · ")}` : "";
}

async function showHistory(path, list) {
  const runs = await api("GET", `${path}/history`);
  if (!list.isConnected) return;
  list.replaceChildren(
    ...runs.map((r) =>
      h(
        "li",
        { class: "job-run", "data-status": r.status },
        `${when(r.started_at)} · ${r.trigger} · ${r.outcome}`,
        r.error ? ` · ${r.error}` : "",
      ),
    ),
  );
  if (!runs.length) list.replaceChildren(h("li", { class: "muted" }, "No run yet."));
  // A run still going: look again shortly, so its end shows without a click.
  if (runs.some((r) => r.status === "running")) {
    setTimeout(act(() => showHistory(path, list)), 1000);
  }
}

function jobRow(job) {
  const path = `/api/cron/jobs/${enc(job.id)}`;
  const history = h("ol", { class: "job-history", "aria-label": `Runs of ${job.name}` });
  const button = (cls, label, handler) =>
    h("button", { type: "button", class: `small ${cls}`, onclick: act(handler) }, label);
  const toggle = (verb, label) =>
    button(verb, label, async () => {
      await api("POST", `${path}/${verb}`);
      showStatus(`${label}: ${job.name}.`);
      await loadCron();
    });
  const enabled = job.enabled !== false;
  return h(
    "article",
    { class: "job", "data-job-id": job.id },
    h(
      "header",
      {},
      h("strong", {}, job.name),
      h("span", { class: `badge ${enabled ? "ok" : ""}` }, enabled ? "active" : "paused"),
    ),
    h("p", { class: "muted" }, scheduleText(job), h("span", { class: "job-next" })),
    h(
      "div",
      { class: "job-actions" },
      enabled ? toggle("pause", "Pause") : toggle("resume", "Resume"),
      button("run", "Run now", async () => {
        await api("POST", `${path}/run`);
        showStatus(`Started: ${job.name}.`);
        await showHistory(path, history);
      }),
      button("history", "History", () => showHistory(path, history)),
    ),
    history,
  );
}

async function loadCron() {
  const list = $("cron-list");
  if (cronAvailable && !(await features()).cron) cronAvailable = false;
  if (!cronAvailable) {
    list.replaceChildren(h("p", { class: "muted" }, "Cron jobs are not available on this server."));
    $("cron-form").hidden = true;
    return;
  }
  const data = await api("GET", "/api/cron/jobs");
  const rows = data.map((job) => [job, jobRow(job)]);
  list.replaceChildren(...rows.map(([, row]) => row));
  if (!data.length) list.append(h("p", { class: "muted" }, "No cron job yet."));
  await Promise.all(rows.map(([job, row]) => showNextRun(job, row)));
}

async function addJob(event) {
  event.preventDefault();
  const form = event.target;
  const v = (name) => form.elements[name].value.trim();
  await api("POST", "/api/cron/jobs", {
    name: v("name"),
    schedule: { type: "cron", cron: v("cron"), timezone: v("timezone") || "UTC" },
    task_type: "agent",
    request: { input: [{ role: "user", type: "message", content: [{ type: "text", text: v("prompt") }] }] },
    approval_level: form.elements.approval_level.value,
    when_unattended: form.elements.when_unattended.value,
  });
  showStatus(`Cron job ${v("name")} created.`);
  form.reset();
  await loadCron();
}

function rememberedRow(rule) {
  const revoke = act(async () => {
    await api("DELETE", `/api/governance/rules/remembered/${enc(rule.id)}`);
    showStatus(`Revoked: ${revealedString(rule.pattern)}`);
    await loadRemembered();
  });
  const where = rule.session_id ? `session ${rule.session_id}` : "always";
  return h(
    "div",
    { class: "job remembered", "data-rule-id": rule.id },
    h("strong", {}, rule.action === "approve" ? "Approve " : "Deny "),
    h("code", {}, revealed(rule.pattern)),
    h("span", { class: "muted" }, ` (${rule.scope}, ${where})`),
    h("div", { class: "job-actions" }, h("button", { type: "button", class: "danger", onclick: revoke }, "Revoke")),
  );
}

async function loadRemembered() {
  const data = await api("GET", "/api/governance/rules");
  const list = $("remembered-list");
  list.replaceChildren(...(data.remembered || []).map(rememberedRow));
  if (!list.children.length) list.append(h("p", { class: "muted" }, "No remembered decision."));
}

export async function showSettings() {
  await loadProviders();
  await loadCron();
  await loadMcp();
  await loadRemembered();
}

export function initSettings() {
  $("provider-form").addEventListener("submit", act(addProvider));
  $("cron-form").addEventListener("submit", act(addJob));
  initMcp();
}
