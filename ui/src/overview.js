// Overview: the gateway's own metrics (GET /metrics, across all tenants), the tenant's sessions
// over time (replayed from its event history), the environments and the registry.
import { call, getJson, readEvents } from "./api.js";
import { ACTIVE, allSessions } from "./sessions.js";
import { clear, errorText, h, span } from "./dom.js";

const SAMPLE_MS = 5000;

// Prometheus' text format: [{name, labels: {...}, value}]
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) for (const l of m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

async function sample() {
  const response = await fetch("/metrics", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /metrics: ${response.status}`);
  const metrics = parseMetrics(await response.text());
  const s = { t: Date.now(), sessions: {}, buckets: [], creates: 0, createSum: 0, errors: {}, requests: 0 };
  for (const m of metrics) {
    if (m.name === "rex_gateway_sessions") s.sessions[`${m.labels.state}/${m.labels.provider}`] = m.value;
    else if (m.name === "rex_gateway_create_seconds_bucket") s.buckets.push([m.labels.le === "+Inf" ? Infinity : Number(m.labels.le), m.value]);
    else if (m.name === "rex_gateway_create_seconds_count") s.creates = m.value;
    else if (m.name === "rex_gateway_create_seconds_sum") s.createSum = m.value;
    else if (m.name === "rex_gateway_errors_total") s.errors[m.labels.code] = m.value;
    else if (m.name === "rex_gateway_requests_total") s.requests += m.value;
  }
  return s;
}

// Reads the metrics now and every SAMPLE_MS until stopped.
function sampleEvery(onSample) {
  let stopped = false;
  const tick = async () => {
    try {
      const s = await sample();
      if (!stopped) onSample(s);
    } catch (e) {
      if (!stopped) onSample(null, e);
    }
  };
  tick();
  const timer = setInterval(tick, SAMPLE_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return NaN;
  for (const [le, n] of buckets) if (n >= q * total) return le;
  return Infinity;
}

const COLORS = ["#1f6feb", "#2da44e", "#bf8700", "#cf222e", "#8250df", "#0a7ea4", "#6e7781"];

// A line chart of series {name: [[t, v], ...]} as SVG, with its data also as a table for
// screen readers.
function chart(title, series, { floor = 1, unit = "" } = {}) {
  const names = Object.keys(series).sort();
  const W = 640;
  const H = 180;
  const P = 30;
  const all = names.flatMap((n) => series[n]);
  const t0 = Math.min(...all.map((p) => p[0]));
  const t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const vmax = Math.max(floor, ...all.map((p) => p[1]));
  const x = (t) => P + ((t - t0) / (t1 - t0)) * (W - 2 * P);
  const y = (v) => H - P - (v / vmax) * (H - 2 * P);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("aria-hidden", "true");
  const el = (name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  el("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, class: "axis" });
  el("line", { x1: P, y1: P, x2: P, y2: H - P, class: "axis" });
  el("text", { x: 4, y: P + 4, class: "tick" }, `${Number(vmax.toPrecision(3))}${unit}`);
  el("text", { x: 4, y: H - P + 4, class: "tick" }, "0");
  el("text", { x: W - P, y: H - 8, class: "tick", "text-anchor": "end" }, `last ${span((t1 - t0) / 1000)}`);
  names.forEach((n, i) => {
    // Steps: a count holds until the next event changes it.
    const points = series[n]
      .flatMap(([t, v], k) => (k ? [[t, series[n][k - 1][1]], [t, v]] : [[t, v]]))
      .map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`)
      .join(" ");
    el("polyline", { points, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2 });
  });
  const legend = h("ul", { class: "legend" }, names.map((n, i) => {
    const last = series[n][series[n].length - 1];
    return h("li", {}, h("span", { class: "swatch", dataset: { color: String(i % COLORS.length) } }), `${n}: ${last ? Number(last[1].toPrecision(3)) : 0}${unit}`);
  }));
  return h("figure", { class: "card" }, h("figcaption", {}, title), svg, legend);
}

// The tenant's events from the first: the backlog comes at once, so the reading stops once the
// stream has been quiet for a moment.
async function pastEvents() {
  const controller = new AbortController();
  const out = [];
  let timer;
  const quiet = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(), 400);
  };
  try {
    const response = await call("/api/events?after=0", { signal: controller.signal });
    quiet();
    await readEvents(response, (e) => {
      quiet();
      try {
        out.push(JSON.parse(e.data));
      } catch {
        // not an event of the gateway's
      }
    });
  } catch (e) {
    if (!controller.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
  }
  return out;
}

const ENDS = new Set(["destroyed", "failed", "lost", "expired"]);
const STATE_OF = { created: "creating", forked: "creating", ready: "ready", resumed: "ready", paused: "paused", stopping: "stopping" };

