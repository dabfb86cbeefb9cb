/* The book's widgets without a kernel: when a control moves, show each figure's precomputed state.
 *
 * Each .tfm-widget (written by tfm_widgets/static.py, see static_html) holds its controls
 * (data-control = the control's index), one figure per panel (data-panel), and a JSON table:
 * {initial: [value index per control], labels: [[value label, ...] per control],
 *  panels: [{controls: [control index, ...], states: {"i-j": file name | {error: message}}}]}.
 * A state's key joins the value indices of the panel's controls with "-". Files are fetched only
 * when first shown. A figure shrunk to a narrow column shows at full size when tapped (figure-zoom.js).
 */
(function () {
  "use strict";

  function controlIndex(input) {
    return input.type === "checkbox" ? Number(input.checked) : Number(input.value);
  }

  function setUp(widget) {
    const table = JSON.parse(widget.querySelector("script.tfm-widget-states").textContent);
    const base = widget.dataset.base;
    const inputs = Array.from(widget.querySelectorAll("[data-control]"));

    function update() {
      const chosen = table.initial.slice();  // fixed controls keep their only value
      for (const input of inputs) {
        const index = Number(input.dataset.control);
        chosen[index] = controlIndex(input);
        const readout = input.parentElement.querySelector("output");
        if (readout) {
          readout.textContent = table.labels[index][chosen[index]];
        }
      }
      table.panels.forEach(function (panel, p) {
        const figure = widget.querySelector('[data-panel="' + p + '"]');
        const image = figure.querySelector("img");
        const message = figure.querySelector(".tfm-widget-message");
        const state = panel.states[panel.controls.map(function (c) { return chosen[c]; }).join("-")];
        const showsMessage = typeof state !== "string";
        if (!showsMessage && image.getAttribute("src") !== base + state) {
          image.setAttribute("src", base + state);
        }
        image.hidden = showsMessage;
        message.hidden = !showsMessage;
        message.textContent = showsMessage ? state.error : "";
      });
    }

    widget.querySelector("form").addEventListener("input", update);
    update();  // a browser may restore moved controls when the reader comes back to the page
  }

  function setUpAll() {
    document.querySelectorAll(".tfm-widget").forEach(setUp);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUpAll);
  } else {
    setUpAll();
  }
})();
