//! Standard streams as other programs leave them: a non-blocking stdin, a closed stderr, a
//! read error in the middle of `-c`; and which operands `-d`, `-t` and `-l` skip.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};

use crate::sandbox::{text, Sandbox, BIN};

#[test]
fn a_non_blocking_stdin_is_read_to_its_end() {
    // node and some terminals leave their end of a pipe O_NONBLOCK, which the child shares:
    // the first empty read must not fail ("Resource temporarily unavailable") and cut the
    // output. gzip makes the descriptor blocking and reads again.
    for mode in [&["compress", "-c"][..], &["decompress", "-c"]] {
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        let fd = reader.as_fd();
        fcntl_setfl(fd, fcntl_getfl(fd).expect("flags") | OFlags::NONBLOCK).expect("set");
        let child = Command::new(BIN)
            .args(mode)
            .stdin(reader)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let data = text(200_000, 9);
        let sent = if mode[0] == "compress" {
            data.clone()
        } else {
            let sb = Sandbox::new();
            sb.write("d", &data);
            sb.run(&["compress", "-k", "d"]);
            sb.read("d.gz")
        };
        let (first, rest) = sent.split_at(sent.len() / 3);
        writer.write_all(first).expect("write");
        std::thread::sleep(Duration::from_millis(300));
        writer.write_all(rest).expect("write");
        drop(writer);
        let output = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{mode:?}: {stderr}");
        let out = if mode[0] == "compress" {
            let mut decoded = Vec::new();
            flate2::read::GzDecoder::new(&output.stdout[..])
                .read_to_end(&mut decoded)
                .expect("a whole gzip stream");
            decoded
        } else {
            output.stdout
        };
        assert!(
            out == data,
            "{mode:?}: {} of {} bytes",
            out.len(),
            data.len()
        );
    }
}

#[test]
fn a_closed_stderr_loses_no_output_and_is_no_panic() {
    // A message to a closed stderr must not panic: that would exit 101 after the output was
    // written and before the input was removed.
    let sb = Sandbox::new();
    let data = text(50_000, 3);
    sb.write("v", &data);
    assert_eq!(sb.run(&["compress", "v"]).code, 0);
    let mut wire = sb.read("v.gz");
    wire.extend_from_slice(b"garbage");
    sb.write("v.gz", &wire);
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(BIN)
        .args(["decompress", "-v", "v.gz"])
        .current_dir(sb.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .expect("run");
    // The warning (trailing garbage) could not be said, but it is still a warning.
    assert_eq!(status.code(), Some(2));
    assert_eq!(sb.names(), ["v"]);
    assert!(sb.read("v") == data);
}

#[test]
fn a_read_error_in_the_middle_of_c_ends_the_stream_there() {
    // The run must not go on after the failed member and append the next file's, which no
    // decoder could reach past the broken one.
    let sb = Sandbox::new();
    sb.write("a", &text(10_000, 1));
    sb.write("b", b"the file after the failure\n");
    let run = sb.run(&["compress", "-c", "a", "/proc/self/mem", "b"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("/proc/self/mem"), "{}", run.stderr);
    let mut decoded = Vec::new();
    let mut decoder = flate2::read::MultiGzDecoder::new(&run.stdout[..]);
    let outcome = decoder.read_to_end(&mut decoded);
    assert!(outcome.is_err(), "the cut member must not look complete");
    let alone = sb.run(&["compress", "-c", "b"]).stdout;
    assert!(
        !run.stdout.ends_with(&alone),
        "b's member was written after the failure"
    );
}

#[test]
fn files_without_a_compressed_suffix_are_skipped_as_gzip_skips_them() {
    // gzip's make_ofname: said with a warning when verbose, or neither recursive nor quiet;
    // silent otherwise. -t and -l try any file named, except under -r.
    let sb = Sandbox::new();
    sb.write("p", b"plain\n");
    std::fs::create_dir(sb.path("tree")).expect("dir");
    std::fs::write(sb.path("tree/q"), b"plain\n").expect("write");
    let cases: [(&[&str], i32, &str); 7] = [
        (&["decompress", "p"], 2, "p: unknown suffix -- ignored"),
        (&["decompress", "-q", "p"], 0, ""),
        (&["decompress", "-r", "p"], 0, ""),
        (&["decompress", "-r", "tree"], 0, ""),
        (
            &["decompress", "-rv", "tree"],
            2,
            "tree/q: unknown suffix -- ignored",
        ),
        (&["decompress", "-tr", "p"], 0, ""),
        (&["decompress", "-t", "p"], 1, "p: not in gzip format"),
    ];
    for (args, code, said) in cases {
        let run = sb.run(args);
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        assert_eq!(
            run.stderr.is_empty(),
            said.is_empty(),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    }
    assert_eq!(sb.names(), ["p", "tree"]);
}
