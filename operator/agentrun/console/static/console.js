// The console's only script: live updates from /events (Server-Sent Events). No inline script
// anywhere (the Content-Security-Policy allows none); the page says what it shows in
// data-view and where its stream is in data-events.
(function () {
  "use strict";
  var body = document.body;
  var view = body.dataset.view;
  var url = body.dataset.events;
  if (!view || !url || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  var refreshing = null;
  var again = false;

  function mark(state) { if (status) { status.className = "live " + state; status.title = "live updates: " + state; } }

  // Refetch the page's live part (the server renders it alone when asked with this header).
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = fetch(window.location.href, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (response.status === 404) { gone(); return null; }
        if (response.redirected || response.status === 401) { window.location.reload(); return null; }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== undefined) {
          var kept = ticked();
          document.getElementById("live").innerHTML = html;
          retick(kept);
        }
      })
      .catch(function () { again = true; })
      .finally(function () {
        refreshing = null;
        if (again) { again = false; setTimeout(refresh, 500); }
      });
  }

  // What a person ticked for a bulk action survives a row's update and a refetch.
  function ticked() {
    var values = {};
    document.querySelectorAll("input[name=run]:checked").forEach(function (box) { values[box.value] = true; });
    return values;
  }
  function retick(values) {
    document.querySelectorAll("input[name=run]").forEach(function (box) { if (values[box.value]) { box.checked = true; } });
  }

  function gone() {
    var live = document.getElementById("live");
    if (live) { live.innerHTML = "<p class=\"error\" id=\"gone\">This run was deleted.</p>"; }
  }

  // The stream's URL names the generation the page was rendered at: when it opens (first, or
  // again after a restart) at another, the server says "refresh" and the page catches up.
  var source = null;
  function connect() {
    source = new EventSource(url);
    source.addEventListener("hello", function () { mark("connected"); });
    source.addEventListener("refresh", function () { refresh(); });
    source.addEventListener("gone", function (event) {
      var data = JSON.parse(event.data);
      if (view === "run") { gone(); return; }
      var row = document.getElementById(data.id);
      if (row) { row.remove(); refresh(); }
    });
    source.addEventListener("change", function (event) {
      var data = JSON.parse(event.data);
      var row = document.getElementById(data.id);
      if (view === "runs" && row && data.matches && data.html) {
        var kept = ticked();
        var holder = document.createElement("tbody");
        holder.innerHTML = data.html;
        row.replaceWith(holder.firstElementChild);
        retick(kept);
      } else if (row || data.matches) {
        refresh();
      }
    });
    source.addEventListener("counts", function (event) {
      var counts = document.getElementById("counts");
      if (counts) { counts.outerHTML = JSON.parse(event.data).html; }
    });
    source.onerror = function () { mark("reconnecting"); };
  }
  connect();
})();
