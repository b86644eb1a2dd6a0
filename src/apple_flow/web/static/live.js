// Keeps the parts of a page marked data-live fresh: every few seconds (while the tab is visible) it fetches the
// same part rendered by the server and swaps it in. A part with data-live-until-not="running" stops once what it
// shows is no longer running. No framework, no build step: the page works without this script too (reload it).
//
// When the daemon does not answer (stopped, restarting), the banner #offline says so and since when, and what
// the page shows as running is marked as not known; both go once it answers again. A form field being typed in
// is never replaced under the reader's fingers, and what was typed into a field survives a refresh.
"use strict";
(function () {
  const seconds = Number(document.body.dataset.liveSeconds || "2");
  const banner = document.getElementById("offline");
  let lastContact = new Date();

  function reachable(ok) {
    if (ok) lastContact = new Date();
    document.body.classList.toggle("offline", !ok);
    if (banner === null) return;
    if (!ok && banner.hidden) {
      banner.querySelector(".since").textContent = lastContact.toLocaleTimeString();
    }
    banner.hidden = ok;
  }

  for (const part of document.querySelectorAll("[data-live]")) {
    const url = part.dataset.live;
    const until = part.dataset.liveUntilNot;
    const finished = () => {
      if (!until) return false;
      const state = part.querySelector("[data-state]");
      return state !== null && state.dataset.state !== until;
    };
    const refresh = async () => {
      if (finished() && !document.body.classList.contains("offline")) return;
      if (!document.hidden) {
        try {
          const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
          reachable(true);
          if (response.status === 401) {
            const here = window.location.pathname + window.location.search;
            window.location.assign("/login?next=" + encodeURIComponent(here));
            return;
          }
          if (response.ok && !typing(part)) swap(part, await response.text());
        } catch (error) {
          reachable(false);  // no answer at all: the daemon is not running
        }
      }
      window.setTimeout(refresh, seconds * 1000);
    };
    window.setTimeout(refresh, seconds * 1000);
  }

  function typing(part) {
    const focused = document.activeElement;
    return focused !== null && part.contains(focused) && (focused.tagName === "INPUT" || focused.tagName === "TEXTAREA");
  }

  function swap(part, html) {
    const open = new Set([...part.querySelectorAll("details[open]")].map(keyOf));
    const typed = new Map();
    for (const field of part.querySelectorAll("input[name]:not([type=hidden]), textarea[name]")) {
      if (field.value) typed.set(fieldKey(field), field.value);
    }
    part.innerHTML = html;
    for (const details of part.querySelectorAll("details")) {
      if (open.has(keyOf(details))) details.open = true;
    }
    for (const field of part.querySelectorAll("input[name]:not([type=hidden]), textarea[name]")) {
      const value = typed.get(fieldKey(field));
      if (value !== undefined) field.value = value;
    }
  }

  function fieldKey(field) {
    return (field.form ? field.form.getAttribute("action") : "") + "#" + field.name;
  }

  // Details the reader opened stay open across refreshes: a step is known by its position and tool.
  function keyOf(details) {
    const step = details.closest("[data-tool]");
    const list = step ? [...step.parentElement.children].indexOf(step) : -1;
    return list + ":" + (details.querySelector("summary")?.textContent || "").slice(0, 60);
  }
})();
