// The mss-iot dashboard: polls the JSON API and redraws plain SVG (no library,
// no network access beyond this aggregator).
"use strict";

const NS = "http://www.w3.org/2000/svg";
const REFRESH_MS = 2000;

function el(tag, attrs, parent) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function fmt(x, digits = 4) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

function size(svg) {
  const box = svg.getBoundingClientRect();
  return [Math.max(box.width, 300), Math.max(box.height, 150)];
}

// Padding of every chart: room for the tick labels and the axis titles.
const PAD = { l: 62, r: 12, t: 22, b: 44 };

// Axis ticks 1, 2 or 5 times a power of ten apart, about `count` of them, over [lo, hi] widened
// to the outermost ticks (so a reader never sees a tick like 0.283); `integer`: steps of at least 1.
function niceTicks(lo, hi, count = 5, integer = false) {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max([1, 2, 5, 10].map(m => m * power).find(s => s >= raw * (1 - 1e-9)), integer ? 1 : 0);
  const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const ticks = [];
  for (let i = first; i <= last; i++) ticks.push(i * step);
  return { lo: first * step, hi: last * step, step, ticks, label: v => v.toFixed(decimals) };
}

// Clock-time ticks over [t0, t1] (Unix seconds) at a round step of local time, labelled hh:mm,
// or hh:mm:ss below a minute.
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

function timeTicks(t0, t1, count = 5) {
  const step = TIME_STEPS.find(s => s >= (t1 - t0) / count) || TIME_STEPS[TIME_STEPS.length - 1];
  const offset = -new Date(t0 * 1000).getTimezoneOffset() * 60;  // local midnight is a round time
  const ticks = [];
  for (let t = Math.ceil((t0 + offset) / step) * step - offset; t <= t1; t += step) ticks.push(t);
  const two = n => String(n).padStart(2, "0");
  const label = t => {
    const d = new Date(t * 1000);
    return `${two(d.getHours())}:${two(d.getMinutes())}` + (step < 60 ? `:${two(d.getSeconds())}` : "");
  };
  return { ticks, label };
}

// The y axis: tick labels and light grid lines at `ticks` (niceTicks), through the scale y.
function yAxis(svg, w, ticks, y) {
  for (const v of ticks.ticks) {
    el("line", { x1: PAD.l, x2: w - PAD.r, y1: y(v), y2: y(v), class: "grid" }, svg);
    const tick = el("text", { x: PAD.l - 5, y: y(v) + 3, "text-anchor": "end", class: "label tick y-tick" }, svg);
    tick.textContent = ticks.label(v);
  }
}

// Titles under the x axis and along the y axis.
function axisTitles(svg, w, h, xTitle, yTitle) {
  const x = el("text", { x: PAD.l + (w - PAD.l - PAD.r) / 2, y: h - 6, "text-anchor": "middle",
                         class: "axis-title", "data-axis": "x" }, svg);
  x.textContent = xTitle;
  const cy = PAD.t + (h - PAD.t - PAD.b) / 2;
  const y = el("text", { x: 14, y: cy, "text-anchor": "middle", transform: `rotate(-90 14 ${cy})`,
                         class: "axis-title", "data-axis": "y" }, svg);
  y.textContent = yTitle;
}

// Labels under `n` slots `bw` px wide: every one, or every few where `chars` characters would overlap.
function slotLabels(svg, h, n, bw, text, chars) {
  const every = Math.max(1, Math.ceil((chars * 6.5 + 6) / bw));
  for (let i = 0; i < n; i += every) {
    const label = el("text", { x: PAD.l + (i + 0.5) * bw, y: h - PAD.b + 14, "text-anchor": "middle",
                               class: "label tick x-tick" }, svg);
    label.textContent = text(i);
  }
}

