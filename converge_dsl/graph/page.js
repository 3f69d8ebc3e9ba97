// converge-dsl graph page: pan, zoom, and a click on a node shows its details and YAML source.
// Ids and names are the data's shown forms; shownName, rawName, searchTerms and holds come
// from the shared names.js, written before this script.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var canvas = document.getElementById("canvas");
  var svg = document.getElementById("graph");
  var viewport = document.getElementById("viewport");
  var details = document.getElementById("details");
  var width = parseFloat(svg.getAttribute("data-width"));
  var height = parseFloat(svg.getAttribute("data-height"));
  var view = { scale: 1, x: 0, y: 0 };

  function apply() {
    viewport.setAttribute("transform",
      "translate(" + view.x.toFixed(1) + "," + view.y.toFixed(1) + ") scale(" + view.scale.toFixed(4) + ")");
    svg.setAttribute("data-scale", view.scale.toFixed(4));
  }

  /* the whole drawing in the window, centred. When the page opens (`readable`), a drawing
     that fits only as a hairline (a chain of 500 nodes: names a pixel tall) is shown at
     READABLE instead, its first node (the leftmost, then topmost: where the flow starts) in
     view, the rest panned or zoomed out to; one that fits readably is fitted whole */
  var READABLE = 0.5, UNREADABLE = 0.2, MANY_NODES = 100;
  var nodeCount = viewport.querySelectorAll(".node").length;
  function firstNode() {
    var first = null;
    Array.prototype.forEach.call(viewport.querySelectorAll(".node"), function (node) {
      var b = node.getBBox();
      if (!first || b.x < first.x - 1 || (b.x <= first.x + 1 && b.y < first.y)) first = b;
    });
    return first;
  }
  function fit(readable) {
    var w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    var whole = Math.min(w / width, h / height, 1.6) * 0.94;
    var start = readable && (whole < UNREADABLE || (nodeCount > MANY_NODES && whole < READABLE)) && firstNode();
    if (start) {
      view.scale = READABLE;
      view.x = Math.min(12, w / 2 - (start.x + start.width / 2) * view.scale);
      view.y = Math.min(56, h / 2 - (start.y + start.height / 2) * view.scale);
    } else {
      view.scale = whole;
      view.x = (w - width * whole) / 2;
      view.y = (h - height * whole) / 2;
    }
    apply();
  }

  function zoomAt(factor, cx, cy) {
    var scale = Math.max(0.08, Math.min(8, view.scale * factor));
    var k = scale / view.scale;
    view.x = cx - (cx - view.x) * k;
    view.y = cy - (cy - view.y) * k;
    view.scale = scale;
    apply();
  }

  function zoomCentre(factor) { zoomAt(factor, svg.clientWidth / 2, svg.clientHeight / 2); }

  svg.addEventListener("wheel", function (event) {
    event.preventDefault();
    var box = svg.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });

  var drag = null;
  svg.addEventListener("pointerdown", function (event) {
    if (event.button !== 0) { return; }
    drag = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y, moved: false, id: event.pointerId };
  });
  svg.addEventListener("pointermove", function (event) {
    if (!drag) { return; }
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) { return; }
    if (!drag.moved) { drag.moved = true; canvas.classList.add("dragging"); svg.setPointerCapture(drag.id); }
    view.x = drag.vx + dx;
    view.y = drag.vy + dy;
    apply();
  });
  function endDrag() {
    if (drag && drag.moved) { setTimeout(function () { drag = null; }, 0); } else { drag = null; }
    canvas.classList.remove("dragging");
  }
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function excerpt(source) {
    var pre = element("pre", "excerpt");
    source.lines.forEach(function (line, index) {
      /* one block per line: a long line wraps under itself, its number hanging to the left */
      var row = element("span", "line");
      row.appendChild(element("span", "ln", String(source.line + index)));
      row.appendChild(document.createTextNode(line === "" ? "\u200b" : line));
      pre.appendChild(row);
    });
    return pre;
  }

  function highlight(id) {
    var near = {};
    near[id] = true;
    /* an invariant: the keys its check reads */
    ((data.nodes[id] && data.nodes[id].keys) || []).forEach(function (key) { near["key:" + key] = true; });
    svg.querySelectorAll(".edge").forEach(function (edge) {
      var on = edge.getAttribute("data-from") === id || edge.getAttribute("data-to") === id;
      edge.classList.toggle("near", on);
      if (on) { near[edge.getAttribute("data-from")] = true; near[edge.getAttribute("data-to")] = true; }
    });
    svg.querySelectorAll(".node").forEach(function (node) {
      var nodeId = node.getAttribute("data-id");
      node.classList.toggle("near", !!near[nodeId]);
      node.classList.toggle("selected", nodeId === id);
    });
    svg.classList.toggle("focus", !!data.nodes[id] && (data.nodes[id].kind !== "invariant" || (data.nodes[id].keys || []).length > 0));
    document.querySelectorAll(".invariant").forEach(function (button) {
      button.classList.toggle("selected", button.getAttribute("data-id") === id);
    });
  }

  function show(id) {
    var item = data.nodes[id];
    if (!item) { return; }
    details.textContent = "";
    details.appendChild(element("h2", "", "Details"));
    details.appendChild(element("h3", "", item.name));
    var tags = element("p", "tags");
    tags.appendChild(element("span", "tag", item.kind));
    if (item.style && item.style !== item.kind) { tags.appendChild(element("span", "tag", item.style)); }
    if (!item.reachable) {
      var what = item.kind === "suggestor" ? "never fires" : (item.kind === "key" ? "unreachable" : "unused");
      tags.appendChild(element("span", "tag dead", what));
    }
    details.appendChild(tags);
    var list = element("dl");
    item.details.forEach(function (pair) {
      list.appendChild(element("dt", "", pair[0]));
      list.appendChild(element("dd", "", pair[1]));
    });
    details.appendChild(list);
    if (item.schema) {
      details.appendChild(element("p", "where", "schema"));
      details.appendChild(element("pre", "schema", item.schema));
    }
    if (item.source) {
      var where = item.source.file + ":" + item.source.line + ":" + item.source.column;
      details.appendChild(element("p", "where", where));
      details.appendChild(excerpt(item.source));
    } else {
      details.appendChild(element("p", "hint", "A built-in key: the pipeline does not declare it."));
    }
    highlight(id);
    /* the address names the raw id, as a link to the node is written (names.js) */
    if (history.replaceState) { history.replaceState(null, "", "#node=" + encodeURIComponent(rawName(id))); }
  }

  svg.querySelectorAll(".node").forEach(function (node) {
    node.addEventListener("click", function () {
      if (drag && drag.moved) { return; }
      show(node.getAttribute("data-id"));
    });
    node.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); show(node.getAttribute("data-id")); }
    });
  });
  document.querySelectorAll(".invariant").forEach(function (button) {
    button.addEventListener("click", function (event) {
      var key = event.target.closest && event.target.closest(".key");
      show(key ? "key:" + key.textContent : button.getAttribute("data-id"));
    });
  });
  document.getElementById("zoom-in").addEventListener("click", function () { zoomCentre(1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoomCentre(0.8); });
  document.getElementById("fit").addEventListener("click", function () { fit(false); });
  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.tagName === "INPUT") { return; }
    if (event.key === "+" || event.key === "=") { zoomCentre(1.25); }
    else if (event.key === "-") { zoomCentre(0.8); }
    else if (event.key === "0") { fit(false); }
  });
  window.addEventListener("resize", function () { fit(true); });

  function centre(id) {
    var node = svg.querySelector('.node[data-id="' + CSS.escape(id) + '"]');
    if (!node) { return; }
    var box = node.getBBox();
    view.x = svg.clientWidth / 2 - (box.x + box.width / 2) * view.scale;
    view.y = svg.clientHeight / 2 - (box.y + box.height / 2) * view.scale;
    apply();
  }

  var search = document.getElementById("search");
  var found = [];
  function filter() {
    /* the typed text, and its shown form (names.js): a raw name pasted in finds its node */
    var terms = searchTerms(search.value);
    found = [];
    svg.querySelectorAll(".node").forEach(function (node) {
      var id = node.getAttribute("data-id");
      var hit = terms.length > 0 && holds(data.nodes[id].name.toLowerCase(), terms);
      node.classList.toggle("match", hit);
      if (hit) { found.push(id); }
    });
    svg.classList.toggle("searching", terms.length > 0);
    document.getElementById("search-count").textContent =
      terms.length === 0 ? "" : found.length + (found.length === 1 ? " node" : " nodes");
  }
  search.addEventListener("input", filter);
  search.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && found.length) { show(found[0]); centre(found[0]); }
    if (event.key === "Escape") { search.value = ""; filter(); }
  });

  function fromAddress() {
    var match = /^#node=(.+)$/.exec(window.location.hash), id = null;
    /* an address that does not decode (a stray "%") selects nothing */
    try { id = match && decodeURIComponent(match[1]); } catch (error) { id = null; }
    /* the raw id, as the page's ids show it */
    if (id !== null) { show(shownName(id)); }
  }
  window.addEventListener("hashchange", fromAddress);

  /* a name wider than its node (the layout guesses a width from the number of characters,
     and an "m" is wider than an "i") is cut with "\u2026" to fit, between two grapheme clusters
     and not inside a notation (names.js' shownCut); the node's title, its
     details and the search keep the whole name */
  Array.prototype.forEach.call(svg.querySelectorAll(".node"), function (node) {
    var name = node.querySelector("text.name"), shape = node.querySelector(".shape");
    if (!name || !shape) { return; }
    var room = shape.getBBox().width - 16, full = name.textContent, lo = 0, hi = full.length;
    if (name.getComputedTextLength() <= room) { return; }
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      name.textContent = full.slice(0, mid) + "\u2026";
      if (name.getComputedTextLength() <= room) { lo = mid; } else { hi = mid - 1; }
    }
    name.textContent = full.slice(0, shownCut(full, lo)) + "\u2026";  /* (names.js) */
  });

  fit(true);
  fromAddress();
  document.body.setAttribute("data-ready", "true");
})();
