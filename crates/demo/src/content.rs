//! Generated web content: the demo site's pages and the benchmark's built-in sample
//! (`zipwire bench codec` without a corpus), from a seeded [`SplitMix64`].
//!
//! Everything here is our own text, made up from a word list, so zipwire ships no
//! third-party files and the same seed gives the same bytes on every run and machine. The generators imitate
//! the shape of real pages (navigation, article cards, tables, utility CSS, minified
//! JavaScript, API records) because the compression ratio depends on that shape: random
//! bytes or one repeated sentence would give a ratio no real site has.

use std::fmt::Write;

mod words;

use words::{FIRST_NAMES, JS_NAMES, JS_PROPS, LAST_NAMES, MONTHS, TOPICS, WORDS};
use zipwire_adapt::rng::SplitMix64;

fn sentence(rng: &mut SplitMix64, min: usize, max: usize) -> String {
    let n = rng.range(min, max);
    let mut out = String::new();
    for i in 0..n {
        let word = *rng.pick_skewed(WORDS);
        if i == 0 {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        } else {
            out.push(' ');
            out.push_str(word);
        }
    }
    out
}

fn paragraph(rng: &mut SplitMix64, sentences: usize) -> String {
    let mut out = String::new();
    for i in 0..sentences {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&sentence(rng, 6, 16));
        out.push(*rng.pick(&['.', '.', '.', '?', '!']));
    }
    out
}

fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn author(rng: &mut SplitMix64) -> String {
    format!("{} {}", rng.pick(FIRST_NAMES), rng.pick(LAST_NAMES))
}

fn date(rng: &mut SplitMix64) -> (usize, usize, usize) {
    (rng.range(2019, 2026), rng.range(1, 12), rng.range(1, 28))
}

