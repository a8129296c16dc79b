/** Table rows from cell values, and a table body filled with rows or one "empty" line. */
import { $, clear, el } from './dom.js';

type Cell = string | number | null;

export function row(cells: Cell[], classes?: (string | null)[]): HTMLTableRowElement {
  const tr = el('tr');
  cells.forEach((cell, i) => {
    tr.appendChild(el('td', cell, classes && classes[i]));
  });
  return tr;
}

export function fill(tableId: string, rows: HTMLTableRowElement[], empty: string, columns: number): void {
  const body = $<HTMLTableElement>(tableId).tBodies[0]!;
  clear(body);
  if (rows.length === 0) {
    const tr = el('tr');
    const td = el('td', empty, 'empty');
    td.colSpan = columns;
    tr.appendChild(td);
    body.appendChild(tr);
    return;
  }
  rows.forEach((tr) => {
    body.appendChild(tr);
  });
}