// The view the API chose (top N, order, intervals): bars with CI whiskers, filled
// where the item is distinguishable from 0, hollow where not; each bar carries its numbers.
function drawEstimates(doc) {
  const svg = document.getElementById("chart");
  svg.replaceChildren();
  const view = doc.view;
  const sim = view.intervals === "simultaneous";
  const lowOf = r => (sim ? r.sim_low : r.ci_low), highOf = r => (sim ? r.sim_high : r.ci_high);
  const signal = r => (sim ? r.detected_simultaneous : r.detected);
  const name = r => (r.label === undefined ? String(r.item) : r.label);
  const rows = doc.estimates;
  const [w, h] = size(svg);
  const ticks = niceTicks(Math.min(0, ...rows.map(r => (lowOf(r) === null ? r.estimate : lowOf(r)))),
                          Math.max(0.01, ...rows.map(r => (highOf(r) === null ? r.estimate : highOf(r)))));
  const { lo, hi } = ticks;
  const y = v => PAD.t + (h - PAD.t - PAD.b) * (hi - v) / (hi - lo);
  const bw = (w - PAD.l - PAD.r) / Math.max(rows.length, 1);
  yAxis(svg, w, ticks, y);
  el("line", { x1: PAD.l, x2: w - PAD.r, y1: y(0), y2: y(0), class: "axis" }, svg);
  rows.forEach((r, i) => {
    const x = PAD.l + i * bw;
    const top = y(Math.max(r.estimate, 0)), bottom = y(Math.min(r.estimate, 0));
    const bar = el("rect", { x: x + bw * 0.15, width: bw * 0.7, y: top, height: Math.max(bottom - top, 0.5),
                             class: signal(r) ? "bar" : "bar noise", "data-item": r.item,
                             "data-estimate": r.estimate, "data-signal": signal(r) }, svg);
    el("title", {}, bar).textContent = `${name(r)}: ${fmt(r.estimate)} (${sim ? "simultaneous " : ""}95% CI `
      + `${fmt(lowOf(r))} – ${fmt(highOf(r))}; ${signal(r) ? "distinguishable from 0" : "not distinguishable from 0"})`;
    if (lowOf(r) !== null && highOf(r) !== null) {
      const cx = x + bw / 2;
      el("line", { x1: cx, x2: cx, y1: y(Math.min(highOf(r), hi)), y2: y(Math.max(lowOf(r), lo)), class: "ci" }, svg);
    }
  });
  slotLabels(svg, h, rows.length, bw, i => name(rows[i]), Math.max(1, ...rows.map(r => name(r).length)));
  axisTitles(svg, w, h, `item (${view.order === "item" ? "in item order" : "largest estimate first"})`,
             "estimated frequency");
  document.getElementById("view-title").textContent =
    `${rows.length} of ${view.k} items, `
    + `${view.order === "item" ? "in item order" : "largest first"}, ${sim ? "simultaneous " : ""}95% CI, `
    + (doc.post === "none" ? "unbiased estimates" : `estimates post-processed: ${doc.post}`);
  // the caption, then what the untrusted devices the docs assume could do (the certified interval)
  document.getElementById("caption").textContent = view.caption.concat(
    doc.integrity ? [doc.integrity.text] : []).join(" · ");
  document.getElementById("ci-head").textContent = sim ? "simultaneous 95% CI" : "95% CI";
  const body = document.querySelector("#estimates tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = body.insertRow();
    tr.dataset.signal = signal(r);
    for (const v of [name(r), fmt(r.estimate), fmt(r.stderr), `[${fmt(lowOf(r))}, ${fmt(highOf(r))}]`,
                     signal(r) ? "yes" : "–"]) {
      tr.insertCell().textContent = v;
    }
  }
}

// Cumulative report counts against clock time: accepted, duplicate and rejected since the store began.
function drawCounters(doc) {
  const svg = document.getElementById("counters-chart");
  svg.replaceChildren();
  const [w, h] = size(svg);
  const hist = doc.history;
  const t0 = hist.length ? hist[0].t : Date.now() / 1000;
  const t1 = Math.max(hist.length ? hist[hist.length - 1].t : t0, t0 + 10);  // ten seconds at least
  const counts = niceTicks(0, Math.max(1, ...hist.map(p => p.received)), 4, true);
  const x = t => PAD.l + (w - PAD.l - PAD.r) * (t - t0) / (t1 - t0);
  const y = v => PAD.t + (h - PAD.t - PAD.b) * (1 - v / counts.hi);
  yAxis(svg, w, counts, y);
  const clock = timeTicks(t0, t1);
  for (const t of clock.ticks) {
    el("line", { x1: x(t), x2: x(t), y1: h - PAD.b, y2: h - PAD.b + 4, class: "axis" }, svg);
    const tick = el("text", { x: x(t), y: h - PAD.b + 16, "text-anchor": "middle", class: "label tick x-tick" }, svg);
    tick.textContent = clock.label(t);
  }
  el("line", { x1: PAD.l, x2: w - PAD.r, y1: h - PAD.b, y2: h - PAD.b, class: "axis" }, svg);
  const series = [["accepted", "#1a9850"], ["duplicate", "#fdae61"], ["rejected", "#d73027"]];
  series.forEach(([name, colour], i) => {
    if (hist.length) {
      el("polyline", { points: hist.map(p => `${x(p.t)},${y(p[name])}`).join(" "), fill: "none", stroke: colour,
                       "stroke-width": 2, "data-series": name }, svg);
    }
    const key = el("text", { x: PAD.l + 8 + i * 90, y: PAD.t - 8, style: `fill:${colour}`, class: "label key" }, svg);
    key.textContent = name;
  });
  axisTitles(svg, w, h, "clock time (this browser's)", "reports since the store began");
  const table = document.getElementById("counters");
  table.replaceChildren();
  for (const [k, v] of Object.entries(doc.counters)) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  }
  // epochs budgeted boards skipped (device.budget spent, no memo of the value), per link
  for (const [link, n] of Object.entries(doc.skipped_epochs || {})) {
    const tr = table.insertRow();
    tr.insertCell().textContent = `skipped epochs (${link})`;
    tr.insertCell().textContent = n;
  }
  // devices whose state went back (their sequence started again: a deleted state file, a reflash)
  const resets = doc.state_resets;
  if (resets && resets.events) {
    const tr = table.insertRow();
    tr.insertCell().textContent = "state resets (devices)";
    const ids = resets.newest.slice(0, 5).map(r => r.device_id).join(", ");
    tr.insertCell().textContent = `${resets.events} (${resets.devices}: ${ids}${resets.devices > 5 ? ", ..." : ""})`;
  }
  drawEpochs(doc.devices_per_epoch);
}

