// zipwire's dashboard, the part both pages share: cards, live charts (uPlot) that keep the
// last KEEP samples, exact-number tables, and the event stream from /events.
"use strict";
const Dash = (() => {
  const KEEP = 300; // five minutes at one event a second
  const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2",
    "#db2777", "#4b5563", "#65a30d", "#9333ea"];
  const charts = [];

  function bytes(n) {
    if (n == null || !isFinite(n)) return "–";
    const units = ["B", "kB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return (i ? n.toFixed(1) : Math.round(n)) + " " + units[i];
  }
  function number(n) {
    if (n == null || !isFinite(n)) return "–";
    return Math.abs(n) >= 100 ? Math.round(n).toString() : (+n.toFixed(2)).toString();
  }

  function card(title, id, wide) {
    const el = document.createElement("section");
    el.className = wide ? "card wide" : "card";
    if (id) el.id = id;
    const h = document.createElement("h2");
    h.textContent = title;
    el.appendChild(h);
    document.getElementById("main").appendChild(el);
    return el;
  }

  // A chart whose series are named by the keys of the objects given to push(); a key seen
  // for the first time becomes a new series with no history.
  function chart(title, format, opts) {
    opts = opts || {};
    const el = card(title, opts.id);
    const box = document.createElement("div");
    el.appendChild(box);
    const labels = [];
    const data = [[]];
    let plot = null;
    const size = () => ({ width: Math.max(200, el.clientWidth - 26), height: opts.height || 170 });
    const series = (label, i) => ({ label: label, stroke: COLOURS[i % COLOURS.length], width: 1.5,
      value: (u, v) => format(v) });
    function make() {
      plot = new uPlot(Object.assign(size(), {
        series: [{}].concat(labels.map(series)),
        scales: { x: { time: true }, y: opts.range ? { range: opts.range } : {} },
        axes: [{}, { size: 84, values: (u, ticks) => ticks.map(format) }],
        legend: { live: false },
        cursor: { drag: { x: false, y: false } },
      }), data, box);
    }
    const api = {
      push(t, values) {
        for (const label of Object.keys(values)) {
          if (!labels.includes(label)) {
            labels.push(label);
            data.push(data[0].map(() => null));
            if (plot) plot.addSeries(series(label, labels.length - 1), labels.length);
          }
        }
        data[0].push(t);
        labels.forEach((label, i) => data[i + 1].push(label in values ? values[label] : null));
        if (data[0].length > KEEP) data.forEach((column) => column.shift());
        if (!plot) make(); else plot.setData(data);
      },
      resize() { if (plot) plot.setSize(size()); },
    };
    charts.push(api);
    return api;
  }

  // A table of exact numbers: rows [id, label]; set(id, text) fills the cell with that id.
  function table(title, rows, opts) {
    const el = card(title, opts && opts.id, opts && opts.wide);
    const t = document.createElement("table");
    for (const [id, label] of rows) addRow(t, id, label);
    el.appendChild(t);
    return t;
  }
  function addRow(t, id, label) {
    const tr = t.insertRow();
    const th = document.createElement("th");
    th.textContent = label;
    tr.appendChild(th);
    const td = tr.insertCell();
    td.id = id;
    td.className = "n";
    td.textContent = "–";
    return td;
  }
  function set(id, text) {
    const el = document.getElementById(id);
    if (el) el.textContent = text;
  }

  // Per-second rate of a counter between two samples taken dt seconds apart.
  function rate(prev, cur, dt) {
    return prev == null || cur == null || dt <= 0 ? null : Math.max(0, cur - prev) / dt;
  }

  // Calls onSample(previous, current, dt) for every event; the first has previous null.
  function connect(seconds, onSample) {
    const status = document.getElementById("status");
    let prev = null, count = 0;
    // An answer other than 200 (the 503 of a full house of viewers, a 421) fails an
    // EventSource for good: it never retries on its own, so a new one is opened after a wait.
    function open() {
      const source = new EventSource("/events");
      source.onmessage = (event) => {
        let cur;
        try { cur = JSON.parse(event.data); } catch (e) { return; }
        const dt = prev ? seconds(cur) - seconds(prev) : 0;
        onSample(prev, cur, dt);
        prev = cur;
        set("updates", String(++count));
        status.textContent = "live";
        status.className = "pill live";
      };
      source.onerror = () => {
        status.textContent = "reconnecting";
        status.className = "pill down";
        if (source.readyState === EventSource.CLOSED) {
          source.close();
          setTimeout(open, 5000);
        }
      };
    }
    open();
  }

  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => charts.forEach((c) => c.resize()), 100);
  });

  return { bytes, number, card, chart, table, addRow, set, rate, connect,
    percent: (v) => (v == null ? "–" : number(v) + " %"),
    perSecond: (v) => (v == null ? "–" : number(v) + "/s"),
    bytesPerSecond: (v) => (v == null ? "–" : bytes(v) + "/s") };
})();
