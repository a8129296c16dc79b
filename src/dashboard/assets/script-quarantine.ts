/**
 * Part of the page's script (script.ts joins the parts into /assets/app.js): the quarantine table
 * and its actions (show payload, replay, discard), sent with the token; without one the buttons
 * stay disabled.
 */
export const QUARANTINE_JS = String.raw`  function renderQuarantine(quarantine) {
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

  function replayed(json) {
    var omitted = json.omittedHeaders || [];
    var properties = json.omittedProperties || [];
    return (
      'replayed to ' +
      json.queue +
      (omitted.length ? '; headers omitted (could not be carried): ' + omitted.join(', ') : '') +
      (properties.length ? '; properties omitted (could not be carried): ' + properties.join(', ') : '')
    );
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
          var text = 'properties: ' + JSON.stringify(message.properties, null, 2) + '\n\ndetail: ' + message.detail + '\n\nbody (' + message.bodyBytes + ' bytes, ' + maskingNote(message) + '):\n' + prettyBody(message.body);
          $('payload').textContent = text;
          $('payload').hidden = false;
          setResult('', '');
          return;
        }
        setResult(action === 'replay' ? replayed(result.json) : 'discarded', 'ok');
        $('replay-form').hidden = true;
        $('discard-form').hidden = true;
        refreshNow();
      })
      .catch(function () {
        setResult('failed: dashboard unreachable', 'failed');
      });
  }
  function maskingNote(message) {
    if (message.masking === 'paths') return message.sensitivePaths.length ? 'masked: ' + message.sensitivePaths.join(', ') : 'nothing marked sensitive';
    if (message.masking === 'payload') return 'payload masked: the message does not say which fields are sensitive';
    if (message.masking === 'body') return 'masked: not a JSON envelope';
    return 'unmasked';
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
`;
