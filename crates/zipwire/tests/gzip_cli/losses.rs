//! Bad input, full disks, signals and odd names: every failure is reported and loses nothing.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};

use zipwire_codec::format::gzip;
use zipwire_testkit::{generate, require_tool, DataKind};

use crate::sandbox::{gunzip_with, text, Sandbox, BIN};

#[test]
fn damaged_input_is_reported_and_nothing_is_lost() {
    let sb = Sandbox::new();
    let data = text(400_000, 4);
    sb.write("d", &data);
    assert_eq!(sb.run(&["compress", "-1", "d"]).code, 0);
    let good = sb.read("d.gz");

    let mut crc = good.clone();
    let at = crc.len() - 8;
    crc[at] ^= 0x55;
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("crc.gz", crc, "crc error"),
        (
            "cut.gz",
            good[..good.len() / 2].to_vec(),
            "unexpected end of file",
        ),
        (
            "short.gz",
            good[..good.len() - 3].to_vec(),
            "unexpected end of file",
        ),
        (
            "plain.gz",
            b"just some text\n".to_vec(),
            "not in gzip format",
        ),
        ("flip.gz", flipped, "invalid compressed data"),
    ];
    for (name, bytes, message) in &cases {
        sb.write(name, bytes);
        let run = sb.run(&["decompress", name]);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        let line = format!("zipwire: {name}: ");
        assert!(run.stderr.starts_with(&line), "{name}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
        // One line, or two where gzip gives two: a CRC and a length error.
        let lines = run.stderr.lines().count();
        assert!(
            lines == 1 || lines == 2 && run.stderr.contains("length error"),
            "{}",
            run.stderr
        );
        assert_eq!(&sb.read(name), bytes, "{name} untouched");
        assert!(
            !sb.exists(name.trim_end_matches(".gz")),
            "{name}: no output left"
        );
        assert_eq!(sb.run(&["decompress", "-t", name]).code, 1);
    }
    assert_eq!(sb.names().len(), 1 + cases.len(), "{:?}", sb.names());
    assert_eq!(sb.run(&["decompress", "-t", "-v", "d.gz"]).code, 0);
}

