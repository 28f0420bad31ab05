// The page's frame around the views: the main area, the title, the breadcrumbs and the
// header's tenant and key button (index.html holds their elements).

import { storedKey } from "./api.js";
import { h, link } from "./dom.js";

const byTestId = (testid) => document.querySelector(`[data-testid="${testid}"]`);

export function mainArea() {
  return document.getElementById("app");
}

export function setTitle(what) {
  document.title = `${what} · Episodic inspector`;
}

// items: [{ label, href }]; the last is the current page, so it is never a link.
export function setCrumbs(items) {
  const nav = byTestId("breadcrumbs");
  nav.replaceChildren();
  items.forEach((item, i) => {
    if (i > 0) nav.append(h("span", { class: "crumb-sep", "aria-hidden": "true" }, "/"));
    nav.append(
      item.href && i < items.length - 1
        ? link(item.href, item.label, { class: "crumb" })
        : h("span", { class: "crumb current" }, item.label),
    );
  });
}

// The tenant of the session (none: hidden), and the key button that fits it.
export function showSession(session) {
  const tenant = byTestId("tenant");
  const keyButton = byTestId("forget-key");
  if (session) {
    tenant.replaceChildren(h("span", { class: "muted" }, "tenant "), h("strong", {}, session.tenant_id));
    tenant.hidden = false;
  } else {
    tenant.hidden = true;
  }
  // with a key: forget it; without one (a dev server served us anyway): offer to enter one
  keyButton.textContent = storedKey() ? "Forget key" : "Enter a key";
  keyButton.hidden = !session && !storedKey();
}

export function onKeyButton(handler) {
  byTestId("forget-key").addEventListener("click", handler);
}
