//! What the kernel knows about the tunnel's TCP connection (Linux `TCP_INFO`): how many bytes
//! the peer has acknowledged, how many written bytes are still waiting to go out, and how many
//! are on their way (sent, not yet acknowledged).
//!
//! The policy needs this because nothing in user space can tell a slow link from a fast one
//! while socket buffers, the congestion window and the bottleneck's queue are still taking
//! bytes: the acknowledgements can. (The kernel's own delivery-rate sample is not used: it
//! keeps an old, faster app-limited sample for as long as newer ones are app-limited too,
//! which a receive-window-limited connection showed for seconds.) No maintained crate exposes `TCP_INFO`
//! (socket2 does not), so this module makes the one `getsockopt` call itself. It is the only
//! `unsafe` in the crate. Elsewhere than Linux, or on anything that is not a TCP socket,
//! [`LinkProbe::read`] answers `None` and the policy falls back to watching its own queue.

use std::os::fd::{AsFd, OwnedFd};

/// What one `TCP_INFO` read says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Bytes written to the socket that TCP has not sent yet.
    pub notsent: u32,
    /// Bytes the peer has acknowledged so far.
    pub bytes_acked: u64,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// The retransmission timeout before any backoff (`tcpi_rto` halved `tcpi_backoff`
    /// times): how long TCP itself waits for an acknowledgement before it sends again, on a
    /// path that has lost nothing since.
    pub rto: std::time::Duration,
    /// Bytes sent and not yet acknowledged (unacknowledged segments times the sender's MSS):
    /// what sits in the bottleneck's queue and on the wire.
    pub in_flight: u64,
    /// The smallest round-trip time seen on the connection (`tcpi_min_rtt`; zero before the
    /// first sample).
    pub min_rtt: std::time::Duration,
}

/// A handle on a TCP socket to read [`TcpInfo`] from, for as long as the probe lives.
#[derive(Debug)]
pub struct LinkProbe {
    fd: OwnedFd,
}

impl LinkProbe {
    /// A probe of `socket` (it holds a duplicate of the descriptor); `None` if it cannot be
    /// duplicated.
    pub fn new(socket: &impl AsFd) -> Option<LinkProbe> {
        let fd = socket.as_fd().try_clone_to_owned().ok()?;
        Some(LinkProbe { fd })
    }

    /// Another probe of the same socket (a second duplicate of the descriptor).
    pub fn try_clone(&self) -> Option<LinkProbe> {
        let fd = self.fd.try_clone().ok()?;
        Some(LinkProbe { fd })
    }

    /// Reads the socket's state now; `None` where the kernel does not say (not Linux, not a
    /// TCP socket, or a kernel too old to report delivery rates).
    pub fn read(&self) -> Option<TcpInfo> {
        sys::read(&self.fd)
    }
}

/// Byte offsets in Linux's `struct tcp_info` (include/uapi/linux/tcp.h); a test checks them
/// against the libc crate's definition.
mod layout {
    /// `tcpi_backoff`, u8: timeouts since the last acknowledgement (the RTO's doublings).
    pub const BACKOFF: usize = 4;
    /// `tcpi_rto`, u32 microseconds: the retransmission timeout now, backed off.
    pub const RTO: usize = 8;
    /// `tcpi_snd_mss`, u32.
    pub const SND_MSS: usize = 16;
    /// `tcpi_unacked`, u32: segments sent and not acknowledged.
    pub const UNACKED: usize = 24;
    /// `tcpi_bytes_acked`, u64 (Linux 4.1).
    pub const BYTES_ACKED: usize = 120;
    /// `tcpi_notsent_bytes`, u32 (Linux 4.6).
    pub const NOTSENT: usize = 144;
    /// `tcpi_min_rtt`, u32 microseconds (Linux 4.6).
    pub const MIN_RTT: usize = 148;
    /// Bytes up to the end of the last field read.
    pub const NEEDED: usize = MIN_RTT + 4;
}

