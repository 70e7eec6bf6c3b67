// Talking to the Tether API from the page. The login cookie rides along on every
// same-origin request; JSON writes carry Content-Type: application/json, which the
// perimeter requires.

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

function detailOf(data, status) {
  if (data && typeof data === "object" && "detail" in data) {
    const d = data.detail;
    if (typeof d === "string") return d;
    if (Array.isArray(d)) return d.map((e) => e.msg || JSON.stringify(e)).join("; ");
    return JSON.stringify(d);
  }
  return typeof data === "string" && data ? data : `HTTP ${status}`;
}

function options(method, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return init;
}

/** Call the API; resolves to the parsed JSON body, rejects with ApiError on 4xx/5xx. */
export async function api(method, path, body) {
  const resp = await fetch(path, options(method, body));
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!resp.ok) throw new ApiError(resp.status, detailOf(data, resp.status));
  return data;
}

/** Parse the SSE frames in `buffer`; returns [events, rest-of-buffer]. */
export function parseFrames(buffer) {
  const events = [];
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const frame = buffer.slice(0, cut);
    buffer = buffer.slice(cut + 2);
    const data = frame
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data) events.push(JSON.parse(data));
  }
  return [events, buffer];
}

/** POST a JSON body and call onEvent for each SSE event of the streamed answer.
 * EventSource cannot POST, so this reads the response body as a stream. */
export async function postStream(path, body, onEvent, signal) {
  const init = { ...options("POST", body), signal };
  const resp = await fetch(path, init);
  if (!resp.ok) {
    const text = await resp.text();
    let data = text;
    try {
      data = JSON.parse(text);
    } catch {
      /* plain text error */
    }
    throw new ApiError(resp.status, detailOf(data, resp.status));
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    const [events, rest] = parseFrames(buffer);
    buffer = rest;
    for (const event of events) onEvent(event);
  }
}

let featuresPromise = null;

/** Which optional APIs (approvals, cron) the server has; asked once. */
export function features() {
  featuresPromise ??= api("GET", "/api/console/features");
  return featuresPromise;
}
