// When an answer to an approval request counts: one rule for every page that shows them (the platform page, the
// PVF page, and the Markdown editor, whose bundle includes this file). Only a person looking at the page answers:
// it is visible and focused, and the request has been on screen for half a second — a click sooner is a reflex or
// a decoy (a button made to appear under the pointer as someone clicks elsewhere).

/** Milliseconds after a request appears during which its answers are ignored. */
export const ANSWER_GUARD_MS = 500;

/** What the page says when an answer did not count. */
export const TOO_SOON =
  "Read the request first: answers in its first half second, or while this page is not in front, do not count.";

/** Whether an answer given now counts, for a request first shown at `shownAt` (a performance.now() time). */
export function answerable(shownAt) {
  return document.visibilityState === "visible" && document.hasFocus() && performance.now() - shownAt >= ANSWER_GUARD_MS;
}