function drawEpochs(epochs) {
  const svg = document.getElementById("epochs-chart");
  svg.replaceChildren();
  const [w, h] = size(svg);
  const devices = niceTicks(0, Math.max(1, ...epochs.map(e => e.devices)), 4, true);
  const y = v => PAD.t + (h - PAD.t - PAD.b) * (1 - v / devices.hi);
  yAxis(svg, w, devices, y);
  const bw = (w - PAD.l - PAD.r) / Math.max(epochs.length, 1);
  epochs.forEach((e, i) => {
    const bar = el("rect", { x: PAD.l + i * bw + 1, width: Math.max(bw - 2, 1), y: y(e.devices),
                             height: y(0) - y(e.devices), class: "bar", "data-epoch": e.epoch,
                             "data-devices": e.devices }, svg);
    el("title", {}, bar).textContent = `epoch ${e.epoch}: ${e.devices} devices`;
  });
  slotLabels(svg, h, epochs.length, bw, i => String(epochs[i].epoch),
             Math.max(1, ...epochs.map(e => String(e.epoch).length)));
  axisTitles(svg, w, h, "epoch", "devices with an accepted report");
}

// One row per broker: up or down, failed attempts by cause, the last failure's text.
function drawBrokers(brokers) {
  const table = document.getElementById("brokers");
  table.replaceChildren();
  if (!brokers.length) {
    table.insertRow().insertCell().textContent = "no MQTT broker (serial only)";
    return;
  }
  for (const b of brokers) {
    const failed = Object.entries(b.failures).filter(([, n]) => n > 0).map(([c, n]) => `${c} ${n}`);
    const rows = [["broker", `${b.broker}${b.tls ? " (TLS)" : ""}`],
                  ["state", b.connected ? "connected" : "NOT CONNECTED (retrying)", b.connected ? "" : "error"],
                  ["failed attempts", failed.length ? failed.join(", ") : "none"],
                  ["last failure", b.last_error === null ? "–"
                    : `${new Date(b.last_error_at * 1000).toLocaleTimeString()}: ${b.last_error}`]];
    for (const [k, v, cls = ""] of rows) {
      const tr = table.insertRow();
      tr.className = cls;
      tr.insertCell().textContent = k;
      tr.insertCell().textContent = v;
    }
    table.dataset.connected = b.connected;
  }
}

const VERDICT = {
  weak: "WEAK: the attacker is right at least half the time, or has gained half the room above the prior",
  moderate: "moderate: at least 10 points above what the prior alone gives",
  strong: "strong: close to what the prior alone gives",
};

function verdictCell(tr, strength) {
  const td = tr.insertCell();
  td.textContent = strength || "–";
  if (strength) {
    td.className = `verdict ${strength}`;
    td.title = VERDICT[strength];
  }
  return td;
}

function drawConfig(cfg) {
  const table = document.getElementById("config");
  table.replaceChildren();
  const rows = [["config id", cfg.config_id], ["protocol", cfg.protocol || "mss"], ["k (categories)", cfg.k],
                ["epsilon", cfg.epsilon], ["eps_effective", fmt(cfg.eps_effective, 6)]];
  if (cfg.moduli) rows.push(["moduli", cfg.moduli.join(", ")], ["subset sizes", cfg.omegas.join(", ")]);
  rows.push(["bits per report", `${cfg.bits_per_report.max} max, ${fmt(cfg.bits_per_report.mean, 1)} mean`]);
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  }
  const audit = document.getElementById("audit");
  audit.replaceChildren();
  const head = audit.insertRow();
  for (const c of ["prior", "best attacker", "paper's rule", "no information", "any-protocol ceiling", "verdict"]) {
    head.insertCell().textContent = c;
  }
  for (const a of cfg.audit) {
    const tr = audit.insertRow();
    for (const v of [a.prior, fmt(a.bayes_exact, 5), fmt(a.paper_rule, 5), fmt(a.no_information, 5), fmt(a.ceiling, 5)]) {
      tr.insertCell().textContent = v;
    }
    verdictCell(tr, a.strength);
  }
  drawDeployment(cfg.deployment);
}

