//! zipwire run as `gzip` against GNU gzip itself: the same command in two sandboxes with the
//! same files must give the same standard output, messages, exit status and files. Also the
//! formats gzip reads besides gzip (zip, compress, pack), from files made by the real tools.
//!
//! gzip starts most error messages with an empty line (it ends a `-v` line it may have begun);
//! zipwire prints its `-v` line in one piece and does not, so empty lines are left out of the
//! comparison.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use zipwire_testkit::{generate, require_tool, DataKind};

mod environment;

const BIN: &str = env!("CARGO_BIN_EXE_zipwire");

/// What one run printed, returned and left behind.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
    files: Vec<(String, Vec<u8>)>,
}

/// The programs to put on PATH as `gzip`, `gunzip` and `zcat`.
struct Programs {
    gzip: PathBuf,
    gunzip: PathBuf,
    zcat: PathBuf,
}

/// How closely two runs must agree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// Every byte of output, message and file.
    Exact,
    /// Compressed bytes differ between the implementations: ratios in messages and the
    /// numbers of `--list` rows are masked, and compressed files and output are compared by
    /// being there; everything else whole.
    Compressing,
}

/// Runs `script` with `sh` in a fresh directory made by `setup`, with `programs` on PATH.
fn outcome(programs: &Programs, setup: &dyn Fn(&Path), script: &str, stdin: &[u8]) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    symlink(&programs.gzip, bin.path().join("gzip")).unwrap();
    symlink(&programs.gunzip, bin.path().join("gunzip")).unwrap();
    symlink(&programs.zcat, bin.path().join("zcat")).unwrap();
    setup(dir.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let mut child = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
        stderr,
        files,
    }
}

/// GNU gzip and its `gunzip` and `zcat` scripts (gzip 1.12 does not look at its own name).
fn real_gzip() -> Option<Programs> {
    for tool in ["gzip", "gunzip", "zcat"] {
        if !require_tool(tool) {
            return None;
        }
    }
    let find = |tool: &str| {
        let out = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        fs::canonicalize(String::from_utf8(out.stdout).unwrap().trim()).unwrap()
    };
    Some(Programs {
        gzip: find("gzip"),
        gunzip: find("gunzip"),
        zcat: find("zcat"),
    })
}

/// Masks `\t 72.4%`-style ratios.
fn mask_ratios(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(":\t") {
            Some((name, rest)) => match rest.split_once('%') {
                Some((_, after)) => format!("{name}:\tN%{after}\n"),
                None => format!("{line}\n"),
            },
            // Standard input's line is the ratio alone.
            None if line.ends_with('%') => "N%\n".to_owned(),
            None => format!("{line}\n"),
        })
        .collect()
}

