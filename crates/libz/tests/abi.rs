//! The library's ABI against the system's zlib.h and libz.so.1: a program built against
//! zlib must find the same struct layouts and functions, in the same version nodes, here.

mod common;

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

use libz_rs_sys::{gz_header, z_stream};

/// zlib.h's layout, as the C compiler sees it, equals the Rust structs the library exports.
#[test]
fn z_stream_and_gz_header_layouts_match_zlib_h() {
    if !common::have_cc_and_zlib_h() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let exe = common::build_c("layout.c", tmp.path(), common::Link::System);
    let out = common::run_ok(&mut Command::new(exe));
    let c: BTreeMap<&str, usize> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k, v.parse().expect("a number")))
        .collect();
    macro_rules! rust {
        ($($ty:ident . $field:ident),*) => {{
            let mut m = BTreeMap::new();
            m.insert("z_stream", size_of::<z_stream>());
            m.insert("gz_header", size_of::<gz_header>());
            $(m.insert(concat!(stringify!($ty), ".", stringify!($field)), offset_of!($ty, $field));)*
            m
        }};
    }
    let rust = rust!(
        z_stream.next_in,
        z_stream.avail_in,
        z_stream.total_in,
        z_stream.next_out,
        z_stream.avail_out,
        z_stream.total_out,
        z_stream.msg,
        z_stream.state,
        z_stream.zalloc,
        z_stream.zfree,
        z_stream.opaque,
        z_stream.data_type,
        z_stream.adler,
        z_stream.reserved,
        gz_header.text,
        gz_header.time,
        gz_header.xflags,
        gz_header.os,
        gz_header.extra,
        gz_header.extra_len,
        gz_header.extra_max,
        gz_header.name,
        gz_header.name_max,
        gz_header.comment,
        gz_header.comm_max,
        gz_header.hcrc,
        gz_header.done
    );
    assert_eq!(c.len(), rust.len(), "layout.c prints every field: {out}");
    assert_eq!(c, rust);
}

/// The library exports exactly the functions of the system libz.so.1, each in the version node
/// the system's has it in (those the system leaves unversioned: the first node, `ZLIB_1.2.0`;
/// see `link.sh` and `zlib.map`), under the soname libz.so.1.
#[test]
fn exports_every_function_of_the_system_libz_in_its_version_node() {
    let Some(system) = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/aarch64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists()) else {
        assert!(
            !zipwire_testkit::is_ci(),
            "no system libz.so.1 under CI=true"
        );
        eprintln!("note: no system libz.so.1 to compare with: test skipped");
        return;
    };
    if !zipwire_testkit::require_tool("nm") || !zipwire_testkit::require_tool("readelf") {
        return;
    }
    // Function name → its version node ("" for none), from `nm -D`'s `name@@NODE`.
    let defined = |lib: &str| -> BTreeMap<String, String> {
        let out = common::run_ok(Command::new("nm").args(["-D", "--defined-only", lib]));
        out.lines()
            .filter_map(|l| {
                let mut parts = l.split_whitespace();
                let kind = parts.nth(1)?;
                let name = parts.next()?;
                let (name, node) = name.split_once('@').unwrap_or((name, ""));
                (kind == "T").then(|| (name.to_owned(), node.trim_start_matches('@').to_owned()))
            })
            .collect()
    };
    let ours = common::library();
    let ours = defined(ours.to_str().expect("utf-8 path"));
    let system = defined(system);
    let names = |map: &BTreeMap<String, String>| map.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&system), "exported functions");
    for (name, node) in &system {
        let expected = if node.is_empty() { "ZLIB_1.2.0" } else { node };
        assert_eq!(ours[name], expected, "{name}'s version node");
    }
    let dynamic = common::run_ok(Command::new("readelf").arg("-d").arg(common::library()));
    assert!(dynamic.contains("[libz.so.1]"), "soname: {dynamic}");
}
