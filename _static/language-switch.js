/* The language switch keeps the reader's place (_ext/languages.py): following it, the other edition's page
 * opens at the same section, whose heading keeps its anchor in every edition. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("a.language-switch");
    if (link && window.location.hash) {
      link.hash = window.location.hash;
    }
  });
})();
