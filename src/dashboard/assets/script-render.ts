/**
 * Part of the page's script (script.ts joins the parts into /assets/app.js): the summary cards,
 * the findings and the pipeline, lag and gap tables.
 */
export const RENDER_JS = String.raw`  function renderSummary(status, quarantine) {
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
`;