function drawDeployment(dep) {
  const table = document.getElementById("loss");
  const summary = document.getElementById("loss-summary");
  table.replaceChildren();
  if (!dep) {
    summary.textContent = "–";
    return;
  }
  if (dep.error && !dep.attacker) {
    summary.textContent = dep.error;
    summary.className = "note error";
    return;
  }
  const budget = dep.budget ? `budget ${dep.budget.epsilon} per ${dep.budget.days} days` : "no budget";
  const irr = dep.irr ? `IRR epsilon ${dep.irr.epsilon}` : "no IRR";
  const span = dep.days >= 1 ? `${fmt(dep.days, 1)} days` : `${fmt(dep.days * 24, 1)} hours`;
  summary.textContent = `${dep.epochs} epoch${dep.epochs === 1 ? "" : "s"} of ${dep.period_s} s (${span}, since the ${dep.counted_from}),`
    + ` memoize ${dep.memoize ? "on" : "off"}, ${budget}, ${irr}`
    + (dep.source === "config" ? "" : ` (${dep.source})`) + (dep.error ? ` · ${dep.error}` : "");
  summary.className = dep.error ? "note error" : "note";
  const head = table.insertRow();
  for (const c of ["prior", "fresh draws", "epsilon spent", "attacker now [95% CI]", "no information", "ceiling", "verdict"]) {
    head.insertCell().textContent = c;
  }
  let capped = false;
  for (const a of dep.attacker || []) {
    const tr = table.insertRow();
    tr.dataset.strength = a.strength;
    // a simulated figure carries its interval, and is never shown above its exact ceiling (bound):
    // a measurement above it by sampling noise is shown at it, marked † (docs/privacy.md section 3)
    const how = a.exact ? " (exact)"
      : `${a.capped ? "†" : ""} [${fmt(a.ci[0], 3)}, ${fmt(a.ci[1], 3)}] (${a.trials} devices)`;
    capped = capped || Boolean(a.capped);
    for (const v of [a.prior, a.fresh_draws, fmt(a.epsilon_spent, 2), (a.lower_bound ? "≥ " : "") + fmt(a.success, 3) + how,
                     fmt(a.no_information, 3), fmt(a.bound ?? a.ceiling, 3)]) {
      tr.insertCell().textContent = v;
    }
    verdictCell(tr, a.strength);
  }
  if (capped) {
    summary.textContent += " · †: simulated above the exact ceiling by sampling noise (its interval as measured), shown at it";
  }
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

// top N, estimate, order and intervals as chosen on the page; "auto" leaves the choice to the API
// (the simplex projection, item order for an ordinal config, simultaneous intervals when fewer
// than k items are shown)
function estimatesQuery() {
  const query = [`top=${document.getElementById("top").value}`];
  for (const id of ["post", "order", "simultaneous"]) {
    const v = document.getElementById(id).value;
    if (v !== "auto") query.push(`${id}=${v}`);
  }
  return `api/estimates?${query.join("&")}`;
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [est, ctr, cfg] = await Promise.all(
      [getJSON(estimatesQuery()), getJSON("api/counters"), getJSON("api/config")]);
    drawEstimates(est);
    drawCounters(ctr);
    drawBrokers(ctr.brokers);
    drawConfig(cfg);
    const campaign = cfg.campaign || "unnamed campaign";  // null: a store that records no campaign
    document.getElementById("campaign").textContent = campaign;
    document.getElementById("config-id").textContent = `config ${cfg.config_id}`;
    document.title = `${campaign} · mss-iot live fleet estimates`;
    // what was decoded (one epoch, each device once; or pooled, and how the errors were widened) and why
    const decoded = est.decoded ? `decoded ${est.decoded} (${est.selection})` : `${est.n} reports decoded`;
    const down = ctr.brokers.filter(b => !b.connected);
    status.textContent = `${decoded} · updated ${new Date(est.updated * 1000).toLocaleTimeString()}`
      + (est.central ? ` · ${est.central.text}` : "")  // a shuffled store: the guarantee, its regime and devices
      + (est.error ? ` · STALE: ${est.error}` : "")
      + down.map(b => ` · broker ${b.broker} NOT CONNECTED: ${b.last_error || "connecting"}`).join("");
    status.className = est.error || down.length ? "error" : "";
    document.body.dataset.reports = est.n;
  } catch (err) {
    status.textContent = `cannot reach the aggregator (${err.message}); retrying`;
    status.className = "error";
  }
}

for (const id of ["top", "post", "order", "simultaneous"]) document.getElementById(id).addEventListener("change", refresh);
refresh();
setInterval(refresh, REFRESH_MS);
