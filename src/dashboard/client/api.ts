/**
 * The token and the calls to /api. The token arrives in the URL fragment, which the browser
 * never sends to the server; it is kept for this tab and cleared from the address bar. Actions
 * (POST) carry it in the x-converge-token header, which a cross-site form cannot set.
 */

const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
if (match) {
  sessionStorage.setItem('converge-token', decodeURIComponent(match[1]!));
  history.replaceState(null, '', location.pathname);
}

export const token: string | null = sessionStorage.getItem('converge-token');

export interface ApiResult<T> {
  ok: boolean;
  status: number;
  json: T;
}

export function api<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<ApiResult<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method === 'POST') {
    headers['content-type'] = 'application/json';
    headers['x-converge-token'] = token || '';
  }
  return fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
  }).then((response) => response.json().then((json: T) => ({ ok: response.ok, status: response.status, json })));
}
