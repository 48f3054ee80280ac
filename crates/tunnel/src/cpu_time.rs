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

    #[test]
    fn sleeping_costs_no_cpu_and_spinning_does() {
        let work = Work::start();
        std::thread::sleep(Duration::from_millis(100));
        assert!(work.done() < Duration::from_millis(50));
        let work = Work::start();
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(work.done() > Duration::from_millis(5));
    }
}
