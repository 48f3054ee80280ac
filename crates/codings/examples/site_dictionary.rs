//! Builds a site dictionary from the files listed in one file and reports, for the files
//! listed in another, their bytes at brotli 11 against `dcz` (zstd 19) and `dcb` (brotli 11)
//! with the dictionary, its download included:
//! `cargo run --release -p zipwire-codings --example site_dictionary -- ROOT TRAIN SEQUENCE`.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use zipwire_codings::{dictionary, train, BrotliLevel, Encode};
use zipwire_dictionary::{DictCoding, Hash};

fn read_list(root: &Path, list: &str) -> Vec<Bytes> {
    let names = std::fs::read_to_string(list).expect("list");
    names
        .lines()
        .filter(|line| !line.is_empty())
        .map(|name| Bytes::from(std::fs::read(root.join(name)).expect("file")))
        .collect()
}

fn brotli11(input: &[u8]) -> usize {
    let mut encoder = zipwire_codings::BrotliEncoder::new(BrotliLevel::new(11).expect("level"), 24);
    let mut out = Vec::new();
    encoder.finish(input, &mut out).expect("brotli");
    out.len()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = Path::new(&args[1]);
    let samples = read_list(root, &args[2]);
    let sequence = read_list(root, &args[3]);
    let sizes: Vec<usize> = match args.get(4) {
        Some(size) => vec![size.parse().expect("size")],
        None => vec![32 * 1024, 64 * 1024, 128 * 1024, 256 * 1024],
    };
    let built = train::build(&samples, &sizes, 50).expect("built");
    let covered = args.get(5).filter(|trainer| *trainer == "cover").map(|_| {
        let segment = args.get(6).map_or(1024, |s| s.parse().expect("segment"));
        Bytes::from(zipwire_codings::cover::select_with(
            &samples, sizes[0], segment,
        ))
    });
    let dict = covered.as_ref().unwrap_or(&built.dictionary);
    let hash = Hash::of(dict);
    let plain: usize = sequence.iter().map(|page| brotli11(page)).sum();
    let download = brotli11(dict);
    let mut out = std::io::stdout();
    writeln!(
        out,
        "samples {} ({} bytes), chosen size {} ({:?}, ratio {:.3})",
        samples.len(),
        samples.iter().map(|s| s.len()).sum::<usize>(),
        built.size,
        built.measured,
        built.measured.projected(50)
    )
    .ok();
    writeln!(
        out,
        "sequence {} pages, brotli 11 {plain}, dictionary {} bytes, {download} at brotli 11",
        sequence.len(),
        dict.len()
    )
    .ok();
    for coding in [DictCoding::Dcz, DictCoding::Dcb] {
        let sum: usize = sequence
            .iter()
            .map(|page| {
                dictionary::encode_best(coding, dict, &hash, page)
                    .expect("delta")
                    .len()
            })
            .sum();
        writeln!(
            out,
            "{coding}: {sum} ({:.3}), with download {:.3}",
            sum as f64 / plain as f64,
            (sum + download) as f64 / plain as f64
        )
        .ok();
    }
}
