//! Built-in sample data for when no corpus is at hand: about 2 MB of web-like content (HTML,
//! CSS, JavaScript, JSON, a binary table), made by the demo site's generators
//! ([`zipwire_demo::content`]) from a fixed seed, so every run and every machine sees the same
//! bytes. Nothing is copied from third-party files.

use zipwire_adapt::rng::SplitMix64;
use zipwire_demo::content;

/// The sample's parts as (name, bytes); about 2 MB in all.
pub fn files() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = SplitMix64::new(0x5eed_2a11_c0de_f00d);
    vec![
        ("page.html", content::home_page(&mut rng, 720).into_bytes()),
        (
            "style.css",
            content::stylesheet(&mut rng, 250_000).into_bytes(),
        ),
        (
            "app.js",
            content::script_bundle(&mut rng, 400_000).into_bytes(),
        ),
        (
            "records.json",
            content::api_articles(&mut rng, 550_000).into_bytes(),
        ),
        ("table.bin", content::table(&mut rng, 250_000)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_is_about_two_megabytes_and_deterministic() {
        let first = files();
        let total: usize = first.iter().map(|(_, data)| data.len()).sum();
        assert!((1_900_000..2_300_000).contains(&total), "{total}");
        assert_eq!(first, files());
    }
}
