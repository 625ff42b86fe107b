// The gateway's public API, as the page calls it: the API key (kept in this tab's session
// storage only) goes in the X-API-Key header of every call, never in a cookie, so no other site
// can make a call with it.

const KEY = "rex.console.key";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headersWith(extra) {
  const headers = { ...extra };
  const key = apiKey();
  if (key) headers["X-API-Key"] = key;
  return headers;
}

// The error an answer carries, in any of the shapes the gateway's APIs answer with: its own
// {"error": {code, message}}, SWE-ReX's {"swerexception": {...}} and FastAPI's {"detail"}.
async function errorOf(response) {
  let code = `http.${response.status}`;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body.error && typeof body.error === "object") {
      code = body.error.code || code;
      message = body.error.message || message;
    } else if (body.swerexception) {
      const e = body.swerexception;
      code = (e.extra_info && e.extra_info.rex_error) || e.class_path || code;
      message = e.message || message;
    } else if (body.detail !== undefined) {
      message = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } else if (typeof body.message === "string") {
      message = body.message;
    }
  } catch {
    // not JSON: the status says it
  }
  return new ApiError(response.status, code, message);
}

// A call; its answer when it succeeds, else an ApiError. `body` goes as JSON.
export async function call(path, { method = "GET", body, headers, signal, keepalive } = {}) {
  const init = { method, headers: headersWith(headers), signal, cache: "no-store", keepalive };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network", `the gateway cannot be reached (${e.message})`);
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function getJson(path, options) {
  return (await call(path, options)).json();
}

export function sessionPath(id, rest = "") {
  return `/api/sessions/${encodeURIComponent(id)}${rest}`;
}

// Reads a Server-Sent Events body to its end, calling onEvent({id, event, data}) for each
// event. Comments (":" lines, the server's pings) are skipped.
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    buffered = buffered.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const event = { id: null, event: "message", data: "" };
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event.event = value;
        else if (field === "id") event.id = value;
      }
      if (data.length === 0 && event.id === null) continue;
      event.data = data.join("\n");
      onEvent(event);
    }
  }
}

// The gateway's event stream (GET /api/events), kept open: after a dropped connection it
// connects again with Last-Event-ID, so no event is missed or seen twice. `after`: start from
// the first event after that id (0: the whole history), else live events only; `session`: that
// session's events only.
export class EventFeed {
  constructor({ after = null, session = "", onEvent, onStatus = () => {} }) {
    this.lastId = after;
    this.path = session ? `/api/events?session_id=${encodeURIComponent(session)}` : "/api/events";
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.controller = new AbortController();
    this.run();
  }

  async run() {
    let wait = 500;
    while (!this.controller.signal.aborted) {
      try {
        const headers = this.lastId !== null ? { "Last-Event-ID": String(this.lastId) } : {};
        const response = await call(this.path, { headers, signal: this.controller.signal });
        this.onStatus("live");
        wait = 500;
        await readEvents(response, (e) => {
          if (e.id !== null) this.lastId = Number(e.id);
          let parsed;
          try {
            parsed = JSON.parse(e.data);
          } catch {
            return;
          }
          this.onEvent(parsed);
        });
      } catch (e) {
        if (this.controller.signal.aborted) return;
        if (e instanceof ApiError && e.status === 401) {
          this.onStatus("unauthorized");
          return;
        }
      }
      if (this.controller.signal.aborted) return;
      this.onStatus("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 5000);
    }
  }

  close() {
    this.controller.abort();
  }
}
