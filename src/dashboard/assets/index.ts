/**
 * The page and its assets, embedded as strings: the package ships them inside dist/ with the
 * compiled code, with no build step of their own and nothing loaded from a CDN.
 */
import { ICON_SVG, PAGE_HTML } from './page.js';
import { APP_JS } from './script.js';
import { APP_CSS } from './style.js';

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
