/**
 * The helpers the page is built with. Text goes in through textContent only, so no data from
 * the API ever becomes markup (ESLint refuses innerHTML and friends in this folder).
 */

/** The element the static page declares under `id`; a missing one is a bug in index.html. */
export function $<T extends Element = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (!node) throw new Error(`#${id} is missing from the page`);
  return node as unknown as T;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string | number | null,
  className?: string | null,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

export function clear(node: Node): void {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function seconds(s: number | null | undefined): string {
  if (s === null || s === undefined) return '–';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${Math.round(s * 10) / 10} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 360) / 10} h`;
}

/** A rate per second; `–` when the status carries none (read without a sample). */
export function rate(r: number | null): string {
  return r === null ? '–' : (Math.round(r * 10) / 10).toString();
}
