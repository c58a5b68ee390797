//! Minimal HTTP serving for `/metrics`, `/healthz` and small JSON endpoints.
//!
//! Both binaries expose metrics the same way; this is the single place that
//! knows hyper. Handlers are plain synchronous functions from a [`Request`]
//! summary to a [`Reply`], which keeps them testable without a socket.
//! With a web configuration ([`crate::web`]) the server speaks TLS and
//! checks the rate limit and basic authentication before any handler runs.

use crate::conns::{Conn, Conns};
use crate::ratelimit::TokenBucket;
use crate::web::{Refusal, WebSource};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

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
    /// Further headers (`Allow` of a 405, `Retry-After` of a 429, ...).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Reply {
    /// A reply with any status and content type.
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        Reply {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
        }
    }
    /// This reply with one more header.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }
    /// `405` naming the methods the endpoint serves (`Allow`, RFC 9110).
    pub fn method_not_allowed(allow: &'static str) -> Self {
        Reply::text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method not allowed: use {allow}\n"),
        )
        .with_header(hyper::header::ALLOW, HeaderValue::from_static(allow))
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

/// Resource bounds of [`serve_with`]. Every connection holds a file
/// descriptor and a task, so an unbounded server lets idle clients exhaust
/// the process (and, in the exporter, make probes fail for local reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once. At the limit the server accepts one
    /// more and closes the oldest idle connection to make room for it (see
    /// [`crate::conns`]); when none is idle, new connections wait in the
    /// kernel's backlog until an open one ends.
    pub max_connections: usize,
    /// Most requests being answered at once, over all connections.
    pub max_in_flight: usize,
    /// Time a client has to send complete request headers, counted from
    /// the connection's start and again whenever a kept-alive connection
    /// waits for its next request: a silent or idle connection is closed
    /// after it.
    pub header_timeout: Duration,
}

/// Default of [`Limits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default of [`Limits::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;
/// Default of [`Limits::header_timeout`].
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

/// Serve `handler` on `listener` with the default [`Limits`] until
/// `shutdown` completes.
pub async fn serve<H, S>(listener: TcpListener, handler: H, shutdown: S)
where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
    S: Future<Output = ()>,
{
    serve_with(listener, handler, Limits::default(), shutdown).await;
}

/// Serve `handler` on `listener` until `shutdown` completes. Each connection
/// gets its own task, so a slow or broken client cannot stall the others;
/// `limits` bounds connections, requests in flight and header/idle time.
pub async fn serve_with<H, S>(listener: TcpListener, handler: H, limits: Limits, shutdown: S)
where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
    S: Future<Output = ()>,
{
    serve_web(listener, handler, limits, None, shutdown).await;
}

/// [`serve_with`] under a web configuration (`--web.config.file`): TLS
/// when it has `tls_server_config` (the handshake must finish within
/// `limits.header_timeout`), and every request passes its rate limit and
/// basic authentication before `handler` sees it.
pub async fn serve_web<H, S>(
    listener: TcpListener,
    handler: H,
    limits: Limits,
    web: Option<Arc<WebSource>>,
    shutdown: S,
) where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
    S: Future<Output = ()>,
{
    let handler = Arc::new(handler);
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let in_flight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let conns = Arc::new(Conns::default());
    let closed_log = Mutex::new(ClosedLog::new());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    tracing::warn!("http accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // At the limit, the one connection just accepted (one descriptor
        // over) waits for the oldest idle one to close.
        let permit = match connections.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if conns.close_oldest_idle() {
                    closed_log
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .closed(limits.max_connections);
                }
                tokio::select! {
                    _ = &mut shutdown => return,
                    p = connections.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                }
            }
        };
        let conn = conns.open();
        let svc = service(
            handler.clone(),
            in_flight.clone(),
            web.clone(),
            conn.clone(),
        );
        let tls = web.as_ref().filter(|w| w.serves_tls()).cloned();
        let timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            serve_one(stream, peer, tls, svc, timeout, conn).await;
        });
    }
}

/// The log of idle connections closed to admit new ones: one line a
/// minute at most, with the count since the last.
struct ClosedLog {
    bucket: TokenBucket,
    unlogged: u64,
}

impl ClosedLog {
    fn new() -> ClosedLog {
        ClosedLog {
            bucket: TokenBucket::every(Duration::from_secs(60), 1, Instant::now()),
            unlogged: 0,
        }
    }

    fn closed(&mut self, limit: usize) {
        self.unlogged += 1;
        if self.bucket.take(Instant::now()) {
            tracing::warn!(
                closed = self.unlogged,
                limit,
                "HTTP connection limit reached: closed the oldest idle connection(s) to admit \
                 new ones (logged at most once a minute)"
            );
            self.unlogged = 0;
        }
    }
}

