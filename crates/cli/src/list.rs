//! `-l`: gzip's table of compressed and uncompressed sizes (gzip.c's `do_list`).
//!
//! Sizes come from decoding each file in full rather than from the trailer's ISIZE, which is
//! only the length modulo 4 GB and only the last member's: slower than gzip, never wrong.
//! Dates are printed in UTC, where gzip uses the local time zone.

use std::path::Path;

use crate::inflate::{Decoded, Method};
use crate::ratio::{format_percent, percent_saved};

/// Rows printed so far, for the totals line.
#[derive(Debug)]
pub struct Listing {
    verbose: bool,
    quiet: bool,
    rows: u32,
    packed: u64,
    plain: u64,
    framing: u64,
}

/// One row's figures.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// What decoding the file found.
    pub decoded: Decoded,
    /// The time to print, seconds since 1970: the file's, or the header's with `-N`.
    pub mtime: i64,
}

impl Listing {
    /// An empty listing; the title is printed with the first row (not with `-q`).
    pub fn new(verbose: bool, quiet: bool) -> Listing {
        Listing {
            verbose,
            quiet,
            rows: 0,
            packed: 0,
            plain: 0,
            framing: 0,
        }
    }

    /// Prints one file's row.
    pub fn row(&mut self, row: &Row, name: &Path) {
        if self.rows == 0 && !self.quiet {
            let method = if self.verbose {
                "method  crc     date  time  "
            } else {
                ""
            };
            out(format_args!(
                "{method}         compressed        uncompressed  ratio uncompressed_name"
            ));
        }
        let decoded = &row.decoded;
        self.rows += 1;
        self.packed += decoded.totals.bytes_in;
        self.plain += decoded.totals.bytes_out;
        self.framing += decoded.framing;
        let prefix = if self.verbose {
            let method = match decoded.method {
                Method::Deflate => "defla",
                Method::Stored | Method::Copy => "store",
                Method::Compress => "compr",
                Method::Pack => "pack ",
            };
            // gzip prints ffffffff where the format has no CRC-32.
            let crc = match decoded.method {
                Method::Deflate | Method::Stored => decoded.crc,
                _ => u32::MAX,
            };
            format!("{method} {crc:08x} {} ", month_day_time(row.mtime))
        } else {
            String::new()
        };
        self.print(
            &prefix,
            decoded.totals.bytes_in,
            decoded.totals.bytes_out,
            decoded.framing,
            &name.display().to_string(),
        );
    }

    /// Prints the totals line when more than one file was listed (not with `-q`).
    pub fn finish(&self) {
        if self.rows > 1 && !self.quiet {
            // gzip subtracts only the last file's header here; the sum is the true figure.
            let prefix = if self.verbose {
                " ".repeat(28)
            } else {
                String::new()
            };
            self.print(&prefix, self.packed, self.plain, self.framing, "(totals)");
        }
    }

    fn print(&self, prefix: &str, packed: u64, plain: u64, framing: u64, name: &str) {
        let ratio = format_percent(percent_saved(plain, packed, framing));
        out(format_args!(
            "{prefix}{packed:>19} {plain:>19} {ratio} {name}"
        ));
    }
}

/// One line on stdout; on a closed one (`zipwire -l *.gz | head -1`) dropped, not a panic.
fn out(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// `Nov 24 20:43`, gzip's `%s%3d %02d:%02d`, in UTC.
fn month_day_time(secs: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs.div_euclid(86_400);
    let in_day = secs.rem_euclid(86_400);
    let (_, month, day) = civil_from_days(days);
    let name = MONTHS
        .get(month.saturating_sub(1) as usize)
        .copied()
        .unwrap_or("???");
    format!(
        "{name}{day:3} {:02}:{:02}",
        in_day / 3600,
        in_day % 3600 / 60
    )
}

/// Year, month (1-12) and day (1-31) of a day count since 1970-01-01, in the proleptic
/// Gregorian calendar (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_gzip_prints_them() {
        assert_eq!(month_day_time(0), "Jan  1 00:00");
        // 2026-11-24 20:43:10 UTC.
        assert_eq!(month_day_time(1_795_552_990), "Nov 24 20:43");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
