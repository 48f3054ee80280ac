use super::*;

const TEXT: &[u8] = b"<li><a href=\"/docs/index.html\">Documentation</a></li>\n";

fn full(link_idle: bool) -> Signals {
    Signals {
        full: true,
        link_idle,
        cpu_throttled: false,
        link: None,
    }
}

/// Feeds `blocks` full blocks through `policy` with `signals`, each compressed in
/// `worked` to `ratio` when compressed; returns how many went raw for an idle link.
fn run(
    policy: &mut Policy,
    blocks: u32,
    signals: Signals,
    (waited, worked): (Duration, Duration),
    ratio: f64,
) -> usize {
    let block = TEXT.repeat(2400);
    let mut mixed = 0;
    for _ in 0..blocks {
        let decision = policy.decide(&block, signals);
        mixed += usize::from(decision == Decision::Raw(RawReason::LinkIdle));
        let compressed = matches!(decision, Decision::Compress(_))
            .then_some((block.len(), (block.len() as f64 / ratio) as usize));
        policy.full_block_sent(Sent {
            signals,
            waited,
            worked: if compressed.is_some() {
                worked
            } else {
                Duration::ZERO
            },
            compressed,
        });
    }
    mixed
}

fn us(waited: u64, worked: u64) -> (Duration, Duration) {
    (Duration::from_micros(waited), Duration::from_micros(worked))
}

#[test]
fn without_the_kernel_a_busy_queue_climbs_and_an_idle_one_steps_down() {
    let mut policy = Policy::new(Choice::Auto, true);
    let start = policy.method();
    // Idle at the start does not count.
    let idle = full(true);
    assert_eq!(run(&mut policy, WARMUP_BLOCKS, idle, us(0, 1000), 4.0), 0);
    assert_eq!(policy.method(), start);
    let busy = full(false);
    assert_eq!(
        run(&mut policy, EVAL_BLOCKS * 3, busy, us(30_000, 1000), 4.0),
        0
    );
    let climbed = policy.method();
    assert!(climbed > start, "{climbed} after {start}");
    let mixed = run(&mut policy, EVAL_BLOCKS * 8, idle, us(0, 1000), 4.0);
    // Down to the fastest rung, and raw blocks mixed in there.
    assert_eq!(policy.method(), ladder(true)[0]);
    assert!(mixed > 0);
}

/// A link the tests drive: `rate` bytes/s, with `notsent` bytes left in the kernel after
/// each block (0: the link idles between blocks).
struct Sim {
    rate: f64,
    notsent: u32,
    /// Bytes sent and unacknowledged after each block, and the path's round trip.
    in_flight: u64,
    min_rtt: Duration,
    at: Duration,
    acked: u64,
}

impl Sim {
    fn new(rate: f64, notsent: u32) -> Sim {
        Sim {
            rate,
            notsent,
            in_flight: 0,
            min_rtt: Duration::ZERO,
            at: Duration::ZERO,
            acked: 0,
        }
    }

    fn signals(&self) -> Signals {
        Signals {
            link: Some(Link {
                notsent: self.notsent,
                bytes_acked: self.acked,
                in_flight: self.in_flight,
                min_rtt: self.min_rtt,
                at: self.at,
            }),
            ..full(true)
        }
    }

    /// On this link, now limiting us at 10 Mbit/s with bytes waiting in the kernel: within
    /// three evaluations the policy measures it limiting, and then sends no raw block.
    fn limits_and_compression_comes_back(&mut self, policy: &mut Policy) {
        self.run(policy, EVAL_BLOCKS * 3, 500, 4.0);
        assert!(
            matches!(policy.measured_pace(), Some(Pace::Limited(rate)) if rate < 2e6),
            "{:?}",
            policy.measured_pace()
        );
        assert_eq!(self.run(policy, EVAL_BLOCKS * 2, 500, 4.0), 0);
    }

