// The console's entry: signing in, the pages and the one event stream they share.
import { ApiError, EventFeed, apiKey, getJson, setApiKey } from "./api.js";
import { clear, h } from "./dom.js";
import { sessionsPage } from "./sessions.js";
import { sessionPage } from "./session.js";
import { overviewPage } from "./overview.js";
import { checkpointsPage } from "./checkpoints.js";

const main = document.getElementById("main");
let current = null; // the page shown: {dispose()}
let feed = null;
const listeners = new Set();
let feedStatus = "connecting";

// Every page hears the gateway's live events through this one stream.
export const events = {
  subscribe(fn) {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },
  get status() {
    return feedStatus;
  },
};

function startFeed() {
  if (feed) return;
  feed = new EventFeed({
    onEvent: (e) => listeners.forEach((fn) => fn(e)),
    onStatus: (status) => {
      feedStatus = status;
      listeners.forEach((fn) => fn({ type: "feed.status", status }));
      if (status === "unauthorized") signIn("The API key is no longer accepted: sign in again.");
    },
  });
}

function stopFeed() {
  if (feed) feed.close();
  feed = null;
}

// A link /ui/#key=KEY signs in: the fragment never reaches the server or its logs, and leaves
// the address bar at once.
function takeKeyFromAddress() {
  const match = /^#key=([^&]*)(?:&(.*))?$/.exec(location.hash);
  if (!match) return;
  setApiKey(decodeURIComponent(match[1]));
  const next = match[2] ? `#${decodeURIComponent(match[2])}` : "#/sessions";
  history.replaceState(null, "", `${location.pathname}${next}`);
}

let signedIn = false;

// Whether the key (or no key, on a gateway without keys) is accepted.
async function checkKey() {
  try {
    await getJson("/api/sessions?limit=1");
    return true;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return false;
    throw e;
  }
}

function showWho() {
  const who = document.getElementById("who");
  const key = apiKey();
  who.textContent = key ? `key ${key.slice(0, 4)}…` : "no key";
  document.getElementById("sign-out").hidden = !key;
}

function signIn(message = "") {
  dispose();
  stopFeed();
  signedIn = false;
  setApiKey("");
  document.getElementById("who").textContent = "";
  document.getElementById("sign-out").hidden = true;
  document.title = "Sign in · rex gateway";
  const error = h("p", { class: "error", id: "sign-in-error", role: "alert" }, message);
  const input = h("input", {
    id: "api-key",
    name: "key",
    type: "password",
    autocomplete: "off",
    required: true,
    "aria-describedby": "sign-in-help sign-in-error",
  });
  const form = h(
    "form",
    { class: "card sign-in", "aria-labelledby": "sign-in-title" },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h(
      "p",
      { id: "sign-in-help" },
      "This gateway asks for an API key. It is kept in this tab only, and sent in a header with each call.",
    ),
    h("label", { for: "api-key" }, "API key"),
    input,
    error,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    setApiKey(input.value.trim());
    error.textContent = "";
    try {
      if (await checkKey()) {
        signedIn = true;
        if (!location.hash.startsWith("#/")) location.hash = "#/sessions";
        render();
        return;
      }
      setApiKey("");
      error.textContent = "The API key is not valid.";
    } catch (err) {
      setApiKey("");
      error.textContent = err.message;
    }
    input.focus();
  });
  clear(main, form);
  input.focus();
}

function dispose() {
  if (current && current.dispose) current.dispose();
  current = null;
}

const routes = [
  [/^#\/sessions\/([^/]+)(?:\/([a-z]+))?$/, (m) => sessionPage(main, decodeURIComponent(m[1]), m[2] || "record", events)],
  [/^#\/overview$/, () => overviewPage(main)],
  [/^#\/checkpoints$/, () => checkpointsPage(main)],
  [/^#\/sessions$/, () => sessionsPage(main, events)],
];

async function render() {
  takeKeyFromAddress();
  if (!signedIn) {
    let ok;
    try {
      ok = await checkKey();
    } catch (e) {
      dispose();
      clear(main, h("h1", {}, "rex gateway"), h("p", { class: "error", role: "alert" }, e.message));
      return;
    }
    if (!ok) {
      signIn(apiKey() ? "The API key is not valid." : "");
      return;
    }
    signedIn = true;
  }
  showWho();
  startFeed();
  dispose();
  let route = routes.find(([re]) => re.test(location.hash));
  if (!route) {
    history.replaceState(null, "", `${location.pathname}#/sessions`);
    route = routes[routes.length - 1];
  }
  const match = route[0].exec(location.hash);
  for (const link of document.querySelectorAll("nav a[data-nav]")) {
    const here = location.hash.startsWith(`#/${link.dataset.nav}`);
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  current = route[1](match);
  main.focus({ preventScroll: true });
}

document.getElementById("sign-out").addEventListener("click", () => {
  history.replaceState(null, "", location.pathname);
  signIn("Signed out.");
});
window.addEventListener("hashchange", render);
render();
