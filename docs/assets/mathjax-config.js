// MathJax settings for the site (read by assets/mathjax/tex-chtml.js, shipped by docs/hooks/mathjax.py):
// typeset only what pymdownx.arithmatex marked, \( \) inline and \[ \] displayed, and again after
// every page change of the theme's instant navigation.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true },
  options: { ignoreHtmlClass: ".*", processHtmlClass: "arithmatex" },
  chtml: { displayOverflow: "linebreak" }
};
if (typeof document$ !== "undefined") {
  document$.subscribe(function () {
    if (window.MathJax && MathJax.typesetPromise) {
      MathJax.typesetClear();
      MathJax.texReset();
      MathJax.typesetPromise();
    }
  });
}
