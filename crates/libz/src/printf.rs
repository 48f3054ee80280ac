//! `gzprintf` and `gzvprintf`: C variadic functions (in `csrc/gzprintf.c`), exported under
//! zlib's names by two jump-only trampolines. Stable Rust can call but not define a variadic
//! function, and rustc exports only Rust-defined symbols from a cdylib, so each trampoline is
//! a naked function that jumps to the C code with every register and the stack untouched.

extern "C" {
    fn zipwire_gzprintf();
    fn zipwire_gzvprintf();
}

/// zlib's `gzprintf(gzFile, const char *format, ...)`: formats the text and writes it with
/// `gzwrite`, whatever its length (zlib stops at its buffer's size, which `gzbuffer` sets);
/// a negative zlib code when the write fails.
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn gzprintf() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("jmp {}", sym zipwire_gzprintf);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("b {}", sym zipwire_gzprintf);
}

/// zlib's `gzvprintf(gzFile, const char *format, va_list)`, as [`gzprintf`].
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn gzvprintf() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("jmp {}", sym zipwire_gzvprintf);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("b {}", sym zipwire_gzvprintf);
}
