//! A file swapped for a symbolic link while zipwire looks at it: what is read is what was
//! checked, never another file the link leads to (a root job over a directory that others
//! may write to would otherwise copy a private file into a readable `.gz`).

use std::fs;
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sandbox::{gunzip_with, Sandbox};

#[test]
fn a_file_swapped_for_a_link_is_never_read_through_it() {
    let sb = Sandbox::new();
    sb.write("secret", b"TOPSECRET");
    fs::create_dir(sb.path("d")).unwrap();
    let (dir, secret) = (sb.path("d"), sb.path("secret"));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // `d/f` flips between a plain file and a link to the secret, each put in place
            // by an atomic rename.
            while !stop.load(Ordering::Relaxed) {
                fs::write(dir.join(".plain"), b"public").unwrap();
                fs::rename(dir.join(".plain"), dir.join("f")).unwrap();
                let _ = fs::remove_file(dir.join(".link"));
                symlink(&secret, dir.join(".link")).unwrap();
                fs::rename(dir.join(".link"), dir.join("f")).unwrap();
            }
        })
    };
    let (mut outputs, mut runs) = (0, 0);
    let started = Instant::now();
    // Unguarded, about one run in 80 leaks the secret; 600 runs miss that with
    // probability 0.05%. All 600 must run: fewer in the time allowed fails the test rather
    // than weakening it (20 runs would miss a leak three times in four).
    while runs < 600 && started.elapsed() < Duration::from_secs(180) {
        runs += 1;
        sb.run(&["compress", "-q", "d/f"]);
        if let Ok(wire) = fs::read(sb.path("d/f.gz")) {
            outputs += 1;
            let plain = gunzip_with("gzip", &wire);
            assert_eq!(plain, b"public", "run {runs} compressed another file");
            fs::remove_file(sb.path("d/f.gz")).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(runs, 600, "only {runs} runs in {:?}", started.elapsed());
    assert!(outputs > 0, "{runs} runs made no output at all");
    assert_eq!(sb.read("secret"), b"TOPSECRET");
}
