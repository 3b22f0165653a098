// Refreshes the lag cells and states of the mirrors section from /api/mirrors every 5 s,
// and the whole page every minute (the lag graphs are drawn by the server).
(function () {
  function refresh() {
    fetch('/api/mirrors').then(function (r) { return r.json(); }).then(function (mirrors) {
      (mirrors || []).forEach(function (m) {
        var art = document.querySelector('article.mirror[data-mirror="' + CSS.escape(m.name) + '"]');
        if (!art) { return; }
        var loss = art.querySelector('.failover-loss');
        if (loss) { loss.textContent = m.failoverLossRecords + ' records'; }
        (m.partitions || []).forEach(function (p) {
          var row = art.querySelector('tr.partition[data-topic="' + CSS.escape(p.topic) + '"][data-partition="' + p.partition + '"]');
          if (!row) { return; }
          row.dataset.state = p.state;
          var st = row.querySelector('td.state');
          st.textContent = p.state;
          st.className = 'state state-' + p.state;
          row.querySelector('td.lag').textContent = p.lag < 0 ? '–' : String(p.lag);
          row.querySelector('td.lag-seconds').textContent = p.secondsBehind < 0 ? '–' : p.secondsBehind.toFixed(1) + ' s';
        });
      });
    }).catch(function () {});
  }
  setInterval(refresh, 5000);
  setTimeout(function () { location.reload(); }, 60000);
})();
