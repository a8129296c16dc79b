/**
 * Part of the page's script (script.ts joins the parts into /assets/app.js): the token from the
 * URL fragment, the calls to /api (actions carry the token in the x-converge-token header), the
 * status poll and the render pass that hands each section its data.
 */
export const API_JS = String.raw`  // The token arrives in the fragment (never sent to the server); keep it for this tab and clear the address bar.
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem('converge-token', decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname);
  }
  var token = sessionStorage.getItem('converge-token');

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
`;
