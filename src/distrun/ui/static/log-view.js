// The job page's live log: server-sent events from /jobs/NAME/logs/events. The browser's
// EventSource reconnects by itself and sends the last event id (the offsets reached in each
// log file), so the server resumes where it stopped.
(function () {
  const view = document.getElementById("log-view");
  const choice = document.getElementById("log-choice");
  const state = document.getElementById("log-state");
  if (!view || !choice) return;
  const MAX_LINES = 20000;
  let source = null;

  function open() {
    if (source) source.close();
    view.textContent = "";
    const log = choice.value;
    const url = view.dataset.events + (log ? "?log=" + encodeURIComponent(log) : "");
    source = new EventSource(url);
    state.textContent = "live";
    source.onmessage = function (event) {
      const atEnd = view.scrollTop + view.clientHeight >= view.scrollHeight - 4;
      view.appendChild(document.createTextNode(event.data + "\n"));
      while (view.childNodes.length > MAX_LINES) view.removeChild(view.firstChild);
      if (atEnd) view.scrollTop = view.scrollHeight;
    };
    source.addEventListener("end", function (event) {
      state.textContent = "job " + event.data + ": log complete";
      source.close();
    });
    source.addEventListener("problem", function (event) {
      state.textContent = event.data + " (retrying)";
    });
    source.onerror = function () {
      state.textContent = "reconnecting…";
    };
    source.onopen = function () {
      state.textContent = "live";
    };
  }

  choice.addEventListener("change", function () {
    const url = new URL(window.location.href);
    if (choice.value) url.searchParams.set("log", choice.value);
    else url.searchParams.delete("log");
    history.replaceState(null, "", url);
    open();
  });
  open();
})();
