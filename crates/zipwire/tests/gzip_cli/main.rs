//! `zipwire compress` / `decompress` and the gzip personalities, run as a user would: the real
//! binary in a temporary directory, checking files, modes, times, messages and exit codes, and
//! reading each other's files with gzip and pigz.

use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
use std::process::Command;

use zipwire_codec::format::gzip;
use zipwire_testkit::{corpus_files, require_tool};

mod losses;
mod memory;
mod races;
mod sandbox;
mod streams;

use sandbox::{gunzip_with, text, Sandbox, BIN};

#[test]
fn compress_replaces_the_file_keeping_mode_time_name_and_gzip_reads_it() {
    let sb = Sandbox::new();
    let data = text(300_000, 1);
    let path = sb.write("notes.txt", &data);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    let mtime = filetime(1_600_000_000);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();

    let run = sb.run(&["compress", "notes.txt"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(sb.names(), ["notes.txt.gz"]);
    let meta = fs::metadata(sb.path("notes.txt.gz")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert_eq!(meta.mtime(), 1_600_000_000);
    let wire = sb.read("notes.txt.gz");
    let (header, _) = gzip::parse_header(&wire).unwrap().unwrap();
    assert_eq!(header.name.as_deref(), Some(&b"notes.txt"[..]));
    assert_eq!(header.mtime, 1_600_000_000);
    if require_tool("gzip") && require_tool("pigz") {
        assert!(gunzip_with("gzip", &wire) == data);
        assert!(gunzip_with("pigz", &wire) == data);
    }

    let run = sb.run(&["decompress", "notes.txt.gz"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(sb.names(), ["notes.txt"]);
    assert!(sb.read("notes.txt") == data);
    let meta = fs::metadata(sb.path("notes.txt")).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.mtime()), (0o640, 1_600_000_000));
}

fn filetime(secs: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}

#[test]
fn keep_stdout_output_and_no_name() {
    let sb = Sandbox::new();
    let data = text(50_000, 2);
    sb.write("a", &data);
    assert_eq!(sb.run(&["compress", "-k", "-1", "a"]).code, 0);
    assert_eq!(sb.names(), ["a", "a.gz"]);

    let run = sb.run(&["compress", "-c", "-n", "a"]);
    assert_eq!(run.code, 0);
    let (header, _) = gzip::parse_header(&run.stdout).unwrap().unwrap();
    assert_eq!((header.name, header.mtime), (None, 0));
    let back = sb.run_with_input(&["decompress", "-c"], &run.stdout);
    assert!(back.code == 0 && back.stdout == data);

    assert_eq!(
        sb.run(&["compress", "-o", "out/b.gz", "a"]).code,
        1,
        "no such dir"
    );
    fs::create_dir(sb.path("out")).unwrap();
    assert_eq!(sb.run(&["compress", "-o", "out/b.gz", "a"]).code, 0);
    assert!(sb.exists("a"), "-o keeps the input");
    let back = sb.run(&["decompress", "-c", "out/b.gz"]);
    assert!(back.stdout == data);
    assert_eq!(sb.run(&["compress", "-o", "x.gz", "a", "a.gz"]).code, 1);

    // A regular file on standard input gives the header its time (no name), as gzip's does;
    // a pipe, or -n, gives none.
    fs::File::open(sb.path("a"))
        .unwrap()
        .set_modified(filetime(1_577_836_800))
        .unwrap();
    for (args, mtime) in [(&["compress"][..], 1_577_836_800), (&["compress", "-n"], 0)] {
        let out = Command::new(BIN)
            .args(args)
            .stdin(fs::File::open(sb.path("a")).unwrap())
            .output()
            .unwrap();
        let (header, _) = gzip::parse_header(&out.stdout).unwrap().unwrap();
        assert_eq!((header.name, header.mtime), (None, mtime), "{args:?}");
    }
    let piped = sb.run_with_input(&["compress"], &data);
    let (header, _) = gzip::parse_header(&piped.stdout).unwrap().unwrap();
    assert_eq!(header.mtime, 0);
}

#[test]
fn existing_outputs_are_not_overwritten_without_force() {
    let sb = Sandbox::new();
    sb.write("f", &text(10_000, 3));
    sb.write("f.gz", b"precious");
    let run = sb.run(&["compress", "f"]);
    // gzip's warning (exit 2) when it cannot ask.
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("f.gz already exists;\tnot overwritten"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.read("f.gz"), b"precious");
    assert_eq!(sb.names(), ["f", "f.gz"]);

    assert_eq!(sb.run(&["compress", "-f", "f"]).code, 0);
    assert_eq!(sb.names(), ["f.gz"]);
    assert!(sb.run(&["decompress", "-c", "f.gz"]).stdout == text(10_000, 3));
}

#[test]
fn other_tools_files_decode_members_padding_and_garbage() {
    let sb = Sandbox::new();
    let data = text(120_000, 6);
    let mut want = Vec::new();
    let mut file = Vec::new();
    if require_tool("gzip") && require_tool("pigz") {
        for (tool, level) in [("gzip", "-6"), ("pigz", "-9"), ("gzip", "-1")] {
            file.extend(zipwire_testkit::run_with_stdin(tool, &[level, "-c"], &data).unwrap());
            want.extend_from_slice(&data);
        }
    }
    // A member with every optional header field: extra, name, comment and header CRC.
    let mut member = vec![0x1f, 0x8b, 8, 0x02 | 0x04 | 0x08 | 0x10, 0, 0, 0, 0, 0, 3];
    member.extend_from_slice(&[4, 0, b'Z', b'W', 0, 0]);
    member.extend_from_slice(b"name.txt\0a comment\0");
    let crc = crc32fast::hash(&member) as u16;
    member.extend_from_slice(&crc.to_le_bytes());
    let body = zipwire_codec::compress(
        zipwire_codec::Format::Raw,
        zipwire_codec::Level::FASTEST,
        b"extra",
    );
    member.extend_from_slice(&body);
    member.extend_from_slice(&crc32fast::hash(b"extra").to_le_bytes());
    member.extend_from_slice(&5u32.to_le_bytes());
    file.extend_from_slice(&member);
    want.extend_from_slice(b"extra");

    sb.write("multi.gz", &file);
    let run = sb.run(&["decompress", "-c", "multi.gz"]);
    assert!(run.code == 0 && run.stdout == want, "{}", run.stderr);

    let mut padded = file.clone();
    padded.extend(std::iter::repeat_n(0, 1000));
    sb.write("padded.gz", &padded);
    let run = sb.run(&["decompress", "padded.gz"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert!(sb.read("padded") == want);

    let mut junk = file;
    junk.extend_from_slice(b"\n-- appended by a mail client --\n");
    sb.write("junk.gz", &junk);
    assert_eq!(sb.run(&["decompress", "-q", "-t", "junk.gz"]).code, 2);
    let run = sb.run(&["decompress", "junk.gz"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("trailing garbage ignored"),
        "{}",
        run.stderr
    );
    assert!(sb.read("junk") == want);
}

#[test]
fn output_is_the_same_for_any_thread_count_file_or_pipe() {
    let Some(big) = corpus_files("large").into_iter().next() else {
        return;
    };
    let sb = Sandbox::new();
    let big = big.to_str().unwrap().to_owned();
    let data = fs::read(&big).unwrap();
    for level in ["-1", "-6"] {
        let one = sb.run(&["compress", level, "-n", "-c", "-p", "1", &big]);
        assert_eq!(one.code, 0, "{}", one.stderr);
        for threads in ["2", "3", "8"] {
            let many = sb.run(&["compress", level, "-n", "-c", "-p", threads, &big]);
            assert!(many.stdout == one.stdout, "{level} -p {threads}");
        }
        let piped = sb.run_with_input(&["compress", level, "-p", "2"], &data);
        assert!(piped.stdout == one.stdout, "{level} from a pipe");
        if require_tool("gzip") {
            assert!(gunzip_with("gzip", &one.stdout) == data, "{level}");
        }
    }
}

#[test]
fn gzip_names_give_gzip_gunzip_and_zcat() {
    let sb = Sandbox::new();
    for name in ["gzip", "gunzip", "zcat"] {
        symlink(BIN, sb.path(name)).unwrap();
    }
    let data = text(30_000, 7);
    sb.write("p.txt", &data);
    let gzip = sb.path("gzip").to_str().unwrap().to_owned();
    let run = sb.run_program(&gzip, &["-9", "-v", "p.txt"], None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.starts_with("p.txt:\t") && run.stderr.contains("% -- replaced with p.txt.gz"),
        "{}",
        run.stderr
    );
    let zcat = sb.path("zcat").to_str().unwrap().to_owned();
    let run = sb.run_program(&zcat, &["p.txt.gz"], None);
    assert!(run.code == 0 && run.stdout == data);
    assert!(sb.exists("p.txt.gz"));
    let gunzip = sb.path("gunzip").to_str().unwrap().to_owned();
    assert_eq!(sb.run_program(&gunzip, &["p.txt.gz"], None).code, 0);
    assert!(sb.read("p.txt") == data);
    let run = sb.run_program(&gzip, &["nope"], None);
    assert!(run.stderr.starts_with("gzip: nope: "), "{}", run.stderr);
}

#[test]
fn warnings_exit_2_and_leave_files_alone() {
    let sb = Sandbox::new();
    sb.write("done.gz", b"whatever");
    sb.write("plain", b"data");
    fs::create_dir(sb.path("dir")).unwrap();
    fs::hard_link(sb.path("plain"), sb.path("twin")).unwrap();
    symlink("plain", sb.path("link")).unwrap();
    for (args, message) in [
        (&["compress", "dir"][..], "dir is a directory -- ignored"),
        (
            &["compress", "twin"][..],
            "twin has 1 other link -- file ignored",
        ),
        (
            &["decompress", "plain"][..],
            "plain: unknown suffix -- ignored",
        ),
    ] {
        let run = sb.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
        let quiet = [&args[..1], &["-q"], &args[1..]].concat();
        assert_eq!(sb.run(&quiet).stderr, "", "{quiet:?}");
    }
    // As gzip 1.12 (which opens with O_NOFOLLOW): an error, said under -q too.
    said_quiet_or_not(&sb, &["link"], 1, "link: Too many levels of symbolic links");
    // As gzip: said, but no warning status, so `gzip -r` over a tree that holds .gz files
    // succeeds (and says nothing of them without -v).
    let run = sb.run(&["compress", "done.gz"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run
        .stderr
        .contains("done.gz already has .gz suffix -- unchanged"));
    fs::create_dir(sb.path("tree")).unwrap();
    fs::copy(sb.path("done.gz"), sb.path("tree/old.gz")).unwrap();
    let run = sb.run(&["compress", "-r", "tree"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let run = sb.run(&["compress", "-r", "-v", "tree"]);
    assert!(run.code == 0 && run.stderr.contains("already has .gz suffix"));
    assert_eq!(
        sb.names(),
        ["dir", "done.gz", "link", "plain", "tree", "twin"]
    );
}

/// Runs `compress ARGS` and `compress -q ARGS`: both exit `code` and say `message`, as the
/// messages gzip prints whatever `-q` says.
fn said_quiet_or_not(sb: &Sandbox, args: &[&str], code: i32, message: &str) {
    for quiet in [&[][..], &["-q"]] {
        let args = [&["compress"][..], quiet, args].concat();
        let run = sb.run(&args);
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn a_file_whose_size_changed_while_read_is_said_to_have_changed() {
    // /proc files are regular files of size 0 that hold data: as a file that grew while it was
    // compressed. gzip says so whatever -q says, and exits 0.
    let sb = Sandbox::new();
    sb.write("plain", b"data");
    said_quiet_or_not(
        &sb,
        &["-c", "/proc/self/status"],
        0,
        "/proc/self/status: file size changed while zipping",
    );
    let run = sb.run(&["compress", "-c", "plain"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

#[test]
fn special_files_are_read_only_into_streams_and_never_removed() {
    let sb = Sandbox::new();
    // A copy of /dev/null inside the sandbox (root only): removing it harms nothing.
    let made = Command::new("mknod")
        .arg(sb.path("nul"))
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        assert!(!zipwire_testkit::is_ci(), "mknod needs root under CI=true");
        eprintln!("note: mknod failed (not root?): test skipped");
        return;
    }
    // Not even -f replaces a device: gzip refuses it with a warning.
    let run = sb.run(&["compress", "-f", "nul"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("nul is not a directory or a regular file - ignored"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.names(), ["nul"]);
    // Into a stream it is read like any file (as `gzip -c <(...)`), and -t takes it.
    let run = sb.run(&["compress", "-c", "nul"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(gunzip_with("gzip", &run.stdout), b"");
    sb.write("empty.gz", &run.stdout);
    symlink("empty.gz", sb.path("link.gz")).unwrap();
    // -t and -l write no file beside the input: they follow links, as gzip does.
    for mode in ["-t", "-l"] {
        let run = sb.run(&["decompress", mode, "link.gz"]);
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
    }
    assert!(fs::symlink_metadata(sb.path("nul"))
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn output_into_devices_fifos_and_links_writes_through_them() {
    let sb = Sandbox::new();
    let data = text(10_000, 9);
    sb.write("in", &data);
    // A device is written into, as `> /dev/null` would, even with -f: never replaced.
    let made = Command::new("mknod")
        .arg(sb.path("nul"))
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|status| status.success());
    if made {
        for args in [
            &["compress", "-o", "nul", "in"][..],
            &["compress", "-f", "-o", "nul", "in"],
        ] {
            let run = sb.run(args);
            assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
            let kind = fs::symlink_metadata(sb.path("nul")).unwrap().file_type();
            assert!(kind.is_char_device(), "{args:?}: {kind:?}");
        }
        fs::remove_file(sb.path("nul")).unwrap();
    } else {
        assert!(!zipwire_testkit::is_ci(), "mknod needs root under CI=true");
        eprintln!("note: mknod failed (not root?): the device case skipped");
    }
    // A FIFO: its reader gets the stream, and the FIFO stays.
    let fifo = sb.path("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = std::thread::spawn(move || fs::read(fifo).unwrap());
    let run = sb.run(&["compress", "-f", "-o", "fifo", "in"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(gunzip_with("gzip", &reader.join().unwrap()), data);
    assert!(fs::symlink_metadata(sb.path("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    // A link to a file: with -f the file is replaced and the link kept, as `> link` would.
    sb.write("real", b"old");
    symlink("real", sb.path("link")).unwrap();
    let run = sb.run(&["compress", "-o", "link", "in"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(sb.read("real"), b"old");
    let run = sb.run(&["compress", "-f", "-o", "link", "in"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(fs::symlink_metadata(sb.path("link")).unwrap().is_symlink());
    assert_eq!(gunzip_with("gzip", &sb.read("real")), data);
    // The input itself is never its own output, not even with -f.
    let run = sb.run(&["compress", "-f", "-o", "in", "in"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("the output would replace the input"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.read("in"), data);
    // A tree into one output would keep only its last file.
    fs::create_dir(sb.path("tree")).unwrap();
    sb.write("tree/a", b"one");
    sb.write("tree/b", b"two");
    let run = sb.run(&["compress", "-r", "-f", "-o", "all.gz", "tree"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!sb.exists("all.gz"));
    // From standard input the output gets a redirection's mode (0666 less the umask), not
    // the temporary file's 0600.
    let run = sb.run_with_input(&["compress", "-o", "piped.gz"], &data);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mode = fs::metadata(sb.path("piped.gz"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o666 & !umask(), "{mode:o}");
}

/// This process's umask, from `/proc/self/status`.
fn umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .unwrap();
    u32::from_str_radix(line.trim(), 8).unwrap()
}

#[test]
fn recursive_suffix_list_and_test() {
    let sb = Sandbox::new();
    fs::create_dir_all(sb.path("tree/sub")).unwrap();
    sb.write("tree/a.txt", &text(5_000, 8));
    sb.write("tree/sub/b.txt", &text(7_000, 9));
    assert_eq!(sb.run(&["compress", "-r", "-S", ".zw", "tree"]).code, 0);
    assert!(sb.exists("tree/a.txt.zw") && sb.exists("tree/sub/b.txt.zw"));
    assert!(!sb.exists("tree/a.txt"));

    let run = sb.run(&[
        "decompress",
        "-l",
        "-S",
        ".zw",
        "tree/a.txt.zw",
        "tree/sub/b.txt.zw",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listing = String::from_utf8(run.stdout).unwrap();
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 4, "{listing}");
    assert!(lines[0].contains("compressed") && lines[0].contains("uncompressed_name"));
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[1], "5000", "{listing}");
    assert_eq!(row[3], "tree/a.txt");
    assert!(lines[3].ends_with("(totals)") && lines[3].contains("12000"));

    assert_eq!(
        sb.run(&["decompress", "-t", "-r", "-S", ".zw", "tree"])
            .code,
        0
    );
    assert_eq!(sb.run(&["decompress", "-r", "-S", ".zw", "tree"]).code, 0);
    assert!(sb.read("tree/sub/b.txt") == text(7_000, 9));
}

#[test]
fn terminals_get_no_compressed_data_and_large_inputs_get_a_progress_bar() {
    let sb = Sandbox::new();
    sb.write("t", &text(1_000, 10));
    // `script` gives the command a terminal as stdout and stderr.
    let refused = sb.run_program(
        "script",
        &["-qec", &format!("{BIN} compress < t"), "/dev/null"],
        None,
    );
    assert_eq!(refused.code, 1);
    let shown = String::from_utf8_lossy(&refused.stdout);
    assert!(
        shown.contains("compressed data not written to a terminal"),
        "{shown}"
    );
    let refused = sb.run_program(
        "script",
        &["-qec", &format!("{BIN} compress -c t"), "/dev/null"],
        None,
    );
    assert_eq!(refused.code, 1);
    let shown = String::from_utf8_lossy(&refused.stdout);
    assert!(
        shown.contains("not written to a terminal") && !shown.contains('\u{1f}'),
        "{shown}"
    );

    sb.write("big", &text(24 << 20, 11));
    let bar = sb.run_program(
        "script",
        &[
            "-qec",
            &format!("{BIN} compress -1 -p 1 -c big > big.gz"),
            "/dev/null",
        ],
        None,
    );
    assert_eq!(bar.code, 0);
    let shown = String::from_utf8_lossy(&bar.stdout);
    assert!(shown.contains("ratio") && shown.contains("ETA"), "{shown}");
    let quiet = sb.run_program(
        "script",
        &[
            "-qec",
            &format!("{BIN} compress -q -1 -p 1 -c big > big.gz"),
            "/dev/null",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&quiet.stdout), "");
    // Not a terminal: nothing on stderr.
    assert_eq!(sb.run(&["compress", "-1", "-c", "big"]).stderr, "");
}

#[test]
fn every_corpus_file_round_trips_through_the_files() {
    let sb = Sandbox::new();
    let mut count = 0;
    for subdir in zipwire_testkit::corpus_subdirs() {
        for file in corpus_files(&subdir) {
            let data = fs::read(&file).unwrap();
            let name = format!("{subdir}-{}", file.file_name().unwrap().to_string_lossy());
            sb.write(&name, &data);
            let gz = format!("{name}.gz");
            // -f: some corpus files are already .gz files themselves.
            assert_eq!(sb.run(&["compress", "-1", "-f", &name]).code, 0, "{name}");
            assert_eq!(sb.run(&["decompress", &gz]).code, 0, "{name}");
            assert!(sb.read(&name) == data, "{name}");
            fs::remove_file(sb.path(&name)).unwrap();
            count += 1;
        }
    }
    assert!(count > 0 || !zipwire_testkit::is_ci());
    assert!(sb.names().is_empty(), "{:?}", sb.names());
}