/// Masks the numbers of `--list` rows (those with a ratio), whose compressed sizes differ.
fn mask_sizes(stdout: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stdout);
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if line.contains('%') {
            let mut last_digit = false;
            for c in line.chars() {
                let digit = c.is_ascii_digit() || (last_digit && c == '.');
                if !digit {
                    out.push(c);
                } else if !last_digit {
                    out.push('N');
                }
                last_digit = digit;
            }
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

/// Runs each script under both implementations and asserts the outcomes agree.
fn same_as_gzip(setup: &dyn Fn(&Path), scripts: &[&str], stdin: &[u8], compare: Compare) {
    let Some(gzip) = real_gzip() else { return };
    let zipwire = Programs {
        gzip: PathBuf::from(BIN),
        gunzip: PathBuf::from(BIN),
        zcat: PathBuf::from(BIN),
    };
    for script in scripts {
        let mut want = outcome(&gzip, setup, script, stdin);
        let mut got = outcome(&zipwire, setup, script, stdin);
        if compare == Compare::Compressing {
            // Only the compressed bytes may differ: what a script prints otherwise (`od` of a
            // header field, `ls` of a restored time, a round trip's text) and the plain files
            // are compared whole, so that masking the compressed bytes hides nothing else.
            let compressed = |bytes: &[u8]| bytes.starts_with(&[0x1f, 0x8b]);
            for side in [&mut want, &mut got] {
                side.stderr = mask_ratios(&side.stderr);
                if compressed(&side.stdout) {
                    side.stdout = b"(compressed)".to_vec();
                } else {
                    side.stdout = mask_sizes(&side.stdout);
                }
                side.files
                    .iter_mut()
                    .filter(|(_, bytes)| compressed(bytes))
                    .for_each(|(_, bytes)| bytes.clear());
            }
        }
        assert_eq!(got.code, want.code, "{script}: {}", got.stderr);
        assert_eq!(got.stderr, want.stderr, "{script}");
        assert!(
            got.stdout == want.stdout,
            "{script}: stdout differs:\n{}\n{}",
            String::from_utf8_lossy(&got.stdout),
            String::from_utf8_lossy(&want.stdout)
        );
        assert!(got.files == want.files, "{script}: files differ");
    }
}

fn gzipped(data: &[u8]) -> Vec<u8> {
    zipwire_testkit::run_with_stdin("gzip", &["-c", "-n"], data).unwrap()
}

fn common_files(dir: &Path) {
    fs::write(dir.join("in"), b"abc").unwrap();
    fs::write(dir.join("p"), b"plain text\n").unwrap();
    let text = generate(DataKind::Text, 20_000, 1);
    fs::write(dir.join("t"), &text).unwrap();
    fs::write(dir.join("g.gz"), gzipped(b"abc")).unwrap();
    let mut gp = gzipped(b"abc");
    gp.extend_from_slice(b"plain text\n");
    fs::write(dir.join("gp.gz"), gp).unwrap();
    // A fixed time on every file, so gzip headers made in either sandbox are the same: the
    // two sandboxes are set up one after the other and may straddle a second (`gzip -v in`
    // then writes `in`'s time of the second that has just begun into the header).
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for name in ["in", "p", "t", "g.gz", "gp.gz"] {
        fs::File::options()
            .write(true)
            .open(dir.join(name))
            .unwrap()
            .set_modified(time)
            .unwrap();
    }
}

#[test]
fn verbose_lines_are_gzips() {
    same_as_gzip(
        &common_files,
        &[
            "gzip -v in t",
            "gzip -vk t",
            "gzip -vc t",
            "gzip -v < t",
            "gzip -vc in",
            "gzip -v < in",
            "gzip -c t > t.gz && gzip -dv t.gz",
            "gzip -c t > t.gz && gzip -dvf t.gz",
        ],
        b"",
        Compare::Compressing,
    );
    same_as_gzip(
        &common_files,
        &[
            "gzip -v in",
            "gzip -vk in",
            "gzip -dv g.gz",
            "gzip -dvk g.gz",
            "gzip -dvc g.gz",
            "gzip -dv < g.gz",
            "gzip -tv g.gz",
            "gzip -tv < g.gz",
        ],
        b"",
        Compare::Exact,
    );
}

#[test]
fn the_last_of_quiet_and_verbose_wins_as_in_gzip() {
    // Not both: `-tvq` must not print OK lines and exit with a warning's 2.
    let files = |dir: &Path| {
        common_files(dir);
        let mut zeros = gzipped(b"abc");
        zeros.extend_from_slice(&[0; 8]);
        fs::write(dir.join("z.gz"), zeros).unwrap();
    };
    same_as_gzip(
        &files,
        &[
            "gzip -tvq z.gz",
            "gzip -tqv z.gz",
            "gzip -t -q -v z.gz",
            "gzip -t --verbose --quiet z.gz",
            "gzip -dcvq z.gz",
            "gzip -dcqv g.gz",
            "gzip -tq z.gz",
        ],
        b"",
        Compare::Exact,
    );
}

#[test]
fn force_to_stdout_passes_unknown_data_through() {
    same_as_gzip(
        &common_files,
        &[
            "gzip -cdf p",
            "gzip -cdf gp.gz",
            "gzip -cd gp.gz",
            "gzip -cdf p g.gz p",
            "zcat -f p gp.gz",
            "gzip -cdf < p",
            "gzip -df < p",
            "gzip -d p.gz || true; cp p p.gz; gzip -df p.gz",
            "gzip -cdf < /dev/null",
            "gzip -tf p gp.gz",
            "gzip -lf < p",
        ],
        b"",
        Compare::Exact,
    );
}

#[test]
fn suffix_and_every_documented_option_are_gzips() {
    same_as_gzip(
        &common_files,
        &[
            "gzip -d -S '' g.gz",
            "gzip -S '' in",
            "gzip -S abcdefghijabcdefghijabcdefghijab in",
            "gzip -S .zz in && gzip -d -S .zz in.zz",
            "gzip --synchronous --rsyncable --no-name --quiet in",
            "gzip --name --recursive --keep --force --verbose --suffix .x t",
            "gzip --stdout --best t | gzip --decompress --to-stdout",
            "gzip --fast -c t | gzip --uncompress --test && gzip -c t | gzip --list",
            "gzip -n in && gzip -d -N in.gz",
            "gzip t && mv t.gz renamed.gz && gzip -dN renamed.gz",
            "gzip -c t > t.gz && cp t.gz other.gz && gzip -dN other.gz",
            "gzip -N -k t && touch -d 2001-01-01 t.gz && gzip -dN -f t.gz && ls -l --time-style=+%Y t",
        ],
        b"",
        Compare::Compressing,
    );
    // A name without its suffix is found with it (`gunzip g` reads g.gz), and the error of
    // one found under no suffix names the first tried; specials in streams, links for -t,
    // and a suffixed file under -r, as gzip takes them.
    same_as_gzip(
        &common_files,
        &[
            "gzip -d g",
            "gzip -dc g; gzip -t g; gzip -l g",
            "gzip -dc nothing",
            "gzip -d -S .x nothing",
            "cp g.gz h.Z && gzip -dc h",
            "gzip g.gz; mkdir d && cp g.gz d/ && gzip -r d && gzip -rv d",
            "gzip -dc /dev/stdin < g.gz && cat g.gz | gzip -t /dev/stdin",
            "ln -s g.gz link.gz && gzip -t link.gz && gzip -l link.gz",
        ],
        b"",
        Compare::Exact,
    );
}

#[test]
fn set_id_and_sticky_files_are_refused_as_gzip_refuses_them() {
    // Compressing them would carry the set-id bits over to the output.
    same_as_gzip(
        &common_files,
        &[
            "cp in su && chmod 4755 su && gzip su; ls su*",
            "cp in sg && chmod 2755 sg && gzip -f sg; ls sg*",
            "cp in st && chmod 1644 st && gzip st; gzip -f st && stat -c %a st.gz",
            "gzip -c in > su.gz && chmod 4755 su.gz && gzip -d su.gz; ls su*",
            "cp in su && chmod 4755 su && gzip -c su | gzip -dc | cmp - in",
        ],
        b"",
        Compare::Exact,
    );
}

#[test]
fn damage_messages_and_exit_codes_are_gzips() {
    let good = gzipped(&generate(DataKind::Text, 200_000, 2));
    let setup = |dir: &Path| {
        let variant = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = good.clone();
            edit(&mut bytes);
            fs::write(dir.join(name), bytes).unwrap();
        };
        variant("crc.gz", &|b| {
            let at = b.len() - 6;
            b[at] ^= 1;
        });
        variant("len.gz", &|b| {
            let at = b.len() - 2;
            b[at] ^= 1;
        });
        variant("cut.gz", &|b| b.truncate(3000));
        variant("head.gz", &|b| b.truncate(5));
        variant("bad.gz", &|b| b[100..140].fill(0xff));
        variant("meth.gz", &|b| b[2] = 7);
        variant("junk.gz", &|b| b.extend_from_slice(b"\0\0junk"));
        variant("zeros.gz", &|b| b.extend_from_slice(&[0; 1000]));
        fs::write(dir.join("empty.gz"), b"").unwrap();
        fs::write(dir.join("one.gz"), b"\x1f").unwrap();
        fs::write(dir.join("letter.gz"), b"A").unwrap();
        fs::write(dir.join("zero.gz"), b"\0").unwrap();
        // A next member cut after its first byte: the end of the file, not garbage.
        variant("stray.gz", &|b| b.push(0x1f));
        variant("strayA.gz", &|b| b.push(b'A'));
        variant("strayzero.gz", &|b| b.push(0));
        fs::write(dir.join("text.gz"), b"just text\n").unwrap();
        // A header CRC (FHCRC): right, and wrong, which gzip names with both values.
        let with_hcrc = |flip: u16| {
            let mut head = good[..10].to_vec();
            head[3] |= 0x02;
            let crc = crc32fast::hash(&head) as u16 ^ flip;
            head.extend_from_slice(&crc.to_le_bytes());
            head.extend_from_slice(&good[10..]);
            head
        };
        fs::write(dir.join("hcrc.gz"), with_hcrc(0)).unwrap();
        fs::write(dir.join("badhcrc.gz"), with_hcrc(0x1234)).unwrap();
    };
    let mut scripts = Vec::new();
    for name in [
        "crc",
        "len",
        "cut",
        "head",
        "bad",
        "meth",
        "junk",
        "zeros",
        "empty",
        "one",
        "text",
        "letter",
        "zero",
        "stray",
        "strayA",
        "strayzero",
        "hcrc",
        "badhcrc",
    ] {
        scripts.push(format!("gzip -d {name}.gz"));
        scripts.push(format!("gzip -t {name}.gz"));
        scripts.push(format!("gzip -dc < {name}.gz"));
    }
    // Trailing zeros are told of, with a warning's status, only under -v.
    scripts.push("gzip -tv zeros.gz".to_owned());
    scripts.push("gzip -dcv zeros.gz | cksum".to_owned());
    scripts.push("gzip -dv strayzero.gz".to_owned());
    // Under -v gzip begins a file's line before decoding it: a message ends it early.
    for name in ["junk", "crc", "cut"] {
        scripts.push(format!("gzip -tv {name}.gz"));
        scripts.push(format!("gzip -dv {name}.gz"));
        scripts.push(format!("gzip -tv < {name}.gz"));
    }
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    same_as_gzip(&setup, &scripts, b"", Compare::Exact);
}

