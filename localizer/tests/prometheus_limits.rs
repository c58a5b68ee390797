//! A Prometheus answer is bounded in size and time: a huge or endless body
//! fails the query (`too_large`) without the process growing with it, and
//! a trickling body fails at the request's deadline (`timeout`). The server is a thread
//! on 127.0.0.1 that writes what a broken or hostile Prometheus would.

use skeletonhunter_localizer::clients::prometheus::{QueryError, QueryFailure};
use skeletonhunter_localizer::clients::Endpoint;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MB: usize = 1 << 20;
const PREFIX: &str = r#"{"status":"success","data":{"resultType":"vector","result":["#;
const ITEM: &str = r#"{"metric":{"src_node":"node-0001","dst_node":"node-0002","protocol":"udp"},"value":[1700000000,"12"]},"#;

/// Serve one connection: read the request head, then hand the socket to
/// `respond`.
fn serve_once(respond: impl FnOnce(&mut TcpStream) + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&b[..n]),
            }
        }
        respond(&mut s);
    });
    addr
}

/// Write vector items until `total` bytes went out or the client hung up.
fn stream_items(s: &mut TcpStream, total: usize) {
    let block = ITEM.repeat(600);
    let mut sent = PREFIX.len();
    if s.write_all(PREFIX.as_bytes()).is_err() {
        return;
    }
    while sent < total {
        if s.write_all(block.as_bytes()).is_err() {
            return;
        }
        sent += block.len();
    }
}

/// A valid vector answer of about `total` bytes, in memory.
fn valid_answer(total: usize) -> String {
    let mut body = String::with_capacity(total + 64);
    body.push_str(PREFIX);
    let mut i = 0usize;
    while body.len() < total {
        body.push_str(&format!(
            r#"{{"metric":{{"src_node":"n{i}","dst_node":"m{i}"}},"value":[1700000000,"{i}"]}},"#
        ));
        i += 1;
    }
    body.pop();
    body.push_str("]}}");
    body
}

/// Peak resident memory of this process so far, in bytes.
fn vm_hwm() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn client(addr: SocketAddr, timeout: Duration, limit: usize) -> Endpoint {
    Endpoint::new(&format!("http://{addr}"), timeout, &Default::default())
        .unwrap()
        .max_response(limit)
}

/// Serve `head`, then 200 MB of vector items, to a query bounded to `limit`
/// bytes: it must fail as too large. Its error and how long it took.
async fn refused_as_too_large(head: &'static str, limit: usize) -> (QueryError, Duration) {
    let addr = serve_once(move |s| {
        if s.write_all(head.as_bytes()).is_ok() {
            stream_items(s, 200 * MB);
        }
    });
    let started = Instant::now();
    let err = client(addr, Duration::from_secs(30), limit)
        .instant("up", None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), QueryFailure::TooLarge, "{err}");
    (err, started.elapsed())
}

/// Memory is measured by one test, case after case, so no other test of
/// this binary raises the peak meanwhile.
#[tokio::test]
async fn huge_answers_fail_as_too_large_in_bounded_memory() {
    let limit = 8 * MB;
    let before = vm_hwm();

    // 1. 200 MB announced: refused from the Content-Length alone.
    let (err, announced) = refused_as_too_large(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 209715200\r\n\r\n",
        limit,
    )
    .await;
    assert_eq!(err.reason().as_str(), "too_large");
    assert!(err.to_string().contains("--max-response-size"), "{err}");

    // 2. 200 MB without a length (read to EOF): abandoned at the limit.
    let (_, streamed) = refused_as_too_large(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        limit,
    )
    .await;
    let growth = vm_hwm().saturating_sub(before);
    eprintln!(
        "200 MB answers against an 8 MiB limit: announced refused in {announced:?}, \
         streamed abandoned in {streamed:?}; peak RSS growth {} MiB",
        growth / MB as u64
    );
    assert!(
        growth < 64 * MB as u64,
        "peak RSS grew by {growth} bytes for an 8 MiB limit"
    );

    // 3. A valid 16 MB answer under a 32 MiB limit decodes in one pass.
    let body = valid_answer(16 * MB);
    let series = body.matches("\"metric\"").count();
    let before = vm_hwm();
    let addr = serve_once(move |s| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body.as_bytes());
    });
    let started = Instant::now();
    let samples = client(addr, Duration::from_secs(60), 32 * MB)
        .instant("up", None)
        .await
        .unwrap();
    assert_eq!(samples.len(), series);
    let growth = vm_hwm().saturating_sub(before);
    eprintln!(
        "valid 16 MiB answer ({series} series) decoded in {:?}; peak RSS growth {} MiB",
        started.elapsed(),
        growth / MB as u64
    );
    // Body (16 MiB) + its copy in the server thread + the series decoded.
    assert!(growth < 256 * MB as u64, "peak RSS grew by {growth} bytes");
}

#[tokio::test]
async fn a_trickling_answer_fails_at_the_deadline() {
    let addr = serve_once(|s| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
        if s.write_all(head.as_bytes()).is_err() {
            return;
        }
        // One byte every 20 ms, for at most 30 s or until the client leaves.
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if s.write_all(b" ").and_then(|_| s.flush()).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = client(addr, timeout, 64 << 20)
        .instant("up", None)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.reason(), QueryFailure::Timeout, "{err}");
    assert!(err.to_string().contains("within 1s"), "{err}");
    assert!(
        took >= timeout && took < timeout * 3,
        "took {took:?} with a {timeout:?} timeout"
    );
}
