//! Minimal HTTP serving for `/metrics`, `/healthz` and small JSON endpoints.
//!
//! Both binaries expose metrics the same way; this is the single place that
//! knows hyper. Handlers are plain synchronous functions from a [`Request`]
//! summary to a [`Reply`], which keeps them testable without a socket.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Content type of the OpenMetrics text exposition that prometheus-client writes.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a handler needs to know about a request.
#[derive(Debug, Clone)]
pub struct Request {
    /// HTTP method; handlers refuse anything but the methods they serve.
    pub method: Method,
    /// URI path without the query string, used for routing.
    pub path: String,
    /// Raw query string (no leading `?`), for endpoints that take parameters.
    pub query: Option<String>,
    /// `Accept` header, used to choose the exposition format.
    pub accept: Option<String>,
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status line sent to the client.
    pub status: StatusCode,
    /// `Content-Type` header; static because every endpoint has a fixed one.
    pub content_type: &'static str,
    /// The whole body: our responses are small or already encoded in full.
    pub body: Bytes,
}

impl Reply {
    /// A reply with any status and content type.
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        Reply {
            status,
            content_type,
            body: body.into(),
        }
    }
    /// A plain-text reply, for errors and human-readable endpoints.
    pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Self {
        Reply::new(status, "text/plain; charset=utf-8", body)
    }
    /// A `200 OK` JSON reply, for machine-readable endpoints.
    pub fn json(body: impl Into<Bytes>) -> Self {
        Reply::new(StatusCode::OK, "application/json", body)
    }
    /// The `404` every router answers for paths it does not serve.
    pub fn not_found(path: &str) -> Self {
        Reply::text(StatusCode::NOT_FOUND, format!("no such endpoint: {path}\n"))
    }
}

/// Bind `addr`, with an error that names the address (a busy port is the most
/// common start-up failure operators hit).
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

/// Serve `handler` on `listener` until `shutdown` completes. Each connection
/// gets its own task; a slow or broken client cannot stall the others, and
/// request headers must arrive within 10 s.
pub async fn serve<H, S>(listener: TcpListener, handler: H, shutdown: S)
where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
    S: Future<Output = ()>,
{
    let handler = Arc::new(handler);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("http accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let handler = handler.clone();
                async move {
                    let r = Request {
                        method: req.method().clone(),
                        path: req.uri().path().to_string(),
                        query: req.uri().query().map(str::to_string),
                        accept: req
                            .headers()
                            .get(hyper::header::ACCEPT)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string),
                    };
                    let reply = handler(r);
                    let resp = Response::builder()
                        .status(reply.status)
                        .header(hyper::header::CONTENT_TYPE, reply.content_type)
                        .body(Full::new(reply.body))
                        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10));
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                tracing::debug!("http connection from {peer} ended with error: {e}");
            }
        });
    }
}