#[test]
fn timestamps_outside_the_header_field_are_clamped_with_a_warning() {
    let setup = |dir: &Path| {
        for name in ["old", "future"] {
            fs::write(dir.join(name), b"some data\n").unwrap();
        }
    };
    same_as_gzip(
        &setup,
        &[
            "touch -d 1960-01-01 old && gzip old && od -A n -t x1 -j 4 -N 4 old.gz",
            "touch -d 2200-01-01 future && gzip -k future && od -A n -t x1 -j 4 -N 4 future.gz",
            "touch -d 2200-01-01 future && gzip -q future",
            "touch -d 2200-01-01 future && gzip -n future",
        ],
        b"",
        Compare::Compressing,
    );
}

#[test]
fn listing_names_stdin_as_gzip_does() {
    same_as_gzip(
        &|dir: &Path| {
            common_files(dir);
            let named = Command::new("gzip")
                .arg("-c")
                .arg(dir.join("t"))
                .output()
                .unwrap();
            fs::write(dir.join("t.gz"), named.stdout).unwrap();
        },
        &[
            "gzip -l < g.gz",
            "gzip -l g.gz",
            "touch -d 2020-02-03T04:05 t.gz && gzip -lv t.gz && gzip -lvN t.gz",
            "gzip -lq t.gz",
            // Standard input's date is the pipe's: now, not comparable.
            "gzip -lv < g.gz | cut -c1-15,28-",
        ],
        b"",
        Compare::Exact,
    );
}

