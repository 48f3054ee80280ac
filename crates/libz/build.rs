//! Gives the shared library zlib's soname, so it can stand in for libz.so.1 on a library path,
//! and compiles the two variadic functions (`gzprintf`, `gzvprintf`) stable Rust cannot define.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libz.so.1");
    println!("cargo:rerun-if-changed=csrc/gzprintf.c");
    cc::Build::new()
        .file("csrc/gzprintf.c")
        .warnings(true)
        .compile("zipwire_gzprintf");
}
