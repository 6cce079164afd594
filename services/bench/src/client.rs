//! A lean HTTP/1.1 client for loopback targets: one keep-alive connection
//! per caller, `TCP_NODELAY` on, no pool, no TLS, no redirects.
//!
//! The load generator shares two cores with the server it measures, so
//! every cycle it spends is one the server does not get: hyper's
//! connection-level API is used directly (no pool bookkeeping), and
//! non-loopback targets are refused outright (this suite must never load
//! someone else's machine).

use crate::error::{BenchError, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};

/// Longest any single setup call may take (not load requests: those are
/// measured, never cut short).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed `http://host:port/path` on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    /// The `Host` header value (`host:port` as given).
    pub authority: String,
    /// Path and query, at least `/`.
    pub path: String,
}

impl Target {
    /// Parses `url`, refusing anything that is not plain HTTP to a
    /// loopback address (by literal address or by every address the name
    /// resolves to).
    pub fn parse(url: &str) -> Result<Self> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            BenchError::Usage(format!(
                "target {url:?}: only plain http:// URLs on loopback are supported"
            ))
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(BenchError::Usage(format!("target {url:?}: bad authority")));
        }
        let with_port = if authority.ends_with(']') || !authority.contains(':') {
            format!("{authority}:80")
        } else {
            authority.to_owned()
        };
        let addrs: Vec<SocketAddr> = with_port
            .to_socket_addrs()
            .map_err(|e| BenchError::Usage(format!("target {url:?}: cannot resolve: {e}")))?
            .collect();
        let Some(first) = addrs.first().copied() else {
            return Err(BenchError::Usage(format!(
                "target {url:?}: resolves to no address"
            )));
        };
        if let Some(bad) = addrs.iter().find(|a| !is_loopback(a.ip())) {
            return Err(BenchError::Usage(format!(
                "target {url:?} resolves to {bad}, which is not a loopback address: \
                 this suite only loads the machine it runs on"
            )));
        }
        Ok(Self {
            addr: first,
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    /// The same host with another path.
    pub fn with_path(&self, path: &str) -> Self {
        Self {
            path: path.to_owned(),
            ..self.clone()
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}{}", self.authority, self.path)
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// A response with its whole body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Result<serde_json::Value> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as text, for error messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One keep-alive HTTP/1.1 connection.
#[derive(Debug)]
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    authority: HeaderValue,
}

impl Connection {
    pub async fn open(target: &Target) -> Result<Self> {
        let stream = TcpStream::connect(target.addr)
            .await
            .map_err(BenchError::io(format!("connect {}", target.addr)))?;
        Self::over(target, stream).await
    }

    /// [`Self::open`] from the loopback address `source` (any of
    /// 127.0.0.0/8 on Linux): a client the server tells apart from
    /// others on this machine by its address.
    pub async fn open_from(target: &Target, source: IpAddr) -> Result<Self> {
        let socket = match source {
            IpAddr::V4(_) => TcpSocket::new_v4(),
            IpAddr::V6(_) => TcpSocket::new_v6(),
        }
        .map_err(BenchError::io("create a socket"))?;
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(BenchError::io(format!("bind {source}")))?;
        let stream = socket
            .connect(target.addr)
            .await
            .map_err(BenchError::io(format!(
                "connect {} from {source}",
                target.addr
            )))?;
        Self::over(target, stream).await
    }

    async fn over(target: &Target, stream: TcpStream) -> Result<Self> {
        // Without it a response that arrives in more than one segment waits
        // on a delayed ACK (design.md, section 6).
        stream
            .set_nodelay(true)
            .map_err(BenchError::io("TCP_NODELAY"))?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // The connection task ends when the sender is dropped or the peer
        // closes; its error then surfaces on the next send.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let authority = HeaderValue::from_str(&target.authority)
            .map_err(|e| BenchError::Usage(format!("host {:?}: {e}", target.authority)))?;
        Ok(Self { sender, authority })
    }

    /// Whether the connection can take another request.
    pub fn is_open(&self) -> bool {
        !self.sender.is_closed()
    }

    /// Sends one request and reads the whole response.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Reply> {
        self.sender.ready().await?;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(body))?;
        let map = request.headers_mut();
        map.reserve(headers.len() + 1);
        map.insert(hyper::header::HOST, self.authority.clone());
        for (name, value) in headers {
            map.append(name, value.clone());
        }
        let response = self.sender.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// Header map builder that refuses invalid values with a clear error.
#[derive(Debug, Default, Clone)]
pub struct Headers(HeaderMap);

impl Headers {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set(mut self, name: &'static str, value: &str) -> Result<Self> {
        let value = HeaderValue::from_str(value)
            .map_err(|e| BenchError::Usage(format!("header {name}: {e}")))?;
        self.0.insert(HeaderName::from_static(name), value);
        Ok(self)
    }

    pub fn bearer(self, token: &str) -> Result<Self> {
        self.set("authorization", &format!("Bearer {token}"))
    }

    pub fn json() -> Result<Self> {
        Self::new().set("content-type", "application/json")
    }

    pub fn into_map(self) -> HeaderMap {
        self.0
    }
}

/// One request on a fresh connection, bounded by [`SETUP_TIMEOUT`] (setup
/// and control calls, not measured load).
pub async fn once(
    method: Method,
    url: &str,
    headers: Headers,
    body: Option<&serde_json::Value>,
) -> Result<Reply> {
    let target = Target::parse(url)?;
    let body = match body {
        Some(value) => Bytes::from(serde_json::to_vec(value)?),
        None => Bytes::new(),
    };
    let call = async {
        let mut connection = Connection::open(&target).await?;
        connection
            .send(method, &target.path, &headers.into_map(), body)
            .await
    };
    tokio::time::timeout(SETUP_TIMEOUT, call)
        .await
        .map_err(|_| BenchError::Http(format!("{url}: no answer within {SETUP_TIMEOUT:?}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_targets_parse() {
        let t = Target::parse("http://127.0.0.1:4891/mcp").unwrap();
        assert_eq!(t.addr, "127.0.0.1:4891".parse().unwrap());
        assert_eq!(t.authority, "127.0.0.1:4891");
        assert_eq!(t.path, "/mcp");
        let t = Target::parse("http://localhost:9").unwrap();
        assert!(t.addr.ip().is_loopback());
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:8080/runs/r/mcp").unwrap();
        assert_eq!(t.addr.port(), 8080);
    }

    #[test]
    fn other_targets_are_refused() {
        for url in [
            "http://10.0.0.1:80/mcp",
            "http://192.168.1.1/",
            "https://127.0.0.1/",
            "ftp://127.0.0.1/",
            "http://user@127.0.0.1/",
            "127.0.0.1:80",
            "http://8.8.8.8:53/",
        ] {
            assert!(Target::parse(url).is_err(), "{url} must be refused");
        }
    }
}
