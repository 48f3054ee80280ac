//! Unit tests of [`GatherGate`] with the bodies that share it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use zipwire_codec::{Encoder, Format, Level, Limits};

use super::*;
use crate::encode::body::{BodyMeter, CompressBody, FlushPolicy};
use crate::test_bodies::{channel, text, Announced, ChannelBody, Item};

const K: usize = 1024;

/// A body compressing `inner` within `gate`, with 32 KiB calls and a 20 ms flush delay.
fn gated<B: Body>(inner: B, gate: &GatherGate) -> Pin<Box<CompressBody<B>>> {
    let encoder = Encoder::new(Format::Gzip, Level::FASTEST).expect("level 1");
    let policy = FlushPolicy {
        coalesce: 32 * K,
        delay: Duration::from_millis(20),
    };
    let meter = Arc::new(BodyMeter::default());
    Box::pin(CompressBody::new(inner, encoder, policy, meter).with_gather_gate(gate.clone()))
}

/// An announced body of `len` bytes and its feed.
fn announced(len: usize) -> (mpsc::Sender<Item>, Announced) {
    let (tx, inner) = channel();
    (tx, Announced::new(inner, len as u64))
}

fn poll<B>(body: &mut Pin<Box<CompressBody<B>>>) -> Poll<Option<Bytes>>
where
    B: Body<Data = Bytes, Error = std::io::Error> + Unpin,
{
    let mut cx = Context::from_waker(Waker::noop());
    body.as_mut()
        .poll_frame(&mut cx)
        .map(|frame| frame.map(|f| f.expect("no error").into_data().expect("data")))
}

async fn send(tx: &mpsc::Sender<Item>, data: &[u8]) {
    tx.send(Ok(Frame::data(Bytes::copy_from_slice(data))))
        .await
        .expect("open");
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    zipwire_codec::decompress(Format::Gzip, data, Limits::default()).expect("valid gzip")
}

#[tokio::test]
async fn a_body_that_finds_the_budget_spent_waits_with_its_input_unread() {
    let gate = GatherGate::new(40 * K as u64);
    let page = text(64 * K);
    let (tx_a, a) = announced(page.len());
    let (tx_b, b) = announced(page.len());
    let mut a = gated(a, &gate);
    let mut b = gated(b, &gate);
    // A takes its first 32 KiB call and gathers part of it.
    send(&tx_a, &page[..10 * K]).await;
    assert!(poll(&mut a).is_pending());
    assert_eq!(gate.available(), 8 * K as u64);
    // B's input is there, but the budget has no room for its call: it stays in the channel.
    send(&tx_b, &page[..10 * K]).await;
    assert!(poll(&mut b).is_pending());
    assert_eq!(
        tx_b.capacity(),
        tx_b.max_capacity() - 1,
        "B read its input while waiting"
    );
    assert_eq!(b.pending.capacity(), 0, "B holds a buffer while waiting");
    // A's call fills and is compressed: its share comes back, and B goes on.
    send(&tx_a, &page[10 * K..32 * K]).await;
    let first = match poll(&mut a) {
        Poll::Ready(Some(data)) => data,
        other => panic!("A's first call: {other:?}"),
    };
    assert!(poll(&mut b).is_pending());
    assert_eq!(
        tx_b.capacity(),
        tx_b.max_capacity(),
        "B did not read after the share came back"
    );
    // Both finish, taking turns, and decode to the page.
    send(&tx_a, &page[32 * K..]).await;
    send(&tx_b, &page[10 * K..]).await;
    drop((tx_a, tx_b));
    let (rest_a, wire_b) = tokio::join!(a.collect(), b.collect());
    let mut wire_a = first.to_vec();
    wire_a.extend_from_slice(&rest_a.expect("A").to_bytes());
    let wire_b = wire_b.expect("B").to_bytes();
    assert_eq!(gunzip(&wire_a), page);
    assert_eq!(gunzip(&wire_b), page);
    assert_eq!(
        gate.available(),
        gate.capacity(),
        "a share was not given back"
    );
}

