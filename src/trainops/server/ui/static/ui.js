// trainops web UI: live parts and sortable tables. No dependencies, no build, no inline script
// (the pages' Content-Security-Policy allows only this server's own files).
//
// Live parts: an element with data-live="URL" is refreshed from URL (an HTML fragment the
// server rendered and escaped) every LIVE_MS; the server answers 304 while nothing changed.
// Sorting: a th[data-sort] of a table.sortable sorts its rows by their cells' data-key.
"use strict";

(function () {
  const LIVE_MS = 1500;

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

  function follow(element) {
    let etag = null;
    let stopped = false;
    async function refresh() {
      if (stopped || document.hidden) return;
      const headers = etag ? { "If-None-Match": etag } : {};
      let response;
      try {
        response = await fetch(element.getAttribute("data-live"), {
          headers, credentials: "same-origin", cache: "no-store",
        });
      } catch (_error) {
        return; // the server is restarting or gone: try again on the next tick
      }
      if (response.status === 401) {
        stopped = true;
        showSignedOut();
        return;
      }
      if (response.status !== 200) return;
      const text = await response.text();
      etag = response.headers.get("ETag");
      element.innerHTML = text; // server-rendered, every value escaped there
      element.setAttribute("data-refreshed", String(Number(element.getAttribute("data-refreshed") || 0) + 1));
      applySort(element);
    }
    setInterval(refresh, LIVE_MS);
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.addEventListener("click", onHeaderClick);
    document.querySelectorAll("[data-live]").forEach(follow);
  });
})();
