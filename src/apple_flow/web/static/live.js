// Keeps the parts of a page marked data-live fresh: every few seconds (while the tab is visible) it fetches the
// same part rendered by the server and swaps it in. A part with data-live-until-not="running" stops once what it
// shows is no longer running. No framework, no build step: the page works without this script too (reload it).
"use strict";
(function () {
  const seconds = Number(document.body.dataset.liveSeconds || "2");
  for (const part of document.querySelectorAll("[data-live]")) {
    const url = part.dataset.live;
    const until = part.dataset.liveUntilNot;
    const finished = () => {
      if (!until) return false;
      const state = part.querySelector("[data-state]");
      return state !== null && state.dataset.state !== until;
    };
    const refresh = async () => {
      if (finished()) return;
      if (!document.hidden) {
        try {
          const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
          if (response.status === 401) {
            window.location.assign("/login");
            return;
          }
          if (response.ok) {
            const open = new Set([...part.querySelectorAll("details[open]")].map(keyOf));
            part.innerHTML = await response.text();
            for (const details of part.querySelectorAll("details")) {
              if (open.has(keyOf(details))) details.open = true;
            }
          }
        } catch (error) {
          // The daemon restarting: try again at the next tick.
        }
      }
      window.setTimeout(refresh, seconds * 1000);
    };
    window.setTimeout(refresh, seconds * 1000);
  }

  // Details the reader opened stay open across refreshes: a step is known by its position and tool.
  function keyOf(details) {
    const step = details.closest("[data-tool]");
    const list = step ? [...step.parentElement.children].indexOf(step) : -1;
    return list + ":" + (details.querySelector("summary")?.textContent || "").slice(0, 60);
  }
})();
