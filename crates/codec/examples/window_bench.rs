//! SSH-like traffic: every file cut into packets of 1-16 KB (sizes from a fixed pseudo-random
//! sequence), each packet followed by a flush, one stream per file. Prints ratio and MB/s of
//! the windowed encoder (levels 1-3, `BlockEnd::Partial` per packet), the stateless encoder
//! (levels 1-3, raw, one call per packet: it syncs after each) and zlib-rs through flate2
//! (levels 1 and 6, `Z_PARTIAL_FLUSH` per packet), and the windowed streams' memory.
//!
//! ```sh
//! cargo run --release -p zipwire-codec --example window_bench -- [--seconds S] [--only TEXT] [FILES or DIRS]
//! ```
//!
//! Default input: `web/` and `canterbury/` of `$ZIPWIRE_CORPUS`. Engines take turns, in an
//! order rotated each round, so that drift on a shared machine hits them alike; each output is
//! checked once to inflate to its input.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use zipwire_codec::{BlockEnd, Encoder, Format, Level, Scratch, WindowedEncoder};

/// Smallest and largest packet.
const PACKET: (usize, usize) = (1024, 16 * 1024);

#[derive(Clone, Copy, Debug)]
enum Engine {
    Windowed(u8),
    Stateless(u8),
    Zlib(u32),
}

impl Engine {
    fn name(self) -> String {
        match self {
            Engine::Windowed(n) => format!("zipwire windowed {n}"),
            Engine::Stateless(n) => format!("zipwire stateless {n}"),
            Engine::Zlib(n) => format!("zlib-rs (flate2) {n}"),
        }
    }

    /// Compresses one stream of packets; returns its output size (and memory, if windowed).
    fn run(self, packets: &[&[u8]], scratch: &mut Scratch, out: &mut Vec<u8>) -> usize {
        out.clear();
        let level = |n: u8| Level::try_from(n).expect("level 1-3");
        match self {
            Engine::Windowed(n) => {
                let mut enc = WindowedEncoder::new(level(n)).expect("level 1-3");
                for packet in packets {
                    enc.encode(packet, BlockEnd::Partial, out).expect("live");
                }
                let memory = enc.memory();
                enc.finish(&[], out).expect("live");
                memory
            }
            Engine::Stateless(n) => {
                let mut enc = Encoder::new(Format::Raw, level(n)).expect("level 1-3");
                for packet in packets {
                    enc.encode(scratch, packet, out).expect("live");
                }
                enc.finish(scratch, &[], out).expect("live");
                0
            }
            Engine::Zlib(n) => {
                let mut z = flate2::Compress::new(flate2::Compression::new(n), false);
                for packet in packets {
                    deflate(&mut z, packet, flate2::FlushCompress::Partial, out);
                }
                deflate(&mut z, &[], flate2::FlushCompress::Finish, out);
                0
            }
        }
    }
}

fn deflate(
    z: &mut flate2::Compress,
    mut input: &[u8],
    flush: flate2::FlushCompress,
    out: &mut Vec<u8>,
) {
    loop {
        out.reserve(input.len() + 1024);
        let before = z.total_in();
        let status = z.compress_vec(input, out, flush).expect("deflate");
        input = &input[(z.total_in() - before) as usize..];
        let done = match flush {
            flate2::FlushCompress::Finish => status == flate2::Status::StreamEnd,
            _ => input.is_empty() && out.len() < out.capacity(),
        };
        if done {
            return;
        }
    }
}

fn inflate(wire: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut plain = Vec::new();
    flate2::read::DeflateDecoder::new(wire)
        .read_to_end(&mut plain)
        .expect("inflate");
    plain
}

/// Packet sizes from a fixed xorshift sequence.
fn cut(data: &[u8], seed: u64) -> Vec<&[u8]> {
    let mut x = seed | 1;
    let mut rest = data;
    let mut packets = Vec::new();
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = (PACKET.0 + (x as usize) % (PACKET.1 - PACKET.0 + 1)).min(rest.len());
        let (head, tail) = rest.split_at(n);
        packets.push(head);
        rest = tail;
    }
    packets
}

