//! A hostile Prometheus on loopback: every query gets `200 OK` and a valid
//! start of a vector answer that goes on for `answer_bytes`, without a
//! `Content-Length`, as fast as the client reads. It stands in for a
//! compromised or broken store (or a proxy in front of one) that makes
//! every answer of a cycle huge at once.

use anyhow::Result;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once at most; more wait in the backlog.
const MAX_CONNECTIONS: usize = 64;

const PREFIX: &str = r#"{"status":"success","data":{"resultType":"vector","result":["#;
const ITEM: &str = r#"{"metric":{"src_node":"node-0001","dst_node":"node-0002","protocol":"udp"},"value":[1700000000,"12"]},"#;

/// The flooding store; its threads end with the test process.
pub struct FloodingStore {
    /// Where it listens.
    pub addr: SocketAddr,
    requests: Arc<AtomicU64>,
}

impl FloodingStore {
    /// Listen on a free loopback port; answer every request with
    /// `answer_bytes` of JSON.
    pub fn start(answer_bytes: usize) -> Result<FloodingStore> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let counted = requests.clone();
        let open = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                while open.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                    std::thread::sleep(Duration::from_millis(10));
                }
                open.fetch_add(1, Ordering::AcqRel);
                let (open, counted) = (open.clone(), counted.clone());
                std::thread::spawn(move || {
                    if read_request(&conn).is_some() {
                        counted.fetch_add(1, Ordering::Relaxed);
                        flood(conn, answer_bytes);
                    }
                    open.fetch_sub(1, Ordering::AcqRel);
                });
            }
        });
        Ok(FloodingStore { addr, requests })
    }

    /// Its root URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Read one request's head and its `Content-Length` body; `None` when the
/// client went away first.
fn read_request(conn: &TcpStream) -> Option<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(conn);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0u8; len.min(1 << 20)];
    reader.read_exact(&mut body).ok()
}

/// Write the answer until `total` bytes went out or the client hung up.
fn flood(mut conn: TcpStream, total: usize) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
    let block = ITEM.repeat(600);
    if conn.write_all(head.as_bytes()).is_err() || conn.write_all(PREFIX.as_bytes()).is_err() {
        return;
    }
    let mut sent = PREFIX.len();
    while sent < total {
        if conn.write_all(block.as_bytes()).is_err() {
            return;
        }
        sent += block.len();
    }
}
