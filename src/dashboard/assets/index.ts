/**
 * The page and its assets, served from memory: bundle.ts holds them as strings, generated from
 * src/dashboard/client/ (scripts/dashboard/build.ts), so the package ships them inside dist/
 * with the compiled code and nothing is loaded from a CDN.
 */
import { APP_CSS, APP_JS, ICON_SVG, PAGE_HTML } from './bundle.js';

export interface Asset {
  type: string;
  body: string;
}

export const ASSETS: Readonly<Record<string, Asset>> = {
  '/': { type: 'text/html; charset=utf-8', body: PAGE_HTML },
  '/assets/app.js': { type: 'text/javascript; charset=utf-8', body: APP_JS },
  '/assets/app.css': { type: 'text/css; charset=utf-8', body: APP_CSS },
  '/assets/icon.svg': { type: 'image/svg+xml', body: ICON_SVG },
};
