//! A direction waiting for its application's next bytes gives back the zstd context it holds
//! beyond its share of the memory cap.
//!
//! A direction past its share learns it when it next compresses (the cap refuses it, and it
//! steps down and frees the larger context). One that has gone quiet never does: a
//! connection that climbed to zstd-19 alone and then idled held 94 MB for as long as it
//! stayed open, and connections that came later compressed at lower levels than their share
//! allowed. Now a waiting direction checks every [`IDLE_RELEASE`] and, once the directions
//! compressing have made its share smaller than what it holds, ends its zstd frame and frees
//! the context. It costs the window: the next zstd block starts a frame from nothing.

use std::time::Duration;

use super::Local;
use crate::blocks::BlockEncoder;
use crate::memory::Hold;

/// How often a waiting direction that holds a zstd context checks its share.
pub(super) const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// Waits until the forwarded connection has bytes to read or has ended, giving back
/// `encoder`'s zstd context meanwhile if `memory` finds it beyond its share at one of the
/// checks `every` so often. Returns at once when no zstd context is held.
///
/// # Errors
///
/// The connection's error (a reset): the peek that saw it took it from the socket, whose
/// next read would find a clean end. Or zstd failing to end the frame, after which the
/// direction cannot go on either.
pub(super) async fn wait_for_data(
    local: &Local,
    encoder: &mut BlockEncoder,
    memory: &mut Hold,
    every: Duration,
) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    while encoder.holds_zstd() {
        tokio::select! {
            // Not `readable()`, which may wake without data; a peek takes nothing away.
            peeked = local.0.peek(&mut byte) => return peeked.map(drop),
            () = tokio::time::sleep(every) => {
                if memory.beyond_share() {
                    encoder.release_zstd()?;
                    memory.settle(encoder.memory_size());
                    tracing::debug!(held = memory.bytes(), "idle: zstd context given back");
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::frame::{Codec, Method};
    use crate::memory::MemoryCap;

    const MB: u64 = 1 << 20;

    #[tokio::test]
    async fn an_idle_direction_gives_back_what_it_holds_beyond_its_share() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut app = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let local = Local(Arc::new(listener.accept().await.unwrap().0));

        let cap = MemoryCap::new(Some(64 * MB));
        let (mut encoder, mut memory) = (BlockEncoder::new(), cap.hold());
        let zstd12 = Method::new(Codec::Zstd, 12).unwrap();
        assert!(memory.admit(encoder.memory_with(zstd12)));
        let block = b"an idle direction, a zstd context, a share; ".repeat(3000);
        encoder
            .encode_frame(zstd12, &block, &mut Vec::new())
            .unwrap();
        memory.settle(encoder.memory_size());
        let every = Duration::from_millis(20);

        // Alone, its share is the cap: it keeps its context however long it waits.
        let waited = tokio::time::timeout(
            Duration::from_millis(200),
            wait_for_data(&local, &mut encoder, &mut memory, every),
        )
        .await;
        assert!(waited.is_err(), "no data came, yet it returned");
        assert!(encoder.holds_zstd());

        // Data that comes ends the wait, context kept.
        app.write_all(b"x").await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            wait_for_data(&local, &mut encoder, &mut memory, Duration::from_secs(60)),
        )
        .await
        .expect("data came")
        .unwrap();
        assert!(encoder.holds_zstd());
        let mut byte = [0u8; 1];
        local.read(&mut byte).await.unwrap();

        // A second direction compressing cuts the share to 32 MiB, and zstd-12 holds 47 MB:
        // the idle one gives it back, and the cap has the room again.
        let mut other = cap.hold();
        assert!(other.admit(MB));
        tokio::time::timeout(
            Duration::from_secs(5),
            wait_for_data(&local, &mut encoder, &mut memory, every),
        )
        .await
        .expect("it gives back and returns")
        .unwrap();
        assert!(!encoder.holds_zstd());
        assert!(memory.bytes() < MB, "{memory:?}");
        assert!(cap.in_use() < 2 * MB, "{cap:?}");
    }

    #[tokio::test]
    async fn a_reset_seen_while_waiting_is_an_error_not_an_end() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let app = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let local = Local(Arc::new(listener.accept().await.unwrap().0));
        let mut encoder = BlockEncoder::new();
        let zstd1 = Method::new(Codec::Zstd, 1).unwrap();
        encoder
            .encode_frame(zstd1, b"abc", &mut Vec::new())
            .unwrap();
        let mut memory = MemoryCap::new(None).hold();
        socket2::SockRef::from(&app)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(app);
        let waited = tokio::time::timeout(
            Duration::from_secs(5),
            wait_for_data(&local, &mut encoder, &mut memory, Duration::from_secs(60)),
        )
        .await
        .expect("the reset ends the wait");
        assert_eq!(
            waited.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionReset)
        );
    }
}
