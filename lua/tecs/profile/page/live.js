// The live page's updates (tecs.profile.page writes it into the page):
// `data.json` (beside the page, under its secret) once a second, drawn by
// `tecsPage.draw`.
(function () {
  var updates = 0, waiting = false, status = document.getElementById("live-status");
  function update() {
    if (waiting || document.getElementById("live-pause").checked) return;
    waiting = true;
    fetch("data.json", { cache: "no-store" }).then(function (r) {
      return r.json().then(function (d) {
        if (!r.ok) throw new Error(d.error || r.statusText);
        tecsPage.draw(d);
        updates += 1;
        document.body.setAttribute("data-updates", updates);
        status.textContent = "updated " + new Date().toLocaleTimeString();
      });
    }).catch(function (e) {
      status.textContent = "not updated: " + e.message;
    }).then(function () { waiting = false; });
  }
  setInterval(update, 1000);
})();
