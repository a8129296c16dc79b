/**
 * The page's script (served as /assets/app.js): polls /api/status, renders with textContent
 * and DOM calls only (no innerHTML, so no data becomes markup), draws the charts as SVG, and
 * sends the actions with the token from the URL fragment in the x-converge-token header.
 * Plain ES2020 with no template literals, kept in a String.raw literal so the package ships it
 * without a build step.
 */
export const APP_JS = String.raw`'use strict';
(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  var COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2'];
  var state = { data: null, action: null, pollMs: 2000 };

  // The token arrives in the fragment (never sent to the server); keep it for this tab and clear the address bar.
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem('converge-token', decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname);
  }
  var token = sessionStorage.getItem('converge-token');

  function $(id) {
    return document.getElementById(id);
  }
  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }
  function seconds(s) {
    if (s === null || s === undefined) return '–';
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 120) return (Math.round(s * 10) / 10) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (Math.round(s / 360) / 10) + ' h';
  }
  function rate(r) {
    return (Math.round(r * 10) / 10).toString();
  }
  function sum(record) {
    return Object.keys(record).reduce(function (total, key) {
      return total + record[key];
    }, 0);
  }

  function api(method, path, body) {
    var headers = { accept: 'application/json' };
    if (method === 'POST') {
      headers['content-type'] = 'application/json';
      headers['x-converge-token'] = token || '';
    }
    return fetch(path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    }).then(function (response) {
      return response.json().then(function (json) {
        return { ok: response.ok, status: response.status, json: json };
      });
    });
  }

  function poll() {
    api('GET', '/api/status')
      .then(function (result) {
        if (result.ok) render(result.json);
        else showSamplingError('status: HTTP ' + result.status);
      })
      .catch(function () {
        showSamplingError('dashboard unreachable');
      })
      .then(function () {
        setTimeout(poll, state.pollMs);
      });
  }

  function showSamplingError(text) {
    var node = $('sampling-error');
    node.textContent = text;
    node.hidden = !text;
  }

  function render(data) {
    state.data = data;
    state.pollMs = Math.max(1000, data.sampleIntervalMs || 2000);
    showSamplingError(data.samplingError ? 'sampling failed: ' + data.samplingError : '');
    $('token-state').textContent = token ? '' : 'read-only: open the URL printed by converge dashboard to act';
    var status = data.status;
    renderSummary(status, data.quarantine);
    renderFindings(status);
    renderPipeline(status);
    renderLag(status);
    renderGaps(status);
    renderQuarantine(data.quarantine);
    renderCharts(data.history);
  }

  function renderSummary(status, quarantine) {
    var badge = $('state');
    if (!status) {
      badge.textContent = 'waiting for the first sample';
      badge.className = 'badge';
      return;
    }
    var worst = status.stalled ? 'stalled' : status.findings.length > 0 ? 'warning' : 'ok';
    badge.textContent = worst === 'ok' ? 'OK' : worst.toUpperCase();
    badge.className = 'badge ' + worst;
    $('checked').textContent =
      'checked ' + new Date(status.checkedAt).toLocaleTimeString() + ' · stall after ' + status.stallAfterSeconds + ' s';
    setValue('pending', status.outbox.pending, false);
    setValue('oldest', seconds(status.outbox.oldestPendingAgeSeconds), (status.outbox.oldestPendingAgeSeconds || 0) > status.stallAfterSeconds);
    setValue('failed', status.outbox.failed, status.outbox.failed > 0);
    var open = quarantine.filter(function (q) {
      return q.resolvedAt === null;
    }).length;
    setValue('quarantined', open, open > 0);
    setValue('parked', status.gaps.parked, false);
    setValue('stuck', status.gaps.stuckAggregates, status.gaps.stuckAggregates > 0);
  }
  function setValue(id, value, bad) {
    var node = $(id);
    node.textContent = String(value);
    node.className = bad ? 'value bad' : 'value';
  }

  function renderFindings(status) {
    var root = $('findings');
    clear(root);
    if (!status) return;
    if (status.findings.length === 0) {
      root.appendChild(el('div', 'No stall found', 'none'));
      return;
    }
    status.findings.forEach(function (f) {
      var box = el('div', null, 'finding ' + f.severity);
      box.setAttribute('data-kind', f.kind);
      var title = el('div', null, 'title');
      title.appendChild(el('span', f.severity, 'sev'));
      title.appendChild(document.createTextNode(f.stage + ': ' + f.kind + (f.subject ? ' (' + f.subject + ')' : '')));
      box.appendChild(title);
      var dl = el('dl');
      [['evidence', f.evidence], ['look at', f.lookAt], ['recovered', f.recovered]].forEach(function (pair) {
        dl.appendChild(el('dt', pair[0]));
        dl.appendChild(el('dd', pair[1]));
      });
      box.appendChild(dl);
      root.appendChild(box);
    });
  }

  function row(cells, classes) {
    var tr = el('tr');
    cells.forEach(function (cell, i) {
      tr.appendChild(el('td', cell, classes && classes[i]));
    });
    return tr;
  }
  function fill(tableId, rows, empty, columns) {
    var body = $(tableId).tBodies[0];
    clear(body);
    if (rows.length === 0) {
      var tr = el('tr');
      var td = el('td', empty, 'empty');
      td.colSpan = columns;
      tr.appendChild(td);
      body.appendChild(tr);
      return;
    }
    rows.forEach(function (tr) {
      body.appendChild(tr);
    });
  }
  function drain(t) {
    return t.drainSeconds === null ? 'not draining' : seconds(t.drainSeconds);
  }

  function renderPipeline(status) {
    if (!status) return fill('pipeline', [], 'no sample yet', 5);
    var num = [null, 'num', 'num', 'num', 'num'];
    var rows = [
      row(['outbox → broker', status.outbox.pending, rate(status.outbox.throughput.arrivalPerSecond), rate(status.outbox.throughput.completionPerSecond), drain(status.outbox.throughput)], num),
    ];
    status.queues.forEach(function (q) {
      rows.push(
        row(
          q.depth === null
            ? ['queue ' + q.queue + ' (missing)', '–', '–', '–', '–']
            : ['queue ' + q.queue + (q.consumer === q.queue ? '' : ' → ' + q.consumer), q.depth, rate(q.throughput.arrivalPerSecond), rate(q.throughput.completionPerSecond), drain(q.throughput)],
          num,
        ),
      );
    });
    fill('pipeline', rows, '', 5);
  }

  function renderLag(status) {
    var rows = status
      ? status.lag.map(function (l) {
          return row([l.consumer, l.events, seconds(l.p50Seconds), seconds(l.p99Seconds), seconds(l.maxSeconds)], [null, 'num', 'num', 'num', 'num']);
        })
      : [];
    fill('lag', rows, status ? 'no event recorded in the last ' + status.windowSeconds + ' s' : 'no sample yet', 5);
  }

  function renderGaps(status) {
    var rows = status
      ? status.gaps.sample.map(function (g) {
          return row([g.consumer, g.aggregateType + '/' + g.aggregateId, g.currentVersion, g.parkedVersions.join(', ')], [null, null, 'num', null]);
        })
      : [];
    var empty = status ? status.gaps.parked + ' parked event(s), no aggregate waiting past the stall threshold' : 'no sample yet';
    fill('gaps', rows, empty, 4);
  }

  function renderQuarantine(quarantine) {
    var rows = quarantine.map(function (q) {
      var open = q.resolvedAt === null;
      var tr = row(
        [q.id, q.consumer, q.eventId || '–', q.reason, q.detail, seconds(q.ageSeconds), q.bodyBytes],
        [null, null, null, null, 'detail', 'num', 'num'],
      );
      tr.setAttribute('data-id', q.id);
      if (!open) tr.className = 'resolved';
      var stateText = open
        ? 'open'
        : q.resolution + (q.replayOutcome ? ' → ' + q.replayOutcome : q.resolution === 'replayed' ? ' → pending' : '');
      var stateCell = el('td', stateText, open ? 'state state-open' : 'state');
      if (q.resolutionNote) stateCell.title = q.resolutionNote;
      tr.appendChild(stateCell);
      var actions = el('td', null, 'actions');
      actions.appendChild(button('Show payload', 'show', q));
      if (open) {
        actions.appendChild(button('Replay', 'replay', q));
        actions.appendChild(button('Discard', 'discard', q));
      }
      tr.appendChild(actions);
      return tr;
    });
    fill('quarantine', rows, 'nothing quarantined', 9);
  }
  function button(label, action, q) {
    var b = el('button', label, action === 'discard' ? 'danger' : '');
    b.type = 'button';
    b.setAttribute('data-action', action);
    b.disabled = !token;
    b.addEventListener('click', function () {
      openAction(action, q);
    });
    return b;
  }

  function defaultQueue(consumer) {
    var queues = (state.data && state.data.queues) || [];
    for (var i = 0; i < queues.length; i++) if (queues[i].consumer === consumer) return queues[i].queue;
    return consumer;
  }

  function openAction(action, q) {
    state.action = { action: action, id: q.id };
    $('action-panel').hidden = false;
    $('replay-form').hidden = action !== 'replay';
    $('discard-form').hidden = action !== 'discard';
    $('payload').hidden = true;
    $('payload').textContent = '';
    setResult('', '');
    var titles = { show: 'Payload of', replay: 'Replay', discard: 'Discard' };
    $('action-title').textContent = titles[action] + ' #' + q.id + ' (' + q.consumer + ', ' + (q.eventId || 'no event id') + ')';
    if (action === 'replay') {
      $('replay-queue').value = defaultQueue(q.consumer);
      $('replay-note').value = '';
    }
    if (action === 'discard') $('discard-reason').value = '';
    if (action === 'show') send('show', {});
  }

  function setResult(text, kind) {
    var node = $('action-result');
    node.textContent = text;
    node.className = kind;
  }

  function send(action, body) {
    var current = state.action;
    if (!current || current.action !== action) return;
    setResult('working…', '');
    api('POST', '/api/quarantine/' + current.id + '/' + action, body)
      .then(function (result) {
        if (!result.ok) {
          setResult('failed (HTTP ' + result.status + '): ' + (result.json.error || ''), 'failed');
          return;
        }
        if (action === 'show') {
          var message = result.json;
          var text = 'properties: ' + JSON.stringify(message.properties, null, 2) + '\n\nbody (' + message.bodyBytes + ' bytes):\n' + prettyBody(message.body);
          $('payload').textContent = text;
          $('payload').hidden = false;
          setResult('', '');
          return;
        }
        setResult(action === 'replay' ? 'replayed to ' + result.json.queue : 'discarded', 'ok');
        $('replay-form').hidden = true;
        $('discard-form').hidden = true;
        refreshNow();
      })
      .catch(function () {
        setResult('failed: dashboard unreachable', 'failed');
      });
  }
  function prettyBody(body) {
    try {
      return JSON.stringify(JSON.parse(body), null, 2);
    } catch (e) {
      return body;
    }
  }
  function refreshNow() {
    api('GET', '/api/status').then(function (result) {
      if (result.ok) render(result.json);
    });
  }

  $('action-close').addEventListener('click', function () {
    state.action = null;
    $('action-panel').hidden = true;
    $('payload').textContent = '';
  });
  $('replay-confirm').addEventListener('click', function () {
    var note = $('replay-note').value;
    send('replay', note ? { queue: $('replay-queue').value, note: note } : { queue: $('replay-queue').value });
  });
  $('discard-confirm').addEventListener('click', function () {
    var reason = $('discard-reason').value;
    if (!reason.trim()) {
      setResult('a discard needs a reason', 'failed');
      return;
    }
    send('discard', { reason: reason });
  });

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

  poll();
})();
`;
