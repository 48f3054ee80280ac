//! The demo's results and the table it prints.

use std::fmt;
use std::time::Duration;

use zipwire_codec::Level;

use super::load::{per_second, LoadReport};
use super::site::Served;

/// What the proxy does in one scenario of the demo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scenario {
    /// The proxy forwards every response as it is: the cost of the hop alone.
    Off,
    /// The proxy compresses at this level.
    Compress(Level),
}

impl Scenario {
    /// The scenarios `zipwire demo` runs: off, the stateless levels 1-3, and zlib's default 6.
    pub fn standard() -> Vec<Scenario> {
        let mut scenarios = vec![Scenario::Off];
        for level in [1, 2, 3, 6] {
            let level = Level::try_from(level).expect("1, 2, 3 and 6 are valid levels");
            scenarios.push(Scenario::Compress(level));
        }
        scenarios
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scenario::Off => f.write_str("compression off"),
            Scenario::Compress(level) if level.is_stateless() => {
                write!(f, "zipwire level {level}")
            }
            Scenario::Compress(level) => write!(f, "zipwire level {level} (zlib)"),
        }
    }
}

/// One scenario's measurements.
#[derive(Clone, Debug)]
pub struct ScenarioReport {
    /// What the proxy did.
    pub scenario: Scenario,
    /// What the clients measured.
    pub load: LoadReport,
    /// What the origin served during the load (the proxy's input).
    pub origin: Served,
    /// Resident memory of the process before the proxy started, when known.
    pub rss_base: Option<u64>,
}

impl ScenarioReport {
    /// Bytes per second the proxy received from the origin (bodies).
    pub fn bw_in(&self) -> f64 {
        per_second(self.origin.body_bytes, self.load.elapsed)
    }

    /// Bytes per second the proxy sent to clients (bodies, as on the wire).
    pub fn bw_out(&self) -> f64 {
        self.load.wire_bytes_per_sec()
    }

    /// Origin bytes over client bytes.
    pub fn ratio(&self) -> f64 {
        if self.load.wire_bytes == 0 {
            1.0
        } else {
            self.origin.body_bytes as f64 / self.load.wire_bytes as f64
        }
    }

    /// The share of the origin's bytes that did not have to be sent: `1 - out / in`.
    pub fn saved(&self) -> f64 {
        if self.origin.body_bytes == 0 {
            0.0
        } else {
            1.0 - self.load.wire_bytes as f64 / self.origin.body_bytes as f64
        }
    }
}

/// Everything `zipwire demo` measured, printed with `Display` as a table followed by how to
/// put zipwire in front of one's own server.
#[derive(Clone, Debug)]
pub struct DemoReport {
    /// One entry per scenario, in the order run.
    pub scenarios: Vec<ScenarioReport>,
    /// Client connections used in every scenario.
    pub connections: usize,
    /// How long each scenario sent requests.
    pub duration: Duration,
    /// The returning visitor's page views, when run.
    pub returning: Option<super::ReturningReport>,
}

impl DemoReport {
    /// Responses that differed from the origin's, over all scenarios.
    pub fn mismatches(&self) -> u64 {
        self.scenarios.iter().map(|s| s.load.mismatches).sum()
    }

    /// Responses checked, over all scenarios.
    pub fn requests(&self) -> u64 {
        self.scenarios.iter().map(|s| s.load.requests).sum()
    }
}

