/* converge-dsl run report: renders the data embedded in #report-data. No network, no library.
   A name or an id is shown as the data holds it (shownName, of the shared names.js).
   Lists are virtualised (VList, of the shared vlist.js: only visible rows exist in the DOM); the timeline is one canvas,
   drawn for the visible time window only; the search filters every list and dims the timeline. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var N = D.names, ROW = VLIST_ROW;
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fromAddress(text) { try { return decodeURIComponent(text); } catch (e) { return null; } }
  function nm(i) { return i >= 0 ? N[i] : "(engine)"; }
  /* what a model call was for: an agent's turn, its summarizer's side call, an answer */
  function purpose(m) { return m[11] === "summary" ? "summary" : m[11] === "turn" || (m[11] == null && m[12] != null) ? "turn " + m[12] : m[11] || ""; }
  function ms(s) { return s === null || s === undefined ? "" : (s * 1000).toFixed(s < 0.01 ? 2 : 0) + " ms"; }
  var query = [];  /* the search's terms (names.js' searchTerms) */

  /* -- virtualised lists (VList: the pages' shared vlist.js) ------------------------ */
  var lists = [];

  function table(host, title, heads, widths, rows, cells, onPick) {
    var sec = el("div");
    var h = el("h2", null, title + " "); var cnt = el("small", "count"); h.appendChild(cnt); sec.appendChild(h);
    if (!rows.length) { sec.appendChild(el("div", "empty", "none")); host.appendChild(sec); return null; }
    /* the head is the scrolling box's sticky first line, so that it scrolls sideways with its
       columns; head and rows are at least as wide as their columns' least widths */
    var box = el("div", "vlist"), head = el("div", "head");
    heads.forEach(function (t, j) { var s = el("span", widths[j], t); s.title = t; head.appendChild(s); });
    box.appendChild(head); sec.appendChild(box); host.appendChild(sec);
    var list = new VList(box, rows, cells, onPick, { widths: widths });
    var wide = 16 + 10 * (heads.length - 1);
    Array.prototype.forEach.call(head.children, function (s) { wide += parseFloat(getComputedStyle(s).minWidth) || 0; });
    box.style.setProperty("--row-min", wide + "px");
    function fit() { box.style.height = Math.min(260 + head.offsetHeight, rows.length * ROW + head.offsetHeight + 2 + (wide > box.clientWidth ? 16 : 0)) + "px"; }
    fit(); window.addEventListener("resize", fit);
    lists.push(list); list.filter("");
    return list;
  }

  /* -- header ---------------------------------------------------------------------- */
  var M = D.meta;
  var subject = M.pipeline || M.trace;
  $("title").textContent = "Run report: " + subject;
  $("title").title = $("title").textContent; /* whole, where a short window cuts it */
  document.title = "converge-dsl report: " + subject;
  var unfinished = M.cut_short ? "unfinished: the trace ends with line " + M.cut_short + " cut short" : "unfinished";
  var stats = [["stop", M.stop_reason || unfinished], ["cycles", M.cycles], ["facts", M.facts],
               ["events", M.events], ["time", M.duration == null ? null : ms(M.duration)],
               ["started", M.started && M.started.slice(0, 19).replace("T", " ") + " UTC"]];
  stats.forEach(function (s) {
    if (s[1] === undefined || s[1] === null) return;
    var d = el("span", "stat", s[0] + " "); d.appendChild(el("b", null, s[1])); $("stats").appendChild(d);
  });

  /* -- timeline -------------------------------------------------------------------- */
  var EX = D.ex, MC = D.mc, cv = $("timeline"), ctx = cv.getContext("2d");
  var byCycle = {}, cycles = [];
  EX.forEach(function (r) { var c = r[1]; if (!byCycle[c]) { byCycle[c] = [Infinity, -Infinity]; cycles.push(c); } byCycle[c][0] = Math.min(byCycle[c][0], r[2]); byCycle[c][1] = Math.max(byCycle[c][1], r[3]); });
  var t0 = Infinity, t1 = -Infinity;
  EX.forEach(function (r) { t0 = Math.min(t0, r[2]); t1 = Math.max(t1, r[3]); });
  var byCycleIndex = !(t1 > t0); /* no clock movement (a fake clock): one equal slot per cycle */
  var slot = {}; cycles.forEach(function (c, i) { slot[c] = i; });
  function xs(r) { return byCycleIndex ? [slot[r[1]], slot[r[1]] + 0.9] : [r[2], r[3]]; }
  if (byCycleIndex) { t0 = 0; t1 = Math.max(1, cycles.length); }
  /* lanes: greedy, per start time; a lane is free once its last bar has ended */
  var order = EX.map(function (_, i) { return i; }).sort(function (a, b) { return xs(EX[a])[0] - xs(EX[b])[0]; });
  /* a bar too narrow for its name keeps room for it after the bar in its lane (at the first
     view's scale, at the width the canvas is drawn at), so the first and last executions,
     short as they often are, get labels too; assigned again when that width changes */
  ctx.font = "11px system-ui,sans-serif";
  function inside(px, wide) { return px > wide + 8; } /* the whole name fits in the bar */
  /* the longest start of `name` that fits in `room` pixels, with "\u2026" where it is cut */
  function cut(name, room) {
    var lo = 0, hi = name.length;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (ctx.measureText(name.slice(0, mid) + "\u2026").width <= room) lo = mid; else hi = mid - 1; }
    return name.slice(0, lo) + "\u2026";
  }
  var wides = EX.map(function (r) { return ctx.measureText(nm(r[0])).width; });
  var laneWidth = -1, laneEnd = [], lane = new Int32Array(EX.length), execLane = {}, lanes = 1, LH = 24, TOP = 22;
  /* the next bar's start in each lane, so a narrow bar's name is drawn after it only where it fits */
  var nextStart = new Float64Array(EX.length);
  function assignLanes(width) {
    if (width === laneWidth) return;
    laneWidth = width; laneEnd = []; execLane = {};
    var perPx = (t1 - t0) * 1.02 / Math.max(width, 1); /* the first view: t0 to t1 and 2% */
    order.forEach(function (i) {
      var x = xs(EX[i]), k = 0, room = inside((x[1] - x[0]) / perPx, wides[i]) ? 0 : (wides[i] + 12) * perPx;
      while (k < laneEnd.length && laneEnd[k] > x[0] + 1e-9) k++;
      laneEnd[k] = Math.max(x[1] + room, x[0] + (t1 - t0) * 1e-4); lane[i] = k;
      execLane[EX[i][0] + ":" + EX[i][1]] = k;
    });
    lanes = Math.max(1, Math.min(laneEnd.length, 60)); LH = lanes <= 6 ? 24 : 16;
    nextStart.fill(Infinity); var lastIn = {};
    order.forEach(function (i) { var k = lane[i], j = lastIn[k]; if (j !== undefined) nextStart[j] = xs(EX[i])[0]; lastIn[k] = i; });
    note();
  }
  var view = [t0, t1 + (t1 - t0) * 0.02 || 1], dimmed = null;
  function size() { assignLanes(cv.clientWidth); cv.width = cv.clientWidth * devicePixelRatio; cv.height = (TOP + lanes * LH + 8) * devicePixelRatio; cv.style.height = (TOP + lanes * LH + 8) + "px"; }
  function X(t) { return (t - view[0]) / (view[1] - view[0]) * cv.clientWidth; }
  /* colours: each execution in its kind's colours (the kinds' own graph styles, as the graph
     draws them); the legend below is made from the same table, so the two always agree */
  var SUMMARY = "#7c3aed", CALL = "#f59e0b", FAILED = "#d9434f";
  var KINDS = D.kinds || [], STYLES = D.styles || {};
  var OTHER = { fill: "#e5e7eb", stroke: "#6b7280", text: "#111827", label: "other kind" };
  function styleOf(i) { return STYLES[KINDS[i]] || OTHER; }
  /* the narrowest bar: its 1-px outline on both sides still leaves its kind's fill seen
     (a short execution in a long run, or on a loaded machine, is far under a pixel) */
  var MIN_BAR = 5;
  function draw() {
    ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
    var w = cv.clientWidth, h = TOP + lanes * LH + 8;
    ctx.clearRect(0, 0, w, h); ctx.font = "11px system-ui,sans-serif";
    var labelled = []; /* the names drawn whole, in `data-labels` (what a test or a reader can check) */
    var boxes = []; /* each name drawn, whole or cut: [lane, left, right] in pixels, in `data-label-boxes` */
    var labelEnd = -Infinity; /* a cycle's label is drawn where it does not run into the one before */
    cycles.forEach(function (c, i) {
      var span = byCycleIndex ? [i, i + 0.95] : byCycle[c], a = X(span[0]), b = X(span[1]);
      if (b < 0 || a > w) return;
      ctx.fillStyle = i % 2 ? "#eef2f8" : "#f6f8fb"; ctx.fillRect(a, TOP - 4, Math.max(b - a, 2), h - TOP);
      var text = "cycle " + c, at = Math.max(a + 3, 2);
      var tw = ctx.measureText(text).width; at = Math.min(at, w - tw - 2); /* not cut at the right edge */
      if (at >= labelEnd + 6 && at >= 0) { ctx.fillStyle = "#6b7280"; ctx.fillText(text, at, 13); labelEnd = at + tw; }
    });
    /* bars in each lane's time order: a name drawn before a bar starts after what the lane
       drew last (the bar before it and that bar's name), so two names never overlap */
    var drawnTo = new Float64Array(lanes).fill(-Infinity);
    for (var n = 0; n < order.length; n++) {
      var i = order[n], r = EX[i], x = xs(r), a = X(x[0]), b = X(x[1]);
      if (b < 0 || a > w || lane[i] >= lanes) continue;
      ctx.globalAlpha = dimmed && !dimmed[r[0]] ? 0.15 : 1;
      var st = styleOf(r[0]), y = TOP + lane[i] * LH, bw = Math.max(b - a, MIN_BAR), ty = y + (LH - 5) / 2 + 4;
      ctx.fillStyle = r[5] ? FAILED : st.fill; ctx.fillRect(a, y, bw, LH - 5);
      ctx.strokeStyle = r[5] ? FAILED : st.stroke; ctx.lineWidth = 1; ctx.strokeRect(a + 0.5, y + 0.5, bw - 1, LH - 6);
      var name = nm(r[0]), left = Math.max(drawnTo[lane[i]], 0), end = a + bw;
      var after = Math.min(X(nextStart[i]), w) - end - 8, before = a - left - 8;
      var wide = ctx.measureText(name).width;
      if (inside(b - a, wide) || after >= wide || before >= wide) labelled.push(name);
      if (inside(b - a, wide)) { ctx.fillStyle = r[5] ? "#fff" : st.text; ctx.fillText(name, a + 4, ty); boxes.push([lane[i], a + 4, a + 4 + wide]); }
      else { /* beside the bar: after it, else before it (the last one, at the edge), else cut */
        ctx.fillStyle = r[5] ? FAILED : st.text;
        var text = null, at = 0;
        if (after >= wide) { text = name; at = end + 4; }
        else if (before >= wide) { text = name; at = a - 4 - wide; }
        else if (b - a > 50) { ctx.fillStyle = r[5] ? "#fff" : st.text; text = cut(name, b - a - 8); at = a + 4; }
        else if (after >= before && after > 30) { text = cut(name, after); at = end + 4; }
        else if (before > 30) { text = cut(name, before); at = a - 4 - ctx.measureText(text).width; }
        if (text !== null) {
          var tw = ctx.measureText(text).width; ctx.fillText(text, at, ty); boxes.push([lane[i], at, at + tw]);
          if (at >= end) end = at + tw;
        }
      }
      drawnTo[lane[i]] = end;
    }
    ctx.fillStyle = "#f59e0b";
    for (var j = 0; j < MC.length; j++) {
      var m = MC[j], k = execLane[m[1] + ":" + m[10]];
      if (k === undefined || k >= lanes) continue;
      var ma = byCycleIndex ? X(slot[m[10]]) : X(m[3]), mb = byCycleIndex ? ma + 3 : X(m[4]);
      if (mb < 0 || ma > w) continue;
      ctx.globalAlpha = dimmed && !dimmed[m[1]] ? 0.15 : 1;
      ctx.fillStyle = m[5] !== "ok" ? FAILED : m[11] === "summary" ? SUMMARY : CALL;
      ctx.fillRect(ma, TOP + k * LH + LH - 8, Math.max(mb - ma, 2), 3);
    }
    ctx.globalAlpha = 1;
    cv.setAttribute("data-labels", JSON.stringify(labelled)); cv.setAttribute("data-label-boxes", JSON.stringify(boxes));
    cv.setAttribute("data-width", String(w)); /* the width drawn for, to compare with the box's */
  }
  function hit(px, py) {
    var k = Math.floor((py - TOP) / LH); if (k < 0) return null;
    var t = view[0] + px / cv.clientWidth * (view[1] - view[0]), tol = 3 / cv.clientWidth * (view[1] - view[0]);
    for (var j = 0; j < MC.length; j++) { var m = MC[j]; if (execLane[m[1] + ":" + m[10]] === k && (py - TOP) % LH > LH - 9 && !byCycleIndex && m[3] - tol <= t && t <= m[4] + tol) return (m[11] === "summary" ? "summary call " + m[0] + " (" + m[2] + ") by the summarizer of " : "model call " + m[0] + " (" + m[2] + ") by ") + nm(m[1]) + (m[11] === "turn" ? ", turn " + m[12] : "") + "\n" + m[5] + (m[9] ? " HTTP " + m[9] : "") + ", " + ms(m[4] - m[3]) + ", " + m[6] + " attempt(s), " + (m[7] + m[8]) + " tokens"; }
    for (var i = 0; i < EX.length; i++) { var x = xs(EX[i]); if (lane[i] === k && x[0] - tol <= t && t <= x[1] + tol) { var r = EX[i]; return nm(r[0]) + " \u2014 cycle " + r[1] + "\n" + (r[5] ? "failed: " + r[5] : r[4] + " proposal(s)") + (byCycleIndex ? "" : ", " + ms(r[3] - r[2])); } }
    return null;
  }
  var drag = null, tip = $("tip");
  cv.addEventListener("wheel", function (e) {
    e.preventDefault(); var t = view[0] + e.offsetX / cv.clientWidth * (view[1] - view[0]), f = e.deltaY > 0 ? 1.25 : 0.8;
    view = [t - (t - view[0]) * f, t + (view[1] - t) * f]; draw();
  }, { passive: false });
  cv.addEventListener("mousedown", function (e) { drag = [e.clientX, view[0], view[1]]; });
  window.addEventListener("mouseup", function () { drag = null; });
  cv.addEventListener("dblclick", function () { view = [t0, t1 + (t1 - t0) * 0.02 || 1]; draw(); });
  cv.addEventListener("mousemove", function (e) {
    if (drag) { var dt = (e.clientX - drag[0]) / cv.clientWidth * (drag[2] - drag[1]); view = [drag[1] - dt, drag[2] - dt]; draw(); return; }
    var text = hit(e.offsetX, e.offsetY);
    tip.style.display = text ? "block" : "none";
    if (text) { tip.textContent = text; tip.style.left = e.clientX + 12 + "px"; tip.style.top = e.clientY + 12 + "px"; }
  });
  cv.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  /* a run that stopped before any suggestor ran (it failed before its first cycle), or a trace
     cut before any execution finished: no empty box, and no word of clock readings, which the
     trace may well have */
  if (!EX.length) { cv.style.display = "none"; $("legend").style.display = "none"; $("timeline-section").appendChild(el("div", "empty", "none")); }
  function note() { $("tl-note").textContent = !EX.length ? (M.suggestor_started ? "no suggestor finished" : "no suggestor ran") + (MC.length ? ", " + MC.length + " model calls" : "") : EX.length + " executions, " + MC.length + " model calls" + (laneEnd.length > lanes ? " (first " + lanes + " of " + laneEnd.length + " lanes)" : "") + (byCycleIndex ? " \u2014 the trace has no clock readings: one slot per cycle" : " \u2014 wheel to zoom, drag to pan, double-click to reset"); }
  note();
  /* redrawn when the canvas's box changes size (a window resized, or a vertical scrollbar that
     came once the sections below were drawn: the first draw was wider than the box), at most
     once an animation frame */
  var sizing = false;
  function resized() { if (!sizing) { sizing = true; requestAnimationFrame(function () { sizing = false; size(); draw(); }); } }
  size(); draw();
  if (window.ResizeObserver) new ResizeObserver(resized).observe(cv); else window.addEventListener("resize", resized);
  /* the legend: the kinds this run executed, in their colours, then the marks */
  var legend = $("legend"), shown = {};
  function swatch(fill, stroke, text) {
    var item = el("span"), box = el("i"); box.style.background = fill; box.style.border = "1px solid " + stroke;
    item.appendChild(box); item.appendChild(document.createTextNode(text)); legend.appendChild(item);
  }
  EX.forEach(function (r) { var k = KINDS[r[0]] || ""; if (!shown[k]) { shown[k] = true; var st = styleOf(r[0]); swatch(st.fill, st.stroke, (STYLES[k] ? st.label : k || "suggestor") + " execution"); } });
  swatch(CALL, CALL, "model call");
  if (MC.some(function (m) { return m[11] === "summary"; })) swatch(SUMMARY, SUMMARY, "summarizer call");
  swatch(FAILED, FAILED, "failed");

  /* -- facts ------------------------------------------------------------------------- */
  function detail(box, pairs, source) {
    box.textContent = ""; var dl = el("dl");
    pairs.forEach(function (p) { if (p[1] === null || p[1] === undefined || p[1] === "") return; dl.appendChild(el("dt", null, p[0])); var dd = el("dd"); if (p[2]) dd.appendChild(el("pre", null, p[1])); else dd.textContent = p[1]; dl.appendChild(dd); });
    box.appendChild(dl);
    if (source) { box.appendChild(el("dt", null, "source " + source.file + ":" + source.line)); box.appendChild(el("pre", null, source.text || source.why || "(no excerpt)")); }
  }
  var factBox = $("fact-detail");
  var factList = table($("facts"), "Facts", ["key", "id", "confidence", "content", "suggestor"], ["c-k", "c-id", "c-n", "c-w", "c-s"], D.facts,
    function (f) { return [f[0], f[1], f[4] === null ? "" : f[4].toFixed(2), f[2], nm(f[8])]; },
    function (f) {
      detail(factBox, [["key / id", f[0] + " / " + f[1]], ["content", f[2]], ["data", f[3], true], ["confidence", f[4]],
        ["provenance", [f[5], f[6] && "model " + f[6], f[7] && "account " + f[7]].filter(Boolean).join(", ")],
        ["promoted", "cycle " + f[9] + " by " + nm(f[8]) + " through the " + f[10] + " gate"]], D.sources[nm(f[8])]);
    });

  /* "#fact=ID" (the raw id) in the address opens that fact (a link to it, a screenshot of it); an
     address that does not decode (a stray "%") opens none, and the page draws the rest */
  var wanted = fromAddress(location.hash.replace(/^#fact=/, ""));
  if (factList && wanted !== null && location.hash.indexOf("#fact=") === 0) {
    wanted = shownName(wanted);
    var pick = D.facts.filter(function (f) { return f[1] === wanted; })[0];
    if (pick) { factList.picked = pick; factList.draw(); factList.onPick(pick); }
  }

  /* -- gate ---------------------------------------------------------------------------- */
  var gate = $("gate");
  table(gate, "Rejected proposals (by the gate)", ["cycle", "suggestor", "key", "id", "reason"], ["c-n", "c-s", "c-k", "c-id", "c-w"], D.rej,
    function (r) { return [r[0], nm(r[1]), r[2], r[3], r[4]]; });
  /* proposals held for a human: pending, or approved / rejected by a human when a resumed run applied the decision */
  var approvals = el("div"); approvals.id = "approvals"; gate.appendChild(approvals);
  var DECISION = { pending: "pending", approved: "approved by a human", rejected: "rejected by a human" };
  table(approvals, "Human approvals", ["cycle", "suggestor", "key", "id", "decision", "why it waited"], ["c-n", "c-s", "c-k", "c-id", "c-d", "c-w"], D.hitl,
    function (r) { return [r[0] === null ? "" : r[0], nm(r[1]), r[2], r[3], DECISION[r[5]] || r[5], r[4]]; });

  /* -- model calls ------------------------------------------------------------------- */
  table($("calls"), "Model calls", ["call", "suggestor", "for", "model", "status", "latency", "tokens in/out", "attempts"], ["c-n", "c-s", "c-k", "c-k", "c-k", "c-n", "c-k", "c-n"], MC,
    function (m) { return [m[0], nm(m[1]), purpose(m), m[2], m[5] + (m[9] ? " (" + m[9] + ")" : ""), ms(m[4] - m[3]), m[7] + " / " + m[8], m[6]]; });

  /* -- agents ------------------------------------------------------------------------ */
  var agentRows = [];
  D.turns.forEach(function (r) { agentRows.push([r[0], r[1], r[2], "turn", "~" + r[3] + " tokens in context"]); });
  D.contrib.forEach(function (r) { agentRows.push([r[0], r[1], r[2], "message", r[3] + " (" + r[4] + ", " + r[5] + (r[6] ? ", persisted" : ", transient") + ", " + r[7] + " chars): " + (r[8] || "")]); });
  D.tools.forEach(function (r) { agentRows.push([r[0], r[1], r[2], "tool", r[3] + (r[4] ? " (error)" : "")]); });
  D.comp.forEach(function (r) { agentRows.push([r[0], r[1], r[2], "compaction", r[3] + " " + r[4] + ": turns " + r[5] + "-" + r[6] + ", " + r[7] + " \u2192 " + r[8] + " tokens, " + r[9]]); });
  D.sum.forEach(function (r) { agentRows.push([r[0], r[1], "", "summary", r[2] + " by " + r[3] + ", " + r[5] + " chars, sha256 " + r[4]]); });
  D.fallback.forEach(function (r) { agentRows.push([r[0], r[1], "", "stub fallback", r[2] + ": " + r[3] + (r[4] ? " (" + r[4] + ")" : "")]); });
  D.agent_end.forEach(function (r) { agentRows.push([r[0], r[1], r[3], "finished", r[2] + ", " + r[3] + " turns, " + r[4] + " proposals"]); });
  /* in the order they happened: by agent, cycle, turn, then the kind of step */
  var turnOf = {}; D.comp.forEach(function (r) { turnOf[r[4]] = r[2]; });
  agentRows.forEach(function (r) { if (r[2] === "") r[2] = turnOf[r[4].split(/[ :]/)[0]]; if (r[2] === undefined) r[2] = ""; });
  var rank = { turn: 0, message: 1, tool: 2, compaction: 3, summary: 4, "stub fallback": 4, finished: 5 };
  agentRows = agentRows.map(function (r, i) { return [r, i]; }).sort(function (a, b) {
    var x = a[0], y = b[0], tx = x[2] === "" ? 1e9 : x[2], ty = y[2] === "" ? 1e9 : y[2];
    return x[0] - y[0] || x[1] - y[1] || tx - ty || rank[x[3]] - rank[y[3]] || a[1] - b[1];
  }).map(function (p) { return p[0]; });
  table($("agents"), "Agents", ["agent", "cycle", "turn", "what", "detail"], ["c-s", "c-n", "c-n", "c-k", "c-w"], agentRows,
    function (r) { return [nm(r[0]), r[1], r[2], r[3], r[4]]; });

  /* -- budgets ------------------------------------------------------------------------ */
  var B = M.budget || {}, U = D.usage, charts = $("charts");
  function chart(title, pts, limit, unit) {
    var box = el("div", "chart"); box.appendChild(el("h3", null, title));
    var last = pts.length ? pts[pts.length - 1][1] : 0;
    box.appendChild(el("p", null, "used " + last + (unit || "") + (limit === null || limit === undefined ? " (no limit)" : " of " + limit + (unit || "") + " (" + Math.round(100 * last / limit) + "%)")));
    var W = 240, H = 90, NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("width", "100%"); svg.setAttribute("preserveAspectRatio", "none");
    var xmax = pts.length ? Math.max(pts[pts.length - 1][0], 1e-9) : 1, ymax = Math.max(last, 1) * 1.25;
    if (limit && limit <= ymax * 4) ymax = Math.max(ymax, limit * 1.08); else limit = limit ? null : limit; /* a far limit would flatten the line */
    var step = Math.max(1, Math.floor(pts.length / 800)), d = "M0," + H;
    for (var i = 0; i < pts.length; i += step) d += "L" + (pts[i][0] / xmax * W).toFixed(1) + "," + (H - pts[i][1] / ymax * H).toFixed(1);
    if (pts.length) d += "L" + W + "," + (H - last / ymax * H).toFixed(1);
    var p = document.createElementNS(NS, "path"); p.setAttribute("d", d); p.setAttribute("fill", "none"); p.setAttribute("stroke", "#2f6fed"); p.setAttribute("stroke-width", "2"); svg.appendChild(p);
    if (limit !== null && limit !== undefined) { var l = document.createElementNS(NS, "line"); var y = (H - limit / ymax * H).toFixed(1); l.setAttribute("x1", 0); l.setAttribute("x2", W); l.setAttribute("y1", y); l.setAttribute("y2", y); l.setAttribute("stroke", "#d9434f"); l.setAttribute("stroke-dasharray", "4 3"); svg.appendChild(l); }
    box.appendChild(svg); charts.appendChild(box);
  }
  function series(col) { return U.filter(function (u) { return u[col] !== null; }).map(function (u) { return [byCycleIndex || u[0] === null ? u[1] : u[0], u[col]]; }); }
  /* the Cycles card counts what the header counts (meta.cycles: the run's own count, which
     includes the last cycle, where nothing ran and the run converged or stopped) */
  var cyclePts = U.map(function (u) { return [byCycleIndex || u[0] === null ? u[1] : u[0], u[1]]; });
  var lastPt = cyclePts.length ? cyclePts[cyclePts.length - 1] : [0, 0];
  if (M.cycles > lastPt[1]) cyclePts.push([byCycleIndex ? M.cycles : lastPt[0] + (M.duration ? Math.max(0, M.duration - lastPt[0]) : 0), M.cycles]);
  chart("Cycles", cyclePts, B.max_cycles);
  chart("Facts", series(2), B.max_facts);
  chart("Model calls", series(3), B.max_model_calls);
  chart("Tokens", series(4), B.max_tokens);
  chart("Wall time", U.filter(function (u) { return u[0] !== null; }).map(function (u) { return [u[0], +u[0].toFixed(3)]; }), B.max_wall_s, " s");
  var stop = $("stop"); stop.textContent = M.stop_reason || "the trace ends before the run finished";
  stop.className = "badge " + (M.stop_reason === "converged" ? "ok" : "bad");
  if (M.error) $("stop-error").textContent = M.error;

  /* -- search ------------------------------------------------------------------------- */
  var timer = null;
  $("search").addEventListener("input", function (e) {
    clearTimeout(timer);
    timer = setTimeout(function () {
      query = searchTerms(e.target.value);
      lists.forEach(function (l) { l.filter(query); });
      dimmed = null;
      if (query.length) { dimmed = {}; N.forEach(function (n, i) { if (holds(n.toLowerCase(), query)) dimmed[i] = true; }); if (!Object.keys(dimmed).length) dimmed = null; }
      draw();
    }, 120);
  });
  fitLines(document, false);  /* (names.js) each line cut with an ellipsis but a list's rows, fitted as it draws them */
  document.body.setAttribute("data-ready", "1");
})();
