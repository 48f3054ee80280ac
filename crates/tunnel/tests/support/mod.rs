//! What the tunnel's integration tests share: keys, endpoints on loopback, an echo target, and
//! test data. Each test binary uses some of it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zipwire_tunnel::endpoint::Client;
use zipwire_tunnel::policy::Choice;
use zipwire_tunnel::relay::Shared;
use zipwire_tunnel::stats::Stats;
use zipwire_tunnel::tls::{self, Fingerprint};

/// Bytes in a block, as the endpoints of these tests cut them.
pub const BLOCK: usize = 128 * 1024;

pub struct Keys {
    _dir: tempfile::TempDir,
    pub server: Arc<rustls::ServerConfig>,
    pub pin: Fingerprint,
    pub token: Vec<u8>,
}

pub fn keys() -> Keys {
    let dir = tempfile::tempdir().unwrap();
    let pin = zipwire_tunnel::keygen::keygen(dir.path(), false).unwrap();
    let server =
        tls::server_config(&dir.path().join("cert.pem"), &dir.path().join("key.pem")).unwrap();
    let token = zipwire_tunnel::keygen::read_token(&dir.path().join("token"), false).unwrap();
    Keys {
        _dir: dir,
        server,
        pin,
        token,
    }
}

pub fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

pub async fn start_client(
    keys: &Keys,
    server: SocketAddr,
    shared: Shared,
) -> (SocketAddr, Arc<Stats>) {
    let client = Client::bind(
        local(),
        server.to_string(),
        tls::client_config(keys.pin).unwrap(),
        keys.token.clone(),
        shared,
    )
    .await
    .unwrap();
    let addr = client.local_addr().unwrap();
    let stats = client.stats();
    tokio::spawn(client.run());
    (addr, stats)
}

/// An echo target; returns its address.
pub async fn echo_target() -> SocketAddr {
    let listener = TcpListener::bind(local()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

pub fn shared(choice: Choice) -> Shared {
    Shared::new(choice, BLOCK, None)
}

/// Sends `data` and reads as much back.
pub async fn round_trip(stream: &mut TcpStream, data: &[u8]) {
    let (mut r, mut w) = stream.split();
    let mut back = vec![0u8; data.len()];
    let exchange = async {
        let (sent, read) = tokio::join!(w.write_all(data), r.read_exact(&mut back));
        sent.unwrap();
        read.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .expect("no echo within 30 s");
    assert!(back == data);
}

pub fn xorshift(seed: u32) -> impl FnMut() -> u32 {
    let mut state = seed.max(1);
    move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    }
}

/// Uniformly random bytes: what compressed or encrypted data looks like.
pub fn noise(n: usize, seed: u32) -> Vec<u8> {
    let mut rng = xorshift(seed);
    (0..n).map(|_| (rng() >> 11) as u8).collect()
}