#[tokio::test]
async fn a_share_that_cannot_grow_compresses_what_it_gathered() {
    // Unknown length: the share grows with each frame read.
    let gate = GatherGate::new(24 * K as u64);
    let (tx_a, a) = channel();
    let (tx_b, b) = announced(14 * K);
    let mut a = gated(a, &gate);
    let mut b = gated(b, &gate);
    let data = text(20 * K);
    send(&tx_a, &data[..10 * K]).await;
    assert!(poll(&mut a).is_pending());
    send(&tx_b, &text(4 * K)).await;
    assert!(poll(&mut b).is_pending());
    assert_eq!(gate.available(), 0);
    // A's next frame needs 10 KiB more than its share, and B holds the rest of the budget:
    // the 10 KiB gathered go out as a call now.
    send(&tx_a, &data[10 * K..]).await;
    let cut = match poll(&mut a) {
        Poll::Ready(Some(data)) => data,
        other => panic!("A was not cut: {other:?}"),
    };
    let mut inflate = zipwire_codec::Decoder::new(Format::Gzip);
    let mut plain = Vec::new();
    inflate.decode_to_vec(&cut, &mut plain).expect("decodes");
    assert_eq!(
        plain,
        &data[..10 * K],
        "the cut call is not what was gathered"
    );
    drop(tx_a);
    let rest = a.collect().await.expect("A").to_bytes();
    let mut wire = cut.to_vec();
    wire.extend_from_slice(&rest);
    assert_eq!(gunzip(&wire), data);
    drop((b, tx_b));
    assert_eq!(gate.available(), gate.capacity());
}

#[tokio::test(start_paused = true)]
async fn a_stalled_upstream_gives_its_share_back() {
    let gate = GatherGate::new(32 * K as u64);
    let page = text(64 * K);
    let (tx_a, a) = announced(page.len());
    let (tx_b, b) = announced(K);
    let mut a = Box::pin(a_and_then(gated(a, &gate)));
    let mut b = gated(b, &gate);
    send(&tx_a, &page[..K]).await;
    // A holds its share with 1 KiB gathered; its upstream goes silent.
    let stalled = tokio::time::timeout(STALL / 2, a.as_mut()).await;
    assert!(stalled.is_err(), "A flushed before the stall time");
    send(&tx_b, &text(K)).await;
    drop(tx_b);
    assert!(
        poll(&mut b).is_pending(),
        "B went on with the budget held by A"
    );
    // After STALL, A compresses what it has and lets the share go: B runs.
    let first = tokio::time::timeout(STALL, a.as_mut())
        .await
        .expect("A gave up its share after the stall time");
    assert_eq!(gunzip_partial(&first), &page[..K]);
    let wire_b = tokio::time::timeout(Duration::from_secs(1), b.collect())
        .await
        .expect("B ran once the share came back")
        .expect("B")
        .to_bytes();
    assert_eq!(gunzip(&wire_b), text(K));
    drop(tx_a);
}

/// The first frame of `body`, as a future.
async fn a_and_then<B>(mut body: Pin<Box<CompressBody<B>>>) -> Bytes
where
    B: Body<Data = Bytes, Error = std::io::Error> + Unpin,
{
    body.frame()
        .await
        .expect("a frame")
        .expect("no error")
        .into_data()
        .expect("data")
}

fn gunzip_partial(data: &[u8]) -> Vec<u8> {
    let mut inflate = zipwire_codec::Decoder::new(Format::Gzip);
    let mut plain = Vec::new();
    inflate.decode_to_vec(data, &mut plain).expect("decodes");
    plain
}

#[test]
fn a_share_never_asks_for_more_than_the_whole_budget() {
    let gate = GatherGate::new(8 * K as u64);
    let mut share = Share::new(gate.clone());
    let mut cx = Context::from_waker(Waker::noop());
    assert_eq!(share.reserve(1 << 20, &mut cx), Reserve::Ready);
    assert_eq!(share.held(), 8 * K);
    share.release();
    assert_eq!(gate.available(), gate.capacity());
}

#[test]
fn a_dropped_body_gives_its_share_back() {
    let gate = GatherGate::new(64 * K as u64);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (tx, inner): (_, ChannelBody) = channel();
        let mut body = gated(Announced::new(inner, 40_000), &gate);
        send(&tx, &text(1000)).await;
        assert!(poll(&mut body).is_pending());
        assert!(gate.available() < gate.capacity());
        drop(body);
        assert_eq!(gate.available(), gate.capacity());
    });
}