    /// Runs `blocks` full blocks: each is compressed in `worked` to `ratio`, or sent raw,
    /// and the link carries it at its rate. Returns how many went raw for an idle link.
    fn run(&mut self, policy: &mut Policy, blocks: u32, worked: u64, ratio: f64) -> usize {
        let block = TEXT.repeat(2400);
        let mut mixed = 0;
        for _ in 0..blocks {
            let signals = self.signals();
            let decision = policy.decide(&block, signals);
            mixed += usize::from(decision == Decision::Raw(RawReason::LinkIdle));
            let wire = match decision {
                Decision::Compress(_) => (block.len() as f64 / ratio) as usize,
                Decision::Raw(_) => block.len(),
            };
            let compressed = matches!(decision, Decision::Compress(_));
            let worked = Duration::from_micros(if compressed { worked } else { 0 });
            self.at += worked.max(Duration::from_secs_f64(wire as f64 / self.rate));
            self.acked += wire as u64;
            policy.full_block_sent(Sent {
                signals,
                waited: Duration::ZERO,
                worked,
                compressed: compressed.then_some((block.len(), wire)),
            });
        }
        mixed
    }
}

#[test]
fn a_slow_link_gets_the_best_ratio_that_keeps_it_busy_and_no_raw_block() {
    // 10 Mbit/s, link-bound; 130 KB of text compressed in 0.5 ms at ratio 11. Even with
    // our queue empty, no raw block: the compressor keeps up.
    let mut policy = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(1.25e6, 16 * 1024);
    assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 8, 500, 11.0), 0);
    let level = policy.method();
    assert_eq!(level.codec, Codec::Zstd);
    assert!(level.level >= 9, "{level}");
    // A compressor twenty times slower climbs no higher than it can keep the link busy.
    let mut policy = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(1.25e6, 16 * 1024);
    assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 8, 10_000, 11.0), 0);
    assert!(policy.method() < level, "{}", policy.method());
}

#[test]
fn an_idle_fast_link_gets_raw_blocks_but_only_once_it_has_shown_its_pace() {
    let mut policy = Policy::new(Choice::Auto, true);
    // 300 MB/s, nothing left unsent after each block; the compressor makes 260 MB/s of
    // input into 65 MB/s of output.
    let mut link = Sim::new(3e8, 0);
    // Until WARMUP_ACKED bytes are acknowledged, no raw block however idle the link.
    while link.acked < WARMUP_ACKED {
        assert_eq!(link.run(&mut policy, 1, 500, 4.0), 0);
    }
    // Then raw blocks go in and the ladder steps down to its fastest rung.
    assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
    assert_eq!(policy.method(), ladder(true)[0]);
    // Bytes still unsent in the kernel: the link is busy, compress.
    link.notsent = 64 * 1024;
    assert_eq!(link.run(&mut policy, EVAL_BLOCKS, 500, 4.0), 0);
}

#[test]
fn a_queue_at_the_bottleneck_gets_no_raw_block_however_empty_the_socket() {
    // 300 MB/s; the compressor turns a 130 KB block into 32 KB in 0.5 ms. Nothing is
    // unsent in the kernel, but 1 MB sent waits in the bottleneck's queue (3.3 ms of the
    // link): a raw block would displace four compressed ones, and the link does not run
    // dry while the next block is compressed.
    let mut policy = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(3e8, 0);
    link.in_flight = 1 << 20;
    assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0), 0);
    // The same bytes in flight on a 20 ms path are merely travelling (at the 65 MB/s the
    // link has shown, 1.3 MB fit in one round trip): the bottleneck is empty, and raw
    // blocks go in.
    link.min_rtt = Duration::from_millis(20);
    assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
    // Less queued than the link drains while a block is compressed: raw blocks too.
    link.min_rtt = Duration::ZERO;
    link.in_flight = 16 * 1024;
    assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
}

#[test]
fn an_empty_queue_gets_no_raw_block_before_the_link_has_shown_its_pace() {
    // A 100 Mbit/s link behind a qdisc that takes the first bytes at once: nothing is
    // unsent in the kernel and the writer's queue is empty, yet the link is the
    // bottleneck. Until an evaluation has measured how fast the link carries bytes, an
    // empty queue is no reason to send a raw block (docs/design/tunnel.md).
    let mut policy = Policy::new(Choice::Auto, true);
    let block = TEXT.repeat(2400);
    let signals = Signals {
        link: Some(Link {
            bytes_acked: WARMUP_ACKED,
            at: Duration::from_millis(5),
            ..Link::default()
        }),
        ..full(true)
    };
    policy.full_block_sent(Sent {
        signals,
        waited: Duration::ZERO,
        worked: Duration::from_micros(900),
        compressed: Some((block.len(), block.len() / 4)),
    });
    assert_eq!(
        policy.decide(&block, signals),
        Decision::Compress(policy.method())
    );
}

