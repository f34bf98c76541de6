// Typesets TeX with the MathJax the docs site ships (tests/test_docs.py), as the browser would.
// usage: node mathjax_check.js <MathJax es5 folder> < [[tex, display], ...] as JSON
// prints one line per expression: "ok", or "error: <MathJax's message>" (an undefined macro is an error)
const dir = process.argv[2];
const exprs = JSON.parse(require('fs').readFileSync(0, 'utf8'));
require(dir + '/node-main.js').init({
  loader: {paths: {mathjax: dir}, load: ['input/tex', 'output/chtml']},
  tex: {packages: {'[-]': ['noundefined']}, formatError: (jax, err) => { throw err; }},
}).then((MathJax) => {
  for (const [tex, display] of exprs) {
    try { MathJax.tex2chtml(tex, {display}); console.log('ok'); }
    catch (e) { console.log('error: ' + e.message); }
  }
}).catch((e) => { console.log('init error: ' + e.message); process.exit(1); });
