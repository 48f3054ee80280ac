//! The process's own memory, for the dashboards' memory charts.

/// The process's resident set size in bytes (`VmRSS` in Linux's `/proc/self/status`), or
/// `None` where that file does not exist or cannot be read.
pub fn process_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_kibibytes() {
        let status = "Name:\tzipwire\nVmPeak:\t  10 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(2 << 20));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }
}
