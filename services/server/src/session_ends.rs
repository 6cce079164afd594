//! Ended MCP sessions shared by every replica: a DELETE on one replica
//! must make the session id unusable on all of them, since any replica
//! accepts any replica's (signed, self-contained) session ids.

use async_trait::async_trait;
use corkboard_grants::RedisConnector;
use corkboard_mcp::{McpError, SessionEnds, SessionNonce};
use std::time::Duration;

/// `SessionEnds` in Redis: one key per ended session, expiring when the
/// session id would have expired anyway.
pub struct RedisSessionEnds {
    redis: RedisConnector,
    prefix: String,
    timeout: Duration,
}

impl std::fmt::Debug for RedisSessionEnds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessionEnds")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisSessionEnds {
    pub fn new(redis: RedisConnector, prefix: &str, timeout: Duration) -> Self {
        Self {
            redis,
            prefix: prefix.to_owned(),
            timeout,
        }
    }

    fn key(&self, nonce: &SessionNonce) -> String {
        format!("{}session-ended:{}", self.prefix, hex::encode(nonce.0))
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, McpError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(McpError::SessionStore(err.category().to_owned())),
            Err(_) => Err(McpError::SessionStore(
                "Redis did not answer in time".into(),
            )),
        }
    }
}

#[async_trait]
impl SessionEnds for RedisSessionEnds {
    async fn end(&self, nonce: SessionNonce, expires_at: u64) -> Result<(), McpError> {
        let mut cmd = redis::cmd("SET");
        // At least a minute, so a session expiring right now is not
        // accepted again through clock skew between replicas.
        cmd.arg(self.key(&nonce))
            .arg(1)
            .arg("EXAT")
            .arg(expires_at.max(1) + 60);
        self.bounded(async { self.redis.get().await?.query::<()>(&cmd).await })
            .await
    }

    async fn is_ended(&self, nonce: &SessionNonce) -> Result<bool, McpError> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key(nonce));
        let found: i64 = self
            .bounded(async { self.redis.get().await?.query(&cmd).await })
            .await?;
        Ok(found > 0)
    }
}
