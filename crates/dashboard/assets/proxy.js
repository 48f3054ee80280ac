// zipwire proxy's dashboard. Each event is {stats: <the /stats document>, budget: {max_cpu,
// max_rate}, process_rss_bytes}; rates are differences between two events.
"use strict";
(() => {
  const D = Dash;
  D.table("Now (exact counters, as /stats)", [
    ["s-requests", "requests"],
    ["s-responses_compressed", "responses compressed"],
    ["s-responses_decompressed", "responses decompressed"],
    ["s-bypassed", "responses bypassed"],
    ["s-bytes_in", "bytes in (from upstreams)"],
    ["s-bytes_out", "bytes out (to clients)"],
    ["s-bytes_saved", "bytes saved"],
    ["s-active_connections", "open connections"],
    ["s-active_streams", "open compressed streams"],
    ["s-stream_memory_bytes", "stream memory (bytes)"],
    ["s-upstream_errors", "upstream errors (502 + 504)"],
    ["s-throttled", "budget"],
    ["s-upstream", "upstream health"],
  ]);
  const bandwidth = D.chart("Bandwidth", D.bytesPerSecond);
  const ratio = D.chart("Compression ratio (out / in of compressed bodies)", D.number,
    { range: [0, 1] });
  const hits = D.chart("Hits", D.perSecond);
  const cpu = D.chart("Encoder CPU against max_cpu (% of one core; 'stepped down' at 100 while throttled)", D.percent);
  const compressRate = D.chart("Compression input against max_rate", D.bytesPerSecond);
  const codings = D.chart("Responses by coding", D.perSecond);
  const bypass = D.chart("Bypass reasons", D.perSecond);
  const upstream = D.chart("Upstream errors", D.perSecond);
  const open = D.chart("Open connections and streams", D.number);
  const memory = D.chart("Memory", D.bytes);
  const codingTable = D.table("Responses by coding (exact)", [], { id: "codings" });
  const bypassTable = D.table("Bypass reasons (exact)", [], { id: "bypass" });

  // The cache's card appears when /stats says the cache is on (`cache.enabled`); without
  // `[cache]` nothing is drawn. A
  // response served from the store counts whether it was fresh (a hit) or confirmed by the
  // origin with a 304 (a revalidation): in the cache's default mode, revalidate, every stored
  // response is a revalidation, and a rate of hits alone read 0% on a warm cache.
  let cacheChart = null;
  const served = (c) => c.hits + (c.revalidations || 0);
  const rate = (s, m) => (s + m > 0 ? (100 * s) / (s + m) : null);
  function renderCache(prev, cur, dt, t) {
    const c = cur.stats.cache, p = prev && prev.stats.cache;
    if (!c || c.enabled !== true || typeof c.hits !== "number" || typeof c.misses !== "number") return;
    if (!cacheChart) cacheChart = D.chart("Cache hit rate (served from the store)", D.percent, { id: "cache", range: [0, 100] });
    const s = p ? served(c) - served(p) : 0, misses = p ? c.misses - p.misses : 0;
    cacheChart.push(t, { "hit rate": rate(s, misses), "since start": rate(served(c), c.misses) });
  }

  // The dictionaries' card (RFC 9842 deltas) appears when /stats says they are on
  // (`dictionaries.enabled`, the default `auto` mode included).
  let dictionaryTable = null;
  function renderDictionaries(cur) {
    const d = cur.stats.dictionaries;
    if (!d || d.enabled !== true) return;
    if (!dictionaryTable) dictionaryTable = D.table("Dictionaries (RFC 9842 deltas, exact)", [], { id: "dictionaries" });
    const rows = [["d-held", "dictionaries held", d.held + " (" + d.bytes_held + " B)"],
      ["d-dcz", "sent as dcz", d.dcz], ["d-dcb", "sent as dcb", d.dcb],
      ["d-offered", "requests naming one", d.offered], ["d-unknown", "unknown hash", d.unknown],
      ["d-refused", "refused (cross-origin)", d.refused],
      ["d-saved", "bytes saved (estimated)", d.bytes_saved]];
    for (const [id, label, value] of rows) D.set(row(dictionaryTable, id, label).id, value);
  }

  const sum = (o, f) => Object.values(o || {}).reduce((a, v) => a + f(v), 0);
  const row = (tableEl, id, label) => document.getElementById(id) || D.addRow(tableEl, id, label);

  D.connect((e) => e.stats.uptime_seconds, (prev, cur, dt) => {
    const s = cur.stats, p = prev && prev.stats;
    const t = Date.now() / 1000;
    const r = (f) => (p ? D.rate(f(p), f(s), dt) : null);
    const bypassed = Object.values(s.bypassed).reduce((a, b) => a + b, 0);
    const upstreamErrors = s.errors.upstream + s.errors.upstream_timeout;
    const failing = p ? upstreamErrors - (p.errors.upstream + p.errors.upstream_timeout) : 0;

    D.set("s-requests", s.requests);
    D.set("s-responses_compressed", s.responses_compressed);
    D.set("s-responses_decompressed", s.responses_decompressed);
    D.set("s-bypassed", bypassed);
    D.set("s-bytes_in", s.bytes_in);
    D.set("s-bytes_out", s.bytes_out);
    D.set("s-bytes_saved", s.bytes_saved);
    D.set("s-active_connections", s.active_connections);
    D.set("s-active_streams", s.active_streams);
    D.set("s-stream_memory_bytes", s.stream_memory_bytes);
    D.set("s-upstream_errors", upstreamErrors);
    D.set("s-throttled", s.throttled ? "throttled (" + s.throttled + ")" : "open");
    D.set("s-upstream", failing > 0 ? "failing (" + failing + " errors in the last update)" : "healthy");

    bandwidth.push(t, { in: r((x) => x.bytes_in), out: r((x) => x.bytes_out), saved: r((x) => x.bytes_saved) });
    const encIn = r((x) => sum(x.codings, (c) => c.bytes_in));
    const encOut = r((x) => sum(x.codings, (c) => c.bytes_out));
    const allIn = sum(s.codings, (c) => c.bytes_in), allOut = sum(s.codings, (c) => c.bytes_out);
    ratio.push(t, { "last second": encIn > 0 ? encOut / encIn : null,
      "since start": allIn > 0 ? allOut / allIn : null });
    hits.push(t, { requests: r((x) => x.requests), compressed: r((x) => x.responses_compressed),
      bypassed: r((x) => Object.values(x.bypassed).reduce((a, b) => a + b, 0)) });
    const budget = cur.budget || {};
    // What the budget counts: encoder calls alone for max_cpu, the bytes encoders compressed
    // (not those of streams stepped down to storing) for max_rate. Decoding is shown apart.
    cpu.push(t, { "encoder CPU": r((x) => 100 * x.encode_seconds),
      "decoder CPU": r((x) => 100 * (x.compress_seconds - x.encode_seconds)),
      max_cpu: budget.max_cpu == null ? null : budget.max_cpu,
      "stepped down": s.throttled ? 100 : 0 });
    compressRate.push(t, { "compressed input": r((x) => x.compressed_input_bytes),
      max_rate: budget.max_rate == null ? null : budget.max_rate });
    const perCoding = {};
    for (const [name, c] of Object.entries(s.codings)) {
      perCoding[name] = r((x) => (x.codings[name] ? x.codings[name].responses : 0));
      D.set(row(codingTable, "c-" + name, name).id, c.responses + " responses, " +
        c.bytes_in + " → " + c.bytes_out + " B");
    }
    codings.push(t, perCoding);
    const perReason = {};
    for (const [reason, n] of Object.entries(s.bypassed)) {
      perReason[reason] = r((x) => x.bypassed[reason] || 0);
      D.set(row(bypassTable, "b-" + reason, reason).id, n);
    }
    bypass.push(t, perReason);
    upstream.push(t, { "502 upstream": r((x) => x.errors.upstream),
      "504 timeout": r((x) => x.errors.upstream_timeout) });
    open.push(t, { connections: s.active_connections, streams: s.active_streams,
      upgrades: s.active_upgrades });
    memory.push(t, { "stream buffers": s.stream_memory_bytes,
      "process RSS": cur.process_rss_bytes == null ? null : cur.process_rss_bytes });
    renderCache(prev, cur, dt, t);
    renderDictionaries(cur);
  });
})();