#[test]
fn a_recalled_fast_pace_sends_raw_at_once_and_a_slow_link_overrules_it() {
    // An earlier connection saw 2 GB/s: once one block has measured the compressor, full
    // blocks go raw, with nothing acknowledged yet.
    let mut policy = Policy::new(Choice::Auto, true);
    policy.recall_pace(Pace::AtLeast(2e9));
    let mut link = Sim::new(2e9, 0);
    let blocks = EVAL_BLOCKS * 2;
    assert_eq!(link.run(&mut policy, blocks, 500, 4.0), blocks as usize - 1);
    // Without the memory, the same link gets compressed blocks first.
    let mut fresh = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(2e9, 0);
    assert_eq!(link.run(&mut fresh, blocks, 500, 4.0), 0);
    // The same memory on a path now at 10 Mbit/s: the raw blocks back up in the kernel,
    // an evaluation measures the link limiting far below, and compression comes back.
    let mut policy = Policy::new(Choice::Auto, true);
    policy.recall_pace(Pace::AtLeast(2e9));
    let mut link = Sim::new(1.25e6, 64 * 1024);
    link.limits_and_compression_comes_back(&mut policy);
}

#[test]
fn a_recalled_slow_limit_climbs_before_the_link_is_measured_again() {
    // 10 Mbit/s, text at ratio 11: blocks put 12 KB each on the wire, far from the
    // 128 KB this connection needs acknowledged to measure the link itself.
    let run = |recalled: Option<Pace>, blocks: u32| {
        let mut policy = Policy::new(Choice::Auto, true);
        if let Some(pace) = recalled {
            policy.recall_pace(pace);
        }
        let start = policy.method();
        let mut link = Sim::new(1.25e6, 16 * 1024);
        assert_eq!(link.run(&mut policy, blocks, 500, 11.0), 0);
        (start, policy.method())
    };
    let (start, fresh) = run(None, EVAL_BLOCKS);
    assert_eq!(fresh, start, "nothing known: no climb yet");
    // An earlier connection saw the link limit it at 10 Mbit/s: the first block measures
    // the compressor, and the ladder climbs at once.
    let (_, first) = run(Some(Pace::Limited(1.25e6)), 1);
    assert!(first.level > start.level, "{start} -> {first}");
    // ... and on at the first evaluation in which the link limits.
    let (_, later) = run(Some(Pace::Limited(1.25e6)), EVAL_BLOCKS);
    assert!(later.level > first.level, "{first} -> {later}");
    // A rate the link merely carried says nothing about a limit: no climb.
    let (_, carried) = run(Some(Pace::AtLeast(1.25e6)), EVAL_BLOCKS);
    assert_eq!(carried, start);
}

#[test]
fn before_the_link_has_shown_a_pace_frames_waiting_for_it_climb_the_ladder() {
    // The kernel reports, but nothing is acknowledged yet: the writer's queue decides.
    // Frames wait 8 ms each for a block compressed in 0.5 ms.
    let mut policy = Policy::new(Choice::Auto, true);
    let start = policy.method();
    let signals = Signals {
        link: Some(Link::default()),
        ..full(false)
    };
    let wait = (Duration::from_millis(8), Duration::from_micros(500));
    run(&mut policy, EVAL_BLOCKS, signals, wait, 11.0);
    // The waiting pays for two rungs' extra work (zstd-3 to zstd-9: 4.3× the time).
    assert_eq!((start, policy.method()), (ladder(true)[1], ladder(true)[3]));
    // Waiting that pays for one rung only climbs one.
    let mut policy = Policy::new(Choice::Auto, true);
    let wait = (Duration::from_micros(1400), Duration::from_micros(500));
    run(&mut policy, EVAL_BLOCKS, signals, wait, 11.0);
    assert_eq!(policy.method(), ladder(true)[2]);
    // Frames that do not wait leave the ladder where it is.
    let mut policy = Policy::new(Choice::Auto, true);
    run(
        &mut policy,
        EVAL_BLOCKS * 4,
        signals,
        (Duration::ZERO, wait.1),
        11.0,
    );
    assert_eq!(policy.method(), start);
}