fn files(args: &[String]) -> Vec<PathBuf> {
    let corpus = std::env::var("ZIPWIRE_CORPUS").unwrap_or_else(|_| "../shared/corpus".into());
    let roots: Vec<PathBuf> = if args.is_empty() {
        ["web", "canterbury"]
            .iter()
            .map(|d| PathBuf::from(&corpus).join(d))
            .collect()
    } else {
        args.iter().map(PathBuf::from).collect()
    };
    let mut files = Vec::new();
    for root in roots {
        if root.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(&root)
                .expect("readable directory")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.is_file())
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(root);
        }
    }
    files
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut seconds = 6.0;
    if let Some(i) = args.iter().position(|a| a == "--seconds") {
        seconds = args[i + 1].parse().expect("--seconds S");
        args.drain(i..i + 2);
    }
    // `--only TEXT`: only the engines whose name contains TEXT (to profile one of them).
    let mut only = String::new();
    if let Some(i) = args.iter().position(|a| a == "--only") {
        only = args[i + 1].clone();
        args.drain(i..i + 2);
    }
    let data: Vec<Vec<u8>> = files(&args)
        .iter()
        .map(|f| std::fs::read(f).expect("readable file"))
        .collect();
    let streams: Vec<Vec<&[u8]>> = data
        .iter()
        .enumerate()
        .map(|(i, d)| cut(d, i as u64 + 1))
        .collect();
    let in_bytes: usize = data.iter().map(Vec::len).sum();
    let packets: usize = streams.iter().map(Vec::len).sum();
    let engines: Vec<Engine> = [
        Engine::Windowed(1),
        Engine::Windowed(2),
        Engine::Windowed(3),
        Engine::Stateless(1),
        Engine::Stateless(2),
        Engine::Stateless(3),
        Engine::Zlib(1),
        Engine::Zlib(6),
    ]
    .into_iter()
    .filter(|engine| engine.name().contains(&only))
    .collect();
    let mut scratch = Scratch::new();
    let mut out = Vec::new();
    let mut out_bytes = vec![0; engines.len()];
    let mut memory = vec![0; engines.len()];
    // Warm-up and check.
    for (e, engine) in engines.iter().enumerate() {
        for (stream, plain) in streams.iter().zip(&data) {
            memory[e] = memory[e].max(engine.run(stream, &mut scratch, &mut out));
            out_bytes[e] += out.len();
            assert!(
                inflate(&out) == *plain,
                "{} does not round-trip",
                engine.name()
            );
        }
    }
    let mut spent = vec![Duration::ZERO; engines.len()];
    let mut passes = vec![0u32; engines.len()];
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut round = 0;
    while Instant::now() < deadline || round < 3 {
        for k in 0..engines.len() {
            let e = (k + round) % engines.len();
            let start = Instant::now();
            for stream in &streams {
                engines[e].run(stream, &mut scratch, &mut out);
            }
            spent[e] += start.elapsed();
            passes[e] += 1;
        }
        round += 1;
    }
    println!(
        "{} files, {:.1} MB in {packets} packets of 1-16 KB, each followed by a flush; {round} rounds",
        data.len(),
        in_bytes as f64 / 1e6
    );
    println!(
        "{:<24} {:>8} {:>9} {:>14}",
        "engine", "ratio", "MB/s", "memory/stream"
    );
    for (e, engine) in engines.iter().enumerate() {
        let mb_s = in_bytes as f64 * f64::from(passes[e]) / 1e6 / spent[e].as_secs_f64();
        let mem = if memory[e] > 0 {
            format!("{} B", memory[e])
        } else {
            String::from("-")
        };
        println!(
            "{:<24} {:>8.3} {:>9.1} {:>14}",
            engine.name(),
            in_bytes as f64 / out_bytes[e] as f64,
            mb_s,
            mem
        );
    }
}
