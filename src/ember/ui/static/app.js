// ember's dashboard: plain DOM, no framework, nothing loaded from anywhere else.
// Every text from the server goes in with textContent (never innerHTML): memories hold what
// users and models wrote.
"use strict";

const PREFIX = document.querySelector('meta[name="ember-prefix"]').content;
const TOKEN = document.querySelector('meta[name="ember-token"]').content;
const COLORS = ["#d9480f", "#1c7ed6", "#2f9e44", "#ae3ec9", "#f59f00", "#0c8599", "#e64980",
  "#5c940d", "#7048e8", "#868e96"];
const state = { view: "spend", project: "", by: "origin", days: 30, features: {}, detail: null, projects: [],
  sessionsFrom: 0, memoriesFrom: 0 };

// -- small helpers -------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (v !== null && v !== undefined && v !== false) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children.flat()) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const money = (v, unit) => (unit === "usd" ? usd(v) : int(Math.round(v)) + " tokens");
const usd = (v) => (v === null || v === undefined ? "—" : "$" + Number(v).toFixed(v < 1 ? 4 : 2));
const int = (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"));
const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%");
const when = (ts) => (ts ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) : "—");
const day = (ts) => new Date(ts * 1000).toISOString().slice(5, 10);

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = false;
  clearTimeout(showError.timer);
  showError.timer = setTimeout(() => (box.hidden = true), 8000);
}

async function api(path, params, body) {
  const url = new URL(PREFIX + "/api/" + path, location.origin);
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) url.searchParams.set(k, v);
  const init = body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body),
    headers: { "content-type": "application/json", "x-ember-token": TOKEN },
  };
  const res = await fetch(url, init);
  const data = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

function table(columns, rows, onClick) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.map((r) => h("tr", { class: onClick ? "click" : null, on: onClick ? { click: () => onClick(r) } : {} },
    columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r)))));
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}

function card(label, value) { return h("div", { class: "card" }, h("b", {}, value), h("span", {}, label)); }

// Where a page of a longer list lies ("201–400 of 1,234"), with buttons to the pages around
// it: a list is never cut off unsaid. `page` is the API's {total, offset, limit}; `move`
// draws the list again from another offset.
function pager(id, page, shown, move) {
  const first = shown ? page.offset + 1 : 0;
  const last = page.offset + shown;
  const prev = page.offset > 0;
  const next = last < page.total;
  return h("div", { class: "controls pager", id },
    h("button", { class: "act", id: id + "-prev", disabled: !prev,
      on: { click: () => move(Math.max(0, page.offset - page.limit)) } }, "← newer"),
    h("span", { class: "muted" }, `${int(first)}–${int(last)} of ${int(page.total)}`),
    h("button", { class: "act", id: id + "-next", disabled: !next,
      on: { click: () => move(page.offset + page.limit) } }, "older →"));
}

// -- spend ------------------------------------------------------------------------------------

function barChart(spend, metric) {
  const W = 900, H = 220, L = 56, B = 22, n = spend.days.length;
  const totals = spend.days.map((_, i) => spend.series.reduce((s, x) => s + x[metric][i], 0));
  const top = Math.max(...totals, metric === "usd" ? 0.0001 : 1);
  const bw = (W - L) / n;
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": `${metric} per day` });
  for (let t = 0; t <= 4; t++) {
    const y = H - B - ((H - B - 8) * t) / 4;
    g.append(svg("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#eef0f3" }));
    const v = (top * t) / 4;
    g.append(svg("text", { x: L - 4, y: y + 3, "text-anchor": "end" }, metric === "usd" ? "$" + v.toFixed(v < 1 ? 3 : 1) : int(Math.round(v))));
  }
  spend.days.forEach((ts, i) => {
    let y = H - B;
    spend.series.forEach((s, k) => {
      const v = s[metric][i];
      if (!v) return;
      const hgt = ((H - B - 8) * v) / top;
      y -= hgt;
      g.append(svg("rect", { x: L + i * bw + 1, y, width: Math.max(bw - 2, 1), height: hgt, fill: COLORS[k % COLORS.length], "data-key": s.key },
        svg("title", {}, `${day(ts)} ${s.key}: ${metric === "usd" ? usd(v) : int(v)}`)));
    });
    if (n <= 31 ? i % 3 === 0 : i % Math.ceil(n / 12) === 0) g.append(svg("text", { x: L + i * bw + bw / 2, y: H - 6, "text-anchor": "middle" }, day(ts)));
  });
  return g;
}

