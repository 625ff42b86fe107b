// Checkpoints: the tenant's checkpoints as a tree (each with its parent), the bash sessions each
// carries, the sessions started from them (forks: their origin_checkpoint), and starting new ones.
import { call, getJson } from "./api.js";
import { clear, dialog, errorText, h, localTime, toast } from "./dom.js";
import { allSessions } from "./sessions.js";

export function checkpointsPage(main) {
  document.title = "Checkpoints · rex gateway";
  const list = h("div", { id: "checkpoint-list" }, h("p", {}, "Loading…"));
  clear(
    main,
    h("h1", {}, "Checkpoints"),
    h("p", { class: "hint" }, "Snapshots of sessions' sandboxes (docker, podman and local providers); a session started from one is a fork."),
    list,
  );
  let disposed = false;

  async function fork(c) {
    const form = await dialog({
      title: `Start sessions from ${c.checkpoint_id}`,
      confirm: "Start",
      body: [
        h("label", { for: "fork-count" }, "How many"),
        h("input", { id: "fork-count", name: "count", type: "number", min: "1", max: "64", value: "1", required: true }),
      ],
    });
    if (!form) return;
    try {
      const answer = await (await call("/api/sessions", { method: "POST", body: { checkpoint: c.checkpoint_id, count: Number(form.get("count")) } })).json();
      const started = answer.sessions ? answer.sessions.length : 1;
      toast(`${started} session${started === 1 ? "" : "s"} started from ${c.checkpoint_id}.`);
      load();
    } catch (e) {
      toast(`Cannot start from ${c.checkpoint_id}: ${errorText(e)}`, "error");
    }
  }

  async function remove(c) {
    const form = await dialog({ title: `Delete checkpoint ${c.checkpoint_id}?`, confirm: "Delete", danger: true, body: [h("p", {}, "Sessions started from it keep running.")] });
    if (!form) return;
    try {
      await call(`/api/checkpoints/${encodeURIComponent(c.checkpoint_id)}`, { method: "DELETE" });
      toast(`Checkpoint ${c.checkpoint_id} deleted.`);
      load();
    } catch (e) {
      toast(`Cannot delete ${c.checkpoint_id}: ${errorText(e)}`, "error");
    }
  }

  async function load() {
    let checkpoints;
    let sessions;
    try {
      [checkpoints, sessions] = await Promise.all([
        getJson("/api/checkpoints").then((a) => a.checkpoints || []),
        allSessions(),
      ]);
    } catch (e) {
      clear(list, h("p", { class: "error", role: "alert" }, errorText(e)));
      return;
    }
    if (disposed) return;
    clear(
      list,
      checkpoints.length
        ? h("table", { class: "data", id: "checkpoints" },
            h("thead", {}, h("tr", {}, ["Checkpoint", "Of session", "Kind", "State", "Parent", "Bash sessions", "Forks", "Created", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, checkpoints.map((c) => h("tr", {},
              h("th", { scope: "row" }, h("code", {}, c.checkpoint_id)),
              h("td", {}, c.session_id ? h("a", { href: `#/sessions/${encodeURIComponent(c.session_id)}` }, c.session_id) : ""),
              h("td", {}, c.kind || ""),
              h("td", {}, c.state || ""),
              h("td", {}, c.parent ? h("code", {}, c.parent) : ""),
              h("td", {}, (c.sessions || []).map((name) => h("span", { class: "chip" }, name))),
              h("td", { class: "forks" }, sessions.filter((s) => s.origin_checkpoint === c.checkpoint_id).map((s) =>
                h("a", { href: `#/sessions/${encodeURIComponent(s.session_id)}`, class: "chip" }, s.session_id))),
              h("td", {}, localTime(c.created_at)),
              h("td", { class: "actions" },
                h("button", { type: "button", class: "small", "aria-label": `Start sessions from ${c.checkpoint_id}`, onclick: () => fork(c) }, "Fork"),
                h("button", { type: "button", class: "small danger", "aria-label": `Delete checkpoint ${c.checkpoint_id}`, onclick: () => remove(c) }, "Delete"))))))
        : h("p", {}, "No checkpoints yet. POST /api/sessions/{id}/checkpoints takes one; the session page lists each session's."),
    );
  }
  load();
  return { dispose: () => { disposed = true; } };
}
