/**
 * The page's script (served as /assets/app.js), one file made of parts by concern: DOM and
 * format helpers (script-dom.ts), the token and /api calls (script-api.ts), the summary and
 * tables (script-render.ts), the quarantine actions (script-quarantine.ts) and the SVG charts
 * (script-charts.ts). They share one function scope, so they stay one script: one request, and
 * the CSP's script-src 'self' covers it. Plain ES2020 with no template literals, kept in
 * String.raw literals so the package ships it without a build step.
 */
import { API_JS } from './script-api.js';
import { CHARTS_JS } from './script-charts.js';
import { DOM_JS } from './script-dom.js';
import { QUARANTINE_JS } from './script-quarantine.js';
import { RENDER_JS } from './script-render.js';

export const APP_JS = [
  "'use strict';\n(function () {\n",
  [DOM_JS, API_JS, RENDER_JS, QUARANTINE_JS, CHARTS_JS].join('\n'),
  '\n  poll();\n})();\n',
].join('');
