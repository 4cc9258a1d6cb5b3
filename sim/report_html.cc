// Replay report as one self-contained HTML page; see report.h.
#include <cmath>
#include <string>

#include "sim/report.h"

namespace ari::sim {
namespace {

constexpr std::string_view kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>drawing</title>
<style>
body{font:13px sans-serif;margin:16px;background:#fff;color:#222}
canvas{border:1px solid #ccc;display:block;margin:6px 0 18px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#f0f0f0}td:first-child{text-align:left}
</style></head><body>
<h1>ARI replay report</h1>
<div id="meta"></div>
<table id="classes"></table>
<h2>Temperature and ambient</h2><canvas id="temp" width="1100" height="300"></canvas>
<h2>Decisions</h2><canvas id="dec" width="1100" height="210"></canvas>
<h2>Latency per request against its deadline</h2><canvas id="lat" width="1100" height="320"></canvas>
<h2>Completion latency CDF per class</h2><canvas id="cdf" width="1100" height="300"></canvas>
<script>
window.onerror = function(m){ document.title = "error: " + m; };
const R = )HTML";

constexpr std::string_view kScript = R"HTML(;
const CLS = ["CRITICAL","HIGH","NORMAL","BACKGROUND"];
const COL = {CRITICAL:"#d62728",HIGH:"#ff7f0e",NORMAL:"#1f77b4",BACKGROUND:"#7f7f7f"};
const BANDCOL = ["#e8f4e8","#fff4d6","#ffe0cc","#ffd0d0","#f0d0ff","#ddd"];
function esc(s){ return String(s).replace(/[&<>]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;"}[c])); }
function axes(ctx, W, H, m, x0, x1, y0, y1, xl, yl, logy) {
  const fx = x => m.l + (x - x0) / ((x1 - x0) || 1) * (W - m.l - m.r);
  const ty = y => logy ? Math.log10(Math.max(y, 1e-3)) : y;
  const a = ty(y0), b = ty(y1);
  const fy = y => H - m.b - (ty(y) - a) / ((b - a) || 1) * (H - m.t - m.b);
  ctx.strokeStyle = "#444"; ctx.fillStyle = "#222"; ctx.font = "11px sans-serif";
  ctx.beginPath(); ctx.moveTo(m.l, m.t); ctx.lineTo(m.l, H - m.b); ctx.lineTo(W - m.r, H - m.b); ctx.stroke();
  for (let i = 0; i <= 5; i++) {  // tick labels centred under their tick: never cut
    const x = x0 + (x1 - x0) * i / 5;
    ctx.textAlign = "center"; ctx.fillText(x.toFixed(x1 - x0 < 10 ? 1 : 0), fx(x), H - m.b + 14);
    let y = logy ? Math.pow(10, a + (b - a) * i / 5) : y0 + (y1 - y0) * i / 5;
    ctx.textAlign = "right";
    if (y1 > y0) ctx.fillText(y < 10 ? y.toFixed(2) : y.toFixed(0), m.l - 4, fy(y) + 4);
  }
  ctx.textAlign = "center"; ctx.fillText(xl, (m.l + W - m.r) / 2, H - 4);
  ctx.textAlign = "left"; if (yl) ctx.fillText(yl, 4, m.t - 6);
  return [fx, fy];
}
// Legend above the plot area (y < m.t), so it never covers data.
function legend(ctx, x, y, items) {
  ctx.font = "11px sans-serif"; ctx.textAlign = "left";
  for (const [label, col, mark] of items) {
    ctx.fillStyle = col;
    if (mark) ctx.fillText(mark, x, y); else ctx.fillRect(x, y - 8, 14, 8);
    ctx.fillStyle = "#222"; ctx.fillText(label, x + 18, y);
    const mt = ctx.measureText(label);
    x += 30 + (mt && mt.width ? mt.width : 7 * label.length);
  }
}
function tempPlot() {
  const c = document.getElementById("temp"), ctx = c.getContext("2d"), W = c.width, H = c.height;
  const m = {l:52, r:40, t:34, b:34}, S = R.samples;
  if (!S.length) return;
  const t1 = S[S.length - 1][0];
  let lo = 1e9, hi = -1e9;
  for (const s of S) { lo = Math.min(lo, s[1], s[2]); hi = Math.max(hi, s[1], s[2]); }
  for (const e of R.band_enter_c) if (e > lo - 5 && e < hi + 5) { lo = Math.min(lo, e); hi = Math.max(hi, e); }
  lo = Math.floor(lo - 2); hi = Math.ceil(hi + 2);
  const [fx, fy] = axes(ctx, W, H, m, 0, t1, lo, hi, "time (s)", "deg C", false);
  for (let i = 0; i + 1 < S.length; i++) {  // band in force: background strip
    ctx.fillStyle = BANDCOL[S[i][5] % BANDCOL.length];
    ctx.fillRect(fx(S[i][0]), m.t, Math.max(1, fx(S[i + 1][0]) - fx(S[i][0])), H - m.t - m.b);
  }
  ctx.setLineDash([4, 3]); ctx.strokeStyle = "#999";
  R.band_enter_c.forEach((e, i) => { if (i > 0 && e > lo && e < hi) {
    ctx.beginPath(); ctx.moveTo(m.l, fy(e)); ctx.lineTo(W - m.r, fy(e)); ctx.stroke();
    ctx.fillStyle = "#666"; ctx.textAlign = "right"; ctx.fillText(R.bands[i] + " >= " + e, W - m.r - 2, fy(e) - 3); } });
  ctx.setLineDash([]);
  for (const [k, col] of [[1, "#c00"], [2, "#06c"]]) {
    ctx.strokeStyle = col; ctx.lineWidth = 1.5; ctx.beginPath();
    S.forEach((s, i) => { i ? ctx.lineTo(fx(s[0]), fy(s[k])) : ctx.moveTo(fx(s[0]), fy(s[k])); });
    ctx.stroke();
  }
  ctx.lineWidth = 1;
  legend(ctx, m.l + 80, 14, [["die", "#c00"], ["ambient", "#06c"]].concat(
    R.bands.map((b, i) => ["band " + b, BANDCOL[i % BANDCOL.length]])));
}
function decPlot() {
  const c = document.getElementById("dec"), ctx = c.getContext("2d"), W = c.width, H = c.height;
  const m = {l:90, r:40, t:30, b:34}, D = R.decisions, t1 = R.summary.duration_s || 1;
  const [fx] = axes(ctx, W, H, m, 0, t1, 0, 0, "time (s)", "", false);
  const rows = ["band", "class", "precision", "layer drop", "memory"], rh = (H - m.t - m.b) / rows.length;
  rows.forEach((r, i) => { ctx.fillStyle = "#222"; ctx.textAlign = "left"; ctx.fillText(r, 4, m.t + rh * i + rh / 2 + 4); });
  legend(ctx, m.l, 14, [["warm", "#f5c242"], ["hot", "#f08030"], ["critical", "#d62728"]].concat(
    CLS.map(k => [k, COL[k]]), [["W8A16", "#2ca02c"], ["W4A8", "#9467bd"], ["layers dropped", "rgba(214,39,40,0.6)"],
    ["memory band", "#8c564b"], ["idle / none", "#eee"]]));
  for (let i = 0; i < D.length; i++) {
    const d = D[i], x0 = fx(d.t_s), x1 = fx(i + 1 < D.length ? D[i + 1].t_s : t1), w = Math.max(1, x1 - x0);
    const drop = /drop (\d+)/.exec(d.knobs), dr = drop ? +drop[1] : 0;
    const cols = [BANDCOL[d.band % BANDCOL.length].replace("#", "#") , d.idle ? "#eee" : COL[d.class],
      d.knobs.indexOf("W4A8") >= 0 ? "#9467bd" : "#2ca02c", dr ? "rgba(214,39,40," + Math.min(1, 0.2 + dr / 6) + ")" : "#eee",
      d.memory_band >= 0 ? "#8c564b" : "#eee"];
    if (d.band > 0) cols[0] = ["#fff", "#f5c242", "#f08030", "#d62728", "#800080"][Math.min(4, d.band)];
    cols.forEach((col, r) => { ctx.fillStyle = col; ctx.fillRect(x0, m.t + rh * r + 2, w, rh - 4); });
  }
}
function latPlot() {
  const c = document.getElementById("lat"), ctx = c.getContext("2d"), W = c.width, H = c.height;
  const m = {l:52, r:40, t:34, b:34}, Q = R.requests, t1 = R.summary.duration_s || 1;
  let hi = 1;
  for (const q of Q) hi = Math.max(hi, q.completion_s, q.deadline_s);
  const [fx, fy] = axes(ctx, W, H, m, 0, t1, 0.05, hi * 1.2, "arrival (s)", "latency (s, log)", true);
  for (const q of Q) {
    const x = fx(q.arrival_s);
    if (q.deadline_s > 0) { ctx.strokeStyle = "#000"; ctx.beginPath(); ctx.moveTo(x - 4, fy(q.deadline_s)); ctx.lineTo(x + 4, fy(q.deadline_s)); ctx.stroke(); }
    if (q.completion_s < 0) continue;
    const y = fy(Math.max(q.completion_s, 0.05));
    ctx.fillStyle = COL[q.class] || "#000";
    if (q.deadline_missed) { ctx.strokeStyle = COL[q.class]; ctx.beginPath(); ctx.moveTo(x - 4, y - 4); ctx.lineTo(x + 4, y + 4); ctx.moveTo(x + 4, y - 4); ctx.lineTo(x - 4, y + 4); ctx.stroke(); }
    else { ctx.beginPath(); ctx.arc(x, y, 3, 0, 7); ctx.fill(); }
  }
  legend(ctx, m.l + 120, 14, CLS.map(k => [k, COL[k], "\u25cf"]).concat([["deadline", "#000", "-"], ["missed", "#000", "x"]]));
}
function cdfPlot() {
  const c = document.getElementById("cdf"), ctx = c.getContext("2d"), W = c.width, H = c.height;
  const m = {l:52, r:40, t:34, b:34};
  let hi = 1;
  for (const q of R.requests) if (q.status == "DONE") hi = Math.max(hi, q.completion_s);
  const [fx, fy] = axes(ctx, W, H, m, 0, hi, 0, 1, "completion latency (s)", "fraction", false);
  CLS.forEach((k, i) => {
    const v = R.requests.filter(q => q.class == k && q.status == "DONE").map(q => q.completion_s).sort((a, b) => a - b);
    if (!v.length) return;
    ctx.strokeStyle = COL[k]; ctx.lineWidth = 2; ctx.beginPath(); ctx.moveTo(fx(0), fy(0));
    v.forEach((x, j) => { ctx.lineTo(fx(x), fy(j / v.length)); ctx.lineTo(fx(x), fy((j + 1) / v.length)); });
    ctx.stroke(); ctx.lineWidth = 1;
  });
  legend(ctx, m.l + 120, 14, CLS.map(k => [k + " (" + R.requests.filter(q => q["class"] == k && q.status == "DONE").length + ")", COL[k]]));
}
function tables() {
  const s = R.summary;
  document.getElementById("meta").innerHTML = "log <b>" + esc(R.log) + "</b> (" + esc(R.scenario) +
    "), policy <b>" + esc(R.policy) + "</b>, " + s.duration_s.toFixed(0) + " s, peak die " +
    s.peak_die_c.toFixed(1) + " C at " + s.peak_t_s.toFixed(0) + " s, energy " + s.energy_j.toFixed(0) +
    " J, quality loss " + s.quality_loss.toFixed(3) + "<br>cost model: " + esc(R.cost_model);
  let h = "<tr><th>class</th><th>requests</th><th>done</th><th>deadline misses</th><th>TTFT p50</th><th>p95</th><th>p99</th><th>completion p50</th><th>p95</th><th>p99</th></tr>";
  for (const c of R.classes) h += "<tr><td>" + c["class"] + "</td><td>" + c.requests + "</td><td>" + c.done +
    "</td><td>" + c.deadline_misses + "</td>" + [c.ttft_s.p50, c.ttft_s.p95, c.ttft_s.p99, c.completion_s.p50,
    c.completion_s.p95, c.completion_s.p99].map(x => "<td>" + x.toFixed(2) + "</td>").join("") + "</tr>";
  document.getElementById("classes").innerHTML = h;
}
tables(); tempPlot(); decPlot(); latPlot(); cdfPlot();
if (!document.title.startsWith("error")) document.title = "ok";
</script></body></html>
)HTML";

}  // namespace

std::string ReportToHtml(const ReplayReport& report) {
  std::string json = ReportToJson(report);
  // The band thresholds for the plot, spliced in before the closing brace.
  std::string enter = ",\"band_enter_c\":[";
  for (size_t i = 0; i < report.band_enter_c.size(); ++i) {
    if (i) enter += ',';
    const double e = report.band_enter_c[i];
    enter += std::isfinite(e) ? std::to_string(e) : std::string("-1e9");
  }
  enter += "]}";
  while (!json.empty() && (json.back() == '\n' || json.back() == '}')) {
    const bool brace = json.back() == '}';
    json.pop_back();
    if (brace) break;
  }
  std::string html(kHead);
  html += json + enter;
  html += kScript;
  return html;
}

}  // namespace ari::sim