function shareLine(spend) {
  const W = 900, H = 90, L = 56, n = spend.days.length, bw = (W - L) / n;
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": "cache-read share per day" });
  const points = [];
  spend.days.forEach((_, i) => {
    let read = 0, all = 0;
    for (const s of spend.series) {
      const share = s.cache_read_share[i];
      if (share === null) continue;
      // weight each key's share by its tokens (a day's share over all of its input)
      read += share * s.tokens[i];
      all += s.tokens[i];
    }
    if (all) points.push([L + i * bw + bw / 2, H - 10 - (H - 20) * (read / all)]);
  });
  g.append(svg("text", { x: L - 4, y: 13, "text-anchor": "end" }, "100%"));
  g.append(svg("text", { x: L - 4, y: H - 7, "text-anchor": "end" }, "0%"));
  for (const [x, y] of points) g.append(svg("circle", { cx: x, cy: y, r: 2.5, fill: "#1c7ed6" }));
  if (points.length) g.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: "#1c7ed6", "stroke-width": 2 }));
  return g;
}

async function renderSpend(view) {
  // the panels' data at once: the first paint waits for the slowest call, not their sum
  const [spend, net, savings, budget] = await Promise.all([
    api("spend", { project: state.project, by: state.by, days: state.days }),
    // a failing ledger is said in its panel; the spend below it still draws
    api("savings", { project: state.project, days: state.days }).catch((e) => ({ error: e.message })),
    state.features.shaping ? api("f/shaping/savings", {}) : null,
    state.features.budget && state.project ? budgetStanding() : null,
  ]);
  const t = spend.total;
  const metric = state.metric || "usd";
  const pick = (name, options, value, set) => h("select", { on: { change: (e) => { set(e.target.value); render(); } } },
    options.map(([v, label]) => h("option", { value: v, selected: v === String(value) }, label)));
  view.append(
    h("div", { class: "cards" },
      card("spend", usd(t.usd) + (t.unpriced_requests ? ` (+${t.unpriced_requests} unpriced)` : "")),
      card("requests", int(t.requests)), card("cache-read share", pct(t.cache_read_share)),
      card("input tokens", int(t.input_tokens)), card("output tokens", int(t.output_tokens))),
    h("div", { class: "panel", id: "spend-chart" },
      h("div", { class: "controls" },
        h("h2", {}, "Spend per day"),
        pick("by", [["origin", "by origin"], ["model", "by model"], ["project", "by project"]], state.by, (v) => (state.by = v)),
        pick("metric", [["usd", "cost"], ["tokens", "tokens"], ["requests", "requests"]], metric, (v) => (state.metric = v)),
        pick("days", [["7", "7 days"], ["30", "30 days"], ["90", "90 days"], ["365", "a year"]], state.days, (v) => (state.days = Number(v)))),
      barChart(spend, metric),
      h("div", { class: "legend" }, spend.series.map((s, k) => h("span", {}, h("i", { style: `background:${COLORS[k % COLORS.length]}` }), s.key)))),
    h("div", { class: "panel" }, h("h2", {}, "Share of input read from the cache"), shareLine(spend)),
  );
  if (budget) renderBudget(view, budget);
  view.prepend(netPanel(net));  // the overview leads with what ember saved, net
  if (savings) renderSavings(view, savings);
}

// -- what ember saved, net --------------------------------------------------------------------

const PART_NAMES = { compression: "compression", shaping: "shaping", shadow: "shadow", steward: "steward",
  retrievals: "retrievals", memory_blocks: "memory blocks", verbosity_block: "verbosity block", tool_definitions: "tool definitions", learn: "learn", other: "other calls" };
const SAVED_PARTS = ["compression", "shaping"];
const SPENT_PARTS = ["shadow", "memory_blocks", "retrievals", "verbosity_block", "tool_definitions", "steward", "learn", "other"];

function netHeadline(t) {
  if (t.net_usd === null) return `Saved: unknown net this week (${int(t.unpriced_requests)} requests of a model without a price)`;
  return t.net_usd >= 0 ? `Saved ${usd(t.net_usd)} net this week` : `Cost ${usd(-t.net_usd)} net this week (ember spent more than it saved)`;
}

function partText(t, name) {
  const p = t[name];
  if (name === "shaping") {
    if (!p.requests || p.requests_without_estimate === p.requests) return "shaping: no estimate";
    return `shaping ${usd(p.usd)} ${p.label === "measured" ? "measured" : "est."}`;
  }
  return `${PART_NAMES[name]} ${p.usd === null ? "unknown" : usd(p.usd)}`;
}

