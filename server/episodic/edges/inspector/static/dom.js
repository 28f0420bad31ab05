// Building the DOM. Data only ever reaches it as text (text nodes, textContent): never
// innerHTML, outerHTML, insertAdjacentHTML or document.write, since agents and users wrote it.
// No inline styles either (the CSP forbids them): classes from inspector.css, and CSSOM
// (styled()) for the sizes of bars only.

import { formatTime } from "./format.js";

// h(tag, { class, testid, dataset, onclick, ...attributes }, ...children): an element; a
// null, undefined or false property or child is left out, and strings become text nodes.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "testid") el.dataset.testid = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "style") throw new Error("inline styles are forbidden by the CSP");
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  appendChildren(el, children);
  return el;
}

function appendChildren(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// Sets style properties through CSSOM, which the CSP allows (unlike a style attribute).
export function styled(el, properties) {
  Object.assign(el.style, properties);
  return el;
}

export function link(href, text, props = {}) {
  return h("a", { href, ...props }, text);
}

export function chip(text, cls, props = {}) {
  return h("span", { class: `chip ${cls}`, ...props }, text);
}

export function pre(text, cls = "content") {
  return h("pre", { class: cls }, text);
}

export function timestamp(rfc3339) {
  return h("time", { datetime: rfc3339 || null, title: rfc3339 || null }, formatTime(rfc3339));
}

// A term and its value for a <dl class="facts">.
// A name and its value, kept together when the row wraps (a <div> may group them in a <dl>).
export function fact(name, value) {
  return h("div", { class: "fact" }, h("dt", {}, name), h("dd", {}, value));
}

export function loading(text = "Loading…") {
  return h("p", { class: "muted loading", testid: "loading" }, text);
}

export function emptyNote(text) {
  return h("p", { class: "muted", testid: "empty" }, text);
}
