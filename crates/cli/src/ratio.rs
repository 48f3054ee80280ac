//! The percentage gzip prints with `-v` and `-l`, shared by the per-file report and the
//! listing.

/// Space saved, as gzip's `display_ratio` computes it: 100 × (plain − packed) / plain, where
/// `packed` leaves out the format's framing (header and trailer); 0 for empty input.
pub(crate) fn percent_saved(plain: u64, packed_with_framing: u64, framing: u64) -> f64 {
    if plain == 0 {
        return 0.0;
    }
    let packed = packed_with_framing as f64 - framing as f64;
    100.0 * (plain as f64 - packed) / plain as f64
}

/// gzip's `%5.1f%%`: a negative zero prints as `-0.0`, as C's printf does.
pub(crate) fn format_percent(percent: f64) -> String {
    format!("{percent:5.1}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_gzips_figures() {
        // `printf abc | gzip`: 23 bytes, 18 of them header and trailer.
        assert_eq!(format_percent(percent_saved(3, 23, 18)), "-66.7%");
        assert_eq!(format_percent(percent_saved(0, 20, 20)), "  0.0%");
        assert_eq!(format_percent(percent_saved(1000, 518, 18)), " 50.0%");
        assert_eq!(
            format_percent(percent_saved(100_000, 100_048, 18)),
            " -0.0%"
        );
    }
}
