//! The tab-separated tables the benchmark scripts write beside their printed ones: a header
//! row of column names, then one row per measurement.

use anyhow::{bail, Context};

/// A table: column names and rows of fields.
#[derive(Debug)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses `text`: the first non-empty line not starting with `#` is the header; blank and
    /// `#` lines are skipped; a repeated header (scripts append to one file) is dropped.
    pub fn parse(text: &str) -> anyhow::Result<Table> {
        let mut lines = text
            .lines()
            .map(|line| line.trim_end_matches('\r'))
            .filter(|line| !line.trim().is_empty() && !line.starts_with('#'));
        let header: Vec<String> = match lines.next() {
            Some(line) => line.split('\t').map(|f| f.trim().to_owned()).collect(),
            None => bail!("the table is empty"),
        };
        let rows: Vec<Vec<String>> = lines
            .map(|line| line.split('\t').map(|f| f.trim().to_owned()).collect())
            .filter(|row: &Vec<String>| *row != header)
            .collect();
        if rows.is_empty() {
            bail!("the table has a header but no rows");
        }
        Ok(Table { header, rows })
    }

    /// The index of the first column named one of `names` (case-insensitive), if any.
    pub fn find(&self, names: &[&str]) -> Option<usize> {
        self.header
            .iter()
            .position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
    }

    /// The index of a column named one of `names`, or an error naming what is missing.
    pub fn column(&self, names: &[&str]) -> anyhow::Result<usize> {
        self.find(names).with_context(|| {
            format!(
                "no column {} in the table's header {:?}",
                names.join(" or "),
                self.header
            )
        })
    }

    /// The column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The rows.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Field `column` of `row`, or "" where the row is short.
    pub fn text<'a>(&self, row: &'a [String], column: usize) -> &'a str {
        row.get(column).map_or("", String::as_str)
    }

    /// Field `column` of `row` as a number: a leading number is taken, so that `1.98`,
    /// `49.5%`, `0.44x` and `31.0MiB` all read; a missing or `FAILED` field is `None`.
    pub fn number(&self, row: &[String], column: usize) -> Option<f64> {
        let text = self.text(row, column);
        let end = text
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .map_or(text.len(), |(i, _)| i);
        text[..end].parse().ok().filter(|n: &f64| n.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_with_units_and_repeated_headers() {
        let table = Table::parse(
            "# a comment\nproxy\thits/s\tratio\nhaproxy\t4462\t1.98\n\nproxy\thits/s\tratio\n\
             zipwire\t4300\t2.70x\nnginx\tFAILED\t\n",
        )
        .unwrap();
        assert_eq!(table.rows().len(), 3);
        let (hits, ratio) = (
            table.column(&["hits/s"]).unwrap(),
            table.column(&["RATIO"]).unwrap(),
        );
        assert_eq!(table.number(&table.rows()[1], ratio), Some(2.70));
        assert_eq!(table.number(&table.rows()[0], hits), Some(4462.0));
        assert_eq!(table.number(&table.rows()[2], hits), None);
        assert!(table.column(&["RSS"]).is_err());
        assert!(Table::parse("# nothing\n").is_err());
    }
}
