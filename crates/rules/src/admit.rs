//! The whole compression decision a server makes for one response: [`decide`]'s rules, then
//! what the compressing side can afford ([`Gate`]: the CPU and rate budget, the memory gate,
//! a variant already stored) and whether it can decode gzip for a client that cannot.
//!
//! Both response paths call [`admit`]: the streamed one (a response on its way from the
//! origin) and the cached one (a response made from a stored entry). They differ in their
//! gates, and in one row of the table (see [`Path`]).

use crate::decide::{decide, Bypass, Decision, Payload, Vary};
use crate::facts::{Budget, RequestFacts, ResponseFacts};
use crate::negotiate::Coding;
use crate::rules::Rules;

/// What the compressing side answers when the rules say to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// Compress in the coding the rules chose.
    Granted,
    /// Compress, but in this coding instead (the memory gate's stateless gzip).
    Fallback(Coding),
    /// The budget is spent: the rules decide again with [`Budget::Exhausted`].
    Refused,
}

/// The side of a server a response is made on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Path {
    /// Streamed from the origin as it arrives.
    Streamed,
    /// Made from a stored cache entry.
    Stored,
}

/// The compressing side of a server, asked by [`admit`].
pub trait Gate {
    /// Asked once, when the rules would compress in `coding`; [`Payload::Absent`] for a
    /// response without a body (HEAD). The gate keeps what it granted (a permit, an encoder,
    /// a stored variant) for its caller.
    fn grant(&mut self, coding: Coding, payload: Payload) -> Grant;

    /// Whether upstream gzip can be decoded for a client that does not accept it.
    fn can_gunzip(&self) -> bool;
}

/// The decision for one response: [`decide`] with `gate`'s answers applied.
///
/// - Compress: the gate may grant it, switch it to a fallback coding, or refuse it (the
///   rules then decide again with the budget spent, which passes the response with
///   [`Bypass::Budget`]).
/// - Decompress, when the gate cannot gunzip: the response passes as it came
///   ([`Bypass::AlreadyEncoded`]). On the streamed path `Vary: Accept-Encoding` is added, as
///   for a client that takes gzip (the same bytes, and a downstream cache keeps the first
///   response's `Vary`); on the stored path the entry's own `Vary` already says it.
pub fn admit(
    request: &RequestFacts,
    response: &ResponseFacts,
    rules: &Rules,
    gate: &mut dyn Gate,
    path: Path,
) -> Decision {
    let mut decision = decide(request, response, rules);
    if let Decision::Compress { coding, payload } = decision {
        match gate.grant(coding, payload) {
            Grant::Granted => {}
            Grant::Fallback(coding) => decision = Decision::Compress { coding, payload },
            Grant::Refused => {
                let mut spent = response.clone();
                spent.budget = Budget::Exhausted;
                decision = decide(request, &spent, rules);
            }
        }
    }
    if matches!(decision, Decision::Decompress { .. }) && !gate.can_gunzip() {
        decision = Decision::Pass {
            reason: Bypass::AlreadyEncoded,
            vary: match path {
                Path::Streamed => Vary::Add,
                Path::Stored => Vary::Unchanged,
            },
        };
    }
    decision
}

#[cfg(test)]
mod tests {
    //! One row per way the gate and the path change the rules' decision.

    use http::header::{HeaderMap, HeaderValue};
    use http::{Method, StatusCode};

    use super::*;

    /// A gate with fixed answers that records what it was asked.
    struct Fixed {
        grant: Grant,
        gunzip: bool,
        asked: Vec<(Coding, Payload)>,
    }

    impl Gate for Fixed {
        fn grant(&mut self, coding: Coding, payload: Payload) -> Grant {
            self.asked.push((coding, payload));
            self.grant
        }

        fn can_gunzip(&self) -> bool {
            self.gunzip
        }
    }

    struct Row {
        name: &'static str,
        method: Method,
        accept: &'static str,
        response: &'static [(&'static str, &'static str)],
        grant: Grant,
        gunzip: bool,
        path: Path,
        expected: Decision,
        asked: &'static [(Coding, Payload)],
    }

    const HTML: &[(&str, &str)] = &[("content-type", "text/html"), ("content-length", "5000")];
    const UPSTREAM_GZIP: &[(&str, &str)] = &[
        ("content-type", "text/html"),
        ("content-encoding", "gzip"),
        ("content-length", "300"),
    ];
    const PNG: &[(&str, &str)] = &[("content-type", "image/png"), ("content-length", "5000")];

