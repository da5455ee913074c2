// remora show: draws the timeline embedded in #remora-timeline as SVG (no network, no
// external file).  When done it sets data-rendered="true" on <body> with counts and the
// drawn size, which the browser test reads back from the live DOM.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("remora-timeline").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var SLOT = 22, LANE = 38, LEFT = 190, TOP = 34, SERIES = 76, GAP = 18;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    for (var k in attrs) { node.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function text(parent, x, y, s, cls, anchor) {
    var t = el("text", {x: x, y: y, "class": cls || ""}, parent);
    if (anchor) { t.setAttribute("text-anchor", anchor); }
    t.textContent = s;
    return t;
  }
  function html(tag, cls, s, parent) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (s !== undefined) { node.textContent = s; }
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function detailText(pairs) {
    return pairs.map(function (p) { return p[0] + ": " + p[1]; }).join("\n");
  }

  var app = document.getElementById("app");
  var tip = html("div", "", undefined, document.body);
  tip.id = "tip";

  // -- header: title, summary, legend --------------------------------------------------
  var header = html("header", "", undefined, app);
  var h1 = html("h1", "", "remora show: " + data.title, header);
  var badge = html("span", "status", data.status, h1);
  if (["ERROR", "VIOLATED", "REJECTED"].indexOf(data.status) >= 0) { badge.className += " bad"; }
  else if (["PASS", "REFINES"].indexOf(data.status) < 0) { badge.className += " qualified"; }
  var dl = html("dl", "summary", undefined, header);
  data.summary.concat([["file", data.source]]).forEach(function (p) {
    html("dt", "", p[0], dl);
    html("dd", "", p[1], dl);
  });
  // -- the first violation, in words (visible without hovering) ---------------------
  if (data.violation) {
    var finding = html("section", "finding", undefined, header);
    finding.id = "finding";
    var fh = html("h2", "", "First violation: " + data.violation.label, finding);
    var go = html("a", "goto", "show the step", fh);
    go.href = "#violation-step";
    var fdl = html("dl", "", undefined, finding);
    var facts = data.violation.facts.length ? data.violation.facts
      : [["message", data.violation.message]];
    facts.forEach(function (p) {
      html("dt", "", p[0], fdl);
      html("dd", "", p[1], fdl);
    });
  }

  // -- legend: only what is drawn, with every abbreviation -----------------------------
  var legend = html("div", "legend", undefined, header);
  var counts = {};
  data.marks.forEach(function (m) { counts[m.kind] = (counts[m.kind] || 0) + 1; });
  data.legend.forEach(function (p) {
    var item = html("span", "", undefined, legend);
    item.setAttribute("data-kind", p[0]);
    var dot = html("i", "", undefined, item);
    dot.style.background = "var(--" + p[0] + ")";
    html("b", "", p[0], item);
    html("small", "", p[1] + " (" + (counts[p[0]] || 0) + ")", item);
  });
  var keys = [];
  if (data.marks.some(function (m) { return m.selected; })) { keys.push("dashed ring: a selected fault"); }
  if (data.links.some(function (l) { return l.stop; })) { keys.push("red \u2715: an interleaved stop"); }
  if (data.links.some(function (l) { return l.target; })) { keys.push("blue arrow: a replacement lifetime started"); }
  if (data.violation) { keys.push("red line and diamond: the first violation"); }
  keys.push("hover a mark for every detail");
  var extra = html("span", "keys", keys.join(" \u00b7 "), legend);
  extra.style.color = "#495057";
  var shortOf = {};
  if (data.abbreviations.length) {
    var abbr = html("div", "abbreviations", undefined, header);
    html("b", "", "labels: ", abbr);
    data.abbreviations.forEach(function (p) {
      shortOf[p[1]] = p[0];
      var item = html("span", "", undefined, abbr);
      html("code", "", p[0], item);
      html("span", "", " = " + p[1], item);
    });
  }

  // -- the timeline ---------------------------------------------------------------------
  var laneIndex = {};
  data.lanes.forEach(function (lane, i) { laneIndex[lane.key] = i; });
  var lanesHeight = data.lanes.length * LANE;
  var seriesTop = TOP + lanesHeight + GAP;
  var width = LEFT + Math.max(data.slots, 1) * SLOT + 260;
  var ROW = 20;
  var stateTop = seriesTop + data.series.length * (SERIES + GAP) + (data.state_rows.length ? 20 : 0);
  var height = stateTop + data.state_rows.length * ROW + 10;
  var wrap = html("div", "scroll", undefined, app);
  var svg = el("svg", {width: width, height: height, id: "timeline",
                       "data-slots": data.slots}, wrap);
  var defs = el("defs", {}, svg);
  var marker = el("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                             markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"}, defs);
  el("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#1971c2"}, marker);

  function x(slot) { return LEFT + slot * SLOT + SLOT / 2; }
  function y(key) { return TOP + laneIndex[key] * LANE + LANE / 2; }

  var lanesGroup = el("g", {id: "lanes"}, svg);
  data.lanes.forEach(function (lane, i) {
    var g = el("g", {"class": "lane", "data-lane": lane.key}, lanesGroup);
    el("rect", {"class": "lane-bg" + (i % 2 ? " odd" : ""), x: 0, y: TOP + i * LANE,
                width: width, height: LANE}, g);
    text(g, 10, TOP + i * LANE + 16, lane.label, "lane-label");
    if (lane.note) { text(g, 10, TOP + i * LANE + 30, lane.note, "lane-note"); }
    el("line", {"class": "grid", x1: LEFT, x2: width - 240, y1: y(lane.key), y2: y(lane.key)}, g);
  });

  var bandGroup = el("g", {id: "bands"}, svg);
  data.bands.forEach(function (b, i) {
    var r = el("rect", {"class": "band " + b.kind, x: LEFT + b.first * SLOT, y: TOP - 4,
                        width: (b.last - b.first + 1) * SLOT, height: lanesHeight + 8}, bandGroup);
    el("title", {}, r).textContent = b.label;
    if (b.kind !== "wait") {
      text(bandGroup, LEFT + b.first * SLOT + 2, TOP - 8 - (i % 2) * 10, b.label, "band-label");
    }
  });
  var barGroup = el("g", {id: "bars"}, svg);
  data.bars.forEach(function (b) {
    if (laneIndex[b.lane] === undefined) { return; }
    var top = TOP + laneIndex[b.lane] * LANE;
    var r = el("rect", {"class": "bar " + b.kind, x: LEFT + b.first * SLOT + 2, y: top + 8,
                        width: (b.last - b.first + 1) * SLOT - 4, height: LANE - 16,
                        rx: 6, "data-lane": b.lane}, barGroup);
    el("title", {}, r).textContent = b.label;
    text(barGroup, LEFT + b.first * SLOT + 4, top + 9, b.label, "bar-label");
  });
  for (var s = 0; s <= data.slots; s += 5) {
    text(svg, x(s), TOP - 20, String(s), "axis", "middle");
  }

  var markGroup = el("g", {id: "marks"}, svg);
  function hover(node, details) {
    node.addEventListener("mousemove", function (ev) {
      tip.textContent = detailText(details);
      tip.style.display = "block";
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 540) + "px";
      tip.style.top = (ev.clientY + 14) + "px";
    });
    node.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }
  data.marks.forEach(function (m) {
    var cx = x(m.slot), cy = y(m.lane);
    var g = el("g", {"class": "io", "data-kind": m.kind, "data-slot": m.slot,
                     "data-lane": m.lane}, markGroup);
    var shape;
    if (m.kind === "callback") {
      shape = el("rect", {"class": "mark callback", x: cx - 5, y: cy - 5, width: 10, height: 10,
                          transform: "rotate(45 " + cx + " " + cy + ")"}, g);
    } else {
      shape = el("circle", {"class": "mark" + (m.selected ? " selected" : ""), cx: cx, cy: cy,
                            r: 7, fill: "var(--" + m.kind + ")"}, g);
    }
    if (m.selected) {
      el("circle", {"class": "fault-ring", cx: cx, cy: cy, r: 10.5}, g);
    }
    el("title", {}, g).textContent = detailText(m.details);
    text(g, cx, cy + 17, shortOf[m.label] || m.label.slice(0, 3), "axis", "middle");
    hover(shape, m.details);
  });

  var linkGroup = el("g", {id: "interleaves"}, svg);
  data.links.forEach(function (l) {
    var g = el("g", {"class": "interleave" + (l.stop ? " has-stop" : "") +
                     (l.target ? " has-replacement" : ""), "data-slot": l.slot}, linkGroup);
    var cx = x(l.slot) - SLOT / 2, cy = y(l.lane);
    if (l.stop) {
      el("path", {"class": "stop", d: "M" + (cx - 5) + " " + (cy - 12) + " l10 10 m0 -10 l-10 10"}, g);
    }
    if (l.target && laneIndex[l.target] !== undefined) {
      var tx = x(l.target_slot === null ? l.slot : l.target_slot) - 8, ty = y(l.target);
      var mid = (cx + tx) / 2 - 14;
      el("path", {"class": "replacement",
                  d: "M" + cx + " " + (cy + (ty > cy ? 8 : -8)) + " C" + mid + " " + cy + " " +
                     mid + " " + ty + " " + tx + " " + ty}, g);
    }
    text(g, cx + 3, cy - 13, l.label, "link-label");
    el("title", {}, g).textContent = "interleave: " + l.label;
  });

  if (data.violation) {
    var v = data.violation;
    var va = el("a", {href: "#finding", id: "violation-step"}, svg);
    var vg = el("g", {id: "violation", "data-slot": v.slot}, va);
    var vx = x(v.slot) + SLOT / 2;
    el("line", {"class": "violation-line", x1: vx, x2: vx, y1: TOP - 6,
                y2: TOP + lanesHeight + 6}, vg);
    var vy = v.lane && laneIndex[v.lane] !== undefined ? y(v.lane) : TOP + lanesHeight / 2;
    var d = "M" + vx + " " + (vy - 10) + " l10 10 l-10 10 l-10 -10 z";
    var diamond = el("path", {"class": "violation-mark", d: d}, vg);
    var room = width - vx - 16;  // the label goes where it fits: right of the line, else left
    var vlabel = text(vg, vx + 13, vy - 4, v.label, "violation-label");
    if (vlabel.getComputedTextLength() > room) {
      vlabel.setAttribute("x", vx - 13);
      vlabel.setAttribute("text-anchor", "end");
    }
    el("title", {}, vg).textContent = v.label + ": " + v.message;
    hover(diamond, [["first violation", v.label], ["message", v.message]]);
  }

  var seriesGroup = el("g", {id: "series"}, svg);
  data.series.forEach(function (s, i) {
    var top = seriesTop + i * (SERIES + GAP);
    var g = el("g", {"class": "series", "data-series": s.key}, seriesGroup);
    el("rect", {"class": "series-frame", x: LEFT, y: top, width: width - LEFT - 240,
                height: SERIES}, g);
    text(g, 10, top + 16, s.label, "lane-label");
    text(g, 10, top + 32, s.names[0], "axis").style.fill = "#e8590c";
    text(g, 10, top + 46, s.names[1], "axis").style.fill = "#1c7ed6";
    var max = 1;
    s.points.forEach(function (p) { max = Math.max(max, p[1], p[2]); });
    text(g, LEFT - 6, top + 10, String(max), "axis", "end");
    text(g, LEFT - 6, top + SERIES - 2, "0", "axis", "end");
    function yv(v) { return top + SERIES - 6 - (v / max) * (SERIES - 14); }
    [1, 2].forEach(function (which) {
      if (!s.points.length) { return; }
      var path = "", prev = null;
      s.points.forEach(function (p) {
        var px = LEFT + p[0] * SLOT, py = yv(p[which]);
        path += prev === null ? "M" + px + " " + py : " H" + px + " V" + py;
        prev = py;
      });
      path += " H" + (LEFT + data.slots * SLOT);
      el("path", {"class": which === 1 ? "series-a" : "series-b", d: path}, g);
    });
    var last = s.points[s.points.length - 1];
    if (last) {
      el("title", {}, g).textContent = s.label + ": " + s.names[0] + " " + last[1] + ", " +
        s.names[1] + " " + last[2] + " at the end";
    }
  });

  // -- the state variables that make the property false, over time ---------------------
  if (data.state_rows.length) {
    var stateGroup = el("g", {id: "state-rows"}, svg);
    text(stateGroup, 10, stateTop - 6, "state over time", "lane-label");
    data.state_rows.forEach(function (row, i) {
      var top = stateTop + i * ROW;
      var g = el("g", {"class": "state-row", "data-row": row.label}, stateGroup);
      var lbl = text(g, LEFT - 6, top + 14, row.label, "state-label", "end");
      while (lbl.getComputedTextLength() > LEFT - 12 && lbl.textContent.length > 4) {
        lbl.textContent = lbl.textContent.slice(0, -2) + "\u2026";
      }
      el("title", {}, lbl).textContent = row.label;
      row.segments.forEach(function (seg, k) {
        var sx = LEFT + seg[0] * SLOT, sw = (seg[1] - seg[0] + 1) * SLOT;
        el("rect", {"class": "state-seg" + (k % 2 ? " odd" : ""), x: sx, y: top + 2, width: sw,
                    height: ROW - 4}, g);
        var t = text(g, sx + 3, top + 14, seg[2], "state-value");
        while (t.getComputedTextLength() > sw - 6 && t.textContent.length > 1) {
          t.textContent = t.textContent.length > 2 ? t.textContent.slice(0, -2) + "\u2026" : "";
        }
        el("title", {}, t).textContent = row.label + " = " + seg[2];
      });
    });
  }

  // -- the steps, with their parameters and changes (a counterexample) -----------------
  if (data.table.length > 1) {
    var tableWrap = html("div", "steps", undefined, app);
    html("h2", "", "Steps", tableWrap);
    var table = html("table", "", undefined, tableWrap);
    data.table.forEach(function (row, i) {
      var tr = html("tr", i === data.table.length - 1 && data.violation ? "violating" : "", undefined, table);
      row.forEach(function (cell) { html(i === 0 ? "th" : "td", "", cell, tr); });
    });
  }

  // -- layout facts for the browser test: the finding is on screen, nothing overflows ---
  var overflow = [];
  var svgWidth = Number(svg.getAttribute("width"));
  svg.querySelectorAll("text").forEach(function (t) {
    var b = t.getBBox();
    if (b.x < 0 || b.x + b.width > svgWidth + 0.5) { overflow.push("svg text " + t.textContent); }
  });
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    overflow.push("the page is wider than the window");
  }
  header.querySelectorAll("dd, span, h1, h2").forEach(function (n) {
    if (n.scrollWidth > n.clientWidth + 1 && getComputedStyle(n).overflow !== "visible") {
      overflow.push("clipped: " + n.textContent.slice(0, 40));
    }
  });
  var findingNode = document.getElementById("finding");
  var visible = "none";
  if (findingNode) {
    var r = findingNode.getBoundingClientRect();
    visible = r.height > 0 && r.top >= 0 && r.top < window.innerHeight ? "visible" : "hidden";
  }
  document.body.setAttribute("data-finding", visible);
  document.body.setAttribute("data-overflow", overflow.length ? overflow.join(" | ") : "none");

  var box = svg.getBBox();
  var body = document.body;
  body.setAttribute("data-lanes", String(lanesGroup.querySelectorAll("g.lane").length));
  body.setAttribute("data-marks", String(markGroup.querySelectorAll("g.io").length));
  body.setAttribute("data-drawn", Math.round(box.width) + "x" + Math.round(box.height));
  body.setAttribute("data-rendered", "true");
})();