/// A small pack(1) encoder for tests: a complete code with lengths `d - 1` and `d` (the most
/// frequent bytes get the shorter one), the end-of-block code last at length `d`.
fn pack(data: &[u8]) -> Vec<u8> {
    assert!(!data.is_empty(), "pack has no empty files");
    let mut counts = [0usize; 256];
    data.iter().for_each(|&b| counts[usize::from(b)] += 1);
    let mut present: Vec<u8> = (0..=255u8)
        .filter(|&b| counts[usize::from(b)] > 0)
        .collect();
    present.sort_by_key(|&b| std::cmp::Reverse(counts[usize::from(b)]));
    let n = present.len() + 1;
    let d = (usize::BITS - (n - 1).leading_zeros()).max(1) as usize;
    let short = (1 << d) - n; // leaves one level up
    let long = n - short; // at the deepest level, the end-of-block code included
    let mut out = vec![0x1f, 0x1e];
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.push(d as u8);
    for len in 1..=d {
        out.push(match len {
            _ if len == d => (long - 2) as u8,
            _ if len + 1 == d => short as u8,
            _ => 0,
        });
    }
    out.extend_from_slice(&present[..short]);
    out.extend_from_slice(&present[short..]);
    let mut codes = [(0u32, 0usize); 256];
    for (i, &b) in present[..short].iter().enumerate() {
        codes[usize::from(b)] = ((long / 2 + i) as u32, d - 1);
    }
    for (i, &b) in present[short..].iter().enumerate() {
        codes[usize::from(b)] = (i as u32, d);
    }
    let (mut acc, mut bits) = (0u64, 0);
    let mut put = |code: u32, len: usize, out: &mut Vec<u8>| {
        acc = (acc << len) | u64::from(code);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    };
    for &b in data {
        let (code, len) = codes[usize::from(b)];
        put(code, len, &mut out);
    }
    put((long - 1) as u32, d, &mut out);
    put(0, 7, &mut out); // pads the last byte
    out
}

