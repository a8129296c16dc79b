/** AMQP topic matching: words split on '.', `*` is exactly one word, `#` zero or more. */
export function topicMatches(pattern: string, routingKey: string): boolean {
  return matchWords(pattern.split('.'), 0, routingKey.split('.'), 0);
}

function matchWords(pattern: string[], p: number, key: string[], k: number): boolean {
  if (p === pattern.length) return k === key.length;
  const word = pattern[p];
  if (word === '#') {
    for (let skip = k; skip <= key.length; skip++) if (matchWords(pattern, p + 1, key, skip)) return true;
    return false;
  }
  if (k === key.length) return false;
  return (word === '*' || word === key[k]) && matchWords(pattern, p + 1, key, k + 1);
}
