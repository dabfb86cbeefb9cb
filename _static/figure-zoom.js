/* Figures shrunk to a narrow column (a phone's) show at full size when tapped, and say so.
 *
 * The figures are the widgets' (tfm-widgets.js) and those the pages' code draws. Each sits in a
 * .figure-zoom box; where it shows at less than its own size, the box is .figure-zoom-shrunk and
 * carries a magnifier badge (figure-zoom.css). A tap shows the figure at its own size, its text
 * readable, in a box that scrolls across while the page keeps its width; another tap shrinks it again.
 */
(function () {
  "use strict";

  const FIGURES = ".tfm-widget-panel img, .cell_output img";

  function isShrunk(image) {
    return image.naturalWidth > 0 && image.getBoundingClientRect().width < 0.95 * image.naturalWidth;
  }

  function box(image) {
    if (!image.parentElement.classList.contains("figure-zoom")) {
      const wrapper = document.createElement("span");
      wrapper.className = "figure-zoom";
      image.parentElement.insertBefore(wrapper, image);
      wrapper.appendChild(image);
    }
    return image.parentElement;
  }

  function mark(image) {
    const zoom = box(image);
    zoom.classList.toggle("figure-zoom-shrunk", !zoom.classList.contains("figure-zoom-full") && isShrunk(image));
  }

  function markAll() {
    document.querySelectorAll(FIGURES).forEach(mark);
  }

  document.addEventListener("click", function (event) {
    const image = event.target.closest && event.target.closest(FIGURES);
    if (!image) {
      return;
    }
    const zoom = box(image);
    if (zoom.classList.contains("figure-zoom-full")) {
      zoom.classList.remove("figure-zoom-full");
    } else if (isShrunk(image)) {
      zoom.classList.add("figure-zoom-full");
    }
    mark(image);
  });
  // A figure loads (or a widget swaps it in): its size is known.
  document.addEventListener("load", function (event) {
    if (event.target.matches && event.target.matches(FIGURES)) {
      mark(event.target);
    }
  }, true);
  window.addEventListener("resize", markAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", markAll);
  } else {
    markAll();
  }
})();