/// Writes a zip with python3's zipfile: `stored`, `deflated`, `streamed` (a data descriptor,
/// as written to a pipe) and `two` (two entries).
fn zips(dir: &Path, data: &[u8]) {
    fs::write(dir.join("data"), data).unwrap();
    // Fixed entry times, so every setup writes the same bytes.
    let script = r#"
import sys, zipfile
data = open('data', 'rb').read()
def entry(name, method):
    info = zipfile.ZipInfo(name, (2020, 1, 2, 3, 4, 6))
    info.compress_type = method
    return info
for name, method in (('stored', zipfile.ZIP_STORED), ('deflated', zipfile.ZIP_DEFLATED)):
    with zipfile.ZipFile(name + '.zip', 'w') as z:
        z.writestr(entry('data', method), data)
with zipfile.ZipFile(sys.stdout.buffer, 'w') as z:
    with z.open(entry('data', zipfile.ZIP_DEFLATED), 'w') as out:
        out.write(data)
with zipfile.ZipFile('two.zip', 'w') as z:
    z.writestr(entry('a', zipfile.ZIP_DEFLATED), data)
    z.writestr(entry('b', zipfile.ZIP_DEFLATED), b'second')
"#;
    let streamed = Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(streamed.status.success(), "{streamed:?}");
    fs::write(dir.join("streamed.zip"), streamed.stdout).unwrap();
    fs::remove_file(dir.join("data")).unwrap();
}

fn format_data() -> Vec<u8> {
    let mut data = generate(DataKind::Text, 300_000, 5);
    data.extend(generate(DataKind::Random, 70_000, 6));
    data.extend(generate(DataKind::Text, 100_000, 7));
    data
}

