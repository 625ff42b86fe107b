// A terminal into a session's sandbox: xterm.js over the calls `rex shell` makes through the
// gateway. A new shell is a process with a pseudo-terminal (processes/start with a tag); keys go
// as processes/input, sizes as processes/resize, and after a dropped connection the stream is
// taken up again by its tag (processes/connect). Attaching to a named bash session between an
// agent's commands is sessions/attach, with keys as session_input and sizes as sessions/resize.
import { ApiError, call, readEvents, sessionPath } from "./api.js";
import { clear, errorText, h } from "./dom.js";
import { Terminal } from "./vendor/xterm.mjs";
import { FitAddon } from "./vendor/addon-fit.mjs";

const SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"];
const RECONNECTS = 5;

function base64Of(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function bytesOf(base64) {
  const s = atob(base64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i += 1) out[i] = s.charCodeAt(i);
  return out;
}

export function mountTerminal(panel, sid) {
  const swerex = (endpoint) => sessionPath(sid, `/swerex/${endpoint}`);
  const status = h("span", { id: "terminal-status", role: "status" }, "starting…");
  const attachName = h("input", { id: "attach-name", name: "session", value: "default", size: "12", autocomplete: "off" });
  const attachForm = h(
    "form",
    { class: "inline", "aria-label": "Attach to a bash session" },
    h("label", { for: "attach-name" }, "Bash session"),
    attachName,
    h("button", { type: "submit", id: "attach" }, "Attach"),
  );
  const newShell = h("button", { type: "button", id: "new-shell" }, "New shell");
  const keysHint = h("span", { id: "terminal-keys", class: "hint" }, "Tab goes to the shell; Esc then Tab (or Shift+Tab) leaves the terminal.");
  const screen = h("div", { id: "terminal", class: "terminal", role: "application", "aria-label": "Terminal" });
  panel.append(h("div", { class: "terminal-bar" }, status, newShell, attachForm), keysHint, screen);

  const term = new Terminal({
    cursorBlink: true,
    fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, monospace",
    fontSize: 14,
    scrollback: 5000,
    theme: { background: "#0f1720", foreground: "#e6edf3" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  term.textarea?.setAttribute("aria-describedby", "terminal-keys");
  // Tab belongs to the shell (completion), so the keyboard leaves the terminal as it leaves a
  // code editor: Escape, then Tab or Shift+Tab, which the browser gets and moves the focus with.
  // An Escape is held back until the next key (half a second at most): followed by Tab it is
  // dropped, so the shell is not left waiting for the rest of a Meta sequence; followed by any
  // other key, or by nothing, it goes to the shell first.
  let heldEscape = null;
  const releaseEscape = () => {
    if (heldEscape === null) return;
    clearTimeout(heldEscape);
    heldEscape = null;
    send("\x1b");
  };
  term.attachCustomKeyEventHandler((event) => {
    if (event.type !== "keydown" || ["Shift", "Control", "Alt", "Meta"].includes(event.key)) return true;
    const plain = !event.ctrlKey && !event.altKey && !event.metaKey;
    if (event.key === "Tab" && plain && heldEscape !== null) {
      clearTimeout(heldEscape);
      heldEscape = null;
      return false;
    }
    releaseEscape();
    if (event.key === "Escape" && plain && !event.shiftKey) {
      heldEscape = setTimeout(releaseEscape, 500);
      return false;
    }
    return true;
  });
  fit.fit();
  screen.dataset.cols = String(term.cols);
  screen.dataset.rows = String(term.rows);

  let mode = null; // {kind: "shell", tag} or {kind: "attach", session}
  let stream = null; // the AbortController of the stream now read
  let ended = false;
  let disposed = false;
  let sending = Promise.resolve();
  let typed = "";

  function say(text) {
    status.textContent = text;
  }

  // Keys go in order, one call at a time; what is typed meanwhile goes together in the next.
  function send(data) {
    typed += data;
    sending = sending.then(async () => {
      if (!typed || !mode || ended) return;
      const chunk = typed;
      typed = "";
      try {
        if (mode.kind === "shell") {
          const bytes = new TextEncoder().encode(chunk);
          await call(swerex("processes/input"), { method: "POST", body: { tag: mode.tag, data: base64Of(bytes) } });
        } else {
          await call(swerex("session_input"), { method: "POST", body: { session: mode.session, input: chunk } });
        }
      } catch (e) {
        say(`a key did not reach the terminal: ${errorText(e)}`);
      }
    });
  }

  async function sendSize(cols, rows) {
    if (!mode || ended) return;
    const size = { cols, rows };
    try {
      if (mode.kind === "shell") await call(swerex("processes/resize"), { method: "POST", body: { tag: mode.tag, size } });
      else await call(swerex("sessions/resize"), { method: "POST", body: { session: mode.session, size } });
    } catch {
      // a terminal that cannot be resized keeps its size
    }
  }

  term.onData(send);
  term.onBinary((data) => send(data));
  term.onResize(({ cols, rows }) => {
    screen.dataset.cols = String(cols);
    screen.dataset.rows = String(rows);
    sendSize(cols, rows);
  });
  const observer = new ResizeObserver(() => {
    if (!disposed) fit.fit();
  });
  observer.observe(screen);

  // Reads a process stream to its end; true when the process ended (an `end` or `error` event),
  // false when the connection dropped first.
  async function follow(response, signal) {
    let over = false;
    const reading = readEvents(response, (e) => {
      let data = {};
      try {
        data = e.data ? JSON.parse(e.data) : {};
      } catch {
        return;
      }
      if (e.event === "stdout" || e.event === "stderr") term.write(bytesOf(data.data || ""));
      else if (e.event === "start") say(mode.kind === "shell" ? `connected (pid ${data.pid})` : `attached to ${mode.session}`);
      else if (e.event === "end") {
        over = true;
        say(`ended: ${data.status || (data.exit_code !== undefined ? `exit status ${data.exit_code}` : "")}`);
      } else if (e.event === "error") {
        over = true;
        const err = data.swerexception || data;
        say(`error: ${err.message || e.data}`);
      }
    });
    try {
      await reading;
    } catch (e) {
      if (signal.aborted) throw e;
      return false; // the connection broke
    }
    return over;
  }

  async function open(kind, how) {
    if (stream) stream.abort();
    const controller = new AbortController();
    stream = controller;
    ended = false;
    typed = "";
    term.reset();
    mode = kind === "shell" ? { kind, tag: `rex-console-${crypto.getRandomValues(new Uint32Array(2)).join("")}` } : { kind, session: how };
    screen.dataset.mode = kind;
    const size = { cols: term.cols, rows: term.rows };
    let first;
    try {
      first =
        kind === "shell"
          ? call(swerex("processes/start"), {
              method: "POST",
              body: { argv: SHELL, tag: mode.tag, keepalive: 15, pty: size, env: { TERM: "xterm-256color", COLORTERM: "truecolor" } },
              signal: controller.signal,
            })
          : call(swerex("sessions/attach"), { method: "POST", body: { session: how, size, keepalive: 15 }, signal: controller.signal });
      say(kind === "shell" ? "starting a shell…" : `attaching to ${how}…`);
      let over = await follow(await first, controller.signal);
      // A dropped connection: take the shell's stream up again by its tag.
      let attempt = 0;
      while (!over && !controller.signal.aborted && kind === "shell" && attempt < RECONNECTS) {
        attempt += 1;
        say(`connection lost; reconnecting (${attempt}/${RECONNECTS})…`);
        await new Promise((r) => setTimeout(r, 300 * attempt));
        try {
          const again = await call(swerex("processes/connect"), { method: "POST", body: { tag: mode.tag, keepalive: 15 }, signal: controller.signal });
          // Redraw: a size that differs, then the size it has, makes the shell draw its prompt again.
          setTimeout(async () => {
            await sendSize(term.cols, Math.max(1, term.rows - 1));
            await sendSize(term.cols, term.rows);
          }, 100);
          over = await follow(again, controller.signal);
          attempt = 0;
        } catch (e) {
          if (controller.signal.aborted) return;
          if (e instanceof ApiError && e.status !== 0) {
            over = true;
            say(`ended: ${errorText(e)}`);
          }
        }
      }
      if (controller.signal.aborted) return; // another terminal took over
      if (!over) say(kind === "shell" ? "connection lost" : `detached from ${how}`);
      ended = true;
    } catch (e) {
      if (controller.signal.aborted) return;
      ended = true;
      say(`${kind === "shell" ? "cannot start a shell" : `cannot attach to ${how}`}: ${errorText(e)}`);
    }
  }

  newShell.addEventListener("click", () => {
    hangUp();
    open("shell");
    term.focus();
  });
  attachForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const name = attachName.value.trim();
    if (!name) return;
    hangUp();
    open("attach", name);
    term.focus();
  });

  // Leaving a shell the page started ends it (as closing a terminal window does); leaving an
  // attached session gives it back to its commands.
  function hangUp() {
    if (stream) stream.abort();
    stream = null;
    if (mode && mode.kind === "shell" && !ended) {
      call(swerex("processes/signal"), { method: "POST", body: { tag: mode.tag, signal: "SIGHUP" }, keepalive: true }).catch(() => {});
    }
    ended = true;
  }
  const onLeave = () => hangUp();
  window.addEventListener("pagehide", onLeave);

  open("shell");
  term.focus();

  return {
    dispose() {
      disposed = true;
      hangUp();
      window.removeEventListener("pagehide", onLeave);
      observer.disconnect();
      term.dispose();
    },
  };
}