// "Saved $X net this week", each lever's part, net saved per day (signed bars), and why a part
// is empty — in words, so "$0" is never left to be guessed at.
function netPanel(s) {
  if (s.error) return h("div", { class: "panel", id: "net-savings" }, h("h2", { id: "net-headline" }, "What ember saved"),
    h("p", { class: "tag warn" }, `cannot be read: ${s.error}`));
  const w = s.week;
  const spent = SPENT_PARTS.filter((n) => ["shadow", "memory_blocks", "retrievals"].includes(n) || w[n].requests);
  const whys = Object.entries(s.window.why);
  return h("div", { class: "panel", id: "net-savings" },
    h("h2", { id: "net-headline" }, netHeadline(w)),
    h("p", { class: "parts" }, "saved: ", SAVED_PARTS.map((n) => partText(w, n)).join(", "),
      ` − spent ${w.spent_usd === null ? "unknown" : usd(w.spent_usd)}: `, spent.map((n) => partText(w, n)).join(", ")),
    netPlot(s.days),
    h("p", { class: "muted" }, `Net saved per day over the last ${s.window.days} days: `,
      s.window.net_usd === null ? "unknown in total" : `${usd(s.window.net_usd)} in total`,
      ". Compression is counted at the price each request billed what was left out (written once, re-read at the cache price); ",
      "memory blocks and the verbosity block likewise; shadow memory and retrievals at their billed cost."),
    whys.length ? h("ul", { class: "why muted" }, whys.map(([part, text]) => h("li", { "data-part": part }, text))) : null);
}

function netPlot(days) {
  const W = 900, H = 120, L = 56, mid = H / 2, bw = (W - L) / Math.max(days.length, 1);
  const top = Math.max(...days.map((d) => Math.abs(d.net_usd || 0)), 0.0001);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": "net saved per day", id: "net-plot" });
  g.append(svg("line", { x1: L, x2: W, y1: mid, y2: mid, stroke: "#d0d5dd" }));
  g.append(svg("text", { x: L - 4, y: 12, "text-anchor": "end" }, "+" + usd(top)));
  g.append(svg("text", { x: L - 4, y: H - 4, "text-anchor": "end" }, "-" + usd(top)));
  days.forEach((d, i) => {
    if (days.length <= 31 ? i % 3 === 0 : i % Math.ceil(days.length / 12) === 0) g.append(svg("text", { x: L + i * bw + bw / 2, y: H - 2, "text-anchor": "middle" }, day(d.ts)));
    const parts = Object.entries(d.parts).filter(([, v]) => v).map(([k, v]) => `${PART_NAMES[k]} ${usd(v)}`).join(", ");
    if (d.net_usd === null) {
      g.append(svg("rect", { x: L + i * bw + 1, y: mid - 3, width: Math.max(bw - 2, 1), height: 6, fill: "#98a2b3", class: "unknown" },
        svg("title", {}, `${d.day}: unknown (a model without a price)`)));
      return;
    }
    if (!d.net_usd) return;
    const v = d.net_usd, hgt = ((mid - 6) * Math.abs(v)) / top;
    g.append(svg("rect", { x: L + i * bw + 1, y: v >= 0 ? mid - hgt : mid, width: Math.max(bw - 2, 1), height: hgt, fill: v >= 0 ? "#2f9e44" : "#e03131", "data-day": d.day },
      svg("title", {}, `${d.day}: ${v >= 0 ? "saved" : "cost"} ${usd(Math.abs(v))} net (${parts})`)));
  });
  return g;
}

function budgetStanding() {
  const identity = (state.projects.find((p) => p.name === state.project) || {}).identity || "";
  return api("f/budget/standing", { project: state.project, identity });
}

function renderBudget(view, b) {
  const rows = b.limits.map((l) => ({ ...l, share: l.limit_usd ? (l.spent_usd + (l.reserved_usd || 0)) / l.limit_usd : 1 }));
  view.prepend(h("div", { class: "panel", id: "budget" }, h("h2", {}, "Budget"),
    rows.length ? table([
      { title: "limit", value: (r) => `${r.period === "day" ? "daily" : "monthly"} (${r.setting})` },
      { title: "spent", num: true, value: (r) => usd(r.spent_usd) },
      { title: "held in flight", num: true, value: (r) => (r.reserved_usd ? `${usd(r.reserved_usd)} (${int(b.in_flight)} req.)` : "—") },
      { title: "of", num: true, value: (r) => usd(r.limit_usd) },
      { title: "share", num: true, value: (r) => pct(r.share) },
      { title: "state", value: (r) => h("span", { class: "tag" + (r.state === "ok" ? " good" : " warn") },
        r.state === "over" ? (b.refuse ? "over: refusing requests" : "over: warning only") : r.state) },
      { title: "resets", value: (r) => when(r.resets_at) },
    ], rows) : h("p", { class: "muted" }, "No limit for this project (budget_daily_usd, budget_monthly_usd).")));
}

