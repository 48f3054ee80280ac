//! The CPU time of the calling thread, so that compression is counted (in the stats and
//! against a CPU budget) as the CPU it used, not the wall time it spent queued for a thread
//! or preempted by other work. The proxy times its encoder calls with [`thread_cpu`], the
//! tunnel its blocks with [`Work`].
//!
//! One `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` through rustix: a fraction of a microsecond
//! (the vDSO), beside compression calls of tens of microseconds.

use std::time::Duration;

/// The CPU time the calling thread has run. Wall time would also count the time the thread
/// waited for a core (other processes, other threads): on a busy host a budget would throttle
/// compression for CPU it did not use.
pub fn thread_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// A measurement of the calling thread's work; read it on the same thread.
#[derive(Debug)]
pub struct Work {
    cpu: Duration,
}

impl Work {
    /// Starts measuring.
    pub fn start() -> Work {
        Work { cpu: thread_cpu() }
    }

    /// CPU time this thread spent since [`Work::start`].
    pub fn done(self) -> Duration {
        thread_cpu().saturating_sub(self.cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The thread's CPU time by another clock: user and system time in clock ticks from
    /// `/proc/thread-self/stat`, `None` where it cannot be read.
    fn ticks() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let rest = &stat[stat.rfind(')')? + 2..];
        let mut fields = rest.split(' ').skip(11);
        let user: u64 = fields.next()?.parse().ok()?;
        let system: u64 = fields.next()?.parse().ok()?;
        Some(user + system)
    }

    #[test]
    fn sleeping_costs_no_cpu_and_spinning_does() {
        let work = Work::start();
        std::thread::sleep(Duration::from_millis(100));
        assert!(work.done() < Duration::from_millis(50));
        // Spin until the other clock has seen 3 ticks (at least 20 ms at 100 Hz) of this
        // thread's CPU, however long a loaded machine takes to give it that much (spinning
        // for a wall time instead, a starved thread gets less than asked of it).
        let Some(from) = ticks() else {
            return;
        };
        let work = Work::start();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut x = 0u64;
        while ticks().unwrap_or(u64::MAX) - from < 3 && Instant::now() < deadline {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let spent = work.done();
        assert!(spent >= Duration::from_millis(15), "{spent:?}");
    }
}
