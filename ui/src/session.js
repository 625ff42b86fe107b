// One session: its record, transcript, artifacts, events and a terminal into its sandbox.
import { EventFeed, call, getJson, sessionPath } from "./api.js";
import { bytes, clear, errorText, h, localTime, pretty, span, toast } from "./dom.js";
import { ACTIVE, allSessions, destroySession, expiresText, extendSession, idleText, stateBadge } from "./sessions.js";
import { mountTerminal } from "./terminal.js";

const TABS = [
  ["record", "Record"],
  ["transcript", "Transcript"],
  ["artifacts", "Artifacts"],
  ["events", "Events"],
  ["terminal", "Terminal"],
];

const FOLD_AT = 2000; // characters of a body shown folded

export function sessionPage(main, id, tab, events) {
  document.title = `${id} · rex gateway`;
  const here = `#/sessions/${encodeURIComponent(id)}`;
  const state = h("span", { id: "session-state" });
  const actions = h("div", { class: "actions" });
  const panel = h("section", { id: "tab-panel", "aria-labelledby": "tab-title" });
  let record = null;
  let disposed = false;
  let inner = null; // the tab's own {dispose()}
  const nav = h(
    "nav",
    { class: "tabs", "aria-label": "Session" },
    TABS.map(([name, title]) =>
      h("a", { href: name === "record" ? here : `${here}/${name}`, "aria-current": name === tab ? "page" : null }, title),
    ),
  );
  clear(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/sessions" }, "Sessions"), " / ", id),
    h("div", { class: "title-row" }, h("h1", {}, "Session ", h("code", {}, id)), state, actions),
    nav,
    panel,
  );

  function showHead() {
    if (!record) return;
    clear(state, stateBadge(record));
    const active = ACTIVE.has(record.state);
    clear(
      actions,
      record.state === "ready"
        ? h("button", { type: "button", id: "extend", onclick: () => extendSession(record).then((ok) => ok && load()) }, "Extend")
        : null,
      active ? h("button", { type: "button", class: "danger", id: "destroy", onclick: () => destroySession(record).then((ok) => ok && load()) }, "Destroy") : null,
    );
  }

  async function load() {
    try {
      record = await getJson(sessionPath(id));
    } catch (e) {
      clear(panel, h("p", { class: "error", role: "alert" }, `Session ${id}: ${errorText(e)}`));
      return null;
    }
    if (disposed) return null;
    showHead();
    if (tab === "record") showRecord();
    return record;
  }

  const unsubscribe = events.subscribe((e) => {
    if (e.session_id === id) load();
  });

  function showRecord() {
    const rows = [
      ["State", stateBadge(record)],
      ["Reason", record.reason],
      ["Error", record.error],
      ["Provider", record.provider],
      ["Environment", record.environment],
      ["Sandbox", record.sandbox_id],
      ["Working directory", record.working_dir],
      ["Created", localTime(record.created_at)],
      ["Ready", localTime(record.ready_at)],
      ["Idle · last call", idleText(record)],
      ["Idle timeout", record.timeout ? span(record.timeout) : "none"],
      ["Expires", expiresText(record)],
      ["Deadline", localTime(record.deadline)],
      ["Ended", localTime(record.ended_at)],
      ["Calls", String(record.calls ?? "")],
      ["Started from checkpoint", record.origin_checkpoint],
      ["Paused", record.paused],
    ].filter(([, v]) => v !== undefined && v !== null && v !== "");
    const meta = Object.entries(record.metadata || {});
    const checkpoints = h("div", { id: "session-checkpoints" });
    clear(
      panel,
      h("h2", { id: "tab-title" }, "Record"),
      h("dl", { class: "record" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("h3", {}, "Metadata"),
      meta.length
        ? h("table", { class: "data", id: "metadata" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Value"))),
            h("tbody", {}, meta.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, pretty(v))))))
        : h("p", {}, "None."),
      checkpoints,
    );
    showCheckpoints(checkpoints);
  }

  async function showCheckpoints(box) {
    let list;
    let sessions;
    try {
      [list, sessions] = await Promise.all([
        getJson(`/api/checkpoints?session_id=${encodeURIComponent(id)}`).then((a) => a.checkpoints || []),
        allSessions(),
      ]);
    } catch {
      return; // a provider without checkpoints: nothing to show
    }
    const mine = new Set(list.map((c) => c.checkpoint_id));
    const forks = sessions.filter((s) => mine.has(s.origin_checkpoint)).map((s) => [s.origin_checkpoint, s.session_id]);
    clear(
      box,
      h("h3", {}, "Checkpoints and forks"),
      list.length
        ? h("ul", { "aria-label": "Its checkpoints" }, list.map((c) => h("li", {}, h("code", {}, c.checkpoint_id), ` ${c.kind || ""} ${c.state || ""}, ${localTime(c.created_at)}`,
            c.parent ? [" (from ", h("code", {}, c.parent), ")"] : null)))
        : h("p", {}, "No checkpoints of this session."),
      forks.length
        ? h("ul", { "aria-label": "Sessions started from its checkpoints" }, forks.map(([c, s]) =>
            h("li", {}, h("a", { href: `#/sessions/${encodeURIComponent(s)}` }, s), " from ", h("code", {}, c))))
        : null,
    );
  }

  async function showTranscript() {
    clear(panel, h("h2", { id: "tab-title" }, "Transcript"), h("p", {}, "Loading…"));
    let text;
    try {
      text = await (await call(sessionPath(id, "/log"))).text();
    } catch (e) {
      clear(panel, h("h2", { id: "tab-title" }, "Transcript"), h("p", { class: "error", role: "alert" }, errorText(e)));
      return;
    }
    if (disposed) return;
    const lines = text.split("\n").filter((l) => l.trim());
    const items = lines.map((line, i) => {
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        return h("li", { class: "call" }, h("pre", {}, line));
      }
      return callItem(entry, i);
    });
    clear(
      panel,
      h("div", { class: "title-row" }, h("h2", { id: "tab-title" }, "Transcript"),
        h("span", { class: "count" }, `${lines.length} call${lines.length === 1 ? "" : "s"}`),
        h("button", { type: "button", onclick: showTranscript }, "Reload")),
      items.length ? h("ol", { class: "timeline", id: "transcript" }, items) : h("p", {}, "No calls yet."),
    );
  }

  function body(title, value) {
    const text = pretty(value);
    const pre = h("pre", { class: "body" }, text);
    if (text.length <= FOLD_AT && text.split("\n").length <= 30) return h("div", { class: "part" }, h("div", { class: "part-title" }, title), pre);
    return h("details", { class: "part" }, h("summary", {}, `${title} (${bytes(new TextEncoder().encode(text).length)}, folded)`), pre);
  }

  function callItem(entry, i) {
    const { call: name, time, request_id: rid, actor, duration, status, error, ...rest } = entry;
    const failed = error || (typeof status === "number" && status >= 400);
    const parts = [];
    const request = rest.request;
    delete rest.request;
    const answer = rest.response ?? rest.result ?? rest.answer;
    delete rest.response;
    delete rest.result;
    delete rest.answer;
    if (request !== undefined) parts.push(body("Request", request));
    if (Object.keys(rest).length) parts.push(body(request !== undefined ? "Details" : "Request", rest));
    if (answer !== undefined) parts.push(body("Answer", answer));
    if (error) parts.push(body("Error", error));
    return h(
      "li",
      { class: `call${failed ? " failed" : ""}`, dataset: { index: String(i) } },
      h(
        "div",
        { class: "call-head" },
        h("strong", { class: "call-name" }, name || "(no call)"),
        h("span", { class: "when", title: time }, localTime(time)),
        duration !== undefined ? h("span", { class: "duration" }, `${duration < 1 ? `${Math.round(duration * 1000)} ms` : `${duration.toFixed(2)} s`}`) : null,
        status !== undefined ? h("span", { class: "status" }, `status ${status}`) : null,
        h("span", { class: "actor" }, `by ${actor || "the gateway"}`),
        rid ? h("span", { class: "rid" }, rid) : null,
      ),
      parts,
    );
  }

  async function showArtifacts() {
    const paths = h("input", { id: "artifact-paths", name: "paths", placeholder: "results.json logs/", autocomplete: "off" });
    const list = h("div", { id: "artifact-list" }, h("p", {}, "Loading…"));
    const save = h(
      "form",
      { class: "inline", "aria-label": "Save files as artifacts" },
      h("label", { for: "artifact-paths" }, "Save from the sandbox (paths, space-separated)"),
      paths,
      h("button", { type: "submit" }, "Save"),
    );
    save.addEventListener("submit", async (e) => {
      e.preventDefault();
      const wanted = paths.value.split(/\s+/).filter(Boolean);
      if (!wanted.length) return;
      try {
        await call(sessionPath(id, "/artifacts"), { method: "POST", body: { paths: wanted } });
        paths.value = "";
        toast("Saved.");
        refresh();
      } catch (err) {
        toast(`Cannot save: ${errorText(err)}`, "error");
      }
    });
    clear(panel, h("h2", { id: "tab-title" }, "Artifacts"), record && record.state === "ready" ? save : null, list);
    async function refresh() {
      let artifacts;
      try {
        artifacts = (await getJson(sessionPath(id, "/artifacts"))).artifacts;
      } catch (e) {
        clear(list, h("p", { class: "error", role: "alert" }, errorText(e)));
        return;
      }
      clear(
        list,
        artifacts.length
          ? h("table", { class: "data", id: "artifacts" },
              h("thead", {}, h("tr", {}, ["Name", "Size", "SHA-256", "Saved"].map((t) => h("th", { scope: "col" }, t)), h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Download")))),
              h("tbody", {}, artifacts.map((a) => h("tr", {},
                h("th", { scope: "row" }, a.name),
                h("td", { class: "num" }, bytes(a.size)),
                h("td", {}, h("code", { class: "sha" }, a.sha256)),
                h("td", {}, localTime(a.created_at)),
                h("td", {}, h("button", { type: "button", class: "small", "aria-label": `Download ${a.name}`, onclick: () => download(a) }, "Download"))))))
          : h("p", {}, "No artifacts."),
      );
    }
    refresh();
  }

  // The key goes in a header, so a download is a call whose answer is handed to the browser.
  async function download(artifact) {
    try {
      const response = await call(sessionPath(id, `/artifacts/${encodeURIComponent(artifact.name)}`));
      const blob = await response.blob();
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: artifact.name, hidden: true });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      toast(`Cannot download ${artifact.name}: ${errorText(e)}`, "error");
    }
  }

  function showEvents() {
    const tbody = h("tbody");
    const table = h("table", { class: "data", id: "events" },
      h("thead", {}, h("tr", {}, ["#", "Time", "Event", "Actor", "Request", "Data"].map((t) => h("th", { scope: "col" }, t)))),
      tbody);
    clear(panel, h("h2", { id: "tab-title" }, "Events"), h("p", { class: "hint" }, "Everything that happened to the session, from its creation on; new events appear as they happen."), table);
    // Its own stream of this session's events (the gateway keeps only those), from the first on.
    const feed = new EventFeed({
      after: 0,
      session: id,
      onEvent: (e) => {
        tbody.appendChild(h("tr", {},
          h("td", { class: "num" }, String(e.id)),
          h("td", { title: e.time }, localTime(e.time)),
          h("th", { scope: "row" }, e.type),
          h("td", {}, e.actor),
          h("td", {}, h("code", {}, e.request_id || "")),
          h("td", {}, h("code", { class: "data" }, e.data && Object.keys(e.data).length ? JSON.stringify(e.data) : ""))));
      },
    });
    return { dispose: () => feed.close() };
  }

  function showTerminal() {
    clear(panel, h("h2", { id: "tab-title", class: "visually-hidden" }, "Terminal"));
    if (record && record.state !== "ready") {
      panel.appendChild(h("p", {}, `The session is ${record.state}: it has no sandbox to open a terminal in.`));
      return null;
    }
    return mountTerminal(panel, id);
  }

  (async () => {
    await load();
    if (disposed || !record) return;
    if (tab === "transcript") showTranscript();
    else if (tab === "artifacts") showArtifacts();
    else if (tab === "events") inner = showEvents();
    else if (tab === "terminal") inner = showTerminal();
  })();

  // Ages and expiries move on.
  const tick = setInterval(() => {
    if (record && tab === "record") {
      const dds = panel.querySelectorAll("dl.record dt");
      for (const dt of dds) {
        if (dt.textContent === "Idle · last call") dt.nextElementSibling.textContent = idleText(record);
        if (dt.textContent === "Expires") dt.nextElementSibling.textContent = expiresText(record);
      }
    }
  }, 1000);

  return {
    dispose() {
      disposed = true;
      unsubscribe();
      clearInterval(tick);
      if (inner && inner.dispose) inner.dispose();
    },
  };
}