function renderSavings(view, s) {
  const band = (iv) => (iv && iv.low !== null && iv.high !== null ? `${int(Math.round(iv.low))} – ${int(Math.round(iv.high))}` : "—");
  const row = (est, what) => ({
    kind: est.label, what, requests: est.requests,
    saved: est.available ? int(Math.round(est.saved_output_tokens.value)) : (est.why || "not available"),
    band: est.available ? band(est.saved_output_tokens) : "—",
    share: est.available && est.saved_share ? pct(est.saved_share.value) : "—",
  });
  const counts = `${int(s.requests.treatment)} shaped request${s.requests.treatment === 1 ? "" : "s"}, `
    + `${int(s.requests.control)} left unshaped as holdout (output_holdout ${s.holdout})`;
  view.append(h("div", { class: "panel", id: "savings" }, h("h2", {}, "What output shaping saved (95% bands)"),
    h("p", { class: "counts", id: "shaping-counts" }, counts),
    table([
      { title: "kind", value: (r) => r.kind },
      { title: "against", value: (r) => r.what },
      { title: "requests compared", num: true, value: (r) => int(r.requests) },
      { title: "output tokens saved", num: true, value: (r) => r.saved },
      { title: "band", num: true, value: (r) => r.band },
      { title: "share of unshaped output", num: true, value: (r) => r.share },
    ], [row(s.estimated, "the unshaped baseline (a counterfactual)"), row(s.measured, "holdout sessions left unshaped")]),
    savedPlot(s.days.filter((d) => d.treatment_requests).slice(-30)),
    s.how_to_measure ? h("p", { class: "muted" }, s.how_to_measure) : null));
}

// Estimated output tokens saved per day (UTC), signed: a loss is drawn below the line.
function savedPlot(days) {
  if (!days.length) return h("p", { class: "muted" }, "No shaped traffic yet.");
  const W = 900, H = 120, L = 56, mid = H / 2, bw = (W - L) / Math.max(days.length, 1);
  const top = Math.max(...days.map((d) => Math.abs(d.estimated_saved)), 1);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": "estimated output tokens saved per day" });
  g.append(svg("line", { x1: L, x2: W, y1: mid, y2: mid, stroke: "#d0d5dd" }));
  g.append(svg("text", { x: L - 4, y: 12, "text-anchor": "end" }, "+" + int(Math.round(top))));
  g.append(svg("text", { x: L - 4, y: H - 4, "text-anchor": "end" }, "-" + int(Math.round(top))));
  days.forEach((d, i) => {
    const v = d.estimated_saved, hgt = ((mid - 6) * Math.abs(v)) / top;
    g.append(svg("rect", { x: L + i * bw + 1, y: v >= 0 ? mid - hgt : mid, width: Math.max(bw - 2, 1), height: hgt, fill: v >= 0 ? "#2f9e44" : "#e03131" },
      svg("title", {}, `${d.day}: ${int(Math.round(v))} tokens (${int(d.treatment_requests)} shaped requests)`)));
  });
  return g;
}

// -- sessions and requests --------------------------------------------------------------------

async function renderProjects(view) {
  const rows = await api("projects");
  view.append(h("div", { class: "panel" }, h("h2", {}, "Projects"), rows.length ? table([
    { title: "project", value: (r) => r.identity || r.name },
    { title: "kind", value: (r) => r.kind },
    { title: "requests", num: true, value: (r) => int(r.requests) },
    { title: "spend", num: true, value: (r) => usd(r.usd) },
    { title: "cache-read share", num: true, value: (r) => pct(r.cache_read_share) },
  ], rows, (r) => selectProject(r.name)) : h("p", { class: "muted" }, "No requests yet: point a client at the proxy.")));
}

async function renderSessions(view) {
  if (!state.project) return renderProjects(view);
  if (state.detail) return renderRequests(view, state.detail);
  const page = await api("sessions", { project: state.project, offset: state.sessionsFrom });
  const rows = page.sessions;
  const move = (offset) => { state.sessionsFrom = offset; render(); };
  view.append(h("div", { class: "panel", id: "sessions" }, h("h2", {}, "Sessions"),
    pager("sessions-pager", page, rows.length, move), table([
    { title: "session", value: (r) => r.session_id.slice(0, 18) },
    { title: "last seen", value: (r) => when(r.last_seen) },
    { title: "models", value: (r) => r.models || "—" },
    { title: "requests", num: true, value: (r) => int(r.requests) },
    { title: "cache read", num: true, value: (r) => int(r.cache_read_tokens) },
    { title: "output", num: true, value: (r) => int(r.output_tokens) },
    { title: "client spend", num: true, value: (r) => usd(r.cost_usd ?? r.priced_cost_usd) },
    { title: "ember's own", num: true, value: (r) => usd(r.ember_usd) },
  ], rows, (r) => { state.detail = r.session_id; render(); })));
}

