/* The page of an evaluation's result document (`eval --format json`): drawn from whatever
   the document holds. Every metric gets a card (its mean, interval, threshold, pass or fail
   and any other field it carries), every confusion a matrix; the cases are a filterable
   table with one column per metric; `changes` (with --baseline) a filterable list. */
(function () {
  "use strict";
  var R = D.result, metrics = R.metrics || [], cases = R.cases || [];
  var SHOWN_ERRORS = 10;
  var KNOWN_TOP = ["evaluation", "passed", "overall", "threshold", "seconds", "usage", "metrics", "cases", "changes"];
  var KNOWN_METRIC = ["name", "mean", "cases", "interval", "threshold", "passed", "confusion"];
  var KNOWN_CASE = ["name", "scores", "stop_reason", "diagnostic"];
  var names = metrics.map(function (m) { return m.name; });
  cases.forEach(function (c) {
    Object.keys(c.scores || {}).forEach(function (m) { if (names.indexOf(m) < 0) names.push(m); });
  });

  $("title").textContent = "Evaluation: " + (R.evaluation || "");
  $("title").title = $("title").textContent; /* whole, where a short window cuts it */
  document.title = "converge-dsl eval: " + (R.evaluation || "");
  var verdict = $("verdict");
  verdict.textContent = R.passed ? "passed" : "FAILED";
  verdict.className = "badge " + (R.passed ? "ok" : "bad");
  stat("cases", cases.length);
  stat("overall", fix3(R.overall) + (R.threshold !== null && R.threshold !== undefined ? " (threshold " + fmt(R.threshold) + ")" : ""));
  if (isNum(R.seconds)) stat("time", R.seconds.toFixed(2) + " s");
  Object.keys(R.usage || {}).forEach(function (k) { stat(k.replace(/_/g, " "), fmt(R.usage[k])); });

  /* -- metrics ------------------------------------------------------------------- */
  var sec = section("metrics", "Metrics ");
  add(sec.firstChild, el("small", "count", metrics.length));
  var cards = el("div", "cards"); sec.appendChild(cards);
  metrics.forEach(function (m) {
    var failed = m.passed === false;
    var card = el("div", "card" + (failed ? " failed" : "")); card.dataset.metric = m.name;
    var top = el("div", "top");
    add(top, el("span", "name", m.name), el("span", "badge " + (failed ? "bad" : "ok"), failed ? "FAIL" : "pass"));
    card.appendChild(top);
    var mean = el("div", "mean", fix3(m.mean));
    card.appendChild(mean);
    var bits = [];
    if (m.interval) bits.push("95% interval [" + fix3(m.interval[0]) + ", " + fix3(m.interval[1]) + "]");
    if (m.cases !== undefined) bits.push(m.cases + " cases");
    if (m.threshold !== null && m.threshold !== undefined) bits.push("threshold " + fmt(m.threshold));
    card.appendChild(el("div", "sub", bits.join(" · ")));
    if (isNum(m.mean) && scoreOf(m.mean) !== null && (!isNum(m.threshold) || scoreOf(m.threshold) !== null)) card.appendChild(bar(m));
    var extra = Object.keys(m).filter(function (k) { return KNOWN_METRIC.indexOf(k) < 0; });
    if (extra.length) {
      var dl = el("dl");
      extra.forEach(function (k) { add(dl, el("dt", null, k), el("dd", null, fmt(m[k]))); });
      card.appendChild(dl);
    }
    cards.appendChild(card);
  });
  if (!metrics.length) sec.appendChild(el("div", "empty", "no metric"));

  /* the mean on a 0..1 scale, its interval, its threshold */
  function bar(m) {
    var NS = "http://www.w3.org/2000/svg", top = 1;
    var svg = document.createElementNS(NS, "svg"); svg.setAttribute("viewBox", "0 0 200 26"); svg.setAttribute("preserveAspectRatio", "none");
    function rect(x, w, y, h, fill) {
      var r = document.createElementNS(NS, "rect");
      r.setAttribute("x", x); r.setAttribute("y", y); r.setAttribute("width", Math.max(0, w)); r.setAttribute("height", h); r.setAttribute("fill", fill);
      svg.appendChild(r);
    }
    function x(v) { return 200 * Math.max(0, v) / top; }
    rect(0, 200, 9, 8, "#eef0f3");
    rect(0, x(m.mean), 9, 8, m.passed === false ? "#d9434f" : "#1f9d63");
    if (m.interval) rect(x(m.interval[0]), x(m.interval[1]) - x(m.interval[0]), 5, 16, "rgba(29,35,48,0.18)");
    if (isNum(m.threshold)) rect(x(m.threshold) - 1, 2, 1, 24, "#1d2330");
    var t = document.createElementNS(NS, "title");
    t.textContent = "mean " + fmt(m.mean) + (m.interval ? ", interval " + fmt(m.interval[0]) + " to " + fmt(m.interval[1]) : "") + (isNum(m.threshold) ? ", threshold " + fmt(m.threshold) : "");
    svg.appendChild(t);
    return svg;
  }

  /* -- confusion matrices --------------------------------------------------------- */
  var withConfusion = metrics.filter(function (m) { return m.confusion && m.confusion.length; });
  if (withConfusion.length) {
    var cs = section("confusion", "Confusion ");
    add(cs.firstChild, el("small", null, "rows expected, columns found"));
    var host = el("div", "matrices"); cs.appendChild(host);
    withConfusion.forEach(function (m) {
      var cells = {}, expected = [], found = [];
      m.confusion.forEach(function (c) {
        var e = String(c.expected), f = String(c.found);
        cells[e + "\u0000" + f] = (cells[e + "\u0000" + f] || 0) + c.count;
        if (expected.indexOf(e) < 0) expected.push(e);
        if (found.indexOf(f) < 0) found.push(f);
      });
      expected.sort(); expected.forEach(function (e) { if (found.indexOf(e) < 0) found.push(e); }); found.sort();
      var box = el("div", "matrix"); box.dataset.metric = m.name;
      var t = table(["expected \\ found"].concat(found));
      t.table.insertBefore(el("caption", null, m.name), t.table.firstChild);
      t.table.querySelector("th").className = "corner";
      expected.forEach(function (e) {
        var tr = el("tr"); tr.appendChild(el("th", null, e));
        found.forEach(function (f) {
          var n = cells[e + "\u0000" + f] || 0;
          tr.appendChild(el("td", n === 0 ? "zero" : e === f ? "hit" : "miss", n));
        });
        t.body.appendChild(tr);
      });
      Array.prototype.forEach.call(t.table.querySelectorAll("th"), function (th) { th.title = th.textContent; });
      host.appendChild(add(box, t.table));
    });
  }

  /* -- worst cases ---------------------------------------------------------------- */
  /* a score from 0 (fail) to 1 (pass); any other value a metric gives (seconds, a count) is
     shown, not averaged */
  function scoreOf(v) { return isNum(v) && v >= 0 && v <= 1 ? v : null; }
  function caseMean(c) {
    if (c.failed_expectation !== undefined) return 0;  /* a refusal that ran: measured by that alone */
    var given = names.map(function (m) { return scoreOf((c.scores || {})[m]); }).filter(function (v) { return v !== null; });
    return given.length ? given.reduce(function (a, b) { return a + b; }, 0) / given.length : 1;
  }
  var means = new Map();
  cases.forEach(function (c) { means.set(c, caseMean(c)); });
  function meanOf(c) { return means.get(c); }
  function failing(c) { return names.filter(function (m) { var v = scoreOf((c.scores || {})[m]); return v !== null && v < 1; }); }
  var worst = cases.filter(function (c) { return meanOf(c) < 1; })
    .sort(function (a, b) { return meanOf(a) - meanOf(b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0); }).slice(0, 5);
  var ws = section("worst", "Worst cases ");
  if (!worst.length) ws.appendChild(el("div", "empty", "none: every case scored 1"));
  else {
    var wt = table(["case", "mean", "below 1 on"], [false, true, false]);
    worst.forEach(function (c) {
      var tr = el("tr", "pick");
      add(tr, add(el("td"), el("div", "few", c.name)), el("td", "num", fix3(meanOf(c))), add(el("td"), el("div", "few", failing(c).concat(c.failed_expectation ? ["failed expectation"] : []).join(", "))));
      pickable(tr, "case " + c.name, c, caseLead.bind(null, c));
      wt.body.appendChild(tr);
    });
    ws.appendChild(wt.table);
  }

  /* -- cases whose run stopped with an error ---------------------------------------- */
  /* each as `run` prints its diagnostic: error[CODE]: message, --> where, = hint */
  function diagnosticLines(c) {
    var d = c.diagnostic;
    if (!d) return [c.error];  /* a document from before the diagnostic was kept */
    var lines = ["error" + (d.code ? "[" + d.code + "]" : "") + ": " + (d.message || "")];
    if (d.file) lines.push(" --> " + d.file + (d.line ? ":" + d.line + (d.column ? ":" + d.column : "") : ""));
    if (d.hint) lines.push("  = hint: " + d.hint);
    return lines;
  }
  function diagnosticBlock(c) {
    var pre = el("pre", "diag");
    diagnosticLines(c).forEach(function (line, i) { pre.appendChild(el("span", i ? "where" : "message", line)); });
    return pre;
  }
  /* a case whose run stopped with an error, and what its pane shows first */
  function stoppedWithError(c) { return c.error !== undefined || !!c.diagnostic; }
  function unmetBlock(c) { var pre = el("pre", "diag"); pre.appendChild(el("span", "message", c.failed_expectation)); return pre; }
  function caseLead(c) { return stoppedWithError(c) ? diagnosticBlock(c) : c.failed_expectation !== undefined ? unmetBlock(c) : null; }
  /* a section listing the first `cases`, each with its `block`; `said` counts them, `tick`
     is the filter of the table that shows them all */
  function caseSection(id, title, cases, said, block, tick) {
    if (!cases.length) return;
    var s = section(id, title);
    add(s.firstChild, el("small", "count", cases.length + " case(s) " + said));
    cases.slice(0, SHOWN_ERRORS).forEach(function (c) {
      var item = el("div", "error-case pick"); item.dataset.case = c.name;
      add(item, el("div", "name", c.name), block(c));
      pickable(item, "case " + c.name, c, caseLead.bind(null, c));
      s.appendChild(item);
    });
    if (cases.length > SHOWN_ERRORS) s.appendChild(el("div", "empty", "... and " + (cases.length - SHOWN_ERRORS) + " more: tick \u201c" + tick + "\u201d below, and click one"));
  }
  /* cases that failed what they expected of their run (a refusal that ran), then errors */
  caseSection("unmet", "Failed expectations ", cases.filter(function (c) { return c.failed_expectation !== undefined; }),
    "failed their expectation", unmetBlock, "only cases below 1");
  caseSection("errors", "Errors ", cases.filter(stoppedWithError), "stopped with an error", diagnosticBlock,
    "only cases that stopped with an error");

  /* -- against the baseline ------------------------------------------------------- */
  if (R.changes) {
    var bs = section("baseline", "Against the baseline ");
    var verdicts = ["regressed", "improved", "new", "gone"], counts = {};
    R.changes.forEach(function (c) { counts[c.verdict] = (counts[c.verdict] || 0) + 1; });
    var tools = el("div", "tools"), boxes = {};
    verdicts.concat(Object.keys(counts).filter(function (v) { return verdicts.indexOf(v) < 0; })).forEach(function (v) {
      boxes[v] = checkbox(tools, v + " " + (counts[v] || 0), true, v);
    });
    var bcount = el("span", "count"); tools.appendChild(bcount);
    bs.appendChild(tools);
    if (!R.changes.length) bs.appendChild(el("div", "empty", "no change"));
    else {
      var byName = new Map(); cases.forEach(function (c) { byName.set(c.name, c); });
      var changes = vtable(bs, ["case", "metric", "before", "after", "verdict"], ["c-case", "c-metric", "c-num", "c-num", "c-verdict"], R.changes,
        function (c) { return [c["case"], c.metric, fix3(c.before), fix3(c.after), c.verdict]; },
        function (c) { var found = byName.get(c["case"]); showDetail("case " + c["case"], found || c, found && caseLead(found)); },
        { counter: bcount, most: 360,
          render: function (c, j, span) { if (j !== 4) return false; span.appendChild(el("span", "badge " + c.verdict, c.verdict)); return true; },
          keep: function (c) { return !boxes[c.verdict] || boxes[c.verdict].checked; } });
      filters.push(function (q) { changes.filter(q); });
    }
  }

  /* -- the cases ------------------------------------------------------------------ */
  var extraCols = [];
  cases.forEach(function (c) {
    Object.keys(c).forEach(function (k) {
      if (KNOWN_CASE.indexOf(k) < 0 && extraCols.indexOf(k) < 0 && (c[k] === null || typeof c[k] !== "object")) extraCols.push(k);
    });
  });
  var cs2 = section("cases", "Cases ");
  var ccount = el("small", "count"); cs2.firstChild.appendChild(ccount);
  var ctools = el("div", "tools"), onlyFailing = checkbox(ctools, "only cases below 1", false);
  onlyFailing.id = "only-failing";
  var onlyErrors = null;
  if (cases.some(stoppedWithError)) {
    onlyErrors = checkbox(ctools, "only cases that stopped with an error", false); onlyErrors.id = "only-errors";
  }
  ctools.appendChild(el("span", "count", "click a case for its whole result"));
  cs2.appendChild(ctools);
  function scoreClass(v) { return v === null || v === undefined ? "sn" : scoreOf(v) === null ? "" : v === 1 ? "s1" : v === 0 ? "s0" : "sp"; }
  var caseList = vtable(cs2, ["case", "stop reason", "mean"].concat(names, extraCols),
    ["c-case", "c-stop", "c-num"].concat(names.map(function () { return "c-num c-metric-score"; }), extraCols.map(function (k) { return k === "error" || k === "failed_expectation" ? "c-w" : "c-extra"; })),
    cases,
    function (c) {
      var scores = c.scores || {};
      return [c.name, c.stop_reason, fix3(meanOf(c))].concat(names.map(function (m) { return fmt(scores[m]); }), extraCols.map(function (k) { return fmt(c[k]); }));
    },
    function (c) { showDetail("case " + c.name, c, caseLead(c)); },
    { counter: ccount,
      hay: function (c) { return JSON.stringify(c); },
      keep: function (c) { return (!onlyFailing.checked || meanOf(c) < 1) && (!onlyErrors || !onlyErrors.checked || stoppedWithError(c)); },
      classes: function (c) {
        var scores = c.scores || {};
        return [null, c.stop_reason === "converged" ? null : "s0", null].concat(names.map(function (m) { return scoreClass(scores[m]); }));
      } });
  filters.push(function (q) { caseList.filter(q); });

  /* -- anything else the document holds -------------------------------------------- */
  var rest = Object.keys(R).filter(function (k) { return KNOWN_TOP.indexOf(k) < 0; });
  if (rest.length) {
    var os = section("more", "More ");
    rest.forEach(function (k) { add(os, el("h3", null, k), el("pre", null, json(R[k]))); });
  }
  refilter();
  ready();
})();
