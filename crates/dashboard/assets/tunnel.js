// zipwire tunnel's dashboard. Each event is the tunnel's /stats document: uptime_seconds and,
// per direction (outgoing, incoming), raw and wire bytes, blocks per method, raw blocks per
// reason, and for outgoing the link rate estimate.
"use strict";
(() => {
  const D = Dash;
  const rows = [];
  for (const d of ["outgoing", "incoming"]) {
    rows.push([d + "-raw", d + " raw bytes"], [d + "-wire", d + " wire bytes"],
      [d + "-factor", d + " factor (wire / raw)"], [d + "-blocks", d + " blocks"]);
  }
  rows.push(["outgoing-raw_blocks", "outgoing blocks sent raw"],
    ["outgoing-link", "link rate estimate"], ["outgoing-level", "level now"]);
  D.table("Now (exact counters, as /stats)", rows);
  const bytesOut = D.chart("Outgoing", D.bytesPerSecond);
  const bytesIn = D.chart("Incoming", D.bytesPerSecond);
  const factor = D.chart("Factor (wire / raw)", D.number, { range: [0, 1.1] });
  const link = D.chart("Link rate estimate against outgoing wire rate", D.bytesPerSecond);
  const level = D.chart("Level chosen (outgoing blocks by method)", D.perSecond);
  const reasons = D.chart("Blocks sent raw, by reason", D.perSecond);
  const reasonTable = D.table("Blocks sent raw (exact)", [], { id: "raw-reasons" });

  const blocks = (d) => Object.values(d.methods).reduce((a, m) => a + m.blocks, 0);
  D.connect((e) => e.uptime_seconds, (prev, cur, dt) => {
    const t = Date.now() / 1000;
    const r = (f) => (prev ? D.rate(f(prev), f(cur), dt) : null);
    for (const d of ["outgoing", "incoming"]) {
      const c = cur[d];
      D.set(d + "-raw", c.raw);
      D.set(d + "-wire", c.wire);
      D.set(d + "-factor", c.raw > 0 ? (c.wire / c.raw).toFixed(3) : "–");
      D.set(d + "-blocks", blocks(c));
    }
    const out = cur.outgoing;
    D.set("outgoing-raw_blocks", out.methods.raw ? out.methods.raw.blocks : 0);
    D.set("outgoing-link", out.link_rate_bytes_per_s == null ? "not measured yet" :
      D.bytes(out.link_rate_bytes_per_s) + "/s" + (out.link_limited ? " (limited)" : " (at least)"));
    bytesOut.push(t, { raw: r((x) => x.outgoing.raw), wire: r((x) => x.outgoing.wire) });
    bytesIn.push(t, { raw: r((x) => x.incoming.raw), wire: r((x) => x.incoming.wire) });
    const f = (x, d) => (x[d].raw > 0 ? x[d].wire / x[d].raw : null);
    const interval = (d) => {
      const raw = r((x) => x[d].raw), wire = r((x) => x[d].wire);
      return raw > 0 ? wire / raw : null;
    };
    factor.push(t, { "outgoing, last second": interval("outgoing"), "outgoing, since start": f(cur, "outgoing"),
      "incoming, last second": interval("incoming"), "incoming, since start": f(cur, "incoming") });
    link.push(t, { estimate: out.link_rate_bytes_per_s, "wire out": r((x) => x.outgoing.wire) });
    const perMethod = {};
    let busiest = null, most = 0;
    for (const name of Object.keys(out.methods)) {
      const n = r((x) => (x.outgoing.methods[name] ? x.outgoing.methods[name].blocks : 0));
      perMethod[name] = n;
      if (n != null && n > most) { most = n; busiest = name; }
    }
    level.push(t, perMethod);
    // No block sent since the last update: the last method is not the one "now".
    if (prev) D.set("outgoing-level", busiest || "idle");
    const perReason = {};
    for (const [reason, n] of Object.entries(out.raw_reasons)) {
      perReason[reason] = r((x) => x.outgoing.raw_reasons[reason] || 0);
      const id = "r-" + reason;
      if (!document.getElementById(id)) D.addRow(reasonTable, id, reason);
      D.set(id, n);
    }
    reasons.push(t, perReason);
  });
})();
