//! Unit tests of `keepalive.rs`.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn phases() -> Phases {
    Phases::new(&Timeouts {
        header_read: Duration::from_secs(1),
        idle: Duration::from_secs(5),
        send: Duration::from_secs(3),
        ..Timeouts::default()
    })
}

#[tokio::test(start_paused = true)]
async fn a_head_has_header_read_and_a_gap_has_idle() {
    let (client, server) = tokio::io::duplex(64);
    let phases = phases();
    let mut stream = TimedStream::new(server, phases.clone());
    let mut buf = [0u8; 8];
    // Nothing from a new connection: header_read.
    let started = Instant::now();
    let error = stream.read(&mut buf).await.expect_err("timed out");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    // Served, then idle: the gap may last `idle`, not `header_read`.
    drop(phases.serve());
    let mut client = client;
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(4)).await;
        client.write_all(b"G").await.expect("write");
        client
    });
    assert_eq!(stream.read(&mut buf).await.expect("a byte"), 1);
    // The head has begun: header_read again.
    let started = Instant::now();
    let error = stream.read(&mut buf).await.expect_err("timed out");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    drop(writer.await.expect("writer"));
}

#[tokio::test(start_paused = true)]
async fn multiplexed_the_connection_is_idle_only_when_no_stream_is_open() {
    let (mut client, server) = tokio::io::duplex(64);
    let phases = phases();
    phases.multiplex();
    let mut stream = TimedStream::new(server, phases.clone());
    let first = phases.serve();
    let second = phases.serve();
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 8];
        // Frames between requests (a PING's acknowledgement, say) do not start a head.
        while stream.read(&mut buf).await.map_err(|e| e.kind())? > 0 {}
        Ok::<_, io::ErrorKind>(Instant::now())
    });
    let told = {
        let phases = phases.clone();
        tokio::spawn(async move {
            phases.idle_expired().await;
            Instant::now()
        })
    };
    tokio::time::sleep(Duration::from_secs(30)).await;
    // One stream ends, the other is still open: no deadline yet.
    drop(first);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!reader.is_finished() && !told.is_finished());
    let ended = Instant::now();
    drop(second);
    tokio::time::sleep(Duration::from_secs(3)).await;
    client.write_all(b"ping ack").await.expect("write");
    // Idle (5 s) from the end of the last stream, not header_read (1 s) from the read:
    // the connection is told to close (GOAWAY), and cut header_read later.
    assert_eq!(told.await.expect("told") - ended, Duration::from_secs(5));
    let failed = reader.await.expect("reader");
    assert_eq!(failed, Err(io::ErrorKind::TimedOut));
    assert_eq!(Instant::now() - ended, Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn a_write_the_client_takes_nothing_of_fails_after_send() {
    let (client, server) = tokio::io::duplex(64);
    let phases = phases();
    let _served = phases.serve();
    let mut stream = TimedStream::new(server, phases);
    let started = Instant::now();
    let error = stream
        .write_all(&[b'x'; 1024])
        .await
        .expect_err("timed out");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    // Counted from the first write that waited (the first 64 bytes went at once).
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    drop(client);
}

#[tokio::test(start_paused = true)]
async fn a_slow_reader_is_never_cut() {
    let (mut client, server) = tokio::io::duplex(64);
    let phases = phases();
    let mut stream = TimedStream::new(server, phases);
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        loop {
            // Less than `send` between reads, far more in all.
            tokio::time::sleep(Duration::from_secs(2)).await;
            match client.read(&mut buf).await.expect("read") {
                0 => return got,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    let started = Instant::now();
    stream.write_all(&[b'x'; 1024]).await.expect("all taken");
    stream.shutdown().await.expect("shutdown");
    assert!(started.elapsed() > Duration::from_secs(100));
    assert_eq!(reader.await.expect("reader").len(), 1024);
}

#[tokio::test(start_paused = true)]
async fn a_request_being_served_has_no_read_deadline() {
    let (mut client, server) = tokio::io::duplex(64);
    let phases = phases();
    let mut stream = TimedStream::new(server, phases.clone());
    let served = phases.serve();
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 8];
        let read = stream.read(&mut buf).await;
        (read.map_err(|e| e.kind()), Instant::now())
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    // The response ends: the idle deadline starts now.
    let ended = Instant::now();
    drop(served);
    let (read, at) = reader.await.expect("reader");
    assert_eq!(read, Err(io::ErrorKind::TimedOut));
    assert_eq!(at - ended, Duration::from_secs(5));
    client.shutdown().await.expect("shutdown");
}
