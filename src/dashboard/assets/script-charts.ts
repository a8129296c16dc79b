/**
 * Part of the page's script (script.ts joins the parts into /assets/app.js): the backlog and lag
 * charts, drawn by hand as SVG from the sampler's history.
 */
export const CHARTS_JS = String.raw`  var SVG = 'http://www.w3.org/2000/svg';
  var COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2'];

  // Charts: hand-drawn SVG, x = time over the ring buffer, y from 0 to a rounded maximum.
  var W = 640, H = 220, L = 48, R = 12, T = 10, B = 26;

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (key) {
      node.setAttribute(key, String(attrs[key]));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }
  function label(v) {
    if (v >= 1000) return (Math.round(v / 100) / 10) + 'k';
    return (Math.round(v * 100) / 100).toString();
  }

  function drawChart(id, legendId, series, spanMs, now) {
    var root = $(id);
    clear(root);
    var legend = $(legendId);
    clear(legend);
    var max = 0;
    series.forEach(function (s) {
      s.points.forEach(function (p) {
        if (p.v > max) max = p.v;
      });
    });
    var top = niceMax(max);
    var x = function (t) {
      return L + ((t - (now - spanMs)) / spanMs) * (W - L - R);
    };
    var y = function (v) {
      return H - B - (v / top) * (H - T - B);
    };
    for (var i = 0; i <= 4; i++) {
      var v = (top * i) / 4;
      root.appendChild(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
      root.appendChild(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, label(v)));
    }
    [0, 0.5, 1].forEach(function (f) {
      var ago = (spanMs * (1 - f)) / 1000;
      var text = f === 1 ? 'now' : ago < 120 ? '-' + Math.round(ago) + ' s' : '-' + Math.round(ago / 6) / 10 + ' min';
      root.appendChild(svg('text', { x: L + f * (W - L - R), y: H - 8, 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle', class: 'axis' }, text));
    });
    var drawn = 0;
    series.forEach(function (s) {
      if (s.points.length === 0) return;
      var d = s.points
        .map(function (p, j) {
          return (j === 0 ? 'M' : 'L') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1);
        })
        .join(' ');
      root.appendChild(svg('path', { d: d, stroke: s.color, class: s.dashed ? 'series dashed' : 'series' }));
      // The newest value as a dot, so a series of one sample shows too.
      var last = s.points[s.points.length - 1];
      root.appendChild(svg('circle', { cx: x(last.t).toFixed(1), cy: y(last.v).toFixed(1), r: s.dashed ? 2 : 3, fill: s.color, class: 'dot' }));
      drawn++;
      if (s.legend) {
        var item = el('span', s.legend);
        var swatch = svg('svg', { width: 14, height: 4, class: 'swatch' });
        swatch.appendChild(svg('rect', { width: 14, height: 4, fill: s.color }));
        item.insertBefore(swatch, item.firstChild);
        legend.appendChild(item);
      }
    });
    if (drawn === 0) root.appendChild(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, 'no data yet'));
  }

  function renderCharts(history) {
    // The axis spans the ring's samples, and at least 30 intervals so the first samples start at the right.
    var spanMs = Math.max(30 * (state.data.sampleIntervalMs || 2000), history.length > 0 ? history[history.length - 1].at - history[0].at : 0);
    var now = history.length > 0 ? history[history.length - 1].at : Date.now();
    drawChart('chart-backlog', 'legend-backlog', [
      { legend: 'pending', color: COLORS[0], points: history.map(function (h) { return { t: h.at, v: h.pending }; }) },
      { legend: 'failed', color: '#b91c1c', points: history.map(function (h) { return { t: h.at, v: h.failed }; }) },
    ], spanMs, now);
    var consumers = [];
    history.forEach(function (h) {
      Object.keys(h.lag).forEach(function (c) {
        if (consumers.indexOf(c) < 0) consumers.push(c);
      });
    });
    var series = [];
    consumers.forEach(function (c, i) {
      var color = COLORS[i % COLORS.length];
      var points = function (key) {
        return history.filter(function (h) { return h.lag[c]; }).map(function (h) { return { t: h.at, v: h.lag[c][key] }; });
      };
      series.push({ legend: c, color: color, points: points('p99Seconds') });
      series.push({ color: color, dashed: true, points: points('p50Seconds') });
    });
    drawChart('chart-lag', 'legend-lag', series, spanMs, now);
  }
`;
