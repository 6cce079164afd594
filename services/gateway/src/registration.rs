//! What registering a run hands back: the endpoint, the token (the only
//! time it is shown), a ready-to-use MCP client configuration, and the
//! environment a sandbox needs.

use corkboard_board::Grant;
use corkboard_grants::RunToken;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A registered run.
#[derive(Debug, Clone)]
pub struct Registration {
    pub grant: Grant,
    pub token: RunToken,
    pub mcp_url: String,
}

impl Registration {
    /// Claude Code's `--mcp-config` format (`type: http`, `url`, the bearer
    /// header, `alwaysLoad: true`).
    pub fn mcp_config(&self) -> Value {
        corkboard_grants::mcp_client_config(&self.mcp_url, &self.token)
    }

    /// The environment a sandboxed agent needs: endpoint, token, the client
    /// configuration inline (a sandbox often cannot see the host's files),
    /// and `NO_PROXY` for the gateway host, since sandboxes commonly route
    /// everything through a proxy that cannot reach the host.
    pub fn sandbox_env(&self) -> BTreeMap<&'static str, String> {
        let no_proxy = url_host(&self.mcp_url)
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
            .unwrap_or_default();
        let mut env = BTreeMap::new();
        env.insert("CORKBOARD_MCP_URL", self.mcp_url.clone());
        env.insert("CORKBOARD_TOKEN", self.token.expose().to_owned());
        env.insert("CORKBOARD_MCP_CONFIG_JSON", self.mcp_config().to_string());
        env.insert("NO_PROXY", no_proxy.clone());
        env.insert("no_proxy", no_proxy);
        env
    }

    /// The register API's `201` body.
    pub fn to_json(&self) -> Value {
        json!({
            "run": self.grant.run,
            "tenant": self.grant.tenant,
            "grant_id": self.grant.id,
            "capabilities": self.grant.capabilities,
            "budgets": self.grant.budgets,
            "min_integrity": self.grant.min_integrity,
            "created_at": self.grant.created_at,
            "expires_at": self.grant.expires_at,
            "mcp_url": self.mcp_url,
            "token": self.token.expose(),
            "mcp_config": self.mcp_config(),
            "env": self.sandbox_env(),
        })
    }
}

/// The host of an `http(s)://host[:port]/...` URL (IPv6 keeps its brackets).
pub(crate) fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if authority.starts_with('[') {
        authority
            .split_once(']')
            .map(|(h, _)| &authority[..=h.len()])?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            url_host("http://host.docker.internal:4000/mcp"),
            Some("host.docker.internal")
        );
        assert_eq!(url_host("http://10.0.0.1/runs/r/mcp"), Some("10.0.0.1"));
        assert_eq!(url_host("http://[::1]:80/mcp"), Some("[::1]"));
        assert_eq!(url_host("https://gw.svc"), Some("gw.svc"));
        assert_eq!(url_host("http:///mcp"), None);
    }
}
