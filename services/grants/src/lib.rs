//! Grants and the token registry.
//!
//! A run token is a high-entropy opaque secret shown once; everything that is
//! stored or sent between replicas carries only its SHA-256 hash. The
//! [`TokenRegistry`] resolves a hash to its tenant-pinned [`Grant`]; its
//! backends are in-process ([`MemoryRegistry`], the embedded default) and
//! Redis (shared by every replica). [`GrantService`] is the one place that
//! issues and revokes grants: it writes the durable ledger and the registry.
//!
//! In detail: Run tokens (`cbr_` + 256 bits, stored only as SHA-256), the
//! `TokenRegistry` trait and its backends (`LedgerRegistry`: the embedded
//! default, reading through the store's ledger so every local process sees the
//! same grants (servers trust a live grant for 250 ms; in-process revocations
//! clear it at once); `MemoryRegistry`; `RedisRegistry`: shared by replicas,
//! local bounded cache, pub/sub invalidation, fail-closed), `GrantService`
//! (issue/renew/revoke: ledger first, then registry; the maximum lifetime,
//! which a tenant's `GrantPolicy` in the ledger may tighten; the per-tenant
//! live-grant quota), admin JWTs (`AdminVerifier`, `AdminMinter`), the per-run
//! rate limit (`limiter`: `RunKey`, the `RateLimiter` trait, in-process or a
//! Redis token bucket that pods lease a few tokens at a time; here so run
//! gateways and the studio endpoint meter runs alike), and the per-run write
//! budgets' counter (`budget`: the `BudgetCounter` trait, `LedgerBudgets`
//! counting in the store's ledger with one conditional write, `RedisBudgets`
//! with one script per reservation; chosen in `cli`'s compose like the
//! registry), the caller's identity (`credential.rs`: the one credential
//! path, `resolve_bearer`, bearer token → `ResolvedGrant`, refused in MCP's
//! words, used by every transport), and the record of values used once
//! (`used_once`: `UsedOnce`, one conditional write in the store's ledger
//! or one `SET NX PX` in Redis, chosen like the budget counter; the
//! relay's sealed states and relayed answers are single-use through it;
//! `upstream_calls`: `UpstreamCalls`, the marks of grants whose runs
//! called an upstream tool, kept in that record, which set the integrity
//! level of their board writes).

#![forbid(unsafe_code)]

mod budget;
mod cache;
mod credential;
mod error;
mod jwt;
mod ledger_registry;
pub mod limiter;
mod memory;
mod record;
mod redis;
mod redis_conn;
mod redis_sub;
mod registry;
mod run_key;
mod service;
mod token;
mod upstream_calls;
mod used_once;

pub use self::redis::{
    CIRCUIT_OPEN_FOR, DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_TTL, DEFAULT_GRACE, DEFAULT_KEY_PREFIX,
    DEFAULT_OPERATION_TIMEOUT, EXPIRY_SLACK, RedisRegistry, RedisRegistryConfig, RegistryStats,
    SUBSCRIPTION_TRUST, UNKNOWN_CACHE_CAPACITY, UNKNOWN_CACHE_TTL,
};
pub use budget::{BudgetCounter, BudgetUnavailable, LedgerBudgets, RedisBudgets, Reservation};
pub use credential::{ResolvedGrant, bearer_token, reresolve, resolve_bearer};
pub use error::RegistryError;
pub use jwt::{
    AdminMinter, AdminPrincipal, AdminRole, AdminVerifier, AdminVerifierConfig, JwtError,
    SigningKey, VerifiedAdmin, VerifyingKey,
};
pub use ledger_registry::{LEDGER_CACHE_TTL, LedgerRegistry, ReadThroughRegistry};
pub use limiter::{
    LimiterError, LocalRateLimiter, RateLimit, RateLimited, RateLimiter, RedisRateLimiter,
};
pub use memory::MemoryRegistry;
pub use redis_conn::{
    RedisConn, RedisConnector, RedisTls, cluster_client, install_redis_tls, redis_client,
};
pub use redis_sub::{Subscription, SubscriptionHandler, Topic};
pub use registry::TokenRegistry;
pub use run_key::RunKey;
pub use service::{
    DEFAULT_MAX_LIFETIME, GrantRequest, GrantService, IssuedGrant, MAX_TTL, Renewal,
    mcp_client_config,
};
pub use token::{RunToken, TokenHash};
pub use upstream_calls::UpstreamCalls;
pub use used_once::{
    CLOCK_SLACK, DEFAULT_MEMORY_CAPACITY, FirstUse, LedgerUsedOnce, MemoryUsedOnce, RedisUsedOnce,
    UsedOnce, UsedOnceUnavailable,
};