/// A home page: head with inline CSS, navigation, a list of `articles` article cards, a table,
/// a footer and inline scripts. About 18 KB plus 0.8 KB per article (the demo's 62 make
/// 67 KB).
pub fn home_page(rng: &mut SplitMix64, articles: usize) -> String {
    let mut html = String::with_capacity(20 * 1024 + 820 * articles);
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Field Notes &middot; a zipwire demo site</title>\n\
         <meta name=\"description\" content=\"Articles, release notes and guides about \
         running web traffic, generated for the zipwire demo.\">\n\
         <link rel=\"stylesheet\" href=\"/static/site.css\">\n\
         <link rel=\"icon\" type=\"image/svg+xml\" href=\"/static/logo.svg\">\n<style>\n",
    );
    for (i, topic) in TOPICS.iter().enumerate() {
        let hue = i * 36;
        let _ = writeln!(
            html,
            ".topic-{} {{ border-left: 4px solid hsl({hue}, 65%, 45%); padding-left: 0.75rem; }}\n\
             .topic-{} .badge {{ background: hsl({hue}, 65%, 92%); color: hsl({hue}, 65%, 25%); }}",
            slug(topic),
            slug(topic),
        );
    }
    html.push_str(
        "body { margin: 0; font-family: system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif; }\n\
         .card { margin: 1rem 0; padding: 1rem 1.25rem; border-radius: 0.5rem; }\n\
         .card h2 { margin: 0 0 0.25rem; font-size: 1.25rem; }\n\
         .meta { color: #6c757d; font-size: 0.875rem; }\n\
         </style>\n</head>\n<body>\n<header class=\"site-header\">\n\
         <a class=\"brand\" href=\"/\"><img src=\"/static/logo.svg\" width=\"32\" height=\"32\" \
         alt=\"\"> Field Notes</a>\n<nav class=\"navbar\" aria-label=\"Main\">\n<ul class=\"nav\">\n",
    );
    for topic in TOPICS {
        let _ = writeln!(
            html,
            "  <li class=\"nav-item dropdown\"><a class=\"nav-link\" href=\"/topics/{}/\">{topic}</a>\n    <ul class=\"dropdown-menu\">",
            slug(topic)
        );
        for _ in 0..rng.range(3, 5) {
            let title = sentence(rng, 2, 3);
            let _ = writeln!(
                html,
                "      <li><a class=\"dropdown-item\" href=\"/topics/{}/{}/\">{title}</a></li>",
                slug(topic),
                slug(&title)
            );
        }
        html.push_str("    </ul>\n  </li>\n");
    }
    html.push_str(
        "</ul>\n</nav>\n</header>\n<main class=\"container\">\n<section class=\"articles\">\n",
    );
    for id in 0..articles {
        let title = sentence(rng, 4, 9);
        let topic = *rng.pick(TOPICS);
        let (y, m, d) = date(rng);
        let name = author(rng);
        let _ = write!(
            html,
            "<article class=\"card topic-{topic_slug}\" id=\"post-{id}\">\n\
             <h2><a href=\"/articles/{y}/{m:02}/{slug}.html\">{title}</a></h2>\n\
             <p class=\"meta\">By <a href=\"/authors/{author_slug}/\">{author}</a> &middot; \
             <time datetime=\"{y}-{m:02}-{d:02}\">{d} {month} {y}</time> &middot; {minutes} min read \
             &middot; <span class=\"badge\">{topic}</span></p>\n<p>{summary}</p>\n<ul class=\"tags\">",
            topic_slug = slug(topic),
            slug = slug(&title),
            author_slug = slug(&name),
            author = name,
            month = MONTHS[m - 1],
            minutes = rng.range(2, 19),
            summary = {
                let sentences = rng.range(3, 5);
                paragraph(rng, sentences)
            },
        );
        for _ in 0..rng.range(2, 4) {
            let tag = *rng.pick_skewed(WORDS);
            let _ = write!(html, "<li><a href=\"/tags/{tag}/\">#{tag}</a></li>");
        }
        html.push_str("</ul>\n</article>\n");
    }
    html.push_str(
        "</section>\n<section class=\"schedule\">\n<h2>Release schedule</h2>\n\
         <table class=\"table table-striped\">\n<thead><tr><th>Version</th><th>Branch</th>\
         <th>Released</th><th>End of life</th><th>Status</th></tr></thead>\n<tbody>\n",
    );
    for row in 0..48 {
        let (y, m, d) = date(rng);
        let status = *rng.pick(&["stable", "stable", "LTS", "maintenance", "end of life"]);
        let _ = writeln!(
            html,
            "<tr><td><a href=\"/releases/{major}.{minor}/\">{major}.{minor}.{patch}</a></td>\
             <td>{major}.{minor}</td><td>{y}-{m:02}-{d:02}</td><td>{eol}-{m:02}-{d:02}</td>\
             <td class=\"status status-{status_class}\">{status}</td></tr>",
            major = 4 - row / 12,
            minor = 11 - row % 12,
            patch = rng.range(0, 14),
            eol = y + 3,
            status_class = slug(status),
        );
    }
    html.push_str("</tbody>\n</table>\n</section>\n</main>\n<footer class=\"site-footer\">\n<div class=\"columns\">\n");
    for topic in TOPICS.iter().take(4) {
        let _ = writeln!(html, "<div class=\"column\"><h3>{topic}</h3><ul>");
        for _ in 0..6 {
            let title = sentence(rng, 2, 4);
            let _ = writeln!(html, "<li><a href=\"/{}/\">{title}</a></li>", slug(&title));
        }
        html.push_str("</ul></div>\n");
    }
    html.push_str(
        "</div>\n<p class=\"legal\">Generated content for the zipwire demo. No rights reserved.</p>\n\
         </footer>\n<script>\nwindow.__SITE__ = {\"build\":\"2026.03.1\",\"features\":{\"search\":true,\
         \"comments\":false,\"darkMode\":true},\"endpoints\":{\"articles\":\"/api/articles.json\"}};\n\
         document.querySelectorAll('.dropdown').forEach(function (item) {\n\
         \x20 item.addEventListener('mouseenter', function () { item.classList.add('open'); });\n\
         \x20 item.addEventListener('mouseleave', function () { item.classList.remove('open'); });\n\
         });\n</script>\n<script src=\"/static/app.js\" defer></script>\n</body>\n</html>\n",
    );
    html
}

