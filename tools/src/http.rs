//! A plain HTTP/1.0 client on std sockets: enough for the Prometheus and
//! Alertmanager APIs and our own endpoints, and usable on a thread that has
//! entered a network namespace (which an async client pool is not).

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A plain HTTP/1.0 request returning (status, body); `body` is
/// `(content type, bytes)`. Enough for the Prometheus and Alertmanager APIs.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
) -> Result<(u16, String)> {
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some((ct, b)) = body {
        req.push_str(&format!(
            "Content-Type: {ct}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    if let Some((_, b)) = body {
        s.write_all(b)?;
    }
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .with_context(|| format!("read from {addr}{path}"))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP response from {addr}{path}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("malformed HTTP status line from {addr}{path}"))?;
    Ok((status, body.to_string()))
}

/// Percent-encode a query-string value (RFC 3986 unreserved kept).
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urlencode_escapes_promql() {
        assert_eq!(
            urlencode("rate(x{a=\"b c\"}[1m])"),
            "rate%28x%7Ba%3D%22b%20c%22%7D%5B1m%5D%29"
        );
    }
}
