// Building the page: every value goes in as text (textContent, attribute values), never as
// HTML, so a transcript or metadata that holds markup or a script shows as the text it is.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "value" || name === "checked" || name === "selected") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// "4s", "3m 12s", "2h 5m", "3d 4h"
export function span(seconds) {
  if (!Number.isFinite(seconds)) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function secondsSince(iso) {
  return iso ? (Date.now() - Date.parse(iso)) / 1000 : NaN;
}

export function localTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function bytes(n) {
  if (!Number.isFinite(n)) return "";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i += 1;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

let toastTimer = null;
// A short message for screen readers and eyes (the status region of the page).
export function toast(message, kind = "info") {
  const el = document.getElementById("toast");
  el.className = `toast ${kind}`;
  el.textContent = message;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    el.textContent = "";
    el.className = "";
  }, 6000);
}

// A modal dialog built of `body` (form fields) with a confirm and a cancel button; resolves
// with the form's FormData on confirm, null on cancel or Escape.
export function dialog({ title, body = [], confirm = "OK", danger = false }) {
  return new Promise((resolve) => {
    const titleId = `dialog-title-${Math.random().toString(36).slice(2)}`;
    const form = h(
      "form",
      { method: "dialog" },
      h("h2", { id: titleId }, title),
      body,
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", class: "secondary", value: "cancel", onclick: () => done(null) }, "Cancel"),
        h("button", { type: "submit", class: danger ? "danger" : "primary", value: "ok" }, confirm),
      ),
    );
    const el = h("dialog", { "aria-labelledby": titleId }, form);
    let settled = false;
    const done = (value) => {
      if (settled) return;
      settled = true;
      el.close();
      el.remove();
      resolve(value);
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!form.reportValidity()) return;
      done(new FormData(form));
    });
    el.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(null);
    });
    document.body.appendChild(el);
    el.showModal();
    const first = form.querySelector("input, select, textarea") || form.querySelector("button[type=submit]");
    if (first) first.focus();
  });
}

export function errorText(e) {
  if (!e) return "";
  return e.code ? `${e.message} (${e.code})` : e.message || String(e);
}