    const fn compress(coding: Coding, payload: Payload) -> Decision {
        Decision::Compress { coding, payload }
    }

    fn rows() -> Vec<Row> {
        use Payload::{Absent, Transform};
        vec![
            Row {
                name: "granted: the rules' coding",
                method: Method::GET,
                accept: "br, gzip",
                response: HTML,
                grant: Grant::Granted,
                gunzip: true,
                path: Path::Streamed,
                expected: compress(Coding::Br, Transform),
                asked: &[(Coding::Br, Transform)],
            },
            Row {
                name: "the memory gate's fallback coding",
                method: Method::GET,
                accept: "br, gzip",
                response: HTML,
                grant: Grant::Fallback(Coding::Gzip),
                gunzip: true,
                path: Path::Streamed,
                expected: compress(Coding::Gzip, Transform),
                asked: &[(Coding::Br, Transform)],
            },
            Row {
                name: "refused: passed for the budget, streamed",
                method: Method::GET,
                accept: "gzip",
                response: HTML,
                grant: Grant::Refused,
                gunzip: true,
                path: Path::Streamed,
                expected: Decision::Pass {
                    reason: Bypass::Budget,
                    vary: Vary::Add,
                },
                asked: &[(Coding::Gzip, Transform)],
            },
            Row {
                name: "refused: passed for the budget, stored",
                method: Method::GET,
                accept: "gzip",
                response: HTML,
                grant: Grant::Refused,
                gunzip: true,
                path: Path::Stored,
                expected: Decision::Pass {
                    reason: Bypass::Budget,
                    vary: Vary::Add,
                },
                asked: &[(Coding::Gzip, Transform)],
            },
            Row {
                name: "HEAD: asked with no payload",
                method: Method::HEAD,
                accept: "gzip",
                response: HTML,
                grant: Grant::Granted,
                gunzip: true,
                path: Path::Streamed,
                expected: compress(Coding::Gzip, Absent),
                asked: &[(Coding::Gzip, Absent)],
            },
            Row {
                name: "not compressible: the gate is not asked",
                method: Method::GET,
                accept: "gzip",
                response: PNG,
                grant: Grant::Refused,
                gunzip: true,
                path: Path::Streamed,
                expected: Decision::Pass {
                    reason: Bypass::Type,
                    vary: Vary::Unchanged,
                },
                asked: &[],
            },
            Row {
                name: "upstream gzip decoded for a client without it",
                method: Method::GET,
                accept: "identity",
                response: UPSTREAM_GZIP,
                grant: Grant::Refused,
                gunzip: true,
                path: Path::Streamed,
                expected: Decision::Decompress { payload: Transform },
                asked: &[],
            },
            Row {
                name: "no gunzip, streamed: passed as it came, Vary added",
                method: Method::GET,
                accept: "identity",
                response: UPSTREAM_GZIP,
                grant: Grant::Granted,
                gunzip: false,
                path: Path::Streamed,
                expected: Decision::Pass {
                    reason: Bypass::AlreadyEncoded,
                    vary: Vary::Add,
                },
                asked: &[],
            },
            Row {
                name: "no gunzip, stored: passed as it came, the entry's Vary kept",
                method: Method::GET,
                accept: "identity",
                response: UPSTREAM_GZIP,
                grant: Grant::Granted,
                gunzip: false,
                path: Path::Stored,
                expected: Decision::Pass {
                    reason: Bypass::AlreadyEncoded,
                    vary: Vary::Unchanged,
                },
                asked: &[],
            },
        ]
    }

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn table() {
        for row in rows() {
            let request_headers = map(&[("accept-encoding", row.accept)]);
            let request = RequestFacts::from_parts(&row.method, &request_headers);
            let response = ResponseFacts::from_parts(StatusCode::OK, &map(row.response));
            let mut gate = Fixed {
                grant: row.grant,
                gunzip: row.gunzip,
                asked: Vec::new(),
            };
            let decision = admit(&request, &response, &Rules::default(), &mut gate, row.path);
            assert_eq!(decision, row.expected, "{}", row.name);
            assert_eq!(
                gate.asked, row.asked,
                "{}: what the gate was asked",
                row.name
            );
        }
    }
}