async function renderRequests(view, session) {
  const rows = await api("requests", { project: state.project, session });
  let injections = [];
  if (state.features.memory) injections = await api("f/memory/injections", { project: state.project, session });
  // An injection is made while its request is prepared (after the request's start, before the
  // next one's); every later request of the user's thread replays it byte for byte.
  const main = rows.filter((r) => r.thread_kind === "main" || r.thread_kind === null);
  const changed = (r) => {
    if (!main.includes(r)) return { fresh: [], replayed: [] };
    const next = main[main.indexOf(r) + 1];
    const until = next ? next.ts : Infinity;
    return {
      fresh: injections.filter((x) => x.created_at >= r.ts && x.created_at < until),
      replayed: injections.filter((x) => x.created_at < r.ts && !x.busy),
    };
  };
  view.append(h("div", { class: "panel", id: "requests" },
    h("div", { class: "controls" }, h("button", { class: "act", on: { click: () => { state.detail = null; render(); } } }, "← sessions"),
      h("h2", {}, `Session ${session}`)),
    table([
      { title: "time", value: (r) => when(r.ts) },
      { title: "model", value: (r) => r.model || "—" },
      { title: "by", value: (r) => h("span", { class: "tag" + (r.origin === "client" ? "" : " warn") }, r.origin) },
      { title: "thread", value: (r) => r.thread_kind || "—" },
      { title: "verbosity", value: (r) => verbosityCell(r.notes.shaping) },
      { title: "status", value: (r) => `${r.status} ${r.outcome}` },
      { title: "input", num: true, value: (r) => int(r.input_tokens) },
      { title: "cache read", num: true, value: (r) => int(r.cache_read_tokens) },
      { title: "cache write", num: true, value: (r) => int(r.cache_write_tokens) },
      { title: "output", num: true, value: (r) => int(r.output_tokens) },
      { title: "cost", num: true, value: (r) => usd(r.cost_usd) + (r.usage_estimated ? " (est.)" : "") },
      { title: "saved net", num: true, value: savedCell },
      { title: "what ember changed", value: (r) => injectedCell(changed(r), r.input_usd_per_mtok) },
    ], rows)));
}

// What the request saved net (compression, shaping) minus what ember added to it (its blocks,
// its own calls), with each part in the tooltip.
function savedCell(r) {
  const s = r.savings;
  if (!s) return h("span", { class: "muted" }, "—");
  const parts = Object.entries(s.parts).filter(([, v]) => v).map(([k, v]) => `${PART_NAMES[k]} ${usd(v)}`);
  const text = s.net_usd === null ? "unknown" : (s.net_usd < 0 ? "−" : "") + usd(Math.abs(s.net_usd));
  return h("span", { title: parts.join(", ") || "nothing saved or spent" }, text);
}

function verbosityCell(s) {
  if (!s) return h("span", { class: "muted" }, "—");
  if (s.arm === "control") return h("span", { class: "tag", title: "a holdout session: sent unshaped to measure savings" }, "holdout");
  return [s.level === null ? "—" : `level ${s.level}`, s.effort.length ? h("span", { class: "tag", title: s.effort.join(", ") }, "effort lowered") : ""];
}

function injectedCell({ fresh, replayed }, price) {
  const cells = fresh.map((x) => h("details", { class: "injection" },
    h("summary", {}, x.busy ? h("span", { class: "tag warn" }, "memory busy: none injected")
      : [h("span", { class: "tag" }, `+${x.memory_ids.length} memories`),
        ` ${int(x.bytes)} bytes ≈ ${int(x.tokens)} tokens`,
        price === null ? "" : ` ≈ ${usd((x.tokens * price) / 1e6)} as fresh input `,
        x.used === null ? "" : h("span", { class: "tag " + (x.used ? "good" : "") }, x.used ? "cited" : "not cited")]),
    h("pre", {}, x.block),
    h("div", { class: "muted ids" }, "memories: ", x.memory_ids.flatMap((id, i) => [i ? ", " : "",
      memoryLink(id, x.forgotten.includes(id), x.cited_ids.includes(id))]))));
  if (replayed.length) {
    const bytes = replayed.reduce((s, x) => s + x.bytes, 0);
    cells.push(h("div", { class: "muted replayed" }, `${replayed.length} earlier block(s) replayed, ${int(bytes)} bytes (the same bytes: cached)`));
  }
  return cells.length ? cells : h("span", { class: "muted" }, "—");
}

// A memory's id in a request's block: a link to its page, or plain text once it is forgotten.
// "cited" is the verdict of the answers after that request, as they were recorded.
function memoryLink(id, forgotten, cited) {
  const title = (cited ? "cited by the answers" : "not cited") + (forgotten ? "; forgotten since" : "");
  if (forgotten) return h("span", { class: "forgotten", title }, id);
  return h("a", { href: "#", class: "memory-link" + (cited ? " cited" : ""), "data-memory": id, title,
    on: { click: (e) => { e.preventDefault(); state.memory = id; setTab("memory"); } } }, id);
}

