//! The ceiling: an actix-web server that reads each request body and
//! answers a fixed small JSON-RPC result, with the same server settings as
//! `corkboard` (actix-web's default worker count, `TCP_NODELAY` on).
//!
//! It is what the HTTP stack and the load generator can do on this machine
//! at this moment with no MCP, no registry and no store. The machine is
//! shared and noisy, so absolute figures drift between runs; a target's
//! throughput divided by the ceiling's, measured minutes apart in the same
//! run, is the figure that holds.

use crate::error::{BenchError, Result};
use actix_web::{App, HttpResponse, HttpServer, web};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};

/// The answer: a minimal successful `tools/call` result, so the generator
/// classifies it exactly as it does a real one.
pub const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}"#;

/// [`BODY`], or with `answer_bytes` the same result with its text padded
/// so the body has at least that many bytes: the ceiling for answers as
/// large as a target's (a page of issues), where sending and reading the
/// bytes is part of what no server can avoid.
pub fn body(answer_bytes: Option<usize>) -> web::Bytes {
    match answer_bytes {
        Some(wanted) if wanted > BODY.len() => {
            let text = "x".repeat(wanted - BODY.len() + 2);
            web::Bytes::from(BODY.replace("\"ok\"", &format!("\"{text}\"")))
        }
        _ => web::Bytes::from_static(BODY.as_bytes()),
    }
}

async fn answer(body: web::Bytes, answer: web::Data<web::Bytes>) -> HttpResponse {
    // The body is read (as the MCP endpoint must) and dropped.
    drop(body);
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.get_ref().clone())
}

async fn ready() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"status":"ready"}"#)
}

/// Serves the ceiling (answering [`body`]) on `listen` until the process is stopped. Prints
/// `listening on http://ADDR` on stdout once bound (scenarios read it).
pub fn serve(
    listen: SocketAddr,
    workers: Option<usize>,
    answer_bytes: Option<usize>,
) -> Result<()> {
    let answer_body = web::Data::new(body(answer_bytes));
    let listener = TcpListener::bind(listen).map_err(BenchError::io(format!("bind {listen}")))?;
    let bound = listener
        .local_addr()
        .map_err(BenchError::io("local address"))?;
    actix_web::rt::System::new().block_on(async move {
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(answer_body.clone())
                .route("/mcp", web::post().to(answer))
                .route("/runs/{run}/mcp", web::post().to(answer))
                .route("/readyz", web::get().to(ready))
        })
        .tcp_nodelay(true);
        if let Some(workers) = workers {
            server = server.workers(workers);
        }
        let server = server
            .listen(listener)
            .map_err(BenchError::io("serve on the bound socket"))?
            .shutdown_timeout(1)
            .run();
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{bound}").map_err(BenchError::io("stdout"))?;
        out.flush().map_err(BenchError::io("stdout"))?;
        drop(out);
        server.await.map_err(BenchError::io("ceiling server"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sized_answer_has_the_bytes_asked_for_and_stays_the_same_result() {
        assert_eq!(body(None), BODY.as_bytes());
        assert_eq!(body(Some(10)), BODY.as_bytes(), "smaller than the answer");
        let sized = body(Some(30_000));
        assert_eq!(sized.len(), 30_000);
        let value: serde_json::Value = serde_json::from_slice(&sized).unwrap();
        let small: serde_json::Value = serde_json::from_str(BODY).unwrap();
        assert_eq!(value["result"]["isError"], small["result"]["isError"]);
        assert_eq!(value["result"]["content"][0]["type"], "text");
    }
}
