// Sessions: a live table of the tenant's sessions, kept current from the event stream.
import { ApiError, call, getJson, sessionPath } from "./api.js";
import { clear, dialog, errorText, h, localTime, secondsSince, span, toast } from "./dom.js";

// The states of a session that holds a sandbox (and its tenant's quota).
export const ACTIVE = new Set(["creating", "ready", "stopping"]);
const STATES = ["creating", "ready", "stopping", "destroyed", "failed", "lost"];

// Every session of the tenant (all pages of the list).
export async function allSessions() {
  const out = [];
  let cursor = "";
  for (;;) {
    const page = await getJson(`/api/sessions?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    out.push(...page.sessions);
    if (!page.next_cursor) return out;
    cursor = page.next_cursor;
  }
}

export async function extendSession(record) {
  const form = await dialog({
    title: `Extend session ${record.session_id}`,
    confirm: "Extend",
    body: [
      h("label", { for: "extend-seconds" }, "Idle timeout from now (seconds)"),
      h("input", { id: "extend-seconds", name: "seconds", type: "number", min: "1", step: "1", required: true, value: String(record.timeout || 600) }),
      h("p", { class: "hint" }, "The session ends after this long without a call; never after its deadline, ", localTime(record.deadline), "."),
    ],
  });
  if (!form) return false;
  try {
    await call(sessionPath(record.session_id, "/keepalive"), { method: "POST", body: { timeout: Number(form.get("seconds")) } });
    toast(`Session ${record.session_id} extended.`);
    return true;
  } catch (e) {
    toast(`Cannot extend ${record.session_id}: ${errorText(e)}`, "error");
    return false;
  }
}

export async function destroySession(record) {
  const form = await dialog({
    title: `Destroy session ${record.session_id}?`,
    confirm: "Destroy",
    danger: true,
    body: [h("p", {}, "Its sandbox stops and everything in it is gone; its transcript and artifacts are kept.")],
  });
  if (!form) return false;
  try {
    await call(sessionPath(record.session_id), { method: "DELETE" });
    toast(`Session ${record.session_id} destroyed.`);
    return true;
  } catch (e) {
    toast(`Cannot destroy ${record.session_id}: ${errorText(e)}`, "error");
    return false;
  }
}

function metadataFrom(text) {
  const metadata = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t) continue;
    const eq = t.indexOf("=");
    if (eq <= 0) throw new Error(`metadata: "${t}" is not key=value`);
    metadata[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
  }
  return metadata;
}

async function createSession(environments) {
  const select = h(
    "select",
    { id: "create-environment", name: "environment", required: true },
    environments.map((e) => h("option", { value: e.name }, `${e.name} (${e.provider})`)),
  );
  const form = await dialog({
    title: "New session",
    confirm: "Create",
    body: [
      h("label", { for: "create-environment" }, "Environment"),
      select,
      h("label", { for: "create-timeout" }, "Idle timeout (seconds, empty: the environment's)"),
      h("input", { id: "create-timeout", name: "timeout", type: "number", min: "1", step: "1" }),
      h("label", { for: "create-metadata" }, "Metadata (key=value, one per line)"),
      h("textarea", { id: "create-metadata", name: "metadata", rows: "3" }),
    ],
  });
  if (!form) return;
  try {
    const body = { environment: form.get("environment"), metadata: metadataFrom(form.get("metadata") || "") };
    if (form.get("timeout")) body.timeout = Number(form.get("timeout"));
    toast("Creating a session…");
    const record = await (await call("/api/sessions", { method: "POST", body })).json();
    toast(`Session ${record.session_id} is ${record.state}.`);
  } catch (e) {
    toast(`Cannot create a session: ${errorText(e)}`, "error");
  }
}

function labelMatches(record, label) {
  if (!label) return true;
  const eq = label.indexOf("=");
  const key = eq < 0 ? label : label.slice(0, eq);
  if (!record.metadata || !(key in record.metadata)) return false;
  return eq < 0 || record.metadata[key] === label.slice(eq + 1);
}

export function stateBadge(record) {
  return h("span", { class: `state state-${record.state}` }, record.paused ? `${record.state} (paused)` : record.state);
}

export function idleText(record) {
  if (!ACTIVE.has(record.state)) return "";
  const idle = span(secondsSince(record.last_active_at));
  return record.last_call ? `${idle} · ${record.last_call}` : idle;
}

export function expiresText(record) {
  if (!ACTIVE.has(record.state) || !record.expires_at) return record.ended_at ? `ended ${localTime(record.ended_at)}` : "";
  return `in ${span(-secondsSince(record.expires_at))}`;
}

export function sessionsPage(main, events) {
  document.title = "Sessions · rex gateway";
  const records = new Map();
  const rows = new Map();
  const pending = new Set();
  let refreshTimer = null;
  let disposed = false;

  const stateFilter = h(
    "select",
    { id: "filter-state", name: "state" },
    h("option", { value: "active" }, "Active"),
    h("option", { value: "" }, "All"),
    STATES.map((s) => h("option", { value: s }, s)),
  );
  const providerFilter = h("select", { id: "filter-provider", name: "provider" }, h("option", { value: "" }, "All"));
  const labelFilter = h("input", { id: "filter-label", name: "label", type: "search", placeholder: "key=value", autocomplete: "off" });
  const live = h("span", { class: "live", id: "live-status", role: "status" }, "connecting…");
  const tbody = h("tbody");
  const count = h("p", { class: "count", id: "session-count", "aria-live": "polite" });
  const table = h(
    "table",
    { id: "sessions", class: "data" },
    h("caption", { class: "visually-hidden" }, "Sessions, newest first; updated live"),
    h(
      "thead",
      {},
      h("tr", {}, ["Session", "State", "Provider", "Environment", "Age", "Idle · last call", "Expires", "Calls", "Metadata", "Actions"].map((t) => h("th", { scope: "col" }, t))),
    ),
    tbody,
  );
  let environments = [];
  // The dialog lists the environments: a click before they have come waits for them.
  const listEnvironments = () => {
    const listing = getJson("/api/environments").then((answer) => answer.environments);
    listing.catch(() => {}); // its failure is told where it is awaited
    return listing;
  };
  let environmentsReady = listEnvironments();
  const openCreate = async () => {
    try {
      await createSession(await environmentsReady);
    } catch (e) {
      environmentsReady = listEnvironments();
      toast(`Cannot list the environments: ${errorText(e)}`, "error");
    }
  };
  const newButton = h("button", { type: "button", class: "primary", id: "new-session", onclick: openCreate }, "New session");

  clear(
    main,
    h("div", { class: "title-row" }, h("h1", {}, "Sessions"), live, newButton),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter sessions", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "filter-state" }, "State"),
      stateFilter,
      h("label", { for: "filter-provider" }, "Provider"),
      providerFilter,
      h("label", { for: "filter-label" }, "Label"),
      labelFilter,
    ),
    count,
    h("div", { class: "table-wrap" }, table),
  );

  function shown(record) {
    const s = stateFilter.value;
    if (s === "active" && !ACTIVE.has(record.state)) return false;
    if (s && s !== "active" && record.state !== s) return false;
    if (providerFilter.value && record.provider !== providerFilter.value) return false;
    return labelMatches(record, labelFilter.value.trim());
  }

  function rowOf(record) {
    const id = record.session_id;
    const link = h("a", { href: `#/sessions/${encodeURIComponent(id)}` }, id);
    const meta = Object.entries(record.metadata || {}).map(([k, v]) =>
      h("span", { class: "chip" }, `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`),
    );
    const active = ACTIVE.has(record.state);
    return h(
      "tr",
      { dataset: { session: id, state: record.state } },
      h("th", { scope: "row" }, link),
      h("td", {}, stateBadge(record)),
      h("td", {}, record.provider),
      h("td", {}, record.environment),
      h("td", { class: "age", title: localTime(record.created_at) }, span(secondsSince(record.created_at))),
      h("td", { class: "idle" }, idleText(record)),
      h("td", { class: "expires", title: record.deadline ? `deadline ${localTime(record.deadline)}` : "" }, expiresText(record)),
      h("td", { class: "num" }, String(record.calls ?? "")),
      h("td", { class: "meta" }, meta),
      h(
        "td",
        { class: "actions" },
        active && record.state === "ready"
          ? h("button", { type: "button", class: "small", "aria-label": `Extend session ${id}`, onclick: () => extendSession(record).then((ok) => ok && refresh(id)) }, "Extend")
          : null,
        active
          ? h("button", { type: "button", class: "small danger", "aria-label": `Destroy session ${id}`, onclick: () => destroySession(record).then((ok) => ok && refresh(id)) }, "Destroy")
          : null,
      ),
    );
  }

  function renderAll() {
    const list = [...records.values()].filter(shown).sort((a, b) => (b.created_at || "").localeCompare(a.created_at || ""));
    const next = [];
    rows.clear();
    for (const record of list) {
      const row = rowOf(record);
      rows.set(record.session_id, row);
      next.push(row);
    }
    if (next.length === 0) next.push(h("tr", { class: "empty" }, h("td", { colspan: "10" }, records.size ? "No session matches the filters." : "No sessions yet.")));
    tbody.replaceChildren(...next);
    count.textContent = `${list.length} of ${records.size} session${records.size === 1 ? "" : "s"}`;
    const providers = new Set([...records.values()].map((r) => r.provider));
    for (const e of environments) providers.add(e.provider);
    const chosen = providerFilter.value;
    providerFilter.replaceChildren(h("option", { value: "" }, "All"), [...providers].sort().map((p) => h("option", { value: p }, p)));
    providerFilter.value = providers.has(chosen) ? chosen : "";
  }

  async function refresh(id) {
    try {
      records.set(id, await getJson(sessionPath(id)));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) records.delete(id);
      else return;
    }
    if (!disposed) renderAll();
  }

  // Events come in bursts (a create is created, then ready): one fetch per session per burst.
  function later(id) {
    pending.add(id);
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      const ids = [...pending];
      pending.clear();
      ids.forEach(refresh);
    }, 50);
  }

  function showStatus(status) {
    live.textContent = status === "live" ? "● live" : status === "reconnecting" ? "reconnecting…" : status;
    live.className = `live ${status}`;
  }

  const unsubscribe = events.subscribe((e) => {
    if (e.type === "feed.status") showStatus(e.status);
    else if (e.session_id) later(e.session_id);
  });
  showStatus(events.status);

  // Ages, idle times and expiries move on every second.
  const tick = setInterval(() => {
    for (const [id, row] of rows) {
      const record = records.get(id);
      if (!record) continue;
      row.querySelector(".age").textContent = span(secondsSince(record.created_at));
      row.querySelector(".idle").textContent = idleText(record);
      row.querySelector(".expires").textContent = expiresText(record);
    }
  }, 1000);

  for (const f of [stateFilter, providerFilter]) f.addEventListener("change", renderAll);
  labelFilter.addEventListener("input", renderAll);

  (async () => {
    try {
      const [list, envs] = await Promise.all([allSessions(), environmentsReady]);
      environments = envs;
      for (const r of list) if (!records.has(r.session_id)) records.set(r.session_id, r);
      if (!disposed) renderAll();
    } catch (e) {
      toast(`Cannot list the sessions: ${errorText(e)}`, "error");
    }
  })();

  return {
    dispose() {
      disposed = true;
      unsubscribe();
      clearInterval(tick);
      clearTimeout(refreshTimer);
    },
  };
}