function citedTag(cited) {
  if (cited === null) return h("span", { class: "muted", title: "no answer recorded after the ask yet" }, "no answer yet");
  return h("span", { class: "tag" + (cited ? " good" : "") }, cited ? "cited" : "not cited");
}

// -- memories ---------------------------------------------------------------------------------

async function renderMemories(view) {
  if (!state.project) return renderProjects(view);
  if (state.memory) return renderMemory(view, state.memory);
  const q = state.query || "";
  const box = h("input", { type: "search", id: "memory-search", placeholder: "search memories (explains each score)", value: q });
  box.addEventListener("keydown", (e) => { if (e.key === "Enter") { state.query = box.value; render(); } });
  const found = await api("f/memory/memories", { project: state.project, q, offset: q ? "" : state.memoriesFrom });
  const move = (offset) => { state.memoriesFrom = offset; render(); };
  view.append(h("div", { class: "panel", id: "memories" },
    h("div", { class: "controls" }, h("h2", {}, q ? `Memories matching “${q}”` : "Memories"), box),
    q ? null : pager("memories-pager", found, found.memories.length, move),
    table([
      { title: "memory", value: (r) => r.content },
      { title: "category", value: (r) => r.category || "—" },
      { title: "importance", num: true, value: (r) => r.importance.toFixed(2) },
      { title: "scope", value: (r) => r.scope },
      { title: q ? "score (why)" : "created", value: (r) => (q ? explainCell(r) : when(r.created_at)) },
    ], found.memories, (r) => { state.memory = r.id; render(); }),
    q ? h("p", { class: "muted" }, `${found.memories.length} of ${found.total} shown`) : null));
}

function explainCell(r) {
  const e = r.explain;
  return h("span", { title: JSON.stringify(e) }, r.score.toFixed(3), " ",
    h("span", { class: "tag " + (e.above_floor ? "good" : "warn") }, e.above_floor ? "injectable" : "under the floor"),
    ` cos ${e.cosine === null ? "—" : e.cosine.toFixed(2)} · words ${e.keywords === null ? "—" : e.keywords.toFixed(2)}`);
}

async function renderMemory(view, id) {
  const m = await api("f/memory/memory", { project: state.project, id });
  const content = h("textarea", { id: "memory-content", rows: 3, cols: 90 }, m.content);
  const importance = h("input", { type: "text", id: "memory-importance", size: 4, value: m.importance });
  view.append(h("div", { class: "panel", id: "memory" },
    h("div", { class: "controls" }, h("button", { class: "act", on: { click: () => { state.memory = null; render(); } } }, "← memories"),
      h("h2", {}, `Memory ${m.id}`)),
    content, h("div", { class: "controls" }, "importance ", importance,
      h("button", { class: "act", id: "memory-save", on: { click: async () => {
        await guarded(() => api("f/memory/edit", {}, { project: state.project, id, content: content.value, importance: Number(importance.value) }));
        render();
      } } }, "save"),
      h("button", { class: "act danger", id: "memory-forget", on: { click: async () => {
        if (!confirm("Forget this memory for good?")) return;
        await guarded(() => api("f/memory/forget", {}, { project: state.project, id }));
        state.memory = null; render();
      } } }, "forget")),
    table([{ title: "field", value: (r) => r[0] }, { title: "value", value: (r) => r[1] }], [
      ["scope", m.scope], ["category", m.category || "—"], ["valid", `${when(m.valid_from)} → ${m.valid_until ? when(m.valid_until) : "now"}`],
      ["supersedes", m.supersedes || "—"], ["superseded by", m.superseded_by || "—"], ["created", when(m.created_at)],
    ]),
    h("h2", {}, "Evidence"),
    m.evidence.length ? m.evidence.map((e) => h("details", { class: "evidence" }, h("summary", {}, `${e.kind} · ${e.message_id || "—"}`),
      h("pre", {}, e.text || "(the message is no longer in the transcript)"))) : h("p", { class: "muted" }, "none recorded"),
    h("h2", {}, "History"),
    table([{ title: "id", value: (r) => r.id }, { title: "content", value: (r) => r.content }, { title: "until", value: (r) => when(r.valid_until) }], m.history)),
    memoryRequests(m.injections));
}

