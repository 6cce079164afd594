//! A tenant's upstream MCP servers as the board records them: a name, a
//! Streamable HTTP URL, the header the credential goes in, and the
//! credential itself only as sealed bytes (encrypted and authenticated by
//! whoever holds the key; this crate never sees it in clear), plus the
//! grant patterns that let a run reach an upstream's tools.

use crate::error::ValidationError;
use crate::ids::TenantId;
use crate::timestamp::Timestamp;
use std::fmt;

/// The longest upstream name. Names prefix the agent-visible tool names
/// (`<name>__<tool>`), which MCP caps at 128 characters.
pub const UPSTREAM_NAME_MAX: usize = 32;
/// The longest upstream URL.
pub const UPSTREAM_URL_MAX: usize = 2048;
/// The most upstreams one tenant may register.
pub const UPSTREAMS_PER_TENANT_MAX: usize = 32;
/// The longest credential header name.
const HEADER_NAME_MAX: usize = 64;

/// An upstream's name: 1-32 of `[a-z0-9-]`, starting with a letter. No
/// underscore, so the `__` that joins it to a tool name is unambiguous.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UpstreamName(String);

impl UpstreamName {
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let ok = !text.is_empty()
            && text.len() <= UPSTREAM_NAME_MAX
            && text.starts_with(|c: char| c.is_ascii_lowercase())
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(ValidationError::new(
                "name",
                format!(
                    "an upstream name is 1-{UPSTREAM_NAME_MAX} of a-z, 0-9 and '-', starting with a letter"
                ),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UpstreamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Streamable HTTP endpoint: `http://` or `https://`, a host, no user
/// info (credentials go in the header, where they are sealed), no spaces.
/// `Debug` and [`Self::redacted`] leave out the query string and fragment,
/// which often carry tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamUrl(String);

impl fmt::Debug for UpstreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UpstreamUrl({:?})", self.redacted())
    }
}

impl UpstreamUrl {
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let bad = |why: &str| ValidationError::new("url", why.to_owned());
        if text.len() > UPSTREAM_URL_MAX {
            return Err(bad("longer than 2048 characters"));
        }
        let rest = text
            .strip_prefix("http://")
            .or_else(|| text.strip_prefix("https://"))
            .ok_or_else(|| bad("expected an http:// or https:// URL"))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() {
            return Err(bad("the URL has no host"));
        }
        if authority.contains('@') {
            return Err(bad(
                "the URL may not carry user info: put the credential in the credential header",
            ));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the URL contains whitespace or control characters"));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What the admin API and logs show: scheme, host, port and path,
    /// never the query string or fragment (as for webhook URLs).
    pub fn redacted(&self) -> String {
        let end = self.0.find(['?', '#']).unwrap_or(self.0.len());
        self.0[..end].to_owned()
    }
}

/// The request header the credential is sent in (`Authorization`,
/// `X-Api-Key`, ...). Headers the transport itself sets are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderName(String);

impl HeaderName {
    /// Headers the gateway writes on every upstream request.
    const RESERVED: [&'static str; 10] = [
        "accept",
        "content-type",
        "content-length",
        "host",
        "connection",
        "transfer-encoding",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    ];

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let token = !text.is_empty()
            && text.len() <= HEADER_NAME_MAX
            && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !token {
            return Err(ValidationError::new(
                "header",
                "a header name is 1-64 of A-Z, a-z, 0-9 and '-'",
            ));
        }
        if Self::RESERVED.contains(&text.to_ascii_lowercase().as_str()) {
            return Err(ValidationError::new(
                "header",
                format!("{text} is set by the gateway itself; name another header"),
            ));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A credential as stored: the sealing key's ciphertext, never the clear
/// value. `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedCredential(Vec<u8>);

impl SealedCredential {
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SealedCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedCredential(<{} bytes>)", self.0.len())
    }
}

/// One upstream MCP server of a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub tenant: TenantId,
    pub name: UpstreamName,
    pub url: UpstreamUrl,
    pub header: HeaderName,
    pub credential: SealedCredential,
    pub created_at: Timestamp,
    /// The admin principal that registered it.
    pub created_by: String,
    /// Whether the tools of its first listing are approved as listed
    /// (trust on first use); otherwise every tool waits for a tenant
    /// admin's approval (see [`crate::ToolPin`]).
    pub trust_first_listing: bool,
}

/// The tools of one upstream a grant allows: `upstream:<name>:<glob>`,
/// where the glob is tool-name characters with `*` matching any run of
/// them (`*`, `issue_*`, `get_sum`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UpstreamPattern {
    upstream: UpstreamName,
    glob: String,
}

impl UpstreamPattern {
    /// The prefix that marks an upstream pattern among capabilities.
    pub const PREFIX: &'static str = "upstream:";