#[test]
fn missing_and_unreadable_inputs_are_errors() {
    let sb = Sandbox::new();
    let run = sb.run(&["compress", "nope"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "zipwire: nope: No such file or directory"
    );

    let path = sb.write("locked", b"secret");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anything: drop the capabilities that let it, as an ordinary user has none.
    let run = if is_root() {
        sb.run_program(
            "setpriv",
            &[
                "--bounding-set=-dac_override,-dac_read_search",
                BIN,
                "compress",
                "locked",
            ],
            None,
        )
    } else {
        sb.run(&["compress", "locked"])
    };
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("locked: Permission denied"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.names(), ["locked"]);
}

fn is_root() -> bool {
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[test]
fn a_full_disk_loses_nothing() {
    let sb = Sandbox::new();
    let data = generate(DataKind::Random, 200_000, 5);
    sb.write("r", &data);
    let full = Command::new(BIN)
        .args(["compress", "-c", "r"])
        .current_dir(sb.dir.path())
        .stdout(fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(full.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(sb.read("r") == data);

    // A 64 KB tmpfs in a private mount namespace: the file fits, its compressed copy does not.
    let script = format!(
        "mount -t tmpfs -o size=64k zipwire-test {dir} && \
         head -c 50000 /dev/urandom > {dir}/f && cp {dir}/f {dir}/../copy && \
         {BIN} compress {dir}/f; echo \"rc=$?\"; ls -A {dir}; cmp {dir}/f {dir}/../copy && echo same",
        dir = sb.path("small").display()
    );
    fs::create_dir(sb.path("small")).unwrap();
    // Root mounts in a plain mount namespace; anyone else maps themselves to root first.
    let unshare: &[&str] = if is_root() {
        &["--mount"]
    } else {
        &["--mount", "--map-root-user"]
    };
    let out = sb.run_program("unshare", &[unshare, &["sh", "-c", &script]].concat(), None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "rc=1\nf\nsame\n", "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("f.gz: No space left on device"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_stored_name_equal_to_the_input_loses_nothing() {
    let sb = Sandbox::new();
    let data = text(3_000, 61);
    sb.write("a.gz", &data);
    assert_eq!(sb.run(&["compress", "-f", "-S", ".zz", "a.gz"]).code, 0);
    // a.gz.zz holds the name "a.gz": decompressed with -N it would land on itself.
    fs::rename(sb.path("a.gz.zz"), sb.path("a.gz")).unwrap();
    let packed = sb.read("a.gz");
    let run = sb.run(&["decompress", "-N", "-f", "a.gz"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("would replace the input"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.names(), ["a.gz"]);
    assert!(sb.read("a.gz") == packed);
}

#[test]
fn long_names_in_any_encoding_get_a_temporary_file() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    // 80 three-byte characters (240 bytes), and 90 bytes that are not UTF-8: under NAME_MAX
    // with the suffix, too long for a temporary name cut by characters.
    let names = ["日".repeat(80).into_bytes(), vec![0xff; 90]];
    for name in names {
        let name = OsStr::from_bytes(&name);
        fs::write(sb.dir.path().join(name), b"data").unwrap();
        let status = Command::new(BIN)
            .arg("compress")
            .arg(name)
            .current_dir(sb.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "{name:?}");
        let mut packed = name.to_owned();
        packed.push(".gz");
        assert!(sb.dir.path().join(packed).exists(), "{name:?}");
    }
}

#[test]
fn names_too_long_with_the_suffix_are_shortened_as_gzip_does() {
    // Compressing: gzip's shortened name (figures from gzip 1.12), the whole name kept in the
    // header even under -n, and gzip's line whatever -q says. It must not fail with "File name
    // too long" after compressing the whole file.
    let sb = Sandbox::new();
    let long = "a".repeat(254);
    sb.write(&long, b"data");
    let run = sb.run(&["compress", "-q", "-n", &long]);
    let short = format!("{}.gz", "a".repeat(252));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("{long} compressed to {short}")),
        "{}",
        run.stderr
    );
    assert_eq!(sb.names(), std::slice::from_ref(&short));
    let packed = sb.read(&short);
    let (header, _) = gzip::parse_header(&packed).unwrap().unwrap();
    assert_eq!(header.name.as_deref(), Some(long.as_bytes()));
    // Decompressing with -N a stored name over NAME_MAX: cut to 255 bytes, with gzip's
    // warning (status 2); the data is all there.
    let mut header = gzip::Header::minimal(6);
    header.name = Some(vec![b'n'; 300]);
    let mut member = header.to_bytes();
    let body = zipwire_codec::compress(
        zipwire_codec::Format::Raw,
        zipwire_codec::Level::DEFAULT,
        b"hello",
    );
    member.extend_from_slice(&body);
    member.extend_from_slice(&gzip::trailer(crc32fast::hash(b"hello"), 5));
    sb.write("stored.gz", &member);
    let run = sb.run(&["decompress", "-N", "stored.gz"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stored.gz: warning, name truncated"));
    assert_eq!(sb.read(&"n".repeat(255)), b"hello");
}

#[test]
fn signals_ignored_at_start_stay_ignored() {
    // `nohup gzip big &`: a SIGHUP at logout must not stop it. bash's `exec` keeps the
    // ignored disposition for zipwire.
    if !require_tool("bash") {
        return;
    }
    let sb = Sandbox::new();
    let mut child = Command::new("bash")
        .args(["-c", &format!("trap '' HUP; exec {BIN} compress -c")])
        .current_dir(sb.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = text(200_000, 62);
    stdin.write_all(&data[..100_000]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let hup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    std::thread::sleep(std::time::Duration::from_millis(100));
    stdin.write_all(&data[100_000..]).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(gunzip_with("gzip", &out.stdout) == data);
}

#[test]
fn an_interrupt_leaves_the_input_and_no_partial_output() {
    let sb = Sandbox::new();
    let data = text(48 << 20, 12);
    sb.write("slow", &data);
    // Level 9 on one thread takes seconds: time enough to interrupt it mid-file. SIGINT set
    // to its default first: a test run in the background of a shell inherits it ignored, and
    // zipwire, as gzip, leaves an ignored signal ignored.
    let mut child = Command::new("env")
        .args([
            "--default-signal=INT",
            BIN,
            "compress",
            "-9",
            "-p",
            "1",
            "slow",
        ])
        .current_dir(sb.dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !sb.names().iter().any(|n| n.ends_with(".zipwire-tmp")) {
        assert!(
            started.elapsed().as_secs() < 20,
            "no temporary file: {:?}",
            sb.names()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    // Killed by the signal, as gzip is, not an exit with 130: a shell loop stops only then.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(2), "{status:?}");
    assert_eq!(sb.names(), ["slow"]);
    assert!(sb.read("slow") == data);
}

#[test]
fn a_file_size_limit_leaves_the_input_and_no_temporary_file() {
    // `ulimit -f`: the write past the limit raises SIGXFSZ, whose default action would kill
    // zipwire with the temporary file in place.
    if !require_tool("bash") {
        return;
    }
    let sb = Sandbox::new();
    let data = generate(DataKind::Random, 4 << 20, 13);
    sb.write("big", &data);
    let status = Command::new("bash")
        .args(["-c", &format!("ulimit -f 1000; exec {BIN} compress -1 big")])
        .current_dir(sb.dir.path())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "{status:?}");
    assert_eq!(sb.names(), ["big"]);
    assert!(sb.read("big") == data);
}
