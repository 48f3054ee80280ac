//! The CPU time of the calling thread, so that compression is counted (in the stats and
//! against `--max-cpu`) as the CPU it used, not the wall time it spent queued for a thread of
//! the blocking pool or preempted by other work.

use std::time::{Duration, Instant};

/// A measurement of the calling thread's work; read it on the same thread.
pub(crate) struct Work {
    cpu: Option<Duration>,
    wall: Instant,
}

impl Work {
    /// Starts measuring.
    pub(crate) fn start() -> Work {
        Work {
            cpu: thread_cpu(),
            wall: Instant::now(),
        }
    }

    /// CPU time this thread spent since [`Work::start`], or the wall time where the clock
    /// is not available.
    pub(crate) fn done(self) -> Duration {
        match (self.cpu, thread_cpu()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => self.wall.elapsed(),
        }
    }
}

/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
#[allow(unsafe_code)]
fn thread_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, which only
    // writes to it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's CPU time by another clock, `getrusage(RUSAGE_THREAD)`.
    #[allow(unsafe_code)]
    fn rusage_cpu() -> Duration {
        // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is valid and writable for the call, which only writes to it.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        assert_eq!(rc, 0, "getrusage");
        let micros = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.unsigned_abs())
                + Duration::from_micros(t.tv_usec.unsigned_abs())
        };
        micros(usage.ru_utime) + micros(usage.ru_stime)
    }

    #[test]
    fn sleeping_costs_no_cpu_and_spinning_does() {
        let work = Work::start();
        std::thread::sleep(Duration::from_millis(100));
        assert!(work.done() < Duration::from_millis(50));
        // Spin until the other clock has seen 20 ms of this thread's CPU, however long a
        // loaded machine takes to give it that much (spinning for a wall time instead, a
        // starved thread got less than the 5 ms asked of it).
        let work = Work::start();
        let (from, deadline) = (rusage_cpu(), Instant::now() + Duration::from_secs(10));
        let mut x = 0u64;
        while rusage_cpu() - from < Duration::from_millis(20) && Instant::now() < deadline {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let spent = work.done();
        assert!(spent >= Duration::from_millis(15), "{spent:?}");
    }
}
