//! A lazily opened Redis connection, single node or cluster, shared by the
//! token registry and the gateway's rate limiter.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, Pipeline, RedisResult};
use std::sync::RwLock;
use std::time::Duration;
use tokio::runtime::Handle;

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
            let client = ClusterClient::builder(urls.iter().map(String::as_str))
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(2)
                .build()?;
            ClientKind::Cluster(client)
        } else {
            let url = urls.first().map(String::as_str).unwrap_or_default();
            let client = redis::Client::open(url)?;
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
