/* The page of `converge-dsl diff A B`: A's values on the left, B's on the right, one row per
   difference (a fact's content, confidence, or data at a JSON path), each fact under its
   key/id. For two batch results files, one block per case that differs, then the cases
   only in A and only in B. The search box and the added / removed / changed boxes filter.
   Past LONG rows the differences are one virtualised list instead (VList: only the rows in
   view exist), a line per difference with its case and fact, a fact's whole block on a
   click or Enter; so are the names of the cases in one file only. */
(function () {
  "use strict";
  var X = D.diff, batch = D.kind === "batch", LONG = 400;
  /* a batch shows each case whose facts or stop reason differ, and its usage summed */
  var cases = !batch ? [{ "case": null, facts: X.facts, stop_reason: X.stop_reason, usage: X.usage }]
    : X.cases.filter(function (c) { return c.facts.length || c.stop_reason; })
        .map(function (c) { return { "case": c["case"], facts: c.facts, stop_reason: c.stop_reason, usage: [] }; });
  var usageOnly = !batch ? [] : X.cases.filter(function (c) { return !c.facts.length && !c.stop_reason; })
    .map(function (c) { return c["case"]; });
  $("title").textContent = "Diff: A " + D.a + " \u2192 B " + D.b;
  $("title").title = $("title").textContent; /* whole, where a short window cuts it */
  document.title = "converge-dsl diff: " + D.a + " \u2192 " + D.b;
  $("verdict").textContent = X.same ? "the same" : "different";
  $("verdict").className = "badge " + (X.same ? "ok" : "changed");
  var totals = { added: 0, removed: 0, changed: 0 };
  cases.forEach(function (c) { c.facts.forEach(function (f) { totals[f.change] = (totals[f.change] || 0) + 1; }); });
  if (batch) {
    stat("cases differ", cases.length); stat("in usage only", usageOnly.length); stat("the same", X.unchanged);
    stat("only in A", X.only_a.length); stat("only in B", X.only_b.length);
  }
  ["added", "removed", "changed"].forEach(function (k) { stat("facts " + k, totals[k]); });
  var ignored = X.ignored || [];
  if (ignored.length) stat("not compared", ignored.join(", ").replace(/-/g, " "));

  var sec = section("differences", batch ? "Cases that differ " : "Differences ");
  var count = el("small", "count"); sec.firstChild.appendChild(count);
  var tools = el("div", "tools"), boxes = {};
  ["added", "removed", "changed"].forEach(function (k) { boxes[k] = checkbox(tools, k + " " + totals[k], true, k); });
  sec.appendChild(tools);
  var side = el("div", "sides"); sec.appendChild(side);
  var groups = [];  /* {host, rows: [{trs, hay, change}]} */

  /* a string's changed middle marked, the common start and end left plain */
  function marked(text, other, cls) {
    var pre = el("pre");
    if (typeof other !== "string" || other === text) { pre.textContent = text; return pre; }
    var i = 0, n = Math.min(text.length, other.length);
    while (i < n && text[i] === other[i]) i++;
    var j = 0;
    while (j < n - i && text[text.length - 1 - j] === other[other.length - 1 - j]) j++;
    add(pre, document.createTextNode(text.slice(0, i)), el("mark", cls, text.slice(i, text.length - j)),
        document.createTextNode(text.slice(text.length - j)));
    return pre;
  }
  function cell(side, value, other, what) {
    var td = el("td", side + (value === null || value === undefined ? " none" : ""));
    if (value === null || value === undefined) { td.textContent = "\u2014"; return td; }
    var mark = side === "a" ? "del" : "ins", raw = what === "content" && typeof value === "string";
    var text = raw ? value : json(value), pre;
    if (typeof value === "string" && typeof other === "string") {
      pre = marked(text, raw ? other : json(other), mark);  /* two texts: the middle that differs */
    } else if (other === null || other === undefined) {
      pre = el("pre", null, text);
    } else {
      pre = add(el("pre"), el("mark", mark, text));  /* a number, a list...: all of it */
    }
    pre.dir = "auto";  /* laid in the direction its first letter reads in (page.css) */
    td.appendChild(pre);
    return td;
  }
  /* a JSON path that may break after each "/" */
  function path(text) {
    var code = el("code");
    text.split("/").forEach(function (part, i) {
      if (i) { code.appendChild(document.createTextNode("/")); code.appendChild(el("wbr")); }
      code.appendChild(document.createTextNode(part));
    });
    return code;
  }
  function block(host, c) {
    var t = el("table", "side");
    t.appendChild(add(el("colgroup"), el("col", "what"), el("col"), el("col")));
    var head = el("tr"); ["what", "A", "B"].forEach(function (h, i) { var th = el("th", null, h); th.title = ["", D.a, D.b][i]; head.appendChild(th); });
    add(t, add(el("thead"), head));
    var body = el("tbody"); t.appendChild(body);
    var rows = [];
    c.facts.forEach(function (f) {
      var trs = [], top = el("tr", "fact");
      var name = el("td"); name.colSpan = 3;
      add(name, add(el("div", "fact-name"), el("span", "badge " + f.change, f.change), document.createTextNode(" " + f.key + "/" + f.id)));
      top.appendChild(name); trs.push(top);
      var hay = [c["case"] || "", f.change, f.key + "/" + f.id];
      f.fields.forEach(function (w) {
        var tr = el("tr");
        add(tr, add(el("td"), path(w.what)), cell("a", w.a, w.b, w.what), cell("b", w.b, w.a, w.what));
        trs.push(tr); hay.push(w.what, json(w.a), json(w.b));
      });
      trs.forEach(function (tr) { tr.dataset.change = f.change; body.appendChild(tr); });
      rows.push({ trs: trs, change: f.change, hay: hay.join(" ").toLowerCase() });
    });
    var extra = [];
    if (c.stop_reason) extra.push(["stop reason", c.stop_reason[0], c.stop_reason[1]]);
    (c.usage || []).forEach(function (u) { extra.push(["usage " + u.what, u.a, u.b]); });
    if (extra.length) {  /* the stop reasons and usage: one group under its own head */
      var top = el("tr", "fact"), name = el("td", null, "the run"); name.colSpan = 3;
      var trs = [top], hay = [c["case"] || "", "run"];
      top.appendChild(name); body.appendChild(top);
      extra.forEach(function (e) {
        var tr = el("tr", "run");
        add(tr, add(el("td"), el("code", null, e[0])), cell("a", e[1], e[2], "content"), cell("b", e[2], e[1], "content"));
        body.appendChild(tr); trs.push(tr); hay.push(e.join(" "));
      });
      rows.push({ trs: trs, change: null, hay: hay.join(" ").toLowerCase() });
    }
    host.appendChild(t);
    return rows;
  }
  var lines = 0;  /* the rows the blocks would take */
  cases.forEach(function (c) {
    c.facts.forEach(function (f) { lines += 1 + f.fields.length; });
    lines += (c.stop_reason ? 1 : 0) + (c.usage || []).length + (c.stop_reason || (c.usage || []).length ? 1 : 0);
  });
  var flat = null;  /* the virtualised list, when the blocks would be too long */
  if (lines > LONG) flat = flatList(); else cases.forEach(function (c) {
    var host = side;
    if (batch) {
      host = el("details", "case"); host.open = true; host.dataset["case"] = c["case"];
      var n = c.facts.length + (c.stop_reason ? 1 : 0);
      host.appendChild(el("summary", null, "case " + c["case"] + " (" + n + (n === 1 ? " difference)" : " differences)")));
      side.appendChild(host);
    }
    groups.push({ host: host, rows: block(host, c) });
  });
  if (!cases.length) side.appendChild(el("div", "empty", X.same ? "no difference" : "no case differs in its facts"));
  else if (!batch && !cases[0].facts.length && !cases[0].stop_reason && !cases[0].usage.length) {
    side.textContent = ""; side.appendChild(el("div", "empty", "no difference"));
  }

  /* `cell` on one line: a content or a stop reason as it is, any other value as JSON; of two
     strings the changed middle marked, a long common start cut to its last characters */
  function inline(span, value, other, mark, raw) {
    if (value === null || value === undefined) { span.textContent = "\u2014"; span.className += " none"; return; }
    function shown(v) { return raw && typeof v === "string" ? v : json(v).replace(/\s*\n\s*/g, " "); }
    var text = shown(value);
    span.title = text;
    if (typeof value !== "string" || typeof other !== "string") {
      if (other === null || other === undefined) span.textContent = text;
      else span.appendChild(el("mark", mark, text));  /* a number, a list...: all of it */
      return;
    }
    var that = shown(other), i = 0, n = Math.min(text.length, that.length);
    while (i < n && text[i] === that[i]) i++;
    var j = 0;
    while (j < n - i && text[text.length - 1 - j] === that[that.length - 1 - j]) j++;
    var head = text.slice(0, i);
    if (head.length > 24) head = "\u2026" + head.slice(-16);
    add(span, document.createTextNode(head), el("mark", mark, text.slice(i, text.length - j)), document.createTextNode(text.slice(text.length - j)));
  }
  function flatList() {
    var rows = [];
    cases.forEach(function (c) {
      c.facts.forEach(function (f) {
        f.fields.forEach(function (w) { rows.push({ c: c, f: f, what: w.what, a: w.a, b: w.b }); });
      });
      if (c.stop_reason) rows.push({ c: c, f: null, what: "stop reason", a: c.stop_reason[0], b: c.stop_reason[1] });
      (c.usage || []).forEach(function (u) { rows.push({ c: c, f: null, what: "usage " + u.what, a: u.a, b: u.b }); });
    });
    var heads = ["change", "fact", "what", "A", "B"], widths = ["c-change", "c-fact", "c-what", "c-side a", "c-side b"];
    if (batch) { heads.unshift("case"); widths.unshift("c-case"); }
    var at = batch ? 1 : 0;
    side.appendChild(el("p", "count", rows.length + " differences, one a line: click one, or press Enter on it, for its whole fact"));
    var list = vtable(side, heads, widths, rows,
      function (r) {
        var cells = [r.f ? r.f.change : "run", r.f ? r.f.key + "/" + r.f.id : "the run", r.what, json(r.a), json(r.b)];
        return batch ? [r.c["case"]].concat(cells) : cells;
      },
      function (r) {
        var box = $("detail"); box.textContent = "";
        var title = (batch ? "case " + r.c["case"] + ": " : "") + (r.f ? r.f.key + "/" + r.f.id : "the run");
        box.appendChild(el("h3", null, title));
        block(box, r.f ? { "case": r.c["case"], facts: [r.f] } : { "case": r.c["case"], facts: [], stop_reason: r.c.stop_reason, usage: r.c.usage });
        $("detail-pane").hidden = false;
      },
      { counter: count, most: 640,
        hay: function (r) { return [r.c["case"] || "", r.f ? r.f.change : "run", r.f ? r.f.key + "/" + r.f.id : "", r.what, json(r.a), json(r.b)].join(" "); },
        keep: function (r) { return !r.f || boxes[r.f.change].checked; },
        render: function (r, j, span) {
          if (j === at) { span.appendChild(el("span", "badge " + (r.f ? r.f.change : "run"), r.f ? r.f.change : "run")); return true; }
          var raw = !r.f || r.what === "content";
          if (j === at + 3) { inline(span, r.a, r.b, "del", raw); return true; }
          if (j === at + 4) { inline(span, r.b, r.a, "ins", raw); return true; }
          return false;
        } });
    side.classList.add("flat");
    return list;
  }

  if (batch) {
    var ls = section("unmatched", "Cases in one file only");
    var lists = el("div", "lists"); ls.appendChild(lists);
    [["only in A", X.only_a, "only-a"], ["only in B", X.only_b, "only-b"]].forEach(function (l) {
      var box = el("div"); box.id = l[2];
      box.appendChild(el("h3", null, l[0] + " (" + l[1].length + ")"));
      if (!l[1].length) box.appendChild(el("div", "empty", "none"));
      lists.appendChild(box);
      if (l[1].length > LONG) {  /* a list of any length: only the names in view exist */
        var counter = el("small", "count"); box.firstChild.textContent = l[0] + " "; box.firstChild.appendChild(counter);
        var names = vtable(box, ["case"], ["c-w"], l[1], function (n) { return [n]; }, null, { counter: counter, most: 300 });
        filters.push(function (q) { names.filter(q); });
        return;
      }
      var ul = el("ul");
      var items = l[1].map(function (n) { var li = el("li", null, n); ul.appendChild(li); return li; });
      box.appendChild(ul);
      filters.push(function (q) { items.forEach(function (li) { li.hidden = !holds(li.textContent.toLowerCase(), q); }); });
    });
  }

  if (batch) {
    var us = section("usage", "Usage ");
    us.firstChild.appendChild(el("small", null, "summed over the cases in both files"));
    if (ignored.indexOf("usage") >= 0) us.appendChild(el("div", "empty", "not compared (--ignore usage)"));
    else if (!X.usage.length) us.appendChild(el("div", "empty", "the same"));
    else {
      var ut = el("table", "side");
      ut.appendChild(add(el("colgroup"), el("col", "what"), el("col"), el("col")));
      var uh = el("tr"); ["what", "A", "B"].forEach(function (h, i) { var th = el("th", null, h); th.title = ["", D.a, D.b][i]; uh.appendChild(th); });
      add(ut, add(el("thead"), uh));
      var ub = el("tbody"); ut.appendChild(ub);
      X.usage.forEach(function (u) { ub.appendChild(add(el("tr"), add(el("td"), el("code", null, u.what)), cell("a", u.a, u.b, "content"), cell("b", u.b, u.a, "content"))); });
      us.appendChild(ut);
    }
    if (usageOnly.length) {
      var more = el("details", "case"); more.id = "usage-only";
      more.appendChild(el("summary", null, usageOnly.length + " cases differ in their usage only"));
      more.appendChild(el("pre", null, usageOnly.join(", ")));
      us.appendChild(more);
    }
  }

  var all = 0; groups.forEach(function (g) { all += g.rows.length; });
  if (flat) filters.push(function (q) { flat.filter(q); });
  else filters.push(function (q) {
    var shown = 0;
    groups.forEach(function (g) {
      var any = false;
      g.rows.forEach(function (r) {
        var on = (r.change === null || boxes[r.change].checked) && holds(r.hay, q);
        r.trs.forEach(function (tr) { tr.hidden = !on; });
        if (on) { shown++; any = true; }
      });
      if (batch) g.host.hidden = !any;
    });
    count.textContent = shown === all ? String(all) : shown + " of " + all;
  });
  refilter();
  ready();
})();
