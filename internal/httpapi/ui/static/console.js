// strata console: the one script of every page (no inline script: Content-Security-Policy
// default-src 'self'). It follows the watch of a list page and refreshes its table when the
// list changes, and puts "/" on the page's search box.
(function () {
  "use strict";

  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.target.closest("input, textarea")) return;
    var box = document.querySelector("[data-focus-key='/']");
    if (box) { e.preventDefault(); box.focus(); box.select(); }
  });

  var table = document.querySelector("table[data-watch]");
  if (!table || !window.fetch || !window.TextDecoder) return;
  var caption = table.querySelector("caption.live");
  var pending = null;

  function refresh() {
    pending = null;
    fetch(window.location.href, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var fresh = doc.querySelector("table[data-watch] tbody");
      if (fresh) {
        table.querySelector("tbody").replaceWith(document.importNode(fresh, true));
        if (caption) caption.textContent = "Updated " + new Date().toLocaleTimeString() + " (live)";
      }
    });
  }

  function follow(url) {
    fetch(url, { credentials: "same-origin" }).then(function (r) {
      // Not a stream (the session ended and the answer is the sign-in page): stop following.
      if (!r.ok || !r.body || (r.headers.get("Content-Type") || "").indexOf("ndjson") < 0) return;
      if (caption) caption.textContent = "Live: changes appear as they happen";
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = "", ended = false;
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) {
            if (ended) {
              if (caption) caption.textContent = "Not live: the session has ended; reload to sign in";
              return;
            }
            setTimeout(function () { follow(url); }, 2000);
            return;
          }
          buf += dec.decode(chunk.value, { stream: true });
          var lines = buf.split("\n");
          buf = lines.pop();
          lines.forEach(function (line) {
            if (!line) return;
            var ev;
            try { ev = JSON.parse(line); } catch (e) { return; }
            if (ev.type === "ADDED" || ev.type === "MODIFIED" || ev.type === "DELETED") {
              if (!pending) pending = setTimeout(refresh, 300);
            }
            // The session or its token ended (signed out, expired, revoked): do not reconnect.
            if (ev.type === "ERROR" && ev.object && ev.object.status === 401) ended = true;
          });
          return pump();
        });
      }
      return pump();
    }).catch(function () { setTimeout(function () { follow(url); }, 5000); });
  }
  follow(table.getAttribute("data-watch"));
})();
