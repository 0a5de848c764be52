//! gdb's `qGetTLSAddr` (where a thread-local variable is), which the
//! gdbstub crate has no hook for: the connection to gdb answers it itself
//! and passes every other byte to the stub. The stub publishes each
//! thread's pointer (`fs_base`) at every stop; the address is the
//! executable's `PT_TLS` block below it (`symbols::tls`), so `p counter`
//! of a `__thread` variable and glibc's `p (int) errno` work in gdb.

use gdbstub::conn::{Connection, ConnectionExt};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;

/// Each thread's pointer at the stop, and the executable's TLS layout.
#[derive(Clone, Default)]
pub struct TlsTable(Rc<RefCell<(HashMap<u32, u64>, symbols::tls::Tls)>>);

impl TlsTable {
    pub fn new(layout: symbols::tls::Tls) -> TlsTable {
        TlsTable(Rc::new(RefCell::new((HashMap::new(), layout))))
    }

    /// The threads' pointers now.
    pub fn publish(&self, pointers: HashMap<u32, u64>) {
        self.0.borrow_mut().0 = pointers;
    }

    /// The reply to `qGetTLSAddr:THREAD,OFFSET,LM`'s arguments: the address
    /// in hex, or `E01` for a thread or module it does not know.
    fn reply(&self, args: &str) -> String {
        let mut it = args.split(',');
        let (Some(thread), Some(offset), Some(_lm)) = (it.next(), it.next(), it.next()) else {
            return "E01".into();
        };
        // `p1.3e9` (multiprocess) or `3e9`.
        let tid = thread.rsplit('.').next().unwrap_or(thread);
        let (Ok(tid), Ok(offset)) = (
            u32::from_str_radix(tid, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            return "E01".into();
        };
        let t = self.0.borrow();
        match t.0.get(&tid).and_then(|tp| t.1.address(*tp, offset)) {
            Some(a) => format!("{a:x}"),
            None => "E01".into(),
        }
    }
}

/// The connection to gdb, with `qGetTLSAddr` answered here.
pub struct TlsConn {
    inner: Box<dyn ConnectionExt<Error = io::Error>>,
    tls: TlsTable,
    /// Bytes read for the stub, not yet given to it.
    pending: VecDeque<u8>,
    /// After `QStartNoAckMode`, nothing is acknowledged.
    no_ack: bool,
}

impl TlsConn {
    pub fn new(inner: Box<dyn ConnectionExt<Error = io::Error>>, tls: TlsTable) -> TlsConn {
        TlsConn {
            inner,
            tls,
            pending: VecDeque::new(),
            no_ack: false,
        }
    }

    /// Reads one packet after its `$`: the payload and `#xx`.
    fn packet(&mut self) -> io::Result<Vec<u8>> {
        let mut raw = Vec::new();
        loop {
            let b = self.inner.read()?;
            raw.push(b);
            if b == b'#' {
                raw.push(self.inner.read()?);
                raw.push(self.inner.read()?);
                return Ok(raw);
            }
            if raw.len() > 1 << 16 {
                // Not a packet we answer: the stub judges it.
                return Ok(raw);
            }
        }
    }

    fn send(&mut self, payload: &str) -> io::Result<()> {
        let sum = payload.bytes().fold(0u8, |s, b| s.wrapping_add(b));
        if !self.no_ack {
            self.inner.write(b'+')?;
        }
        self.inner
            .write_all(format!("${payload}#{sum:02x}").as_bytes())?;
        self.inner.flush()
    }
}

impl Connection for TlsConn {
    type Error = io::Error;

    fn write(&mut self, byte: u8) -> io::Result<()> {
        self.inner.write(byte)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn on_session_start(&mut self) -> io::Result<()> {
        self.inner.on_session_start()
    }
}

impl ConnectionExt for TlsConn {
    fn read(&mut self) -> io::Result<u8> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Ok(b);
            }
            let b = self.inner.read()?;
            if b != b'$' {
                return Ok(b);
            }
            let raw = self.packet()?;
            let payload = &raw[..raw.len().saturating_sub(3)];
            if let Some(args) = payload.strip_prefix(b"qGetTLSAddr:") {
                let reply = self.tls.reply(&String::from_utf8_lossy(args));
                self.send(&reply)?;
                continue;
            }
            if payload == b"QStartNoAckMode" {
                self.no_ack = true;
            }
            self.pending.push_back(b'$');
            self.pending.extend(raw);
        }
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        match self.pending.front() {
            Some(b) => Ok(Some(*b)),
            None => self.inner.peek(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_name_the_address_or_an_error() {
        let t = TlsTable::new(symbols::tls::Tls::default());
        t.publish([(0x3e8, 0x7000)].into());
        // No PT_TLS known: an error, as for bad arguments.
        assert_eq!(t.reply("p1.3e8,20,0"), "E01");
        assert_eq!(t.reply("zz,20,0"), "E01");
        assert_eq!(t.reply("3e8,20"), "E01");
    }
}
