//! A tiny HTTP sink on loopback standing in for the paging and chat
//! endpoints an Alertmanager config points at, and a way to search what it
//! received.

use crate::netns::Netns;
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A tiny HTTP sink on loopback standing in for the paging/chat endpoints
/// the shipped config points at: records (path, body) of every POST.
pub struct Sink {
    /// Where it listens; put it in the config under test.
    pub addr: SocketAddr,
    got: Arc<Mutex<Vec<(String, String)>>>,
}

impl Sink {
    /// Listen on a free loopback port and record every POST.
    pub fn start() -> Result<Sink> {
        Sink::serve(TcpListener::bind("127.0.0.1:0")?)
    }

    /// Listen on `addr` inside namespace `ns` (a fabric's monitoring
    /// namespace, where the shipped receivers' placeholder port is free).
    pub fn start_in(ns: &Netns, addr: SocketAddr) -> Result<Sink> {
        let listener = ns
            .run_in(move || TcpListener::bind(addr))?
            .with_context(|| format!("bind the sink to {addr} in {}", ns.name()))?;
        Sink::serve(listener)
    }

    fn serve(listener: TcpListener) -> Result<Sink> {
        let addr = listener.local_addr()?;
        let got = Arc::new(Mutex::new(Vec::new()));
        let store = got.clone();
        // The thread ends with the test process; it only ever serves loopback.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reader = BufReader::new(conn.try_clone().expect("clone socket"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                store
                    .lock()
                    .unwrap()
                    .push((path, String::from_utf8_lossy(&body).into_owned()));
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Ok(Sink { addr, got })
    }

    /// Every (path, body) received so far.
    pub fn posts(&self) -> Vec<(String, String)> {
        self.got.lock().unwrap().clone()
    }

    /// Alertmanager webhook notifications received so far (parsed JSON,
    /// with the receiver's path under `"path"`), leaving out the chat copies
    /// the shipped receivers also send (`/slack`).
    pub fn webhooks(&self) -> Vec<serde_json::Value> {
        self.posts()
            .into_iter()
            .filter(|(path, _)| !path.ends_with("/slack"))
            .filter_map(|(path, body)| {
                let mut v: serde_json::Value = serde_json::from_str(&body).ok()?;
                v.as_object_mut()?.insert("path".into(), path.into());
                Some(v)
            })
            .collect()
    }
}

/// Every string inside a JSON body, joined by newlines (Go escapes `>` and
/// `<` in JSON, so raw bodies cannot be searched for `a->b`).
pub fn json_strings(body: &str) -> String {
    fn walk(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => walk(&v, &mut out),
        Err(_) => out.push_str(body),
    }
    out
}