/// Decodes the fields the policy uses from the raw bytes the kernel filled in.
fn parse(raw: &[u8]) -> Option<TcpInfo> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(raw.get(at..at + 4)?.try_into().ok()?))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(raw.get(at..at + 8)?.try_into().ok()?))
    };
    Some(TcpInfo {
        notsent: u32_at(layout::NOTSENT)?,
        bytes_acked: u64_at(layout::BYTES_ACKED)?,
        unacked: u32_at(layout::UNACKED)?,
        rto: std::time::Duration::from_micros(u64::from(
            u32_at(layout::RTO)? >> raw.get(layout::BACKOFF)?.min(&31),
        )),
        in_flight: u64::from(u32_at(layout::UNACKED)?) * u64::from(u32_at(layout::SND_MSS)?),
        // Before its first sample the kernel reports `u32::MAX` (no minimum yet).
        min_rtt: match u32_at(layout::MIN_RTT)? {
            u32::MAX => std::time::Duration::ZERO,
            us => std::time::Duration::from_micros(u64::from(us)),
        },
    })
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod sys {
    use std::os::fd::{AsRawFd, OwnedFd};

    use super::{layout, parse, TcpInfo};

    pub fn read(fd: &OwnedFd) -> Option<TcpInfo> {
        // Room for the whole struct of any kernel we know of; the kernel fills in at most
        // `len` bytes and says how many it wrote.
        let mut raw = [0u8; 512];
        let mut len = raw.len() as libc::socklen_t;
        // SAFETY: `raw` is a live, writable buffer of `len` bytes for the whole call, `len`
        // points to a live socklen_t holding that size, and the kernel writes at most `len`
        // bytes into `raw` (it truncates the struct to fit). The descriptor is owned by the
        // probe and open; should it not be a TCP socket the call fails and nothing is written.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                raw.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let len = usize::try_from(len).ok()?;
        if rc != 0 || len < layout::NEEDED {
            return None;
        }
        parse(&raw[..len.min(raw.len())])
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::os::fd::OwnedFd;

    use super::TcpInfo;

    pub fn read(_fd: &OwnedFd) -> Option<TcpInfo> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn offsets_match_the_libc_definition() {
        use std::mem::offset_of;
        assert_eq!(
            offset_of!(libc::tcp_info, tcpi_bytes_acked),
            layout::BYTES_ACKED
        );
        assert_eq!(
            offset_of!(libc::tcp_info, tcpi_notsent_bytes),
            layout::NOTSENT
        );
        assert_eq!(offset_of!(libc::tcp_info, tcpi_backoff), layout::BACKOFF);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_rto), layout::RTO);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_snd_mss), layout::SND_MSS);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_unacked), layout::UNACKED);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_min_rtt), layout::MIN_RTT);
    }

    #[test]
    fn short_or_empty_answers_parse_to_nothing() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0; layout::NEEDED - 1]), None);
        let mut raw = [0u8; layout::NEEDED];
        raw[layout::NOTSENT..layout::NOTSENT + 4].copy_from_slice(&1234u32.to_ne_bytes());
        raw[layout::UNACKED..layout::UNACKED + 4].copy_from_slice(&3u32.to_ne_bytes());
        raw[layout::SND_MSS..layout::SND_MSS + 4].copy_from_slice(&1448u32.to_ne_bytes());
        raw[layout::MIN_RTT..].copy_from_slice(&250u32.to_ne_bytes());
        // Backed off twice from 300 ms.
        raw[layout::RTO..layout::RTO + 4].copy_from_slice(&1_200_000u32.to_ne_bytes());
        raw[layout::BACKOFF] = 2;
        let info = parse(&raw).unwrap();
        assert_eq!(info.notsent, 1234);
        assert_eq!(info.unacked, 3);
        assert_eq!(info.rto, std::time::Duration::from_millis(300));
        assert_eq!(info.in_flight, 3 * 1448);
        assert_eq!(info.min_rtt, std::time::Duration::from_micros(250));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_loopback_transfer_shows_acknowledged_bytes_and_a_rate() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        let probe = LinkProbe::new(&sender).unwrap();
        let data = vec![7u8; 1 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            receiver.read_to_end(&mut got).map(|_| got.len())
        });
        sender.write_all(&data).unwrap();
        sender.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), data.len());
        let info = probe.read().expect("Linux reports TCP_INFO");
        assert!(info.bytes_acked >= data.len() as u64, "{info:?}");
        assert_eq!(info.notsent, 0, "{info:?}");
        assert_eq!(info.in_flight, 0, "{info:?}");
        assert!(info.min_rtt > std::time::Duration::ZERO, "{info:?}");
    }

    #[test]
    fn something_that_is_not_a_socket_reports_nothing() {
        let file = tempfile::tempfile().unwrap();
        assert_eq!(LinkProbe::new(&file).unwrap().read(), None);
    }
}