// The requests a memory went into, newest first; a click opens that session's requests.
function memoryRequests(u) {
  const counts = u.requests
    ? `Injected into ${int(u.requests)} request${u.requests === 1 ? "" : "s"}, cited in ${int(u.cited)}`
      + (u.unanswered ? ` (${int(u.unanswered)} not answered yet)` : "") + `; last ${when(u.last_injected_at)}`
    : "Not injected into any request yet.";
  return h("div", { class: "panel", id: "memory-requests" }, h("h2", {}, "Requests it went into"),
    h("p", { class: "counts" }, counts),
    u.latest.length ? table([
      { title: "time", value: (r) => when(r.created_at) },
      { title: "session", value: (r) => r.session_id.slice(0, 18) },
      { title: "answers", value: (r) => citedTag(r.cited) },
    ], u.latest, (r) => { state.detail = r.session_id; setTab("sessions"); }) : null,
    u.requests > u.latest.length ? h("p", { class: "muted" }, `the latest ${u.latest.length} shown`) : null);
}

async function guarded(fn) {
  try { return await fn(); } catch (e) { showError(e.message); throw e; }
}

// -- shadow -----------------------------------------------------------------------------------

async function renderShadow(view) {
  if (!state.project) return renderProjects(view);
  const s = await api("f/shadow/runs", { project: state.project });
  view.append(
    h("div", { class: "cards" }, card(`budget left (7 days, ${s.budget.unit})`, money(s.budget.left, s.budget.unit)),
      card("spent of it", money(s.budget.spent, s.budget.unit)), card("runs", int(s.runs.length)), card("mode", s.mode)),
    h("div", { class: "panel", id: "shadow-runs" }, h("h2", {}, "Shadow runs"), table([
      { title: "started", value: (r) => when(r.started_at) },
      { title: "status", value: (r) => h("span", { class: "tag" + (r.status === "completed" ? " good" : r.status === "skipped" ? " warn" : "") }, r.status) },
      { title: "path", value: (r) => r.path },
      { title: "why", value: (r) => r.reason || "—" },
      { title: "cache read", num: true, value: (r) => int(r.cache_read_tokens) },
      { title: "cost", num: true, value: (r) => usd(r.cost_usd) },
      { title: "facts", num: true, value: (r) => int(r.proposals) },
    ], s.runs)),
    h("div", { class: "panel", id: "shadow-proposals" }, h("h2", {}, "Proposals"), table([
      { title: "fact", value: (r) => r.content },
      { title: "status", value: (r) => r.status },
      { title: "memory", value: (r) => r.memory_id || "—" },
    ], s.proposals)));
  const c = await api("f/shadow/compare", { project: state.project });
  const cover = (x) => `${int(x.covered)} of ${int(x.total)} (${pct(x.share)})`;
  view.append(h("div", { class: "panel", id: "shadow-compare" }, h("h2", {}, "Shadow against the steward (ember shadow compare)"),
    h("p", { class: "muted" }, `${c.scope.compared_sessions} session(s) compared: ${c.scope.method}`),
    table([{ title: "coverage", value: (r) => r[0] }, { title: "steward's facts the shadow found", value: (r) => r[1] },
      { title: "shadow's facts the steward found", value: (r) => r[2] }], [
      ["exact text", cover(c.exact.steward_covered_by_shadow), cover(c.exact.shadow_covered_by_steward)],
      ["shared evidence", cover(c.evidence.steward_covered_by_shadow), cover(c.evidence.shadow_covered_by_steward)],
    ]),
    h("p", { class: "muted" }, `semantic: ${c.semantic.computed ? "computed" : c.semantic.why}`),
    table([{ title: "side", value: (r) => r.side }, { title: "spent", num: true, value: (r) => usd(r.usd) }],
      Object.entries(c.cost.totals_usd).map(([side, v]) => ({ side, usd: v }))),
    table([
      { title: "evidence of", value: (r) => r.side }, { title: "proposals", num: true, value: (r) => int(r.proposals) },
      { title: "valid", num: true, value: (r) => int(r.valid) }, { title: "pointers ok", num: true, value: (r) => `${int(r.ok)} of ${int(r.pointers)}` },
    ], c.evidence_quality.rows)));
}

// -- lessons, and any feature's views ----------------------------------------------------------

async function renderLessons(view) {
  if (!state.project) return renderProjects(view);
  const rows = await api("f/traffic/lessons", { project: state.project });
  view.append(h("div", { class: "panel", id: "lessons" }, h("h2", {}, "Lessons learned from traffic"),
    rows.length ? table([
      { title: "lesson", value: (r) => r.lesson },
      { title: "category", value: (r) => r.category },
      { title: "seen", num: true, value: (r) => int(r.seen) },
      { title: "state", value: (r) => r.state },
      { title: "last seen", value: (r) => when(r.last_seen) },
    ], rows) : h("p", { class: "muted" }, "No lesson seen yet in this project.")));
}

