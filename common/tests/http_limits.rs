//! The shared HTTP server under idle-connection floods: the connection
//! limit keeps its descriptors bounded and the header timeout frees slots,
//! so a real request is still answered.

use hyper::StatusCode;
use skeletonhunter_common::http::{serve_with, Limits, Reply};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn start(limits: Limits) -> (SocketAddr, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(serve_with(
        listener,
        |_req| Reply::text(StatusCode::OK, "ok\n"),
        limits,
        std::future::pending(),
    ));
    (addr, rt)
}

/// One `GET /` on a fresh connection; the status line, or an error.
fn get(addr: SocketAddr, deadline: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, deadline)?;
    s.set_read_timeout(Some(deadline))?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out.lines().next().unwrap_or_default().to_string())
}

#[test]
fn idle_connections_beyond_the_limit_do_not_block_a_scrape() {
    let limits = Limits {
        max_connections: 8,
        max_in_flight: 2,
        header_timeout: Duration::from_millis(500),
    };
    let (addr, _rt) = start(limits);
    // Five times the limit, all silent.
    let idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        match get(addr, Duration::from_secs(5)) {
            Ok(line) if !line.is_empty() => break line,
            _ if Instant::now() < deadline => {}
            r => panic!("no answer with {} idle connections: {r:?}", idle.len()),
        }
    };
    assert!(status.contains("200"), "{status}");
    eprintln!(
        "answered after {:?} with {} idle connections open",
        started.elapsed(),
        idle.len()
    );
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_header_timeout() {
    let limits = Limits {
        max_connections: 4,
        max_in_flight: 4,
        header_timeout: Duration::from_millis(300),
    };
    let (addr, _rt) = start(limits);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Kept alive and silent: the server must close it (read returns 0)
    // well before our own 10 s read timeout.
    let t = Instant::now();
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "connection still open");
    assert!(t.elapsed() < Duration::from_secs(9), "{:?}", t.elapsed());
}
