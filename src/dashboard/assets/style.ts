/** The page's stylesheet (served as /assets/app.css; the CSP allows no inline styles). */
export const APP_CSS = String.raw`:root {
  --bg: #f6f7f9;
  --fg: #1c2430;
  --muted: #5f6b7a;
  --card: #ffffff;
  --line: #dde2e8;
  --ok: #15803d;
  --warn: #b45309;
  --bad: #b91c1c;
  --accent: #2563eb;
  font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif;
  font-size: 14px;
  color: var(--fg);
  background: var(--bg);
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; }
header {
  display: flex;
  align-items: center;
  gap: 12px;
  flex-wrap: wrap;
  padding: 10px 20px;
  background: #111827;
  color: #f9fafb;
}
header h1 { font-size: 18px; margin: 0 8px 0 0; font-weight: 600; }
header .muted { color: #9ca3af; }
main { padding: 16px 20px 40px; max-width: 1400px; margin: 0 auto; }
section { margin-bottom: 20px; }
h2 { font-size: 15px; margin: 0 0 8px; }
h3 { font-size: 14px; margin: 0; }
.muted { color: var(--muted); }
.error { color: #fca5a5; }
.badge { padding: 2px 10px; border-radius: 999px; font-weight: 600; font-size: 12px; background: #374151; }
.badge.ok { background: var(--ok); }
.badge.warning { background: var(--warn); }
.badge.stalled { background: var(--bad); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-weight: 600; margin-top: 2px; font-variant-numeric: tabular-nums; }
.card .value.bad { color: var(--bad); }
.finding {
  background: var(--card);
  border: 1px solid var(--line);
  border-left: 5px solid var(--warn);
  border-radius: 6px;
  padding: 8px 12px;
  margin-bottom: 8px;
}
.finding.stalled { border-left-color: var(--bad); }
.finding .title { font-weight: 600; }
.finding .title .sev { text-transform: uppercase; margin-right: 6px; }
.finding.stalled .sev { color: var(--bad); }
.finding.warning .sev { color: var(--warn); }
.finding dl { display: grid; grid-template-columns: 90px 1fr; gap: 2px 8px; margin: 6px 0 0; }
.finding dt { color: var(--muted); }
.finding dd { margin: 0; overflow-wrap: anywhere; }
.none { color: var(--ok); font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
figure { margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg { width: 100%; height: auto; display: block; }
svg .grid { stroke: #e5e7eb; stroke-width: 1; }
svg .axis { fill: var(--muted); font-size: 11px; }
svg .series { fill: none; stroke-width: 2; }
svg .series.dashed { stroke-dasharray: 5 4; stroke-width: 1.5; }
svg .dot { stroke: none; }
svg .empty { fill: var(--muted); font-size: 13px; }
.legend { display: flex; flex-wrap: wrap; gap: 12px; font-size: 12px; color: var(--muted); min-height: 16px; }
.legend .swatch { display: inline-block; width: 12px; height: 3px; margin-right: 4px; vertical-align: middle; }
.split { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: #f1f3f6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.detail { max-width: 320px; overflow-wrap: anywhere; }
td.empty { color: var(--muted); text-align: center; }
tr.resolved td { color: var(--muted); }
.state-open { color: var(--bad); font-weight: 600; }
.actions { white-space: nowrap; }
button {
  font: inherit;
  border: 1px solid var(--line);
  background: #fff;
  border-radius: 5px;
  padding: 3px 9px;
  cursor: pointer;
  margin-right: 4px;
}
button:hover { border-color: var(--accent); color: var(--accent); }
button.danger { color: var(--bad); }
button.link { border: none; background: none; color: var(--accent); padding: 0; }
button:disabled { opacity: 0.5; cursor: default; }
.panel { margin-top: 10px; background: var(--card); border: 1px solid var(--accent); border-radius: 8px; padding: 10px 12px; }
.panel-head { display: flex; justify-content: space-between; align-items: center; margin-bottom: 8px; }
.form { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin-bottom: 8px; }
.form input { font: inherit; padding: 3px 6px; border: 1px solid var(--line); border-radius: 4px; min-width: 240px; }
pre {
  background: #0f172a;
  color: #e2e8f0;
  padding: 10px;
  border-radius: 6px;
  max-height: 320px;
  overflow: auto;
  white-space: pre-wrap;
  overflow-wrap: anywhere;
}
#action-result.ok { color: var(--ok); }
#action-result.failed { color: var(--bad); }
`;
