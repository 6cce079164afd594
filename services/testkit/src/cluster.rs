//! A real Redis Cluster: several `redis-server` masters joined by
//! `redis-cli --cluster create`.

use crate::server::{INSTALL_HINT, RedisServer, info_field, require_program};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Generous bounds: they only keep a broken cluster from hanging a test.
const CREATE_DEADLINE: Duration = Duration::from_secs(60);
const READY_DEADLINE: Duration = Duration::from_secs(60);

/// A cluster of masters without replicas, every node killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` nodes (at least 3, as Redis Cluster requires), joins
    /// them with all 16384 slots assigned, and waits until every node reports
    /// `cluster_state:ok`.
    ///
    /// # Panics
    /// If `redis-server` or `redis-cli` is missing or the cluster does not form.
    pub fn start(masters: usize) -> Self {
        assert!(
            masters >= 3,
            "a Redis Cluster needs at least 3 masters, got {masters}"
        );
        require_program("redis-server", INSTALL_HINT);
        require_program("redis-cli", INSTALL_HINT);
        let nodes: Vec<RedisServer> = (0..masters)
            .map(|_| RedisServer::start_cluster_node())
            .collect();
        let cluster = Self { nodes };
        cluster.create();
        cluster.wait_ready();
        cluster
    }

    /// `redis://127.0.0.1:<port>/` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// Kills every node.
    pub fn stop_all(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
    }

    /// Freezes every node (see [`RedisServer::pause`]).
    pub fn pause_all(&self) {
        for node in &self.nodes {
            node.pause();
        }
    }

    /// Thaws every node.
    pub fn resume_all(&self) {
        for node in &self.nodes {
            node.resume();
        }
    }

    /// Restarts every node on its port and directory (its `nodes.conf`
    /// remembers the cluster) and waits until the cluster is healthy again.
    pub fn restart_all(&mut self) {
        for node in &mut self.nodes {
            node.restart();
        }
        self.wait_ready();
    }

    /// Waits until every node knows every other node and reports
    /// `cluster_state:ok` with all slots assigned.
    ///
    /// # Panics
    /// After a generous deadline, with each node's last `CLUSTER INFO`.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + READY_DEADLINE;
        let expected_nodes = self.nodes.len().to_string();
        loop {
            let infos: Vec<String> = self
                .nodes
                .iter()
                .map(|node| {
                    node.command(&["CLUSTER", "INFO"])
                        .ok()
                        .and_then(|r| r.as_text())
                        .unwrap_or_default()
                })
                .collect();
            let ready = infos.iter().all(|info| {
                info_field(info, "cluster_state") == Some("ok")
                    && info_field(info, "cluster_slots_ok") == Some("16384")
                    && info_field(info, "cluster_known_nodes") == Some(expected_nodes.as_str())
            });
            if ready {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "Redis Cluster not ready within {READY_DEADLINE:?}; CLUSTER INFO per node:\n{}",
                    infos.join("\n---\n")
                );
            }
            sleep(Duration::from_millis(50));
        }
    }

    fn create(&self) {
        let mut command = Command::new("redis-cli");
        command.args(["--cluster", "create"]);
        for node in &self.nodes {
            command.arg(format!("127.0.0.1:{}", node.port()));
        }
        // Output goes to a file, not a pipe: a pipe nobody reads while we
        // poll could fill up and block redis-cli.
        let log_path = self.nodes[0].dir().join("cluster-create.log");
        let log = std::fs::File::create(&log_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
        let log_err = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot reopen {}: {e}", log_path.display()));
        let mut child = command
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redis-cli: {e} ({INSTALL_HINT})"));
        let deadline = Instant::now() + CREATE_DEADLINE;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "`redis-cli --cluster create` did not finish within {CREATE_DEADLINE:?}"
                    );
                }
            }
        };
        if !status.success() {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("`redis-cli --cluster create` failed with {status}:\n{text}");
        }
    }
}
