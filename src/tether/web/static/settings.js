// Settings: model providers (add, key, connection test, active model) and cron jobs.
// The cron API may be absent on a server without the scheduler: the section says so.

import { api, features } from "./api.js";
import { act, enc, h, showStatus } from "./dom.js";

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- providers

function providerRow(p, active) {
  const isActive = active && active.provider_id === p.id;
  const models = p.models.length ? p.models : p.chat_model ? [{ id: p.chat_model }] : [];
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
          await api("PUT", "/api/models/active", { provider_id: p.id, model: modelSelect.value });
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
  const data = await api("GET", "/api/models");
  const list = $("provider-list");
  list.replaceChildren(...data.providers.map((p) => providerRow(p, data.active)));
  if (!data.providers.length) list.append(h("p", { class: "muted" }, "No provider yet: add one below."));
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
    chat_model: model,
    models: [{ id: model, name: model }],
  });
  if (v("api_key")) await api("PUT", `/api/models/${enc(v("id"))}/config`, { api_key: v("api_key") });
  if (form.elements.make_active.checked) {
    await api("PUT", "/api/models/active", { provider_id: v("id"), model });
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

function jobRow(job) {
  const path = `/api/cron/jobs/${enc(job.id)}`;
  const history = h("ol", { class: "job-history" });
  const run = (verb, label) =>
    h(
      "button",
      {
        type: "button",
        class: `small ${verb}`,
        onclick: act(async () => {
          await api("POST", `${path}/${verb}`);
          showStatus(`${label}: ${job.name}.`);
          await loadCron();
        }),
      },
      label,
    );
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
    h("p", { class: "muted" }, scheduleText(job), job.next_run_at ? ` · next ${job.next_run_at}` : ""),
    h(
      "div",
      { class: "job-actions" },
      enabled ? run("pause", "Pause") : run("resume", "Resume"),
      run("run", "Run now"),
      h(
        "button",
        {
          type: "button",
          class: "small",
          onclick: act(async () => {
            const data = await api("GET", `${path}/history`);
            const runs = Array.isArray(data) ? data : data.runs || data.items || data.history || [];
            history.replaceChildren(
              ...runs.map((r) => h("li", {}, `${r.started_at ?? r.fired_at ?? ""} ${r.status ?? ""} ${r.error ?? ""}`)),
            );
            if (!runs.length) history.replaceChildren(h("li", { class: "muted" }, "No run yet."));
          }),
        },
        "History",
      ),
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
  const jobs = Array.isArray(data) ? data : data.jobs || data.items || [];
  list.replaceChildren(...jobs.map(jobRow));
  if (!jobs.length) list.append(h("p", { class: "muted" }, "No cron job yet."));
}

async function addJob(event) {
  event.preventDefault();
  const form = event.target;
  const v = (name) => form.elements[name].value.trim();
  await api("POST", "/api/cron/jobs", {
    name: v("name"),
    schedule: { type: "cron", cron: v("cron"), timezone: v("timezone") || "UTC" },
    task: { type: "agent", prompt: v("prompt") },
    approval_level: form.elements.approval_level.value,
  });
  showStatus(`Cron job ${v("name")} created.`);
  form.reset();
  await loadCron();
}

export async function showSettings() {
  await loadProviders();
  await loadCron();
}

export function initSettings() {
  $("provider-form").addEventListener("submit", act(addProvider));
  $("cron-form").addEventListener("submit", act(addJob));
}
