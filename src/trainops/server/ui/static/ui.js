// trainops web UI: live parts and sortable tables. No dependencies, no build, no inline script
// (the pages' Content-Security-Policy allows only this server's own files).
//
// Live parts: an element with data-live="URL" is an HTML fragment the server rendered (every
// value escaped there), redrawn when the store commits a change of its data-topics. The page
// follows the server's change stream (body[data-events], from the cursor the page was read at):
// one long-poll at a time, which the server answers as soon as a topic changes (or after
// WAIT_S with nothing). Then each part of a changed topic is fetched again with its ETag (a 304
// when it shows the same), at most once per data-live-gap ms. While a part shows figures that
// move with time (an element [data-moving] in it: a running job's cost so far), the page asks
// with MOVING_S instead and redraws that part on every answer. A hidden tab stops following
// (its request is cancelled, which frees the server's waiter) and catches up when shown again.
// Sorting: a th[data-sort] of a table.sortable sorts its rows by their cells' data-key.
"use strict";

(function () {
  const WAIT_S = 25; // a long-poll waits this long for a change at most
  const MOVING_S = 5; // ... while a part shows figures that move with time
  const RETRY_MS = 1500; // after a failed or refused ask
  const MIN_GAP_MS = 250; // a part is redrawn at most this often (a burst of changes is one)

  function compare(a, b) {
    const x = Number(a), y = Number(b);
    if (a !== "" && b !== "" && !Number.isNaN(x) && !Number.isNaN(y)) return x - y;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sortTable(table, column, descending) {
    const body = table.tBodies[0];
    if (!body) return;
    const rows = Array.from(body.rows).filter((row) => row.cells.length > column);
    const key = (row) => row.cells[column].getAttribute("data-key") || "";
    rows.sort((a, b) => (descending ? -1 : 1) * compare(key(a), key(b)));
    rows.forEach((row) => body.appendChild(row));
    Array.from(table.tHead.rows[0].cells).forEach((cell, i) => {
      cell.removeAttribute("aria-sort");
      if (i === column) cell.setAttribute("aria-sort", descending ? "descending" : "ascending");
    });
  }

  function applySort(scope) {
    scope.querySelectorAll("table.sortable").forEach((table) => {
      const holder = table.closest("[data-live]") || table;
      const column = holder.getAttribute("data-sort-column");
      if (column !== null) {
        sortTable(table, Number(column), holder.getAttribute("data-sort-order") === "desc");
      }
    });
  }

  function onHeaderClick(event) {
    const th = event.target.closest("th[data-sort]");
    if (!th) return;
    const table = th.closest("table.sortable");
    const holder = table.closest("[data-live]") || table;
    const column = String(th.cellIndex);
    const wasAsc = holder.getAttribute("data-sort-column") === column &&
      holder.getAttribute("data-sort-order") !== "desc";
    holder.setAttribute("data-sort-column", column);
    holder.setAttribute("data-sort-order", wasAsc ? "desc" : "asc");
    applySort(holder.parentNode || holder);
  }

  function showSignedOut() {
    if (document.getElementById("signed-out")) return;
    const note = document.createElement("p");
    note.id = "signed-out";
    note.className = "error";
    note.textContent = "Signed out: live updates stopped. Sign in again to resume.";
    document.body.insertBefore(note, document.body.firstChild);
  }

  async function refresh(part) {
    const headers = part.etag ? { "If-None-Match": part.etag } : {};
    part.last = Date.now();
    let response;
    try {
      response = await fetch(part.element.getAttribute("data-live"), {
        headers, credentials: "same-origin", cache: "no-store",
      });
    } catch (_error) {
      return; // the server is restarting or gone: the stream says when to try again
    }
    if (response.status === 401) {
      showSignedOut();
      return;
    }
    if (response.status !== 200) return;
    const text = await response.text();
    part.etag = response.headers.get("ETag");
    part.element.innerHTML = text; // server-rendered, every value escaped there
    const count = Number(part.element.getAttribute("data-refreshed") || 0) + 1;
    part.element.setAttribute("data-refreshed", String(count));
    applySort(part.element);
  }

  // Redraw a part now, or once its gap since the last redraw is over (one pending at a time).
  function due(part) {
    const wait = part.last + part.gap - Date.now();
    if (wait <= 0) return refresh(part);
    if (!part.timer) {
      part.timer = setTimeout(() => { part.timer = null; refresh(part); }, wait);
    }
    return Promise.resolve();
  }

  function moving(part) {
    return part.element.matches("[data-moving]") || !!part.element.querySelector("[data-moving]");
  }

  function followChanges(parts) {
    const events = document.body.getAttribute("data-events");
    let cursor = document.body.getAttribute("data-cursor");
    if (!events || !cursor) return;
    const topics = new Set();
    parts.forEach((part) => part.topics.forEach((topic) => topics.add(topic)));
    let request = null; // the long-poll under way, if any
    let stopped = false;

    async function next() {
      if (stopped || request || document.hidden) return;
      const anyMoving = parts.some(moving);
      const query = new URLSearchParams();
      topics.forEach((topic) => query.append("topics", topic));
      query.set("since", cursor);
      query.set("wait", String(anyMoving ? MOVING_S : WAIT_S));
      request = new AbortController();
      let answer = null;
      try {
        const response = await fetch(events + "?" + query.toString(), {
          credentials: "same-origin", cache: "no-store", signal: request.signal,
        });
        if (response.status === 401) {
          stopped = true;
          showSignedOut();
        } else if (response.status === 200) {
          answer = await response.json();
        }
      } catch (_error) {
        // cancelled (the tab was hidden) or the server is gone: try again below
      }
      request = null;
      if (stopped) return;
      if (answer === null) {
        setTimeout(next, RETRY_MS);
        return;
      }
      cursor = answer.cursor;
      const changed = new Set(answer.changed);
      await Promise.all(parts
        .filter((part) => part.topics.some((topic) => changed.has(topic)) || moving(part))
        .map(due));
      // After news, ask again after MIN_GAP_MS (changes in between are in the next answer, at
      // once: a busy server's stream of commits costs a tab at most a few asks a second);
      // after a wait without news, straight on; an answer that came at once without news (the
      // server had too many waiting) waits a little.
      setTimeout(next, answer.busy ? RETRY_MS : answer.changed.length ? MIN_GAP_MS : 0);
    }

    document.addEventListener("visibilitychange", () => {
      if (document.hidden && request) {
        request.abort(); // frees the server's waiter; resumed from the cursor when shown
      } else if (!document.hidden) {
        next();
      }
    });
    next();
  }

  function part(element) {
    const topics = (element.getAttribute("data-topics") || "jobs").split(/\s+/).filter(Boolean);
    const gap = Number(element.getAttribute("data-live-gap") || MIN_GAP_MS);
    return { element, topics, gap, etag: null, last: 0, timer: null };
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.addEventListener("click", onHeaderClick);
    const parts = Array.from(document.querySelectorAll("[data-live]")).map(part);
    if (parts.length) followChanges(parts);
  });
})();
