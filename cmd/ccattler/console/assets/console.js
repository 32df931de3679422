// The cluster page follows the server's stream: each event carries the
// tables rendered at a new revision, swapped in without a reload.
"use strict";
(function () {
  // The why graph: fitted to the window, or at its actual size.
  var zoom = document.getElementById("zoom"), graph = document.querySelector(".graph");
  if (zoom && graph) {
    zoom.addEventListener("click", function () {
      var fit = graph.classList.toggle("fit");
      zoom.textContent = fit ? "actual size" : "fit to window";
    });
  }
  var el = document.querySelector("[data-live]");
  if (!el || !window.EventSource) return;
  var state = document.getElementById("live-state");
  var es = new EventSource(el.getAttribute("data-live"));
  es.addEventListener("cluster", function (e) {
    el.innerHTML = e.data;
    if (state) state.textContent = "live: updated at revision " + e.lastEventId;
  });
  es.onopen = function () { if (state) state.textContent = "live: connected"; };
  es.onerror = function () { if (state) state.textContent = "live: reconnecting…"; };
})();
