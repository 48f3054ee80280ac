//! The flags a response body raises for the client connection it is written on: more of the
//! response follows at once (the connection's stream then sends with `MSG_MORE`, see
//! `connection/cork.rs`), or the response was cut short (the connection is reset, never ended
//! with a FIN). The connection reads them; the exchange raises them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The flags a response body raises for its client connection's corked stream: while more of it
/// follows at once, and when it was cut short.
#[derive(Clone, Debug, Default)]
pub(crate) struct MoreToCome(Arc<Flags>);

#[derive(Debug, Default)]
struct Flags {
    more: AtomicBool,
    cut: AtomicBool,
    /// The server's: raised when its shutdown grace expires.
    abandoned: Abandoned,
}

/// Raised once for a whole server, when its shutdown grace expires: every connection still
/// open then is reset as it closes. Each has a response under way (hyper closes idle ones
/// at once when shutdown begins), and a FIN would pass its cut body off as whole to an
/// HTTP/1.0 client, as [`MoreToCome::cut_short`] says.
#[derive(Clone, Debug, Default)]
pub(crate) struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    /// Every connection of the server is reset when it closes from now on.
    pub(crate) fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl MoreToCome {
    /// The flags of one connection of the server that raises `abandoned` when its grace
    /// expires.
    pub(crate) fn under(abandoned: &Abandoned) -> MoreToCome {
        MoreToCome(Arc::new(Flags {
            abandoned: abandoned.clone(),
            ..Flags::default()
        }))
    }

    /// Says whether the next writes are followed at once by more of the same response.
    pub(crate) fn set(&self, more: bool) {
        self.0.more.store(more, Ordering::Relaxed);
    }

    /// Whether more of the same response follows the next writes at once.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn is_more(&self) -> bool {
        self.0.more.load(Ordering::Relaxed)
    }

    /// Whether the connection is to be reset when it closes: its response was cut short, or
    /// the server's shutdown grace expired.
    pub(crate) fn is_cut_short(&self) -> bool {
        self.0.cut.load(Ordering::Relaxed) || self.0.abandoned.0.load(Ordering::Relaxed)
    }

    /// The response being written failed (its upstream broke off, its gzip did not decode):
    /// the connection is reset when it closes, never ended with a FIN. An HTTP/1.0 client
    /// reads a body without a length to the connection's end, so a FIN would pass a cut body
    /// off as whole; a reset is an error to every client (curl: "Connection reset by peer").
    /// What the kernel still held of the response is dropped with it, which costs nothing:
    /// the response is lost either way.
    pub(crate) fn cut_short(&self) {
        self.0.cut.store(true, Ordering::Relaxed);
    }
}