impl fmt::Display for DemoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header = [
            "scenario", "BW in", "BW out", "BW saved", "ratio", "hits/s", "memory",
        ];
        let mut rows = vec![header.map(str::to_owned).to_vec()];
        for s in &self.scenarios {
            let memory = match (s.load.rss_after, s.rss_base) {
                (Some(after), Some(base)) => format!(
                    "{} (+{})",
                    mebibytes(after),
                    mebibytes(after.saturating_sub(base))
                ),
                (Some(after), None) => mebibytes(after),
                _ => "-".to_owned(),
            };
            rows.push(vec![
                s.scenario.to_string(),
                rate(s.bw_in()),
                rate(s.bw_out()),
                format!("{:.1}%", 100.0 * s.saved()),
                format!("{:.2}", s.ratio()),
                format!("{:.0}", s.load.hits_per_sec()),
                memory,
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|col| rows.iter().map(|row| row[col].len()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(col, (cell, &width))| {
                    if col == 0 {
                        format!("{cell:<width$}")
                    } else {
                        format!("{cell:>width$}")
                    }
                })
                .collect();
            writeln!(f, "{}", cells.join(" | "))?;
            if i == 0 {
                let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
                writeln!(f, "{}", rule.join("-|-"))?;
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "{} connections, {:.1} s per scenario, one process (origin, proxy and clients share \
             the cores; memory is the whole process's RSS, in parentheses its growth over the run).",
            self.connections,
            self.duration.as_secs_f64()
        )?;
        writeln!(
            f,
            "Every response was checked against the origin's bytes after decoding: {} responses, \
             {} mismatches.",
            self.requests(),
            self.mismatches()
        )?;
        if let Some(returning) = &self.returning {
            writeln!(f)?;
            write!(f, "{returning}")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "To put zipwire in front of your own server (here on port 9000):"
        )?;
        writeln!(
            f,
            "    zipwire proxy --listen 127.0.0.1:8080 --upstream http://127.0.0.1:9000"
        )?;
        writeln!(
            f,
            "then send clients to 127.0.0.1:8080; `--level N` picks the level, `--threads N` the cores."
        )
    }
}

/// Bytes per second in binary megabytes.
fn rate(bytes_per_sec: f64) -> String {
    format!("{:.1} MiB/s", bytes_per_sec / (1024.0 * 1024.0))
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(scenario: Scenario, origin: u64, wire: u64) -> ScenarioReport {
        ScenarioReport {
            scenario,
            load: LoadReport {
                requests: 1000,
                wire_bytes: wire,
                decoded_bytes: origin,
                elapsed: Duration::from_secs(2),
                rss_after: Some(40 << 20),
                ..LoadReport::default()
            },
            origin: Served {
                requests: 1000,
                body_bytes: origin,
            },
            rss_base: Some(30 << 20),
        }
    }

    #[test]
    fn table_has_every_column_and_the_next_step() {
        let report = DemoReport {
            scenarios: vec![
                scenario(Scenario::Off, 100 << 20, 100 << 20),
                scenario(Scenario::Compress(Level::FASTEST), 100 << 20, 25 << 20),
                scenario(Scenario::Compress(Level::DEFAULT), 100 << 20, 20 << 20),
            ],
            connections: 16,
            duration: Duration::from_secs(2),
            returning: None,
        };
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split('|').map(str::trim).collect::<Vec<_>>(),
            ["scenario", "BW in", "BW out", "BW saved", "ratio", "hits/s", "memory"]
        );
        assert!(lines[2].starts_with("compression off"), "{text}");
        assert!(
            lines[2].contains("50.0 MiB/s") && lines[2].contains("0.0%"),
            "{text}"
        );
        assert!(
            lines[3].contains("zipwire level 1") && lines[3].contains("75.0%"),
            "{text}"
        );
        assert!(
            lines[3].contains("4.00") && lines[3].contains("500"),
            "{text}"
        );
        assert!(lines[3].contains("40 MiB (+10 MiB)"), "{text}");
        assert!(
            lines[4].contains("level 6 (zlib)") && lines[4].contains("5.00"),
            "{text}"
        );
        assert!(text.contains("3000 responses, 0 mismatches"), "{text}");
        assert!(
            text.contains("zipwire proxy --listen 127.0.0.1:8080 --upstream http://127.0.0.1:9000")
        );
    }

    #[test]
    fn standard_scenarios() {
        let names: Vec<String> = Scenario::standard()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            names,
            [
                "compression off",
                "zipwire level 1",
                "zipwire level 2",
                "zipwire level 3",
                "zipwire level 6 (zlib)"
            ]
        );
    }
}
