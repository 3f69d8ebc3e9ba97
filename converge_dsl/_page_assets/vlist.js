/* converge-dsl pages: a virtualised list, shared by the run report and the eval and diff pages.
   Only the rows in view exist in the DOM (a spacer as tall as every row keeps the scroll bar
   true), so a list of any length draws as fast as one of twenty. No network, no library:
   every value goes into the page through textContent.

   new VList(box, rows, cells, onPick, options)
     box      the scrolling element (class "vlist"); a sticky ".head" may come first in it
     rows     the rows, any values; cells(row) -> the texts of its cells
     onPick   called with a row on a click, or on Enter once a row has the focus (optional)
     options  widths: a class per cell; classes(row) -> an extra class per cell;
              render(row, j, span) -> true when it filled cell j itself;
              hay(row) -> the text the search looks in (default: the cells);
              keep(row) -> false to leave a row out whatever the search (checkboxes);
              counter: the element that shows "N of M" (default: ".count" beside the box)
   list.filter(q) keeps the rows whose text holds q (lower case; or one of the terms q, an
   array, as names.js' searchTerms gives: the shared names.js comes first) and keep() allows;
   Tab reaches one row of a list, the arrow keys, Page Up / Down, Home and End move the
   focus from row to row, Enter picks the focused row. */
var VLIST_ROW = 24;
function VList(box, rows, cells, onPick, options) {
  var o = options || {}, self = this;
  this.box = box; this.all = rows; this.rows = rows; this.cells = cells; this.onPick = onPick;
  this.widths = o.widths || []; this.classes = o.classes; this.render = o.render;
  this.hayOf = o.hay; this.keep = o.keep; this.counter = o.counter;
  this.hay = null; this.picked = null; this.focused = -1; this.query = [];
  this.spacer = document.createElement("div"); this.spacer.className = "spacer";
  this.spacer.style.height = rows.length * VLIST_ROW + "px";
  box.appendChild(this.spacer);
  box.addEventListener("scroll", function () { self.draw(); });
  box.addEventListener("keydown", function (e) { self.key(e); });
}
VList.prototype.filter = function (q) {
  if (q !== undefined) this.query = typeof q === "string" ? (q ? [q] : []) : q;
  q = this.query;
  var keep = this.keep, all = this.all;
  if (!q.length && !keep) this.rows = all;
  else {
    if (q.length && !this.hay) {
      var c = this.cells, h = this.hayOf;
      this.hay = all.map(function (r) { return (h ? h(r) : c(r).join(" ")).toLowerCase(); });
    }
    var hay = this.hay, out = [];
    for (var i = 0; i < all.length; i++) if ((!q.length || holds(hay[i], q)) && (!keep || keep(all[i]))) out.push(all[i]);
    this.rows = out;
  }
  this.spacer.style.height = this.rows.length * VLIST_ROW + "px";
  this.box.scrollTop = 0; this.focused = -1; this.draw();
  var counter = this.counter || this.box.parentNode.querySelector(".count");
  if (counter) counter.textContent = this.rows.length === all.length ? String(all.length) : this.rows.length + " of " + all.length;
};
VList.prototype.draw = function () {
  var top = Math.max(0, this.box.scrollTop - this.spacer.offsetTop);
  var first = Math.floor(top / VLIST_ROW);
  var last = Math.min(this.rows.length, first + Math.ceil(this.box.clientHeight / VLIST_ROW) + 2);
  var hadFocus = this.box.contains(document.activeElement);
  /* one row in the tab order (the focused one if in view, else the first): Tab enters the
     list and leaves it, the arrow keys move inside it */
  var tabbable = this.focused >= first && this.focused < last ? this.focused : first;
  this.spacer.textContent = "";
  for (var i = first; i < last; i++) this.spacer.appendChild(this.line(i, i === tabbable));
  fitLines(this.spacer);  /* (names.js) */
  if (hadFocus && this.focused >= first && this.focused < last) this.spacer.children[this.focused - first].focus();
};
VList.prototype.line = function (i, tabbable) {
  var r = this.rows[i], self = this, widths = this.widths, extra = this.classes ? this.classes(r) : [];
  var line = document.createElement("div");
  line.className = "row" + (r === this.picked ? " sel" : "");
  line.style.top = i * VLIST_ROW + "px";
  line.dataset.index = i;
  this.cells(r).forEach(function (c, j) {
    var s = document.createElement("span");
    s.className = (widths[j] || "c-w") + (extra[j] ? " " + extra[j] : "");
    if (!(self.render && self.render(r, j, s))) { s.textContent = c === null || c === undefined ? "" : String(c); s.title = s.textContent; }
    line.appendChild(s);
  });
  if (this.onPick) {
    line.tabIndex = tabbable ? 0 : -1;
    line.addEventListener("click", function () { self.pick(i); });
    line.addEventListener("focus", function () { self.focused = i; });
  }
  return line;
};
VList.prototype.pick = function (i) {
  this.picked = this.rows[i]; this.focused = i; this.draw(); this.onPick(this.picked);
};
/* Enter picks the focused row; the arrows, Page Up / Down, Home and End move the focus,
   scrolling the rows they reach into view */
VList.prototype.key = function (e) {
  if (this.focused < 0 || !this.onPick) return;
  var page = Math.max(1, Math.floor(this.box.clientHeight / VLIST_ROW) - 1);
  var to = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page }[e.key];
  if (e.key === "Enter") { e.preventDefault(); this.pick(this.focused); return; }
  if (e.key === "Home") to = -this.focused; else if (e.key === "End") to = this.rows.length;
  if (to === undefined) return;
  e.preventDefault();
  var i = Math.max(0, Math.min(this.rows.length - 1, this.focused + to));
  var y = this.spacer.offsetTop + i * VLIST_ROW, view = this.box.clientHeight;
  var head = this.spacer.offsetTop;
  if (y - head < this.box.scrollTop) this.box.scrollTop = y - head;
  else if (y + VLIST_ROW > this.box.scrollTop + view) this.box.scrollTop = y + VLIST_ROW - view;
  this.focused = i; this.draw();
  var shown = this.spacer.querySelector('[data-index="' + i + '"]');
  if (shown) shown.focus();
};
