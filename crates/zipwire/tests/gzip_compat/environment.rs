//! The `GZIP` variable and shortened long options, a file system that refuses `chmod`, and
//! standard output closed under the program, under both implementations.

use super::{common_files, same_as_gzip, Compare};
use zipwire_testkit::require_tool;

#[test]
fn the_gzip_variable_and_shortened_options_are_taken_as_gzip_takes_them() {
    // GZIP's options go before the command line's; only levels, names, -q, -v and
    // --rsyncable are taken, with gzip's deprecation warning unless the variable makes the
    // program quiet. The level it sets shows in the size: the same as the flag's, and not
    // the default's.
    let same_size = |env: &str, with_env: &str, flags: &str| {
        format!("[ $(GZIP='{env}' gzip {with_env} -c t | wc -c) -eq $(gzip {flags} -c t | wc -c) ]")
    };
    let taken = format!(
        "{} && {} && ! {} && echo taken",
        same_size("-9", "", "-9"),
        same_size("-9", "", "-9 -q"),
        same_size("-9", "", "-6")
    );
    // Both sides of each script end in an `echo`, so that a script failing under both
    // implementations alike cannot pass for one they agree on.
    let command_line_wins = format!(
        "{} && ! {} && echo the command line wins",
        same_size("-9 -q", "-1", "-1"),
        same_size("-9 -q", "-1", "-9")
    );
    same_as_gzip(
        &common_files,
        &[
            &taken,
            &command_line_wins,
            "GZIP=-1 gzip -c t | gzip -d | cmp - t",
            "GZIP=-q gzip -c t | gzip -d | cmp - t",
            "GZIP='-1 -q' gzip in && ls",
            "GZIP=-v gzip -c t > /dev/null",
            "GZIP=-v gzip -q -c t > /dev/null",
            "GZIP='-q -v' gzip -c t > /dev/null",
            "GZIP=' ' gzip -c t | gzip -d | cmp - t",
            "GZIP='--fast --no-name --rsync --sil' gzip -c t | gzip -d | cmp - t",
            "GZIP=-k gzip in; ls",
            "GZIP=--stdout gzip in",
            "GZIP='-S .x' gzip in",
            "GZIP=--to gzip in",
            "GZIP=foo gzip in",
            "GZIP='-5 foo' gzip in",
            "GZIP='foo -k' gzip in",
            "GZIP=-x gzip in",
            "GZIP=--bogus gzip in",
            "GZIP=-- gzip in",
        ],
        b"",
        Compare::Compressing,
    );
    // Long options shortened to a prefix that names one; -a taken and ignored, as on Unix.
    same_as_gzip(
        &common_files,
        &[
            "gzip --stdo t | gzip --decomp --stdo | cmp - t",
            "gzip --fa --no-n --k --verb t && gzip --te --verb t.gz",
            "gzip -a -c t | gzip -d | cmp - t",
            "gzip --asc -c t > /dev/null",
            "gzip -qa -c t > /dev/null",
            "gzip --silent -c t > /dev/null",
        ],
        b"",
        Compare::Compressing,
    );
}

#[test]
fn a_file_system_that_refuses_chmod_keeps_the_output_with_gzips_warning() {
    // gzip's copy_stat warns (status 2) and keeps the output, and the input goes. zipwire does
    // the same: failing the file (status 1) and writing nothing would leave no way to
    // compress onto such a file system (FUSE mounts, vfat).
    if !require_tool("bindfs") || !require_tool("fusermount") || !fuse_mounts() {
        return;
    }
    let mounted = |work: &str| {
        format!(
            "mkdir s m && bindfs --chmod-deny s m && cp t m/ && {work}; \
             fusermount -u m 2> /dev/null || umount m"
        )
    };
    same_as_gzip(
        &common_files,
        &[
            &mounted("gzip m/t; echo rc=$?; ls m; gzip -dc m/t.gz | cmp - t && echo same"),
            // (A copy, not the file just compressed: FUSE caches a link count of 2 on a new
            // name for a second, and gzip -d refuses a file with links.)
            &mounted("cp g.gz m/ && gzip -d m/g.gz; echo rc=$?; ls m; cat m/g"),
            &mounted("gzip -q -k m/t; echo rc=$?; ls m"),
        ],
        b"",
        Compare::Compressing,
    );
}

/// Whether bindfs can mount here (FUSE in the kernel, `/dev/fuse`): the test's scripts would
/// otherwise fail alike under both implementations and agree. Under `CI=true` a machine
/// that cannot fails the test.
fn fuse_mounts() -> bool {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (source, mount) = (dir.path().join("s"), dir.path().join("m"));
    std::fs::create_dir(&source).expect("mkdir");
    std::fs::create_dir(&mount).expect("mkdir");
    let mounted = std::process::Command::new("bindfs")
        .arg(&source)
        .arg(&mount)
        .status()
        .is_ok_and(|status| status.success());
    if mounted {
        let _ = std::process::Command::new("fusermount")
            .arg("-u")
            .arg(&mount)
            .status();
        return true;
    }
    assert!(
        !zipwire_testkit::is_ci(),
        "bindfs cannot mount here: CI=true, so this fails instead of skipping"
    );
    eprintln!("note: bindfs cannot mount here; skipping (this would fail under CI=true)");
    false
}

#[test]
fn standard_output_closed_under_it_exits_as_gzip_does() {
    // gzip is ended by SIGPIPE, which a shell reports as 141, and so is zipwire, not exiting
    // with 1. Megabytes of output (random bytes to compress: 5 MB of `y` compress to less
    // than a pipe holds), of which `head` takes one byte.
    same_as_gzip(
        &common_files,
        &["yes | head -c 5000000 > big && gzip -k big && \
             (gzip -dc big.gz; echo decompressing: $? >&2) | head -c 1; \
             head -c 3000000 /dev/urandom > noise && \
             (gzip -c noise; echo compressing: $? >&2) | head -c 1 > /dev/null; rm noise"],
        b"",
        Compare::Compressing,
    );
}