/// A stylesheet: component rules, a colour palette and responsive utility classes, the way
/// CSS frameworks generate them, then component rules until it holds `size` bytes (a few
/// more; the fixed part alone is about 23 KB).
pub fn stylesheet(rng: &mut SplitMix64, size: usize) -> String {
    let mut css = String::with_capacity(size + 4 * 1024);
    css.push_str(":root {\n");
    let colors = [
        "primary",
        "secondary",
        "success",
        "info",
        "warning",
        "danger",
        "light",
        "dark",
    ];
    let mut palette = Vec::new();
    for name in colors {
        let hex = format!("#{:06x}", rng.next_u64() & 0xff_ffff);
        let _ = writeln!(css, "  --fn-{name}: {hex};");
        palette.push((name, hex));
    }
    css.push_str(
        "  --fn-font-sans: system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif;\n}\n",
    );
    for (name, hex) in &palette {
        let _ = writeln!(
            css,
            ".btn-{name} {{\n  color: #fff;\n  background-color: {hex};\n  border-color: {hex};\n}}\n\
             .btn-{name}:hover {{\n  color: #fff;\n  background-color: color-mix(in srgb, {hex} 85%, black);\n}}\n\
             .text-{name} {{ color: var(--fn-{name}) !important; }}\n\
             .bg-{name} {{ background-color: var(--fn-{name}) !important; }}\n\
             .border-{name} {{ border-color: var(--fn-{name}) !important; }}"
        );
    }
    let properties = [("m", "margin"), ("p", "padding")];
    let sides = [
        ("", &[""][..]),
        ("t", &["-top"][..]),
        ("b", &["-bottom"][..]),
        ("s", &["-left"][..]),
        ("e", &["-right"][..]),
        ("x", &["-left", "-right"][..]),
        ("y", &["-top", "-bottom"][..]),
    ];
    let sizes = ["0", "0.25rem", "0.5rem", "1rem", "1.5rem", "3rem"];
    let breakpoints = [("", 0), ("sm-", 576), ("md-", 768), ("lg-", 992)];
    for (prefix, width) in breakpoints {
        if width > 0 {
            let _ = writeln!(css, "@media (min-width: {width}px) {{");
        }
        for (short, property) in properties {
            for (side, suffixes) in sides {
                for (i, size) in sizes.iter().enumerate() {
                    let _ = write!(css, ".{short}{side}-{prefix}{i} {{ ");
                    for suffix in suffixes {
                        let _ = write!(css, "{property}{suffix}: {size} !important; ");
                    }
                    css.push_str("}\n");
                }
            }
        }
        for col in 1..=12 {
            let _ = writeln!(
                css,
                ".col-{prefix}{col} {{ flex: 0 0 auto; width: {:.6}%; }}",
                col as f64 * 100.0 / 12.0
            );
        }
        if width > 0 {
            css.push_str("}\n");
        }
    }
    while css.len() < size {
        let block = slug(&sentence(rng, 1, 2));
        let _ = writeln!(
            css,
            ".{block} {{\n  display: {};\n  font-size: {}rem;\n  line-height: 1.{};\n  color: {};\n}}",
            rng.pick(&["block", "flex", "grid", "inline-block"]),
            rng.range(8, 20) as f64 / 10.0,
            rng.range(2, 7),
            palette[rng.below(palette.len())].1,
        );
    }
    css
}

/// A JavaScript bundle in the shape of minified output: webpack-style module wrappers on long
/// lines with short identifiers and common property names, of `size` bytes (a few more).
pub fn script_bundle(rng: &mut SplitMix64, size: usize) -> String {
    let mut js = String::with_capacity(size + 4 * 1024);
    js.push_str(
        "/*! fieldnotes app v2026.03.1 | generated for the zipwire demo */\n\
         (()=>{\"use strict\";var __modules={},__cache={};function __require(t){var e=__cache[t];\
         if(void 0!==e)return e.exports;var n=__cache[t]={exports:{}};return __modules[t](n,n.exports,__require),n.exports}\n",
    );
    let mut module = 0;
    while js.len() < size {
        let _ = write!(js, "__modules[{module}]=function(t,e,n){{");
        for _ in 0..rng.range(4, 10) {
            statement(rng, &mut js, module);
        }
        js.push_str("};\n");
        module += 1;
    }
    js.push_str("__require(0)})();\n");
    js
}

fn statement(rng: &mut SplitMix64, js: &mut String, module: usize) {
    let a = *rng.pick(JS_NAMES);
    let b = *rng.pick(JS_NAMES);
    let p = *rng.pick_skewed(JS_PROPS);
    let q = *rng.pick_skewed(JS_PROPS);
    let _ = match rng.below(8) {
        0 => write!(
            js,
            "var {a}=n({});",
            (module + rng.range(1, 40)) % (module + 40)
        ),
        1 => write!(
            js,
            "function {a}{module}({b},{a}){{return {b}&&{b}.{p}?{b}.{p}({a}):{a}.{q}}}"
        ),
        2 => write!(
            js,
            "{a}.{p}=function({b}){{var {a}=this;return this.{q}.{p}(function(e){{return e.{q}!=={b}}}),{a}}};"
        ),
        3 => write!(
            js,
            "const {a}{b}={{{p}:\"{}\",{q}:{},enabled:!{}}};",
            slug(&sentence(rng, 1, 3)),
            rng.range(0, 999),
            rng.below(2)
        ),
        4 => write!(
            js,
            "if({a}.{p}>{}){{throw new Error(\"{} \"+{a}.{p})}}",
            rng.range(1, 64),
            sentence(rng, 3, 6)
        ),
        5 => write!(
            js,
            "for(var {a}=0,{b}={a}.{p}.length;{a}<{b};{a}++){{{b}.{q}({a})}}"
        ),
        6 => write!(
            js,
            "e.{p}=function(){{return Promise.resolve({a}.{q}).then(function({b}){{return {b}.{p}}})}};"
        ),
        _ => write!(
            js,
            "document.querySelector(\".{}\").{p}(\"click\",function({b}){{{b}.preventDefault(),{a}.{q}()}});",
            slug(&sentence(rng, 1, 2))
        ),
    };
}

