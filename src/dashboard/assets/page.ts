/** The page's markup: static; app.js fills it from /api/status with textContent only (no HTML from data). */
export const PAGE_HTML = String.raw`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="no-referrer" />
    <title>converge dashboard</title>
    <link rel="icon" href="/assets/icon.svg" type="image/svg+xml" />
    <link rel="stylesheet" href="/assets/app.css" />
    <script src="/assets/app.js" defer></script>
  </head>
  <body>
    <header>
      <h1>converge</h1>
      <span id="state" class="badge">loading</span>
      <span id="checked" class="muted"></span>
      <span id="sampling-error" class="error" hidden></span>
      <span id="token-state" class="muted"></span>
    </header>
    <main>
      <section class="cards" aria-label="summary">
        <div class="card"><div class="label">outbox pending</div><div class="value" id="pending">–</div></div>
        <div class="card"><div class="label">oldest pending</div><div class="value" id="oldest">–</div></div>
        <div class="card"><div class="label">outbox failed</div><div class="value" id="failed">–</div></div>
        <div class="card"><div class="label">quarantine open</div><div class="value" id="quarantined">–</div></div>
        <div class="card"><div class="label">parked events</div><div class="value" id="parked">–</div></div>
        <div class="card"><div class="label">stuck aggregates</div><div class="value" id="stuck">–</div></div>
      </section>

      <section aria-labelledby="findings-title">
        <h2 id="findings-title">Findings</h2>
        <div id="findings"></div>
      </section>

      <section class="charts" aria-label="charts">
        <figure>
          <figcaption>Outbox backlog (pending events)</figcaption>
          <svg id="chart-backlog" viewBox="0 0 640 220" role="img" aria-label="outbox backlog over time"></svg>
          <div class="legend" id="legend-backlog"></div>
        </figure>
        <figure>
          <figcaption>Consumer lag, occurredAt → inbox (seconds; p99 solid, p50 dashed)</figcaption>
          <svg id="chart-lag" viewBox="0 0 640 220" role="img" aria-label="consumer lag over time"></svg>
          <div class="legend" id="legend-lag"></div>
        </figure>
      </section>

      <section class="split">
        <div>
          <h2>Pipeline</h2>
          <table id="pipeline">
            <thead>
              <tr><th>stage</th><th class="num">backlog</th><th class="num">arrival/s</th><th class="num">completion/s</th><th class="num">drain</th></tr>
            </thead>
            <tbody></tbody>
          </table>
        </div>
        <div>
          <h2>Consumer lag</h2>
          <table id="lag">
            <thead>
              <tr><th>consumer</th><th class="num">events</th><th class="num">p50</th><th class="num">p99</th><th class="num">max</th></tr>
            </thead>
            <tbody></tbody>
          </table>
        </div>
      </section>

      <section>
        <h2>Gaps and parked events</h2>
        <table id="gaps">
          <thead>
            <tr><th>consumer</th><th>aggregate</th><th class="num">at version</th><th>parked versions</th></tr>
          </thead>
          <tbody></tbody>
        </table>
      </section>

      <section>
        <h2>Quarantine</h2>
        <table id="quarantine">
          <thead>
            <tr>
              <th>id</th><th>consumer</th><th>event id</th><th>reason</th><th>detail</th><th class="num">age</th><th class="num">bytes</th>
              <th>state</th><th>actions</th>
            </tr>
          </thead>
          <tbody></tbody>
        </table>
        <div id="action-panel" class="panel" hidden>
          <div class="panel-head">
            <h3 id="action-title"></h3>
            <button type="button" id="action-close" class="link">close</button>
          </div>
          <div id="replay-form" class="form" hidden>
            <label>queue <input id="replay-queue" autocomplete="off" /></label>
            <label>note <input id="replay-note" autocomplete="off" placeholder="optional" /></label>
            <button type="button" id="replay-confirm">Replay</button>
          </div>
          <div id="discard-form" class="form" hidden>
            <label>reason <input id="discard-reason" autocomplete="off" placeholder="required, recorded" /></label>
            <button type="button" id="discard-confirm" class="danger">Discard</button>
          </div>
          <pre id="payload" hidden></pre>
          <div id="action-result" role="status"></div>
        </div>
      </section>
    </main>
  </body>
</html>
`;

export const ICON_SVG = String.raw`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#2563eb"/><path d="M4 8h8M9 5l3 3-3 3" stroke="#fff" stroke-width="1.6" fill="none"/></svg>
`;