#[test]
fn zip_compress_and_pack_files_decode_as_gzip_decodes_them() {
    for tool in ["python3", "compress"] {
        if !require_tool(tool) {
            return;
        }
    }
    let data = format_data();
    // Made once, copied into each sandbox.
    let made = tempfile::tempdir().unwrap();
    zips(made.path(), &data);
    for bits in [10, 12, 16] {
        let lzw = zipwire_testkit::run_with_stdin("compress", &["-c", &format!("-b{bits}")], &data)
            .unwrap();
        fs::write(made.path().join(format!("b{bits}.Z")), lzw).unwrap();
    }
    fs::write(made.path().join("text.z"), pack(&data)).unwrap();
    fs::write(made.path().join("one.z"), pack(b"aaaa")).unwrap();
    // gzip reads pack and compress members after a first member too (compress's ends the
    // file); flag bits compress never sets get a warning; a zip's compressed size is not
    // held against its data.
    let made_file = |name: &str| fs::read(made.path().join(name)).unwrap();
    let joined = |name: &str, parts: &[&[u8]]| {
        fs::write(made.path().join(name), parts.concat()).unwrap();
    };
    let gz = gzipped(&data);
    joined("gzZ.gz", &[&gz, &made_file("b12.Z")]);
    joined("gzpack.gz", &[&gz, &pack(&data), &gz]);
    joined("packpack.z", &[&pack(&data), &pack(b"aaaa")]);
    let mut reserved = made_file("b12.Z");
    reserved[2] |= 0x20;
    fs::write(made.path().join("reserved.Z"), reserved).unwrap();
    let mut sized = made_file("deflated.zip");
    sized[18..22].copy_from_slice(&7u32.to_le_bytes());
    fs::write(made.path().join("sized.zip"), sized).unwrap();
    let files: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(made.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (PathBuf::from(e.file_name()), fs::read(e.path()).unwrap())
        })
        .collect();
    let setup = |dir: &Path| {
        for (name, bytes) in &files {
            fs::write(dir.join(name), bytes).unwrap();
        }
    };
    let mut scripts = Vec::new();
    for name in [
        "stored.zip",
        "deflated.zip",
        "streamed.zip",
        "b10.Z",
        "b12.Z",
        "b16.Z",
        "text.z",
        "one.z",
        "gzZ.gz",
        "gzpack.gz",
        "packpack.z",
        "reserved.Z",
        "sized.zip",
    ] {
        scripts.push(format!("gzip -dc {name} | cksum"));
        scripts.push(format!("gzip -t {name}"));
        scripts.push(format!("gzip -dc < {name} | cksum"));
    }
    scripts.push("gzip -d b12.Z text.z && cksum b12 text".to_owned());
    scripts.push("gzip -d gzZ.gz gzpack.gz reserved.Z; cksum gzZ gzpack reserved".to_owned());
    scripts.push("zcat -f gzZ.gz packpack.z | cksum".to_owned());
    scripts.push("gzip -dc two.zip".to_owned());
    scripts.push("gzip -d -S .zip two.zip".to_owned());
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    same_as_gzip(&setup, &scripts, b"", Compare::Exact);
    // And the data really is what went in.
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    for name in ["deflated.zip", "b16.Z", "text.z"] {
        let out = Command::new(BIN)
            .args(["decompress", "-c"])
            .arg(dir.path().join(name))
            .output()
            .unwrap();
        assert!(out.status.success() && out.stdout == data, "{name}");
    }
}

#[test]
fn damaged_zip_compress_and_pack_files_never_crash_the_decoder() {
    for tool in ["python3", "compress"] {
        if !require_tool(tool) {
            return;
        }
    }
    let data = generate(DataKind::Text, 20_000, 9);
    let dir = tempfile::tempdir().unwrap();
    zips(dir.path(), &data);
    let mut inputs = vec![
        fs::read(dir.path().join("deflated.zip")).unwrap(),
        fs::read(dir.path().join("stored.zip")).unwrap(),
        zipwire_testkit::run_with_stdin("compress", &["-c"], &data).unwrap(),
        pack(&data),
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let originals = inputs.clone();
    for original in &originals {
        for round in 0..40 {
            let mut bytes = original.clone();
            let at = 2 + (next() as usize) % (bytes.len() - 2);
            match round % 3 {
                0 => bytes.truncate(at),
                1 => bytes[at] ^= 1 << (next() % 8),
                _ => bytes[at..]
                    .iter_mut()
                    .take(8)
                    .for_each(|b| *b = next() as u8),
            }
            inputs.push(bytes);
        }
    }
    for (i, input) in inputs.iter().enumerate() {
        let run = Command::new(BIN)
            .args(["decompress", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut run = run;
        let mut stdin = run.stdin.take().unwrap();
        let input = input.clone();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = run.wait_with_output().unwrap();
        feeder.join().unwrap();
        let code = out.status.code();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(code, Some(0..=2)), "input {i}: {code:?} {stderr}");
        assert!(!stderr.contains("panicked"), "input {i}: {stderr}");
        if i < originals.len() {
            assert!(code == Some(0) && out.stdout == data, "input {i}: {stderr}");
        }
    }
}
