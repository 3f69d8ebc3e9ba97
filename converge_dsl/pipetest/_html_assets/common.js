/* converge-dsl eval and diff pages: helpers shared by eval.js and diff.js. No network, no
   library: every value from the data goes into the page through textContent, never as HTML. */
var D = JSON.parse(document.getElementById("page-data").textContent);
function $(id) { return document.getElementById(id); }
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
function isNum(v) { return typeof v === "number" && isFinite(v); }
function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (isNum(v)) return Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000);
  if (typeof v === "string") return v;
  return jsonText(v);
}
/* `v` as JSON text, the escapes the page's data holds for control and bidi characters
   (`\x1b`, `\u202e`) shown once, as the rest of the page shows them, not with JSON's
   doubled backslash (an escaped backslash before them is kept as it is) */
function jsonText(v, indent) {
  return JSON.stringify(v, null, indent).replace(
    /\\\\(\\\\|x[0-9a-f]{2}|u20(?:2[a-e]|6[6-9]))/g,
    function (all, after) { return after === "\\\\" ? all : "\\" + after; });
}
/* a score or a mean: three decimals, as the text output prints them */
function fix3(v) { return isNum(v) ? v.toFixed(3) : fmt(v); }
function json(v) { return v === undefined ? "" : jsonText(v, 2); }
function stat(name, value) {
  var s = el("span", "stat", name + " "); s.appendChild(el("b", null, value)); $("stats").appendChild(s);
}
function section(id, title) {
  var s = el("section"); s.id = id;
  var h = el("h2", null, title); s.appendChild(h); $("main").appendChild(s);
  return s;
}
function table(heads, numeric) {
  var t = el("table"), head = el("tr");
  heads.forEach(function (h, i) { head.appendChild(el("th", numeric && numeric[i] ? "num" : null, h)); });
  add(t, add(el("thead"), head)); var body = el("tbody"); t.appendChild(body);
  return { table: t, body: body };
}
/* the pane: `title`, what `lead` shows first (an element, optional), then `value` as JSON */
function showDetail(title, value, lead) {
  var box = $("detail"); box.textContent = "";
  add(box, el("h3", null, title), lead, el("pre", null, json(value)));
  $("detail-pane").hidden = false;
}
/* a row that shows `value` on a click, or on Enter once focused */
function pickable(tr, title, value, lead) {
  tr.tabIndex = 0;
  tr.addEventListener("click", function () { showDetail(title, value, lead && lead()); });
  tr.addEventListener("keydown", function (e) { if (e.key === "Enter") showDetail(title, value, lead && lead()); });
}
$("close-pane").addEventListener("click", function () { $("detail-pane").hidden = true; });
document.addEventListener("keydown", function (e) { if (e.key === "Escape") $("detail-pane").hidden = true; });
/* filters: each registers a function run on every change of the search box or a checkbox, given
   the search's terms (names.js' searchTerms: the typed text, and its shown form) */
var filters = [];
function refilter() { var q = searchTerms($("search").value); filters.forEach(function (f) { f(q); }); }
$("search").addEventListener("input", refilter);
function checkbox(host, label, checked, cls) {
  var l = el("label", "chip"), box = el("input"); box.type = "checkbox"; box.checked = checked;
  if (cls) box.dataset.filter = cls;
  box.addEventListener("change", refilter);
  add(host, add(l, box, cls ? el("span", "badge " + cls, label) : el("span", null, label)));
  return box;
}
/* a virtualised table (VList, the shared vlist.js): a sticky head of `heads` in the scrolling
   box, a column per head as wide as its class in `widths` (page.css: c-* with --w), the box at
   most `most` pixels tall; rows as wide as their columns, scrolled sideways when the box is not */
function vtable(host, heads, widths, rows, cells, onPick, options) {
  var box = el("div", "vlist"), head = el("div", "head");
  heads.forEach(function (h, j) { var s = el("span", widths[j], h); s.title = h; head.appendChild(s); });
  box.appendChild(head); host.appendChild(box);
  options.widths = widths;
  var list = new VList(box, rows, cells, onPick, options);
  var wide = 16 + 10 * (heads.length - 1);
  Array.prototype.forEach.call(head.children, function (s) { wide += parseFloat(getComputedStyle(s).minWidth) || 0; });
  box.style.setProperty("--row-min", wide + "px");
  function fit() {  /* as tall as the rows that pass the filters, up to `most` */
    var sideways = wide > box.clientWidth ? 16 : 0;
    box.style.height = Math.min(options.most || 480, Math.max(1, list.rows.length) * VLIST_ROW + head.offsetHeight + 2 + sideways) + "px";
  }
  var filter = list.filter;
  list.filter = function (q) { filter.call(list, q); fit(); list.draw(); };
  fit();
  return list;
}
function ready() {
  fitLines(document, false);  /* (names.js) each line cut with an ellipsis but a list's rows, fitted as it draws them */
  document.body.dataset.drawnMs = Math.round(performance.now());  /* the time to first draw */
  document.body.setAttribute("data-ready", "1");
}
