//! `-l`: gzip's table of compressed and uncompressed sizes.
//!
//! Sizes come from decoding each file in full rather than from the trailer's ISIZE, which is
//! only the length modulo 4 GB and only the last member's: slower than gzip, never wrong.

use std::path::Path;

use crate::job::percent_saved;

/// Rows printed so far, for the totals line.
#[derive(Debug)]
pub struct Listing {
    verbose: bool,
    rows: u32,
    packed: u64,
    plain: u64,
}

impl Listing {
    /// An empty listing; the header is printed with the first row.
    pub fn new(verbose: bool) -> Listing {
        Listing {
            verbose,
            rows: 0,
            packed: 0,
            plain: 0,
        }
    }

    /// Prints one file's row.
    pub fn row(&mut self, packed: u64, plain: u64, name: &Path) {
        if self.rows == 0 {
            let method = if self.verbose { "method  " } else { "" };
            println!("{method}         compressed        uncompressed  ratio uncompressed_name");
        }
        self.rows += 1;
        self.packed += packed;
        self.plain += plain;
        self.print(packed, plain, &name.display().to_string());
    }

    /// Prints the totals line when more than one file was listed.
    pub fn finish(&self) {
        if self.rows > 1 {
            self.print(self.packed, self.plain, "(totals)");
        }
    }

    fn print(&self, packed: u64, plain: u64, name: &str) {
        let method = if self.verbose { "defla   " } else { "" };
        println!(
            "{method}{packed:>19} {plain:>19} {:>5.1}% {name}",
            percent_saved(plain, packed)
        );
    }
}
