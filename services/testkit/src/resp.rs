//! A minimal blocking RESP2 client: enough to ping a server, read
//! `INFO`/`CLUSTER INFO` and send a few admin commands from tests, without a
//! Redis client library.

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as text, for simple strings and bulk strings.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Self::Simple(s) => Some(s.clone()),
            Self::Bulk(Some(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        }
    }
}

/// Sends one command to `127.0.0.1:port` on a fresh connection and reads its
/// reply. Every step is bounded by `timeout`, so a hung server fails the
/// test instead of hanging it.
pub(crate) fn command(port: u16, args: &[&str], timeout: Duration) -> io::Result<Reply> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        request.extend_from_slice(arg.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    (&stream).write_all(&request)?;
    read_reply(&mut BufReader::new(&stream))
}

fn read_reply(reader: &mut impl BufRead) -> io::Result<Reply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before a reply",
        ));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP length {rest:?}"),
            )
        })
    };
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => Ok(Reply::Integer(number()?)),
        "$" => {
            let len = number()?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let mut body = vec![0u8; len as usize + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len as usize);
            Ok(Reply::Bulk(Some(body)))
        }
        "*" => {
            let len = number()?;
            if len < 0 {
                return Ok(Reply::Array(None));
            }
            let mut items = Vec::with_capacity(len as usize);
            for _ in 0..len {
                items.push(read_reply(reader)?);
            }
            Ok(Reply::Array(Some(items)))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected RESP reply {line:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let mut input: &[u8] = b"*3\r\n+OK\r\n$5\r\nhe\r\no\r\n*2\r\n:-4\r\n$-1\r\n";
        let reply = read_reply(&mut input).unwrap();
        assert_eq!(
            reply,
            Reply::Array(Some(vec![
                Reply::Simple("OK".into()),
                Reply::Bulk(Some(b"he\r\no".to_vec())),
                Reply::Array(Some(vec![Reply::Integer(-4), Reply::Bulk(None)])),
            ]))
        );
        let mut err: &[u8] = b"-ERR nope\r\n";
        assert_eq!(
            read_reply(&mut err).unwrap(),
            Reply::Error("ERR nope".into())
        );
        let mut truncated: &[u8] = b"$10\r\nabc";
        assert!(read_reply(&mut truncated).is_err());
    }
}
