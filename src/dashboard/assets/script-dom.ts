/**
 * Part of the page's script (script.ts joins the parts into /assets/app.js): the state the parts
 * share and the helpers they build the page with. Text goes in with textContent only, so no data
 * becomes markup.
 */
export const DOM_JS = String.raw`  var state = { data: null, action: null, pollMs: 2000 };

  function $(id) {
    return document.getElementById(id);
  }
  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }
  function seconds(s) {
    if (s === null || s === undefined) return '–';
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 120) return (Math.round(s * 10) / 10) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (Math.round(s / 360) / 10) + ' h';
  }
  function rate(r) {
    return (Math.round(r * 10) / 10).toString();
  }
`;