// Sessions by state and active sessions by provider after each event, from the first on.
async function showTimeline(box) {
  let events;
  let sessions;
  try {
    [events, sessions] = await Promise.all([pastEvents(), allSessions()]);
  } catch (e) {
    clear(box, h("p", { class: "error" }, `Cannot read the sessions' history: ${errorText(e)}`));
    return;
  }
  const providerOf = new Map(sessions.map((s) => [s.session_id, s.provider]));
  const stateOf = new Map();
  const byState = {};
  const byProvider = {};
  const latency = {};
  const count = () => {
    const st = {};
    const pr = {};
    for (const [id, state] of stateOf) {
      st[state] = (st[state] || 0) + 1;
      const p = providerOf.get(id) || "unknown";
      pr[p] = (pr[p] || 0) + 1;
    }
    return [st, pr];
  };
  const record = (t) => {
    const [st, pr] = count();
    for (const k of new Set([...Object.keys(byState), ...Object.keys(st)])) (byState[k] ||= []).push([t, st[k] || 0]);
    for (const k of new Set([...Object.keys(byProvider), ...Object.keys(pr)])) (byProvider[k] ||= []).push([t, pr[k] || 0]);
  };
  for (const e of events.sort((a, b) => a.id - b.id)) {
    if (!e.session_id) continue;
    if (e.type === "ready" && e.data && typeof e.data.seconds === "number")
      (latency[providerOf.get(e.session_id) || "unknown"] ||= []).push([Date.parse(e.time), e.data.seconds]);
    if (ENDS.has(e.type)) stateOf.delete(e.session_id);
    else if (STATE_OF[e.type]) stateOf.set(e.session_id, STATE_OF[e.type]);
    else continue;
    record(Date.parse(e.time));
  }
  record(Date.now());
  if (!events.length) {
    clear(box, h("p", { class: "hint" }, "No sessions yet: the charts start with the first."));
    return;
  }
  clear(
    box,
    chart("Sessions by state (this key's tenant)", byState),
    chart("Active sessions by provider (this key's tenant)", byProvider),
    chart("Seconds from create to ready, by provider (each create)", latency, { floor: 0.001, unit: " s" }),
  );
}

export function overviewPage(main) {
  document.title = "Overview · rex gateway";
  const cards = h("div", { class: "cards", id: "overview-cards" }, h("p", {}, "Reading the gateway's metrics…"));
  const charts = h("div", { class: "charts" });
  const envs = h("div", { id: "environments" });
  const registry = h("div", { id: "registry" });
  clear(
    main,
    h("h1", {}, "Overview"),
    h("p", { class: "hint" }, "The cards: the gateway's metrics (all tenants), read every 5 s. The charts: this tenant's sessions over time, from its events."),
    cards,
    charts,
    h("h2", {}, "Environments"),
    envs,
    h("h2", {}, "Registry"),
    registry,
  );

  function show(s, error) {
    if (!s) {
      clear(cards, h("p", { class: "error", role: "alert" }, `Cannot read the metrics: ${errorText(error)}`));
      return;
    }
    const byState = {};
    const byProvider = {};
    for (const [k, v] of Object.entries(s.sessions)) {
      const [state, provider] = k.split("/");
      byState[state] = (byState[state] || 0) + v;
      if (ACTIVE.has(state)) byProvider[provider] = (byProvider[provider] || 0) + v;
    }
    const errors = Object.entries(s.errors).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const mean = s.creates ? s.createSum / s.creates : NaN;
    const fmt = (v) => (Number.isFinite(v) ? (v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(2)} s`) : "–");
    const p50 = quantile(s.buckets, 0.5);
    const p95 = quantile(s.buckets, 0.95);
    clear(
      cards,
      h("section", { class: "card", "aria-labelledby": "card-states" }, h("h2", { id: "card-states" }, "Sessions by state"),
        h("dl", { class: "stats" }, Object.entries(byState).map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]))),
      h("section", { class: "card", "aria-labelledby": "card-providers" }, h("h2", { id: "card-providers" }, "Active by provider"),
        h("dl", { class: "stats" }, Object.entries(byProvider).map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]))),
      h("section", { class: "card", "aria-labelledby": "card-creates" }, h("h2", { id: "card-creates" }, "Creates"),
        h("dl", { class: "stats" },
          h("dt", {}, "ready"), h("dd", {}, String(s.creates)),
          h("dt", {}, "mean"), h("dd", {}, fmt(mean)),
          h("dt", {}, "p50 ≤"), h("dd", {}, fmt(p50)),
          h("dt", {}, "p95 ≤"), h("dd", {}, fmt(p95)))),
      h("section", { class: "card", "aria-labelledby": "card-errors" }, h("h2", { id: "card-errors" }, "Errors"),
        errors.length ? h("dl", { class: "stats" }, errors.map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])) : h("p", {}, "None."),
        h("p", { class: "hint" }, `${s.requests} requests`)),
    );
  }

  const unsubscribe = sampleEvery(show);
  showTimeline(charts);

  (async () => {
    try {
      const list = (await getJson("/api/environments")).environments;
      clear(envs, h("table", { class: "data" },
        h("thead", {}, h("tr", {}, ["Name", "Provider", "Image or template", "Idle timeout", "Max lifetime", "Spares", "Description"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, list.map((e) => h("tr", {},
          h("th", { scope: "row" }, e.name), h("td", {}, e.provider), h("td", {}, e.image || e.template || ""),
          h("td", {}, e.idle_timeout ? span(e.idle_timeout) : "none"), h("td", {}, span(e.max_lifetime)),
          h("td", { class: "num" }, String(e.spares ?? 0)), h("td", {}, e.description || ""))))));
    } catch (e) {
      clear(envs, h("p", { class: "error" }, errorText(e)));
    }
    const parts = [];
    for (const kind of ["agents", "tools", "prompts"]) {
      try {
        const names = Object.keys((await getJson(`/api/${kind}`))[kind] || {}).sort();
        parts.push(h("section", {}, h("h3", {}, kind[0].toUpperCase() + kind.slice(1)),
          names.length ? h("ul", { class: "names" }, names.map((n) => h("li", {}, n))) : h("p", {}, "None.")));
      } catch (e) {
        parts.push(h("p", { class: "error" }, `${kind}: ${errorText(e)}`));
      }
    }
    clear(registry, h("div", { class: "registry" }, parts));
  })();

  return { dispose: unsubscribe };
}