/// One accepted connection: the TLS handshake when the web configuration
/// asks for it, then HTTP. Closed early when the server needs its slot
/// while it is idle (a handshake not yet started counts as idle).
async fn serve_one<Svc>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<WebSource>>,
    svc: Svc,
    timeout: Duration,
    conn: Conn,
) where
    Svc: hyper::service::HttpService<Incoming, ResBody = Full<Bytes>>,
    Svc::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(web) = tls else {
        return connection(TokioIo::new(stream), svc, timeout, peer, &conn).await;
    };
    let Some(config) = web.tls_config() else {
        return; // the web config does not load: refuse (logged there)
    };
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
    let handshake = tokio::select! {
        _ = conn.closing() => return,
        h = tokio::time::timeout(timeout, accept) => h,
    };
    match handshake {
        Ok(Ok(tls)) => connection(TokioIo::new(tls), svc, timeout, peer, &conn).await,
        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
        Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
    }
}

/// Time a connection asked to close has to finish the response it is
/// writing (the slot it frees waits for it).
const EVICTION_GRACE: Duration = Duration::from_secs(2);

/// Serve one connection (plain or TLS) with hyper's HTTP/1.1.
async fn connection<I, Svc>(
    io: I,
    svc: Svc,
    header_timeout: Duration,
    peer: SocketAddr,
    conn: &Conn,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    Svc: hyper::service::HttpService<Incoming, ResBody = Full<Bytes>>,
    Svc::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let serving = builder.serve_connection(io, svc);
    tokio::pin!(serving);
    let ended = tokio::select! {
        r = serving.as_mut() => r,
        _ = conn.closing() => {
            if !conn.served() {
                return; // nothing to finish: close now
            }
            // Kept alive: closes at once; a response being written (or the
            // next request's headers) may finish within the grace.
            serving.as_mut().graceful_shutdown();
            match tokio::time::timeout(EVICTION_GRACE, serving).await {
                Ok(r) => r,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!("http connection from {peer} ended with error: {e}");
    }
}

/// The hyper service of one connection: summarise the request, wait for an
/// in-flight slot, pass the web configuration's gate, run the handler.
fn service<H>(
    handler: Arc<H>,
    in_flight: Arc<Semaphore>,
    web: Option<Arc<WebSource>>,
    conn: Conn,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = Response<Full<Bytes>>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, std::convert::Infallible>> + Send,
> + Clone
where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
{
    service_fn(move |req: hyper::Request<Incoming>| {
        let handler = handler.clone();
        let in_flight = in_flight.clone();
        let web = web.clone();
        // Busy from the request's headers to its response.
        let busy = conn.busy();
        async move {
            let _busy = busy;
            let r = summary(&req);
            let gzip = crate::negotiate::accepts_gzip(
                req.headers()
                    .get(hyper::header::ACCEPT_ENCODING)
                    .and_then(|v| v.to_str().ok()),
            );
            let authorization = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .map(|v| v.as_bytes().to_vec());
            let reply = match in_flight.acquire_owned().await {
                Ok(_slot) => match &web {
                    None => handler(r),
                    Some(w) => gated(w, authorization.as_deref(), || handler(r)).await,
                },
                Err(_) => Reply::text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            };
            let reply = if gzip { gzipped(reply) } else { reply };
            Ok::<_, std::convert::Infallible>(response(reply))
        }
    })
}

/// The handler's reply if the web configuration's gate lets the request
/// through, else the refusal; either with the configured headers.
async fn gated(
    web: &WebSource,
    authorization: Option<&[u8]>,
    run: impl FnOnce() -> Reply,
) -> Reply {
    let gate = web.gate(authorization).await;
    let mut reply = match gate.refusal {
        None => run(),
        Some(Refusal::Broken) => Reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the web configuration does not load (see the log)\n",
        ),
        Some(Refusal::TooMany) => {
            Reply::text(StatusCode::TOO_MANY_REQUESTS, "rate limit exceeded\n")
                .with_header(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"))
        }
        Some(Refusal::Unauthorized) => Reply::text(StatusCode::UNAUTHORIZED, "unauthorized\n")
            .with_header(
                hyper::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic"),
            ),
    };
    reply.headers.extend(gate.headers);
    reply
}

/// Bodies smaller than this go out as they are: gzip would save little.
const GZIP_MIN_BYTES: usize = 1024;

/// `reply` gzip-coded (the client accepts it), as promhttp does for
/// `/metrics`: large expositions shrink several times over the wire.
fn gzipped(mut reply: Reply) -> Reply {
    use std::io::Write as _;
    if reply.body.len() < GZIP_MIN_BYTES {
        return reply;
    }
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(reply.body.len() / 4),
        flate2::Compression::fast(),
    );
    let Ok(body) = enc.write_all(&reply.body).and_then(|()| enc.finish()) else {
        return reply;
    };
    reply.body = body.into();
    reply.headers.push((
        hyper::header::CONTENT_ENCODING,
        HeaderValue::from_static("gzip"),
    ));
    reply.headers.push((
        hyper::header::VARY,
        HeaderValue::from_static("Accept-Encoding"),
    ));
    reply
}

fn response(reply: Reply) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(reply.status)
        .header(hyper::header::CONTENT_TYPE, reply.content_type);
    for (name, value) in reply.headers {
        b = b.header(name, value);
    }
    b.body(Full::new(reply.body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn summary(req: &hyper::Request<Incoming>) -> Request {
    Request {
        method: req.method().clone(),
        path: req.uri().path().to_string(),
        query: req.uri().query().map(str::to_string),
        accept: req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    }
}
