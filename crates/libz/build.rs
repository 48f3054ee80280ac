//! Gives the shared library zlib's soname, so it can stand in for libz.so.1 on a library path.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libz.so.1");
}
