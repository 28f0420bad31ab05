// Text for the page: numbers, times, seq ranges, JSON, and values made safe for class names.

// Grouped the same way whatever the browser's locale, so screenshots and tests agree.
export function formatNumber(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "—";
}

export function plural(n, noun) {
  return `${formatNumber(n)} ${noun}${n === 1 ? "" : "s"}`;
}

// One decimal under 10 %, where whole percents would round a small section down to nothing.
export function percentOf(part, whole) {
  if (!whole) return "—";
  return `${((100 * part) / whole).toFixed(part / whole < 0.1 ? 1 : 0)}%`;
}

export function seqRange(from, to) {
  return from === to ? `${from}` : `${from}–${to}`;
}

// Local time to the second in one fixed layout: the page is read by comparing times.
export function formatTime(rfc3339) {
  if (!rfc3339) return "—";
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return rfc3339;
  const p = (n, w = 2) => String(n).padStart(w, "0");
  const date = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  return `${date} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// Tool inputs and outputs are JSON values, or plain strings when the tool gave no JSON.
export function prettyJson(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

// Roles, sections and fates come from the server: keep only what is safe in a class name.
export function cssName(value) {
  return String(value).replace(/[^a-z0-9_-]/gi, "_");
}
