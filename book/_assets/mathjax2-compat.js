/* MathJax 2's MathJax.Hub.Queue for the Jupyter widget manager, on top of MathJax 3.
 *
 * The widget manager that renders the saved widgets (@jupyter-widgets/html-manager, for
 * ipywidgets 8) typesets every widget label with MathJax 2's API as soon as a global
 * MathJax exists: MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]). The book loads
 * MathJax 3 (sphinx.ext.mathjax, vendored in book/_vendor), which has no Hub, so every
 * page with a labelled widget (a slider) threw "Cannot read properties of undefined
 * (reading 'Queue')" and the label was never typeset. This file gives MathJax 3 the one
 * Hub method the widgets call, and maps it onto MathJax 3's typesetPromise, chained on
 * MathJax.startup.promise as MathJax 3's documentation asks for typesetting after load.
 *
 * Loaded by _config.yml (html_js_files) with defer, so it runs after MathJax's own deferred
 * script has created the MathJax 3 object, and before the widgets render (the manager
 * waits for the page's load event). It does nothing on a page without MathJax 3.
 */
(function () {
  "use strict";

  function typeset(elements) {
    var mathjax = window.MathJax;
    var ready = mathjax.startup && mathjax.startup.promise;
    var next = (ready || Promise.resolve())
      .then(function () {
        return mathjax.typesetPromise(elements);
      })
      .catch(function (error) {
        console.warn("MathJax could not typeset a widget label:", error);
      });
    if (ready) {
      mathjax.startup.promise = next;
    }
    return next;
  }

  function install() {
    var mathjax = window.MathJax;
    // No MathJax on this page, MathJax 3 not loaded yet (only its configuration object,
    // which has no version), or a MathJax 2 that has its own Hub.
    if (!mathjax || !mathjax.version || mathjax.Hub) {
      return;
    }
    mathjax.Hub = {
      // Queue(["Typeset", MathJax.Hub, element], ...): typeset the elements, in order.
      Queue: function () {
        var elements = [];
        for (var i = 0; i < arguments.length; i++) {
          var item = arguments[i];
          if (Array.isArray(item) && item[0] === "Typeset") {
            elements.push(item[2] || document.body);
          } else if (typeof item === "function") {
            item();
          }
        }
        return elements.length ? typeset(elements) : Promise.resolve();
      },
    };
  }

  install();
  document.addEventListener("DOMContentLoaded", install);
})();
