// trainops web UI, the job page: follow the log live with a long-poll. No dependencies, no
// inline script. #log[data-follow] holds the URL of the log's live part; each request asks it
// to wait (up to 20 s) for a line after the last cursor shown (data-next), so a new line shows
// as soon as the server has it. An ended job's log is not followed any further.
"use strict";

(function () {
  const WAIT_S = 20;
  const RETRY_MS = 1500;

  function follow(element) {
    const base = element.getAttribute("data-follow");
    async function next() {
      const view = element.querySelector("[data-next]");
      if (!view || view.getAttribute("data-ended") === "1") return;
      const url = base + (base.includes("?") ? "&" : "?") +
        "since=" + encodeURIComponent(view.getAttribute("data-next")) + "&wait=" + WAIT_S;
      let response;
      try {
        response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      } catch (_error) {
        setTimeout(next, RETRY_MS); // the server is restarting or gone: try again
        return;
      }
      if (response.status === 401) return; // signed out: ui.js says so on its next refresh
      let changed = false;
      if (response.status === 200) {
        const text = await response.text();
        changed = text !== element.innerHTML;
        if (changed) element.innerHTML = text; // server-rendered, every value escaped there
      }
      // Straight on after news; after an answer without any (the server had no follower slot
      // free, or only the status changed) wait a little, so a follower never spins.
      setTimeout(next, changed ? 0 : RETRY_MS);
    }
    next();
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-follow]").forEach(follow);
  });
})();