/// An API response: compact JSON with page metadata and article records, as a REST endpoint
/// sends it, of `size` bytes (a few more).
pub fn api_articles(rng: &mut SplitMix64, size: usize) -> String {
    let mut json = String::with_capacity(size + 4 * 1024);
    json.push_str("{\"page\":1,\"per_page\":120,\"items\":[");
    let mut id = 1000;
    while json.len() < size {
        if id > 1000 {
            json.push(',');
        }
        let title = sentence(rng, 3, 8);
        let (y, m, d) = date(rng);
        let _ = write!(
            json,
            "{{\"id\":{id},\"slug\":\"{}\",\"title\":\"{title}\",\"author\":{{\"id\":{},\"name\":\"{}\"}},\
             \"topic\":\"{}\",\"published_at\":\"{y}-{m:02}-{d:02}T{:02}:{:02}:00Z\",\"tags\":[",
            slug(&title),
            rng.range(1, 40),
            author(rng),
            rng.pick(TOPICS),
            rng.range(0, 23),
            rng.range(0, 59),
        );
        for i in 0..rng.range(1, 4) {
            if i > 0 {
                json.push(',');
            }
            let _ = write!(json, "\"{}\"", rng.pick_skewed(WORDS));
        }
        let _ = write!(
            json,
            "],\"reading_minutes\":{},\"views\":{},\"score\":{:.2},\"draft\":{},\"comments_enabled\":{}}}",
            rng.range(2, 19),
            rng.range(10, 250_000),
            rng.range(0, 500) as f64 / 100.0,
            rng.chance(10),
            rng.chance(70),
        );
        id += 1;
    }
    let _ = write!(
        json,
        "],\"total\":{},\"next\":\"/api/articles.json?page=2\"}}",
        id - 1000
    );
    json
}

/// The site logo and a small bar chart as SVG. A few KB.
pub fn logo_svg(rng: &mut SplitMix64) -> String {
    let mut svg = String::with_capacity(8 * 1024);
    svg.push_str(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"320\" viewBox=\"0 0 640 320\">\n\
         <title>Field Notes: requests per day</title>\n\
         <defs><linearGradient id=\"bar\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">\
         <stop offset=\"0\" stop-color=\"#3b82f6\"/><stop offset=\"1\" stop-color=\"#1e3a8a\"/></linearGradient></defs>\n\
         <g font-family=\"system-ui, sans-serif\" font-size=\"11\" fill=\"#334155\">\n",
    );
    let mut points = String::new();
    for day in 0..30 {
        let height = rng.range(40, 260);
        let x = 20 + day * 20;
        let _ = writeln!(
            svg,
            "  <rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"{height}\" rx=\"2\" fill=\"url(#bar)\"/>\n\
             \x20 <text x=\"{}\" y=\"312\" text-anchor=\"middle\">{}</text>",
            300 - height,
            x + 7,
            day + 1
        );
        let _ = write!(points, "{},{} ", x + 7, 300 - height + rng.range(0, 20));
    }
    let _ = write!(
        svg,
        "</g>\n<polyline points=\"{}\" fill=\"none\" stroke=\"#f97316\" stroke-width=\"2\"/>\n</svg>\n",
        points.trim_end()
    );
    svg
}

/// The page for unknown paths.
pub fn not_found_page() -> String {
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
     <title>404 Not Found &middot; Field Notes</title>\n\
     <link rel=\"stylesheet\" href=\"/static/site.css\">\n</head>\n<body>\n\
     <main class=\"container\">\n<h1>Page not found</h1>\n\
     <p>The page you asked for is not on this site. It may have moved, or the link may be \
     mistyped.</p>\n<p><a href=\"/\">Back to the home page</a> or \
     <a href=\"/api/articles.json\">browse the article index</a>.</p>\n</main>\n</body>\n</html>\n"
        .to_owned()
}

/// Fixed-size little-endian records of `size` bytes (a few more): a rising id, a random walk,
/// a small category and a noisy measurement, as in a metrics dump or a spreadsheet's number
/// cells.
pub fn table(rng: &mut SplitMix64, size: usize) -> Vec<u8> {
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
        bytes.extend_from_slice(&(rng.next_u64() as u32 & 0x00ff_ffff).to_le_bytes());
    }
    bytes
}