#[test]
fn a_link_that_slows_down_after_a_fast_phase_gets_compression_back() {
    // 2 GB/s carried without a backlog, then 10 Mbit/s that limits us: the pace carried in
    // the fast phase must not outlive it, or every block after the fast phase would go raw at
    // the slow link's rate.
    let mut policy = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(2e9, 0);
    let blocks = EVAL_BLOCKS * 4;
    assert!(link.run(&mut policy, blocks, 500, 4.0) > 0);
    link.rate = 1.25e6;
    link.notsent = 64 * 1024;
    link.limits_and_compression_comes_back(&mut policy);
}

#[test]
fn a_link_far_faster_than_the_compressor_gets_only_raw_blocks() {
    // 2 GB/s; the fastest rung compresses about 400 MB/s (260 MB/s measured at zstd-3).
    let mut policy = Policy::new(Choice::Auto, true);
    let mut link = Sim::new(2e9, 0);
    link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0);
    // Even with bytes waiting in the kernel (the link never idles), full blocks go raw.
    link.notsent = 64 * 1024;
    let blocks = EVAL_BLOCKS * 4;
    assert_eq!(link.run(&mut policy, blocks, 500, 4.0), blocks as usize);
}

#[test]
fn failures_back_off_exponentially_but_probing_goes_on() {
    let block = TEXT.repeat(100);
    let mut policy = Policy::new(Choice::Auto, false);
    let mut tried = 0;
    for _ in 0..1000 {
        match policy.decide(&block, Signals::default()) {
            Decision::Compress(_) => {
                tried += 1;
                assert!(!policy.compressed(1000, 999));
            }
            Decision::Raw(reason) => assert_eq!(reason, RawReason::Backoff),
        }
    }
    // 2, 4, ... 64 blocks skipped after each failure: about 1000 / 65 tries, never zero.
    assert!((15..=25).contains(&tried), "{tried} tries");
    assert!(policy.compressed(1000, 500));
    assert!(matches!(
        policy.decide(&block, Signals::default()),
        Decision::Raw(_)
    ));
}

#[test]
fn fixed_choices_ignore_the_signals_and_auto_skips_noise() {
    let padded = |head: &[u8]| {
        let mut block = head.to_vec();
        block.resize(TINY_BLOCK * 4, 0);
        block
    };
    let m = Method::new(Codec::Deflate, 1).unwrap();
    let mut fixed = Policy::new(Choice::Fixed(m), true);
    assert_eq!(
        fixed.decide(&padded(&[0x1f, 0x8b, 8]), full(true)),
        Decision::Compress(m)
    );
    let mut off = Policy::new(Choice::Fixed(Method::RAW), true);
    assert_eq!(
        off.decide(TEXT, full(false)),
        Decision::Raw(RawReason::Fixed)
    );
    let mut auto = Policy::new(Choice::Auto, true);
    assert_eq!(
        auto.decide(&padded(&[0x16, 3, 1, 0, 200]), full(false)),
        Decision::Raw(RawReason::Magic)
    );
    let throttled = Signals {
        cpu_throttled: true,
        ..full(false)
    };
    assert_eq!(
        auto.decide(&TEXT.repeat(20), throttled),
        Decision::Raw(RawReason::CpuCap)
    );
    // A fixed level keeps to the cap too: `--level zstd:19 --max-cpu 5` must not use 87% of
    // a core.
    let mut fixed = Policy::new(Choice::Fixed(Method::new(Codec::Zstd, 19).unwrap()), true);
    assert_eq!(
        fixed.decide(&TEXT.repeat(20), throttled),
        Decision::Raw(RawReason::CpuCap)
    );
}

#[test]
fn tiny_blocks_go_raw_untried_whatever_the_choice() {
    let tiny = TEXT.repeat(TINY_BLOCK / TEXT.len());
    assert!(tiny.len() < TINY_BLOCK);
    let keystroke = Signals::default();
    for choice in [
        Choice::Auto,
        Choice::Fixed(Method::new(Codec::Zstd, 3).unwrap()),
        Choice::Fixed(Method::new(Codec::Deflate, 1).unwrap()),
    ] {
        let mut policy = Policy::new(choice.clone(), true);
        assert_eq!(
            policy.decide(&tiny, keystroke),
            Decision::Raw(RawReason::Tiny),
            "{choice:?}"
        );
        let larger = TEXT.repeat(TINY_BLOCK / TEXT.len() + 1);
        assert!(matches!(
            policy.decide(&larger, keystroke),
            Decision::Compress(_)
        ));
    }
}

