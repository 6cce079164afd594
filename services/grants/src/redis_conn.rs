//! A lazily opened Redis connection, single node or cluster, shared by the
//! token registry and the gateway's rate limiter; and the one place Redis
//! clients are built ([`redis_client`], [`cluster_client`]), with the
//! process's TLS material for `rediss://` URLs ([`install_redis_tls`]).

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, Pipeline, RedisResult};
use std::sync::{OnceLock, RwLock};
use std::time::Duration;
use tokio::runtime::Handle;

/// TLS material for `rediss://` URLs: the CA the server's certificate
/// must chain to (a private CA; none: the system's roots) and a client
/// certificate for servers that ask for one. Files are read by the
/// composition root; `Debug` shows only which parts are set.
#[derive(Clone, Default)]
pub struct RedisTls {
    /// PEM CA certificate(s).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM client certificate chain and its PEM private key.
    pub client_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.client_pem.is_some())
            .finish()
    }
}

impl RedisTls {
    fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client_pem
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca_pem.clone(),
        }
    }
}

/// Every Redis client of a process talks to the same Redis (registry,
/// its subscription, rate limiter, budgets, used-once record, ended
/// sessions, board events), so its TLS material is set once for all of
/// them, like a TLS library's default provider, instead of through every
/// constructor.
static TLS: OnceLock<RedisTls> = OnceLock::new();

/// Sets the TLS material of every Redis client this process builds from
/// now on. Once: a second call is refused (`Err` gives the material back).
pub fn install_redis_tls(tls: RedisTls) -> Result<(), RedisTls> {
    TLS.set(tls)
}

/// A client for one node. A `rediss://` URL speaks TLS: with the installed
/// material, or else the system's roots and no client certificate.
pub fn redis_client(url: &str) -> RedisResult<redis::Client> {
    match TLS.get() {
        Some(tls) if url.starts_with("rediss://") => {
            redis::Client::build_with_tls(url, tls.certificates())
        }
        _ => redis::Client::open(url),
    }
}

/// A Redis Cluster client builder seeded with `urls`, with the installed
/// TLS material when they are `rediss://`.
pub fn cluster_client(urls: &[String]) -> redis::cluster::ClusterClientBuilder {
    let builder = ClusterClient::builder(urls.iter().map(String::as_str));
    match TLS.get() {
        Some(tls) if urls.iter().all(|url| url.starts_with("rediss://")) => {
            builder.certs(tls.certificates())
        }
        _ => builder,
    }
}

/// An open connection of either kind; cheap to clone (both reconnect by
/// themselves once open).
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Single(_) => "RedisConn::Single",
            Self::Cluster(_) => "RedisConn::Cluster",
        })
    }
}

impl RedisConn {
    pub async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Self::Single(c) => cmd.query_async(c).await,
            Self::Cluster(c) => cmd.query_async(c).await,
        }
    }

    pub async fn query_pipe<T: FromRedisValue>(&mut self, pipe: &Pipeline) -> RedisResult<T> {
        match self {
            Self::Single(c) => pipe.query_async(c).await,
            Self::Cluster(c) => pipe.query_async(c).await,
        }
    }
}

enum ClientKind {
    Single(redis::Client, ConnectionManagerConfig),
    Cluster(ClusterClient),
}

/// Opens the connection on first use (so its owner can start while Redis
/// is down) on the owner's runtime, so its driver tasks do not live on
/// whichever worker happened to make the first request.
pub struct RedisConnector {
    kind: ClientKind,
    handle: Handle,
    current: RwLock<Option<RedisConn>>,
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for RedisConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConnector")
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

impl RedisConnector {
    /// One URL is a single node unless `cluster`; several are cluster
    /// seeds. `timeout` bounds connecting and every response.
    pub fn new(
        urls: &[String],
        cluster: bool,
        timeout: Duration,
        handle: Handle,
    ) -> RedisResult<Self> {
        let kind = if cluster || urls.len() > 1 {
            let client = cluster_client(urls)
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(2)
                .build()?;
            ClientKind::Cluster(client)
        } else {
            let url = urls.first().map(String::as_str).unwrap_or_default();
            let client = redis_client(url)?;
            let manager = ConnectionManagerConfig::new()
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout)
                // Few, short retries: callers time out after one operation
                // timeout anyway, and a failed reconnection is started
                // again by the next call.
                .set_number_of_retries(2)
                .set_max_delay(500);
            ClientKind::Single(client, manager)
        };
        Ok(Self {
            kind,
            handle,
            current: RwLock::new(None),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, ClientKind::Cluster(_))
    }

    /// The open connection, opening it (once, whoever asks) if needed.
    pub async fn get(&self) -> RedisResult<RedisConn> {
        if let Some(conn) = self.cached() {
            return Ok(conn);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(conn) = self.cached() {
            return Ok(conn);
        }
        let opening = match &self.kind {
            ClientKind::Single(client, config) => {
                let (client, config) = (client.clone(), config.clone());
                self.handle.spawn(async move {
                    ConnectionManager::new_with_config(client, config)
                        .await
                        .map(RedisConn::Single)
                })
            }
            ClientKind::Cluster(client) => {
                let client = client.clone();
                self.handle.spawn(async move {
                    client.get_async_connection().await.map(RedisConn::Cluster)
                })
            }
        };
        let conn = opening.await.map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::IoError,
                "connection task failed",
                e.to_string(),
            ))
        })??;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets the open connection: the next [`Self::get`] opens a new one.
    pub fn reset(&self) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn cached(&self) -> Option<RedisConn> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
