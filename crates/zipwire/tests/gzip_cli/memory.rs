//! Peak memory of long runs: compression holds a bounded amount whatever the input's length.

use zipwire_testkit::require_tool;

use crate::sandbox::{Sandbox, BIN};

/// Peak RSS, in KiB, of `zipwire compress ARGS` fed `mib` MiB through a pipe: python3 writes
/// `chunk` (a Python expression for 1 MiB or so of bytes) over and over and reports the
/// child's peak. `None` where python3 is missing (outside CI).
fn peak_rss_on_a_pipe(args: &[&str], chunk: &str, mib: u64) -> Option<u64> {
    let argv: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "import os, resource, subprocess\n\
         p = subprocess.Popen(['{BIN}', 'compress', {}], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)\n\
         chunk = {chunk}\n\
         sent = 0\n\
         while sent < {mib} << 20:\n    p.stdin.write(chunk); sent += len(chunk)\n\
         p.stdin.close(); assert p.wait() == 0\n\
         print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n",
        argv.join(", ")
    );
    if !require_tool("python3") {
        return None;
    }
    let sb = Sandbox::new();
    let run = sb.run_program("python3", &["-c", &script], None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    Some(String::from_utf8_lossy(&run.stdout).trim().parse().unwrap())
}

#[test]
fn memory_stays_bounded_on_a_long_pipe() {
    // 256 MB through a pipe.
    let chunk = "bytes(range(256)) * 4096 + b'zipwire ' * 100000";
    let Some(peak_kib) = peak_rss_on_a_pipe(&["-1", "-p", "2"], chunk, 256) else {
        return;
    };
    // README and docs/design/cli.md promise about 14 MB (13.6 MiB measured): the bound leaves
    // room for allocator noise, not for a buffer that grows with the input (a 64 MB read-ahead
    // would already pass 64 MiB).
    assert!(peak_kib < 20 * 1024, "peak RSS {peak_kib} KiB");
}

#[test]
fn memory_stays_bounded_at_the_default_level() {
    // Levels 4-9 go through zlib-rs, one output buffer per block. Bytes that do not compress
    // make each block's output as large as its input, so an output buffer kept after its
    // block is written shows at once: keeping them all once held 108 MB for 100 MB of input.
    for threads in ["1", "2"] {
        let Some(peak_kib) = peak_rss_on_a_pipe(&["-p", threads], "os.urandom(1 << 20)", 64) else {
            return;
        };
        // docs/design/cli.md: 20.6 MB at -6 -p2 (each thread's zlib-rs stream and its blocks).
        assert!(peak_kib < 32 * 1024, "-p{threads}: peak RSS {peak_kib} KiB");
    }
}
