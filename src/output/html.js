(function () {
  // Each graph's document, gzipped in base64 (see gzip_base64), into the
  // frame's srcdoc; the body is marked once every frame has loaded.
  function inflate(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text();
  }
  // A graph that is another under a new title (data-same: the other's
  // panel) takes the other's document, retitled.
  var packed = document.querySelectorAll('iframe[data-gz], iframe[data-same]');
  var pending = packed.length, documents = {};
  function loaded() {
    if (--pending === 0) document.body.dataset.graphs = 'loaded';
  }
  if (pending === 0) document.body.dataset.graphs = 'loaded';
  Array.prototype.forEach.call(packed, function (frame) {
    if (frame.dataset.gz) documents[frame.parentNode.id] = inflate(frame.dataset.gz);
  });
  Array.prototype.forEach.call(packed, function (frame) {
    frame.addEventListener('load', function once() {
      if (!frame.hasAttribute('srcdoc')) return; // the first about:blank
      frame.removeEventListener('load', once);
      loaded();
    });
    var same = frame.dataset.same;
    var doc = same ? (documents['graph-' + same] || Promise.reject('no graph ' + same))
      .then(function (d) {
        // A function: the title taken as text, `$` and all.
        return d.replace(frame.dataset.was, function () { return frame.dataset.title; });
      })
      : documents[frame.parentNode.id];
    doc.then(function (doc) {
      frame.removeAttribute('data-gz');
      frame.setAttribute('srcdoc', doc);
    }, function (err) {
      frame.replaceWith(Object.assign(document.createElement('p'), {
        className: 'empty-graph',
        textContent: 'This browser cannot inflate the graph (' + err + '): open the .svg file beside this page.'
      }));
      loaded();
    });
  });
  var tabs = document.querySelectorAll('[role=tab]');
  var panels = document.querySelectorAll('[role=tabpanel]');
  var matched = document.getElementById('matched');
  var frames = document.querySelectorAll('[role=tabpanel] iframe');
  function active() {
    var f = document.querySelector('[role=tabpanel].active iframe');
    return f && f.contentWindow;
  }
  function showMatched() {
    var w = active(), m = w && w.document.getElementById('matched');
    matched.textContent = m && w.searching ? m.textContent : '';
  }
  // The root of a flame graph is at its bottom: start there, once shown
  // (a hidden frame is not laid out). Its text is fitted again to its width.
  function fit(frame) {
    var w = frame.contentWindow;
    if (!w || !w.document.documentElement) return;
    w.dispatchEvent(new Event('resize'));
    if (!frame.dataset.shown) {
      frame.dataset.shown = '1';
      w.scrollTo(0, w.document.documentElement.scrollHeight);
    }
  }
  function show(i) {
    for (var j = 0; j < tabs.length; j++) {
      tabs[j].setAttribute('aria-selected', i === j ? 'true' : 'false');
      panels[j].classList.toggle('active', i === j);
    }
    var f = panels[i].querySelector('iframe');
    if (f) fit(f);
    showMatched();
  }
  for (var i = 0; i < tabs.length; i++) {
    tabs[i].addEventListener('click', show.bind(null, i));
  }
  for (var k = 0; k < frames.length; k++) {
    frames[k].addEventListener('load', function (e) {
      if (e.target.parentNode.classList.contains('active')) fit(e.target);
    });
  }
  document.getElementById('search').addEventListener('submit', function (e) {
    e.preventDefault();
    var term = document.getElementById('term').value;
    for (var k = 0; k < frames.length; k++) {
      var w = frames[k].contentWindow;
      if (!w || !w.search) continue;
      if (w.searching) w.search_prompt(); // inferno's toggle: resets the search
      if (term) {
        try { w.search(term); } catch (err) { matched.textContent = String(err); return; }
      }
    }
    showMatched();
    if (term && !matched.textContent) matched.textContent = 'no match';
  });
  document.getElementById('unzoom').addEventListener('click', function () {
    var w = active();
    if (w && w.unzoom) w.unzoom();
  });
})();
