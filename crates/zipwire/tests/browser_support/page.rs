//! The test's site: an HTML page with a linked stylesheet and script, and the DOM a browser
//! must end up with once the page's script has run and its WebSocket echo has come back.

use std::time::{SystemTime, UNIX_EPOCH};

/// Text each placeholder element holds until the page's script replaces it.
pub const WAITING: &str = "waiting";
/// The `#title` colour set by the stylesheet, as `getComputedStyle` reports it.
pub const TITLE_COLOUR: &str = "rgb(12, 34, 56)";
/// The page background set by the stylesheet, as the screenshot shows it (RGB).
pub const BACKGROUND: [u8; 3] = [250, 240, 200];

/// One run's page, script and stylesheet; `token` differs between runs so that nothing the
/// browser returns can come from a cache or from a constant in the test.
pub struct Site {
    /// Random letters written into the page and echoed over the WebSocket.
    pub token: String,
    words: Vec<String>,
}

impl Site {
    /// A site with a fresh token.
    pub fn new() -> Site {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32;
        let mut rng = seed | 1;
        let mut next = move || {
            // xorshift64: enough to make the token and the word list differ per run.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let letters = |n: u64, len: usize| -> String {
            let mut n = n;
            (0..len)
                .map(|_| {
                    let c = char::from(b'a' + (n % 26) as u8);
                    n /= 26;
                    c
                })
                .collect()
        };
        let token = letters(next(), 12);
        let count = 300 + (next() % 100) as usize;
        let words = (0..count).map(|_| letters(next(), 8)).collect();
        Site { token, words }
    }

    /// The message the page's script sends over the WebSocket, and so the echo it writes.
    pub fn message(&self) -> String {
        format!("echo {}", self.token)
    }

    /// The page as the origin serves it.
    pub fn index(&self) -> String {
        self.page(WAITING, WAITING, WAITING)
    }

    /// The page as the browser's DOM must be after the script ran and the echo came back.
    pub fn expected_dom(&self) -> String {
        let reversed: String = self.token.chars().rev().collect();
        let js = format!("script ran: {} words, {reversed}", self.words.len());
        let css = format!("title colour {TITLE_COLOUR}");
        self.page(&js, &css, &self.message())
    }

    fn page(&self, js: &str, css: &str, ws: &str) -> String {
        let mut paragraphs = String::new();
        for (i, chunk) in self.words.chunks(20).enumerate() {
            paragraphs.push_str(&format!("<p class=\"rule-{i}\">{}</p>\n", chunk.join(" ")));
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head>\n<meta charset=\"utf-8\">\n\
             <title>zipwire browser test</title>\n\
             <link rel=\"stylesheet\" href=\"/style.css\">\n\
             <script src=\"/app.js\"></script>\n</head>\n\
             <body data-token=\"{token}\">\n<h1 id=\"title\">zipwire</h1>\n\
             <p id=\"js\">{js}</p>\n<p id=\"css\">{css}</p>\n<p id=\"ws\">{ws}</p>\n\
             <div id=\"text\">\n{paragraphs}</div>\n</body></html>\n",
            token = self.token
        )
    }

    /// The stylesheet: the colours the test checks, then enough rules to be worth
    /// compressing.
    pub fn css(&self) -> String {
        let [r, g, b] = BACKGROUND;
        let mut css = format!(
            "body {{ background: rgb({r}, {g}, {b}); margin: 0; font: 16px sans-serif; }}\n\
             #title {{ color: {TITLE_COLOUR}; font-size: 48px; \
             border-bottom: 12px solid {TITLE_COLOUR}; }}\n"
        );
        for i in 0..self.words.len().div_ceil(20) {
            css.push_str(&format!(
                ".rule-{i} {{ margin: {}px 0; padding: 0 {}px; line-height: 1.{}; }}\n",
                i % 7,
                i % 11,
                i % 9 + 1
            ));
        }
        css
    }

    /// The script: writes into the page what shows that it ran, that the stylesheet
    /// applied, and what the WebSocket echoed (RFC 6455 through the proxy).
    pub fn js(&self) -> String {
        let words: Vec<String> = self.words.iter().map(|w| format!("\"{w}\"")).collect();
        format!(
            "\"use strict\";\n\
             const words = [{words}];\n\
             window.addEventListener(\"load\", () => {{\n\
             \x20 const token = document.body.dataset.token;\n\
             \x20 const reversed = token.split(\"\").reverse().join(\"\");\n\
             \x20 document.getElementById(\"js\").textContent =\n\
             \x20   \"script ran: \" + words.length + \" words, \" + reversed;\n\
             \x20 const colour = getComputedStyle(document.getElementById(\"title\")).color;\n\
             \x20 document.getElementById(\"css\").textContent = \"title colour \" + colour;\n\
             \x20 const scheme = location.protocol === \"https:\" ? \"wss://\" : \"ws://\";\n\
             \x20 const socket = new WebSocket(scheme + location.host + \"/ws\");\n\
             \x20 socket.onopen = () => socket.send(\"echo \" + token);\n\
             \x20 socket.onmessage = (event) => {{\n\
             \x20   document.getElementById(\"ws\").textContent = event.data;\n\
             \x20   socket.close();\n\
             \x20 }};\n\
             \x20 socket.onerror = () => {{\n\
             \x20   document.getElementById(\"ws\").textContent = \"websocket error\";\n\
             \x20 }};\n\
             }});\n",
            words = words.join(", ")
        )
    }
}

/// The DOM as a sequence of tags and text: whitespace next to a tag dropped and other runs
/// of whitespace folded to one space, so that Chromium's serialization (which moves some
/// inter-element whitespace, as the HTML parsing algorithm says) compares equal to the source.
pub fn normalize(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut space = false;
    for c in html.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && c != '<' && !out.ends_with('>') {
            out.push(' ');
        }
        space = false;
        out.push(c);
    }
    // A doctype is not part of the element tree; `--dump-dom` may or may not print it.
    match out.strip_prefix("<!DOCTYPE html>") {
        Some(rest) => rest.to_owned(),
        None => out,
    }
}
