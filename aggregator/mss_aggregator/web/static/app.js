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
  const pad = { l: 50, r: 10, t: 10, b: 30 };
  const hi = Math.max(0.01, ...rows.map(r => (highOf(r) === null ? r.estimate : highOf(r))));
  const lo = Math.min(0, ...rows.map(r => (lowOf(r) === null ? r.estimate : lowOf(r))));
  const y = v => pad.t + (h - pad.t - pad.b) * (hi - v) / (hi - lo);
  const bw = (w - pad.l - pad.r) / Math.max(rows.length, 1);
  el("line", { x1: pad.l, x2: w - pad.r, y1: y(0), y2: y(0), class: "axis" }, svg);
  for (const t of [lo, (lo + hi) / 2, hi]) {
    const tick = el("text", { x: pad.l - 4, y: y(t) + 3, "text-anchor": "end", class: "label" }, svg);
    tick.textContent = t.toFixed(3);
  }
  rows.forEach((r, i) => {
    const x = pad.l + i * bw;
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
    const label = el("text", { x: x + bw / 2, y: h - pad.b + 14, "text-anchor": "middle", class: "label" }, svg);
    label.textContent = name(r);
  });
  document.getElementById("view-title").textContent =
    `${rows.length} of ${view.k} items, `
    + `${view.order === "item" ? "in item order" : "largest first"}, ${sim ? "simultaneous " : ""}95% CI, `
    + (doc.post === "none" ? "unbiased estimates" : `estimates post-processed: ${doc.post}`);
  document.getElementById("caption").textContent = view.caption.join(" · ");
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

function polyline(svg, points, colour, label, w, h, pad, xmax, ymax) {
  if (!points.length) return;
  const x0 = points[0][0];
  const span = Math.max(xmax - x0, 1);
  const pts = points.map(([t, v]) =>
    `${pad.l + (w - pad.l - pad.r) * (t - x0) / span},${pad.t + (h - pad.t - pad.b) * (1 - v / ymax)}`);
  el("polyline", { points: pts.join(" "), fill: "none", stroke: colour, "stroke-width": 2, "data-series": label }, svg);
}

function drawCounters(doc) {
  const svg = document.getElementById("counters-chart");
  svg.replaceChildren();
  const [w, h] = size(svg);
  const pad = { l: 50, r: 10, t: 10, b: 20 };
  const hist = doc.history;
  const ymax = Math.max(1, ...hist.map(p => p.received));
  const xmax = hist.length ? hist[hist.length - 1].t : 1;
  const series = [["accepted", "#1a9850"], ["duplicate", "#fdae61"], ["rejected", "#d73027"]];
  series.forEach(([name, colour], i) => {
    polyline(svg, hist.map(p => [p.t, p[name]]), colour, name, w, h, pad, xmax, ymax);
    const key = el("text", { x: pad.l + 8 + i * 90, y: pad.t + 10, style: `fill:${colour}`, class: "label" }, svg);
    key.textContent = name;
  });
  const tick = el("text", { x: pad.l - 4, y: pad.t + 8, "text-anchor": "end", class: "label" }, svg);
  tick.textContent = ymax;
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
  drawEpochs(doc.devices_per_epoch);
}

function drawEpochs(epochs) {
  const svg = document.getElementById("epochs-chart");
  svg.replaceChildren();
  const [w, h] = size(svg);
  const pad = { l: 40, r: 10, t: 10, b: 20 };
  const ymax = Math.max(1, ...epochs.map(e => e.devices));
  const bw = (w - pad.l - pad.r) / Math.max(epochs.length, 1);
  epochs.forEach((e, i) => {
    const bh = (h - pad.t - pad.b) * e.devices / ymax;
    const bar = el("rect", { x: pad.l + i * bw + 1, width: Math.max(bw - 2, 1), y: h - pad.b - bh, height: bh,
                             class: "bar", "data-epoch": e.epoch, "data-devices": e.devices }, svg);
    el("title", {}, bar).textContent = `epoch ${e.epoch}: ${e.devices} devices`;
  });
  const tick = el("text", { x: pad.l - 4, y: pad.t + 8, "text-anchor": "end", class: "label" }, svg);
  tick.textContent = ymax;
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
  for (const c of ["prior", "fresh draws", "epsilon spent", "attacker now", "no information", "ceiling at epsilon spent", "verdict"]) {
    head.insertCell().textContent = c;
  }
  for (const a of dep.attacker || []) {
    const tr = table.insertRow();
    tr.dataset.strength = a.strength;
    const how = a.exact ? " (exact)" : a.lower_bound ? "" : ` (${a.trials} devices)`;
    for (const v of [a.prior, a.fresh_draws, fmt(a.epsilon_spent, 2), (a.lower_bound ? "≥ " : "") + fmt(a.success, 3) + how,
                     fmt(a.no_information, 3), fmt(a.ceiling, 3)]) {
      tr.insertCell().textContent = v;
    }
    verdictCell(tr, a.strength);
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
    document.getElementById("campaign").textContent = `config ${cfg.config_id}`;
    const epoch = est.epoch === null ? "" : ` of epoch ${est.epoch} (${est.selection})`;
    const down = ctr.brokers.filter(b => !b.connected);
    status.textContent = `${est.n} reports decoded${epoch} · updated ${new Date(est.updated * 1000).toLocaleTimeString()}`
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
