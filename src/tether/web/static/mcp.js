// Settings: MCP servers (add, enable/disable, remove, tool allow-list) with their live
// status. Values of env and headers are secrets: the server shows them masked, and the
// form never reads them back.

import { api } from "./api.js";
import { act, enc, h, showStatus } from "./dom.js";

const $ = (id) => document.getElementById(id);
const STATUS_KIND = { ready: "ok", failed: "error", connecting: "", disabled: "" };

function toolList(client, list) {
  return act(async () => {
    const tools = await api("GET", `/api/mcp/tools/${enc(client.key)}`);
    const boxes = tools.map((t) =>
      h("input", { type: "checkbox", value: t.name, checked: t.enabled, "aria-label": t.name }),
    );
    const save = act(async () => {
      const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
      const all = chosen.length === boxes.length;
      await api("PUT", `/api/mcp/tools/${enc(client.key)}`, { tools: all ? null : chosen });
      showStatus(`Tools of ${client.name} saved.`);
      await loadMcp();
    });
    list.replaceChildren(
      ...tools.map((t, i) =>
        h("li", { class: "mcp-tool" }, h("label", {}, boxes[i], " ", h("code", {}, t.name)), h("span", { class: "muted" }, ` ${t.description}`)),
      ),
      h("li", {}, h("button", { type: "button", class: "small save-tools", onclick: save }, "Save tool list")),
    );
    if (!tools.length) list.replaceChildren(h("li", { class: "muted" }, "No tools."));
  });
}

function clientRow(client) {
  const path = `/api/mcp/${enc(client.key)}`;
  const tools = h("ul", { class: "mcp-tools", "aria-label": `Tools of ${client.name}` });
  const button = (cls, label, handler) =>
    h("button", { type: "button", class: `small ${cls}`, onclick: act(handler) }, label);
  const where = client.transport === "stdio" ? [client.command, ...client.args].join(" ") : client.url;
  return h(
    "article",
    { class: "mcp-client", "data-client-key": client.key },
    h(
      "header",
      {},
      h("strong", {}, client.name),
      " ",
      h("code", {}, client.key),
      h("span", { class: `badge ${STATUS_KIND[client.status] ?? ""}`, "data-status": client.status }, client.status),
      h("span", { class: "muted" }, ` ${client.transport} · ${client.tool_count} tools`),
    ),
    h("p", { class: "muted mcp-where" }, where),
    client.error ? h("pre", { class: "mcp-error" }, client.error) : null,
    h(
      "div",
      { class: "job-actions" },
      button("toggle", client.enabled ? "Disable" : "Enable", async () => {
        await api("PATCH", `/api/mcp/toggle/${enc(client.key)}`);
        await loadMcp();
      }),
      button("tools", "Tools", toolList(client, tools)),
      button("danger remove", "Remove", async () => {
        await api("DELETE", path);
        showStatus(`MCP server ${client.name} removed.`);
        await loadMcp();
      }),
    ),
    tools,
  );
}

let refresh = null;

export async function loadMcp() {
  const clients = await api("GET", "/api/mcp");
  const list = $("mcp-list");
  list.replaceChildren(...clients.map(clientRow));
  if (!clients.length) list.append(h("p", { class: "muted" }, "No MCP server yet."));
  // A server still connecting: look again shortly, so "ready" or "failed" shows by itself.
  clearTimeout(refresh);
  if (clients.some((c) => c.status === "connecting") && list.isConnected && !$("view-settings").hidden) {
    refresh = setTimeout(act(loadMcp), 1000);
  }
}

function pairs(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const at = line.indexOf(line.includes("=") ? "=" : ":");
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

async function addClient(event) {
  event.preventDefault();
  const form = event.target;
  const v = (name) => form.elements[name].value.trim();
  const transport = form.elements.transport.value;
  const client = { name: v("name") || v("key"), transport };
  if (transport === "stdio") {
    client.command = v("command");
    client.args = v("args") ? v("args").split("\n").map((a) => a.trim()).filter(Boolean) : [];
    client.env = pairs(form.elements.secrets.value);
  } else {
    client.url = v("url");
    client.headers = pairs(form.elements.secrets.value);
  }
  await api("POST", "/api/mcp", { client_key: v("key"), client });
  showStatus(`MCP server ${client.name} added.`);
  form.reset();
  await loadMcp();
}

export function initMcp() {
  $("mcp-form").addEventListener("submit", act(addClient));
}
