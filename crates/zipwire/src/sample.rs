//! Built-in sample data for when no corpus is at hand: about 2 MB of web-like content (HTML,
//! CSS, JavaScript, JSON, a binary table), generated here from a fixed seed so every run and
//! every machine sees the same bytes. Nothing is copied from third-party files.

use std::fmt::Write;

/// Words for prose, identifiers and values.
const WORDS: [&str; 64] = [
    "account", "active", "address", "alpha", "amount", "archive", "banner", "basket", "border",
    "button", "cache", "card", "catalog", "channel", "client", "column", "comment", "content",
    "country", "created", "delivery", "detail", "device", "display", "element", "event", "filter",
    "footer", "header", "image", "index", "item", "label", "layout", "link", "market", "member",
    "message", "module", "number", "order", "panel", "price", "product", "profile", "query",
    "record", "region", "report", "request", "result", "review", "search", "section", "server",
    "session", "status", "stream", "summary", "table", "title", "update", "value", "window",
];

/// The sample's parts as (name, bytes); about 2 MB in all.
pub fn files() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = Rng(0x5eed_2a11_c0de_f00d);
    vec![
        ("page.html", html(&mut rng, 600_000).into_bytes()),
        ("style.css", css(&mut rng, 250_000).into_bytes()),
        ("app.js", js(&mut rng, 400_000).into_bytes()),
        ("records.json", records(&mut rng, 550_000).into_bytes()),
        ("table.bin", table(&mut rng, 250_000)),
    ]
}

/// SplitMix64: small, fast and good enough for made-up content.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A word, skewed towards the start of the list as real vocabularies are.
    fn word(&mut self) -> &'static str {
        let a = self.below(WORDS.len() as u64);
        let b = self.below(WORDS.len() as u64);
        WORDS[a.min(b) as usize]
    }

    fn sentence(&mut self, words: u64) -> String {
        let count = 3 + self.below(words);
        let mut text = String::new();
        for i in 0..count {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(self.word());
        }
        text
    }
}

fn html(rng: &mut Rng, size: usize) -> String {
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Catalog</title>\n<link rel=\"stylesheet\" href=\"/static/style.css\">\n</head>\n\
         <body>\n<nav class=\"navbar\"><ul>\n",
    );
    for _ in 0..12 {
        let word = rng.word();
        let _ = writeln!(
            page,
            "  <li class=\"nav-item\"><a href=\"/{word}\">{word}</a></li>"
        );
    }
    page.push_str("</ul></nav>\n<main class=\"container\">\n");
    let mut id = 1000;
    while page.len() < size {
        id += 1 + rng.below(7);
        let (class, word) = (rng.word(), rng.word());
        let price = rng.below(100_000);
        let _ = write!(
            page,
            "<article class=\"card card-{class}\" data-id=\"{id}\">\n  \
             <img src=\"/img/{word}-{id}.jpg\" alt=\"{word}\" width=\"320\" height=\"240\">\n  \
             <h2 class=\"card-title\"><a href=\"/item/{id}\">{}</a></h2>\n  \
             <p class=\"card-text\">{}.</p>\n  \
             <span class=\"price\">${}.{:02}</span>\n</article>\n",
            rng.sentence(4),
            rng.sentence(20),
            price / 100,
            price % 100
        );
    }
    page.push_str("</main>\n<script src=\"/static/app.js\"></script>\n</body>\n</html>\n");
    page
}

fn css(rng: &mut Rng, size: usize) -> String {
    const PROPERTIES: [&str; 10] = [
        "margin",
        "padding",
        "color",
        "background-color",
        "border-radius",
        "font-size",
        "line-height",
        "width",
        "max-width",
        "z-index",
    ];
    let mut sheet = String::new();
    while sheet.len() < size {
        let _ = writeln!(
            sheet,
            ".{}-{} .{}, .{}:hover {{",
            rng.word(),
            rng.word(),
            rng.word(),
            rng.word()
        );
        for _ in 0..2 + rng.below(5) {
            let property = PROPERTIES[rng.below(PROPERTIES.len() as u64) as usize];
            let value = match rng.below(3) {
                0 => format!("{}px", rng.below(64)),
                1 => format!("#{:06x}", rng.below(0x100_0000)),
                _ => format!("{}.{}rem", rng.below(4), rng.below(10)),
            };
            let _ = writeln!(sheet, "  {property}: {value};");
        }
        sheet.push_str("}\n");
    }
    sheet
}

fn js(rng: &mut Rng, size: usize) -> String {
    let mut code = String::from("\"use strict\";\n");
    let mut n = 0;
    while code.len() < size {
        n += 1;
        let (name, arg, field) = (rng.word(), rng.word(), rng.word());
        let _ = write!(
            code,
            "function {name}{n}({arg}, options) {{\n  \
             const {field} = {arg}.{field} || options.{field};\n  \
             if ({field} === undefined || {field} === null) {{\n    \
             return {{ status: \"{}\", code: {} }};\n  }}\n  \
             for (let i = 0; i < {arg}.length; i += 1) {{\n    \
             {arg}[i].{} = {arg}[i].{} + {};\n  }}\n  \
             return document.querySelector(\".{}-{}\");\n}}\n",
            rng.word(),
            rng.below(600),
            rng.word(),
            rng.word(),
            rng.below(1000),
            rng.word(),
            rng.word()
        );
    }
    code
}

fn records(rng: &mut Rng, size: usize) -> String {
    let mut json = String::from("[\n");
    let mut id = 0;
    while json.len() < size {
        id += 1;
        let (first, second) = (rng.word(), rng.word());
        let _ = writeln!(
            json,
            "  {{\"id\": {id}, \"name\": \"{first} {second}\", \"email\": \"{first}.{second}{}@example.com\", \
             \"score\": {}.{}, \"active\": {}, \"tags\": [\"{}\", \"{}\"], \"created\": \"2024-{:02}-{:02}T{:02}:{:02}:00Z\"}},",
            rng.below(100),
            rng.below(100),
            rng.below(1000),
            rng.below(4) != 0,
            rng.word(),
            rng.word(),
            1 + rng.below(12),
            1 + rng.below(28),
            rng.below(24),
            rng.below(60)
        );
    }
    json.push_str("  {}\n]\n");
    json
}

/// Fixed-size little-endian records: a rising id, a random walk, a small category and a
/// noisy measurement, as in a metrics dump or a spreadsheet's number cells.
fn table(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(size + 16);
    let mut id: u32 = 1;
    let mut level: i32 = 0;
    while bytes.len() < size {
        id += 1 + rng.below(3) as u32;
        level += rng.below(21) as i32 - 10;
        bytes.extend_from_slice(&id.to_le_bytes());
        bytes.extend_from_slice(&level.to_le_bytes());
        bytes.extend_from_slice(&(rng.below(8) as u16).to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&(rng.next() as u32 & 0x00ff_ffff).to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_is_about_two_megabytes_and_deterministic() {
        let first = files();
        let total: usize = first.iter().map(|(_, data)| data.len()).sum();
        assert!((1_900_000..2_300_000).contains(&total), "{total}");
        assert_eq!(first, files());
    }
}
