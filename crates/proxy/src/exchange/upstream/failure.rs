//! How an upstream exchange failed, as the retry and down-mark rules need to know, and the
//! cause chain for its log line.

use std::error::Error;

use crate::exchange::connector::NoSlot;

/// An error with its causes, for a log line: hyper-util's client error says only "client
/// error (Connect)", the reason (a refused connection, a certificate for another name) is
/// in its sources.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// Whether a connect failed for want of something on this machine (descriptors, ports,
/// buffers, an upstream connection slot), not because of the upstream.
pub(super) fn local_failure(error: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<NoSlot>() {
            return true;
        }
        let code = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error);
        if code.is_some_and(|code| {
            [
                libc::EMFILE,
                libc::ENFILE,
                libc::EADDRNOTAVAIL,
                libc::ENOBUFS,
                libc::ENOMEM,
            ]
            .contains(&code)
        }) {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Whether the upstream closed or reset the connection before any of its answer came: what an
/// origin that closes idle keep-alive connections (Apache, Node: after 5 s) does when the close
/// crosses the proxy's next request on that connection. An idempotent request whose body was not
/// sent may then go again (RFC 9110 §9.2.2), as nginx resends a request that failed on a kept-alive
/// connection. Over TLS the close comes without `close_notify` as an unexpected end of file
/// (rustls's error), which counts too: else such a request would get 502.
pub(super) fn closed_before_answer(error: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(hyper) = error.downcast_ref::<hyper::Error>() {
            if hyper.is_incomplete_message() {
                return true;
            }
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        cause = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose cause is `source`, as hyper-util's client error wraps the connector's.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn only_this_machine_s_shortages_are_local() {
        let os = |code| Wrapped(std::io::Error::from_raw_os_error(code));
        for code in [libc::EMFILE, libc::ENFILE, libc::EADDRNOTAVAIL] {
            assert!(local_failure(&os(code)), "{code}");
        }
        for code in [libc::ECONNREFUSED, libc::EHOSTUNREACH, libc::ETIMEDOUT] {
            assert!(!local_failure(&os(code)), "{code}");
        }
        let chain = Chain(&os(libc::EMFILE)).to_string();
        assert!(chain.starts_with("client error (Connect): "), "{chain}");
    }

    #[test]
    fn a_close_before_the_answer_is_told_from_other_failures() {
        use std::io::ErrorKind;
        let kind = |kind| Wrapped(std::io::Error::from(kind));
        // A TLS upstream's close without close_notify is an unexpected end of file.
        for closed in [
            ErrorKind::ConnectionReset,
            ErrorKind::ConnectionAborted,
            ErrorKind::BrokenPipe,
            ErrorKind::UnexpectedEof,
        ] {
            assert!(closed_before_answer(&kind(closed)), "{closed:?}");
        }
        for other in [
            ErrorKind::TimedOut,
            ErrorKind::InvalidData,
            ErrorKind::Other,
        ] {
            assert!(!closed_before_answer(&kind(other)), "{other:?}");
        }
    }
}
