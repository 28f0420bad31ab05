// Which view is on screen. Answers arrive late and out of order: each navigation starts a new
// generation, and whatever was loading for an older one checks it and drops its answer.

let generation = 0;
let view = null;

// Puts `next` on screen (null: a page that is not a view, such as the key prompt).
export function navigate(next) {
  generation += 1;
  view = next;
}

export function currentView() {
  return view;
}

// A check that stays true until the next navigation.
export function untilNextNavigation() {
  const started = generation;
  return () => started === generation;
}