/// Runs `blocks` full blocks of one connection over `link` as the relay does, the pace
/// handed on through `memory` from the connections before; returns the highest method used
/// and how many blocks went raw for an idle or too fast link.
fn connection(
    memory: &mut crate::pace_memory::PaceMemory,
    link: &mut Sim,
    blocks: u32,
    (worked, ratio): (u64, f64),
) -> (Method, usize) {
    let now = std::time::Instant::now();
    let mut policy = Policy::new(Choice::Auto, true);
    if let Some(pace) = memory.recall(now) {
        policy.recall_pace(pace);
    }
    let (mut highest, mut raw) = (policy.method(), 0);
    for _ in 0..blocks {
        raw += link.run(&mut policy, 1, worked, ratio);
        highest = highest.max(policy.method());
        if let Some(pace) = policy.measured_pace() {
            memory.remember(pace, now);
        }
    }
    (highest, raw)
}

#[test]
fn the_level_goes_up_on_a_slow_link_and_down_to_raw_on_a_fast_one() {
    // The scenario of a 24 MB transfer of text (192 blocks of 128 KB), on synthetic links
    // and a synthetic compressor (a block in 0.5 ms at ratio 6, 260 MB/s of input), so that
    // it tests the policy, not the speed of the machine that runs it.
    let compressor = (500, 6.0);
    let blocks = 192;
    // 2 MB/s, the kernel always holding bytes back: the link limits, and the ladder climbs
    // past the first rungs with no raw block.
    let mut memory = crate::pace_memory::PaceMemory::default();
    let mut slow = Sim::new(2e6, 64 * 1024);
    let (highest, raw) = connection(&mut memory, &mut slow, blocks, compressor);
    assert!(
        highest >= Method::new(Codec::Zstd, 6).unwrap(),
        "highest {highest} on a slow link"
    );
    assert_eq!(raw, 0, "raw blocks on a slow link");
    // 2 GB/s, the socket empty after each block: a link far faster than the compressor.
    // The first connection learns it and sends most blocks raw; the second (over a TCP
    // connection of its own) starts from the pace the endpoint remembers, and sends every
    // block raw but the first, which measures the compressor.
    let mut memory = crate::pace_memory::PaceMemory::default();
    let fast = || Sim::new(2e9, 0);
    let (_, first) = connection(&mut memory, &mut fast(), blocks, compressor);
    assert!(
        first * 2 > blocks as usize,
        "{first} of {blocks} blocks raw on a fast link"
    );
    let (_, second) = connection(&mut memory, &mut fast(), blocks, compressor);
    assert_eq!(second, blocks as usize - 1, "with the pace remembered");
}

#[test]
fn short_memory_steps_down_and_holds_the_ladder_there_for_a_while() {
    let mut policy = Policy::new(Choice::Auto, true);
    let busy = full(false);
    // A queue that waits long climbs well above the start.
    run(&mut policy, EVAL_BLOCKS * 6, busy, us(900_000, 1000), 4.0);
    let climbed = policy.ladder.iter().position(|m| *m == policy.method());
    let climbed = climbed.expect("on the ladder");
    assert!(climbed >= 3, "{}", policy.method());
    // Refused: one rung down per refusal, and no lower than the first rung.
    let lower = policy.memory_short().expect("a rung below");
    assert_eq!(lower, policy.ladder[climbed - 1]);
    assert_eq!(policy.method(), lower);
    // The same busy queue does not climb back while the ceiling holds...
    run(
        &mut policy,
        EVAL_BLOCKS * MEMORY_CEILING_EVALS,
        busy,
        us(900_000, 1000),
        4.0,
    );
    assert_eq!(policy.method(), lower);
    // ...and does once it lifts.
    run(&mut policy, EVAL_BLOCKS * 2, busy, us(900_000, 1000), 4.0);
    assert!(policy.method() > lower, "{}", policy.method());
    while policy.memory_short().is_some() {}
    assert_eq!(policy.method(), ladder(true)[0]);
    // A fixed level has nothing lower to go to: its blocks go raw.
    let fixed = Method::new(Codec::Zstd, 19).unwrap();
    assert_eq!(Policy::new(Choice::Fixed(fixed), true).memory_short(), None);
}
