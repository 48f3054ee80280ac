//! Reading a descriptor that someone left non-blocking.
//!
//! A program that starts `zipwire compress` on a pipe it set `O_NONBLOCK` on (node does, for its
//! own end, which the child shares) makes every read that finds the pipe empty fail with `EAGAIN`:
//! taken as an error, that would cut the output at the first pause and fail the run with "Resource
//! temporarily unavailable". gzip's `read_buffer` clears `O_NONBLOCK` and reads again; so does
//! [`Blocking`].

use std::io::{self, Read};
use std::os::fd::AsFd;

use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};

/// A reader that, when a read says it would block, makes its descriptor blocking and reads
/// again.
pub(crate) struct Blocking<R>(pub(crate) R);

impl<R: Read + AsFd> Read for Blocking<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                let fd = self.0.as_fd();
                let flags = fcntl_getfl(fd)?;
                fcntl_setfl(fd, flags.difference(OFlags::NONBLOCK))?;
                self.0.read(buf)
            }
            result => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_non_blocking_pipe_is_read_once_it_has_data() {
        let (reader, mut writer) = io::pipe().expect("pipe");
        let fd = reader.as_fd();
        fcntl_setfl(fd, fcntl_getfl(fd).expect("flags") | OFlags::NONBLOCK).expect("set");
        let mut plain = &reader;
        let mut buf = [0u8; 8];
        let refused = plain
            .read(&mut buf)
            .expect_err("an empty non-blocking pipe");
        assert_eq!(refused.kind(), io::ErrorKind::WouldBlock);
        let late = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            writer.write_all(b"abc").expect("write");
        });
        let mut blocking = Blocking(&reader);
        assert_eq!(blocking.read(&mut buf).expect("waits for the data"), 3);
        assert_eq!(&buf[..3], b"abc");
        late.join().expect("writer");
    }
}