async function renderLearned(view) {
  if (state.project) {
    const b = await api("f/learn/blocks", { project: state.project });
    const panel = h("div", { class: "panel", id: "learn-blocks" }, h("h2", {}, "ember learn: blocks in the agents' files"));
    if (!b.folder) panel.append(h("p", { class: "muted" }, "This project is not a local folder: no agent files to read."));
    else if (!b.files.length) panel.append(h("p", { class: "muted" }, `No learn block in ${b.folder} yet (ember learn --apply writes one).`));
    for (const f of b.files) {
      panel.append(h("h3", {}, f.file), f.problem ? h("p", { class: "tag warn" }, f.problem) : null,
        f.sections.map((x) => h("details", {}, h("summary", {}, x.section), h("pre", {}, x.text))));
    }
    view.append(panel);
  }
  const patterns = await api("f/learn/toin", {});
  view.append(h("div", { class: "panel", id: "toin" }, h("h2", {}, "TOIN: tool-output structures observed (all projects)"),
    patterns.length ? table([
      { title: "kind", value: (r) => r.kind },
      { title: "structure", value: (r) => r.structure },
      { title: "model", value: (r) => r.model_family },
      { title: "seen", num: true, value: (r) => int(r.observations) },
      { title: "fetched again", num: true, value: (r) => pct(r.refetch_rate) },
      { title: "errors", num: true, value: (r) => pct(r.error_rate) },
      { title: "mean bytes", num: true, value: (r) => int(r.mean_bytes) },
      { title: "fields", value: (r) => r.fields.join(", ") },
    ], patterns) : h("p", { class: "muted" }, "No tool output observed yet.")));
}

async function renderGeneric(view, feature) {
  for (const route of state.features[feature].filter((r) => r.method === "GET" && !r.path.includes("/"))) {
    const rows = await api(`f/${feature}/${route.path}`, { project: state.project });
    const list = Array.isArray(rows) ? rows : rows.rows || [];
    const cols = list.length ? Object.keys(list[0]).slice(0, 8) : [];
    view.append(h("div", { class: "panel", id: `${feature}-${route.path}` }, h("h2", {}, `${feature}: ${route.path}`),
      list.length ? table(cols.map((c) => ({ title: c, value: (r) => (typeof r[c] === "object" ? JSON.stringify(r[c]) : r[c]) })), list)
        : h("p", { class: "muted" }, "nothing yet")));
  }
}

// -- the frame --------------------------------------------------------------------------------

const RENDERERS = {
  spend: renderSpend, sessions: renderSessions, memory: renderMemories, shadow: renderShadow,
  traffic: renderLessons, learn: renderLearned,
};
const TITLES = { memory: "Memories", shadow: "Shadow", traffic: "Lessons", learn: "Learned" };
// shown inside another view, not as tabs of their own
const INSIDE = new Set(["shaping", "budget"]);

async function render() {
  const view = document.getElementById("view");
  const fresh = h("div", {});
  try {
    const fn = RENDERERS[state.view] || ((v) => renderGeneric(v, state.view));
    await fn(fresh);
    view.replaceChildren(fresh);
    view.dataset.rendered = state.view;
    // when each view was last drawn (ms since navigation): bench/ui_first_paint.py reads it
    window.emberDrawn = { view: state.view, at: performance.now() };
  } catch (e) {
    showError(e.message);
  }
}

function selectProject(name) {
  state.project = name; state.detail = null; state.memory = null; state.sessionsFrom = 0; state.memoriesFrom = 0;
  document.getElementById("project").value = name;
  if (state.view === "spend") state.view = "sessions";
  setTab(state.view);
}

function setTab(name) {
  state.view = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.view === name);
  render();
}

async function start() {
  const [features, projects] = await Promise.all([api("features"), api("projects")]);
  state.features = features;
  state.projects = projects;
  const tabs = document.getElementById("tabs");
  for (const name of Object.keys(state.features)) {
    if (INSIDE.has(name)) continue;
    tabs.append(h("button", { "data-view": name }, TITLES[name] || name));
  }
  tabs.addEventListener("click", (e) => { if (e.target.dataset.view) { state.detail = null; state.memory = null; setTab(e.target.dataset.view); } });
  const select = document.getElementById("project");
  for (const p of state.projects) select.append(h("option", { value: p.name }, p.identity || p.name));
  select.addEventListener("change", () => {
    state.project = select.value; state.detail = null; state.memory = null; state.sessionsFrom = 0; state.memoriesFrom = 0;
    render();
  });
  await render();
  const live = document.getElementById("live");
  const events = new EventSource(PREFIX + "/api/events");
  events.onopen = () => live.classList.add("on");
  events.onerror = () => live.classList.remove("on");
  events.addEventListener("change", (e) => {
    const { project } = JSON.parse(e.data);
    // Spend and requests follow the traffic; a memory being read or edited is never
    // redrawn under the user's cursor.
    const follows = state.view === "spend" || state.view === "sessions";
    if (follows && (!state.project || state.project === project)) render();
  });
}

start();
