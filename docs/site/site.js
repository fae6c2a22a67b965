// benchlab results site: the front page's filters, the history pages' charts, point details and
// release compare, the run compare pages, every choice kept in the address (a permalink). No
// library, no network: each page's data rides in its own <script type="application/json">.
(function () {
  'use strict';
  var page = document.body.dataset.page;
  function $(s) { return document.querySelector(s); }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function hashState() {
    var out = {};
    location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf('=');
      out[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? '' : decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }
  function writeHash(state) {
    var parts = [];
    Object.keys(state).forEach(function (k) {
      if (state[k]) parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(state[k]));
    });
    var h = parts.length ? '#' + parts.join('&') : '';
    if (location.hash === h || (!h && !location.hash)) return;
    try { history.replaceState(null, '', h || location.pathname + location.search); } catch (e) { location.hash = h; }
  }
  function setSelect(sel, value) {
    if (value === undefined || value === null) return;
    for (var i = 0; i < sel.options.length; i++) {
      if (sel.options[i].value === value) { sel.value = value; return; }
    }
  }
  function three(v) {
    var a = Math.abs(v);
    if (!isFinite(v)) return '∞';
    if (a === 0) return '0';
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return v.toPrecision(3);
  }
  function fmt(unit, v) {
    if (v === null || v === undefined) return '—';
    if (unit === 'bytes') return three(v / 1048576) + ' MiB';
    if (unit === 'rps') return three(v) + '/s';
    if (unit === 'ratio') return three(v * 100) + ' %';
    return three(v) + ' ' + unit;
  }
  function pct(r) {
    var p = (r - 1) * 100;
    return (p >= 0 ? '+' : '−') + Math.abs(p).toFixed(0) + ' %';
  }

  function front() {
    var sels = Array.prototype.slice.call(document.querySelectorAll('select[data-filter]'));
    var st = hashState();
    function apply() {
      var want = {}, shown = 0, total = 0;
      sels.forEach(function (s) { want[s.dataset.filter] = s.value; });
      document.querySelectorAll('.filterable [data-family]').forEach(function (el) {
        var ok = Object.keys(want).every(function (k) {
          return !want[k] || el.dataset[k] === undefined || el.dataset[k] === want[k];
        });
        el.hidden = !ok;
        if (el.closest('#latest')) { total++; if (ok) shown++; }
      });
      $('#shown').textContent = shown + ' of ' + total + ' series shown';
      writeHash(want);
    }
    sels.forEach(function (s) { setSelect(s, st[s.dataset.filter]); s.addEventListener('change', apply); });
    apply();
  }

  function historyPage() {
    var data = JSON.parse($('#data').textContent);
    var T = 1 + data.threshold_pct / 100;
    var W = $('#f-workload'), M = $('#metric'), P = $('#pct'), A = $('#cmp-a'), B = $('#cmp-b');
    var st = hashState(), vs = data.versions;
    setSelect(W, st.workload);
    setSelect(M, st.metric);
    setSelect(P, st.pct);
    setSelect(A, st.a || vs[Math.max(0, vs.length - 2)]);
    setSelect(B, st.b || vs[vs.length - 1]);
    function wanted(m) {
      if (m.metric === 'call_p50' || m.metric === 'call_p99') {
        return m.metric === 'call_' + P.value && (M.value === 'all' || M.value === 'call');
      }
      return M.value === 'all' || M.value === m.metric;
    }
    function visible(s) { return !W.value || s.workload === W.value; }
    function axis(unit, v) { return unit === 'bytes' ? three(v / 1048576) : three(v); }
    function unitName(unit) { return unit === 'bytes' ? 'MiB' : unit === 'rps' ? 'calls/s' : unit; }
    function tip(s, m, i) {
      var p = m.points[i], t = s.versions[i] + ': ' + fmt(m.unit, p.v);
      if (p.lo !== null && p.hi !== null) t += ' [' + fmt(m.unit, p.lo) + ' – ' + fmt(m.unit, p.hi) + ']';
      t += ', ' + p.runs + ' run(s), n ' + p.n + (p.noisy ? ', ' + p.noisy + ' on a loud host' : '');
      return t;
    }
    function chart(s, si, m, mi) {
      var W0 = 720, H0 = 250, L = 60, R = 14, TP = 22, BT = 72, n = s.versions.length, vals = [];
      m.points.forEach(function (p) {
        if (!p) return;
        vals.push(p.v);
        if (p.lo !== null) vals.push(p.lo);
        if (p.hi !== null) vals.push(p.hi);
      });
      var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
      if (!(hi > lo)) { lo = lo * 0.9; hi = hi * 1.1 + 1e-9; }
      var pad = (hi - lo) * 0.08;
      lo = Math.max(0, lo - pad);
      hi += pad;
      function x(i) { return (L + (n === 1 ? (W0 - L - R) / 2 : i * (W0 - L - R) / (n - 1))).toFixed(1); }
      function y(v) { return (TP + (H0 - TP - BT) * (1 - (v - lo) / (hi - lo))).toFixed(1); }
      var o = ['<figure><svg viewBox="0 0 ' + W0 + ' ' + H0 + '" role="img" aria-label="' +
        esc(m.label + ' across releases: ' + s.label) + '">'];
      for (var k = 0; k <= 4; k++) {
        var v = lo + (hi - lo) * k / 4;
        o.push('<line class="grid" x1="' + L + '" x2="' + (W0 - R) + '" y1="' + y(v) + '" y2="' + y(v) + '"/>' +
          '<text class="ax" x="' + (L - 6) + '" y="' + (+y(v) + 4) + '" text-anchor="end">' + axis(m.unit, v) + '</text>');
      }
      var every = Math.max(1, Math.ceil(n * 16 / (W0 - L - R)));
      s.versions.forEach(function (v, i) {
        if (i % every === 0 || i === n - 1) {
          o.push('<text class="ax" transform="translate(' + x(i) + ',' + (H0 - BT + 14) + ') rotate(-45)" text-anchor="end">' +
            esc(v) + '</text>');
        }
      });
      m.segments.forEach(function (g) {
        o.push('<line class="level" x1="' + (x(g[0]) - 5) + '" x2="' + (+x(g[1]) + 5) + '" y1="' + y(g[2]) + '" y2="' +
          y(g[2]) + '"/>');
      });
      m.steps.forEach(function (t, k) {
        var sx = ((+x(t.from) + +x(t.to)) / 2).toFixed(1), ly = k % 2 ? TP + 10 : TP - 6;
        o.push('<line class="step ' + (t.regression ? 'regression' : 'improvement') + '" x1="' + sx + '" x2="' + sx +
          '" y1="' + TP + '" y2="' + (H0 - BT) + '"><title>' + esc(t.text) + '</title></line>' +
          '<text class="steplabel" x="' + (+sx + 3) + '" y="' + ly + '">' + pct(t.ratio) + ' at ' +
          esc(s.versions[t.to]) + '</text>');
      });
      m.points.forEach(function (p, i) {
        if (!p) return;
        if (p.lo !== null && p.hi !== null) {
          o.push('<line class="ci" x1="' + x(i) + '" x2="' + x(i) + '" y1="' + y(p.lo) + '" y2="' + y(p.hi) + '"/>');
        }
        o.push('<circle class="pt' + (p.noisy ? ' noisy' : '') + '" cx="' + x(i) + '" cy="' + y(p.v) +
          '" r="4" tabindex="0" data-s="' + si + '" data-m="' + mi + '" data-i="' + i + '"><title>' +
          esc(tip(s, m, i)) + '</title></circle>');
      });
      s.failures.forEach(function (f, i) {
        if (f) {
          o.push('<text class="fail" x="' + x(i) + '" y="' + (H0 - BT - 3) + '" text-anchor="middle">✕<title>' +
            esc(s.versions[i] + ': ' + f) + '</title></text>');
        }
      });
      o.push('</svg><figcaption>' + esc(m.label) + ' (' + unitName(m.unit) + ') across releases: medians with 95 % ' +
        'intervals, grey lines the fitted levels' + (m.steps.length ? ', dashed lines the steps' : '') +
        (n === 1 ? ' (one release so far)' : '') + '. Click a point for its records.</figcaption></figure>');
      return o.join('');
    }
    function detail(el) {
      var s = data.series[+el.dataset.s], m = s.metrics[+el.dataset.m], i = +el.dataset.i;
      var o = ['<p><strong>' + esc(s.label) + '</strong> at <strong>' + esc(s.versions[i]) + '</strong>: ' +
        esc(m.label) + ' ' + esc(tip(s, m, i)) + '</p><ul>'];
      s.refs[i].forEach(function (r) {
        o.push('<li><a href="../' + esc(r.page) + '">' + esc(r.run) + '</a> record ' + r.seq + ' <code>' +
          esc(r.hash) + '…</code>, lock (image input) <code>' + esc(r.lock) + '…</code>, runtime ' +
          esc(r.runtime_version) + ', kernel ' + esc(r.kernel) + ', ' + esc(r.recorded_at) + ', ' + esc(r.status) +
          (r.control ? ', A/A control (not in the point)' : '') + '</li>');
      });
      o.push('</ul>');
      var d = $('#detail');
      d.innerHTML = o.join('');
      d.hidden = false;
      document.querySelectorAll('#charts .pt.sel').forEach(function (p) { p.classList.remove('sel'); });
      el.classList.add('sel');
    }
    function verdict(m, lo, hi) {
      if (lo === null || !isFinite(lo) || !isFinite(hi)) return 'inconclusive';
      if (!m.higher_is_worse) { var t = lo; lo = 1 / hi; hi = 1 / t; }
      var v = lo > T ? 'slower' : hi < 1 / T ? 'faster' : (lo >= 1 / T && hi <= T) ? 'unchanged' : 'inconclusive';
      if (m.unit === 'bytes') v = v === 'slower' ? 'larger' : v === 'faster' ? 'smaller' : v;
      return v;
    }
    function compare() {
      var a = A.value, b = B.value, rows = [];
      if (a === b) { $('#cmp-out').innerHTML = '<p>Choose two different releases.</p>'; return; }
      data.series.forEach(function (s) {
        var i = s.versions.indexOf(a), j = s.versions.indexOf(b);
        if (!visible(s) || i < 0 || j < 0) return;
        s.metrics.forEach(function (m) {
          var pa = m.points[i], pb = m.points[j];
          if (!wanted(m) || !pa || !pb) return;
          var c = null, lo = Math.min(i, j), hi = Math.max(i, j), rl = null, rh = null;
          m.cmp.forEach(function (e) { if (e[0] === lo && e[1] === hi) c = e; });
          if (c) { rl = i < j ? c[2] : 1 / c[3]; rh = i < j ? c[3] : 1 / c[2]; }
          var v = verdict(m, rl, rh);
          rows.push('<tr><td>' + esc(s.label) + '</td><td>' + esc(m.label) + '</td><td class="n">' + fmt(m.unit, pa.v) +
            '</td><td class="n">' + fmt(m.unit, pb.v) + '</td><td class="n">' + (pb.v / pa.v).toFixed(3) + 'x</td><td class="n">' +
            (rl === null ? '—' : rl.toFixed(3) + '–' + rh.toFixed(3) + 'x') + '</td><td><span class="v v-' + v + '">' + v +
            '</span></td></tr>');
        });
      });
      $('#cmp-out').innerHTML = rows.length
        ? '<div class="wide"><table><thead><tr><th>series</th><th>metric</th><th>' + esc(a) + '</th><th>' + esc(b) +
          '</th><th>b/a</th><th>95 % interval</th><th>verdict</th></tr></thead><tbody>' + rows.join('') +
          '</tbody></table></div>'
        : '<p>No series shown here measured both ' + esc(a) + ' and ' + esc(b) + '.</p>';
    }
    function render() {
      writeHash({
        workload: W.value, metric: M.value === 'all' ? '' : M.value, pct: P.value === 'p50' ? '' : P.value,
        a: A.value, b: B.value
      });
      var html = [];
      data.series.forEach(function (s, si) {
        if (!visible(s)) return;
        var charts = [];
        s.metrics.forEach(function (m, mi) { if (wanted(m)) charts.push(chart(s, si, m, mi)); });
        if (!charts.length) return;
        html.push('<section class="series"><h3>' + esc(s.label) + '</h3><p class="note">host class: ' + esc(s.host) + '</p>');
        s.notes.forEach(function (t) { html.push('<p class="note">' + esc(t) + '</p>'); });
        html.push(charts.join(''));
        s.metrics.forEach(function (m) {
          if (wanted(m)) m.steps.forEach(function (t) { html.push('<p class="note">step: ' + esc(t.text) + '</p>'); });
        });
        html.push('</section>');
      });
      $('#charts').innerHTML = html.join('') || '<p>No series measured this metric.</p>';
      $('#detail').hidden = true;
      compare();
    }
    [W, M, P, A, B].forEach(function (s) { s.addEventListener('change', render); });
    $('#charts').addEventListener('click', function (e) { if (e.target.classList.contains('pt')) detail(e.target); });
    $('#charts').addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && e.target.classList.contains('pt')) detail(e.target);
    });
    render();
  }

  function comparePage() {
    var data = JSON.parse($('#data').textContent), A = $('#run-a'), B = $('#run-b'), st = hashState();
    setSelect(A, st.a || data.runs[data.first[0]]);
    setSelect(B, st.b || data.runs[data.first[1]]);
    function show() {
      var i = data.runs.indexOf(A.value), j = data.runs.indexOf(B.value), out = $('#cmp-out');
      writeHash({ a: A.value, b: B.value });
      if (i === j) { out.innerHTML = '<p>Choose two different runs.</p>'; return; }
      out.innerHTML = '';
      out.appendChild(document.getElementById('cmp-' + i + '-' + j).content.cloneNode(true));
    }
    A.addEventListener('change', show);
    B.addEventListener('change', show);
    show();
  }

  if (page === 'front') front();
  else if (page === 'history') historyPage();
  else if (page === 'compare') comparePage();
})();
