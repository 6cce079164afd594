//! The helpers against real `redis-server`, `redis-cli` and `secantusd-rs`
//! processes.

use corkboard_testkit::{
    MongoServer, RedisCluster, RedisServer, Reply, ReservedPort, unique_prefix,
};

fn text(reply: std::io::Result<Reply>) -> String {
    reply
        .expect("command failed")
        .as_text()
        .expect("text reply")
}

#[test]
fn a_server_starts_stops_and_restarts_on_its_port() {
    let mut server = RedisServer::start();
    let port = server.port();
    assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));
    assert_eq!(text(server.command(&["PING"])), "PONG");
    // Persistence is off unless a test asks for it.
    let config = server.command(&["CONFIG", "GET", "save"]).unwrap();
    assert_eq!(
        config,
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"save".to_vec())),
            Reply::Bulk(Some(Vec::new())),
        ]))
    );
    assert_eq!(text(server.command(&["SET", "k", "v"])), "OK");
    assert_eq!(text(server.command(&["SAVE"])), "OK");
    assert_eq!(text(server.command(&["SET", "unsaved", "v"])), "OK");

    server.stop();
    assert!(!server.is_running());
    assert!(
        server.command(&["PING"]).is_err(),
        "still answering after stop"
    );

    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    // What was saved is back, what was not is gone.
    assert_eq!(text(server.command(&["GET", "k"])), "v");
    assert_eq!(
        server.command(&["GET", "unsaved"]).unwrap(),
        Reply::Bulk(None)
    );
}

#[test]
fn a_paused_server_does_not_answer_until_resumed() {
    let server = RedisServer::start();
    server.pause();
    assert!(
        server.command(&["PING"]).is_err(),
        "a paused server answered"
    );
    server.resume();
    assert_eq!(text(server.command(&["PING"])), "PONG");
}

#[test]
fn dropping_a_server_kills_it() {
    let server = RedisServer::start();
    let port = server.port();
    drop(server);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "redis-server still listening after drop"
    );
}

#[test]
fn parallel_servers_get_distinct_ports() {
    let servers: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
    let mut ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 4);
}

#[test]
fn a_cluster_forms_and_comes_back_after_a_full_restart() {
    let mut cluster = RedisCluster::start(3);
    assert_eq!(cluster.urls().len(), 3);
    for node in cluster.nodes() {
        let info = text(node.command(&["CLUSTER", "INFO"]));
        assert!(info.contains("cluster_state:ok"), "{info}");
        assert!(info.contains("cluster_size:3"), "{info}");
    }
    // A key lives on exactly one node: the others redirect.
    let prefix = unique_prefix("cluster");
    let key = format!("{prefix}k");
    let replies: Vec<Reply> = cluster
        .nodes()
        .iter()
        .map(|n| n.command(&["SET", &key, "v"]).unwrap())
        .collect();
    let ok = replies
        .iter()
        .filter(|r| **r == Reply::Simple("OK".into()))
        .count();
    let moved = replies
        .iter()
        .filter(|r| matches!(r, Reply::Error(e) if e.starts_with("MOVED")))
        .count();
    assert_eq!((ok, moved), (1, 2), "{replies:?}");

    cluster.stop_all();
    assert!(
        cluster
            .nodes()
            .iter()
            .all(|n| n.command(&["PING"]).is_err())
    );
    cluster.restart_all();
    for node in cluster.nodes() {
        let info = text(node.command(&["CLUSTER", "INFO"]));
        assert!(info.contains("cluster_state:ok"), "{info}");
    }
}

#[test]
#[should_panic(expected = "a Redis Cluster needs at least 3 masters")]
fn a_cluster_needs_three_masters() {
    let _ = RedisCluster::start(2);
}

/// While a server is down, its port is not handed to another test's
/// server (nor, being outside the ephemeral range, to any outgoing
/// connection): a restart comes back on it, and the clients holding its
/// address reach it and no other. The CI failure this guards against: a
/// restarted MongoDB moved port, and the store under test reached another
/// test's server on the old one.
#[test]
fn a_down_servers_port_is_not_handed_to_another_server() {
    let mut server = MongoServer::start();
    let port = server.port();
    server.kill();
    let others: Vec<ReservedPort> = (0..200).map(|_| ReservedPort::take()).collect();
    assert!(
        others.iter().all(|other| other.port() != port),
        "port {port} was handed out while its server was down"
    );
    let redis = RedisServer::start();
    assert_ne!(redis.port(), port);
    server.restart();
    assert!(server.is_running(), "{}", server.log_tail());
    assert_eq!(server.port(), port);
}
