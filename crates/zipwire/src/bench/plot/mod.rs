//! `zipwire bench plot KIND TABLE`: an SVG beside a benchmark's table.
//!
//! The scripts write tab-separated tables ([`table`]); this reads one and draws what the
//! benchmark compares: hits/s and ratio per proxy (`bench/proxy.sh`), MB/s against ratio per
//! engine and level (`bench/cli.sh`, `zipwire bench codec`), payload MB/s per link and data
//! kind (`bench/tunnel.sh`). Plotting is plotters' SVG backend, built into the binary, so a
//! script needs nothing installed to plot and the output is the same everywhere.

mod draw;
pub mod table;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use self::draw::{Bars, Points};
use self::table::Table;
use super::report::Measurement;
use crate::cli::{PlotArgs, PlotKind};

/// Runs `zipwire bench plot`: reads the table, writes the SVG, says where.
pub fn run(args: &PlotArgs, out: &mut dyn std::io::Write) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.table)
        .with_context(|| format!("reading {}", args.table.display()))?;
    let table = Table::parse(&text).with_context(|| format!("in {}", args.table.display()))?;
    let title = args.title.as_deref();
    let svg = match args.kind {
        PlotKind::Proxy => proxy(&table, title)?,
        PlotKind::Cli => speed_ratio(&table, title.unwrap_or("bench/cli.sh: compression"))?,
        PlotKind::Codec => speed_ratio(&table, title.unwrap_or("zipwire bench codec"))?,
        PlotKind::Tunnel => tunnel(&table, title)?,
    };
    let path = args.output.clone().unwrap_or_else(|| beside(&args.table));
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    writeln!(out, "plot: {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

/// `table.tsv` → `table.svg`.
fn beside(table: &Path) -> PathBuf {
    table.with_extension("svg")
}

/// `bench/proxy.sh`: hits/s and ratio per proxy row, side by side.
fn proxy(table: &Table, title: Option<&str>) -> anyhow::Result<String> {
    let name = table.column(&["proxy"])?;
    let (hits, ratio) = (table.column(&["hits/s"])?, table.column(&["ratio"])?);
    // What tells rows of one proxy apart: the coding (MODE=h2), the connections, the file.
    let mut parts = vec![name];
    for extra in [&["coding"][..], &["conns"], &["file"]] {
        if let Some(column) = table.find(extra) {
            let mut values: Vec<&str> =
                table.rows().iter().map(|r| table.text(r, column)).collect();
            values.sort_unstable();
            values.dedup();
            if values.len() > 1 {
                parts.push(column);
            }
        }
    }
    let categories: Vec<String> = table
        .rows()
        .iter()
        .map(|row| {
            parts
                .iter()
                .map(|&c| table.text(row, c))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let column = |c: usize| table.rows().iter().map(|r| table.number(r, c)).collect();
    let (hits, ratio) = (column(hits), column(ratio));
    let title = title.unwrap_or("bench/proxy.sh");
    draw::svg((1100, 420), |root| {
        let (left, right) = root.split_horizontally(550);
        let one = |name: &str, values| {
            vec![Bars {
                name: name.to_owned(),
                values,
            }]
        };
        draw::bars(
            &left,
            &format!("{title}: hits/s"),
            "hits/s",
            &categories,
            &one("hits/s", hits),
        )?;
        draw::bars(
            &right,
            &format!("{title}: ratio (in / out)"),
            "ratio",
            &categories,
            &one("ratio", ratio),
        )
    })
}

/// MB/s against ratio, one series per engine (`engine` and `level` columns, or a `command`
/// column whose first word is the engine).
fn speed_ratio(table: &Table, title: &str) -> anyhow::Result<String> {
    let (speed, ratio) = (
        table.column(&["MB/s", "mb_per_s"])?,
        table.column(&["ratio"])?,
    );
    let engine = table.find(&["engine"]);
    let level = table.find(&["level"]);
    let command = table.find(&["command"]);
    if engine.is_none() && command.is_none() {
        table.column(&["engine", "command"])?;
    }
    let mut series: Vec<Points> = Vec::new();
    for row in table.rows() {
        let (Some(x), Some(y)) = (table.number(row, speed), table.number(row, ratio)) else {
            continue;
        };
        let (name, label) = match (engine, command) {
            (Some(e), _) => (
                table.text(row, e).to_owned(),
                level.map_or(String::new(), |l| format!("level {}", table.text(row, l))),
            ),
            (None, Some(c)) => {
                let text = table.text(row, c);
                let (first, rest) = text.split_once(' ').unwrap_or((text, ""));
                (first.to_owned(), rest.to_owned())
            }
            (None, None) => continue,
        };
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y, label)),
            None => series.push(Points {
                name,
                points: vec![(x, y, label)],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    draw::svg((900, 560), |root| {
        draw::points(
            root,
            title,
            ("MB/s (uncompressed)", "ratio (in / out)"),
            &series,
        )
    })
}

/// The codec benchmark's own measurements, drawn as [`speed_ratio`] draws a table.
pub fn codec_svg(measurements: &[Measurement]) -> anyhow::Result<String> {
    let mut text = String::from("engine\tlevel\tMB/s\tratio\n");
    for m in measurements {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            m.engine, m.level, m.mb_per_s, m.ratio
        ));
    }
    speed_ratio(&Table::parse(&text)?, "zipwire bench codec")
}

/// `bench/tunnel.sh`: payload MB/s per link and data kind, one bar per method.
fn tunnel(table: &Table, title: Option<&str>) -> anyhow::Result<String> {
    let (link, data) = (table.column(&["link"])?, table.column(&["data"])?);
    let methods: Vec<usize> = (0..table.header().len())
        .filter(|&c| c != link && c != data && !table.header()[c].contains('/'))
        .collect();
    if methods.is_empty() {
        anyhow::bail!("no method columns beside link and data");
    }
    let categories: Vec<String> = table
        .rows()
        .iter()
        .map(|r| format!("{} {}", table.text(r, link), table.text(r, data)))
        .collect();
    let series: Vec<Bars> = methods
        .iter()
        .map(|&c| Bars {
            name: table.header()[c].clone(),
            values: table.rows().iter().map(|r| table.number(r, c)).collect(),
        })
        .collect();
    let width = (160 * categories.len() as u32).clamp(900, 2400);
    draw::svg((width, 480), |root| {
        draw::bars(
            root,
            title.unwrap_or("bench/tunnel.sh: payload MB/s"),
            "payload MB/s",
            &categories,
            &series,
        )
    })
}

#[cfg(test)]
mod tests;
