// ari-sim compare as one self-contained HTML page; see compare.h.
#include <string>

#include "sim/compare.h"

namespace ari::sim {
namespace {

constexpr std::string_view kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>drawing</title>
<style>
body{font:13px sans-serif;margin:16px;background:#fff;color:#222}
canvas{border:1px solid #ccc;display:block;margin:6px 0 18px}
table{border-collapse:collapse;margin:8px 0;font-size:11px}td,th{border:1px solid #ccc;padding:1px 4px;text-align:right}
th{background:#f0f0f0}td.l{text-align:left}td.bad{background:#fdd}
</style></head><body>
<h1>ARI governor vs baselines</h1>
<div id="meta"></div>
<table id="runs"></table>
<div id="plots"></div>
<script>
window.onerror = function(m){ document.title = "error: " + m; };
const C = )HTML";

constexpr std::string_view kScript = R"HTML(;
const PCOL = ["#1f77b4","#d62728","#2ca02c","#9467bd","#ff7f0e","#8c564b","#e377c2","#17becf"];
const BANDC = ["#e8f4e8","#f5c242","#f08030","#d62728","#800080"];
const CLS = ["CRITICAL","HIGH","NORMAL","BACKGROUND"];
function esc(s){ return String(s).replace(/[&<>]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;"}[c])); }
function f(x, d){ return (+x).toFixed(d); }
function axes(ctx, W, H, m, x0, x1, y0, y1, xl, yl) {
  const fx = x => m.l + (x - x0) / ((x1 - x0) || 1) * (W - m.l - m.r);
  const fy = y => H - m.b - (y - y0) / ((y1 - y0) || 1) * (H - m.t - m.b);
  ctx.strokeStyle = "#444"; ctx.fillStyle = "#222"; ctx.font = "11px sans-serif";
  ctx.beginPath(); ctx.moveTo(m.l, m.t); ctx.lineTo(m.l, H - m.b); ctx.lineTo(W - m.r, H - m.b); ctx.stroke();
  for (let i = 0; i <= 5; i++) {
    const x = x0 + (x1 - x0) * i / 5, y = y0 + (y1 - y0) * i / 5;
    ctx.textAlign = "center"; ctx.fillText(x.toFixed(0), fx(x), H - m.b + 14);
    if (y1 > y0) { ctx.textAlign = "right"; ctx.fillText(y.toFixed(0), m.l - 4, fy(y) + 4); }
  }
  ctx.textAlign = "center"; ctx.fillText(xl, (m.l + W - m.r) / 2, H - 4);
  ctx.textAlign = "left"; ctx.fillText(yl, 4, m.t - 6);
  return [fx, fy];
}
function legend(ctx, x, y, items) {  // above the plot area: never over data
  ctx.font = "11px sans-serif"; ctx.textAlign = "left";
  for (const [label, col] of items) {
    ctx.fillStyle = col; ctx.fillRect(x, y - 8, 14, 8); ctx.fillStyle = "#222";
    ctx.fillText(label, x + 18, y); const mt = ctx.measureText(label);
    x += 30 + (mt && mt.width ? mt.width : 7 * label.length);
  }
}
function table() {
  document.getElementById("meta").innerHTML = "hardware <b>" + esc(C.hardware || "(none)") +
    "</b>, model <b>" + esc(C.model || "-") + "</b>; trip points " + C.trips_c.map(t => t + " C").join(", ") +
    "<br>cost model: " + esc(C.cost_model) + "<br>quality: " + (C.runs.length && C.runs[0].quality_measured ?
    "measured table" : "proxy (share W4A8 + 0.1 x layers dropped)");
  let h = "<tr><th>log</th><th>policy</th>" + CLS.map(k => "<th>" + k + " misses</th><th>TTFT p95</th><th>compl. p95</th>").join("") +
    "<th>peak die C</th><th>policy limit C</th><th>hw throttled s</th><th>quality loss</th><th>energy J</th></tr>";
  for (const r of C.runs) {
    h += "<tr><td class=l>" + esc(r.log) + "</td><td class=l>" + esc(r.policy) + "</td>";
    for (const c of r.classes) h += "<td" + (c["class"] == "CRITICAL" && c.deadline_misses ? " class=bad" : "") + ">" +
      c.deadline_misses + "</td><td>" + f(c.ttft_p95_s, 2) + "</td><td>" + f(c.completion_p95_s, 2) + "</td>";
    h += "<td" + (r.peak_die_c >= r.limit_c ? " class=bad" : "") + ">" + f(r.peak_die_c, 1) + "</td><td>" + f(r.limit_c, 0) +
      "</td><td" + (r.hw_throttle_s > 0 ? " class=bad" : "") + ">" + f(r.hw_throttle_s, 0) + "</td><td>" +
      f(r.quality_loss, 3) + "</td><td>" + f(r.energy_j, 0) + "</td></tr>";
  }
  document.getElementById("runs").innerHTML = h;
}
function canvas(title, h) {
  const d = document.getElementById("plots"), t = document.createElement("h2"), c = document.createElement("canvas");
  t.textContent = title; c.width = 1100; c.height = h; d.appendChild(t); d.appendChild(c); return c;
}
function tempPlot(log) {
  const runs = C.runs.filter(r => r.log == log), c = canvas("Die temperature, " + log, 330);
  const ctx = c.getContext("2d"), W = c.width, H = c.height, m = {l:50, r:40, t:36, b:34};
  let t1 = 1, lo = 1e9, hi = -1e9;
  for (const r of runs) for (const s of r.temps) { t1 = Math.max(t1, s[0]); lo = Math.min(lo, s[1]); hi = Math.max(hi, s[1]); }
  for (const t of C.trips_c.concat(runs.map(r => r.limit_c))) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
  lo = Math.floor(lo - 2); hi = Math.ceil(hi + 2);
  const [fx, fy] = axes(ctx, W, H, m, 0, t1, lo, hi, "time (s)", "die (deg C)");
  ctx.setLineDash([5, 4]); ctx.strokeStyle = "#999"; ctx.fillStyle = "#666";
  C.trips_c.forEach((t, i) => { ctx.beginPath(); ctx.moveTo(m.l, fy(t)); ctx.lineTo(W - m.r, fy(t)); ctx.stroke();
    ctx.textAlign = "right"; ctx.fillText((i ? "critical trip " : "passive trip ") + t, W - m.r - 2, fy(t) - 3); });
  ctx.setLineDash([]);
  runs.forEach((r, i) => { ctx.strokeStyle = PCOL[i % PCOL.length]; ctx.lineWidth = 1.5; ctx.beginPath();
    r.temps.forEach((s, j) => { j ? ctx.lineTo(fx(s[0]), fy(s[1])) : ctx.moveTo(fx(s[0]), fy(s[1])); }); ctx.stroke(); });
  ctx.lineWidth = 1;
  legend(ctx, m.l + 60, 14, runs.map((r, i) => [r.policy + " (peak " + f(r.peak_die_c, 1) + " C)", PCOL[i % PCOL.length]]));
}
function decPlot(log) {
  const runs = C.runs.filter(r => r.log == log), rows = runs.length * 2, rh = 16;
  const c = canvas("Decisions per policy, " + log, 36 + 34 + rows * rh + runs.length * 6);
  const ctx = c.getContext("2d"), W = c.width, H = c.height, m = {l:190, r:40, t:36, b:34};
  let t1 = 1; for (const r of runs) t1 = Math.max(t1, r.duration_s);
  const [fx] = axes(ctx, W, H, m, 0, t1, 0, 0, "time (s)", "");
  runs.forEach((r, i) => {
    const y0 = m.t + i * (2 * rh + 6), D = r.decisions;
    ctx.fillStyle = "#222"; ctx.textAlign = "right";
    ctx.fillText(r.policy + ": band", m.l - 6, y0 + 12); ctx.fillText("precision", m.l - 6, y0 + rh + 12);
    for (let k = 0; k < D.length; k++) {
      const x0 = fx(D[k][0]), x1 = fx(k + 1 < D.length ? D[k + 1][0] : t1), w = Math.max(1, x1 - x0);
      ctx.fillStyle = BANDC[Math.min(4, D[k][1])]; ctx.fillRect(x0, y0 + 1, w, rh - 2);
      const kn = D[k][2];
      ctx.fillStyle = D[k][4] ? "#eee" : kn.indexOf("W4A8") >= 0 ? "#9467bd" : "#2ca02c";
      ctx.fillRect(x0, y0 + rh + 1, w, rh - 2);
    }
  });
  legend(ctx, m.l, 14, [["band normal", BANDC[0]], ["warm", BANDC[1]], ["hot", BANDC[2]], ["critical", BANDC[3]],
    ["W8A16", "#2ca02c"], ["W4A8", "#9467bd"], ["idle", "#eee"]]);
}
table();
for (const log of C.logs) { tempPlot(log); decPlot(log); }
if (!document.title.startsWith("error")) document.title = "ok";
</script></body></html>
)HTML";

}  // namespace

std::string CompareToHtml(const CompareReport& report) {
  std::string json = CompareToJson(report);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  std::string html(kHead);
  html += json;
  html += kScript;
  return html;
}

}  // namespace ari::sim