    /// Parses `upstream:<name>:<glob>`.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let bad = || {
            ValidationError::new(
                "capabilities",
                format!(
                    "bad upstream capability {text:?}; expected upstream:<name>:<tool or glob>, e.g. upstream:github:* or upstream:github:issue_read"
                ),
            )
        };
        let rest = text.strip_prefix(Self::PREFIX).ok_or_else(bad)?;
        let (name, glob) = rest.split_once(':').ok_or_else(bad)?;
        let upstream = UpstreamName::parse(name).map_err(|_| bad())?;
        let glob_ok = !glob.is_empty()
            && glob.len() <= 128
            && glob
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'));
        if !glob_ok {
            return Err(bad());
        }
        Ok(Self {
            upstream,
            glob: glob.to_owned(),
        })
    }

    pub fn upstream(&self) -> &UpstreamName {
        &self.upstream
    }

    /// Whether this pattern allows `tool` (the upstream's own name) of
    /// `upstream`.
    pub fn allows(&self, upstream: &UpstreamName, tool: &str) -> bool {
        self.upstream == *upstream && glob_match(self.glob.as_bytes(), tool.as_bytes())
    }
}

impl fmt::Display for UpstreamPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}:{}", Self::PREFIX, self.upstream, self.glob)
    }
}

/// `*` matches any run of bytes; everything else matches itself (grant
/// patterns here, approval policies' tool and argument patterns).
pub(crate) fn glob_match(glob: &[u8], text: &[u8]) -> bool {
    match glob.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_match(rest, &text[skip..])),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_strict() {
        assert!(UpstreamName::parse("github").is_ok());
        assert!(UpstreamName::parse("jira-2").is_ok());
        for bad in ["", "GitHub", "git_hub", "9lives", "a b", &"x".repeat(33)] {
            assert!(UpstreamName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn urls_and_headers_are_checked() {
        assert!(UpstreamUrl::parse("http://127.0.0.1:3001/mcp").is_ok());
        assert!(UpstreamUrl::parse("https://mcp.example.com/").is_ok());
        assert!(UpstreamUrl::parse("ftp://x/").is_err());
        assert!(UpstreamUrl::parse("http:///mcp").is_err());
        let with_token =
            UpstreamUrl::parse("https://mcp.example.com/mcp?api_key=s3cret#x").unwrap();
        assert_eq!(with_token.redacted(), "https://mcp.example.com/mcp");
        assert!(!format!("{with_token:?}").contains("s3cret"));
        assert!(UpstreamUrl::parse("http://user:pw@host/").is_err());
        assert!(HeaderName::parse("X-Api-Key").is_ok());
        assert!(HeaderName::parse("Authorization").is_ok());
        assert!(HeaderName::parse("Mcp-Session-Id").is_err());
        assert!(HeaderName::parse("X Key").is_err());
    }

    #[test]
    fn patterns_match_globs() {
        let github = UpstreamName::parse("github").unwrap();
        let other = UpstreamName::parse("jira").unwrap();
        let all = UpstreamPattern::parse("upstream:github:*").unwrap();
        assert!(all.allows(&github, "issue_read"));
        assert!(!all.allows(&other, "issue_read"));
        let some = UpstreamPattern::parse("upstream:github:issue_*").unwrap();
        assert!(some.allows(&github, "issue_read"));
        assert!(!some.allows(&github, "pr_read"));
        let one = UpstreamPattern::parse("upstream:github:echo").unwrap();
        assert!(one.allows(&github, "echo"));
        assert!(!one.allows(&github, "echo2"));
        assert_eq!(one.to_string(), "upstream:github:echo");
        for bad in [
            "upstream:github",
            "upstream::*",
            "upstream:GitHub:*",
            "upstream:github:a b",
        ] {
            assert!(UpstreamPattern::parse(bad).is_err(), "{bad}");
        }
    }
}
