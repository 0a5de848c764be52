//! Socket addresses: parsing `struct sockaddr_un`, `sockaddr_in` and
//! `sockaddr_in6` from the guest, writing them back, and showing them in
//! events.

use super::super::errno::*;
use serde::{Deserialize, Serialize};

pub const AF_UNSPEC: u16 = 0;
pub const AF_UNIX: u16 = 1;
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

/// Longest `sun_path`.
const UNIX_PATH_MAX: usize = 108;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Addr {
    /// A path (`sun_path`), or an abstract name (its leading NUL kept);
    /// empty: unnamed.
    Unix(Vec<u8>),
    /// An IPv4 address (in the first 4 bytes) or an IPv6 one, and a port.
    Inet { v6: bool, ip: [u8; 16], port: u16 },
}

impl Addr {
    pub fn v4(ip: [u8; 4], port: u16) -> Addr {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&ip);
        Addr::Inet {
            v6: false,
            ip: a,
            port,
        }
    }

    pub fn port(&self) -> u16 {
        match self {
            Addr::Inet { port, .. } => *port,
            Addr::Unix(_) => 0,
        }
    }

    pub fn with_port(&self, p: u16) -> Addr {
        match self {
            Addr::Inet { v6, ip, .. } => Addr::Inet {
                v6: *v6,
                ip: *ip,
                port: p,
            },
            a => a.clone(),
        }
    }

    /// The IPv4 address this is, if it is one (an IPv4-mapped IPv6 one too).
    pub fn ipv4(&self) -> Option<[u8; 4]> {
        match self {
            Addr::Inet { v6: false, ip, .. } => Some([ip[0], ip[1], ip[2], ip[3]]),
            Addr::Inet { v6: true, ip, .. }
                if ip[..10].iter().all(|b| *b == 0) && ip[10] == 0xff && ip[11] == 0xff =>
            {
                Some([ip[12], ip[13], ip[14], ip[15]])
            }
            _ => None,
        }
    }

    /// 0.0.0.0 or ::.
    pub fn is_wildcard(&self) -> bool {
        match self {
            Addr::Inet { v6: false, ip, .. } => ip[..4] == [0; 4],
            Addr::Inet { v6: true, ip, .. } => *ip == [0; 16],
            Addr::Unix(_) => false,
        }
    }

    /// An address of this machine: 127.0.0.0/8, ::1 (and the wildcards,
    /// which connect to the machine itself, as on Linux).
    pub fn is_local(&self) -> bool {
        if self.is_wildcard() {
            return true;
        }
        if let Some(v4) = self.ipv4() {
            return v4[0] == 127;
        }
        matches!(self, Addr::Inet { v6: true, ip, .. } if *ip == {
            let mut l = [0u8; 16];
            l[15] = 1;
            l
        })
    }

    /// The same host address (IPv4-mapped ones equal to IPv4 ones).
    pub fn same_host(&self, other: &Addr) -> bool {
        match (self.ipv4(), other.ipv4()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => match (self, other) {
                (Addr::Inet { ip: a, .. }, Addr::Inet { ip: b, .. }) => a == b,
                _ => false,
            },
            _ => false,
        }
    }

    /// `struct sockaddr_*` bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Addr::Unix(p) => {
                let mut b = AF_UNIX.to_le_bytes().to_vec();
                b.extend_from_slice(p);
                if !p.is_empty() && p[0] != 0 {
                    b.push(0);
                }
                b
            }
            Addr::Inet {
                v6: false,
                ip,
                port,
            } => {
                let mut b = vec![0u8; 16];
                b[..2].copy_from_slice(&AF_INET.to_le_bytes());
                b[2..4].copy_from_slice(&port.to_be_bytes());
                b[4..8].copy_from_slice(&ip[..4]);
                b
            }
            Addr::Inet { v6: true, ip, port } => {
                let mut b = vec![0u8; 28];
                b[..2].copy_from_slice(&AF_INET6.to_le_bytes());
                b[2..4].copy_from_slice(&port.to_be_bytes());
                b[8..24].copy_from_slice(ip);
                b
            }
        }
    }
}

/// The address in `raw` (the guest's `addrlen` bytes) for a socket of `domain`.
pub fn parse(domain: u16, raw: &[u8]) -> SysResult<Addr> {
    if raw.len() < 2 {
        return Err(EINVAL);
    }
    let family = u16::from_le_bytes([raw[0], raw[1]]);
    match family {
        AF_UNIX => {
            if domain != AF_UNIX {
                return Err(EAFNOSUPPORT);
            }
            let path = &raw[2..raw.len().min(2 + UNIX_PATH_MAX)];
            if path.first() == Some(&0) {
                return Ok(Addr::Unix(path.to_vec()));
            }
            let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
            Ok(Addr::Unix(path[..end].to_vec()))
        }
        AF_INET => {
            if domain == AF_UNIX {
                return Err(EAFNOSUPPORT);
            }
            if raw.len() < 16 {
                return Err(EINVAL);
            }
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let a = Addr::v4([raw[4], raw[5], raw[6], raw[7]], port);
            if domain == AF_INET6 {
                // An IPv6 socket takes IPv4 addresses only as mapped ones.
                return Err(EAFNOSUPPORT);
            }
            Ok(a)
        }
        AF_INET6 => {
            if domain != AF_INET6 {
                return Err(EAFNOSUPPORT);
            }
            if raw.len() < 24 {
                return Err(EINVAL);
            }
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&raw[8..24]);
            Ok(Addr::Inet {
                v6: true,
                ip,
                port: u16::from_be_bytes([raw[2], raw[3]]),
            })
        }
        _ => Err(EAFNOSUPPORT),
    }
}

/// How an address reads in events: `127.0.0.1:8080`, `[::1]:80`, `"/tmp/s"`.
pub fn show(a: &Addr) -> String {
    match a {
        Addr::Unix(p) if p.is_empty() => "unix:unnamed".to_string(),
        Addr::Unix(p) if p[0] == 0 => format!("unix:@{}", String::from_utf8_lossy(&p[1..])),
        Addr::Unix(p) => format!("unix:{}", String::from_utf8_lossy(p)),
        Addr::Inet {
            v6: false,
            ip,
            port,
        } => {
            format!("{}.{}.{}.{}:{port}", ip[0], ip[1], ip[2], ip[3])
        }
        Addr::Inet { v6: true, ip, port } => {
            let ip = std::net::Ipv6Addr::from(*ip);
            format!("[{ip}]:{port}")
        }
    }
}

/// A guest's raw address as an event shows it (any family).
pub fn show_raw(raw: &[u8]) -> Option<String> {
    if raw.len() < 2 {
        return None;
    }
    let family = u16::from_le_bytes([raw[0], raw[1]]);
    let domain = match family {
        AF_UNIX | AF_INET | AF_INET6 => family,
        _ => return None,
    };
    parse(domain, raw).ok().map(|a| show(&a))
}
